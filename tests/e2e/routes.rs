//! Messages go where the reader looks, against the real binary, real relays
//! and the scripted agent: a DM answer in the sender's NIP-17 inbox (a relay
//! that serves gift wraps only to their authenticated recipient) with the
//! bot's copy in the bot's own inbox and never answered; a reply to a note
//! also on the mentioner's NIP-65 read relay; the bot's relays for someone
//! who lists nothing; a DM sent to a `--dm-relays` relay that is not a
//! `--relay` heard and answered; a list naming relays on the daemon's own
//! host never makes it connect there, and an inbox refused so as it is
//! connected to gives way to the bot's relay. Each test prints what arrived
//! where.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// The test relays are on loopback over ws://: the daemon may reach them
/// when someone's list names them only with both flags.
const LOOPBACK_RELAYS: &[&str] = &["--allow-insecure-relays", "--allow-private-relays"];

/// A kind 10050 naming `inbox` as the DM inbox (NIP-17).
fn inbox_list(inbox: &str) -> EventBuilder {
    EventBuilder::new(Kind::InboxRelays, "").tag(Tag::custom(TagKind::Relay, [inbox]))
}

/// A kind 10002 reading on `read` and writing on `write` (NIP-65).
fn relay_list(read: &str, write: &str) -> EventBuilder {
    EventBuilder::new(Kind::RelayList, "").tags([
        Tag::parse(["r", read, "read"]).expect("tag"),
        Tag::parse(["r", write, "write"]).expect("tag"),
    ])
}

/// The gift wraps on `relay_url` that `keys` can open and whose rumor, by
/// `sender`, contains `needle`, waiting until there is one. `keys` reads
/// as itself (AUTH on an inbox relay).
async fn wraps_containing(keys: &Keys, relay_url: &str, sender: &PublicKey, needle: &str) -> Vec<Event> {
    let reader = Person::join_as(keys.clone(), relay_url).await;
    let probe = async || {
        let filter = Filter::new().kind(Kind::GiftWrap).pubkey(keys.public_key());
        let wraps = reader
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch");
        let mut found = Vec::new();
        for wrap in wraps {
            if let Ok(gift) = UnwrappedGift::from_gift_wrap(keys, &wrap).await
                && gift.sender == *sender
                && gift.rumor.content.contains(needle)
            {
                found.push(wrap);
            }
        }
        (!found.is_empty()).then_some(found)
    };
    eventually(PATIENCE, probe, || {
        format!("a gift wrap from {sender} containing `{needle}` on {relay_url}")
    })
    .await
}

