//! The operator's MCP servers (`--mcp-servers FILE`, issue 24 §2), end to
//! end: the file's servers reach each session beside the bridge's own,
//! converted into the ACP shape, filtered by the transports the agent
//! advertises, with `${VARIABLE}` secrets resolved from the daemon's
//! environment and never written to its log. The scripted agent reports
//! what it was offered (`[say-mcp-servers]`: names, transports, variable
//! names, whether each value is set; never a value).

use crate::support::*;

/// The secret the file refers to; nothing else in a run contains it.
const SECRET: &str = "operator-secret-7f3a9c1e5b";

fn servers_file() -> String {
    let dir = temp_dir("mcp-servers");
    let file = dir.join("mcp-servers.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {
            "github": {"command": "/bin/true", "args": ["--stdio"], "env": {"GITHUB_TOKEN": "${OPERATOR_TEST_SECRET}"}},
            "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${OPERATOR_TEST_SECRET}"}},
            "events": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
        }}"#,
    )
    .expect("servers file");
    file.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_servers_reach_the_session_by_transport_and_the_secret_is_never_logged() {
    let file = servers_file();
    let scene = Scene::builder()
        .flags(&["--mcp-servers", &file])
        .env(&[("OPERATOR_TEST_SECRET", SECRET)])
        .start()
        .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();

    let mention = scene.mention("room", "[say-mcp-servers]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains(
            "mcp servers: acp_bridge (http; headers Authorization=set), docs (http; headers Authorization=set), github (stdio /bin/true; env GITHUB_TOKEN=set)"
        ),
        "the bridge's own first, then the operator's the agent takes (it advertises http, not sse): {}",
        answer.content
    );
    log.wait(
        mark,
        Line::new("the agent does not advertise this MCP transport: the operator's server is left out of its sessions")
            .with("server", "events")
            .with("transport", "sse"),
    )
    .await;

    // Another conversation's session: the left-out server is not logged again.
    let other = scene.mention("other-room", "[say-mcp-servers]").await;
    let answer = owner.reply_containing(&bot, &other.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("github (stdio /bin/true; env GITHUB_TOKEN=set)")
    );
    let left_out = log.matching(
        mark,
        Line::new("the agent does not advertise this MCP transport: the operator's server is left out of its sessions"),
    );
    assert_eq!(left_out.len(), 1, "once per agent: {left_out:#?}");

    assert!(
        !log.text().contains(SECRET),
        "the resolved secret is never in the daemon's log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_http_gets_every_server_over_stdio_and_no_http_one() {
    let file = servers_file();
    let scene = Scene::builder()
        .agent(&["--no-mcp-http"])
        .flags(&["--mcp-servers", &file])
        .env(&[("OPERATOR_TEST_SECRET", SECRET)])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "[say-mcp-servers]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    let offered = answer
        .content
        .lines()
        .find(|line| line.starts_with("mcp servers: "))
        .expect("the agent said what it was offered");
    assert!(
        offered.starts_with("mcp servers: acp_bridge (stdio ")
            && offered.contains("env ACP_BRIDGE_MCP_TOKEN=set ACP_BRIDGE_MCP_SOCKET=set)")
            && offered.ends_with(", github (stdio /bin/true; env GITHUB_TOKEN=set)"),
        "{offered}"
    );
    assert!(
        !offered.contains("docs") && !offered.contains("events"),
        "{offered}"
    );
}
