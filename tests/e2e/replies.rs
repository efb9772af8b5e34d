//! The Nostr side end to end: mentions in, threaded replies out.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_mention_in_group_gets_a_threaded_reply() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "hello bot").await;
    let reply = &scene.reply_to(&mention).await;
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
    // One reply only, also counting answers that merely quote it.
    scene.settle("room").await;
    assert_eq!(
        owner.answers_from(&bot, &mention.id).await.len(),
        1,
        "{}",
        scene.bridge.log.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_inside_a_note_thread_carries_the_root_and_the_mention() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let root = owner
        .publish(EventBuilder::text_note("a thread about turtles"))
        .await;
    let mention = owner
        .publish(
            EventBuilder::text_note_reply("what do you think, bot?", &root, Some(&root), None)
                .tag(Tag::public_key(bot)),
        )
        .await;
    let reply = scene.reply_to(&mention).await;
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
    let scene = Scene::builder()
        .flags(&["--max-content-bytes", "100"])
        .start()
        .await;

    let mention = scene.mention("room", &"x".repeat(500)).await;
    let notice = scene.reply_to(&mention).await;
    assert!(notice.content.contains("too long"), "{}", notice.content);
    assert!(
        !notice.content.contains("done:"),
        "no turn ran: {}",
        notice.content
    );
    // A later mention there is the only one the agent is prompted with.
    let later = scene.settle("room").await;
    let log = &scene.bridge.log;
    let prompts = log.matching(log.start(), Line::new("prompting the agent"));
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(prompts[0]["span"]["event_id"], later.id.to_hex());
    assert_eq!(prompts[0]["mentions"], 1);
}

