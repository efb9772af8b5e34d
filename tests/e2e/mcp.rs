//! The bridge's own MCP server (issue 24 §1), end to end: the scripted
//! agent advertises `mcpCapabilities.http`, is offered the server in
//! `session/new`, and calls its tools over HTTP with the bearer token it
//! was given, as a real agent's MCP client does.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// The bot's reactions to `event_id` on the relay now.
async fn reactions_to(person: &Person, bot: &PublicKey, event_id: &EventId) -> Vec<String> {
    let filter = Filter::new().author(*bot).kind(Kind::Reaction).event(*event_id);
    let events = person
        .client
        .fetch_events(filter, Duration::from_secs(5))
        .await
        .expect("fetch");
    events.into_iter().map(|event| event.content).collect()
}

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
    let status = scene.mention("room", "!status").await;
    let status = scene.reply_to(&status).await;
    assert!(
        status
            .content
            .contains("Agents' calls of the bridge's tools (MCP): 1."),
        "!status shows the call: {}",
        status.content
    );
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
        answer.content.contains("mcp: no HTTP MCP server was offered"),
        "{}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_is_offered_the_same_token_and_it_still_works() {
    let scene = Scene::builder()
        .agent(&[
            "--rounds",
            "1",
            "--round-delay-ms",
            "10",
            "--reopen-sessions",
            "resume",
        ])
        .frame_log()
        .start()
        .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let first = scene.mention("room", "hello").await;
    scene.reply_to(&first).await;
    // The agent dies between turns; the next turn's agent resumes the session.
    let mark = log.cursor();
    for pid in scene.bridge.agent_pids() {
        std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
            .expect("kill");
    }
    log.wait(mark, Line::new("agent exited unexpectedly")).await;
    let second = scene.mention("room", "[mcp-post=back again]").await;
    let answer = owner.reply_containing(&bot, &second.id, "done: ").await;
    assert!(
        answer.content.contains("mcp post_message: ok"),
        "the resumed session's token works: {}",
        answer.content
    );
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed");

    // Frames are in order per agent process only: compared as a set.
    let offered = scene.offered_mcp_tokens();
    let mut methods: Vec<&str> = offered.iter().map(|(method, _)| method.as_str()).collect();
    methods.sort_unstable();
    assert_eq!(methods, ["session/new", "session/resume"]);
    assert!(offered[0].1.starts_with("Bearer "), "{offered:?}");
    assert_eq!(
        offered[0].1, offered[1].1,
        "one token for the session's life in this run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn react_marks_a_message_of_this_conversation() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "nice work [mcp-react=🎉]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains("mcp react: ok: reacted"),
        "{}",
        answer.content
    );
    let probe = async || {
        let reactions = reactions_to(owner, &bot, &mention.id).await;
        reactions.iter().any(|emoji| emoji == "🎉").then_some(())
    };
    eventually(PATIENCE, probe, || "the agent's 🎉 on the mention".to_owned()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn react_refuses_a_message_of_another_conversation() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let elsewhere = scene.mention("other-room", "hello").await;
    scene.reply_to(&elsewhere).await;
    let text = format!("[mcp-react=🎉] [mcp-event={}]", elsewhere.id.to_hex());
    let mention = scene.mention("room", &text).await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains(&format!(
            "mcp react: error: no message {} in this conversation",
            elsewhere.id.to_hex()
        )),
        "{}",
        answer.content
    );
    // The refusal came before the answer, and both rooms are settled since.
    scene.settle("other-room").await;
    scene.settle("room").await;
    let reactions = reactions_to(owner, &bot, &elsewhere.id).await;
    assert!(
        !reactions.iter().any(|emoji| emoji == "🎉"),
        "another conversation's message got no reaction: {reactions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_finishing_in_the_shutdown_grace_can_still_post() {
    let mut scene = Scene::builder().start().await;
    let mention = scene
        .mention_mid_turn("room", "[mcp-post=almost done] [rounds=1] [delay=500]")
        .await;
    // SIGTERM while the turn waits before its tool call: the turn finishes
    // in the grace, and its call is carried out, not left waiting.
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "{status}");
    let (owner, bot) = (&scene.owner, scene.bot);
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains("mcp post_message: ok"),
        "{}",
        answer.content
    );
    let said = owner.events_referencing(&bot, &mention.id).await;
    assert!(
        said.iter()
            .any(|event| event.content == "almost done" && is_interim(event)),
        "{said:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_past_the_budget_are_refused_to_the_model() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "[mcp-post=step] [mcp-posts=6]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    let ok = answer.content.matches("mcp post_message: ok").count();
    let refused = answer
        .content
        .matches("mcp post_message: error: too many messages and reactions")
        .count();
    assert_eq!((ok, refused), (5, 1), "{}", answer.content);
    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    let posted = said
        .iter()
        .filter(|event| event.content.starts_with("step ("))
        .count();
    assert_eq!(posted, 5, "only the admitted posts are in the thread: {said:#?}");
}

/// The `host:port` the daemon serves its MCP server on over HTTP.
async fn mcp_address(log: &LogFile) -> String {
    log.wait(
        log.start(),
        Line::new("serving the bridge's MCP server on loopback"),
    )
    .await["addr"]
        .as_str()
        .expect("addr")
        .to_owned()
}

