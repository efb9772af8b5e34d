//! The Nostr side end to end: mentions in, threaded replies out.

mod support;

use std::time::Duration;

use nostr_sdk::prelude::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_mention_in_group_gets_a_threaded_reply() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let mention = owner.mention_in_group(&bot, "room", "hello bot").await;
    let replies = owner.replies_from(&bot, &mention.id, 1).await;
    let reply = &replies[0];
    assert_eq!(reply.kind, Kind::Custom(9));
    assert!(reply.content.contains("done: "), "{}", reply.content);
    assert!(
        reply.content.contains("> hello bot"),
        "the prompt carried the mention: {}",
        reply.content
    );
    let expected: std::collections::BTreeSet<_> = [
        (mention.id.to_hex(), "root".to_owned()),
        (mention.id.to_hex(), "reply".to_owned()),
    ]
    .into();
    assert_eq!(e_tags(reply), expected, "a top-level mention is root and reply");
    assert!(p_tags(reply, &owner.public_key()));
    assert!(
        reply
            .tags
            .iter()
            .any(|tag| tag.kind() == TagKind::h() && tag.content() == Some("room"))
    );
    // One reply only.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        owner.events_referencing(&bot, &mention.id).await.len(),
        1,
        "{}",
        bridge.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_inside_a_note_thread_carries_the_root_and_the_mention() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;

    let root = owner
        .publish(EventBuilder::text_note("a thread about turtles"))
        .await;
    let mention = owner
        .publish(
            EventBuilder::text_note_reply("what do you think, bot?", &root, Some(&root), None)
                .tag(Tag::public_key(bot)),
        )
        .await;
    let reply = owner.replies_from(&bot, &mention.id, 1).await.remove(0);
    let expected: std::collections::BTreeSet<_> = [
        (root.id.to_hex(), "root".to_owned()),
        (mention.id.to_hex(), "reply".to_owned()),
    ]
    .into();
    assert_eq!(e_tags(&reply), expected);
    assert!(p_tags(&reply, &owner.public_key()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_mention_gets_a_notice_instead_of_a_turn() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).flags(&["--max-content-bytes", "100"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let mention = owner.mention_in_group(&bot, "room", &"x".repeat(500)).await;
    let notice = owner.replies_from(&bot, &mention.id, 1).await.remove(0);
    assert!(notice.content.contains("too long"), "{}", notice.content);
    assert!(
        !notice.content.contains("done:"),
        "no turn ran: {}",
        notice.content
    );
    assert!(!bridge.log().contains("prompting the agent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_mentions_get_a_reaction_unless_disabled() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let mention = owner.mention_in_group(&bot, "room", "react please").await;
    owner.replies_from(&bot, &mention.id, 1).await;
    let reactions = owner
        .client
        .fetch_events(
            Filter::new().author(bot).kind(Kind::Reaction).event(mention.id),
            Duration::from_secs(5),
        )
        .await
        .expect("fetch");
    assert_eq!(reactions.len(), 1);
    let reaction = reactions.first().expect("one");
    assert!(
        reaction
            .tags
            .iter()
            .any(|tag| tag.kind() == TagKind::h() && tag.content() == Some("room"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reply_mode_publishes_no_answer_of_its_own() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec =
        BridgeSpec::new(&relay.url(), owner.public_key()).flags(&["--reply-mode", "agent", "--no-reactions"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    owner.mention_in_group(&bot, "room", "post it yourself").await;
    bridge.wait_for_log("turn finished").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let everything = owner
        .client
        .fetch_events(Filter::new().author(bot), Duration::from_secs(5))
        .await
        .expect("fetch");
    assert!(
        everything.is_empty(),
        "the daemon published nothing: {everything:?}"
    );
    assert_eq!(bridge.log_events("turn finished")[0]["outcome"], "answered");
}
