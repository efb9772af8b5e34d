//! A real ACP agent whose turns follow a script: rounds, delays, tool calls,
//! permission requests and message chunks, set by command-line [`Options`]
//! and by directives in the prompt text. It implements the server side of
//! goose's mid-turn steer extension the way goose does, and can be told to
//! lack it, crash, hang, chatter or print garbage. It is the peer of the
//! integration tests and the agent of the demo.
//!
//! Directives, anywhere in a prompt's text, override the options for that
//! turn: `[rounds=N]`, `[delay=MS]`, `[tool]`, `[permission]`,
//! `[permission-twice]` (ask, then ask the same question again),
//! `[stop=REASON]`, `[crash-after=N]`, `[hang]`, `[fail]`, `[chatter]`,
//! `[no-run-id]` (never advertise the run), `[advertise-wrong-run]`
//! (advertise a run id that is not live after the real one),
//! `[say-bytes=N]` (the final message goes on with N bytes of
//! [`filler_text`]), `[title-bytes=N]` (the tool call's title goes on
//! with N bytes of it), `[cat=PATH]` (read a file as the agent's user and tell
//! what it held, or the error), `[child]` (start a helper process that
//! outlives the turn), `[detached-child=MARK]` (one that leaves the agent's
//! session and process group and is orphaned), `[elicit=choice|text|form|url]` (ask the client an
//! `elicitation/create` question, if it advertised form elicitation, and
//! tell the answer), `[withdraw-elicit]` (ask, then take it back) and
//! `[foreign-updates=N]` (first stream N updates for sessions the client
//! never opened, each of its own: a misbehaving agent). Any
//! other bracketed text is just text. With `--controls`, sessions offer a
//! model and a mode (see `controls`).
//!
//! stdout (or whatever [`serve`] writes to) carries only JSON-RPC frames,
//! unless a misbehaviour flag says otherwise; human logs go to stderr, one
//! line each, prefixed `scripted-agent:`.

/// Logs one line to stderr. stdout belongs to the protocol. Best effort:
/// a closed stderr (the client died) must not end the agent, which
/// `eprintln!` would by panicking.
macro_rules! log {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "scripted-agent: {}", format_args!($($arg)*));
    }};
}

mod acp;
mod agent;
mod controls;
mod directives;
mod elicit;
mod filler;
mod frame_log;
mod goose_steer;
mod ids;
mod mcp_client;
mod mcp_http;
mod mcp_offered;
mod mcp_stdio;
mod mcp_tasks;
mod misbehaviour;
mod options;
mod permission;
mod rpc;
mod session;
mod shared;
mod steering;
mod turn;
mod wire;
mod work;

use std::io;
use std::process::ExitCode;
use std::sync::Arc;

use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tokio_util::codec::FramedRead;

pub use filler::filler_text;
pub use options::{
    Controls, DEFAULT_AGENT_NAME, DEFAULT_CHATTER_INTERVAL_MS, DEFAULT_PROTOCOL_VERSION,
    DEFAULT_ROUND_DELAY_MS, DEFAULT_ROUNDS, Options, Reopen,
};

use frame_log::FrameLog;
use rpc::RpcError;
use shared::Agent;
use wire::{ClientGone, Inbound, LineDecoder, MAX_INBOUND_LINE_BYTES};

/// Exit code of `--exit-immediately`.
const EXIT_IMMEDIATELY_CODE: u8 = 2;
/// Worker threads of the stdio runtime: turns run concurrently, but the agent
/// is a test peer and must not crowd the machine it tests on.
const RUNTIME_WORKER_THREADS: usize = 2;

