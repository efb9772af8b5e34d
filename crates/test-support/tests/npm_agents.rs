//! The pinned npm agents install, start as ACP agents over stdio, and (for
//! claude-agent-acp) run a turn against the fake provider with no key and no
//! network: the recipes of `tests/agents/FINDINGS.md`, checked.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};
use test_support::fake_provider::{FakeProvider, Streaming};
use test_support::npm_agent;

/// An agent process spoken to line by line.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Agent {
    fn start(command: &mut Command) -> Agent {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the agent starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Agent { child, stdin, stdout }
    }

    /// Sends request `id` and returns its result, collecting the
    /// notifications received meanwhile into `notifications`.
    fn call(&mut self, id: u64, method: &str, params: Value, notifications: &mut Vec<Value>) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{request}").expect("write a request");
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("read a line");
            assert!(read > 0, "the agent closed stdout before answering {method}");
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return message
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("{method} failed: {message}"));
            }
            notifications.push(message);
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "acp-bridge", "version": "0.1.0"},
    })
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("test-support-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

/// A command for `bin` with an empty environment but `PATH` and `home`.
fn command(bin: &str, args: &[&str], home: &Path) -> Command {
    let mut command = Command::new(npm_agent(bin));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(home);
    command
}

#[test]
fn every_pinned_agent_answers_initialize() {
    let agents = [
        (
            "claude-agent-acp",
            &[][..],
            "@agentclientprotocol/claude-agent-acp",
        ),
        ("codex-acp", &[][..], "@agentclientprotocol/codex-acp"),
        ("qwen", &["--acp"][..], "qwen-code"),
        ("gemini", &["--experimental-acp"][..], "gemini-cli"),
    ];
    std::thread::scope(|scope| {
        for (bin, args, name) in agents {
            scope.spawn(move || {
                let home = temp_dir(bin);
                let mut agent = Agent::start(&mut command(bin, args, &home));
                let result = agent.call(1, "initialize", initialize_params(), &mut Vec::new());
                assert_eq!(result["protocolVersion"], 1, "{bin}: {result}");
                assert_eq!(result["agentInfo"]["name"], name, "{bin}: {result}");
                assert_eq!(
                    result["agentCapabilities"]["loadSession"], true,
                    "{bin}: {result}"
                );
            });
        }
    });
}

#[test]
fn claude_agent_acp_runs_a_turn_against_the_fake_provider() {
    let provider = FakeProvider::start(Streaming::default()).expect("the provider starts");
    let home = temp_dir("claude-turn");
    let settings = home.join(".claude").join("settings.json");
    std::fs::create_dir_all(settings.parent().expect("a parent")).expect("mkdir .claude");
    std::fs::write(&settings, r#"{"permissions":{"defaultMode":"default"}}"#).expect("write settings");
    let mut command = command("claude-agent-acp", &[], &home);
    command
        .env("ANTHROPIC_BASE_URL", provider.base_url())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1");
    let mut agent = Agent::start(&mut command);
    let mut notifications = Vec::new();
    let init = agent.call(1, "initialize", initialize_params(), &mut notifications);
    assert_eq!(init["_meta"]["steering"]["supported"], true);
    let session = agent.call(
        2,
        "session/new",
        json!({"cwd": home, "mcpServers": []}),
        &mut notifications,
    );
    let session_id = session["sessionId"].as_str().expect("a session id").to_owned();
    let answer = agent.call(
        3,
        "session/prompt",
        json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "hello from the test"}]}),
        &mut notifications,
    );
    assert_eq!(answer["stopReason"], "end_turn");

    let streamed: String = notifications
        .iter()
        .filter(|message| message["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "reply to: hello from the test");
    let turn = provider
        .generations()
        .into_iter()
        .find(|request| request.reply.as_deref() == Some("reply to: hello from the test"))
        .expect("the turn reached the provider");
    assert_eq!(turn.header("x-api-key"), Some("<redacted>"));
    assert!(turn.path.starts_with("/v1/messages"));
}
