//! acp-client against the scripted agent as a real child process.
//!
//! These tests live here rather than in `crates/acp-client` because Cargo
//! gives a test the path of a binary only inside the binary's own package.

use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_client::{
    AcpError, AgentClient, AgentCommand, CancelOutcome, ClientConfig, ContentBlock, ControlKind,
    ControlRoute, ExitReason, InvalidSteer, PermissionKind, PermissionPolicy, SessionId, SteerRefusal,
    StopReason, Turn, TurnError, TurnEvent, TurnOptions, TurnOutcome, TurnProgress,
};
use serde_json::Value;

/// Outer bound of every test: generous, because the machines are shared.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

fn agent_with(flags: &[&str], config: ClientConfig) -> AgentClient {
    let command = AgentCommand::new("scripted", env!("CARGO_BIN_EXE_scripted-agent")).args(flags);
    AgentClient::spawn(&command, config).expect("spawn the scripted agent")
}

async fn ready_agent(flags: &[&str]) -> (AgentClient, SessionId) {
    ready_agent_with(flags, ClientConfig::default()).await
}

async fn ready_agent_with(flags: &[&str], config: ClientConfig) -> (AgentClient, SessionId) {
    let client = agent_with(flags, config);
    client.initialize().await.expect("initialize");
    let session = client
        .new_session(&std::env::temp_dir(), Vec::new())
        .await
        .expect("new session");
    (client, session)
}

async fn prompt(client: &AgentClient, session: &SessionId, text: &str) -> Turn {
    prompt_with(client, session, text, TurnOptions::default()).await
}

async fn prompt_with(client: &AgentClient, session: &SessionId, text: &str, options: TurnOptions) -> Turn {
    client
        .prompt(session, vec![ContentBlock::text(text)], options)
        .await
        .expect("prompt written")
}

/// Reads the turn until the agent advertises its run.
async fn until_run_started(turn: &mut Turn) -> String {
    loop {
        match turn.next().await.expect("turn event") {
            TurnProgress::Event(TurnEvent::RunStarted { run_id }) => return run_id,
            TurnProgress::Event(_) => {}
            TurnProgress::Finished(outcome) => panic!("turn finished before its run started: {outcome:?}"),
        }
    }
}

/// Reads the turn to its end, keeping the events.
async fn events_and_outcome(mut turn: Turn) -> (Vec<TurnEvent>, TurnOutcome) {
    let mut events = Vec::new();
    loop {
        match turn.next().await.expect("turn event") {
            TurnProgress::Event(event) => events.push(event),
            TurnProgress::Finished(outcome) => return (events, outcome),
        }
    }
}

fn frame_log_methods(dir: &Path) -> Vec<String> {
    let mut methods = Vec::new();
    for entry in std::fs::read_dir(dir).expect("frame log dir") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("frame log");
        for line in text.lines() {
            let frame: Value = serde_json::from_str(line).expect("frame log lines are JSON");
            if let Some(method) = frame.get("method").and_then(Value::as_str) {
                methods.push(method.to_owned());
            }
        }
    }
    methods
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acp-client-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

