//! `--permission-policy ask-owner`: the agent's permission questions are
//! asked in the thread, and only the owner's reply answers them.

mod support;

use std::time::Duration;

use support::*;

const ASKED: &str = "asks for permission";

fn ask_owner_spec(relay: &TestRelay, owner: &Person, extra: &[&str]) -> BridgeSpec {
    let mut flags = vec!["--permission-policy", "ask-owner"];
    flags.extend_from_slice(extra);
    BridgeSpec::new(&relay.url(), owner.public_key())
        .agent(&["--rounds", "2", "--round-delay-ms", "50"])
        .flags(&flags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_allows_and_the_tool_runs() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &[]);
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let mention = owner
        .mention_in_group(&bot, "room", "delete the temp files [permission]")
        .await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    assert!(
        p_tags(&question, &owner.public_key()),
        "the question mentions the owner"
    );
    assert!(
        question.content.contains("1. Allow once (allow once)"),
        "{}",
        question.content
    );
    assert!(
        question.content.contains("3. Reject once (reject once)"),
        "{}",
        question.content
    );
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "1")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_once)"),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_rejects_by_name_and_a_strangers_reply_is_ignored() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let stranger = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &["--respond-to", "anyone"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner
        .mention_in_group(&bot, "room", "wipe the disk [permission]")
        .await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    let meddling = stranger
        .reply_in_group(&bot, "room", &mention.id, &question.id, "1")
        .await;
    bridge
        .wait_for_log("ignored a reply to a permission question from someone other than the owner")
        .await;
    assert!(
        owner.events_referencing(&bot, &meddling.id).await.is_empty(),
        "no answer to the stranger"
    );
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "Reject once")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: rejected (reject_once)"),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_times_out_as_reject() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &["--permission-timeout", "1s"]);
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let mention = owner.mention_in_group(&bot, "room", "risky [permission]").await;
    owner.reply_containing(&bot, &mention.id, ASKED).await;
    owner
        .reply_containing(&bot, &mention.id, "No answer within 1 s")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: rejected (reject_once)"),
        "never allow on timeout: {}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_cancels_the_question_and_the_turn() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &[]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner
        .mention_in_group(&bot, "room", "slow and risky [permission]")
        .await;
    owner.reply_containing(&bot, &mention.id, ASKED).await;
    let status = owner.mention_in_group(&bot, "room", "!status").await;
    let status = owner.replies_from(&bot, &status.id, 1).await.remove(0);
    assert!(
        status
            .content
            .contains("waiting for the owner to answer a permission question"),
        "{}",
        status.content
    );
    owner.mention_in_group(&bot, "room", "!cancel").await;
    owner
        .reply_containing(&bot, &mention.id, "Cancelled by the owner")
        .await;
    let finished = bridge.log_events("turn finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["outcome"], "cancelled_by_owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_while_waiting_gets_the_honest_notice_and_lands_after_the_answer() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &[]).agent(&["--rounds", "3", "--round-delay-ms", "200"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner
        .mention_in_group(&bot, "room", "deploy it [permission]")
        .await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    let steer = owner.mention_in_group(&bot, "room", "and tag the release").await;
    let notice = owner
        .reply_containing(&bot, &steer.id, "waiting for the owner")
        .await;
    assert!(
        notice.content.contains("scripted tool"),
        "names the question: {}",
        notice.content
    );
    assert!(
        !bridge.log().contains("steered into the live turn"),
        "nothing steered while parked"
    );
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "allow once")
        .await;
    let answer = owner.reply_containing(&bot, &steer.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_once)"),
        "{}",
        answer.content
    );
    assert!(
        answer.content.contains("steer: ") && answer.content.contains("> and tag the release"),
        "{}",
        answer.content
    );
    bridge.wait_for_log("steered into the live turn").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conversations_asking_at_once_are_answered_independently() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &[]);
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let in_a = owner
        .mention_in_group(&bot, "room-a", "task a [permission]")
        .await;
    let in_b = owner
        .mention_in_group(&bot, "room-b", "task b [permission]")
        .await;
    let question_a = owner.reply_containing(&bot, &in_a.id, ASKED).await;
    let question_b = owner.reply_containing(&bot, &in_b.id, ASKED).await;
    owner
        .reply_in_group(&bot, "room-b", &in_b.id, &question_b.id, "4")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    owner
        .reply_in_group(&bot, "room-a", &in_a.id, &question_a.id, "2")
        .await;
    let answer_a = owner.reply_containing(&bot, &in_a.id, "done:").await;
    let answer_b = owner.reply_containing(&bot, &in_b.id, "done:").await;
    assert!(
        answer_a.content.contains("tool: allowed (allow_always)"),
        "{}",
        answer_a.content
    );
    assert!(
        answer_b.content.contains("tool: rejected (reject_always)"),
        "{}",
        answer_b.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_the_stale_question_is_marked_expired_and_the_mention_resumes() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = ask_owner_spec(&relay, &owner, &[]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner
        .mention_in_group(&bot, "room", "needs a yes [permission]")
        .await;
    owner.reply_containing(&bot, &mention.id, ASKED).await;
    bridge.kill_hard();

    let restarted = spec
        .clone()
        .agent(&["--rounds", "1", "--round-delay-ms", "10", "--ignore-directives"]);
    let _bridge = Bridge::start(&restarted).ready().await;
    owner
        .reply_containing(&bot, &mention.id, "question expired")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(answer.content.contains("> needs a yes"), "{}", answer.content);
}
