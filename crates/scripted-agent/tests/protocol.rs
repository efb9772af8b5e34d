//! Drives the real `scripted-agent` binary with raw JSON-RPC lines over its
//! stdio, as a bridge would, and checks the wire contracts that the bridge
//! relies on. Delays are short and waits are generous; no test asserts on
//! durations.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// How long any single read may take before the test fails.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Long enough that a turn cannot end on its own while a test acts on it.
const NEVER_MS: u64 = 60_000;

/// The agent process and both ends of its stdio.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Agent {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-agent"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn scripted-agent");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// Spawns, initializes and opens one session.
    async fn with_session(args: &[&str]) -> (Self, String) {
        let mut agent = Self::spawn(args);
        agent.call("initialize", json!({ "protocolVersion": 1 })).await;
        let session = agent
            .call("session/new", json!({ "cwd": "/tmp", "mcpServers": [] }))
            .await;
        let session_id = session["result"]["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_owned();
        (agent, session_id)
    }

    async fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to agent");
    }

    async fn send_raw(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to agent");
    }

    /// Sends a request and returns its id.
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }))
            .await;
    }

    /// Sends a request and waits for its response.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.until_response(id).await.1
    }

    async fn prompt(&mut self, session_id: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({ "sessionId": session_id, "prompt": [{ "type": "text", "text": text }] }),
        )
        .await
    }

    /// Answers the permission request `ask` with its allow-once option.
    async fn allow(&mut self, ask: &Value) {
        self.send(json!({
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": { "outcome": { "outcome": "selected", "optionId": "opt-a1" } },
        }))
        .await;
    }

    async fn steering(&mut self, session_id: &str, text: &str) -> Value {
        self.call(
            "_session/steering",
            json!({
                "sessionId": session_id,
                "prompt": [{ "type": "text", "text": text }],
                "_meta": { "steering": { "idleBehavior": "promptRequired" } },
            }),
        )
        .await
    }

    async fn steer(&mut self, session_id: &str, run_id: &str, text: &str) -> Value {
        self.call(
            "_goose/unstable/session/steer",
            json!({
                "sessionId": session_id,
                "expectedRunId": run_id,
                "prompt": [{ "type": "text", "text": text }],
            }),
        )
        .await
    }

    /// The next stdout line, parsed as JSON.
    async fn recv(&mut self) -> Value {
        let line = self.recv_line().await.expect("agent closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    async fn recv_line(&mut self) -> Option<String> {
        timeout(READ_TIMEOUT, self.stdout.next_line())
            .await
            .expect("timed out reading the agent")
            .expect("read agent stdout")
    }

    /// Reads until the response to `id`; returns the frames before it too.
    async fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let frame = self.recv().await;
            if frame["id"] == id && frame.get("method").is_none() {
                return (before, frame);
            }
            before.push(frame);
        }
    }

    /// Reads until a frame matches; returns it.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.recv().await;
            if wanted(&frame) {
                return frame;
            }
        }
    }

    /// Waits for the run to be advertised and returns its id.
    async fn active_run(&mut self) -> String {
        let frame = self
            .until(|f| active_run_of(f).is_some_and(|v| v.is_string()))
            .await;
        active_run_of(&frame)
            .and_then(Value::as_str)
            .expect("run id")
            .to_owned()
    }
}

fn update_of(frame: &Value) -> Option<&Value> {
    (frame["method"] == "session/update").then(|| &frame["params"]["update"])
}

fn active_run_of(frame: &Value) -> Option<&Value> {
    update_of(frame)?.get("_meta")?.get("goose")?.get("activeRunId")
}

fn has_kind(frame: &Value, kind: &str) -> bool {
    update_of(frame).is_some_and(|update| update["sessionUpdate"] == kind)
}

fn message_texts(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| has_kind(f, "agent_message_chunk"))
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .map(str::to_owned)
        .collect()
}

fn position(frames: &[Value], wanted: impl Fn(&Value) -> bool) -> usize {
    frames.iter().position(wanted).expect("expected frame is missing")
}

