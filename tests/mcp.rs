//! The bridge's own MCP server (issue 24 §1), end to end: the scripted
//! agent advertises `mcpCapabilities.http`, is offered the server in
//! `session/new`, and calls its tools over HTTP with the bearer token it
//! was given, as a real agent's MCP client does.

mod support;

use nostr_sdk::prelude::*;
use support::*;

/// Whether the bot's message is labelled interim (it answers nothing).
fn is_interim(event: &Event) -> bool {
    event.tags.iter().any(|tag| {
        matches!(tag.as_slice(), [name, label, namespace, ..] if name == "l" && label == "interim" && namespace == "acp-bridge")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_message_mid_turn_lands_in_the_thread_before_the_answer() {
    let scene = Scene::builder().metrics().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene
        .mention("room", "report as you go [mcp-post=working on it] [rounds=2]")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("mcp post_message: ok: posted in the thread"),
        "the tool answered the agent mid-turn: {}",
        answer.content
    );
    assert!(!is_interim(&answer), "the answer finishes the mention");

    // Everything the turn left is in once the conversation is settled.
    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    let posted: Vec<&Event> = said
        .iter()
        .filter(|event| event.content == "working on it")
        .collect();
    assert_eq!(posted.len(), 1, "posted once: {said:#?}");
    let posted = posted[0];
    assert!(is_interim(posted), "a posted message does not answer the mention");
    assert_eq!(posted.kind, Kind::Custom(9));
    let threaded: std::collections::BTreeSet<_> = [
        (mention.id.to_hex(), "root".to_owned()),
        (mention.id.to_hex(), "reply".to_owned()),
    ]
    .into();
    assert_eq!(
        e_tags(posted),
        threaded,
        "threaded under the mention, like the answer"
    );
    assert!(
        posted.created_at <= answer.created_at,
        "posted mid-turn, before the answer"
    );
    let answers: Vec<&Event> = said.iter().filter(|event| !is_interim(event)).collect();
    assert_eq!(answers.len(), 1, "the answer still arrives once: {said:#?}");
    assert_eq!(answers[0].id, answer.id);

    let calls = metric(
        scene.metrics_port(),
        "acp_bridge_mcp_tool_calls_total{tool=\"post_message\",outcome=\"ok\"}",
    )
    .await;
    assert_eq!(calls, 1.0, "the call is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_a_wrong_token_gets_401_and_posts_nothing() {
    let scene = Scene::builder().metrics().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mark = scene.bridge.log.cursor();

    let mention = scene
        .mention("room", "[mcp-post=sneaky words] [mcp-wrong-token]")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains("mcp post_message: HTTP 401"),
        "{}",
        answer.content
    );
    scene
        .bridge
        .log
        .wait(mark, Line::new("MCP request without a live token: 401"))
        .await;

    // The answer came after the refused call; the settled thread holds
    // nothing else from the bot.
    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    assert_eq!(said.len(), 1, "only the answer: {said:#?}");
    assert_eq!(said[0].id, answer.id);
    let refused = metric(scene.metrics_port(), "acp_bridge_mcp_unauthorized_total").await;
    assert!(refused >= 1.0, "the refusal is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mcp_off_no_server_is_offered() {
    let scene = Scene::builder().flags(&["--mcp", "off"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "[mcp-post=hello]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("mcp post_message: no HTTP MCP server was offered"),
        "{}",
        answer.content
    );
}