/// The relay websocket reads into a 16 KiB buffer (`transport.rs`); a
/// mention several times that size still arrives whole (its signature
/// covers every byte) and is answered, its last words reaching the agent
/// (whose echo comes back as a series of 3 parts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_larger_than_the_read_buffer_arrives_whole() {
    let scene = Scene::builder().start().await;
    let text = format!("{} the very end", "long words ".repeat(5_000));
    assert!(text.len() > 3 * 16 * 1024);
    let mention = scene.mention("room", &text).await;
    let parts = scene.owner.replies_from(&scene.bot, &mention.id, 3).await;
    assert!(
        parts.iter().any(|part| part.content.ends_with(" the very end")),
        "the mention's last words reached the agent"
    );
    let log = &scene.bridge.log;
    let prompted = log.matching(log.start(), Line::new("prompting the agent"));
    assert_eq!(prompted.len(), 1, "{prompted:?}");
    assert_eq!(prompted[0]["span"]["event_id"], mention.id.to_hex());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_mentions_get_a_reaction_unless_disabled() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "react please").await;
    scene.reply_to(&mention).await;
    // Heard, then answered: two reactions, both in the group.
    reactions(&scene, &mention, 2).await;
    let reactions = owner
        .client
        .fetch_events(
            Filter::new().author(bot).kind(Kind::Reaction).event(mention.id),
            Duration::from_secs(5),
        )
        .await
        .expect("fetch");
    assert_eq!(reactions.len(), 2);
    for reaction in reactions.iter() {
        assert!(
            reaction
                .tags
                .iter()
                .any(|tag| tag.kind() == TagKind::h() && tag.content() == Some("room"))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reply_mode_publishes_no_answer_of_its_own() {
    let mut scene = Scene::builder()
        .flags(&["--reply-mode", "agent", "--no-reactions"])
        .start()
        .await;
    let bot = scene.bot;
    let mark = scene.bridge.log.cursor();
    let mention = scene.mention("room", "post it yourself").await;
    let finished = scene
        .bridge
        .log
        .wait(mark, Line::new("turn finished").in_turn(&mention.id))
        .await;
    // Stopped, the daemon has published all it ever will: it flushes its
    // outbox before it exits, and says so when it cannot.
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "clean exit: {status}");
    let log = &scene.bridge.log;
    let unsent = Line::new("some replies are still unsent; they are published at the next start");
    assert!(log.matching(log.start(), unsent).is_empty());
    // The bot's identity (profile, relay lists) and its announcements
    // (groups list, handler information) are no answer: they go out in
    // every reply mode (tests/e2e/identity.rs, announcements.rs).
    let identity = [
        Kind::Metadata,
        Kind::RelayList,
        Kind::InboxRelays,
        Kind::SimpleGroups,
        Kind::Custom(31990),
    ];
    let everything: Vec<Event> = scene
        .owner
        .client
        .fetch_events(Filter::new().author(bot), Duration::from_secs(5))
        .await
        .expect("fetch")
        .into_iter()
        .filter(|event| !identity.contains(&event.kind))
        .collect();
    assert!(
        everything.is_empty(),
        "the daemon published nothing: {everything:?}"
    );
    assert_eq!(finished["outcome"], "answered");
}

/// The bot's reactions to `mention`, as emoji, waiting until `count` are there.
async fn reactions(scene: &Scene, mention: &Event, count: usize) -> Vec<String> {
    let probe = async || {
        let filter = Filter::new()
            .author(scene.bot)
            .kind(Kind::Reaction)
            .event(mention.id);
        let found = scene
            .owner
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch");
        let emoji: Vec<String> = found.iter().map(|event| event.content.clone()).collect();
        (emoji.len() >= count).then_some(emoji)
    };
    eventually(PATIENCE, probe, || format!("{count} reactions to {}", mention.id)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_follow_a_mention_from_heard_to_answered_or_given_up() {
    let scene = Scene::builder().start().await;
    let answered = scene.mention("room", "answer me").await;
    scene.reply_to(&answered).await;
    let mut seen = reactions(&scene, &answered, 2).await;
    seen.sort();
    assert_eq!(seen, ["✅", "👀"]);

    // An agent that fails every try: retried, then given up with a notice.
    let doomed = scene.mention("other-room", "[fail] this cannot work").await;
    let notice = scene.reply_to(&doomed).await;
    assert!(notice.content.contains("Giving up"), "{}", notice.content);
    let mut seen = reactions(&scene, &doomed, 2).await;
    seen.sort();
    assert_eq!(seen, ["⚠\u{fe0f}", "👀"]);
}

/// A mention dropped because the bot is set to drop what arrives mid-turn
/// (`--dedup drop`) ends given up, like any mention that got a notice
/// instead of an answer: its 👀 is not the last word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_dropped_mid_turn_ends_marked_given_up() {
    let scene = Scene::builder()
        .flags(&["--multiple-event-handling", "queue", "--dedup", "drop"])
        .start()
        .await;
    let work = scene
        .mention_mid_turn("room", "long work [rounds=20] [delay=100]")
        .await;
    let dropped = scene.mention("room", "and this too").await;
    let notice = scene.reply_to(&dropped).await;
    assert!(notice.content.contains("set to drop"), "{}", notice.content);
    let mut seen = reactions(&scene, &dropped, 2).await;
    seen.sort();
    assert_eq!(seen, ["⚠\u{fe0f}", "👀"]);
    scene.reply_to(&work).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_the_owner_cancels_ends_marked_cancelled_not_heard() {
    let scene = Scene::builder().start().await;
    let work = scene
        .mention_mid_turn("room", "endless work [rounds=1000] [delay=100]")
        .await;
    scene.cancel_by_owner("room", &work).await;
    let mut seen = reactions(&scene, &work, 2).await;
    seen.sort();
    assert_eq!(seen, ["👀", "🚫"], "heard, then cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_the_owner_commands() {
    let scene = Scene::builder().start().await;
    let help = scene.mention("room", "!help").await;
    let reply = scene.reply_to(&help).await;
    for command in ["!cancel", "!status", "!rotate", "!help"] {
        assert!(reply.content.contains(command), "{}", reply.content);
    }
}

/// `!version` (issue 36 §2: a command is one file and one registry line)
/// answers the owner with the daemon's name and version, as `--version`
/// prints them; from anyone else the same text is an ordinary message,
/// prompted to the agent like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_version_is_answered_and_a_strangers_is_an_ordinary_message() {
    let scene = Scene::builder().flags(&["--respond-to", "anyone"]).start().await;
    let log = &scene.bridge.log;
    let version = format!("acp-bridge {}", env!("CARGO_PKG_VERSION"));
    let asked = scene.mention("room", "!version").await;
    let reply = scene.reply_to(&asked).await;
    println!("the owner's !version is answered: {:?}", reply.content);
    assert_eq!(reply.content, version);
    log.wait(
        log.start(),
        Line::new("owner command").with("command", "!version"),
    )
    .await;

    let stranger = scene.join().await;
    let said = stranger.mention_in_note(&scene.bot, "!version").await;
    log.wait(log.start(), Line::accepted(&said.id)).await;
    let answer = stranger.replies_from(&scene.bot, &said.id, 1).await.remove(0);
    println!("a stranger's !version is prompted: {:?}", answer.content);
    assert!(
        answer.content.contains("done:"),
        "the agent answered: {}",
        answer.content
    );
    assert!(!answer.content.contains(&version), "{}", answer.content);
    assert_eq!(
        log.matching(log.start(), Line::new("owner command")).len(),
        1,
        "only the owner's was a command"
    );
}

/// A kind 9 in group `channel`, replying to `parent` in the thread `root`,
/// without tagging the bot.
fn untagged_group_reply(channel: &str, root: &EventId, parent: &EventId, text: &str) -> EventBuilder {
    EventBuilder::new(Kind::Custom(9), text).tags([
        Tag::custom(TagKind::h(), [channel]),
        Tag::parse(["e", &root.to_hex(), "", "root"]).expect("tag"),
        Tag::parse(["e", &parent.to_hex(), "", "reply"]).expect("tag"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_in_an_answered_thread_need_no_mention_and_only_the_heard_are_followed() {
    let scene = Scene::builder().start().await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let first = scene.mention("room", "start a thread").await;
    let answer = scene.reply_to(&first).await;
    log.wait(mark, Line::new("following the answered threads")).await;

    // The owner replies in the thread without tagging the bot: answered there.
    let follow_up = owner
        .publish(untagged_group_reply(
            "room",
            &first.id,
            &answer.id,
            "and one more thing",
        ))
        .await;
    let second = scene.reply_to(&follow_up).await;
    assert!(
        e_tags(&second).contains(&(first.id.to_hex(), "root".to_owned())),
        "{second:?}"
    );

    // A stranger's reply in the same thread is not heard (owner-only).
    let stranger_reply = stranger
        .publish(untagged_group_reply("room", &first.id, &answer.id, "me too"))
        .await;
    log.wait(mark, Line::dropped(&stranger_reply.id, "not_heard"))
        .await;

    // A reply in a thread the bot never answered is no mention.
    let elsewhere = owner
        .publish(
            EventBuilder::new(Kind::Custom(9), "talking among ourselves")
                .tag(Tag::custom(TagKind::h(), ["room"])),
        )
        .await;
    let unrelated = owner
        .publish(untagged_group_reply(
            "room",
            &elsewhere.id,
            &elsewhere.id,
            "right?",
        ))
        .await;
    // Bounded by a later follow-up in the answered thread.
    let later = owner
        .publish(untagged_group_reply("room", &first.id, &second.id, "last one"))
        .await;
    scene.reply_to(&later).await;
    assert!(owner.events_referencing(&bot, &unrelated.id).await.is_empty());
    assert!(log.matching(mark, Line::accepted(&unrelated.id)).is_empty());
    assert!(log.matching(mark, Line::accepted(&stranger_reply.id)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_follow_threads_off_a_reply_must_tag_the_bot() {
    let scene = Scene::builder().flags(&["--follow-threads", "off"]).start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let first = scene.mention("room", "start a thread").await;
    let answer = scene.reply_to(&first).await;
    let untagged = owner
        .publish(untagged_group_reply("room", &first.id, &answer.id, "no tag"))
        .await;
    let tagged = scene.mention("room", "a tagged one after it").await;
    scene.reply_to(&tagged).await;
    assert!(owner.events_referencing(&bot, &untagged.id).await.is_empty());
    assert!(log.matching(log.start(), Line::accepted(&untagged.id)).is_empty());
}

/// A reply dated before the bot's first answer in its thread was people
/// talking among themselves (the thread's subscription delivers it again):
/// not a follow-up, even from the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_older_than_the_first_answer_is_no_follow_up() {
    let scene = Scene::builder().start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let first = scene.mention("room", "start a thread").await;
    let answer = scene.reply_to(&first).await;
    log.wait(mark, Line::new("following the answered threads")).await;

    let before_the_answer = Timestamp::from(answer.created_at.as_secs() - 60);
    let older = owner
        .publish(
            untagged_group_reply("room", &first.id, &first.id, "said before the bot answered")
                .custom_created_at(before_the_answer),
        )
        .await;
    // Bounded by a later follow-up in the same thread.
    let later = owner
        .publish(untagged_group_reply(
            "room",
            &first.id,
            &answer.id,
            "a real follow-up",
        ))
        .await;
    scene.reply_to(&later).await;
    assert!(owner.events_referencing(&bot, &older.id).await.is_empty());
    assert!(log.matching(mark, Line::accepted(&older.id)).is_empty());
}

/// Answering in more new threads than the recent thread subscription holds
/// (32) folds them into the bulk subscription, sent once with every root;
/// threads followed through either keep their follow-ups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_past_the_recent_subscription_are_folded_in_and_still_followed() {
    const THREADS: usize = 33;
    let scene = Scene::builder().start().await;
    let (owner, log) = (&scene.owner, &scene.bridge.log);
    let mark = log.cursor();
    let mut answered = Vec::new();
    for n in 0..THREADS {
        let mention = scene.mention("room", &format!("thread {n}")).await;
        let answer = scene.reply_to(&mention).await;
        answered.push((mention, answer));
    }
    let folded = Line::new("following the answered threads")
        .with("subscription", "acp-bridge-threads")
        .with("threads", THREADS as u64);
    log.wait(mark, folded).await;
    for (mention, answer) in [&answered[0], &answered[THREADS - 1]] {
        let follow_up = owner
            .publish(untagged_group_reply("room", &mention.id, &answer.id, "and more"))
            .await;
        scene.reply_to(&follow_up).await;
    }
}

/// Answering in a new thread renews the thread subscription live only,
/// plus a one-shot read of the new thread: the threads followed before are
/// not replayed (each replayed event cost a parse, a signature check and a
/// drop), and both threads keep being followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_answered_thread_does_not_replay_the_followed_ones() {
    let scene = Scene::builder().start().await;
    let (owner, log) = (&scene.owner, &scene.bridge.log);
    let first = scene.mention("room", "thread one").await;
    let first_answer = scene.reply_to(&first).await;
    // Following the first thread brings its answer back once (by the live
    // subscription or the one-shot read, whichever it came after): that
    // is not a replay, so the check starts after it.
    let renewed = Line::new("following the answered threads");
    log.wait(log.start(), renewed.clone().with("threads", 1)).await;
    let own_answer = Line::dropped(&first_answer.id, "own_event");
    log.wait(log.start(), own_answer.clone()).await;
    let mark = log.cursor();
    let second = scene.mention("room", "thread two").await;
    let second_answer = scene.reply_to(&second).await;
    log.wait(mark, renewed.clone().with("threads", 2)).await;

    // Live events of both threads still count as follow-ups; they come
    // after whatever the renewal replayed, so they bound the check below.
    let in_first = owner
        .publish(untagged_group_reply(
            "room",
            &first.id,
            &first_answer.id,
            "more on one",
        ))
        .await;
    scene.reply_to(&in_first).await;
    let in_second = owner
        .publish(untagged_group_reply(
            "room",
            &second.id,
            &second_answer.id,
            "more on two",
        ))
        .await;
    scene.reply_to(&in_second).await;
    let since_mark = log.lines(mark);
    let second_renewal = since_mark
        .iter()
        .position(|line| renewed.clone().with("threads", 2).matches(line))
        .expect("the renewal waited for above");
    assert!(
        !since_mark[second_renewal..]
            .iter()
            .any(|line| own_answer.matches(line)),
        "the first thread's answer came back after the second thread was answered"
    );
}

/// A sibling bot that follows up in a thread without tagging the bot and
/// always replies to the thread's first message (as flat-threaded clients
/// do) would start a new chain each time; counted as continuing the
/// thread's exchange, it is cut at `--max-bot-hops` like a tagged chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_following_up_untagged_in_a_followed_thread_is_cut_at_the_hop_bound() {
    const MAX_BOT_HOPS: u32 = 3;
    /// Follow-ups the other bot sends at most: far past the bound.
    const ROUNDS: usize = 8;
    let hops = MAX_BOT_HOPS.to_string();
    let scene = Scene::builder().flags(&["--max-bot-hops", &hops]).start().await;
    let other_bot = scene.join().await;
    let attestation = acp_bridge::Attestation::sign(&scene.owner.keys, &other_bot.public_key(), "")
        .expect("sign")
        .to_tag();
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let root = scene.mention("bots", "you two, talk it over").await;
    scene.reply_to(&root).await;
    log.wait(mark, Line::new("following the answered threads")).await;

    let (mut answered, mut cut_at) = (0, None);
    for round in 1..=ROUNDS {
        let follow_up = other_bot
            .publish(
                untagged_group_reply("bots", &root.id, &root.id, &format!("my turn again ({round})"))
                    .tag(attestation.clone()),
            )
            .await;
        let (accepted, cut) = (
            Line::accepted(&follow_up.id),
            Line::dropped(&follow_up.id, "loop_bound"),
        );
        let probe = async || {
            let lines = log.lines(mark);
            if lines.iter().any(|line| cut.matches(line)) {
                return Some(false);
            }
            lines.iter().any(|line| accepted.matches(line)).then_some(true)
        };
        let taken = eventually(PATIENCE, probe, || {
            format!("follow-up {round} taken or cut; log tail:\n{}", log.tail(30))
        })
        .await;
        if !taken {
            cut_at = Some(round);
            break;
        }
        other_bot.replies_from(&bot, &follow_up.id, 1).await;
        answered += 1;
    }
    println!(
        "untagged follow-ups of another bot, each replying to the thread's root: answered {answered}, cut at follow-up {cut_at:?} (--max-bot-hops {MAX_BOT_HOPS}; {ROUNDS} sent at most)"
    );
    assert_eq!(
        (answered, cut_at),
        (MAX_BOT_HOPS as usize - 1, Some(MAX_BOT_HOPS as usize))
    );
}

/// Two sibling bridges of one owner, both tagged at a thread's start: each
/// follows the thread and hears the other's answers there untagged (each
/// answer tags only the author it answers). The exchange stops at the hop
/// bound: after both are settled, and settled again, nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bridges_following_one_thread_stop_at_the_hop_bound() {
    const MAX_BOT_HOPS: usize = 2;
    let hops = MAX_BOT_HOPS.to_string();
    let stage = Scene::builder().flags(&["--max-bot-hops", &hops]).stage().await;
    let url = stage.relay.url();
    let twin_spec = BridgeSpec::new(&url, stage.owner.public_key()).flags(&["--max-bot-hops", &hops]);
    attest_profile(&url, &stage.owner.keys, &stage.spec.bot).await;
    attest_profile(&url, &stage.owner.keys, &twin_spec.bot).await;
    let scene = stage.start().await;
    let twin = Bridge::start(&twin_spec);
    twin.ready().await;
    let (owner, bot, twin_bot) = (&scene.owner, scene.bot, twin_spec.bot.public_key());
    let logs = [&scene.bridge.log, &twin.log];
    let marks = [logs[0].cursor(), logs[1].cursor()];

    let root = owner
        .publish(group_message(
            &bot,
            "bots",
            "you two, talk it over",
            &[Tag::public_key(twin_bot)],
        ))
        .await;
    let cut = Line::new("bot-to-bot reply chain cut: not answering");
    let cuts = || -> usize {
        let per_log = logs.iter().zip(marks);
        per_log
            .map(|(log, mark)| log.matching(mark, cut.clone()).len())
            .sum()
    };
    let describe = || format!("a cut; logs:\n{}\n---\n{}", logs[0].tail(30), logs[1].tail(30));
    eventually(PATIENCE, async || (cuts() > 0).then_some(()), describe).await;

    // Each bridge answers its group in order: once a later mention there is
    // answered, everything it took in before was answered too.
    let settle_both = async || {
        scene.settle("bots").await;
        let later = owner
            .mention_in_group(&twin_bot, "bots", "settle [rounds=1]")
            .await;
        owner.replies_from(&twin_bot, &later.id, 1).await;
        let ours = owner.events_referencing(&bot, &root.id).await.len();
        let theirs = owner.events_referencing(&twin_bot, &root.id).await.len();
        (ours, theirs)
    };
    let settled = settle_both().await;
    let settled_again = settle_both().await;
    println!(
        "two sibling bridges in one followed thread (--max-bot-hops {MAX_BOT_HOPS}): answers in the thread {settled:?}, after settling again {settled_again:?}, chains cut {}",
        cuts()
    );
    assert_eq!(settled, settled_again, "the exchange stopped");
    assert!(
        settled.0 <= MAX_BOT_HOPS + 1 && settled.1 <= MAX_BOT_HOPS + 1,
        "each answers the root and at most {MAX_BOT_HOPS} hops: {settled:?}"
    );
}