#[tokio::test]
async fn initialize_answers_integer_protocol_version_and_agent_info() {
    let mut agent = Agent::spawn(&[]);
    let answer = agent
        .call(
            "initialize",
            json!({ "protocolVersion": 1, "clientInfo": { "name": "t" } }),
        )
        .await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], json!(1));
    assert!(result["protocolVersion"].is_u64());
    assert_eq!(result["agentInfo"]["name"], "scripted-agent");
    assert!(result["agentInfo"]["version"].is_string());
    assert_eq!(result["agentCapabilities"]["loadSession"], false);
    assert_eq!(result["authMethods"], json!([]));
    assert!(
        result.get("_meta").is_none(),
        "like goose, nothing advertised for goose's steer: {result}"
    );
    let mut steering = Agent::spawn(&["--session-steering"]);
    let answer = steering.call("initialize", json!({ "protocolVersion": 1 })).await;
    assert_eq!(answer["result"]["_meta"]["steering"]["supported"], true);
}

#[tokio::test]
async fn full_turn_clears_run_before_end_turn() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, "hello [rounds=2] [delay=10]").await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");

    assert!(active_run_of(&frames[0]).is_some_and(Value::is_string));
    assert_eq!(
        message_texts(&frames),
        ["round 1/2\n", "round 2/2\n", "done: hello [rounds=2] [delay=10]"]
    );
    let last = frames.last().expect("frames before the answer");
    assert!(active_run_of(last).is_some_and(Value::is_null));
}

#[tokio::test]
async fn steer_mid_turn_folds_into_same_turn() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    // The permission request holds the turn in round 1, so the steer lands
    // before the round-2 boundary whatever the machine's load.
    let id = agent
        .prompt(&session, "work [rounds=2] [delay=10] [permission]")
        .await;
    let run_id = agent.active_run().await;
    let ask = agent.until(|f| f["method"] == "session/request_permission").await;

    let steered = agent.steer(&session, &run_id, "also this").await;
    assert_eq!(steered["result"]["runId"], json!(run_id));
    let message_id = steered["result"]["messageId"]
        .as_str()
        .expect("messageId")
        .to_owned();
    agent.allow(&ask).await;

    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let folded = &frames[position(&frames, |f| has_kind(f, "user_message_chunk"))];
    let update = &folded["params"]["update"];
    assert_eq!(update["content"]["text"], "also this");
    assert_eq!(update["_meta"]["goose"]["steer"], true);
    assert_eq!(update["_meta"]["goose"]["messageId"], json!(message_id));
    let texts = message_texts(&frames);
    let last = texts.last().expect("final message");
    assert!(last.contains("\nsteer: also this"), "{last}");
    assert!(last.contains("tool: allowed (allow_once)"), "{last}");
}

#[tokio::test]
async fn session_steering_injects_into_the_live_turn_which_answers_it() {
    let (mut agent, session) = Agent::with_session(&["--session-steering"]).await;
    let id = agent
        .prompt(&session, "work [rounds=2] [delay=10] [permission]")
        .await;
    let ask = agent.until(|f| f["method"] == "session/request_permission").await;
    let steered = agent.steering(&session, "also this").await;
    assert_eq!(steered["result"], json!({ "outcome": "injected" }));
    agent.allow(&ask).await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(
        !frames.iter().any(|f| has_kind(f, "user_message_chunk")),
        "no goose echo for an injected steer"
    );
    let texts = message_texts(&frames);
    assert!(
        texts.last().expect("final").contains("\nsteer: also this"),
        "{texts:?}"
    );

    // After the turn: the client is told to prompt.
    let idle = agent.steering(&session, "later").await;
    assert_eq!(idle["result"], json!({ "outcome": "promptRequired" }));
    let unknown = agent.steering("nope", "x").await;
    assert_eq!(unknown["error"]["code"], -32002);
}

