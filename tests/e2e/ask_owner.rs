//! `--permission-policy ask-owner`: the agent's questions (permission
//! requests and ACP form elicitations) are asked in the thread (in the
//! owner's DM when the thread is a DM with someone else), and only the
//! owner's reply answers them. Form elicitation is advertised only then.

use acp_bridge::Attestation;
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

const ASKED: &str = "asks for permission";
/// How a form question (elicitation) starts.
const FORM_ASKED: &str = "The agent asks:";

/// A daemon that asks the owner, with `extra` flags.
fn ask_owner(extra: &[&str]) -> SceneBuilder {
    Scene::builder()
        .agent(&["--rounds", "2", "--round-delay-ms", "50"])
        .flags(&["--permission-policy", "ask-owner"])
        .flags(extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_allows_and_the_tool_runs() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "delete the temp files [permission]").await;
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
async fn the_owner_rejects_by_name_and_a_strangers_reply_is_no_answer_but_is_heard() {
    let scene = ask_owner(&["--respond-to", "anyone"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let stranger = scene.join().await;
    let mention = scene.mention("room", "wipe the disk [permission]").await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    let meddling = stranger
        .reply_in_group(&bot, "room", &mention.id, &question.id, "1")
        .await;
    // Not an answer (only the owner answers), but an ordinary mention: held
    // behind the question, and its author told so.
    stranger
        .reply_containing(&bot, &meddling.id, "waiting for the owner")
        .await;
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
    let told = "No answer within 1 s: the agent's request (scripted tool) was rejected.";
    times_out("risky [permission]", ASKED, told, "tool: rejected (reject_once)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_form_question_times_out_as_decline() {
    let told = "No answer within 1 s: the agent's question (Why do you want it?) was declined.";
    times_out("why [elicit=text]", FORM_ASKED, told, "elicitation: decline").await;
}

/// The agent asks (`prompt`'s directive) and nobody answers within 1 s:
/// the thread is `told`, and the agent's answer reports `outcome` (never
/// an allow, never an accept).
async fn times_out(prompt: &str, asked: &str, told: &str, outcome: &str) {
    let scene = ask_owner(&["--permission-timeout", "1s"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", prompt).await;
    let question = owner.reply_containing(&bot, &mention.id, asked).await;
    assert!(
        question.content.contains("(no answer within 1 s means "),
        "{}",
        question.content
    );
    owner.reply_containing(&bot, &mention.id, told).await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(answer.content.contains(outcome), "{}", answer.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_cancels_the_question_and_the_turn() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "slow and risky [permission]").await;
    owner.reply_containing(&bot, &mention.id, ASKED).await;
    let status = scene.mention("room", "!status").await;
    let status = scene.reply_to(&status).await;
    assert!(
        status.content.contains("Agent questions pending: 1."),
        "{}",
        status.content
    );
    scene.mention("room", "!cancel").await;
    owner
        .reply_containing(&bot, &mention.id, "Cancelled by the owner")
        .await;
    // One turn for the mention, then only the later one's.
    let later = scene.settle("room").await;
    let log = &scene.bridge.log;
    let finished = log.matching(log.start(), Line::new("turn finished"));
    let turns: Vec<&serde_json::Value> = finished.iter().map(|line| &line["span"]["event_id"]).collect();
    assert_eq!(turns, [&mention.id.to_hex(), &later.id.to_hex()], "{finished:?}");
    assert_eq!(finished[0]["outcome"], "cancelled_by_owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_while_waiting_gets_the_honest_notice_and_lands_after_the_answer() {
    let scene = ask_owner(&[])
        .agent(&["--rounds", "3", "--round-delay-ms", "200"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "deploy it [permission]").await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let steer = scene.mention("room", "and tag the release").await;
    let notice = owner
        .reply_containing(&bot, &steer.id, "waiting for the owner")
        .await;
    assert!(
        notice.content.contains("scripted tool"),
        "names the question: {}",
        notice.content
    );
    log.wait(mark, Line::new("mid-turn mentions held until the owner answers"))
        .await;
    assert!(
        log.matching(log.start(), Line::new("steered into the live turn"))
            .is_empty(),
        "nothing steered while parked"
    );
    let mark = log.cursor();
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
    log.wait(mark, Line::new("steered into the live turn")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conversations_asking_at_once_are_answered_independently() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let in_a = scene.mention("room-a", "task a [permission]").await;
    let in_b = scene.mention("room-b", "task b [permission]").await;
    let question_a = owner.reply_containing(&bot, &in_a.id, ASKED).await;
    let question_b = owner.reply_containing(&bot, &in_b.id, ASKED).await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    owner
        .reply_in_group(&bot, "room-b", &in_b.id, &question_b.id, "4")
        .await;
    // B has its answer before A's owner says anything.
    let answered = Line::new("the owner answered the agent's question")
        .with("question", question_b.id.to_hex())
        .with("kind", "reject_always");
    log.wait(mark, answered).await;
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
    let mut scene = ask_owner(&[]).start().await;
    let bot = scene.bot;
    let mention = scene.mention("room", "needs a yes [permission]").await;
    scene.owner.reply_containing(&bot, &mention.id, ASKED).await;
    scene.bridge.kill_hard();

    let restarted = scene
        .spec()
        .agent(&["--rounds", "1", "--round-delay-ms", "10", "--ignore-directives"]);
    scene.restart(restarted).await;
    let owner = &scene.owner;
    owner
        .reply_containing(&bot, &mention.id, "question expired")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(answer.content.contains("> needs a yes"), "{}", answer.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_the_agent_withdraws_is_closed_in_the_thread() {
    let prompt = "maybe delete the files [withdraw-permission] [delay=300]";
    withdrawn(prompt, ASKED, "scripted tool", "tool: rejected (withdrawn)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_question_the_agent_withdraws_is_closed_in_the_thread() {
    let prompt = "maybe paint it [withdraw-elicit] [delay=300]";
    withdrawn(prompt, FORM_ASKED, "Which colour?", "elicitation: withdrawn").await;
}

/// The agent asks (`prompt`'s directive) and takes the question back: the
/// thread is told which (`names`), and the turn goes on to `outcome`.
async fn withdrawn(prompt: &str, asked: &str, names: &str, outcome: &str) {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", prompt).await;
    owner.reply_containing(&bot, &mention.id, asked).await;
    let withdrawn = owner
        .reply_containing(&bot, &mention.id, "no longer needs an answer")
        .await;
    assert!(withdrawn.content.contains(names), "{}", withdrawn.content);
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(answer.content.contains(outcome), "{}", answer.content);
}

/// `person`, attested by `owner` as a sibling bot (published before the
/// daemon starts, so the gate knows it from its first look).
async fn attested_sibling(owner: &Person, person: Person) -> Person {
    let attestation = Attestation::sign(&owner.keys, &person.public_key(), "").expect("sign");
    person
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    person
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_in_a_siblings_dm_goes_to_the_owner_and_public_status_shows_counts_only() {
    let stage = ask_owner(&[]).stage().await;
    let sibling = attested_sibling(&stage.owner, stage.join().await).await;
    let scene = stage.start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let conversation = format!("dm:{}", sibling.public_key().to_hex());

    sibling.dm(&bot, "clean the disk [permission]").await;
    let mut question = owner.dm_containing(&bot, ASKED).await;
    assert!(
        question.content.contains(&conversation),
        "names the conversation: {}",
        question.content
    );

    // In public, counts only; in the owner's DM, which conversation waits on what.
    let status = scene.mention("room", "!status").await;
    let public = scene.reply_to(&status).await;
    assert!(
        public.content.contains("Agent questions pending: 1."),
        "{}",
        public.content
    );
    assert!(
        !public.content.contains("dm:") && !public.content.contains("scripted tool"),
        "no keys, no tool titles in public: {}",
        public.content
    );
    owner.dm(&bot, "!status").await;
    let private = owner.dm_containing(&bot, "Agent questions pending: 1.").await;
    assert!(
        private.content.contains(&format!(
            "{conversation} is waiting for the owner to answer a permission question"
        )),
        "{}",
        private.content
    );

    // The owner's DM answering the question (it references the question's rumor).
    owner.dm_replying(&bot, &question.id(), "1").await;
    owner.dm_containing(&bot, "Answered the agent: Allow once").await;
    let done = sibling.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: allowed (allow_once)"),
        "{}",
        done.content
    );
    let to_sibling = sibling.direct_messages_from(&bot, 1).await;
    assert!(
        to_sibling.iter().all(|message| !message.content.contains(ASKED)),
        "the sibling is never asked: {to_sibling:?}"
    );
    println!(
        "DMs to the sibling: {}; to the owner: {}",
        to_sibling.len(),
        owner.direct_messages_from(&bot, 3).await.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_is_answered_by_number_then_by_name_and_a_strangers_reply_is_no_answer() {
    let scene = ask_owner(&["--respond-to", "anyone"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let stranger = scene.join().await;
    let mention = scene.mention("room", "paint it [elicit=choice]").await;
    let question = owner.reply_containing(&bot, &mention.id, FORM_ASKED).await;
    assert!(
        p_tags(&question, &owner.public_key()),
        "the question mentions the owner"
    );
    assert!(
        question.content.contains("Which colour?") && question.content.contains("1. Red\n2. Green\n3. Blue"),
        "{}",
        question.content
    );
    let meddling = stranger
        .reply_in_group(&bot, "room", &mention.id, &question.id, "3")
        .await;
    stranger
        .reply_containing(&bot, &meddling.id, "waiting for the owner")
        .await;
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "2")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer
            .content
            .contains(r#"elicitation: accept {"colour":"green"}"#),
        "the owner's number, not the stranger's: {}",
        answer.content
    );

    let again = scene.mention("room", "paint it again [elicit=choice]").await;
    let question = owner.reply_containing(&bot, &again.id, FORM_ASKED).await;
    let by_name = owner
        .reply_in_group(&bot, "room", &again.id, &question.id, "blue")
        .await;
    owner
        .reply_containing(&bot, &by_name.id, "Answered the agent: colour: blue.")
        .await;
    let answer = owner.reply_containing(&bot, &again.id, "done:").await;
    assert!(
        answer
            .content
            .contains(r#"elicitation: accept {"colour":"blue"}"#),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_reply_that_does_not_fit_is_corrected_and_the_next_one_fills_the_form() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "set it up [elicit=form]").await;
    let question = owner.reply_containing(&bot, &mention.id, FORM_ASKED).await;
    for listed in [
        "- Colour (choose one, required) [colour]",
        "    2. Green",
        "- count (whole number, required): how many",
        "- urgent (yes/no)",
        "name: value",
    ] {
        assert!(
            question.content.contains(listed),
            "`{listed}` in {}",
            question.content
        );
    }
    let wrong = owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "count: many")
        .await;
    let correction = owner.reply_containing(&bot, &wrong.id, "does not fit").await;
    assert!(
        correction.content.contains("`many` is not a whole number")
            && correction.content.contains("Colour: required"),
        "{}",
        correction.content
    );
    owner
        .reply_in_group(
            &bot,
            "room",
            &mention.id,
            &question.id,
            "urgent: yes\ncolour: red\ncount: 3",
        )
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer
            .content
            .contains(r#"elicitation: accept {"colour":"red","count":3,"urgent":true}"#),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_cancel_answers_pending_form_and_permission_questions_cancelled() {
    let scene = ask_owner(&[]).frame_log().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let form = scene.mention("room-a", "paint it [elicit=choice]").await;
    let permission = scene.mention("room-b", "delete it [permission]").await;
    owner.reply_containing(&bot, &form.id, FORM_ASKED).await;
    owner
        .reply_containing(&bot, &permission.id, "asks for permission")
        .await;
    assert!(answers_to_agents(&scene).is_empty(), "nothing answered yet");

    scene.mention("room-a", "!cancel").await;
    scene.mention("room-b", "!cancel").await;
    owner
        .reply_containing(&bot, &form.id, "Cancelled by the owner")
        .await;
    owner
        .reply_containing(&bot, &permission.id, "Cancelled by the owner")
        .await;
    let answers = answers_to_agents(&scene);
    println!("answers the agents received: {answers:?}");
    assert!(answers.contains(&json!({"action": "cancel"})), "{answers:?}");
    assert!(
        answers.contains(&json!({"outcome": {"outcome": "cancelled"}})),
        "{answers:?}"
    );
    assert_eq!(answers.len(), 2, "one answer per question: {answers:?}");
}

/// The `result`s of the bridge's answers to the agents' own requests.
fn answers_to_agents(scene: &Scene) -> Vec<Value> {
    let frames = scene.agent_frames();
    let answers = frames.iter().filter(|frame| frame.get("method").is_none());
    answers.filter_map(|frame| frame.get("result").cloned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_while_parked_on_a_form_question_is_told_so_and_lands_after_the_answer() {
    let scene = ask_owner(&[])
        .agent(&["--rounds", "3", "--round-delay-ms", "200"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "paint it [elicit=choice]").await;
    let question = owner.reply_containing(&bot, &mention.id, FORM_ASKED).await;
    let steer = scene.mention("room", "and sign it").await;
    let notice = owner
        .reply_containing(&bot, &steer.id, "waiting for the owner")
        .await;
    assert!(
        notice.content.contains("a question (Which colour?)"),
        "{}",
        notice.content
    );
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "red")
        .await;
    let answer = owner.reply_containing(&bot, &steer.id, "done:").await;
    assert!(
        answer.content.contains("> and sign it")
            && answer.content.contains(r#"elicitation: accept {"colour":"red"}"#),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_this_bridge_cannot_show_is_declined_not_fatal() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "sign in [elicit=url]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("elicitation: decline"),
        "{}",
        answer.content
    );
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new("elicitation answered decline"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ask_owner_form_elicitation_is_not_advertised() {
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .frame_log()
        .start()
        .await;
    let mention = scene.mention("room", "paint it [elicit=choice]").await;
    let answer = scene.reply_to(&mention).await;
    assert!(
        answer
            .content
            .contains("elicitation: not advertised by the client, not asked"),
        "{}",
        answer.content
    );
    let frames = scene.agent_frames();
    let initialize = frames
        .iter()
        .find(|frame| frame["method"] == "initialize")
        .expect("initialize");
    assert_eq!(
        initialize["params"]["clientCapabilities"].get("elicitation"),
        None,
        "{initialize}"
    );
}

/// Issue 21: a sibling's DM sent while its own conversation waits on a
/// question (asked in the owner's DM) is a mention like any other: held,
/// told so, and answered once the owner answered. It used to be taken for
/// an answer from someone other than the owner and dropped unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_siblings_dm_while_its_question_waits_is_held_and_answered_not_dropped() {
    let stage = ask_owner(&[])
        .agent(&["--rounds", "3", "--round-delay-ms", "200"])
        .stage()
        .await;
    let sibling = attested_sibling(&stage.owner, stage.join().await).await;
    let scene = stage.start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    sibling.dm(&bot, "clean the disk [permission]").await;
    let mut question = owner.dm_containing(&bot, ASKED).await;
    sibling.dm(&bot, "and empty the trash").await;
    let told = sibling.dm_containing(&bot, "waiting for the owner").await;
    assert!(told.content.contains("scripted tool"), "{}", told.content);

    owner.dm_replying(&bot, &question.id(), "1").await;
    let done = sibling.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: allowed (allow_once)") && done.content.contains("> and empty the trash"),
        "the held DM reached the agent after the answer: {}",
        done.content
    );
    let to_sibling = sibling.direct_messages_from(&bot, 2).await;
    let answered = to_sibling
        .iter()
        .filter(|message| message.content.contains("done:"))
        .count();
    println!("sibling DMs accepted: 2; answered in {answered} reply; told held: 1; twice: 0; lost: 0");
    assert_eq!(answered, 1, "one answer for both DMs: {to_sibling:?}");
}

/// Issue 21: the owner's reply to a question that is closed is not applied
/// to the question open now (a "1" sent again to an answered question, or
/// late to one that timed out, used to answer the next one and could allow
/// the wrong tool): the owner is told it is closed, and the open question
/// still waits for its own answer. (A question closes the same way however
/// it closes; answering it makes the sequence independent of timing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_reply_to_a_closed_question_is_not_applied_to_the_open_one() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let log = &scene.bridge.log;

    owner.dm(&bot, "first job [permission]").await;
    let mut first = owner.dm_containing(&bot, ASKED).await;
    owner.dm_replying(&bot, &first.id(), "3").await;
    owner.dm_containing(&bot, "tool: rejected (reject_once)").await;

    let mark = log.cursor();
    owner.dm(&bot, "second job [permission]").await;
    let asked = log.wait(mark, Line::new("asked the owner")).await;
    let second = EventId::from_hex(asked["question"].as_str().expect("question id")).expect("hex");
    assert_ne!(second, first.id(), "a new question");

    let late = owner.dm_replying(&bot, &first.id(), "1").await;
    owner.dm_containing(&bot, "That question is closed").await;
    log.wait(
        log.start(),
        Line::new("the owner replied to a question that is closed: not applied to another")
            .with("event_id", late.id.to_hex()),
    )
    .await;

    owner.dm_replying(&bot, &second, "Reject once").await;
    let done = eventually(
        PATIENCE,
        async || {
            let messages = owner.direct_messages_from(&bot, 1).await;
            let mut done = messages
                .into_iter()
                .filter(|message| message.content.contains("done:"));
            done.nth(1)
        },
        || "the second job's answer".to_owned(),
    )
    .await;
    assert!(
        done.content.contains("tool: rejected (reject_once)"),
        "the open question got its own answer, not the late one: {}",
        done.content
    );
    let answered = log.matching(log.start(), Line::new("the owner answered the agent's question"));
    println!(
        "owner replies: 3 accepted; questions answered: {} (first, then second by its own reply); told closed: 1; applied to another: 0",
        answered.len()
    );
    assert_eq!(answered.len(), 2, "the late reply answered nothing");
}

/// Issue 36 follow-up: the same question asked twice in one turn (the
/// agent asks again once the first is answered; it comes within the same
/// second) is two events. Same text, tags, author and second used to make
/// the same event id: the relay dropped the second as a duplicate, and the
/// owner could only reply to the first, which was closed. Now both reach
/// the thread, and the owner's answer to the second is the second's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_question_asked_twice_is_two_events_and_the_second_gets_its_own_answer() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let log = &scene.bridge.log;
    at_the_start_of_a_second().await;
    let mention = scene.mention("room", "retry the deploy [permission-twice]").await;
    let first = owner.reply_containing(&bot, &mention.id, ASKED).await;

    let mark = log.cursor();
    owner
        .reply_in_group(&bot, "room", &mention.id, &first.id, "3")
        .await;
    let asked = log.wait(mark, Line::new("asked the owner")).await;
    let second = EventId::from_hex(asked["question"].as_str().expect("question id")).expect("hex");
    assert_ne!(second, first.id, "the second question is an event of its own");
    let questions = eventually(
        PATIENCE,
        async || {
            let events = owner.events_referencing(&bot, &mention.id).await;
            let questions: Vec<Event> = events
                .into_iter()
                .filter(|event| event.content.contains(ASKED))
                .collect();
            (questions.len() == 2).then_some(questions)
        },
        || "both questions on the relay".to_owned(),
    )
    .await;
    assert_eq!(questions[0].content, questions[1].content, "the same question");
    assert!(
        questions.iter().any(|question| question.id == second),
        "the second as the bot recorded it is on the relay"
    );

    owner
        .reply_in_group(&bot, "room", &mention.id, &second, "1")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer
            .content
            .contains("tool: rejected (reject_once), then allowed (allow_once)"),
        "each question got its own answer: {}",
        answer.content
    );
    let gap = questions[1].created_at.as_secs() - questions[0].created_at.as_secs();
    println!(
        "identical questions asked: 2, {gap} s apart by created_at; distinct events on the relay: {}; answers applied: 2 (first rejected, second allowed)",
        questions.len()
    );
}

/// Issue 36 follow-up, in the owner's DM: a question there is a NIP-17
/// rumor, and the owner's answer names the rumor's id, which is made as an
/// event's is. The same question asked twice within the second used to be
/// one rumor id in two wraps: the owner's reply to the second named the
/// first, closed question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_owners_dm_the_same_question_asked_twice_is_two_questions() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    at_the_start_of_a_second().await;
    owner.dm(&bot, "retry the deploy [permission-twice]").await;
    let mut first = owner.dm_containing(&bot, ASKED).await;
    owner.dm_replying(&bot, &first.id(), "3").await;
    let mut questions = eventually(
        PATIENCE,
        async || {
            let messages = owner.direct_messages_from(&bot, 0).await;
            let questions: Vec<UnsignedEvent> = messages
                .into_iter()
                .filter(|message| message.content.contains(ASKED))
                .collect();
            (questions.len() == 2).then_some(questions)
        },
        || "both questions in the owner's DM".to_owned(),
    )
    .await;
    let ids: Vec<EventId> = questions.iter_mut().map(UnsignedEvent::id).collect();
    assert_ne!(ids[0], ids[1], "the second question is a rumor of its own");
    let second = ids
        .into_iter()
        .find(|id| *id != first.id())
        .expect("a new question");
    owner.dm_replying(&bot, &second, "1").await;
    let done = owner.dm_containing(&bot, "done:").await;
    assert!(
        done.content
            .contains("tool: rejected (reject_once), then allowed (allow_once)"),
        "each question got its own answer: {}",
        done.content
    );
    println!(
        "identical questions in the owner's DM: 2, {} s apart; distinct rumor ids: 2; answers applied: 2",
        questions[0]
            .created_at
            .as_secs()
            .abs_diff(questions[1].created_at.as_secs())
    );
}

/// Waits for the wall clock's next whole second, so that both questions
/// (the mention, the first, the owner's answer, the second: half a second
/// here) come within one second, which is what the two tests above are
/// about; it is no wait for an outcome.
async fn at_the_start_of_a_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    let into_the_second = std::time::Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(std::time::Duration::from_secs(1) - into_the_second).await;
}

/// Issue 21: a question longer than a relay's event limit is still posted.
/// A tool call's title of 100 kB (NIP-44 encrypts at most 64 kB, so such a
/// DM could not even be built, and the tool was cancelled unasked) is
/// quoted cut, saying how much is left out, with the options below it; the
/// owner's answer works as for any question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_with_a_huge_tool_title_is_posted_cut_and_answered() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    owner
        .dm(&bot, "run the generated script [permission] [title-bytes=100000]")
        .await;
    let mut question = owner.dm_containing(&bot, ASKED).await;
    assert!(
        question.content.contains("more bytes not shown]")
            && question.content.contains("1. Allow once (allow once)"),
        "cut, the options kept: {} bytes",
        question.content.len()
    );
    owner.dm_replying(&bot, &question.id(), "1").await;
    let done = owner.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: allowed (allow_once)"),
        "{}",
        done.content
    );
    println!(
        "tool title 100000 bytes: question posted in {} bytes, answered 1, cancelled unasked 0",
        question.content.len()
    );
}

/// Issue 21: in the owner's DM with exactly one question open, an untagged
/// DM that reads as an answer answers it; one that does not is a message to
/// the agent (held behind the question, the owner told how to answer), not
/// a failed answer that is thrown away after a correction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_owners_dm_an_untagged_answer_answers_the_one_open_question_and_other_text_waits() {
    let scene = ask_owner(&[])
        .agent(&["--rounds", "3", "--round-delay-ms", "200"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    owner.dm(&bot, "deploy it [permission]").await;
    owner.dm_containing(&bot, ASKED).await;
    owner.dm(&bot, "and tag the release").await;
    owner
        .dm_containing(&bot, "(to answer it, reply to the question itself)")
        .await;
    owner.dm(&bot, "allow once").await;
    owner.dm_containing(&bot, "Answered the agent: Allow once").await;
    let done = owner.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: allowed (allow_once)") && done.content.contains("> and tag the release"),
        "the untagged answer answered, the other DM reached the agent: {}",
        done.content
    );
    let corrections = owner.direct_messages_from(&bot, 1).await;
    assert!(
        corrections
            .iter()
            .all(|message| !message.content.contains("I did not understand that answer")),
        "{corrections:?}"
    );
    println!(
        "owner DMs accepted 3 (1 prompt, 1 message, 1 untagged answer): answered 3 (1 reply for both, 1 notice), corrections 0, lost 0"
    );
}

/// Issue 21, the timed-out flavour: the owner's late "1" to a question that
/// timed out neither allows the tool of the question open now (which times
/// out in its turn, rejected) nor reaches the agent as a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reply_to_a_timed_out_question_allows_nothing() {
    let scene = ask_owner(&["--permission-timeout", "3s"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let log = &scene.bridge.log;

    owner.dm(&bot, "first job [permission]").await;
    let mut first = owner.dm_containing(&bot, ASKED).await;
    owner.dm_containing(&bot, "No answer within 3 s").await;
    // The first turn is over before the second job comes (else it would
    // be steered into it, not asked about).
    owner.dm_containing(&bot, "done:").await;

    let mark = log.cursor();
    owner.dm(&bot, "second job [permission]").await;
    log.wait(mark, Line::new("asked the owner")).await;
    let late = owner.dm_replying(&bot, &first.id(), "1").await;
    owner.dm_containing(&bot, "That question is closed").await;

    let rejected = eventually(
        PATIENCE,
        async || {
            let messages = owner.direct_messages_from(&bot, 1).await;
            let done: Vec<String> = messages
                .into_iter()
                .filter(|message| message.content.contains("done:"))
                .map(|message| message.content)
                .collect();
            (done.len() == 2).then_some(done)
        },
        || "both jobs' answers".to_owned(),
    )
    .await;
    assert!(
        rejected
            .iter()
            .all(|done| done.contains("tool: rejected") && !done.contains("allowed")),
        "nothing was allowed: {rejected:?}"
    );
    assert!(
        log.matching(log.start(), Line::new("the owner answered the agent's question"))
            .is_empty(),
        "the late reply answered no question"
    );
    assert!(
        log.matching(log.start(), Line::new("prompting the agent"))
            .iter()
            .all(|line| line["span"]["event_id"] != late.id.to_hex()),
        "the late reply was not prompted"
    );
    println!("late reply to a timed-out question: told closed 1, tools allowed 0, prompted 0");
}

/// A question about a sibling's DM is asked in the owner's DM, so what
/// becomes of it (here: the agent withdraws it) is said there too, never to
/// the sibling, who was not asked (and must not read the tool's title).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_becomes_of_a_question_about_a_siblings_dm_is_told_to_the_owner_not_the_sibling() {
    let stage = ask_owner(&[]).stage().await;
    let sibling = attested_sibling(&stage.owner, stage.join().await).await;
    let scene = stage.start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    sibling.dm(&bot, "clean the disk [withdraw-permission]").await;
    owner.dm_containing(&bot, ASKED).await;
    let withdrawn = owner.dm_containing(&bot, "no longer needs an answer").await;
    assert!(
        withdrawn.content.contains("About the private conversation with"),
        "{}",
        withdrawn.content
    );
    sibling.dm_containing(&bot, "done:").await;
    let to_sibling = sibling.direct_messages_from(&bot, 1).await;
    assert!(
        to_sibling
            .iter()
            .all(|message| !message.content.contains("no longer needs") && !message.content.contains(ASKED)),
        "the sibling hears nothing of the question: {to_sibling:?}"
    );
    println!(
        "question about a sibling's DM withdrawn: owner told 1, sibling told 0 (DMs to the sibling: {})",
        to_sibling.len()
    );
}