/// How many DMs from `sender` to `keys` on `relay_url` contain `needle`, now.
async fn dms_now(keys: &Keys, relay_url: &str, sender: &PublicKey, needle: &str) -> usize {
    let reader = Person::join_as(keys.clone(), relay_url).await;
    reader
        .direct_messages_from(sender, 0)
        .await
        .iter()
        .filter(|rumor| rumor.content.contains(needle))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_in_the_senders_auth_inbox_and_the_bots_copy_in_its_own_inbox_is_not_answered() {
    let inbox = AuthRelay::start(AuthFor::DmsToTheirRecipient).await;
    let stage = Scene::builder().flags(LOOPBACK_RELAYS).stage().await;
    stage.owner.publish(inbox_list(&inbox.url())).await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let bot_keys = scene.spec().bot;

    let text = "answer me where my client reads DMs";
    let dm = scene.owner.dm(&scene.bot, text).await;
    let answers = wraps_containing(&scene.owner.keys, &inbox.url(), &scene.bot, text).await;
    // The bot's copy of its answer, in its inbox (its relay): heard, and
    // dropped as its own.
    let copies = wraps_containing(&bot_keys, &scene.relay.url(), &scene.bot, text).await;
    for copy in &copies {
        log.wait(log.start(), Line::dropped(&copy.id, "own_event")).await;
    }
    // Bounded by the copies' drops, which come after the answer: one answer
    // in the inbox, none on the bot's relay (NIP-17: inbox relays only).
    let in_inbox = dms_now(&scene.owner.keys, &inbox.url(), &scene.bot, text).await;
    let on_bots_relay = dms_now(&scene.owner.keys, &scene.relay.url(), &scene.bot, text).await;
    let accepted = log.matching(log.start(), Line::accepted(&dm.id)).len();
    println!(
        "DM to a bot, sender's inbox needs AUTH: accepted {accepted}, answers in the sender's inbox {in_inbox}, on the bot's relay {on_bots_relay}, bot's copies {} (dropped as its own)",
        copies.len()
    );
    assert_eq!(answers.len(), 1);
    assert_eq!(in_inbox, 1, "answered once, in the inbox");
    assert_eq!(on_bots_relay, 0, "{}", log.tail(40));
    assert_eq!(copies.len(), 1, "one copy to self");
    assert_eq!(accepted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_a_note_also_reaches_the_mentioners_read_relay_and_not_their_write_relay() {
    let (read, write) = (TestRelay::start().await, TestRelay::start().await);
    let stage = Scene::builder().flags(LOOPBACK_RELAYS).stage().await;
    stage.owner.publish(relay_list(&read.url(), &write.url())).await;
    let scene = stage.start().await;

    let note = scene
        .owner
        .mention_in_note(&scene.bot, "answer where I read")
        .await;
    let on_bots_relay = scene.owner.replies_from(&scene.bot, &note.id, 1).await;
    let reader = Person::join_as(scene.owner.keys.clone(), &read.url()).await;
    let on_read_relay = reader.replies_from(&scene.bot, &note.id, 1).await;
    // Bounded by the reply on the read relay: the write relay is not in the
    // reply's route at all.
    let writer = Person::join_as(scene.owner.keys.clone(), &write.url()).await;
    let on_write_relay = writer.events_referencing(&scene.bot, &note.id).await;
    println!(
        "note reply: on the bot's relay {}, on the mentioner's read relay {}, on their write relay {}",
        on_bots_relay.len(),
        on_read_relay.len(),
        on_write_relay.len()
    );
    assert_eq!(on_bots_relay.len(), 1);
    assert_eq!(on_read_relay.len(), 1);
    assert_eq!(on_read_relay[0].id, on_bots_relay[0].id, "the same signed event");
    assert!(on_write_relay.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_without_relay_lists_gets_answers_on_the_bots_relays() {
    let scene = Scene::builder().start().await;
    let bot_keys = scene.spec().bot;

    let text = "no lists of mine";
    scene.owner.dm(&scene.bot, text).await;
    let answers = scene.owner.dm_containing(&scene.bot, text).await;
    let copies = wraps_containing(&bot_keys, &scene.relay.url(), &scene.bot, text).await;
    let note = scene.owner.mention_in_note(&scene.bot, "a note, no lists").await;
    let replies = scene.owner.replies_from(&scene.bot, &note.id, 1).await;
    println!(
        "no lists: DM answered on the bot's relay ({}), its copy there too ({}), note answered there ({})",
        answers.id.is_some(),
        copies.len(),
        replies.len()
    );
    assert_eq!(copies.len(), 1);
    assert_eq!(replies.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_sent_to_a_dm_relay_that_is_not_a_relay_of_the_bot_is_heard_and_answered() {
    let inbox = AuthRelay::start(AuthFor::DmsToTheirRecipient).await;
    let scene = Scene::builder()
        .flags(&["--dm-relays", &inbox.url()])
        .start()
        .await;
    let log = &scene.bridge.log;
    let bot_keys = scene.spec().bot;

    // The owner's client sends to the bot's inbox only, as NIP-17 says.
    let sender = Person::join_as(scene.owner.keys.clone(), &inbox.url()).await;
    let text = "sent to your inbox only";
    let dm = sender.dm(&scene.bot, text).await;
    log.wait(log.start(), Line::accepted(&dm.id)).await;
    // The owner lists no inbox: the answer goes to the bot's relays.
    scene.owner.dm_containing(&scene.bot, text).await;
    // Its copy goes to the bot's inbox, where the bot hears and drops it.
    let copies = wraps_containing(&bot_keys, &inbox.url(), &scene.bot, text).await;
    for copy in &copies {
        log.wait(log.start(), Line::dropped(&copy.id, "own_event")).await;
    }
    // A group answer goes to the bot's relays only, never to its inbox.
    let mention = scene.mention("room", "public answer").await;
    let public = scene.owner.replies_from(&scene.bot, &mention.id, 1).await;
    let on_inbox = Person::join(&inbox.url())
        .await
        .events_referencing(&scene.bot, &mention.id)
        .await;
    println!(
        "DM to the bot's --dm-relays inbox: accepted, answered, copies in its inbox {}; group answer on the bot's relay {}, on the inbox {}",
        copies.len(),
        public.len(),
        on_inbox.len()
    );
    assert_eq!(copies.len(), 1);
    assert!(on_inbox.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_inbox_that_is_down_is_delivered_once_it_is_back() {
    let mut inbox = TestRelay::start().await;
    let stage = Scene::builder().flags(LOOPBACK_RELAYS).stage().await;
    stage.owner.publish(inbox_list(&inbox.url())).await;
    inbox.stop();
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let text = "my inbox is down for now";
    let dm = scene.owner.dm(&scene.bot, text).await;
    log.wait(log.start(), Line::accepted(&dm.id)).await;
    log.wait(log.start(), Line::new("no relay accepted a reply; will retry"))
        .await;
    inbox.restart().await;
    wraps_containing(&scene.owner.keys, &inbox.url(), &scene.bot, text).await;
    let retries = log
        .matching(log.start(), Line::new("no relay accepted a reply; will retry"))
        .len();
    let in_inbox = dms_now(&scene.owner.keys, &inbox.url(), &scene.bot, text).await;
    let on_bots_relay = dms_now(&scene.owner.keys, &scene.relay.url(), &scene.bot, text).await;
    println!(
        "inbox down at answer time: retried {retries} time(s); answers in the inbox once back {in_inbox}, on the bot's relay {on_bots_relay}"
    );
    assert_eq!(in_inbox, 1);
    assert_eq!(on_bots_relay, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_relay_that_is_down_is_tried_a_bounded_number_of_times_and_the_reply_is_sent_once() {
    let mut read = TestRelay::start().await;
    let stage = Scene::builder().flags(LOOPBACK_RELAYS).stage().await;
    stage.owner.publish(relay_list(&read.url(), &read.url())).await;
    read.stop();
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let note = scene
        .owner
        .mention_in_note(&scene.bot, "my read relay is down")
        .await;
    let replies = scene.owner.replies_from(&scene.bot, &note.id, 1).await;
    let reply = replies[0].id.to_hex();
    log.wait(
        log.start(),
        Line::new("a reader's relay did not take a reply; given up until the entry is published again")
            .with("event_id", reply.as_str()),
    )
    .await;
    let tries = log
        .matching(
            log.start(),
            Line::new("a reader's relay did not take a reply; trying again").with("event_id", reply.as_str()),
        )
        .len()
        + 1;
    let published = log
        .matching(
            log.start(),
            Line::new("published").with("event_id", reply.as_str()),
        )
        .len();
    println!(
        "read relay down: reply on the bot's relay {}, marked sent {published} time(s), read relay tried {tries} time(s) then given up",
        replies.len()
    );
    assert_eq!(replies.len(), 1);
    assert_eq!(published, 1);
    assert_eq!(tries, 3, "EXTRA_ATTEMPTS");
}

/// Clients publish their users' lists to directory relays (indexers) and
/// look a key's lists up there: with `--directory-relays` the bot finds a
/// sender's inbox listed only there, and its own profile and lists are
/// published there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_on_a_directory_relay_are_found_and_the_bots_identity_is_published_there() {
    let (directory, inbox) = (TestRelay::start().await, TestRelay::start().await);
    let stage = Scene::builder()
        .flags(&["--directory-relays", &directory.url()])
        .flags(LOOPBACK_RELAYS)
        .stage()
        .await;
    Person::join_as(stage.owner.keys.clone(), &directory.url())
        .await
        .publish(inbox_list(&inbox.url()))
        .await;
    let scene = stage.start().await;

    let text = "my inbox is listed on the directory only";
    scene.owner.dm(&scene.bot, text).await;
    let in_inbox = wraps_containing(&scene.owner.keys, &inbox.url(), &scene.bot, text).await;
    let on_bots_relay = dms_now(&scene.owner.keys, &scene.relay.url(), &scene.bot, text).await;

    let reader = Person::join(&directory.url()).await;
    let identity = [Kind::Metadata, Kind::RelayList, Kind::InboxRelays];
    let published = eventually(
        PATIENCE,
        async || {
            let filter = Filter::new().author(scene.bot).kinds(identity);
            let events = reader
                .client
                .fetch_events(filter, Duration::from_secs(5))
                .await
                .expect("fetch");
            (events.len() == identity.len()).then_some(events)
        },
        || "the bot's profile, relay list and DM inbox list on the directory relay".to_owned(),
    )
    .await;
    println!(
        "directory relay: answer in the inbox listed there {}, on the bot's relay {on_bots_relay}; the bot's identity events there: {:?}",
        in_inbox.len(),
        published
            .iter()
            .map(|event| event.kind.as_u16())
            .collect::<Vec<_>>()
    );
    assert_eq!(in_inbox.len(), 1);
    assert_eq!(
        on_bots_relay, 0,
        "the inbox is the destination, not the bot's relay"
    );
}

/// Someone's relay list is theirs to write: one naming relays on the
/// daemon's own host (a loopback address, and a host name that resolves to
/// one) must not make the daemon connect there, nor answer AUTH there.
/// `--allow-insecure-relays` lets ws:// through, so that the address rule
/// alone refuses them; the reply still reaches the bot's relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_list_naming_the_daemons_own_host_is_never_connected_to_and_the_reply_goes_elsewhere() {
    let relay_on_host = TestRelay::start().await;
    // A port that counts the connections it is offered.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let by_name = format!("ws://localhost:{}", listener.local_addr().expect("port").port());
    let offered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&offered);
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let stage = Scene::builder().flags(&["--allow-insecure-relays"]).stage().await;
    let by_address = relay_on_host.url();
    stage
        .owner
        .publish(EventBuilder::new(Kind::RelayList, "").tags([
            Tag::parse(["r", &by_address, "read"]).expect("tag"),
            Tag::parse(["r", &by_name]).expect("tag"),
        ]))
        .await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let note = scene
        .owner
        .mention_in_note(&scene.bot, "my relays are on your host")
        .await;
    let replies = scene.owner.replies_from(&scene.bot, &note.id, 1).await;
    let refused = Line::new("refused to connect to a relay another's list names");
    let by_address_line = log
        .wait(log.start(), refused.clone().with("relay", by_address.as_str()))
        .await;
    let by_name_line = log
        .wait(log.start(), refused.with("relay", by_name.as_str()))
        .await;
    // Bounded by the refusals: nothing reached either.
    let connections = offered.load(std::sync::atomic::Ordering::SeqCst);
    let on_relay_on_host = Person::join(&by_address)
        .await
        .events_referencing(&scene.bot, &note.id)
        .await;
    println!(
        "relay list naming {by_address} and {by_name}: reply on the bot's relay {}; refused: {} ({}), {} ({}); connections offered to the named port {connections}, events on the relay on the host {}",
        replies.len(),
        by_address,
        by_address_line["reason"],
        by_name,
        by_name_line["reason"],
        on_relay_on_host.len()
    );
    assert_eq!(replies.len(), 1);
    assert_eq!(connections, 0);
    assert!(on_relay_on_host.is_empty());
}

/// A DM inbox named by a host name (`localhost`) is refused only as it is
/// connected to, its name resolving to the daemon's own host. That refusal
/// makes it unusable for the person, as a loopback address written in the
/// URL is: the answer goes to the bot's relay (where the person wrote
/// from), once, rather than being retried at the refused inbox for ever,
/// and the next DM goes there at once. The refusal is logged once for
/// both. `--allow-insecure-relays` lets ws:// through, so that the address
/// rule alone stands in the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_inbox_whose_name_resolves_to_the_daemons_host_is_given_up_for_the_bots_relay() {
    let inbox = TestRelay::start().await;
    let by_name = format!("ws://localhost:{}", inbox.port);
    let stage = Scene::builder().flags(&["--allow-insecure-relays"]).stage().await;
    stage.owner.publish(inbox_list(&by_name)).await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let texts = ["first, to an inbox on your host", "second, to the same inbox"];
    for text in texts {
        scene.owner.dm(&scene.bot, text).await;
        scene.owner.dm_containing(&scene.bot, text).await;
    }
    let refusals = log.matching(
        log.start(),
        Line::new("refused to connect to a relay another's list names").with("relay", by_name.as_str()),
    );
    let retries = log
        .matching(log.start(), Line::new("no relay accepted a reply; will retry"))
        .len();
    let mut on_bots_relay = Vec::new();
    for text in texts {
        on_bots_relay.push(dms_now(&scene.owner.keys, &scene.relay.url(), &scene.bot, text).await);
    }
    // Bounded by both answers: nothing reached the inbox on the host.
    let in_inbox = dms_now(&scene.owner.keys, &inbox.url(), &scene.bot, "").await;
    println!(
        "DM inbox {by_name}: answers on the bot's relay {on_bots_relay:?}, in the inbox {in_inbox}; refusal logged {} time(s) ({}); attempts retried {retries}",
        refusals.len(),
        refusals
            .first()
            .map_or_else(String::new, |line| line["reason"].to_string())
    );
    assert_eq!(on_bots_relay, [1, 1], "each answered once, on the bot's relay");
    assert_eq!(in_inbox, 0);
    assert_eq!(refusals.len(), 1, "once per relay, not per event");
    assert!(retries <= 1, "only the attempt that found the refusal: {retries}");
}
