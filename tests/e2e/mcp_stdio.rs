//! The bridge's own MCP server over stdio (issue 24 §1), end to end: the
//! scripted agent does not advertise `mcpCapabilities.http`
//! (`--no-mcp-http`), so it is offered a stdio entry (`acp-bridge mcp`
//! with the token and the socket's name in its env) and runs it to call
//! the tools, as a real agent runs a stdio MCP server.

use nostr_sdk::prelude::*;

use crate::support::*;

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

/// The uid `acp-bridge mcp` is run as in [`mcp_child_as`].
const NOBODY: u32 = 65534;

/// What `acp-bridge mcp` run as `uid` (group nobody) with `env` answered
/// to an `initialize`: its first line on stdout, or `None` when the bridge
/// closed the connection unanswered.
async fn mcp_child_as(uid: u32, env: &[(String, String)]) -> Option<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(bridge_binary())
        .arg("mcp")
        .env_clear()
        .envs(env.iter().cloned())
        .uid(uid)
        .gid(NOBODY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("acp-bridge mcp");
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"stranger","version":"0"}}}"#;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .expect("write");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    tokio::time::timeout(PATIENCE, stdout.read_line(&mut line))
        .await
        .expect("an answer or the end in time")
        .expect("read");
    (!line.is_empty()).then_some(line)
}

/// The local socket takes a live token only from a process of the uid its
/// conversation's agent runs as (`SO_PEERCRED`; the daemon's own too):
/// another local user who read the token (from `/proc/<pid>/environ` of a
/// process of theirs, say) gets the connection closed unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_token_from_a_process_of_another_uid_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: running processes as other users needs root (CI runs as root)");
        return;
    }
    let frames = temp_dir("frames-open");
    std::fs::set_permissions(&frames, std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let mut stage = Scene::builder()
        .agent(&["--no-mcp-http"])
        .flags(&["--agent-user", "nobody"])
        .metrics()
        .stage()
        .await;
    stage.spec.frame_log_dir = Some(frames);
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let mention = scene.mention("room", "hello").await;
    scene.reply_to(&mention).await;
    let frames = scene.agent_frames();
    let new = frames
        .iter()
        .find(|frame| frame["method"] == "session/new")
        .expect("a session/new");
    let env: Vec<(String, String)> = new["params"]["mcpServers"][0]["env"]
        .as_array()
        .expect("the stdio entry's env")
        .iter()
        .map(|pair| {
            let text = |key: &str| pair[key].as_str().expect("text").to_owned();
            (text("name"), text("value"))
        })
        .collect();

    let mark = log.cursor();
    let stranger = NOBODY - 1;
    let refused = mcp_child_as(stranger, &env).await;
    assert_eq!(refused, None, "another uid is not served");
    log.wait(
        mark,
        Line::new("MCP connection with a live token from a process of another uid than its conversation's agent: closed")
            .with("peer_uid", stranger),
    )
    .await;
    let served = mcp_child_as(NOBODY, &env)
        .await
        .expect("the agent's uid is served");
    assert!(served.contains(r#""result""#), "{served}");
    let unauthorized = metric(scene.metrics_port(), "acp_bridge_mcp_unauthorized_total").await;
    assert_eq!(unauthorized, 1.0, "the refusal is counted");
    println!(
        "a live MCP token presented over the local socket: by uid {stranger} refused, by the agent's uid {NOBODY} served"
    );
}
