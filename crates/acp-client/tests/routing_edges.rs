//! Routing edges no well-behaved agent produces on demand: updates before
//! `session/new` answers and after a prompt answers, unknown agent requests,
//! unknown update kinds. The peer here is the test itself, writing raw
//! frames over an in-memory pipe.

use std::time::Duration;

use acp_client::{AgentClient, ClientConfig, ContentBlock, TurnEvent, TurnOptions, TurnProgress};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

struct RawPeer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    out: WriteHalf<DuplexStream>,
}

impl RawPeer {
    async fn recv(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("client open");
        serde_json::from_str(&line).expect("client frames are JSON")
    }

    async fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.out.write_all(line.as_bytes()).await.expect("write");
    }
}

fn connected() -> (AgentClient, RawPeer) {
    let (client_side, peer_side) = tokio::io::duplex(64 * 1024);
    let (client_read, client_write) = tokio::io::split(client_side);
    let (peer_read, peer_write) = tokio::io::split(peer_side);
    let client = AgentClient::connect("raw-peer", client_read, client_write, ClientConfig::default());
    let peer = RawPeer {
        lines: BufReader::new(peer_read).lines(),
        out: peer_write,
    };
    (client, peer)
}

fn update(session: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
}

#[tokio::test]
async fn updates_outside_a_turn_are_kept_and_unknown_requests_get_method_not_found() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let new_session = tokio::spawn({
            let client = client.clone();
            async move { client.new_session(&std::env::temp_dir(), Vec::new()).await }
        });
        let request = peer.recv().await;
        assert_eq!(request["method"], "session/new");
        // An update for the session before session/new is answered.
        peer.send(update(
            "s1",
            json!({"sessionUpdate": "available_commands_update", "availableCommands": []}),
        ))
        .await;
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}}))
            .await;
        let session = new_session.await.expect("join").expect("session");

        // An agent-to-client request we do not serve gets -32601.
        peer.send(json!({"jsonrpc": "2.0", "id": "fs-1", "method": "fs/read_text_file", "params": {}}))
            .await;
        let answer = peer.recv().await;
        assert_eq!(answer["id"], "fs-1");
        assert_eq!(answer["error"]["code"], -32601);

        let mut turn = client
            .prompt(&session, vec![ContentBlock::text("hi")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        assert_eq!(prompt["method"], "session/prompt");
        peer.send(update("s1", json!({"sessionUpdate": "brand_new_kind", "x": 1}))).await;
        peer.send(update(
            "s1",
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}}),
        ))
        .await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        // A straggler after the prompt answered.
        peer.send(update(
            "s1",
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}}),
        ))
        .await;

        let TurnProgress::Event(TurnEvent::Other(raw)) = turn.next().await.expect("event") else {
            panic!("unknown kinds are kept raw");
        };
        assert_eq!(raw["x"], 1);
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.message, "hello");

        // Both out-of-turn updates are in the backlog, in order; the late
        // chunk did not leak into the turn's message. Wait for the reader
        // to route the straggler: the client's next answer proves it.
        peer.send(json!({"jsonrpc": "2.0", "id": "ping", "method": "unknown/ping", "params": {}}))
            .await;
        assert_eq!(peer.recv().await["id"], "ping");
        let backlog = client.take_backlog(&session);
        assert_eq!(backlog.len(), 2, "{backlog:?}");
        assert!(matches!(&backlog[0], TurnEvent::Other(raw) if raw["sessionUpdate"] == "available_commands_update"));
        assert!(matches!(&backlog[1], TurnEvent::MessageChunk { text } if text == "late"));
        assert!(client.take_backlog(&session).is_empty());
    })
    .await
    .expect("test timed out");
}
