//! Budgets, end to end: a limit reached gives the next mention up with an
//! honest notice before its turn starts, for that author only (or for
//! everyone, the bot's), and the spend outlives a restart.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// How long a daemon is given to stop before the restart.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// `person`'s first reply from the bot to `mention` (a refusal).
async fn reply_to(person: &Person, bot: &PublicKey, mention: &Event) -> String {
    person.replies_from(bot, &mention.id, 1).await.remove(0).content
}

/// The answer to `mention` whose turn took the last of a limit: it comes
/// with the warning that the budget is all spent.
async fn answer_after_warning(person: &Person, bot: &PublicKey, mention: &Event) -> String {
    let replies = person.replies_from(bot, &mention.id, 2).await;
    let (warnings, answers): (Vec<&Event>, Vec<&Event>) = replies
        .iter()
        .partition(|reply| reply.content.starts_with("Note: ") && reply.content.contains(" is 100% spent"));
    assert!(warnings.len() == 1 && answers.len() == 1, "{replies:?}");
    answers[0].content.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_daily_quota_refuses_that_stranger_and_no_one_else() {
    let scene = Scene::builder()
        .flags(&["--respond-to", "anyone", "--budget-author-per-day", "1 turns"])
        .start()
        .await;
    let (stranger, other) = (scene.join().await, scene.join().await);
    let (bot, log) = (scene.bot, &scene.bridge.log);

    let first = stranger.mention_in_group(&bot, "room", "first question").await;
    let answer = answer_after_warning(&stranger, &bot, &first).await;
    assert!(!answer.starts_with("Sorry"), "{answer}");

    let mark = log.cursor();
    let second = stranger.mention_in_group(&bot, "room", "second question").await;
    let notice = reply_to(&stranger, &bot, &second).await;
    assert!(
        notice.contains("your daily budget is spent (1 turns of 1 turns). It resets at ")
            && notice.contains(" 00:00 UTC."),
        "{notice}"
    );
    assert!(
        !notice.contains("--budget"),
        "only the owner is told the flag: {notice}"
    );
    log.wait(
        mark,
        Line::new("mention refused: budget spent").with("scope", "author"),
    )
    .await;

    let from_other = other.mention_in_group(&bot, "room", "my first question").await;
    let answer = answer_after_warning(&other, &bot, &from_other).await;
    assert!(
        !answer.starts_with("Sorry"),
        "another author is still answered: {answer}"
    );
    let from_owner = scene.mention("room", "and mine").await;
    let answer = scene.reply_to(&from_owner).await.content;
    assert!(
        !answer.contains("budget"),
        "the owner has no author quota: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_own_quota_binds_strangers_and_not_the_allowlist() {
    let friend = Keys::generate();
    let friend_npub = friend.public_key().to_bech32().expect("npub");
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "anyone",
            "--allowlist",
            &friend_npub,
            "--budget-stranger-per-day",
            "1 turns",
        ])
        .start()
        .await;
    let friend = Person::join_as(friend, &scene.relay.url()).await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);

    let first = stranger.mention_in_group(&bot, "room", "first question").await;
    let answer = answer_after_warning(&stranger, &bot, &first).await;
    assert!(!answer.starts_with("Sorry"), "{answer}");
    let mark = log.cursor();
    let second = stranger.mention_in_group(&bot, "room", "second question").await;
    let notice = reply_to(&stranger, &bot, &second).await;
    assert!(
        notice.contains(
            "your daily budget as a stranger to this bot is spent (1 turns of 1 turns). It resets at "
        ),
        "{notice}"
    );
    log.wait(
        mark,
        Line::new("mention refused: budget spent").with("scope", "stranger"),
    )
    .await;

    let raise = scene.mention("room", "!budget stranger day 2 turns").await;
    let answer = scene.reply_to(&raise).await.content;
    assert_eq!(answer, "The stranger per day limit is now 2 turns.");
    let third = stranger.mention_in_group(&bot, "room", "third question").await;
    // Warned once a day per scope: the first turn's warning was the one.
    let answer = reply_to(&stranger, &bot, &third).await;
    assert!(
        !answer.starts_with("Sorry"),
        "the owner's override raised it: {answer}"
    );

    for text in ["a friend's first", "a friend's second"] {
        let mention = friend.mention_in_group(&bot, "room", text).await;
        let answer = reply_to(&friend, &bot, &mention).await;
        assert!(
            !answer.contains("budget"),
            "an allowlisted author is no stranger, and has no author limit: {answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bots_daily_limit_binds_the_owner_and_outlives_a_restart() {
    let mut scene = Scene::builder()
        .flags(&["--budget-bot-per-day", "1 turns"])
        .start()
        .await;
    let first = scene.mention("room", "the day's one question").await;
    let answer = answer_after_warning(&scene.owner, &scene.bot, &first).await;
    assert!(!answer.starts_with("Sorry"), "{answer}");

    scene.bridge.terminate(STOP_WITHIN).await;
    let spec = scene.spec();
    scene.restart(spec).await;

    let second = scene.mention("room", "one more, after the restart").await;
    let notice = scene.reply_to(&second).await.content;
    assert!(
        notice.contains("the bot's daily budget is spent (1 turns of 1 turns)"),
        "{notice}"
    );
    assert!(
        notice.contains("To raise it, send !budget bot day AMOUNT (or off), or change --budget-bot-per-day (ACP_BRIDGE_BUDGET_BOT_PER_DAY)"),
        "the owner is told how to raise it: {notice}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversations_daily_limit_refuses_there_and_not_elsewhere() {
    let scene = Scene::builder()
        .flags(&["--budget-conversation-per-day", "1 turns"])
        .start()
        .await;
    let first = scene.mention("busy", "the room's one question").await;
    let answer = answer_after_warning(&scene.owner, &scene.bot, &first).await;
    assert!(!answer.starts_with("Sorry"), "{answer}");

    let second = scene.mention("busy", "and another here").await;
    let notice = scene.reply_to(&second).await.content;
    assert!(
        notice.contains("this conversation's daily budget is spent (1 turns of 1 turns)")
            && notice.contains("--budget-conversation-per-day"),
        "{notice}"
    );
    let elsewhere = scene.mention("quiet", "a question in another room").await;
    let answer = answer_after_warning(&scene.owner, &scene.bot, &elsewhere).await;
    assert!(
        !answer.starts_with("Sorry"),
        "another conversation is still answered: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_tells_the_owner_what_was_spent_today_and_this_month() {
    let scene = Scene::builder().start().await;
    let question = scene.mention("room", "a question that costs a turn").await;
    scene.reply_to(&question).await;
    let elsewhere = scene.mention("other", "and one elsewhere").await;
    scene.reply_to(&elsewhere).await;

    let asked = scene.mention("room", "!usage").await;
    let usage = scene.reply_to(&asked).await.content;
    let today = usage.lines().next().unwrap_or_default();
    assert!(
        today.starts_with("Today (since ")
            && today.contains("the bot 2 turns")
            && today.contains("this conversation 1 turns")
            && today.contains("you 2 turns"),
        "{usage}"
    );
    assert!(
        usage
            .lines()
            .nth(1)
            .is_some_and(|month| month.starts_with("This month (since ")),
        "{usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_near_its_limit_is_warned_once_even_across_a_restart() {
    let mut scene = Scene::builder()
        .flags(&["--budget-bot-per-day", "5 turns", "--budget-warn-at", "40"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let first = scene.mention("room", "one").await;
    scene.reply_to(&first).await;
    assert_eq!(
        owner.events_referencing(&bot, &first.id).await.len(),
        1,
        "20%: no warning"
    );

    let second = scene.mention("room", "two").await;
    let replies = owner.replies_from(&bot, &second.id, 2).await;
    let warnings: Vec<&Event> = replies
        .iter()
        .filter(|reply| {
            reply
                .content
                .contains("Note: the bot's daily budget is 40% spent (2 turns of 5 turns)")
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{replies:?}");

    let third = scene.mention("room", "three").await;
    scene.reply_to(&third).await;
    scene.bridge.terminate(STOP_WITHIN).await;
    let spec = scene.spec();
    scene.restart(spec).await;
    let fourth = scene.mention("room", "four").await;
    let answer = scene.reply_to(&fourth).await;
    for mention in [&third, &fourth] {
        let replies = scene.owner.events_referencing(&scene.bot, &mention.id).await;
        assert_eq!(replies.len(), 1, "warned once a day: {replies:?}");
    }
    assert!(!answer.content.starts_with("Sorry"), "{}", answer.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_overrides_a_limit_until_set_back_to_the_flags() {
    let scene = Scene::builder()
        .flags(&["--budget-bot-per-day", "1 turns"])
        .start()
        .await;
    let first = scene.mention("room", "the day's one question").await;
    answer_after_warning(&scene.owner, &scene.bot, &first).await;

    let raised = scene.mention("room", "!budget bot day 3 turns").await;
    let answer = scene.reply_to(&raised).await.content;
    assert_eq!(answer, "The bot per day limit is now 3 turns.");
    let listed = scene.mention("room", "!budget").await;
    let limits = scene.reply_to(&listed).await.content;
    assert!(
        limits.contains("bot per day: 3 turns (set by !budget)"),
        "{limits}"
    );
    assert!(limits.contains("author per month: off (flag)"), "{limits}");

    let second = scene
        .mention("room", "a second question, under the raised limit")
        .await;
    let answer = scene.reply_to(&second).await.content;
    assert!(!answer.starts_with("Sorry"), "{answer}");

    let back = scene.mention("room", "!budget bot day default").await;
    let answer = scene.reply_to(&back).await.content;
    assert_eq!(answer, "The bot per day limit is now back to the flag's.");
    let third = scene.mention("room", "a third question").await;
    let notice = scene.reply_to(&third).await.content;
    assert!(
        notice.contains("the bot's daily budget is spent (2 turns of 1 turns)"),
        "{notice}"
    );

    let wrong = scene.mention("room", "!budget bot week 5 USD").await;
    let refusal = scene.reply_to(&wrong).await.content;
    assert!(refusal.starts_with("\"week\" is not a period."), "{refusal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_counted_is_what_each_turn_added_to_its_session() {
    let scene = Scene::builder()
        .flags(&[
            "--budget-bot-per-day",
            "1 USD, 2k tokens",
            "--budget-warn-at",
            "100",
        ])
        .metrics()
        .start()
        .await;
    // The agent reports its session's total: 0.60, then 0.90. The turns
    // spent 0.60 and 0.30, under the limit; counting totals would pass it.
    for (text, cost) in [
        ("[session-cost=0.60] [tokens=400/500] one", "0.60"),
        ("[session-cost=0.90] [tokens=300/200] two", "0.90"),
    ] {
        let mention = scene.mention("room", text).await;
        let answer = scene.reply_to(&mention).await.content;
        assert!(!answer.starts_with("Sorry"), "{cost}: {answer}");
    }
    let asked = scene.mention("room", "!usage").await;
    let usage = scene.reply_to(&asked).await.content;
    assert!(
        usage.contains("the bot 2 turns, 1400 tokens, 0.9000 USD"),
        "{usage}"
    );

    let third = scene.mention("room", "[session-cost=1.20] three").await;
    scene.reply_to(&third).await;
    let fourth = scene.mention("room", "four").await;
    let notice = scene.reply_to(&fourth).await.content;
    assert!(
        notice.contains("the bot's daily budget is spent (1.20 USD of 1.00 USD)"),
        "{notice}"
    );

    let body = http_get(scene.metrics_port(), "/metrics").await;
    for series in [
        "acp_bridge_budget_spend_total{unit=\"turns\"} 3",
        "acp_bridge_budget_spend_total{unit=\"tokens\"} 1400",
        "acp_bridge_budget_refusals_total{scope=\"bot\"} 1",
        "acp_bridge_budget_bot_limit{period=\"day\",unit=\"USD\"} 1",
        "acp_bridge_budget_bot_limit{period=\"day\",unit=\"tokens\"} 2000",
        "acp_bridge_budget_bot_spent{period=\"day\",unit=\"tokens\"} 1400",
    ] {
        assert!(
            body.lines().any(|line| line == series),
            "{series} absent:\n{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_the_per_turn_cap_is_cancelled_and_its_people_told() {
    let scene = Scene::builder()
        .flags(&["--budget-turn-cap", "1 USD, 1M tokens"])
        .metrics()
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    // Each round reports the session 0.40 USD dearer: 30 rounds of 100 ms
    // would take 3 s and 12 USD; the cap stops it at the third report.
    let runaway = scene
        .mention("room", "[rounds=30] [delay=100] [round-cost=0.40] keep going")
        .await;
    let notice = scene.reply_to(&runaway).await.content;
    assert!(
        notice
            .starts_with("I stopped this turn at the per-turn spending cap: it spent 1.20 USD of 1.00 USD."),
        "{notice}"
    );
    assert!(!notice.contains("Cancelled by the owner"), "{notice}");
    log.wait(
        mark,
        Line::new("turn finished")
            .with("outcome", "capped")
            .with("stop_reason", "cancelled"),
    )
    .await;

    let next = scene.mention("room", "a short one").await;
    let answer = scene.reply_to(&next).await.content;
    assert!(!answer.contains("per-turn"), "the cap is per turn: {answer}");
    let body = http_get(scene.metrics_port(), "/metrics").await;
    for series in [
        "acp_bridge_budget_turns_capped_total 1",
        "acp_bridge_turns_total{outcome=\"capped\"} 1",
    ] {
        assert!(
            body.lines().any(|line| line == series),
            "{series} absent:\n{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_steered_into_a_running_turn_passes_the_budget_check() {
    let scene = Scene::builder()
        .flags(&["--respond-to", "anyone", "--budget-author-per-day", "1 turns"])
        .start()
        .await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let first = stranger.mention_in_group(&bot, "room", "first question").await;
    answer_after_warning(&stranger, &bot, &first).await;

    // The owner's long turn runs; the stranger, whose day is spent, writes
    // meanwhile: the default mode (steer) would fold it into that turn.
    let long = scene
        .mention_mid_turn("room", "a long one [rounds=12] [delay=300]")
        .await;
    let mark = log.cursor();
    let steered = stranger
        .mention_in_group(&bot, "room", "fold this in for free")
        .await;
    let notice = reply_to(&stranger, &bot, &steered).await;
    assert!(
        notice.contains("your daily budget is spent (1 turns of 1 turns)"),
        "{notice}"
    );
    log.wait(
        mark,
        Line::new("mention refused: budget spent").with("scope", "author"),
    )
    .await;
    let answer = scene.reply_to(&long).await.content;
    assert!(
        !answer.contains("fold this in"),
        "the refused mention never reached the agent: {answer}"
    );
}
