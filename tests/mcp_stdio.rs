//! The bridge's own MCP server over stdio (issue 24 §1), end to end: the
//! scripted agent does not advertise `mcpCapabilities.http`
//! (`--no-mcp-http`), so it is offered a stdio entry (`acp-bridge mcp`
//! with the token and the socket's name in its env) and runs it to call
//! the tools, as a real agent runs a stdio MCP server.

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
async fn post_message_over_stdio_lands_in_the_thread() {
    let scene = Scene::builder()
        .agent(&["--no-mcp-http"])
        .frame_log()
        .metrics()
        .start()
        .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();

    let mention = scene
        .mention("room", "report as you go [mcp-post=working on it]")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("mcp post_message: ok: posted in the thread"),
        "the tool answered the agent over stdio: {}",
        answer.content
    );
    log.wait(mark, Line::new("MCP connection over the local socket"))
        .await;
    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    let posted: Vec<&Event> = said
        .iter()
        .filter(|event| event.content == "working on it")
        .collect();
    assert_eq!(posted.len(), 1, "posted once: {said:#?}");
    assert!(is_interim(posted[0]));

    // The entry the agent was offered: no `type`, this executable, the
    // token in env and not in argv.
    let frames = scene.agent_frames();
    let new = frames
        .iter()
        .find(|frame| frame["method"] == "session/new")
        .expect("a session/new");
    let entry = &new["params"]["mcpServers"][0];
    assert_eq!(entry["name"], "acp_bridge");
    assert!(entry.get("type").is_none(), "{entry}");
    assert!(
        entry["command"]
            .as_str()
            .is_some_and(|command| command.ends_with("/acp-bridge")),
        "{entry}"
    );
    assert_eq!(entry["args"], serde_json::json!(["mcp"]));
    let names: Vec<&str> = entry["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|pair| pair["name"].as_str())
        .collect();
    assert_eq!(names, ["ACP_BRIDGE_MCP_TOKEN", "ACP_BRIDGE_MCP_SOCKET"]);
    let calls = metric(
        scene.metrics_port(),
        "acp_bridge_mcp_tool_calls_total{tool=\"post_message\",outcome=\"ok\"}",
    )
    .await;
    assert_eq!(calls, 1.0, "the call is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_connection_with_a_wrong_token_is_closed_and_posts_nothing() {
    let scene = Scene::builder().agent(&["--no-mcp-http"]).metrics().start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();

    let mention = scene
        .mention("room", "[mcp-post=sneaky words] [mcp-wrong-token]")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("mcp post_message: the server closed the connection"),
        "{}",
        answer.content
    );
    log.wait(mark, Line::new("MCP connection without a live token: closed"))
        .await;

    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    assert_eq!(said.len(), 1, "only the answer: {said:#?}");
    assert_eq!(said[0].id, answer.id);
    let refused = metric(scene.metrics_port(), "acp_bridge_mcp_unauthorized_total").await;
    assert!(refused >= 1.0, "the refusal is counted");
}
