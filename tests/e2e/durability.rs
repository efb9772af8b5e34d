//! What must hold across duplicates, restarts and disconnections: every
//! accepted mention answered once.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_mention_from_two_relays_is_answered_once() {
    let scene = Scene::builder().mirrored().start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let mention = scene.mention("room", "say it once").await;
    scene.reply_to(&mention).await;
    // Whichever copy came second, it came before this one's.
    let later = scene.settle("room").await;
    assert_eq!(owner.answers_from(&bot, &mention.id).await.len(), 1);
    let accepted = log.matching(log.start(), Line::new("mention accepted"));
    let accepted: Vec<&str> = accepted
        .iter()
        .filter_map(|line| line["event_id"].as_str())
        .collect();
    assert_eq!(
        accepted,
        [mention.id.to_hex(), later.id.to_hex()],
        "accepted once, then the later one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_before_the_watermark_or_far_in_the_future_are_ignored() {
    let stage = Scene::builder().stage().await;
    let an_hour_ago = Timestamp::from_secs(Timestamp::now().as_secs() - 3600);
    let old = stage
        .owner
        .publish(group_message(&stage.bot, "room", "from the past", &[]).custom_created_at(an_hour_ago))
        .await;
    let scene = stage.start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let in_a_day = Timestamp::from_secs(Timestamp::now().as_secs() + 86_400);
    let future = owner
        .publish(group_message(&bot, "room", "from the future", &[]).custom_created_at(in_a_day))
        .await;
    log.wait(mark, Line::dropped(&future.id, "from_the_future")).await;
    // A mention after both: once it is answered, the intake has seen the others.
    let now = scene.mention("room", "from the present").await;
    scene.reply_to(&now).await;
    assert!(owner.events_referencing(&bot, &old.id).await.is_empty());
    assert!(owner.events_referencing(&bot, &future.id).await.is_empty());
    assert_eq!(log.matching(log.start(), Line::new("mention accepted")).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_answers_nothing_twice_and_resumes_the_unanswered() {
    // First life: one mention answered, one left hanging at shutdown.
    let mut scene = Scene::builder().flags(&["--shutdown-grace", "1s"]).start().await;
    let bot = scene.bot;
    let answered = scene.mention("room-a", "answer me now").await;
    scene.reply_to(&answered).await;
    let mark = scene.bridge.log.cursor();
    let hanging = scene.mention("room-b", "[hang] answer me later").await;
    scene
        .bridge
        .log
        .wait(mark, Line::new("prompting the agent").in_turn(&hanging.id))
        .await;
    let status = scene.bridge.terminate(Duration::from_secs(30)).await;
    assert!(status.success(), "clean exit: {status}");
    assert!(scene.owner.events_referencing(&bot, &hanging.id).await.is_empty());

    // Second life, same state: the answered one stays answered once, the
    // hanging one is resumed (on an agent told to ignore the `[hang]`).
    let spec = scene
        .spec()
        .agent(&["--round-delay-ms", "20", "--rounds", "1", "--ignore-directives"]);
    scene.restart(spec).await;
    let (owner, log) = (&scene.owner, &scene.bridge.log);
    scene.reply_to(&hanging).await;
    let resumed = log
        .wait(
            log.start(),
            Line::new("resuming mentions accepted before the last stop"),
        )
        .await;
    assert_eq!(resumed["mentions"], 1, "only the hanging one: {resumed}");
    // The relay offers the answered mention again (the subscription reaches
    // back past the watermark); the seen set drops it.
    log.wait(log.start(), Line::dropped(&answered.id, "duplicate"))
        .await;
    scene.settle("room-a").await;
    scene.settle("room-b").await;
    assert_eq!(
        owner.answers_from(&bot, &answered.id).await.len(),
        1,
        "not answered twice"
    );
    assert_eq!(owner.answers_from(&bot, &hanging.id).await.len(), 1);
}

/// What the daemon says when a stop leaves replies in the outbox.
const UNSENT_AT_STOP: &str = "some replies are still unsent; they are published at the next start";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_finishes_within_the_shutdown_grace_is_on_the_relay_when_the_daemon_has_exited() {
    // Eight rounds 250 ms apart: running at SIGTERM, done well within the grace.
    let mut scene = Scene::builder()
        .agent(&["--rounds", "8", "--round-delay-ms", "250"])
        .flags(&["--shutdown-grace", "30s"])
        .start()
        .await;
    let bot = scene.bot;
    let mention = scene.mention_mid_turn("room", "finish this before you go").await;
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "clean exit: {status}");

    let log = &scene.bridge.log;
    let finished = log.matching(log.start(), Line::new("turn finished").in_turn(&mention.id));
    assert_eq!(
        finished.first().map(|line| line["outcome"].clone()),
        Some("answered".into()),
        "the turn ended within the grace; log tail:\n{}",
        log.tail(40)
    );
    // Looked up once, after the exit: the stop delivered it, not a later start.
    let answers = scene.owner.answers_from(&bot, &mention.id).await;
    assert_eq!(
        answers.len(),
        1,
        "answered before the exit; log tail:\n{}",
        log.tail(40)
    );
    assert!(
        answers[0].content.contains("> finish this before you go"),
        "{}",
        answers[0].content
    );
    assert!(log.matching(log.start(), Line::new(UNSENT_AT_STOP)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_no_relay_takes_during_the_stop_is_published_at_the_next_start() {
    let mut scene = Scene::builder()
        .through_proxy()
        .agent(&["--rounds", "8", "--round-delay-ms", "250"])
        .flags(&["--shutdown-grace", "30s"])
        .start()
        .await;
    let bot = scene.bot;
    let mention = scene.mention_mid_turn("room", "answer me some day").await;
    scene.cut_proxy().await;
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "clean exit: {status}");
    let log = &scene.bridge.log;
    let unsent = log.matching(log.start(), Line::new(UNSENT_AT_STOP));
    assert_eq!(unsent.len(), 1, "log tail:\n{}", log.tail(40));
    assert!(scene.owner.answers_from(&bot, &mention.id).await.is_empty());

    scene.proxy().restore().await;
    scene.restart(scene.spec()).await;
    scene.reply_to(&mention).await;
    scene.settle("room").await;
    assert_eq!(scene.owner.answers_from(&bot, &mention.id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_posted_while_disconnected_are_answered_after_reconnect() {
    let mut scene = Scene::builder().through_proxy().start().await;
    let bot = scene.bot;
    let before = scene.mention("room", "before the cut").await;
    scene.reply_to(&before).await;

    scene.cut_proxy().await;
    // The relay has stored it (it acknowledged) while the daemon is away.
    let during = scene.mention("room", "while you were away").await;
    scene.proxy().restore().await;
    scene.reply_to(&during).await;
    scene.settle("room").await;
    assert_eq!(
        scene.owner.answers_from(&bot, &before.id).await.len(),
        1,
        "the old one is not answered again"
    );
    assert_eq!(scene.owner.answers_from(&bot, &during.id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_the_state_dir_keeps_what_dedup_needs() {
    let mut scene = Scene::builder().flags(&["--retention", "1s"]).start().await;
    let bot = scene.bot;
    let answered = scene.mention("room", "answer me once").await;
    scene.reply_to(&answered).await;
    assert!(scene.bridge.terminate(Duration::from_secs(30)).await.success());
    // The scenario needs time to pass, not an event: everything of the
    // first life must be older than the retention.
    tokio::time::sleep(Duration::from_millis(2100)).await;

    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let pruned = log.wait(log.start(), Line::new("state dir pruned")).await;
    assert!(
        pruned["replies"].as_u64() >= Some(1),
        "sent replies went: {pruned}"
    );
    assert_eq!(
        pruned["mentions"], 0,
        "the answered mention stays while the relay can replay it: {pruned}"
    );
    log.wait(log.start(), Line::dropped(&answered.id, "duplicate"))
        .await;
    scene.settle("room").await;
    assert_eq!(
        scene.owner.answers_from(&bot, &answered.id).await.len(),
        1,
        "not answered twice"
    );
}

/// Writes the journal row a daemon would have left for `mention`, taken in
/// and finished at `at`: its seen entry.
fn journal_as_finished(state_dir: &std::path::Path, mention: &Event, at: u64) {
    let store = acp_bridge::Store::open(state_dir).expect("the daemon's store");
    let (event_id, at) = (mention.id.to_hex(), i64::try_from(at).expect("seconds"));
    let row = acp_bridge::NewMention {
        event_id: &event_id,
        conversation: "room",
        payload: "{}",
        accepted_at: at,
    };
    assert_eq!(store.journal_accept_all(&[row]).expect("journal"), [true]);
    store
        .journal_finish(&[&event_id], acp_bridge::Finish::Notified, at)
        .expect("finish");
}

/// A mention answered an hour before `now`: on the relay, and in the
/// journal as a finished row (its seen entry), old enough to be pruned.
async fn answered_an_hour_ago<R: RelayServer>(stage: &Stage<R>, now: u64) -> Event {
    let mention = stage
        .owner
        .publish(
            group_message(&stage.bot, "room", "answered an hour ago", &[])
                .custom_created_at(Timestamp::from_secs(now - 3_600)),
        )
        .await;
    journal_as_finished(&stage.spec.state_dir, &mention, now - 3_600);
    mention
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refetch_after_an_untaken_dm_never_reaches_below_what_housekeeping_pruned() {
    let stage = Scene::builder().flags(&["--retention", "1s"]).stage().await;
    let now = Timestamp::now().as_secs();
    let answered_long_ago = answered_an_hour_ago(&stage, now).await;
    let scene = stage.start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let pruned = log.wait(log.start(), Line::new("state dir pruned")).await;
    assert_eq!(pruned["mentions"], 1, "the old seen entry went: {pruned}");

    // The owner's DM, its wrap dated two hours back, is not taken at once
    // (the journal is locked): the link fetches it again.
    let journal_lock = scene.bridge.lock_journal();
    let mark = log.cursor();
    let wrap = owner
        .dm_wrapped_at(&bot, "a DM taken late", Timestamp::from_secs(now - 7_200))
        .await;
    log.wait(
        mark,
        Line::new("event not taken yet")
            .with("event_id", wrap.id.to_hex())
            .with("reason", "not_journaled"),
    )
    .await;
    journal_lock.release();
    log.wait(mark, Line::new("fetching untaken events again")).await;
    log.wait(mark, Line::accepted(&wrap.id)).await;
    owner.direct_messages_from(&bot, 1).await;
    // Had the refetch re-read the pruned hour, the old mention would have
    // been taken in before the DM, in the same room as this one.
    scene.settle("room").await;

    assert_not_answered_again(
        &scene,
        mark,
        &answered_long_ago,
        "after a refetch for a DM wrapped two hours back",
    )
    .await;
}

/// The same, driven by a stranger: its DM, wrapped two hours back and too
/// large to wait in memory for the lookup of its profile (which the relay
/// sits on), is left to be fetched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_dm_wrapped_days_back_cannot_make_a_pruned_mention_be_answered_again() {
    let stage = Scene::builder()
        .flags(&["--retention", "1s", "--max-parked-bytes", "16384"])
        .stage_on(PickyRelay::start().await)
        .await;
    let now = Timestamp::now().as_secs();
    let answered_long_ago = answered_an_hour_ago(&stage, now).await;
    let stranger = stage.join().await;
    let stranger_key = stranger.public_key();
    stage.relay.hold_queries(move |filter| {
        let profile = filter
            .kinds
            .as_ref()
            .is_some_and(|kinds| kinds.contains(&Kind::Metadata));
        profile
            && filter
                .authors
                .as_ref()
                .is_some_and(|authors| authors.contains(&stranger_key))
    });
    let scene = stage.start().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let pruned = log.wait(log.start(), Line::new("state dir pruned")).await;
    assert_eq!(pruned["mentions"], 1, "the old seen entry went: {pruned}");

    let mark = log.cursor();
    let wrap = stranger
        .dm_wrapped_at(&bot, &"let me in ".repeat(200), Timestamp::from_secs(now - 7_200))
        .await;
    log.wait(mark, Line::dropped(&wrap.id, "lookups_busy")).await;
    log.wait(mark, Line::new("fetching untaken events again")).await;
    scene.relay.release_queries();
    // Once looked up, the stranger's DM is refused on its merits; a refetch
    // that re-read the pruned hour delivered the old mention before it.
    log.wait(mark, Line::dropped(&wrap.id, "dm_from_stranger")).await;
    scene.settle("room").await;

    assert_not_answered_again(
        &scene,
        mark,
        &answered_long_ago,
        "after a stranger's DM wrapped two hours back was fetched again",
    )
    .await;
}

/// `mention`, pruned from the journal, was neither taken in again since
/// `mark` nor answered a second time.
async fn assert_not_answered_again<R: RelayServer>(
    scene: &Scene<R>,
    mark: Cursor,
    mention: &Event,
    when: &str,
) {
    let log = &scene.bridge.log;
    let accepted_again = log.matching(mark, Line::accepted(&mention.id)).len();
    let answers = scene.owner.answers_from(&scene.bot, &mention.id).await.len();
    println!("pruned mention {when}: accepted again {accepted_again}, answered again {answers}");
    assert_eq!((accepted_again, answers), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_keeps_its_agent_session_across_a_restart() {
    for how in ["resume", "load"] {
        let mut scene = Scene::builder()
            .agent(&[
                "--rounds",
                "1",
                "--round-delay-ms",
                "10",
                "--reopen-sessions",
                how,
            ])
            .frame_log()
            .start()
            .await;
        let first = scene.mention("room", "remember this").await;
        scene.reply_to(&first).await;
        let status = scene.bridge.terminate(PATIENCE).await;
        assert!(status.success(), "{status}");

        scene.restart(scene.spec()).await;
        let log = &scene.bridge.log;
        let second = scene.mention("room", "and this").await;
        let reply = scene.reply_to(&second).await;
        assert!(reply.content.contains("> and this"), "{}", reply.content);
        assert!(
            !reply.content.contains("history of an earlier turn"),
            "a replayed history is not the turn's answer: {}",
            reply.content
        );
        let reopened = log.wait(log.start(), Line::new("session reopened")).await;
        let expected = if how == "resume" { "resumed" } else { "loaded" };
        assert_eq!(reopened["how"], expected);
        let methods = scene.agent_methods();
        let new_sessions = methods.iter().filter(|method| *method == "session/new").count();
        assert_eq!(
            new_sessions, 1,
            "{how}: the second agent reopened the first session: {methods:?}"
        );
        assert!(methods.contains(&format!("session/{how}")), "{methods:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_the_journal_could_not_take_is_fetched_again_and_answered() {
    let scene = Scene::builder().start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    // A mention answered first: the relay has served the subscription's
    // stored events by then. An event published while a relay still works
    // on the REQ may reach the daemon twice (from the query and live), and
    // the second copy, taken once the lock is gone, would stand in for the
    // refetch this test is about.
    let warm_up = scene.mention("warm-up", "are you there").await;
    scene.reply_to(&warm_up).await;
    // An outside writer holds the database's write lock past the daemon's
    // busy timeout.
    let journal_lock = scene.bridge.lock_journal();

    let mark = log.cursor();
    let mention = scene.mention("room", "take me when you can").await;
    log.wait(
        mark,
        Line::new("event not taken yet")
            .with("event_id", mention.id.to_hex())
            .with("reason", "not_journaled"),
    )
    .await;
    journal_lock.release();

    // The link fetches the untaken event again; it is taken and answered.
    scene.reply_to(&mention).await;
    log.wait(mark, Line::new("fetching untaken events again")).await;
    scene.settle("room").await;
    assert_eq!(owner.answers_from(&bot, &mention.id).await.len(), 1);
    let accepted = log.matching(mark, Line::accepted(&mention.id));
    assert_eq!(accepted.len(), 1, "taken once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_command_journaled_before_a_crash_resumes_as_a_command_not_a_prompt() {
    let mut scene = Scene::builder().start().await;
    let status = scene.bridge.terminate(Duration::from_secs(30)).await;
    assert!(status.success(), "clean exit: {status}");

    // The crash left the owner's `!cancel` journaled and not yet handled:
    // the state the intake writes before it hands a command on.
    let cancel = scene.mention("room", "!cancel").await;
    let relay = RelayUrl::parse(&scene.relay.url()).expect("relay url");
    let (thread, replies_to) = acp_bridge::public_thread(&cancel).expect("a group message");
    let mention = acp_bridge::Mention {
        event_id: cancel.id,
        author: cancel.pubkey,
        kind: cancel.kind,
        created_at: cancel.created_at,
        content: cancel.content.clone(),
        conversation: thread.conversation(acp_bridge::SessionPolicy::Conversation, Some(&relay)),
        thread,
        replies_to,
        from_owner: true,
        from_sibling: false,
        from_allowlist: false,
        chain_depth: 0,
        accepted_at: Timestamp::now().as_secs(),
        origin: Some(relay),
        intent: acp_bridge::Intent::Turn,
        media: Vec::new(),
    };
    // Journaled as the daemon wrote commands before `CommandCall` (one
    // variant per command): such a row still loads as the same command.
    let mut journaled = serde_json::to_value(&mention).expect("json");
    journaled["intent"] = serde_json::json!({ "command": "cancel" });
    {
        let store = acp_bridge::Store::open(&scene.bridge.spec.state_dir).expect("the daemon's store");
        let (event_id, payload) = (cancel.id.to_hex(), journaled.to_string());
        let row = acp_bridge::NewMention {
            event_id: &event_id,
            conversation: mention.conversation.as_str(),
            payload: &payload,
            accepted_at: i64::try_from(mention.accepted_at).expect("seconds"),
        };
        assert_eq!(store.journal_accept_all(&[row]).expect("journal"), [true]);
    }

    scene.restart(scene.spec()).await;
    let answer = scene.reply_to(&cancel).await;
    assert!(answer.content.contains("Nothing to cancel"), "{}", answer.content);
    let log = &scene.bridge.log;
    assert!(
        log.matching(log.start(), Line::new("prompting the agent"))
            .is_empty(),
        "the command was never prompted to the agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_group_id_on_two_relays_is_two_conversations() {
    let scene = Scene::builder().mirrored().start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let relays: Vec<String> = scene
        .bridge
        .spec
        .relay_url
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(relays.len(), 2);
    // A member-only group on one relay, and a message with the same `h` on
    // the other (anyone can write one there).
    let mut mentions = Vec::new();
    for (relay, text) in relays.iter().zip(["in the members' group", "same h elsewhere"]) {
        let event = group_message(&bot, "room", text, &[])
            .sign_with_keys(&owner.keys)
            .expect("sign");
        let sent = owner
            .client
            .send_event_to([relay.as_str()], &event)
            .await
            .expect("send");
        assert!(!sent.success.is_empty(), "{:?}", sent.failed);
        mentions.push(event);
    }
    let mut conversations = Vec::new();
    for (mention, relay) in mentions.iter().zip(&relays) {
        let accepted = log.wait(log.start(), Line::accepted(&mention.id)).await;
        let conversation = accepted["conversation"].as_str().expect("a key").to_owned();
        assert_eq!(conversation, format!("group:{relay}'room"));
        conversations.push(conversation);
    }
    assert_ne!(conversations[0], conversations[1], "two groups, two sessions");
}

/// A daemon with a fresh state dir (a lost volume, an operator's second
/// try) reads its own replies on the relay before it answers anything from
/// before its start: the mention, the DM and the command it answered in
/// its first life are not answered or run again, while a new mention is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_state_dir_answers_nothing_again_that_its_replies_on_the_relay_answered() {
    let mut scene = Scene::builder().metrics().start().await;
    let before = scene.answer_one_of_each("room").await;
    scene.bridge.terminate(PATIENCE).await;

    scene.restart(scene.spec().with_fresh_state_dir()).await;
    let log = &scene.bridge.log;
    for old in before.events() {
        log.wait(log.start(), Line::answered_before_start(old)).await;
    }
    let counted = metric(
        scene.metrics_port(),
        r#"acp_bridge_events_dropped_total{reason="answered_before_start"}"#,
    );
    assert_eq!(counted.await, 3.0);
    // The bound: a new mention is answered, after everything above.
    scene.settle("room").await;
    let new_dm = scene.assert_only_a_new_dm_answered(&before).await;
    assert!(
        log.matching(log.start(), Line::accepted(&before.dm.id))
            .is_empty()
    );
    assert!(
        log.matching(log.start(), Line::new("owner command")).is_empty(),
        "the old command is not run again"
    );
    assert_eq!(log.matching(log.start(), Line::accepted(&new_dm.id)).len(), 1);
}

/// The same after the bot posted more public replies since than its first
/// read of them at connection covers (1,000): the mention from before the
/// start is checked against the relay by its id, and not answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_state_dir_checks_by_id_what_the_newest_replies_do_not_cover() {
    /// More of the bot's replies than its read at connection takes.
    const NEWER_REPLIES: usize = 1_001;
    let mut scene = Scene::builder().start().await;
    let mention = scene.mention("room", "answer me once").await;
    scene.reply_to(&mention).await;
    scene.bridge.terminate(PATIENCE).await;
    let spec = scene.spec();
    let as_bot = Person::join_as(spec.bot.clone(), &scene.relay.url()).await;
    let later = Timestamp::now() + 1;
    for index in 0..NEWER_REPLIES {
        let elsewhere = EventId::all_zeros();
        let reply = group_message(&as_bot.public_key(), "elsewhere", &format!("reply {index}"), &[])
            .tag(Tag::parse(["e", &elsewhere.to_hex(), "", "reply"]).expect("tag"))
            .custom_created_at(later);
        as_bot.publish(reply).await;
    }

    scene.restart(spec.with_fresh_state_dir()).await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::answered_before_start(&mention)).await;
    scene.settle("room").await;
    assert_eq!(scene.owner.answers_from(&scene.bot, &mention.id).await.len(), 1);
}

/// When the relay cannot say what the bot replied to (it refuses the
/// bot's reads of its own chat messages), a fresh state dir answers a
/// mention from before its start again: a second answer beats none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_cannot_tell_what_was_answered_gets_the_old_mention_answered_again() {
    let mut scene = Scene::builder().start_on(PickyRelay::start().await).await;
    let mention = scene.mention("room", "answer me").await;
    scene.reply_to(&mention).await;
    scene.bridge.terminate(PATIENCE).await;
    let bot = scene.bot;
    // The daemon's reads of its replies name its key and the chat kind;
    // the test's own reads name no kind.
    let reads_the_bots_chat = move |filter: &Filter| {
        let by_bot = filter
            .authors
            .as_ref()
            .is_some_and(|authors| authors.contains(&bot));
        by_bot
            && filter
                .kinds
                .as_ref()
                .is_some_and(|kinds| kinds.contains(&Kind::Custom(9)))
    };
    scene.relay.refuse_queries(reads_the_bots_chat, "error: not now");

    let spec = scene.spec();
    scene.restart(spec.with_fresh_state_dir()).await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new(
            "cannot ask the relay which events from before this start the bot answered; answering them",
        ),
    )
    .await;
    scene.owner.replies_from(&bot, &mention.id, 2).await;
}

/// A mention that was only told to wait (an interim message, labelled so)
/// counts as unanswered for a fresh state dir: when the daemon dies before
/// answering it, the next one, with its state lost, still answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_only_told_to_wait_is_answered_after_lost_state() {
    let mut scene = Scene::builder()
        .flags(&[
            "--agents",
            "1",
            "--turns-per-agent",
            "1",
            "--wait-notice-after",
            "1s",
        ])
        .start()
        .await;
    let bot = scene.bot;
    let long = scene
        .mention_mid_turn("a", "a long one [rounds=40][delay=100]")
        .await;
    let waiting = scene.mention("b", "wait for me").await;
    scene.owner.reply_containing(&bot, &waiting.id, "Queued").await;
    scene.bridge.kill_hard();

    scene.restart(scene.spec().with_fresh_state_dir()).await;
    scene.owner.reply_containing(&bot, &long.id, "done: ").await;
    scene.owner.reply_containing(&bot, &waiting.id, "done: ").await;
    let log = &scene.bridge.log;
    assert!(
        log.matching(log.start(), Line::answered_before_start(&waiting))
            .is_empty(),
        "the waiting notice is not taken for an answer"
    );
}
