//! What the bot says of its place in groups: NIP-29 `previous` tags on its
//! group events, checked by a relay that requires them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

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

    // Every group event of the bot the relay was offered passed its check
    // (the answer, the reactions), and none carried another group's ids.
    let answered = Filter::new()
        .author(scene.bot)
        .kind(Kind::Reaction)
        .event(mention.id);
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
    assert!(reactions >= 2, "{offered:?}");
    for event in &offered {
        let previous = previous_of(event);
        assert!(
            !previous.is_empty() && previous.iter().all(|prefix| pizza.contains(prefix)),
            "{event:?}"
        );
    }
}