/// What the bridge's MCP server answers a request of `token`'s for a
/// path it does not serve: its status line (401: the token is not live;
/// 404: it is, and was checked first).
pub(crate) async fn mcp_status_for(scene: &Scene, token: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = mcp_address(&scene.bridge.log).await;
    let mut stream = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let request = format!(
        "GET /elsewhere HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A request of `token`'s to the MCP server at `addr` whose body never
/// comes: it holds its connection while the server waits for the rest.
async fn stalled_request(addr: &str, token: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{{",
        token = format_args!("Authorization: {token}")
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

/// The first bytes `stream` is answered with ("" when it is closed unanswered).
async fn first_answer(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0u8; 64];
    let read = stream.read(&mut buffer).await.unwrap_or(0);
    String::from_utf8_lossy(&buffer[..read]).into_owned()
}

/// One conversation's agent opening as many connections as the server
/// serves, each with a request it never finishes, cannot shut another
/// conversation out: past its share its requests get 429 and their
/// connections are closed, and the other conversation is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_conversation_cannot_take_every_connection_from_another() {
    const SERVED: usize = 64;
    let scene = Scene::builder().frame_log().start().await;
    let log = &scene.bridge.log;
    for room in ["a", "b"] {
        let mention = scene.mention(room, "hello").await;
        scene.reply_to(&mention).await;
    }
    let addr = mcp_address(log).await;
    let tokens: Vec<String> = scene
        .offered_mcp_tokens()
        .into_iter()
        .map(|(_, token)| token)
        .collect();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert_ne!(tokens[0], tokens[1]);

    let mut flood = Vec::new();
    for _ in 0..SERVED {
        flood.push(stalled_request(&addr, &tokens[0]).await);
    }
    // Those past the share are answered at once; the rest wait for bodies
    // that never come.
    let (answered_tx, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let mut held = Vec::new();
    for mut stream in flood {
        let answered_tx = answered_tx.clone();
        held.push(tokio::spawn(async move {
            let answer = first_answer(&mut stream).await;
            let _ = answered_tx.send(answer);
            stream
        }));
    }
    let mut refused = 0;
    let waited = tokio::time::timeout(PATIENCE, async {
        while refused < SERVED - 16 {
            let answer = answered.recv().await.expect("answers");
            assert!(answer.starts_with("HTTP/1.1 429"), "{answer:?}");
            refused += 1;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "{refused} of the flood's requests refused within {PATIENCE:?}; log:\n{}",
        log.tail(10)
    );
    // The other conversation's request is served: a wrong path, answered
    // 404 after its token was read (not closed unanswered for want of a
    // connection).
    let mut other = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    use tokio::io::AsyncWriteExt;
    other
        .write_all(
            format!(
                "GET /elsewhere HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\n\r\n",
                tokens[1]
            )
            .as_bytes(),
        )
        .await
        .expect("write");
    let answer = first_answer(&mut other).await;
    let warned = log
        .matching(
            log.start(),
            Line::new("MCP server: too many requests of one conversation at once; 429, connection closed"),
        )
        .len();
    println!(
        "one conversation's {SERVED} stalled requests: {refused} refused with 429 ({warned} logged), {} held; the other conversation answered {:?}",
        SERVED - refused,
        answer.lines().next().unwrap_or_default()
    );
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer:?}");
    for task in held {
        task.abort();
    }
}

/// Agents may put their MCP token where other local users can read it
/// (claude-agent-acp's SDK passes its MCP servers, headers included, on
/// the `claude` CLI's command line). A process of another user presenting
/// a live token is refused; the agents' user (here the daemon's) is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_token_from_a_process_of_another_user_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: acting as another user needs root (CI runs as root)");
        return;
    }
    let scene = Scene::builder().frame_log().start().await;
    let log = &scene.bridge.log;
    let mention = scene.mention("room", "hello").await;
    scene.reply_to(&mention).await;
    let addr = mcp_address(log).await;
    let (_, token) = scene.offered_mcp_tokens().pop().expect("a token offered");
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    // The same request, by a shell of `uid`: its first answer line.
    let ask_as = |uid: u32| {
        use std::os::unix::process::CommandExt;
        let script = format!(
            "exec 3<>/dev/tcp/{host}/{port}; printf 'GET /elsewhere HTTP/1.1\\r\\nHost: {addr}\\r\\nAuthorization: {token}\\r\\nConnection: close\\r\\n\\r\\n' >&3; head -n 1 <&3"
        );
        let output = std::process::Command::new("bash")
            .args(["-c", &script])
            .uid(uid)
            .gid(uid)
            .output()
            .expect("bash");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let mark = log.cursor();
    let stranger = ask_as(65534);
    let daemons_own = ask_as(0);
    log.wait(
        mark,
        Line::new("MCP request with a live token from a process of another user: 403 (the token may have leaked, e.g. from an agent's command line)")
            .with("caller_uid", 65534),
    )
    .await;
    println!(
        "a live MCP token over HTTP: from uid 65534 {stranger:?}; from the agents' (daemon's) uid {daemons_own:?}"
    );
    assert!(stranger.starts_with("HTTP/1.1 403"), "{stranger:?}");
    assert!(daemons_own.starts_with("HTTP/1.1 404"), "{daemons_own:?}");
}
