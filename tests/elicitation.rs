//! The agent's structured questions (ACP `elicitation/create`, form mode)
//! under `--permission-policy ask-owner`: asked in the thread, filled in
//! from the owner's plain reply, declined on timeout, cancelled with the
//! turn, withdrawn by the agent; never advertised without ask-owner.

mod support;

use nostr_sdk::prelude::*;
use serde_json::{Value, json};
use support::*;

const ASKED: &str = "The agent asks:";

/// A daemon that asks the owner, with `extra` flags.
fn ask_owner(extra: &[&str]) -> SceneBuilder {
    Scene::builder()
        .agent(&["--rounds", "2", "--round-delay-ms", "50"])
        .flags(&["--permission-policy", "ask-owner"])
        .flags(extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_is_answered_by_number_then_by_name_and_a_strangers_reply_is_ignored() {
    let scene = ask_owner(&["--respond-to", "anyone"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let stranger = scene.join().await;
    let mention = scene.mention("room", "paint it [elicit=choice]").await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
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
    let ignored = Line::new("ignored a reply to a permission question from someone other than the owner");
    let log = &scene.bridge.log;
    log.wait(log.start(), ignored.with("event_id", meddling.id.to_hex()))
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
    let question = owner.reply_containing(&bot, &again.id, ASKED).await;
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
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
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
async fn an_unanswered_question_is_declined_at_the_timeout() {
    let scene = ask_owner(&["--permission-timeout", "1s"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "why [elicit=text]").await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    assert!(
        question.content.contains("no answer within 1 s means decline"),
        "{}",
        question.content
    );
    owner
        .reply_containing(
            &bot,
            &mention.id,
            "No answer within 1 s: the agent's question (Why do you want it?) was declined.",
        )
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("elicitation: decline"),
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
    owner.reply_containing(&bot, &form.id, ASKED).await;
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
async fn a_question_the_agent_withdraws_is_closed_in_the_thread() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene
        .mention("room", "maybe paint it [withdraw-elicit] [delay=300]")
        .await;
    owner.reply_containing(&bot, &mention.id, ASKED).await;
    let withdrawn = owner
        .reply_containing(&bot, &mention.id, "no longer needs an answer")
        .await;
    assert!(
        withdrawn.content.contains("Which colour?"),
        "{}",
        withdrawn.content
    );
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("elicitation: withdrawn"),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_while_parked_on_a_form_question_is_told_so_and_lands_after_the_answer() {
    let scene = ask_owner(&[])
        .agent(&["--rounds", "3", "--round-delay-ms", "200"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "paint it [elicit=choice]").await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
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
