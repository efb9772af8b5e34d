//! What the framing benches share: a real [`AgentClient`] over in-memory
//! pipes with the bench playing the agent, turns of pre-serialized
//! `session/update` message chunks, and the yardstick (the same bytes through
//! a bare line split and `serde_json` parse).
//!
//! One timed turn is: the agent writes its update lines and then the
//! prompt's answer; the client frames each line, parses and classifies it,
//! routes it to the live turn, and the caller reads the turn to its end
//! (`finish_quietly`). The prompt request itself (written by the client,
//! read by the bench to learn its id) happens before the clock starts.

use std::time::{Duration, Instant};

use acp_client::{AgentClient, ClientConfig, ContentBlock, SessionId, StopReason, TurnOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::runtime::Runtime;

/// Capacity of each in-memory pipe: a Linux pipe's buffer.
const PIPE_BYTES: usize = 64 * 1024;
/// The session the turns run on (no `session/new` needed: a prompt on any
/// id starts a turn).
const SESSION: &str = "s";

/// A single-threaded runtime: every figure is "on one core" (the client's
/// reader task, the bench's agent and the turn's reader share it).
pub fn one_core_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread tokio runtime")
}

/// The update lines of one turn, ready to write.
#[derive(Debug, Clone)]
pub struct Updates {
    /// `count` newline-terminated `session/update` lines.
    pub bytes: Vec<u8>,
    pub count: usize,
    /// Total text of the chunks: what the turn's message must add up to.
    pub text_bytes: usize,
}

/// `count` `agent_message_chunk` updates of about 200 bytes of text each
/// (prose with a code span, an escaped newline and a non-ASCII dash, as
/// models stream them); the whole line is about 340 bytes.
pub fn message_chunks(count: usize) -> Updates {
    let mut bytes = Vec::new();
    let mut text_bytes = 0;
    for seq in 0..count {
        let text = format!(
            "Chunk {seq:>6}: the intake checks the kind, the `p` tag and the seen set before the \
             author gate;\nonly then is the signature verified — so a flood from strangers costs \
             next to nothing. "
        );
        text_bytes += text.len();
        let line = json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SESSION,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        });
        serde_json::to_writer(&mut bytes, &line).expect("serializable");
        bytes.push(b'\n');
    }
    Updates {
        bytes,
        count,
        text_bytes,
    }
}

/// The agent's answer to the prompt with request id `id`.
pub fn prompt_answer(id: u64) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// A client and the agent's ends of its pipes.
#[derive(Debug)]
pub struct ClientRig {
    client: AgentClient,
    session: SessionId,
    /// What the client writes (its prompts); read to learn their ids.
    from_client: BufReader<DuplexStream>,
    to_client: DuplexStream,
}

impl ClientRig {
    /// Connects a client with the default configuration. Must be called
    /// inside the runtime (the client spawns its reader task).
    pub fn new() -> ClientRig {
        // One pipe per direction, as a child's stdout and stdin are (no
        // split halves sharing a lock).
        let (agent_stdout, to_client) = tokio::io::duplex(PIPE_BYTES);
        let (agent_stdin, from_client) = tokio::io::duplex(PIPE_BYTES);
        ClientRig {
            client: AgentClient::connect("bench-agent", agent_stdout, agent_stdin, ClientConfig::default()),
            session: SessionId(SESSION.to_owned()),
            from_client: BufReader::new(from_client),
            to_client,
        }
    }

    /// Runs one turn whose agent streams `updates` then answers `end_turn`;
    /// times from the first update byte until the caller holds the outcome.
    pub async fn turn(&mut self, updates: &Updates) -> Duration {
        let turn = self
            .client
            .prompt(
                &self.session,
                vec![ContentBlock::text("go")],
                TurnOptions::default(),
            )
            .await
            .expect("the prompt is written");
        let mut request = String::new();
        self.from_client
            .read_line(&mut request)
            .await
            .expect("the prompt request is readable");
        let id = serde_json::from_str::<Value>(&request)
            .ok()
            .and_then(|request| request.get("id").and_then(Value::as_u64))
            .expect("the prompt request has an id");
        let answer = prompt_answer(id);

        let to_client = &mut self.to_client;
        let start = Instant::now();
        let agent = async move {
            to_client.write_all(&updates.bytes).await?;
            to_client.write_all(&answer).await?;
            to_client.flush().await
        };
        let (written, outcome) = tokio::join!(agent, turn.finish_quietly());
        let elapsed = start.elapsed();

        written.expect("the agent's lines are written");
        let outcome = outcome.expect("the turn ends with an outcome");
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert_eq!(
            outcome.message.len(),
            updates.text_bytes,
            "every chunk reached the turn"
        );
        elapsed
    }
}

/// The yardstick: `bytes` split at newlines, each non-empty line parsed
/// into a `serde_json::Value`. Returns the time and the lines parsed.
pub fn split_and_parse(bytes: &[u8]) -> (Duration, usize) {
    let start = Instant::now();
    let mut lines = 0;
    for line in bytes.split(|byte| *byte == b'\n') {
        if line.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_slice(line).expect("a JSON line");
        std::hint::black_box(value);
        lines += 1;
    }
    (start.elapsed(), lines)
}

/// What the yardstick parses for one turn: the same update lines and an
/// answer line, as the client receives them.
pub fn yardstick_bytes(updates: &Updates) -> Vec<u8> {
    let mut bytes = updates.bytes.clone();
    bytes.extend_from_slice(&prompt_answer(1));
    bytes
}
