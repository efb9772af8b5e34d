//! What must hold across duplicates, restarts and disconnections: every
//! accepted mention answered once.

mod support;

use std::time::Duration;

use nostr_sdk::prelude::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_mention_from_two_relays_is_answered_once() {
    let relay_a = TestRelay::start().await;
    let relay_b = TestRelay::start().await;
    let owner = Person::join(&relay_a.url()).await;
    owner.client.add_relay(relay_b.url()).await.expect("second relay");
    owner.client.connect().await;
    owner.client.wait_for_connection(Duration::from_secs(5)).await;
    let spec = BridgeSpec::new(
        &format!("{},{}", relay_a.url(), relay_b.url()),
        owner.public_key(),
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let mention = owner.mention_in_group(&bot, "room", "say it once").await;
    owner.replies_from(&bot, &mention.id, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(owner.events_referencing(&bot, &mention.id).await.len(), 1);
    assert_eq!(bridge.log_events("mention accepted").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_before_the_watermark_or_far_in_the_future_are_ignored() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let an_hour_ago = Timestamp::from_secs(Timestamp::now().as_secs() - 3600);
    let old = owner
        .publish(group_message(&bot, "room", "from the past", &[]).custom_created_at(an_hour_ago))
        .await;
    let bridge = Bridge::start(&spec).ready().await;
    let in_a_day = Timestamp::from_secs(Timestamp::now().as_secs() + 86_400);
    let future = owner
        .publish(group_message(&bot, "room", "from the future", &[]).custom_created_at(in_a_day))
        .await;
    bridge.wait_for_drop(&future.id, "from_the_future").await;
    // A mention after both: once it is answered, the intake has seen the others.
    let now = owner.mention_in_group(&bot, "room", "from the present").await;
    owner.replies_from(&bot, &now.id, 1).await;
    assert!(owner.events_referencing(&bot, &old.id).await.is_empty());
    assert!(owner.events_referencing(&bot, &future.id).await.is_empty());
    assert_eq!(bridge.log_events("mention accepted").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_answers_nothing_twice_and_resumes_the_unanswered() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    // First life: one mention answered, one left hanging at shutdown.
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).flags(&["--shutdown-grace", "1s"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let answered = owner.mention_in_group(&bot, "room-a", "answer me now").await;
    owner.replies_from(&bot, &answered.id, 1).await;
    let hanging = owner
        .mention_in_group(&bot, "room-b", "[hang] answer me later")
        .await;
    bridge.wait_for_log("prompting the agent").await;
    bridge
        .wait_for_log(&format!("\"event_id\":\"{}\"", hanging.id.to_hex()))
        .await;
    let status = bridge.terminate(Duration::from_secs(30)).await;
    assert!(status.success(), "clean exit: {status}");
    assert!(owner.events_referencing(&bot, &hanging.id).await.is_empty());

    // Second life, same state: the answered one stays answered once, the
    // hanging one is resumed (on an agent told to ignore the `[hang]`).
    let second = Bridge::start(&spec.clone().agent(&[
        "--round-delay-ms",
        "20",
        "--rounds",
        "1",
        "--ignore-directives",
    ]))
    .ready()
    .await;
    owner.replies_from(&bot, &hanging.id, 1).await;
    second
        .wait_for_log("resuming mentions accepted before the last stop")
        .await;
    // The relay offers the answered mention again (the subscription reaches
    // back past the watermark); the seen set drops it.
    second.wait_for_drop(&answered.id, "duplicate").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        owner.events_referencing(&bot, &answered.id).await.len(),
        1,
        "not answered twice"
    );
    assert_eq!(owner.events_referencing(&bot, &hanging.id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_posted_while_disconnected_are_answered_after_reconnect() {
    let relay = TestRelay::start().await;
    let mut proxy = Proxy::start(relay.port).await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&proxy.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let before = owner.mention_in_group(&bot, "room", "before the cut").await;
    owner.replies_from(&bot, &before.id, 1).await;

    proxy.cut();
    bridge.wait_for_log("relay connection lost").await;
    let during = owner.mention_in_group(&bot, "room", "while you were away").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.restore().await;
    owner.replies_from(&bot, &during.id, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        owner.events_referencing(&bot, &before.id).await.len(),
        1,
        "the old one is not answered again"
    );
    assert_eq!(owner.events_referencing(&bot, &during.id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_the_state_dir_keeps_what_dedup_needs() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).flags(&["--retention", "1s"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let answered = owner.mention_in_group(&bot, "room", "answer me once").await;
    owner.replies_from(&bot, &answered.id, 1).await;
    assert!(bridge.terminate(Duration::from_secs(30)).await.success());
    // Everything of the first life is now past the retention.
    tokio::time::sleep(Duration::from_millis(2100)).await;

    let second = Bridge::start(&spec).ready().await;
    second.wait_for_log("state dir pruned").await;
    let pruned = second.log_events("state dir pruned").remove(0);
    assert!(
        pruned["replies"].as_u64() >= Some(1),
        "sent replies went: {pruned}"
    );
    assert_eq!(
        pruned["mentions"], 0,
        "the answered mention stays while the relay can replay it: {pruned}"
    );
    second.wait_for_drop(&answered.id, "duplicate").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        owner.events_referencing(&bot, &answered.id).await.len(),
        1,
        "not answered twice"
    );
}