#[tokio::test]
async fn a_steer_injected_in_the_last_round_is_still_answered() {
    let (mut agent, session) = Agent::with_session(&["--session-steering"]).await;
    // One round, held by its permission question past its only boundary.
    let id = agent.prompt(&session, "work [rounds=1] [permission]").await;
    let ask = agent.until(|f| f["method"] == "session/request_permission").await;
    agent.steering(&session, "the last word").await;
    agent.allow(&ask).await;
    let (frames, _) = agent.until_response(id).await;
    let texts = message_texts(&frames);
    assert!(
        texts.last().expect("final").contains("steer: the last word"),
        "{texts:?}"
    );
}

#[tokio::test]
async fn an_agent_that_ignores_idle_behavior_starts_a_turn_with_no_answer() {
    let (mut agent, session) = Agent::with_session(&[
        "--session-steering",
        "--steering-starts-turns",
        "--round-delay-ms",
        "10",
    ])
    .await;
    let started = agent.steering(&session, "on my own").await;
    assert_eq!(started["result"], json!({ "outcome": "startedNewTurn" }));
    let done = agent
        .until(|f| {
            has_kind(f, "agent_message_chunk")
                && f["params"]["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|text| text.starts_with("done: on my own"))
        })
        .await;
    assert_eq!(done["params"]["sessionId"], json!(session));
    // Its run ends without any response frame: the next frame answers our ping.
    let ping = agent
        .call("session/new", json!({ "cwd": "/tmp", "mcpServers": [] }))
        .await;
    assert!(ping["result"]["sessionId"].is_string());
}

#[tokio::test]
async fn steer_with_stale_run_id_reports_both_ids() {
    let delay = format!("[delay={NEVER_MS}]");
    let (mut agent, session) = Agent::with_session(&[]).await;
    agent.prompt(&session, &delay).await;
    let run_id = agent.active_run().await;

    let refused = agent.steer(&session, "run_stale", "late").await;
    let error = &refused["error"];
    assert_eq!(error["code"], -32602);
    assert_eq!(error["data"]["expectedRunId"], "run_stale");
    assert_eq!(error["data"]["actualRunId"], json!(run_id));
    assert!(error["data"]["message"].is_string());
}

#[tokio::test]
async fn steer_without_live_run_is_refused() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let refused = agent.steer(&session, "run_x", "hello").await;
    assert_eq!(refused["error"]["code"], -32602);
    assert_eq!(refused["error"]["data"], "no active run to steer");

    let unknown = agent.steer("sess_nope", "run_x", "hello").await;
    assert_eq!(unknown["error"]["code"], -32002);
    assert_eq!(unknown["error"]["data"], "Session not found: sess_nope");

    let empty = agent.steer(&session, "run_x", "").await;
    assert_eq!(empty["error"]["data"], "prompt must not be empty");
}

#[tokio::test]
async fn second_prompt_while_live_is_refused() {
    let delay = format!("[delay={NEVER_MS}]");
    let (mut agent, session) = Agent::with_session(&[]).await;
    agent.prompt(&session, &delay).await;
    let run_id = agent.active_run().await;

    let second = agent.prompt(&session, "again").await;
    let (_, refused) = agent.until_response(second).await;
    assert_eq!(refused["error"]["code"], -32602);
    let data = refused["error"]["data"].as_str().expect("data string");
    assert!(data.contains(&run_id), "{data}");
    assert!(data.contains("_goose/unstable/session/steer"), "{data}");
}

#[tokio::test]
async fn no_steer_agent_lacks_the_method() {
    let mut agent = Agent::spawn(&["--no-steer"]);
    let init = agent.call("initialize", json!({ "protocolVersion": 1 })).await;
    assert!(init["result"].get("_meta").is_none());
    let refused = agent.steer("sess_1", "run_x", "hello").await;
    assert_eq!(refused["error"]["code"], -32601);
    assert_eq!(refused["error"]["message"], "Method not found");
}

