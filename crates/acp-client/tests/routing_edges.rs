//! Routing edges no well-behaved agent produces on demand: updates before
//! `session/new` answers and after a prompt answers, unknown agent requests,
//! unknown update kinds, a session's history replayed by `session/load`, a
//! question the agent withdraws, form elicitations under each policy and a
//! cancel, steering outcomes, message boundaries; and a misbehaving agent's
//! updates for sessions never opened and floods. The
//! peer here is the test itself, writing raw frames over an in-memory pipe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_client::{
    AgentClient, AnswerError, ClientConfig, ContentBlock, DropObserver, DroppedUpdate, ElicitationAction,
    PermissionPolicy, SESSION_BACKLOG_LIMIT, SessionId, SteerRefusal, SteeringOutcome, TURN_EVENTS_CAPACITY,
    TURN_QUESTIONS_RESERVED, Turn, TurnEvent, TurnOptions, TurnProgress,
};
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
    connected_with(ClientConfig::default())
}

/// Starts a turn on `session` whose questions come to the caller; returns
/// it with the prompt request the peer read.
async fn turn_asking_the_caller(
    client: &AgentClient,
    peer: &mut RawPeer,
    session: &SessionId,
) -> (Turn, Value) {
    let options = TurnOptions {
        permission: PermissionPolicy::AskCaller,
        ..TurnOptions::default()
    };
    let turn = client
        .prompt(session, vec![ContentBlock::text("go")], options)
        .await
        .expect("prompt");
    (turn, peer.recv().await)
}

fn connected_with(config: ClientConfig) -> (AgentClient, RawPeer) {
    let (client_side, peer_side) = tokio::io::duplex(64 * 1024);
    let (client_read, client_write) = tokio::io::split(client_side);
    let (peer_read, peer_write) = tokio::io::split(peer_side);
    let client = AgentClient::connect("raw-peer", client_read, client_write, config);
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
        assert!(matches!(&backlog[1], TurnEvent::MessageChunk { text, .. } if text == "late"));
        assert!(client.take_backlog(&session).is_empty());
    })
    .await
    .expect("test timed out");
}

/// The session's slash commands: those advertised before `session/new`
/// is answered are the session's; a later update replaces them; a caller
/// waiting for a list that has not come yet gets it when it comes.
#[tokio::test]
async fn a_sessions_commands_are_kept_from_before_its_answer_and_replaced_by_each_update() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let commands = |names: &[&str]| {
            let listed: Vec<Value> = names
                .iter()
                .map(|name| json!({"name": name, "description": "d"}))
                .collect();
            json!({"sessionUpdate": "available_commands_update", "availableCommands": listed})
        };
        let names = |client: &AgentClient, session: &SessionId| {
            client.session_commands(session).map(|commands| {
                commands
                    .into_iter()
                    .map(|command| command.name)
                    .collect::<Vec<_>>()
            })
        };
        let (client, mut peer) = connected();
        let opening = |client: &AgentClient| {
            let client = client.clone();
            tokio::spawn(async move { client.new_session(&std::env::temp_dir(), Vec::new()).await })
        };
        let new_session = opening(&client);
        let request = peer.recv().await;
        peer.send(update("s1", commands(&["compact"]))).await;
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}}))
            .await;
        let first = new_session.await.expect("join").expect("session");
        assert_eq!(names(&client, &first), Some(vec!["compact".to_owned()]));

        let new_session = opening(&client);
        let request = peer.recv().await;
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s2"}}))
            .await;
        let second = new_session.await.expect("join").expect("session");
        assert_eq!(names(&client, &second), None, "nothing advertised yet");
        let waiting = tokio::spawn({
            let (client, second) = (client.clone(), second.clone());
            async move {
                client
                    .session_commands_within(&second, Duration::from_secs(10))
                    .await
            }
        });
        peer.send(update("s2", commands(&["review", "init"]))).await;
        let arrived = waiting.await.expect("join").expect("the list arrived");
        assert_eq!(arrived.len(), 2);
        peer.send(update("s1", commands(&[]))).await;
        peer.send(json!({"jsonrpc": "2.0", "id": "ping", "method": "unknown/ping", "params": {}}))
            .await;
        assert_eq!(peer.recv().await["id"], "ping");
        assert_eq!(
            names(&client, &first),
            Some(vec![]),
            "each update replaces the list"
        );
        let unknown = SessionId("s3".into());
        let none = client.session_commands_within(&unknown, Duration::from_millis(50));
        assert_eq!(none.await, None);
    })
    .await
    .expect("test timed out");
}

