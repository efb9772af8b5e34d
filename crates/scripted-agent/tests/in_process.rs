//! `serve` over in-process pipes, as benchmarks embed it: it ends when the
//! input ends (dropping live turns) and fails when the client stops reading.

use std::time::Duration;

use scripted_agent::{Options, serve};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, duplex};
use tokio::time::timeout;

/// Bytes buffered in each in-process pipe.
const PIPE_BYTES: usize = 64 * 1024;
/// How long any single step may take before the test fails.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

fn line(frame: Value) -> Vec<u8> {
    let mut line = frame.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[tokio::test]
async fn serve_returns_at_input_eof_dropping_live_turns() {
    let (mut to_agent, agent_input) = duplex(PIPE_BYTES);
    let (agent_output, from_agent) = duplex(PIPE_BYTES);
    let served = tokio::spawn(serve(Options::default(), agent_input, agent_output));
    let mut from_agent = BufReader::new(from_agent).lines();

    to_agent
        .write_all(&line(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": "/", "mcpServers": []}})))
        .await
        .expect("write");
    let mut frames: Vec<Value> = Vec::new();
    while frames.len() < 2 {
        if frames.len() == 1 {
            let session = frames[0]["result"]["sessionId"].clone();
            assert!(
                session.as_str().is_some_and(|id| id.starts_with("sess_")),
                "{session}"
            );
            to_agent
                .write_all(&line(
                    json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                    "params": {"sessionId": session, "prompt": [{"type": "text", "text": "[delay=60000]"}]}}),
                ))
                .await
                .expect("write");
        }
        let next = timeout(STEP_TIMEOUT, from_agent.next_line()).await;
        let text = next.expect("in time").expect("read").expect("a line");
        frames.push(serde_json::from_str::<Value>(&text).expect("JSON"));
    }
    assert!(frames[1]["params"]["update"]["_meta"]["goose"]["activeRunId"].is_string());

    drop(to_agent);
    let result = timeout(STEP_TIMEOUT, served).await.expect("serve ends");
    assert!(result.expect("serve task").is_ok());
    let rest = timeout(STEP_TIMEOUT, from_agent.next_line()).await;
    assert_eq!(
        rest.expect("in time").expect("read"),
        None,
        "the dropped turn said nothing"
    );
}

#[tokio::test]
async fn serve_fails_once_the_client_stops_reading() {
    let (mut to_agent, agent_input) = duplex(PIPE_BYTES);
    let (agent_output, from_agent) = duplex(PIPE_BYTES);
    let served = tokio::spawn(serve(Options::default(), agent_input, agent_output));
    drop(from_agent);

    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    to_agent.write_all(&line(request)).await.expect("write");
    let result = timeout(STEP_TIMEOUT, served).await.expect("serve ends");
    assert!(result.expect("serve task").is_err());
}