#[tokio::test]
async fn cancel_answers_cancelled_after_clearing_the_run() {
    let delay = format!("[delay={NEVER_MS}]");
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, &delay).await;
    agent.active_run().await;

    agent
        .notify("session/cancel", json!({ "sessionId": session }))
        .await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let last = frames.last().expect("run-cleared update");
    assert!(active_run_of(last).is_some_and(Value::is_null));
}

#[tokio::test]
async fn end_run_after_steer_discards_the_acknowledged_steer() {
    let delay = format!("[rounds=3] [delay={NEVER_MS}]");
    let (mut agent, session) = Agent::with_session(&["--end-run-after-steer"]).await;
    let id = agent.prompt(&session, &delay).await;
    let run_id = agent.active_run().await;

    let steered = agent.steer(&session, &run_id, "too late").await;
    assert!(steered["result"]["messageId"].is_string());
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(!frames.iter().any(|f| has_kind(f, "user_message_chunk")));
    let last = frames.last().expect("run-cleared update");
    assert!(active_run_of(last).is_some_and(Value::is_null));
}

#[tokio::test]
async fn permission_is_chosen_by_kind_not_by_id() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent
        .prompt(&session, "go [rounds=1] [delay=10] [permission]")
        .await;
    let ask = agent.until(|f| f["method"] == "session/request_permission").await;
    let options = ask["params"]["options"].as_array().expect("options");
    let reject_once = options
        .iter()
        .find(|o| o["kind"] == "reject_once")
        .expect("a reject_once option");
    assert_eq!(reject_once["optionId"], "opt-r1");
    assert_eq!(ask["params"]["toolCall"]["status"], "pending");

    agent
        .send(json!({
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": { "outcome": { "outcome": "selected", "optionId": "opt-r1" } },
        }))
        .await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let tool_update = &frames[position(&frames, |f| has_kind(f, "tool_call_update"))];
    assert_eq!(tool_update["params"]["update"]["status"], "failed");
    let texts = message_texts(&frames);
    let last = texts.last().expect("final message");
    assert!(last.ends_with("tool: rejected (reject_once)"), "{last}");
}

#[tokio::test]
async fn crash_after_directive_exits_the_process() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, "boom [crash-after=1] [delay=10]").await;
    while let Some(line) = agent.recv_line().await {
        let frame: Value = serde_json::from_str(&line).expect("JSON frame");
        assert_ne!(frame["id"], id, "a crashed turn must not answer");
    }
    let status = timeout(READ_TIMEOUT, agent.child.wait())
        .await
        .expect("agent exits")
        .expect("wait for agent");
    assert_eq!(status.code(), Some(3));
}