fn chunk(text: &str, message_id: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "messageId": message_id,
        "content": {"type": "text", "text": text}})
}

/// Answers the peer's next request (whose method must be `method`) with `result`.
async fn answer_next(peer: &mut RawPeer, method: &str, result: Value) -> Value {
    let request = peer.recv().await;
    assert_eq!(request["method"], method, "{request}");
    peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
        .await;
    request
}

#[tokio::test]
async fn loaded_history_never_reaches_a_turn_and_a_withdrawn_question_answers_nothing() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("old".into());
        let load = tokio::spawn({
            let (client, session) = (client.clone(), session.clone());
            async move {
                client
                    .load_session(&session, &std::env::temp_dir(), Vec::new())
                    .await
            }
        });
        let request = peer.recv().await;
        assert_eq!(request["method"], "session/load");
        assert_eq!(request["params"]["sessionId"], "old");
        assert!(request["params"]["mcpServers"].is_array() && request["params"]["cwd"].is_string());
        for old in ["first answer", "second answer"] {
            peer.send(update("old", chunk(old, "history"))).await;
        }
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
            .await;
        load.await.expect("join").expect("loaded");
        assert!(client.take_backlog(&session).is_empty(), "history is not kept");

        let (mut turn, prompt) = turn_asking_the_caller(&client, &mut peer, &session).await;
        peer.send(
            json!({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission",
            "params": {"sessionId": "old", "toolCall": {"title": "rm"},
                "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]}}),
        )
        .await;
        let TurnProgress::Event(TurnEvent::PermissionAsked(question)) = turn.next().await.expect("event")
        else {
            panic!("the question reaches the caller");
        };
        assert_eq!(question.request_id(), &json!("perm-1"));
        peer.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "perm-1"}}))
            .await;
        let withdrawn = peer.recv().await;
        assert_eq!(withdrawn["id"], "perm-1");
        assert_eq!(withdrawn["error"]["code"], -32800);
        let TurnProgress::Event(TurnEvent::QuestionWithdrawn { request_id }) =
            turn.next().await.expect("event")
        else {
            panic!("the turn learns of the withdrawal");
        };
        assert_eq!(request_id, json!("perm-1"));
        assert!(matches!(
            question.answer("a").await,
            Err(AnswerError::AlreadyAnswered)
        ));
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        turn.finish_quietly().await.expect("outcome");
        // Nothing else was written for the question: the next frame is ours.
        let close = tokio::spawn({
            let (client, session) = (client.clone(), session.clone());
            async move { client.close_session(&session).await }
        });
        answer_next(&mut peer, "session/close", json!({})).await;
        close.await.expect("join").expect("closed");
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn elicitations_reach_only_a_caller_who_answers_and_a_cancel_answers_them_cancel() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("s".into());
        let form = |id: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
                "sessionId": "s", "mode": "form", "message": "Which?",
                "requestedSchema": {"type": "object", "properties": {"pick": {"type": "string", "enum": ["a", "b"]}}}}})
        };
        // An automatic policy: nobody would answer, so the form is declined.
        let turn = client
            .prompt(&session, vec![ContentBlock::text("go")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        peer.send(form("e-1")).await;
        let declined = peer.recv().await;
        assert_eq!(declined["id"], "e-1");
        assert_eq!(declined["result"], json!({"action": "decline"}));
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        turn.finish_quietly().await.expect("outcome");

        let (mut turn, prompt) = turn_asking_the_caller(&client, &mut peer, &session).await;
        peer.send(form("e-2")).await;
        let TurnProgress::Event(TurnEvent::ElicitationAsked(question)) = turn.next().await.expect("event")
        else {
            panic!("the form reaches the caller");
        };
        assert_eq!(question.request().fields[0].name, "pick");
        let cancel = tokio::spawn({
            let (client, session) = (client.clone(), session.clone());
            async move { client.cancel(&session).await }
        });
        let cancelled = peer.recv().await;
        assert_eq!(cancelled["id"], "e-2");
        assert_eq!(cancelled["result"], json!({"action": "cancel"}), "answered before the cancel");
        assert_eq!(peer.recv().await["method"], "session/cancel");
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "cancelled"}}))
            .await;
        cancel.await.expect("join").expect("cancelled");
        assert!(matches!(
            question.answer(ElicitationAction::Decline).await,
            Err(AnswerError::AlreadyAnswered)
        ));
        turn.finish_quietly().await.expect("outcome");
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn session_steering_outcomes_and_refusals_are_typed() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("s".into());
        for (answer, expected) in [
            (json!({"outcome": "injected"}), Ok(SteeringOutcome::Injected)),
            (
                json!({"outcome": "promptRequired"}),
                Ok(SteeringOutcome::PromptRequired),
            ),
            (
                json!({"outcome": "startedNewTurn"}),
                Ok(SteeringOutcome::StartedNewTurn),
            ),
            (
                json!({"outcome": "maybe"}),
                Err(SteerRefusal::Malformed(json!({"outcome": "maybe"}))),
            ),
        ] {
            let steer = tokio::spawn({
                let (client, session) = (client.clone(), session.clone());
                async move { client.steer_session(&session, "also this").await }
            });
            let request = answer_next(&mut peer, "_session/steering", answer).await;
            assert_eq!(request["params"]["prompt"][0]["text"], "also this");
            assert_eq!(
                request["params"]["_meta"]["steering"]["idleBehavior"],
                "promptRequired"
            );
            assert_eq!(steer.await.expect("join"), expected);
        }
        let steer = tokio::spawn({
            let (client, session) = (client.clone(), session.clone());
            async move { client.steer_session(&session, "x").await }
        });
        let request = peer.recv().await;
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"],
            "error": {"code": -32601, "message": "Method not found"}}))
            .await;
        assert_eq!(steer.await.expect("join"), Err(SteerRefusal::MethodNotFound));
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn narration_between_tool_calls_is_told_apart_from_the_answer() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("s".into());
        let turn = client
            .prompt(&session, vec![ContentBlock::text("go")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        peer.send(update("s", chunk("Let me look at the files.", "m1")))
            .await;
        peer.send(update(
            "s",
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}),
        ))
        .await;
        peer.send(update(
            "s",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        ))
        .await;
        peer.send(update("s", chunk("The answer ", "m2"))).await;
        peer.send(update("s", chunk("is 42.", "m2"))).await;
        // A second message (the answer to a steer) in the same turn.
        peer.send(update("s", chunk("And the budget is fine.", "m3")))
            .await;
        peer.send(update(
            "s",
            json!({"sessionUpdate": "usage_update", "used": 10, "size": 100}),
        ))
        .await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.messages.len(), 3);
        assert!(outcome.messages[0].narration && !outcome.messages[1].narration);
        assert_eq!(outcome.answer(), "The answer is 42.\n\nAnd the budget is fine.");
        assert!(
            outcome.message.starts_with("Let me look at the files."),
            "the full text keeps everything"
        );
        assert_eq!(outcome.usage.and_then(|usage| usage.size), Some(100));
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn the_turns_text_is_bounded_and_the_turn_still_ends_normally() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("s".into());
        let options = TurnOptions {
            max_text_bytes: 9,
            ..TurnOptions::default()
        };
        let turn = client
            .prompt(&session, vec![ContentBlock::text("go")], options)
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        // Narration past the bound gives its text back to the answer's budget.
        peer.send(update("s", chunk("narrating!", "m1"))).await;
        peer.send(update(
            "s",
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}),
        ))
        .await;
        // 🦀 is four bytes: the cut at 9 bytes falls inside the second one.
        peer.send(update("s", chunk("ab🦀🦀", "m2"))).await;
        peer.send(update("s", chunk("and much more that is dropped", "m2")))
            .await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        let outcome = turn.finish_quietly().await.expect("the turn ends normally");
        assert_eq!(outcome.message, "narrating", "the whole text stops at the bound");
        assert!(outcome.message_truncated);
        assert_eq!(
            outcome.answer(),
            "ab🦀",
            "the answer stops at the bound, on a char boundary"
        );
        assert!(outcome.answer_truncated());
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn narration_in_a_row_is_kept_as_one_entry() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (client, mut peer) = connected();
        let session = SessionId("s".into());
        let turn = client
            .prompt(&session, vec![ContentBlock::text("go")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        for step in 0..50 {
            peer.send(update("s", chunk(&format!("step {step}. "), &format!("n{step}"))))
                .await;
            peer.send(update(
                "s",
                json!({"sessionUpdate": "tool_call", "toolCallId": format!("t{step}"), "title": "ls"}),
            ))
            .await;
        }
        peer.send(update("s", chunk("Done.", "answer"))).await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.messages.len(), 2, "{:?}", outcome.messages);
        assert!(outcome.messages[0].narration);
        assert_eq!(outcome.answer(), "Done.");
        assert!(
            outcome.message.starts_with("step 0. step 1. "),
            "the whole text keeps it"
        );
    })
    .await
    .expect("test timed out");
}

