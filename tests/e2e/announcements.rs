//! What the bot says of itself and of its place in groups, beyond its
//! profile: NIP-29 `previous` tags on its group events, checked by a relay
//! that requires them; its groups list (NIP-51 kind 10009), republished
//! when its groups change; and its NIP-89 handler information (kind 31990),
//! whose `k` tags are the kinds its relay links subscribe to.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// The log line of a start that published some of the identity.
const PUBLISHING: &str = "the bot's identity changed; publishing it";
const GROUPS_LIST: Kind = Kind::SimpleGroups;
const HANDLER_INFORMATION: Kind = Kind::Custom(31990);

/// The `previous` prefixes of `event`.
fn previous_of(event: &Event) -> Vec<String> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind().as_str() == "previous")
        .filter_map(|tag| tag.content())
        .map(str::to_owned)
        .collect()
}

/// A plain chat message (no mention) in group `group`.
fn chat(group: &str, text: &str) -> EventBuilder {
    EventBuilder::new(Kind::Custom(9), text).tag(Tag::custom(TagKind::h(), [group.to_owned()]))
}

/// A group relay as NIP-29 describes one that enforces timeline
/// references: an event of `bot` in a group (other than a join or leave
/// request) must name at least one earlier event of that group by its
/// first 8 hex characters, and only events the relay holds in that group;
/// otherwise it is refused `invalid:`. Returns the ids it holds per group.
fn require_previous(relay: &PickyRelay, bot: PublicKey) -> Arc<Mutex<HashMap<String, Vec<EventId>>>> {
    let held: Arc<Mutex<HashMap<String, Vec<EventId>>>> = Arc::default();
    let timeline = Arc::clone(&held);
    relay.answer_with(move |event| {
        let Some(group) = channel_of(event).map(str::to_owned) else {
            return Answer::Accept;
        };
        let mut timeline = timeline.lock().unwrap();
        let known = timeline.entry(group).or_default();
        let request = [9021, 9022].contains(&event.kind.as_u16());
        if event.pubkey == bot && !request {
            let previous = previous_of(event);
            if previous.is_empty() {
                return Answer::Refuse("invalid: previous tags are required in this group".into());
            }
            let unknown = previous.iter().any(|prefix| {
                prefix.len() != 8 || !known.iter().any(|id| id.to_hex().starts_with(prefix.as_str()))
            });
            if unknown {
                return Answer::Refuse("invalid: previous names an event this group does not hold".into());
            }
        }
        if !known.contains(&event.id) {
            known.push(event.id);
        }
        Answer::Accept
    });
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_events_name_earlier_events_of_their_own_group_and_a_relay_requiring_them_takes_them() {
    let mut stage = Scene::builder().stage_on(PickyRelay::start().await).await;
    let held = require_previous(&stage.relay, stage.bot);
    let relay_url = stage.relay.url();
    for group in ["pizza", "pasta"] {
        stage
            .spec
            .flags
            .extend(["--group".to_owned(), format!("{relay_url}'{group}")]);
    }
    let scene = stage.start().await;

    // Chat the bot hears through its served groups' subscription, then a
    // mention: the answer may name the chat and the mention, never the
    // other group's chat.
    let elsewhere = scene.owner.publish(chat("pasta", "over in pasta")).await;
    let earlier = scene.owner.publish(chat("pizza", "first slice")).await;
    let mention = scene.mention("pizza", "what is on the menu?").await;
    let answer = &scene.owner.replies_from(&scene.bot, &mention.id, 1).await[0];

    let previous = previous_of(answer);
    let named = |event: &Event| previous.contains(&event.id.to_hex()[..8].to_owned());
    println!(
        "answer in pizza: {} previous tag(s) {previous:?}; names the chat {}, the mention {}, pasta's chat {}",
        previous.len(),
        named(&earlier),
        named(&mention),
        named(&elsewhere)
    );
    assert!(named(&earlier) && named(&mention), "{previous:?}");
    assert!(!named(&elsewhere), "{previous:?}");
    assert!(
        previous
            .iter()
            .all(|prefix| prefix.len() == 8 && prefix.chars().all(|c| c.is_ascii_hexdigit())),
        "{previous:?}"
    );

    // NIP-29: the bot's own events are not its references; a second
    // answer names both mentions, not the first answer (the timeline skips
    // the bot's events, see its unit test, and the SDK does not hand a
    // client its own events back anyway).
    let again = scene.mention("pizza", "and for dessert?").await;
    let second = &scene.owner.replies_from(&scene.bot, &again.id, 1).await[0];
    let previous = previous_of(second);
    let named = |event: &Event| previous.contains(&event.id.to_hex()[..8].to_owned());
    println!(
        "second answer: {} previous tag(s); names the second mention {}, the first answer {}",
        previous.len(),
        named(&again),
        named(answer)
    );
    assert!(named(&again) && named(&mention), "{previous:?}");
    assert!(!named(answer), "{previous:?}");

    // Every group event of the bot the relay was offered passed its check
    // (the answer, the reactions), and none carried another group's ids.
    let answered = Filter::new()
        .author(scene.bot)
        .kind(Kind::Reaction)
        .event(again.id);
    let probe = async || {
        let reactions = scene
            .owner
            .client
            .fetch_events(answered.clone(), Duration::from_secs(5))
            .await
            .ok()?;
        reactions
            .into_iter()
            .any(|reaction| reaction.content == "✅")
            .then_some(())
    };
    eventually(PATIENCE, probe, || {
        "the bot's ✅ reaction to the mention".to_owned()
    })
    .await;
    let offered = scene.relay.received(|event| {
        event.pubkey == scene.bot && channel_of(event).is_some() && event.kind != Kind::from(9021)
    });
    let pizza: BTreeSet<String> = held.lock().unwrap()["pizza"]
        .iter()
        .map(|id| id.to_hex()[..8].to_owned())
        .collect();
    let reactions = offered
        .iter()
        .filter(|event| event.kind == Kind::Reaction)
        .count();
    println!(
        "the bot's group events offered to the relay: {} ({reactions} reactions), each naming only pizza's events",
        offered.len()
    );
    assert!(reactions >= 4, "{offered:?}");
    for event in &offered {
        let previous = previous_of(event);
        assert!(
            !previous.is_empty() && previous.iter().all(|prefix| pizza.contains(prefix)),
            "{event:?}"
        );
    }
}

/// The `(id, relay)` of each `group` tag of a groups list.
fn groups_in(list: &Event) -> BTreeSet<(String, String)> {
    list.tags
        .iter()
        .filter(|tag| tag.kind().as_str() == "group")
        .map(|tag| {
            let cells = tag.as_slice();
            (cells[1].clone(), cells[2].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_list_names_the_bots_groups_and_is_republished_when_it_joins_another() {
    let mut stage = Scene::builder().stage().await;
    let relay_url = stage.relay.url();
    let relay = RelayUrl::parse(&relay_url)
        .unwrap()
        .as_str_without_trailing_slash()
        .to_owned();
    let pizza = format!("{relay_url}'pizza");
    stage.spec.flags.extend(["--group".to_owned(), pizza.clone()]);
    let mut scene = stage.start().await;
    let first = scene.owner.newest_where(&scene.bot, GROUPS_LIST, |_| true).await;
    let r_tags: Vec<&str> = first
        .tags
        .iter()
        .filter(|tag| tag.kind().as_str() == "r")
        .filter_map(|tag| tag.content())
        .collect();
    println!("first start: groups {:?}, r {r_tags:?}", groups_in(&first));
    assert_eq!(
        groups_in(&first),
        BTreeSet::from([("pizza".to_owned(), relay.clone())])
    );
    assert_eq!(r_tags, [relay.as_str()]);

    // Joining another group (the configuration names it at the next
    // start) replaces the list.
    let status = scene.bridge.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}");
    let spec = scene.spec().flags(&["--group", &format!("{relay_url}'pasta")]);
    scene.restart(spec).await;
    let both = BTreeSet::from([
        ("pizza".to_owned(), relay.clone()),
        ("pasta".to_owned(), relay.clone()),
    ]);
    let second = scene
        .owner
        .newest_where(&scene.bot, GROUPS_LIST, |list| groups_in(list) == both)
        .await;
    let log = &scene.bridge.log;
    let publishing = log.wait(log.start(), Line::new(PUBLISHING)).await;
    println!(
        "after joining pasta: groups {:?}; published kinds {}",
        groups_in(&second),
        publishing["kinds"]
    );
    assert!(second.created_at > first.created_at);
    assert_eq!(publishing["kinds"], "[10009]", "{publishing}");
}

/// The kinds of the bot's `k` tags.
fn k_tags(handler: &Event) -> BTreeSet<u16> {
    handler
        .tags
        .iter()
        .filter(|tag| tag.kind() == TagKind::k())
        .filter_map(|tag| tag.content()?.parse().ok())
        .collect()
}

/// The kinds of the daemon's intake subscriptions as the relay was asked
/// for them (its mentions, its DMs, any group chat: the queries that name
/// no author, id or `d` tag, unlike its reads of its own events and of
/// group metadata); a gift wrap (1059) as the DM it carries (14).
fn subscribed_kinds(filters: &Mutex<Vec<Filter>>) -> BTreeSet<u16> {
    let d = SingleLetterTag::lowercase(Alphabet::D);
    filters
        .lock()
        .unwrap()
        .iter()
        .filter(|filter| filter.authors.is_none() && filter.ids.is_none())
        .filter(|filter| !filter.generic_tags.contains_key(&d))
        .flat_map(|filter| filter.kinds.iter().flatten().map(Kind::as_u16))
        .map(|kind| if kind == 1059 { 14 } else { kind })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_information_names_the_kinds_the_intake_subscribes_to() {
    let stage = Scene::builder().stage_on(PickyRelay::start().await).await;
    let filters: Arc<Mutex<Vec<Filter>>> = Arc::default();
    let seen = Arc::clone(&filters);
    stage.relay.hold_queries(move |filter| {
        seen.lock().unwrap().push(filter.clone());
        false
    });
    let mut scene = stage.start().await;
    let handler = scene
        .owner
        .newest_where(&scene.bot, HANDLER_INFORMATION, |_| true)
        .await;
    let subscribed = subscribed_kinds(&filters);
    println!(
        "default kinds: k tags {:?}, subscribed {subscribed:?}, d {:?}",
        k_tags(&handler),
        handler.tags.identifier()
    );
    assert_eq!(k_tags(&handler), subscribed);
    // At least notes, group chat and DMs (kinds added to the defaults
    // later are announced as they are subscribed to).
    assert!(
        subscribed.is_superset(&BTreeSet::from([1, 9, 14])),
        "{subscribed:?}"
    );
    assert_eq!(handler.tags.identifier(), Some("acp-bridge"));

    // Listening to fewer kinds changes what is announced, at the same
    // address.
    let status = scene.bridge.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}");
    filters.lock().unwrap().clear();
    scene.restart(scene.spec().flags(&["--kinds", "9,1"])).await;
    let narrowed = scene
        .owner
        .newest_where(&scene.bot, HANDLER_INFORMATION, |event| event.id != handler.id)
        .await;
    let subscribed = subscribed_kinds(&filters);
    println!(
        "--kinds 9,1: k tags {:?}, subscribed {subscribed:?}",
        k_tags(&narrowed)
    );
    assert_eq!(k_tags(&narrowed), subscribed);
    assert_eq!(subscribed, BTreeSet::from([1, 9]));
    assert_eq!(narrowed.tags.identifier(), Some("acp-bridge"));
}