async fn within_timeout<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_reports_agent_and_session_steering() {
    within_timeout(async {
        let client = agent_with(&["--name", "probe"], ClientConfig::default());
        let info = client.initialize().await.expect("initialize");
        assert_eq!(info.name.as_deref(), Some("probe"));
        assert_eq!(info.protocol_version, 1);
        assert!(!info.session_steering, "goose-style by default");
        let steering = agent_with(&["--session-steering"], ClientConfig::default());
        assert!(steering.initialize().await.expect("initialize").session_steering);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_rejects_another_protocol_version() {
    within_timeout(async {
        let client = agent_with(&["--protocol-version", "2"], ClientConfig::default());
        let error = client.initialize().await.expect_err("version 2 must be refused");
        assert!(matches!(error, AcpError::UnsupportedProtocolVersion { ref answered, .. } if answered == 2));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_turn_streams_rounds_and_ends_end_turn() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "10"]).await;
        let turn = prompt(&client, &session, "hello [rounds=2] [tool]").await;
        let (events, outcome) = events_and_outcome(turn).await;
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert!(outcome.message.contains("round 1/2"), "{}", outcome.message);
        assert!(outcome.message.contains("round 2/2"), "{}", outcome.message);
        assert!(outcome.message.contains("done: hello"), "{}", outcome.message);
        assert!(outcome.steers.is_empty());
        let run_id = outcome.run_id.expect("run id advertised");
        assert!(run_id.starts_with("run_"), "{run_id}");
        assert!(events.iter().any(|event| matches!(event, TurnEvent::ToolCall(_))));
        assert!(
            events
                .iter()
                .any(|event| matches!(event, TurnEvent::ToolCallUpdate(_)))
        );
        assert!(matches!(events.last(), Some(TurnEvent::RunCleared)), "{events:?}");
        assert_eq!(
            client.active_run_id(&session),
            None,
            "the run is cleared with the turn"
        );

        // The session is reusable for the next turn.
        let again = prompt(&client, &session, "second [rounds=1]").await;
        let outcome = again.finish_quietly().await.expect("second turn");
        assert!(outcome.message.contains("done: second"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_prompt_on_a_busy_session_is_refused_locally() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "50"]).await;
        let turn = prompt(&client, &session, "one").await;
        let error = client
            .prompt(&session, vec![ContentBlock::text("two")], TurnOptions::default())
            .await
            .expect_err("one turn per session");
        assert!(matches!(error, AcpError::TurnInFlight(_)));
        turn.finish_quietly().await.expect("first turn still ends");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_turn_cancelled() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "200", "--rounds", "50"]).await;
        let mut turn = prompt(&client, &session, "long work").await;
        until_run_started(&mut turn).await;
        assert_eq!(
            client.cancel(&session).await.expect("cancel"),
            CancelOutcome::Ended
        );
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.stop_reason, StopReason::Cancelled);
        assert_eq!(
            client.cancel(&session).await.expect("cancel"),
            CancelOutcome::NoTurn
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_past_its_bound_is_an_error_the_caller_can_act_on() {
    within_timeout(async {
        let config = ClientConfig {
            cancel_timeout: Duration::from_millis(300),
            ..ClientConfig::default()
        };
        let (client, session) = ready_agent_with(
            &["--ignore-cancel", "--round-delay-ms", "500", "--rounds", "20"],
            config,
        )
        .await;
        let mut turn = prompt(&client, &session, "stubborn").await;
        until_run_started(&mut turn).await;
        let error = client.cancel(&session).await.expect_err("cancel must time out");
        assert!(matches!(error, AcpError::CancelTimedOut(..)), "{error:?}");
        // Respawn path: killing the agent fails the turn with a typed error.
        client.kill();
        let error = turn.finish_quietly().await.expect_err("killed agent");
        assert!(
            matches!(error, TurnError::AgentExited(ref exit) if exit.reason == ExitReason::Killed),
            "{error:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mid_turn_folds_into_same_turn() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "150", "--rounds", "4"]).await;
        let mut turn = prompt(&client, &session, "write the report").await;
        let run_id = until_run_started(&mut turn).await;
        let accepted = client
            .steer(&session, "also cover the budget")
            .await
            .expect("steer accepted");
        assert_eq!(accepted.run_id, run_id);
        assert!(accepted.message_id.starts_with("steer_"));

        let (events, outcome) = events_and_outcome(turn).await;
        assert_eq!(
            outcome.stop_reason,
            StopReason::EndTurn,
            "not cancelled: the same turn went on"
        );
        assert_eq!(
            outcome.run_id.as_deref(),
            Some(run_id.as_str()),
            "one run, no restart"
        );
        assert!(
            outcome.message.contains("done: write the report"),
            "{}",
            outcome.message
        );
        assert!(
            outcome.message.contains("steer: also cover the budget"),
            "{}",
            outcome.message
        );
        assert_eq!(outcome.steers.len(), 1);
        assert!(
            outcome.steers[0].folded,
            "the fold was seen: {:?}",
            outcome.steers
        );
        assert_eq!(outcome.unconfirmed_steers().count(), 0);
        assert!(events.iter().any(|event| matches!(
            event,
            TurnEvent::UserMessageChunk { steer_message_id: Some(id), .. } if *id == accepted.message_id
        )));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_acknowledged_but_dropped_at_run_end_is_reported_unconfirmed() {
    within_timeout(async {
        let (client, session) = ready_agent(&[
            "--end-run-after-steer",
            "--round-delay-ms",
            "200",
            "--rounds",
            "5",
        ])
        .await;
        let mut turn = prompt(&client, &session, "race").await;
        until_run_started(&mut turn).await;
        let accepted = client.steer(&session, "too late").await.expect("acknowledged");
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert!(!outcome.message.contains("too late"), "{}", outcome.message);
        let unconfirmed: Vec<_> = outcome.unconfirmed_steers().collect();
        assert_eq!(unconfirmed.len(), 1);
        assert_eq!(unconfirmed[0].accepted, accepted);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_to_an_agent_without_the_extension_is_method_not_found() {
    within_timeout(async {
        let (client, session) =
            ready_agent(&["--no-steer", "--round-delay-ms", "200", "--rounds", "5"]).await;
        let mut turn = prompt(&client, &session, "work").await;
        until_run_started(&mut turn).await;
        let refusal = client
            .steer(&session, "hello?")
            .await
            .expect_err("no steer support");
        assert_eq!(refusal, SteerRefusal::MethodNotFound);
        assert!(!refusal.turn_already_over());
        client.cancel(&session).await.expect("cancel");
        turn.finish_quietly().await.expect("cancelled turn");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_naming_a_stale_run_is_invalid_params_with_both_ids() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "200", "--rounds", "5"]).await;
        let mut turn = prompt(&client, &session, "work [advertise-wrong-run]").await;
        // The agent advertises its real run, then a run that is not live.
        let real_run = until_run_started(&mut turn).await;
        let stale_run = until_run_started(&mut turn).await;
        assert_ne!(real_run, stale_run);
        let refusal = client
            .steer(&session, "redirect")
            .await
            .expect_err("stale run id");
        let SteerRefusal::InvalidParams {
            reason: InvalidSteer::RunIdMismatch { expected, actual },
            ..
        } = refusal
        else {
            panic!("expected a run id mismatch, got {refusal:?}");
        };
        assert_eq!(expected.as_deref(), Some(stale_run.as_str()));
        assert_eq!(actual.as_deref(), Some(real_run.as_str()));
        client.cancel(&session).await.expect("cancel");
        turn.finish_quietly().await.expect("cancelled turn");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_without_a_run_id_writes_nothing() {
    within_timeout(async {
        let log_dir = temp_dir("no-run-id");
        let log_flag = log_dir.to_str().expect("utf-8 path");
        let (client, session) = ready_agent(&[
            "--frame-log-dir",
            log_flag,
            "--round-delay-ms",
            "100",
            "--rounds",
            "3",
        ])
        .await;
        let mut turn = prompt(&client, &session, "quiet [no-run-id]").await;
        // The first round chunk proves the turn is live.
        loop {
            if let TurnProgress::Event(TurnEvent::MessageChunk { .. }) = turn.next().await.expect("event") {
                break;
            }
        }
        let refusal = client.steer(&session, "hello").await.expect_err("no run id");
        assert_eq!(refusal, SteerRefusal::NoRunId);
        turn.finish_quietly().await.expect("turn ends normally");
        // No turn in flight at all: also nothing written.
        assert_eq!(client.steer(&session, "late").await, Err(SteerRefusal::NoTurn));
        let methods = frame_log_methods(&log_dir);
        assert!(
            methods.iter().any(|method| method == "session/prompt"),
            "{methods:?}"
        );
        assert!(
            !methods
                .iter()
                .any(|method| method == "_goose/unstable/session/steer"),
            "{methods:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_fires_when_the_agent_goes_silent() {
    within_timeout(async {
        let (client, session) = ready_agent(&[]).await;
        let options = TurnOptions {
            idle_timeout: Duration::from_millis(300),
            ..TurnOptions::default()
        };
        let turn = prompt_with(&client, &session, "[hang]", options).await;
        let error = turn.finish_quietly().await.expect_err("idle");
        assert!(matches!(error, TurnError::IdleTimeout(timeout) if timeout == Duration::from_millis(300)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_deadline_fires_against_a_chattering_agent() {
    within_timeout(async {
        let (client, session) = ready_agent(&[]).await;
        let options = TurnOptions {
            // The idle timer never fires: the agent never stops talking.
            idle_timeout: Duration::from_secs(30),
            max_duration: Duration::from_millis(500),
            ..TurnOptions::default()
        };
        let mut turn = prompt_with(&client, &session, "[chatter]", options).await;
        let mut thoughts = 0_u32;
        let error = loop {
            match turn.next().await {
                Ok(TurnProgress::Event(TurnEvent::ThoughtChunk { .. })) => thoughts += 1,
                Ok(TurnProgress::Event(_)) => {}
                Ok(TurnProgress::Finished(outcome)) => panic!("chatter never ends: {outcome:?}"),
                Err(error) => break error,
            }
        };
        assert!(matches!(error, TurnError::DeadlineExceeded(_)), "{error:?}");
        assert!(thoughts > 10, "the agent chattered ({thoughts} thoughts)");
        assert!(matches!(turn.next().await, Err(TurnError::AlreadyFinished)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_lines_are_survived() {
    within_timeout(async {
        let config = ClientConfig {
            max_line_bytes: 64 * 1024,
            ..ClientConfig::default()
        };
        let flags = [
            "--garbage-stdout",
            "--huge-line-bytes",
            "1048576",
            "--round-delay-ms",
            "10",
        ];
        let (client, session) = ready_agent_with(&flags, config).await;
        let outcome = prompt(&client, &session, "noisy [rounds=3]")
            .await
            .finish_quietly()
            .await
            .expect("turn survives the noise");
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert!(outcome.message.contains("round 3/3"), "{}", outcome.message);
        assert!(outcome.message.contains("done: noisy"), "{}", outcome.message);
        assert!(client.exit().is_none(), "the connection is still open");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_turn_is_a_typed_error_for_every_waiter() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "50", "--rounds", "5"]).await;
        let other = client
            .new_session(&std::env::temp_dir(), Vec::new())
            .await
            .expect("session");
        let slow = prompt(&client, &other, "[rounds=50] [delay=200]").await;
        let turn = prompt(&client, &session, "[crash-after=1]").await;
        let error = turn.finish_quietly().await.expect_err("crash");
        let TurnError::AgentExited(exit) = error else {
            panic!("expected AgentExited, got {error:?}");
        };
        assert_eq!(exit.code, Some(3));
        assert_eq!(exit.reason, ExitReason::StdoutClosed);
        // The turn on the other session fails the same way, and so does any new call.
        assert!(matches!(
            slow.finish_quietly().await,
            Err(TurnError::AgentExited(_))
        ));
        assert!(matches!(
            client.new_session(&std::env::temp_dir(), Vec::new()).await,
            Err(AcpError::AgentExited(_))
        ));
        assert!(matches!(
            client.steer(&other, "x").await,
            Err(SteerRefusal::AgentExited(_))
        ));
        assert_eq!(client.closed().await.code, Some(3));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_binary_is_a_spawn_error() {
    let command = AgentCommand::new("ghost", "/nonexistent/agent-binary");
    let error = AgentClient::spawn(&command, ClientConfig::default()).expect_err("no such binary");
    assert!(matches!(error, AcpError::Spawn { .. }), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_turns_in_flight_on_one_process() {
    within_timeout(async {
        let (client, first) = ready_agent(&["--round-delay-ms", "100", "--rounds", "3"]).await;
        let second = client
            .new_session(&std::env::temp_dir(), Vec::new())
            .await
            .expect("session");
        let mut turn_a = prompt(&client, &first, "task A").await;
        let mut turn_b = prompt(&client, &second, "task B").await;
        let run_a = until_run_started(&mut turn_a).await;
        let run_b = until_run_started(&mut turn_b).await;
        assert_ne!(run_a, run_b);
        // Steer only B while both are live.
        client.steer(&second, "only for B").await.expect("steer B");
        let (outcome_a, outcome_b) = tokio::join!(turn_a.finish_quietly(), turn_b.finish_quietly());
        let (outcome_a, outcome_b) = (outcome_a.expect("A"), outcome_b.expect("B"));
        assert!(outcome_a.message.contains("done: task A"), "{outcome_a:?}");
        assert!(!outcome_a.message.contains("only for B"), "{outcome_a:?}");
        assert!(outcome_b.message.contains("done: task B"), "{outcome_b:?}");
        assert!(
            outcome_b.message.contains("steer: only for B"),
            "{}",
            outcome_b.message
        );
        assert!(outcome_a.steers.is_empty());
        assert_eq!(outcome_b.steers.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_question_handed_to_the_caller_is_answered_by_kind() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "10", "--rounds", "1"]).await;
        let options = TurnOptions {
            permission: PermissionPolicy::AskCaller,
            // Far shorter than our wait below: an open question must
            // suspend the idle timer.
            idle_timeout: Duration::from_millis(200),
            ..TurnOptions::default()
        };
        let mut turn = prompt_with(&client, &session, "[permission]", options).await;
        let question = loop {
            match turn.next().await.expect("event") {
                TurnProgress::Event(TurnEvent::PermissionAsked(question)) => break question,
                TurnProgress::Event(_) => {}
                TurnProgress::Finished(outcome) => panic!("no question asked: {outcome:?}"),
            }
        };
        let reject = question
            .request()
            .option_of_kind(&[PermissionKind::RejectOnce])
            .expect("reject offered")
            .id
            .clone();
        let next = tokio::time::timeout(Duration::from_millis(600), turn.next()).await;
        assert!(
            next.is_err(),
            "the turn waits for the answer without timing out: {next:?}"
        );
        question.answer(&reject).await.expect("answer sent");
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert!(
            outcome.message.contains("tool: rejected (reject_once)"),
            "{}",
            outcome.message
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answers_an_open_permission_question_cancelled() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "10"]).await;
        let options = TurnOptions {
            permission: PermissionPolicy::AskCaller,
            ..TurnOptions::default()
        };
        let mut turn = prompt_with(&client, &session, "[permission]", options).await;
        let question = loop {
            if let TurnProgress::Event(TurnEvent::PermissionAsked(question)) =
                turn.next().await.expect("event")
            {
                break question;
            }
        };
        assert_eq!(
            client.cancel(&session).await.expect("cancel"),
            CancelOutcome::Ended
        );
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.stop_reason, StopReason::Cancelled);
        let late = question.answer("opt-a1").await;
        assert!(
            matches!(late, Err(acp_client::AnswerError::AlreadyAnswered)),
            "{late:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_policy_allows_by_kind() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--round-delay-ms", "10", "--rounds", "1"]).await;
        let turn = prompt(&client, &session, "[permission]").await;
        let (events, outcome) = events_and_outcome(turn).await;
        let chosen = events.iter().find_map(|event| match event {
            TurnEvent::PermissionAnswered { chosen, .. } => chosen.clone(),
            _ => None,
        });
        assert_eq!(chosen.map(|option| option.kind), Some(PermissionKind::AllowOnce));
        assert!(
            outcome.message.contains("tool: allowed (allow_once)"),
            "{}",
            outcome.message
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_options_are_read_set_and_kept_per_session() {
    within_timeout(async {
        let (client, session) =
            ready_agent(&["--controls", "config", "--rounds", "1", "--round-delay-ms", "1"]).await;
        let model = client
            .session_controls(&session)
            .control(ControlKind::Model)
            .expect("a model option");
        assert_eq!(model.current.as_deref(), Some("fast"));
        assert!(model.offers("deep") && !model.offers("huge"));
        client
            .set_control(&session, &model.route, "deep")
            .await
            .expect("set");
        let model = client
            .session_controls(&session)
            .control(ControlKind::Model)
            .unwrap();
        assert_eq!(
            model.current.as_deref(),
            Some("deep"),
            "read from the answer's configOptions"
        );
        let refused = client.set_control(&session, &model.route, "huge").await;
        assert!(matches!(refused, Err(AcpError::Rpc { .. })), "{refused:?}");
        let (_, outcome) = events_and_outcome(prompt(&client, &session, "which model?").await).await;
        assert!(
            outcome.message.contains("model: deep, mode: ask"),
            "{}",
            outcome.message
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_modes_are_set_with_set_mode() {
    within_timeout(async {
        let (client, session) = ready_agent(&["--controls", "modes"]).await;
        let controls = client.session_controls(&session);
        assert!(controls.control(ControlKind::Model).is_none());
        let mode = controls.control(ControlKind::Mode).expect("modes");
        assert_eq!(mode.route, ControlRoute::SetMode);
        client
            .set_control(&session, &mode.route, "code")
            .await
            .expect("set");
        let mode = client
            .session_controls(&session)
            .control(ControlKind::Mode)
            .unwrap();
        assert_eq!(mode.current.as_deref(), Some("code"));
    })
    .await;
}