/// The client's drops, counted by reason.
#[derive(Debug, Clone, Default)]
struct Drops(Arc<Mutex<HashMap<DroppedUpdate, usize>>>);

impl Drops {
    fn config(&self) -> ClientConfig {
        let counts = Arc::clone(&self.0);
        ClientConfig {
            drops: DropObserver::new(move |why| *counts.lock().expect("counts").entry(why).or_default() += 1),
            ..ClientConfig::default()
        }
    }

    fn of(&self, why: DroppedUpdate) -> usize {
        self.0.lock().expect("counts").get(&why).copied().unwrap_or(0)
    }
}

/// Returns once the client routed every frame the peer sent so far: its
/// answer to a request it does not serve comes after them.
async fn all_routed(peer: &mut RawPeer) {
    peer.send(json!({"jsonrpc": "2.0", "id": "ping", "method": "unknown/ping", "params": {}}))
        .await;
    assert_eq!(peer.recv().await["id"], "ping");
}

fn thought(text: &str) -> Value {
    json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
}

#[tokio::test]
async fn updates_for_a_session_never_opened_are_dropped_and_counted() {
    const FOREIGN: usize = 1000;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let drops = Drops::default();
        let (client, mut peer) = connected_with(drops.config());
        let new_session = tokio::spawn({
            let client = client.clone();
            async move { client.new_session(&std::env::temp_dir(), Vec::new()).await }
        });
        answer_next(&mut peer, "session/new", json!({"sessionId": "mine"})).await;
        let session = new_session.await.expect("join").expect("session");
        let turn = client
            .prompt(&session, vec![ContentBlock::text("hi")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        // Each update names a session of its own, as if to make the client
        // keep state for a thousand sessions.
        for n in 0..FOREIGN {
            peer.send(update(&format!("foreign-{n}"), chunk("not yours", "x")))
                .await;
        }
        peer.send(update("mine", chunk("hello", "m"))).await;
        // A question for a session never opened is answered, not kept.
        peer.send(
            json!({"jsonrpc": "2.0", "id": "perm-x", "method": "session/request_permission",
            "params": {"sessionId": "foreign-0", "toolCall": {"title": "rm"},
                "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]}}),
        )
        .await;
        let refused = peer.recv().await;
        assert_eq!(refused["id"], "perm-x");
        assert_eq!(refused["result"]["outcome"]["outcome"], "cancelled");
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        let outcome = turn.finish_quietly().await.expect("outcome");
        all_routed(&mut peer).await;

        let kept: usize = (0..FOREIGN)
            .map(|n| client.take_backlog(&SessionId(format!("foreign-{n}"))).len())
            .sum();
        let dropped = drops.of(DroppedUpdate::UnknownSession);
        println!("{FOREIGN} updates for sessions never opened: kept {kept}, dropped and counted {dropped}");
        assert_eq!(outcome.message, "hello", "only the session's own text");
        assert_eq!(kept, 0, "no state for sessions never opened");
        assert_eq!(dropped, FOREIGN);
        // Forgotten is the same as never opened.
        client.forget_session(&session);
        peer.send(update("mine", chunk("late", "m"))).await;
        all_routed(&mut peer).await;
        assert!(client.take_backlog(&session).is_empty());
        assert_eq!(drops.of(DroppedUpdate::UnknownSession), FOREIGN + 1);
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_flood_in_a_turn_is_bounded_its_question_and_outcome_still_arrive_and_the_next_turn_completes() {
    const FLOOD: usize = 10_000;
    const PARTS: usize = 10;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let drops = Drops::default();
        let (client, mut peer) = connected_with(drops.config());
        let session = SessionId("s".into());
        let (mut turn, prompt) = turn_asking_the_caller(&client, &mut peer, &session).await;
        // The caller reads nothing while the agent streams: a thought
        // token after another, the answer's parts among them, its usage.
        for n in 0..FLOOD {
            if n % (FLOOD / PARTS) == 0 {
                peer.send(update("s", chunk(&format!("part{n} "), "answer"))).await;
            }
            peer.send(update("s", thought("hmm "))).await;
        }
        peer.send(update("s", json!({"sessionUpdate": "usage_update", "used": 77, "size": 100})))
            .await;
        peer.send(
            json!({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"title": "write"},
                "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]}}),
        )
        .await;
        all_routed(&mut peer).await;

        let mut buffered = 0;
        let question = loop {
            match turn.next().await.expect("event") {
                TurnProgress::Event(TurnEvent::PermissionAsked(question)) => break question,
                TurnProgress::Event(_) => buffered += 1,
                TurnProgress::Finished(_) => panic!("the prompt is not answered yet"),
            }
        };
        let sent = FLOOD + PARTS + 1;
        let dropped = drops.of(DroppedUpdate::TurnEventsFull);
        println!(
            "{sent} updates in a turn nobody read: {buffered} buffered (bound {TURN_EVENTS_CAPACITY}), {dropped} dropped and counted; the question arrived"
        );
        assert!(buffered < TURN_EVENTS_CAPACITY, "{buffered} events buffered");
        assert!(dropped >= sent - TURN_EVENTS_CAPACITY, "past the bound: {dropped} dropped");
        assert_eq!(buffered + dropped, sent, "every update delivered or counted");
        question.answer("a").await.expect("answered");
        let answer = peer.recv().await;
        assert_eq!(answer["id"], "perm-1");
        assert_eq!(answer["result"]["outcome"]["optionId"], "a");
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        let outcome = turn.finish_quietly().await.expect("the turn ends normally");
        let expected: String = (0..PARTS).map(|part| format!("part{} ", part * (FLOOD / PARTS))).collect();
        assert_eq!(outcome.message, expected, "the outcome has every part, delivered or not");
        assert_eq!(outcome.usage.and_then(|usage| usage.used), Some(77));

        // The next turn of the same session is an ordinary one.
        let turn = client
            .prompt(&session, vec![ContentBlock::text("again")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        peer.send(update("s", chunk("fine", "m2"))).await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        assert_eq!(turn.finish_quietly().await.expect("outcome").message, "fine");
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_chatty_idle_session_keeps_only_its_newest_updates() {
    const FLOOD: usize = 10_000;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let drops = Drops::default();
        let (client, mut peer) = connected_with(drops.config());
        let session = SessionId("s".into());
        let turn = client
            .prompt(&session, vec![ContentBlock::text("go")], TurnOptions::default())
            .await
            .expect("prompt");
        let prompt = peer.recv().await;
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        turn.finish_quietly().await.expect("outcome");
        for n in 0..FLOOD {
            peer.send(update("s", thought(&format!("{n}")))).await;
        }
        all_routed(&mut peer).await;
        let backlog = client.take_backlog(&session);
        let dropped = drops.of(DroppedUpdate::BacklogFull);
        println!("{FLOOD} updates outside a turn: {} kept (bound {SESSION_BACKLOG_LIMIT}), {dropped} dropped and counted", backlog.len());
        assert_eq!(backlog.len(), SESSION_BACKLOG_LIMIT);
        assert_eq!(dropped, FLOOD - SESSION_BACKLOG_LIMIT);
        let newest = FLOOD - 1;
        assert!(
            matches!(backlog.last(), Some(TurnEvent::ThoughtChunk { text }) if *text == newest.to_string()),
            "the newest is kept: {:?}",
            backlog.last()
        );
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_question_past_even_the_reserve_is_answered_cancelled_not_left_waiting() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let drops = Drops::default();
        let (client, mut peer) = connected_with(drops.config());
        let session = SessionId("s".into());
        let (mut turn, prompt) = turn_asking_the_caller(&client, &mut peer, &session).await;
        let ask = |n: usize| {
            json!({"jsonrpc": "2.0", "id": format!("perm-{n}"), "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"title": "write"},
                "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]}})
        };
        // Updates fill what is not reserved, questions the reserve, and one
        // question more finds no place at all.
        for _ in 0..TURN_EVENTS_CAPACITY {
            peer.send(update("s", thought("hmm "))).await;
        }
        for n in 0..=TURN_QUESTIONS_RESERVED {
            peer.send(ask(n)).await;
        }
        let last = format!("perm-{TURN_QUESTIONS_RESERVED}");
        let answered = peer.recv().await;
        assert_eq!(answered["id"], last.as_str(), "answered at once, unseen");
        assert_eq!(answered["result"]["outcome"]["outcome"], "cancelled");
        assert_eq!(drops.of(DroppedUpdate::QuestionOverflow), 1);

        let mut asked = 0;
        while asked < TURN_QUESTIONS_RESERVED {
            if let TurnProgress::Event(TurnEvent::PermissionAsked(question)) = turn.next().await.expect("event") {
                question.answer("a").await.expect("answered");
                asked += 1;
            }
        }
        for n in 0..TURN_QUESTIONS_RESERVED {
            let answer = peer.recv().await;
            assert_eq!(answer["id"], format!("perm-{n}").as_str());
            assert_eq!(answer["result"]["outcome"]["optionId"], "a");
        }
        println!(
            "{} questions with the turn's events full of updates: {asked} reached the caller, 1 answered cancelled unseen",
            TURN_QUESTIONS_RESERVED + 1
        );
        peer.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}))
            .await;
        turn.finish_quietly().await.expect("the turn ends normally");
    })
    .await
    .expect("test timed out");
}