/// Speaks ACP over `input`/`output` until `input` reaches EOF; in-flight
/// turns are then dropped unanswered. Errors: reading `input` failed,
/// writing `output` failed (the client is gone), or the frame log could not
/// be opened or written.
///
/// `--exit-immediately` is a process-level fault and is honoured by
/// [`run_stdio`] only; `[crash-after=N]` exits the whole process even here.
pub async fn serve<R, W>(options: Options, input: R, output: W) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    log!("pid {} serving: {}", std::process::id(), options.summary());
    let mut frame_log = match &options.frame_log_dir {
        Some(dir) => Some(FrameLog::open(dir).await?),
        None => None,
    };
    let linger = options.linger;
    let (outbox, mut writer) = wire::spawn_writer(output);
    let agent = Arc::new(Agent::new(options, outbox));
    let mut frames = FramedRead::new(input, LineDecoder::new(MAX_INBOUND_LINE_BYTES));
    let mut turns = JoinSet::new();
    let stopped = loop {
        tokio::select! {
            inbound = frames.next() => match inbound {
                None => break Stop::InputEnded,
                Some(Err(error)) => break Stop::InputFailed(error),
                Some(Ok(inbound)) => {
                    match receive(&agent, inbound, frame_log.as_mut(), &mut turns).await {
                        Ok(()) => {}
                        Err(Received::ClientGone) => break Stop::ClientGone,
                        Err(Received::FrameLog(error)) => break Stop::InputFailed(error),
                    }
                }
            },
            Some(joined) = turns.join_next() => {
                if let Err(error) = joined {
                    log!("a turn task failed: {error}");
                }
            }
            written = &mut writer => break Stop::WriterEnded(flatten(written)),
        }
    };
    if linger && !matches!(stopped, Stop::InputFailed(_)) {
        log!("the client is gone; running on until killed (--linger)");
        std::future::pending::<()>().await;
    }
    turns.shutdown().await;
    drop(agent);
    match stopped {
        Stop::InputEnded => {
            log!("input closed, stopping");
            flatten(writer.await)
        }
        Stop::InputFailed(error) => Err(error),
        Stop::ClientGone => flatten(writer.await),
        Stop::WriterEnded(written) => written,
    }
}

/// Serves stdin/stdout on a small multi-thread runtime; the exit code says
/// how it ended (0: input closed, 1: an I/O error, 2: `--exit-immediately`).
pub fn run_stdio(options: Options) -> ExitCode {
    if options.exit_immediately {
        log!(
            "pid {} exiting at start-up (--exit-immediately)",
            std::process::id()
        );
        return ExitCode::from(EXIT_IMMEDIATELY_CODE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKER_THREADS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            log!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(options, tokio::io::stdin(), tokio::io::stdout()));
    // A read of stdin may still be blocked in a pool thread (when stdout
    // failed first); waiting for it could take forever.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log!("stopped: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Why the serve loop stopped.
enum Stop {
    InputEnded,
    InputFailed(io::Error),
    /// A send found the writer gone; the writer's result says why.
    ClientGone,
    WriterEnded(io::Result<()>),
}

/// Why one inbound line could not be handled.
enum Received {
    ClientGone,
    FrameLog(io::Error),
}

impl From<ClientGone> for Received {
    fn from(_: ClientGone) -> Self {
        Received::ClientGone
    }
}

/// Parses, records and dispatches one inbound line. A line that is not JSON
/// is answered with -32700 (id null) and does not end the connection.
async fn receive(
    agent: &Arc<Agent>,
    inbound: Inbound,
    frame_log: Option<&mut FrameLog>,
    turns: &mut JoinSet<()>,
) -> Result<(), Received> {
    let line = match inbound {
        Inbound::Line(line) => line,
        Inbound::Oversized { bytes } => {
            log!("skipped an input line of {bytes} bytes (limit {MAX_INBOUND_LINE_BYTES})");
            let error = RpcError::parse_error(format!(
                "line of {bytes} bytes exceeds the limit of {MAX_INBOUND_LINE_BYTES} bytes"
            ));
            return Ok(agent.outbox.respond_error(serde_json::Value::Null, error).await?);
        }
    };
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let frame = match serde_json::from_slice(&line) {
        Ok(frame) => frame,
        Err(error) => {
            log!("input line is not JSON: {error}");
            let error = RpcError::parse_error(error.to_string());
            return Ok(agent.outbox.respond_error(serde_json::Value::Null, error).await?);
        }
    };
    if let Some(frame_log) = frame_log {
        frame_log.record(&frame).await.map_err(Received::FrameLog)?;
    }
    Ok(agent.dispatch(frame, turns).await?)
}

fn flatten(joined: Result<io::Result<()>, tokio::task::JoinError>) -> io::Result<()> {
    joined.map_err(io::Error::other)?
}
