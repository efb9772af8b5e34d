//! Who is heard, end to end: owner, strangers, allowlist, sibling bots with
//! owner attestations (and forgeries of them), DMs.

use acp_bridge::Attestation;
use nostr_sdk::prelude::*;

use crate::support::*;

/// Publishes `builder` as `person` and expects one threaded answer.
async fn expect_answer(person: &Person, bot: &PublicKey, event: &Event) -> Event {
    person.replies_from(bot, &event.id, 1).await.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stranger_is_ignored_in_owner_only_mode_and_answered_in_anyone_mode() {
    let mut scene = Scene::builder().start().await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let ignored = stranger
        .mention_in_group(&bot, "room", "hi from a stranger")
        .await;
    log.wait(log.start(), Line::dropped(&ignored.id, "not_heard"))
        .await;
    let heard = scene.mention("room", "hi from the owner").await;
    expect_answer(owner, &bot, &heard).await;
    assert!(
        stranger.events_referencing(&bot, &ignored.id).await.is_empty(),
        "no reply, no reaction"
    );
    scene.bridge.kill_hard();

    // Another bot on the same relay, for anyone.
    let anyone =
        BridgeSpec::new(&scene.relay.url(), scene.owner.public_key()).flags(&["--respond-to", "anyone"]);
    scene.restart(anyone).await;
    let bot = scene.bot;
    let welcome = stranger.mention_in_note(&bot, "hi again").await;
    let reply = expect_answer(&stranger, &bot, &welcome).await;
    assert_eq!(reply.kind, Kind::TextNote);
    assert!(p_tags(&reply, &stranger.public_key()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlist_mode_hears_the_list_and_the_owner_only() {
    let friend = Keys::generate();
    let friend_npub = friend.public_key().to_bech32().expect("npub");
    let scene = Scene::builder()
        .flags(&["--respond-to", "allowlist", "--allowlist", &friend_npub])
        .start()
        .await;
    let friend = Person::join_as(friend, &scene.relay.url()).await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let refused = stranger.mention_in_group(&bot, "room", "let me in").await;
    log.wait(log.start(), Line::dropped(&refused.id, "not_heard"))
        .await;
    let from_friend = friend.mention_in_group(&bot, "room", "hello from a friend").await;
    expect_answer(&friend, &bot, &from_friend).await;
    let from_owner = scene.mention("room", "hello from the owner").await;
    expect_answer(owner, &bot, &from_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_with_a_valid_attestation_is_heard_and_forgeries_are_not() {
    let scene = Scene::builder().start().await;
    let sibling = scene.join().await;
    let (owner_keys, bot, log) = (&scene.owner.keys, scene.bot, &scene.bridge.log);
    let now = Timestamp::now().as_secs();

    let mention_with = |attestation: Attestation, text: &'static str| {
        group_message(&bot, "bots", text, &[attestation.to_tag()])
    };
    let impostor_owner = Keys::generate();
    let other_bot = Keys::generate().public_key();
    let forgeries = [
        (
            "signed by someone else",
            Attestation::sign(&impostor_owner, &sibling.public_key(), "").expect("sign"),
        ),
        (
            "minted for another bot",
            Attestation::sign(owner_keys, &other_bot, "").expect("sign"),
        ),
        (
            "expired",
            Attestation::sign(
                owner_keys,
                &sibling.public_key(),
                &format!("created_at<{}", now - 60),
            )
            .expect("sign"),
        ),
        (
            "self-attested",
            Attestation::sign(&sibling.keys, &sibling.public_key(), "").expect("sign"),
        ),
    ];
    for (what, attestation) in forgeries {
        let event = sibling.publish(mention_with(attestation, "forged")).await;
        log.wait(log.start(), Line::dropped(&event.id, "not_heard")).await;
        assert!(
            sibling.events_referencing(&bot, &event.id).await.is_empty(),
            "{what}: must not be answered"
        );
    }

    let valid = Attestation::sign(
        owner_keys,
        &sibling.public_key(),
        &format!("kind=9&created_at>{}", now - 60),
    )
    .expect("sign");
    let event = sibling.publish(mention_with(valid, "hello sibling")).await;
    let reply = expect_answer(&sibling, &bot, &event).await;
    assert!(
        reply.content.contains("a sibling bot of your owner"),
        "{}",
        reply.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_attested_on_its_profile_is_heard() {
    let stage = Scene::builder().stage().await;
    let sibling = stage.join().await;
    let attestation = Attestation::sign(&stage.owner.keys, &sibling.public_key(), "kind=9").expect("sign");
    sibling
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    let scene = stage.start().await;
    let bot = scene.bot;
    let event = sibling
        .mention_in_group(&bot, "bots", "profile says I am family")
        .await;
    expect_answer(&sibling, &bot, &event).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_spending_the_lookup_budget_delay_a_profile_sibling_but_never_drop_it() {
    let stage = Scene::builder().stage().await;
    let sibling = stage.join().await;
    let attestation = Attestation::sign(&stage.owner.keys, &sibling.public_key(), "kind=9").expect("sign");
    sibling
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    let scene = stage.start().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();

    // Strangers posting from fresh keys: each needs a profile lookup, and
    // they outnumber the lookup budget's burst (30).
    let strangers: Vec<Event> = (0..32)
        .map(|n| {
            group_message(&bot, "room", &format!("fresh key {n}"), &[])
                .sign_with_keys(&Keys::generate())
                .expect("sign")
        })
        .collect();
    for stranger in &strangers {
        scene.owner.send(stranger).await;
    }
    log.wait(mark, Line::new("profile lookup budget spent; the lookup waits"))
        .await;
    let mentions = [
        sibling
            .mention_in_group(&bot, "bots", "first, behind the strangers")
            .await,
        sibling.mention_in_group(&bot, "bots", "second").await,
        sibling.mention_in_group(&bot, "bots", "third").await,
    ];
    let result = scene
        .tally("profile sibling behind a spent lookup budget", &mentions)
        .await;
    assert_exactly_once(result);
    let sibling_hex = sibling.public_key().to_hex();
    let lookups = log.matching(
        mark,
        Line::new("profile looked up").with("author", sibling_hex.as_str()),
    );
    assert_eq!(
        lookups.len(),
        1,
        "one lookup for the sibling's three mentions: {lookups:?}"
    );
    for stranger in &strangers {
        log.wait(mark, Line::dropped(&stranger.id, "not_heard")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sibling_cannot_backdate_a_live_message_but_its_stored_ones_count() {
    let stage = Scene::builder().stage().await;
    let sibling = stage.join().await;
    let now = Timestamp::now().as_secs();
    // Valid for messages written before a minute ago.
    let expiry = now - 60;
    let attestation = Attestation::sign(
        &stage.owner.keys,
        &sibling.public_key(),
        &format!("created_at<{expiry}"),
    )
    .expect("sign")
    .to_tag();
    let bot = stage.bot;
    let dated = |text: &str, at: u64| {
        group_message(&bot, "bots", text, std::slice::from_ref(&attestation))
            .custom_created_at(Timestamp::from_secs(at))
    };
    // Written while the attestation held, waiting on the relay while the
    // daemon was down: the relay's replay is judged by its own date.
    let stored = sibling.publish(dated("written in time", expiry - 30)).await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    sibling.replies_from(&scene.bot, &stored.id, 1).await;

    // Live, after the relay delivered up to now: a date before the expiry
    // is a lie, and the attestation no longer covers the message.
    let backdated = sibling.publish(dated("backdated", expiry - 10)).await;
    log.wait(log.start(), Line::dropped(&backdated.id, "not_heard"))
        .await;
    assert!(
        sibling
            .events_referencing(&scene.bot, &backdated.id)
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_message_round_trip_and_strangers_dms_are_refused_even_in_anyone_mode() {
    let scene = Scene::builder().flags(&["--respond-to", "anyone"]).start().await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let wrap = stranger.dm(&bot, "psst, stranger here").await;
    log.wait(log.start(), Line::dropped(&wrap.id, "dm_from_stranger"))
        .await;
    owner.dm(&bot, "a private question").await;
    let replies = owner.direct_messages_from(&bot, 1).await;
    assert!(
        replies[0].content.contains("> a private question"),
        "{}",
        replies[0].content
    );
    assert!(
        replies[0].content.contains("private conversation"),
        "{}",
        replies[0].content
    );
    let none = stranger.client.fetch_events(
        Filter::new().kind(Kind::GiftWrap).pubkey(stranger.public_key()),
        std::time::Duration::from_secs(2),
    );
    assert!(
        none.await.expect("fetch").is_empty(),
        "no DM back to the stranger"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_author_is_rate_limited_and_told_once() {
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "anyone",
            "--rate-limit-burst",
            "2",
            "--rate-limit-refill",
            "1h",
        ])
        .start()
        .await;
    let chatty = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mut mentions = Vec::new();
    for n in 0..5 {
        mentions.push(
            chatty
                .mention_in_group(&bot, &format!("room-{n}"), "hello?")
                .await,
        );
    }
    log.wait(log.start(), Line::dropped(&mentions[4].id, "rate_limited"))
        .await;
    owner.replies_from(&bot, &mentions[0].id, 1).await;
    owner.replies_from(&bot, &mentions[1].id, 1).await;
    let notice = owner.replies_from(&bot, &mentions[2].id, 1).await.remove(0);
    assert!(
        notice.content.contains("faster than I can take"),
        "{}",
        notice.content
    );
    log.wait(log.start(), Line::dropped(&mentions[3].id, "rate_limited"))
        .await;
    assert!(
        owner.events_referencing(&bot, &mentions[3].id).await.is_empty(),
        "told once, not twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_mentions_from_a_stranger_earn_notices_only_within_the_rate_limit() {
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "anyone",
            "--max-content-bytes",
            "16",
            "--rate-limit-burst",
            "2",
            "--rate-limit-refill",
            "1h",
        ])
        .start()
        .await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mut mentions = Vec::new();
    for n in 0..5 {
        let text = format!("far too long a message, number {n}");
        mentions.push(stranger.mention_in_group(&bot, "room", &text).await);
    }
    for late in &mentions[3..] {
        log.wait(log.start(), Line::dropped(&late.id, "rate_limited"))
            .await;
    }
    for early in &mentions[..2] {
        let notice = owner.replies_from(&bot, &early.id, 1).await.remove(0);
        assert!(notice.content.contains("too long"), "{}", notice.content);
    }
    let told = owner.replies_from(&bot, &mentions[2].id, 1).await.remove(0);
    assert!(
        told.content.contains("faster than I can take"),
        "{}",
        told.content
    );
    for late in &mentions[3..] {
        assert!(
            owner.events_referencing(&bot, &late.id).await.is_empty(),
            "no notice past the limit"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_queued_new_mentions_get_a_notice_and_the_owner_is_still_heard() {
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "anyone",
            "--max-queued",
            "2",
            "--multiple-event-handling",
            "queue",
        ])
        .agent(&["--rounds", "20", "--round-delay-ms", "100"])
        .start()
        .await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mut mentions = Vec::new();
    for n in 0..4 {
        mentions.push(stranger.mention_in_group(&bot, "room", &format!("job {n}")).await);
    }
    for queued in &mentions[..2] {
        log.wait(log.start(), Line::accepted(&queued.id)).await;
    }
    for overflow in &mentions[2..] {
        let notice = stranger.replies_from(&bot, &overflow.id, 1).await.remove(0);
        assert!(notice.content.contains("Too many messages"), "{}", notice.content);
    }
    let from_owner = scene.mention("other-room", "the owner is exempt").await;
    log.wait(log.start(), Line::accepted(&from_owner.id)).await;
    mentions.push(from_owner);
    let result = scene
        .tally(
            "max-queued 2: two queued, two noticed, the owner heard",
            &mentions,
        )
        .await;
    assert_exactly_once(result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sibling_reply_chain_is_cut_at_the_hop_bound() {
    let scene = Scene::builder().flags(&["--max-bot-hops", "1"]).start().await;
    let sibling = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let attestation = Attestation::sign(&scene.owner.keys, &sibling.public_key(), "")
        .expect("sign")
        .to_tag();

    let opener = sibling
        .publish(group_message(
            &bot,
            "bots",
            "ping",
            std::slice::from_ref(&attestation),
        ))
        .await;
    let reply = sibling.replies_from(&bot, &opener.id, 1).await.remove(0);
    // The sibling answers our reply: one hop deep, at the bound.
    let thread = [
        Tag::parse(["e", &opener.id.to_hex(), "", "root"]).expect("tag"),
        Tag::parse(["e", &reply.id.to_hex(), "", "reply"]).expect("tag"),
        attestation,
    ];
    let mark = log.cursor();
    let pong = sibling
        .publish(group_message(&bot, "bots", "pong", &thread))
        .await;
    log.wait(mark, Line::new("bot-to-bot reply chain cut: not answering"))
        .await;
    log.wait(mark, Line::dropped(&pong.id, "loop_bound")).await;
    assert!(sibling.events_referencing(&bot, &pong.id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_bridges_dming_each_other_stop_at_the_hop_bound() {
    let hops = ["--max-bot-hops", "2"];
    let stage = Scene::builder().flags(&hops).stage().await;
    let url = stage.relay.url();
    let twin_spec = BridgeSpec::new(&url, stage.owner.public_key()).flags(&hops);
    attest_profile(&url, &stage.owner.keys, &stage.spec.bot).await;
    attest_profile(&url, &stage.owner.keys, &twin_spec.bot).await;
    let as_bot = Person::join_as(stage.spec.bot.clone(), &url).await;
    let scene = stage.start().await;
    let twin = Bridge::start(&twin_spec);
    twin.ready().await;
    let (bot, twin_bot, log) = (scene.bot, twin_spec.bot.public_key(), &scene.bridge.log);

    // As the twin, a first DM: from here on the two bridges answer each other.
    let as_twin = Person::join_as(twin_spec.bot.clone(), &url).await;
    let mark = log.start();
    as_twin.dm(&bot, "ping").await;
    log.wait(mark, Line::new("bot-to-bot reply chain cut: not answering"))
        .await;

    // The bot answered the opener (depth 0) and the twin's first answer
    // (depth 1); the twin's second answer (depth 2) was cut.
    let to_twin = as_twin.direct_messages_from(&bot, 2).await;
    let to_bot = as_bot.direct_messages_from(&twin_bot, 3).await;
    println!(
        "DMs bot→twin: {}, twin→bot: {} (the opener included)",
        to_twin.len(),
        to_bot.len()
    );
    assert_eq!((to_twin.len(), to_bot.len()), (2, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_sibling_bot_in_anyone_mode_is_told_then_cut_at_the_reply_chain_bound() {
    let anyone = ["--respond-to", "anyone", "--max-reply-chain", "2"];
    let scene = Scene::builder().flags(&anyone).start().await;
    let url = scene.relay.url();
    let other_owner = scene.join().await;
    let other_spec = BridgeSpec::new(&url, other_owner.public_key()).flags(&anyone);
    let other = Bridge::start(&other_spec);
    other.ready().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);

    // As the other bot, a first mention: from here on the two bridges
    // answer each other in the thread.
    let as_other = Person::join_as(other_spec.bot.clone(), &url).await;
    let mark = log.start();
    let opener = as_other.publish(group_message(&bot, "bots", "ping", &[])).await;
    log.wait(mark, Line::new("bot-to-bot reply chain cut: not answering"))
        .await;

    // Answers at depths 0 and 1, the notice at 2; the other's notice (3) is cut.
    let ours = as_other.events_referencing(&bot, &opener.id).await;
    let notices = ours
        .iter()
        .filter(|event| event.content.contains("This reply chain is 2 replies deep"))
        .count();
    let theirs = as_other
        .events_referencing(&other_spec.bot.public_key(), &opener.id)
        .await;
    println!(
        "thread events: ours {} (notices {notices}), the other bot's {}",
        ours.len(),
        theirs.len()
    );
    assert_eq!((ours.len(), notices), (3, 1));
}

/// A mention the gate refuses is said at info, naming the author's npub
/// and the rule, once per author a while: a swapped npub in `--owner` no
/// longer looks like "nothing happens", and a chatty stranger does not
/// fill the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_mention_is_said_at_info_once_per_author_naming_the_rule() {
    let scene = Scene::builder().start().await;
    let (chatty, other) = (scene.join().await, scene.join().await);
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let from = log.cursor();
    let refused = |person: &Person| {
        Line::new("mention from an author the gate does not hear")
            .with("author", person.public_key().to_bech32().expect("npub"))
            .with("rule", "owner-only")
            .with("reason", "not_heard")
    };
    let first = chatty.mention_in_note(&bot, "hello?").await;
    log.wait(from, Line::dropped(&first.id, "not_heard")).await;
    let line = log.wait(from, refused(&chatty)).await;
    assert_eq!(line["level"], "INFO", "{line}");
    assert!(
        line["why"].as_str().is_some_and(|why| why.contains("--owner")),
        "{line}"
    );
    let again = chatty.mention_in_note(&bot, "hello again?").await;
    log.wait(from, Line::dropped(&again.id, "not_heard")).await;
    // Another author's line is said after the second refusal was decided:
    // the chatty author's second one would be in the log by then.
    other.mention_in_note(&bot, "me too").await;
    log.wait(from, refused(&other)).await;
    assert_eq!(
        log.matching(from, refused(&chatty)).len(),
        1,
        "said once per author"
    );
}
