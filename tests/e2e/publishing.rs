//! The publisher against relays that refuse, hold back and split: a reply
//! refused for good is not retried and holds nothing up, a reaction whose
//! OK never comes holds up no mention, and a reply goes back to the relay
//! its mention came from.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// What the relay refuses: the bot's events that carry it.
const REFUSED_MARKER: &str = "NOT-ON-THIS-RELAY";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_refused_for_good_is_not_retried_and_does_not_delay_the_next() {
    let stage = Scene::builder()
        .metrics()
        .stage_on(PickyRelay::start().await)
        .await;
    let bot = stage.bot;
    stage.relay.answer_with(move |event| {
        if event.pubkey == bot && event.content.contains(REFUSED_MARKER) {
            Answer::Refuse("blocked: no such replies here".to_owned())
        } else {
            Answer::Accept
        }
    });
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();

    let refused_mention = scene.mention("room", &format!("say {REFUSED_MARKER}")).await;
    let answered = Line::new("turn finished").in_turn(&refused_mention.id);
    log.wait(mark, answered).await;
    // The next mention's reply goes out while the refused one stays.
    let later = scene.mention("room", "and now something else").await;
    scene.reply_to(&later).await;
    let status_mention = scene.mention("room", "!status").await;
    let status = scene.reply_to(&status_mention).await;

    // Bounded by the two replies after it: offered once, never again.
    let offered = scene
        .relay
        .received(|event| event.pubkey == bot && event.content.contains(REFUSED_MARKER));
    let refused_reply = offered
        .first()
        .expect("the refused reply was offered")
        .id
        .to_hex();
    let attempts = log.matching(
        mark,
        Line::new("publishing a reply").with("event_id", refused_reply.as_str()),
    );
    println!(
        "refused for good: offered to the relay {}, publish attempts logged {}, replies published after it 2",
        offered.len(),
        attempts.len(),
    );
    assert_eq!(offered.len(), 1, "times the relay was offered the refused reply");
    assert_eq!(attempts.len(), 1, "publish attempts of the refused reply");
    assert!(
        status
            .content
            .contains("Replies refused by the relays (not sent, not retried): 1."),
        "{}",
        status.content
    );
    let metrics = http_get(scene.metrics_port(), "/metrics").await;
    assert!(
        metrics.contains(r#"acp_bridge_replies_failed_total{reason="blocked"} 1"#),
        "{metrics}"
    );
    log.wait(
        mark,
        Line::new("a relay refused a reply for good; it is not published again")
            .with("event_id", refused_reply.as_str())
            .with("reason", "blocked"),
    )
    .await;
    let answers = scene
        .owner
        .events_referencing(&scene.bot, &refused_mention.id)
        .await;
    assert!(
        answers.is_empty(),
        "the refused reply is not on the relay: {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaction_whose_ok_never_comes_holds_up_no_mention() {
    let relay = PickyRelay::start().await;
    relay.answer_with(|event| match event.kind {
        Kind::Reaction => Answer::Hold,
        _ => Answer::Accept,
    });
    let scene = Scene::builder().start_on(relay).await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let reactions_to = |mention: &Event| {
        let id = mention.id.to_hex();
        scene.relay.received(move |event| {
            event.kind == Kind::Reaction && event.tags.event_ids().any(|tagged| tagged.to_hex() == id)
        })
    };

    let first = scene.mention("room-a", "first").await;
    let held = eventually(
        PATIENCE,
        async || reactions_to(&first).into_iter().next(),
        || "the first reaction at the relay".to_owned(),
    )
    .await;
    // Its OK is held back; the next mention is taken all the same, and its
    // reaction sent, while the first one still waits for its OK.
    let second = scene.mention("room-b", "second").await;
    log.wait(mark, Line::accepted(&second.id)).await;
    eventually(
        PATIENCE,
        async || reactions_to(&second).into_iter().next(),
        || "the second reaction at the relay".to_owned(),
    )
    .await;
    scene.relay.release();
    // The publisher was still waiting for the first OK (the SDK gives up on
    // it after 10 s): it takes it now.
    log.wait(
        mark,
        Line::new("reaction published").with("event_id", held.id.to_hex()),
    )
    .await;
    let tally = scene.tally("reactions held back", &[first, second]).await;
    assert_exactly_once(tally);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_on_one_relay_is_answered_on_that_relay_only() {
    let scene = Scene::builder().mirrored().start().await;
    let (relay_a, relay_b) = (scene.relay.url(), scene.mirror_url());
    let log = &scene.bridge.log;
    let mark = log.cursor();

    let mention = scene
        .owner
        .publish_to(&relay_a, group_message(&scene.bot, "room", "only here", &[]))
        .await;
    let reply = scene.reply_to(&mention).await;
    // Done with it: the publisher heard the OK from every relay it sent
    // the reply to.
    log.wait(mark, Line::new("published").with("event_id", reply.id.to_hex()))
        .await;
    let bot_events_on = async |relay: &str| {
        let filter = Filter::new().author(scene.bot).event(mention.id);
        let events = scene
            .owner
            .client
            .fetch_events_from([relay], filter, Duration::from_secs(5))
            .await
            .expect("fetch");
        let replies = events.iter().filter(|event| event.kind != Kind::Reaction).count();
        let reactions = events.iter().filter(|event| event.kind == Kind::Reaction).count();
        (replies, reactions)
    };
    assert_eq!(
        bot_events_on(&relay_b).await.0,
        0,
        "no reply on relay B, where the mention was not"
    );
    // And the reactions (heard, answered), once the publisher heard their OKs.
    let reacted = Line::new("reaction published");
    log.wait_nth(mark, 2, reacted).await;
    let (on_a, on_b) = (bot_events_on(&relay_a).await, bot_events_on(&relay_b).await);
    println!("mention on relay A only: (replies, reactions) on A {on_a:?}, on B {on_b:?}");
    assert_eq!(on_a, (1, 2), "relay A, where the mention was");
    assert_eq!(on_b, (0, 0), "relay B, where it was not");
}
