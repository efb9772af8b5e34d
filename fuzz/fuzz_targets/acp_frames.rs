//! `acp_frames`: arbitrary bytes as an agent's stdout, through the real
//! client: line framing, JSON-RPC classification, routing, the turn.
//!
//! Per input and per permission policy: a fresh `AgentClient` over in-memory
//! pipes prompts session `s`; the input is written line by line into the
//! client's stdin side (yielding between lines, so the caller's reactions
//! interleave with the agent's frames), then that side is closed. The turn is
//! read to its end. Along the way the caller reacts as the daemon does: it
//! steers when a run is advertised, answers permission questions and form
//! elicitations (accept, decline or drop, by request id), and
//! cancels when a plan arrives; so answers in the input (prompt id 1, then
//! steers and cancels) meet requests that are really waiting.
//!
//! Must hold for every input: nothing panics; the turn ends with an outcome
//! or an error that is not a timeout (the agent closed its stdout, so nothing
//! may wait for the turn's clocks); and once the client and the turn are
//! dropped, the connection is released (the agent's stdin closes).

#![no_main]

use std::sync::LazyLock;
use std::time::Duration;

use acp_client::{
    AgentClient, ClientConfig, ContentBlock, ElicitationAction, PermissionPolicy, SessionId, TurnError, TurnEvent,
    TurnOptions, TurnProgress,
};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};
use tokio::runtime::Runtime;

/// The client's line limit; seeds hold a line past it.
const MAX_LINE_BYTES: usize = 4096;
/// Capacity of each in-memory pipe.
const PIPE_BYTES: usize = 64 * 1024;
/// The turn's text bound: small, so inputs reach it.
const MAX_TEXT_BYTES: usize = 2048;
/// Turn clocks: far above what a turn over an in-memory pipe takes, so
/// reaching one means something waited for an agent that had already gone.
const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_TURN_DURATION: Duration = Duration::from_secs(10);
/// How long the connection may take to let go of the agent's stdin once
/// the client and the turn are dropped and the agent's stdout is closed.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
});

fuzz_target!(|stdout: &[u8]| {
    for policy in [PermissionPolicy::AllowOnce, PermissionPolicy::AskCaller] {
        RUNTIME.block_on(one_turn(stdout, policy));
    }
});

async fn one_turn(stdout: &[u8], policy: PermissionPolicy) {
    let (client_stdin, mut agent_stdin) = duplex(PIPE_BYTES);
    let (mut agent_stdout, client_stdout) = duplex(PIPE_BYTES);

    // Whatever the client writes is read and discarded, so its writes never
    // block; the loop ends when the connection drops its writer.
    let drain = tokio::spawn(async move {
        let mut sink = vec![0u8; 4096];
        while agent_stdin.read(&mut sink).await.is_ok_and(|read| read > 0) {}
    });

    let config = ClientConfig {
        max_line_bytes: MAX_LINE_BYTES,
        ..Default::default()
    };
    let client = AgentClient::connect("fuzz", client_stdout, client_stdin, config);
    let session = SessionId("s".into());
    let options = TurnOptions {
        idle_timeout: IDLE_TIMEOUT,
        max_duration: MAX_TURN_DURATION,
        permission: policy,
        max_text_bytes: MAX_TEXT_BYTES,
    };
    let mut turn = client
        .prompt(&session, vec![ContentBlock::text("x")], options)
        .await
        .expect("a prompt on an open connection is written");

    let input = stdout.to_vec();
    let feeder = tokio::spawn(async move {
        for line in input.split_inclusive(|&byte| byte == b'\n') {
            if agent_stdout.write_all(line).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
        // Dropping `agent_stdout` here is the agent closing its stdout.
    });

    let mut streamed_message = String::new();
    let ending = loop {
        match turn.next().await {
            Ok(TurnProgress::Event(event)) => {
                if let TurnEvent::MessageChunk { text, .. } = &event {
                    streamed_message.push_str(text);
                }
                react(&client, &session, event).await;
            }
            Ok(TurnProgress::Finished(outcome)) => {
                if outcome.message_truncated {
                    assert!(
                        streamed_message.starts_with(&outcome.message)
                            && outcome.message.len() <= MAX_TEXT_BYTES
                            && outcome.message.len() + 4 > MAX_TEXT_BYTES.min(streamed_message.len()),
                        "a truncated message is the streamed chunks up to the bound"
                    );
                } else {
                    assert_eq!(
                        outcome.message, streamed_message,
                        "the outcome's message is the streamed chunks, in order"
                    );
                }
                break Ok(outcome);
            }
            Err(error) => break Err(error),
        }
    };
    if let Err(error @ (TurnError::IdleTimeout(_) | TurnError::DeadlineExceeded(_))) = &ending {
        panic!("the turn waited for its clocks although the agent closed its stdout: {error}");
    }
    assert!(
        matches!(turn.next().await, Err(TurnError::AlreadyFinished)),
        "a finished turn stays finished"
    );

    drop(turn);
    drop(client);
    let released = tokio::time::timeout(RELEASE_TIMEOUT, async {
        feeder.await.expect("the feeder does not panic");
        drain.await.expect("the drain does not panic");
    })
    .await;
    assert!(
        released.is_ok(),
        "the connection outlived its client and turn: the agent's stdin was never closed"
    );
}

/// What the daemon's turn runner does with an event, reduced to the calls
/// that write to the agent. Their results do not matter here, only that
/// they return.
async fn react(client: &AgentClient, session: &SessionId, event: TurnEvent) {
    match event {
        TurnEvent::RunStarted { .. } => {
            let _ = client.steer(session, "y").await;
        }
        TurnEvent::PermissionAsked(question) => {
            let first = question.request().options.first().map(|option| option.id.clone());
            let _ = match first {
                Some(option) => question.answer(&option).await,
                None => question.cancel().await,
            };
        }
        TurnEvent::ElicitationAsked(question) => {
            // Accept (empty), decline, or drop (which answers `cancel`), as
            // the request's id says.
            let _ = match question.request_id().as_u64().unwrap_or(0) % 3 {
                0 => question.answer(ElicitationAction::Accept(Default::default())).await,
                1 => question.answer(ElicitationAction::Decline).await,
                _ => Ok(drop(question)),
            };
        }
        TurnEvent::Plan { .. } => {
            let _ = client.cancel(session).await;
        }
        _ => {}
    }
}