#[tokio::test]
async fn bad_input_is_answered_and_serving_goes_on() {
    let mut agent = Agent::spawn(&[]);
    agent.send_raw("this is not json").await;
    let parse = agent.recv().await;
    assert_eq!(parse["error"]["code"], -32700);
    assert!(parse["id"].is_null());

    let unknown = agent.call("session/load", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let relative = agent
        .call("session/new", json!({ "cwd": "tmp", "mcpServers": [] }))
        .await;
    assert_eq!(relative["error"]["code"], -32602);
    let missing = agent.prompt("sess_404", "hi").await;
    let (_, missing) = agent.until_response(missing).await;
    assert_eq!(missing["error"]["code"], -32002);
    assert_eq!(missing["error"]["data"], "Session not found: sess_404");
}

#[tokio::test]
async fn huge_line_is_one_line_of_the_requested_size() {
    let (mut agent, session) = Agent::with_session(&["--huge-line-bytes", "100000"]).await;
    agent.prompt(&session, "[rounds=0]").await;
    agent.active_run().await;
    let line = agent.recv_line().await.expect("huge line");
    assert_eq!(line.len(), 100_000);
    assert!(serde_json::from_str::<Value>(&line).is_ok());
}

#[tokio::test]
async fn frame_log_records_every_received_frame() {
    let dir = std::env::temp_dir().join(format!(
        "scripted-agent-frames-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let dir_arg = dir.to_str().expect("utf-8 temp dir").to_owned();
    let (mut agent, session) = Agent::with_session(&["--frame-log-dir", &dir_arg]).await;
    agent
        .notify("session/cancel", json!({ "sessionId": session }))
        .await;
    // A request answered after the cancel proves the cancel was read.
    agent.call("initialize", json!({ "protocolVersion": 1 })).await;

    // The file is named `<pid>-<start time>.jsonl`.
    let prefix = format!("{}-", agent.child.id().expect("agent pid"));
    let file = std::fs::read_dir(&dir)
        .expect("frame log dir")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&prefix) && name.ends_with(".jsonl"))
        })
        .expect("frame log");
    let log = std::fs::read_to_string(file).expect("frame log");
    let methods: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON line"))
        .filter_map(|frame| frame["method"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        methods,
        ["initialize", "session/new", "session/cancel", "initialize"]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn hang_directive_keeps_serving_other_sessions() {
    let (mut agent, hung) = Agent::with_session(&[]).await;
    let hung_id = agent.prompt(&hung, "[hang]").await;
    agent.active_run().await;
    agent.notify("session/cancel", json!({ "sessionId": hung })).await;

    let other = agent
        .call("session/new", json!({ "cwd": "/", "mcpServers": [] }))
        .await;
    let other = other["result"]["sessionId"].as_str().expect("sessionId");
    let id = agent.prompt(other, "[rounds=1] [delay=10]").await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(!frames.iter().any(|f| f["id"] == hung_id));
}

#[tokio::test]
async fn chatter_streams_thoughts_until_cancelled() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, "[chatter]").await;
    for _ in 0..3 {
        agent.until(|f| has_kind(f, "agent_thought_chunk")).await;
    }
    agent
        .notify("session/cancel", json!({ "sessionId": session }))
        .await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let last = frames.last().expect("run-cleared update");
    assert!(active_run_of(last).is_some_and(Value::is_null));
}

#[tokio::test]
async fn ignore_cancel_runs_the_turn_to_its_end() {
    let (mut agent, session) = Agent::with_session(&["--ignore-cancel"]).await;
    let id = agent.prompt(&session, "[rounds=2] [delay=20]").await;
    agent.active_run().await;
    agent
        .notify("session/cancel", json!({ "sessionId": session }))
        .await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(message_texts(&frames).len(), 3);
}

#[tokio::test]
async fn fail_directive_answers_internal_error_after_clearing_the_run() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, "[fail] [rounds=1] [delay=10]").await;
    let (frames, answer) = agent.until_response(id).await;
    assert_eq!(answer["error"]["code"], -32603);
    assert_eq!(answer["error"]["message"], "Internal error");
    let last = frames.last().expect("run-cleared update");
    assert!(active_run_of(last).is_some_and(Value::is_null));
}

#[tokio::test]
async fn stop_directive_sets_the_stop_reason() {
    let (mut agent, session) = Agent::with_session(&[]).await;
    let id = agent.prompt(&session, "[stop=max_tokens] [rounds=0]").await;
    let (_, answer) = agent.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens");
}

#[tokio::test]
async fn garbage_stdout_precedes_every_round() {
    let (mut agent, session) = Agent::with_session(&["--garbage-stdout"]).await;
    agent.prompt(&session, "[rounds=2] [delay=10]").await;
    let mut garbage = 0;
    loop {
        let line = agent.recv_line().await.expect("agent output");
        match serde_json::from_str::<Value>(&line) {
            Err(_) => garbage += 1,
            Ok(frame) if frame.get("result").is_some() => break,
            Ok(_) => {}
        }
    }
    assert_eq!(garbage, 2);
}

#[tokio::test]
async fn exit_immediately_exits_with_code_2_before_reading() {
    let mut agent = Agent::spawn(&["--exit-immediately"]);
    assert_eq!(agent.recv_line().await, None);
    let status = timeout(READ_TIMEOUT, agent.child.wait())
        .await
        .expect("agent exits")
        .expect("wait for agent");
    assert_eq!(status.code(), Some(2));
}
