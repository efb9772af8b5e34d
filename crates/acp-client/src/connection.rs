//! The state shared by one agent connection's reader task and its callers.
//!
//! Owns: the write half (one writer at a time, so frames never interleave),
//! the table of requests waiting for an answer, the per-session state (live
//! run id, the turn in flight, updates that arrived outside a turn, open
//! questions: permission and elicitation), and the routing of every frame
//! the agent sends.
//!
//! Routing happens on the single reader task, under one lock, in the order
//! frames arrived. That order is what makes the steer bookkeeping exact:
//! when a prompt's answer is routed, every update and every steer answer
//! that preceded it on the wire has already been recorded in its turn.
//!
//! The reader never writes to the agent itself: answers to the agent's
//! requests go out on spawned tasks, so a full stdin pipe can never stop us
//! from draining the agent's stdout (which would deadlock both sides).
//!
//! What an agent sends is bounded here, and what is dropped is reported to
//! the [`DropObserver`]:
//! - updates for a session this client never opened are dropped (no state
//!   is made for them), except while a `session/new` is unanswered: then up
//!   to [`UNCLAIMED_UPDATES_LIMIT`] are held, and given to the session the
//!   answer names (the rest are dropped when no `session/new` is left
//!   unanswered);
//! - updates outside a turn are kept in the session's backlog, at most
//!   [`SESSION_BACKLOG_LIMIT`], the oldest dropped first;
//! - a turn's events wait for its caller in a channel of
//!   [`TURN_EVENTS_CAPACITY`]; the last [`TURN_QUESTIONS_RESERVED`] places
//!   are kept for questions (permission, elicitation, a withdrawal), so an
//!   update past the others is not delivered, while a question is. The
//!   turn's outcome does not suffer: its text, usage and run id are gathered
//!   here, as each update is routed ([`Transcript`]), and the prompt's answer
//!   travels apart. A question that finds even the reserve full is answered
//!   cancelled at once (its handle is dropped), so the agent never waits on
//!   a question nobody will see.

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use acp_protocol::{
    AgentExit, AvailableCommand, ElicitationAction, ElicitationRequest, ExitReason, PermissionPolicy,
    PermissionRequest, RpcError, RunMarker, SessionControls, SessionId, SteerAccepted, SteerDelivery,
    TextChunk, codes, methods, permission_outcome,
};
use futures_util::SinkExt;
use serde_json::Value;
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::{FramedWrite, LinesCodec};

use crate::TurnEvent;
use crate::dropped::{DropObserver, DroppedUpdate};
use crate::error::AcpError;
use crate::jsonrpc::{self, Incoming, Malformed};
use crate::pending::{AnswerSink, OpenRequest, PendingAnswer};
use crate::question::{ElicitationQuestion, PermissionQuestion};
use crate::transcript::Transcript;

pub(crate) type BoxWrite = Pin<Box<dyn AsyncWrite + Send>>;

/// Longest excerpt of a bad line we put in a log line.
const LOG_EXCERPT_CHARS: usize = 120;

/// Updates that arrive for a session while no turn is in flight are kept
/// until the caller takes them; past this many the oldest are dropped, so a
/// chatty idle agent cannot grow memory without bound.
pub const SESSION_BACKLOG_LIMIT: usize = 256;
/// Updates for a session not yet known, held while a `session/new` is
/// unanswered (some agents describe a session before they answer with its
/// id), for all such sessions together.
pub const UNCLAIMED_UPDATES_LIMIT: usize = 64;
/// Events of one turn waiting for its caller to read them.
pub const TURN_EVENTS_CAPACITY: usize = 1024;
/// Of [`TURN_EVENTS_CAPACITY`], the places only questions may take.
pub const TURN_QUESTIONS_RESERVED: usize = 64;

/// What a request's waiter receives.
pub(crate) enum Waiter {
    Plain(oneshot::Sender<Result<Value, RpcError>>),
    /// `session/new`: its answer makes the session known as it is routed,
    /// before any update that follows it on the wire.
    OpenSession(oneshot::Sender<Result<Value, RpcError>>),
    Prompt {
        session: SessionId,
        tx: oneshot::Sender<PromptCompletion>,
    },
    Steer {
        session: SessionId,
        turn_seq: u64,
        tx: oneshot::Sender<SteerReply>,
    },
}

/// The end of a prompt, with the steer ledger of its turn.
#[derive(Debug)]
pub(crate) struct PromptCompletion {
    pub result: Result<Value, RpcError>,
    pub steers: Vec<SteerDelivery>,
    pub transcript: Transcript,
}

/// The answer to a steer, with whether its turn was still in flight.
#[derive(Debug)]
pub(crate) enum SteerReply {
    Accepted(SteerAccepted),
    /// The agent acknowledged, but its answer arrived after the turn ended.
    AcceptedAfterTurn,
    Malformed(Value),
    Refused(RpcError),
}

/// The turn in flight on a session.
pub(crate) struct LiveTurn {
    pub seq: u64,
    pub prompt_id: u64,
    events: mpsc::Sender<TurnEvent>,
    pub policy: PermissionPolicy,
    pub open_questions: Arc<watch::Sender<usize>>,
    /// Set to `true` when the prompt is answered; `cancel` waits on it.
    pub done: watch::Sender<bool>,
    accepted_steers: Vec<SteerAccepted>,
    folded_steers: HashSet<String>,
    transcript: Transcript,
}

impl LiveTurn {
    /// A turn and the receiving end of its events.
    pub(crate) fn new(
        seq: u64,
        prompt_id: u64,
        policy: PermissionPolicy,
        max_text_bytes: usize,
    ) -> (Self, mpsc::Receiver<TurnEvent>) {
        let (events, receiver) = mpsc::channel(TURN_EVENTS_CAPACITY);
        let turn = LiveTurn {
            seq,
            prompt_id,
            events,
            policy,
            open_questions: Arc::new(watch::channel(0).0),
            done: watch::channel(false).0,
            accepted_steers: Vec::new(),
            folded_steers: HashSet::new(),
            transcript: Transcript::new(max_text_bytes),
        };
        (turn, receiver)
    }

    /// Hands an update to the caller, unless only the questions' reserve is
    /// left; returns whether it was delivered. A caller that dropped its
    /// turn handle no longer listens: that is no drop of ours.
    fn deliver_update(&self, event: TurnEvent) -> bool {
        if self.events.capacity() <= TURN_QUESTIONS_RESERVED {
            return self.events.is_closed();
        }
        let _ = self.events.try_send(event);
        true
    }

    /// Hands a question (or a withdrawal) to the caller; returns whether it
    /// was delivered. Undelivered, the event is dropped here, and with it
    /// a question's handle, which answers the agent cancelled.
    fn deliver_question(&self, event: TurnEvent) -> bool {
        match self.events.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => true,
            Err(mpsc::error::TrySendError::Full(_)) => false,
        }
    }

    fn steer_report(&self) -> Vec<SteerDelivery> {
        self.accepted_steers
            .iter()
            .map(|steer| SteerDelivery {
                folded: self.folded_steers.contains(&steer.message_id),
                accepted: steer.clone(),
            })
            .collect()
    }
}

#[derive(Default)]
pub(crate) struct SessionState {
    /// The freshest run the agent advertised; read when a steer is written.
    pub active_run_id: Option<String>,
    pub turn: Option<LiveTurn>,
    backlog: VecDeque<TurnEvent>,
    /// The backlog dropped an update since the caller last took it (warned
    /// once, counted each time).
    backlog_overflowed: bool,
    /// The agent's questions (permission, elicitation) waiting on the caller.
    open_requests: Vec<OpenRequest>,
    /// `session/load` is replaying history: updates are dropped, counted.
    replaying: Option<usize>,
    /// The session's model and mode, as the agent last described them.
    pub controls: SessionControls,
    /// The session's title, as the agent last set it (`""`: cleared).
    pub title: Option<String>,
    /// The session's slash commands, once the agent advertised them
    /// (`available_commands_update`; each replaces the list).
    pub commands: Option<Vec<AvailableCommand>>,
}

impl SessionState {
    /// Keeps the commands `update` advertises, if it does; `true` then.
    fn keep_commands(&mut self, update: &Value) -> bool {
        match acp_protocol::available_commands(update) {
            Some(commands) => {
                self.commands = Some(commands);
                true
            }
            None => false,
        }
    }
}

#[derive(Default)]
pub(crate) struct State {
    pub pending: HashMap<u64, Waiter>,
    /// The sessions this client opened (or is opening: loaded, resumed,
    /// prompted). Only the client's own calls add one: an agent's frames
    /// never do.
    pub sessions: HashMap<SessionId, SessionState>,
    /// Updates for sessions not known yet, while a `session/new` is
    /// unanswered (at most [`UNCLAIMED_UPDATES_LIMIT`]).
    unclaimed: VecDeque<(SessionId, TurnEvent)>,
    next_turn_seq: u64,
}

impl State {
    pub(crate) fn next_turn_seq(&mut self) -> u64 {
        self.next_turn_seq += 1;
        self.next_turn_seq
    }

    fn opening_a_session(&self) -> bool {
        self.pending
            .values()
            .any(|waiter| matches!(waiter, Waiter::OpenSession(_)))
    }
}

pub(crate) struct Connection {
    /// The agent's name, for logs.
    pub agent: String,
    writer: tokio::sync::Mutex<FramedWrite<BoxWrite, LinesCodec>>,
    state: Mutex<State>,
    next_id: AtomicU64,
    exit: OnceLock<AgentExit>,
    closed: watch::Sender<bool>,
    killed: AtomicBool,
    write_timeout: Duration,
    drops: DropObserver,
    /// See [`crate::ClientConfig::own_mcp_server`].
    own_mcp_server: Option<&'static str>,
    /// An update for an unknown session was already warned of (the next
    /// ones are only counted: the agent could send millions).
    warned_unknown_session: AtomicBool,
    /// Woken when a session's commands arrive (see
    /// `AgentClient::session_commands_within`).
    pub(crate) commands_arrived: tokio::sync::Notify,
}

impl AnswerSink for Connection {
    fn answer<'a>(
        &'a self,
        session: &'a SessionId,
        rpc_id: &'a Value,
        result: Value,
    ) -> Pin<Box<dyn Future<Output = Result<bool, AcpError>> + Send + 'a>> {
        Box::pin(self.answer_open_request(session, rpc_id, result))
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn new(
        agent: String,
        writer: BoxWrite,
        write_timeout: Duration,
        drops: DropObserver,
        own_mcp_server: Option<&'static str>,
    ) -> Self {
        Connection {
            agent,
            writer: tokio::sync::Mutex::new(FramedWrite::new(writer, LinesCodec::new())),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            exit: OnceLock::new(),
            closed: watch::channel(false).0,
            killed: AtomicBool::new(false),
            write_timeout,
            drops,
            own_mcp_server,
            warned_unknown_session: AtomicBool::new(false),
            commands_arrived: tokio::sync::Notify::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock is a bug in this crate; the state
        // itself stays consistent per operation, so keep serving.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn next_request_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// How the agent went away, once it has.
    pub(crate) fn exit(&self) -> Option<AgentExit> {
        self.exit.get().cloned()
    }

    /// How the agent went away; for callers woken by a closed channel,
    /// which only happens once the exit is recorded.
    pub(crate) fn exit_info(&self) -> AgentExit {
        self.exit().unwrap_or(AgentExit {
            code: None,
            signal: None,
            reason: ExitReason::StdoutClosed,
        })
    }

    pub(crate) fn ensure_open(&self) -> Result<(), AcpError> {
        match self.exit() {
            Some(exit) => Err(AcpError::AgentExited(exit)),
            None => Ok(()),
        }
    }

    pub(crate) fn subscribe_closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    pub(crate) fn mark_killed(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }

    pub(crate) fn was_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Writes one frame. The writer lock is what serializes frames; callers
    /// that must read state at the moment of writing hold it themselves via
    /// [`Connection::write_locked`].
    pub(crate) async fn write(&self, frame: String) -> Result<(), AcpError> {
        let mut writer = self.writer.lock().await;
        self.write_locked(&mut writer, frame).await
    }

    /// Closes the agent's stdin (once no frame is being written).
    pub(crate) async fn close_input(&self) {
        let mut writer = self.writer.lock().await;
        if let Err(error) = SinkExt::<String>::close(&mut *writer).await {
            tracing::debug!(agent = %self.agent, %error, "closing the agent's stdin failed");
        }
    }

    pub(crate) async fn writer(&self) -> tokio::sync::MutexGuard<'_, FramedWrite<BoxWrite, LinesCodec>> {
        self.writer.lock().await
    }

    pub(crate) async fn write_locked(
        &self,
        writer: &mut FramedWrite<BoxWrite, LinesCodec>,
        frame: String,
    ) -> Result<(), AcpError> {
        self.ensure_open()?;
        match tokio::time::timeout(self.write_timeout, writer.send(frame)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => {
                tracing::warn!(agent = %self.agent, %error, "writing to the agent failed");
                Err(self.exit().map_or(
                    AcpError::AgentExited(AgentExit {
                        code: None,
                        signal: None,
                        reason: ExitReason::WriteFailed,
                    }),
                    AcpError::AgentExited,
                ))
            }
            Err(_) => Err(AcpError::Timeout {
                method: "write to agent stdin".into(),
                after: self.write_timeout,
            }),
        }
    }

    /// Sends a frame from a context that must not wait for the write (the
    /// reader task, `Drop`).
    fn write_detached(self: &Arc<Self>, frame: String) {
        let conn = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(error) = conn.write(frame).await {
                tracing::debug!(agent = %conn.agent, %error, "detached write failed");
            }
        });
    }

    /// Marks the connection dead and fails everything waiting on it. Every
    /// waiter's sender is dropped, so each caller wakes with an error rather
    /// than hanging; live turns lose their event senders the same way.
    pub(crate) fn close(&self, exit: AgentExit) {
        if self.exit.set(exit.clone()).is_err() {
            return;
        }
        // A kill the client asked for is no news; any other end is.
        if exit.reason == ExitReason::Killed {
            tracing::debug!(agent = %self.agent, %exit, "agent connection closed");
        } else {
            tracing::warn!(agent = %self.agent, %exit, "agent connection closed");
        }
        let (pending, sessions) = {
            let mut state = self.lock();
            (
                std::mem::take(&mut state.pending),
                std::mem::take(&mut state.sessions),
            )
        };
        drop(pending);
        drop(sessions);
        self.closed.send_replace(true);
    }

    /// Routes one line from the agent.
    pub(crate) fn route_line(self: &Arc<Self>, line: &str) {
        if let Some(chunk) = TextChunk::parse(line) {
            return self.on_session_update(chunk.session, None, None, chunk.event);
        }
        match Incoming::parse(line) {
            Ok(Incoming::Response { id, result }) => self.on_response(id, result),
            Ok(Incoming::Notification { method, params }) => self.on_notification(&method, params),
            Ok(Incoming::Request { id, method, params }) => self.on_request(id, &method, params),
            Err(Malformed::NotJson(error)) => tracing::warn!(
                agent = %self.agent, %error, line = %excerpt(line),
                "skipped a line from the agent that is not JSON"
            ),
            Err(malformed) => tracing::warn!(
                agent = %self.agent, ?malformed, line = %excerpt(line),
                "skipped a JSON line that is not a JSON-RPC message"
            ),
        }
    }

    fn on_response(&self, id: u64, result: Result<Value, RpcError>) {
        let mut state = self.lock();
        let Some(waiter) = state.pending.remove(&id) else {
            // Late answers to requests we stopped waiting for (timeouts).
            tracing::debug!(agent = %self.agent, id, "response to a request nobody waits for");
            return;
        };
        match waiter {
            Waiter::Plain(tx) => {
                let _ = tx.send(result);
            }
            Waiter::OpenSession(tx) => {
                self.session_opened(&mut state, &result);
                let _ = tx.send(result);
            }
            Waiter::Prompt { session, tx } => {
                let (steers, transcript) = state
                    .sessions
                    .get_mut(&session)
                    .and_then(|session_state| finish_turn(session_state, id))
                    .unwrap_or_default();
                let _ = tx.send(PromptCompletion {
                    result,
                    steers,
                    transcript,
                });
            }
            Waiter::Steer {
                session,
                turn_seq,
                tx,
            } => {
                let live = state
                    .sessions
                    .get_mut(&session)
                    .and_then(|session_state| session_state.turn.as_mut())
                    .filter(|turn| turn.seq == turn_seq);
                let reply = match (result, live) {
                    (Err(error), _) => SteerReply::Refused(error),
                    (Ok(value), live) => match SteerAccepted::parse(&value) {
                        None => SteerReply::Malformed(value),
                        Some(accepted) => match live {
                            Some(turn) => {
                                turn.accepted_steers.push(accepted.clone());
                                SteerReply::Accepted(accepted)
                            }
                            None => SteerReply::AcceptedAfterTurn,
                        },
                    },
                };
                let _ = tx.send(reply);
            }
        }
    }

    /// A `session/new` was answered: the session it names is known from
    /// here on, with what the agent said of it before. Updates held for
    /// other sessions go once no `session/new` is left unanswered.
    fn session_opened(&self, state: &mut State, result: &Result<Value, RpcError>) {
        if let Some(session) = result
            .as_ref()
            .ok()
            .and_then(|result| result.get("sessionId"))
            .and_then(Value::as_str)
        {
            let session = SessionId(session.to_owned());
            let (claimed, others) = std::mem::take(&mut state.unclaimed)
                .into_iter()
                .partition(|(held_for, _)| *held_for == session);
            state.unclaimed = others;
            let session_state = state.sessions.entry(session).or_default();
            // Commands advertised before the answer are the session's too.
            for (_, event) in &claimed {
                if let TurnEvent::Other(raw) = event
                    && session_state.keep_commands(raw)
                {
                    self.commands_arrived.notify_waiters();
                }
            }
            session_state
                .backlog
                .extend(claimed.into_iter().map(|(_, event)| event));
        }
        if !state.opening_a_session() {
            self.drop_unclaimed(state);
        }
    }

    fn drop_unclaimed(&self, state: &mut State) {
        for _ in state.unclaimed.drain(..) {
            self.drops.dropped(DroppedUpdate::UnknownSession);
        }
    }

    /// An update for a session this client does not know: held while a
    /// `session/new` is unanswered (it may be that session's), else dropped.
    fn unknown_session_update(&self, state: &mut State, session: SessionId, event: TurnEvent) {
        if !state.opening_a_session() {
            self.drop_unclaimed(state);
            self.drops.dropped(DroppedUpdate::UnknownSession);
            if !self.warned_unknown_session.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    agent = %self.agent, %session,
                    "update for a session this client never opened: dropped (this and the next ones, counted)"
                );
            }
            return;
        }
        if state.unclaimed.len() == UNCLAIMED_UPDATES_LIMIT {
            state.unclaimed.pop_front();
            self.drops.dropped(DroppedUpdate::UnknownSession);
        }
        state.unclaimed.push_back((session, event));
    }

    fn on_notification(self: &Arc<Self>, method: &str, params: Value) {
        if method == methods::CANCEL_REQUEST {
            return self.on_cancel_request(&params);
        }
        if method != methods::SESSION_UPDATE {
            tracing::debug!(agent = %self.agent, method, "ignored notification");
            return;
        }
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            tracing::warn!(agent = %self.agent, "session/update without a sessionId");
            return;
        };
        let Some(update) = params.get("update") else {
            tracing::warn!(agent = %self.agent, %session, "session/update without an update");
            return;
        };
        let marker = acp_protocol::run_marker(update);
        let event = acp_protocol::turn_event(update.clone());
        self.on_session_update(session, Some(update), marker, event);
    }

    /// One update for `session`, parsed: into its turn, or its backlog
    /// when no turn runs. `raw` is the update as sent, where it may
    /// describe the session's controls (a text chunk read borrowed never
    /// does).
    fn on_session_update(
        &self,
        session: &str,
        raw: Option<&Value>,
        marker: Option<RunMarker>,
        event: TurnEvent,
    ) {
        let session = SessionId(session.to_owned());
        let mut state = self.lock();
        let Some(session_state) = state.sessions.get_mut(&session) else {
            return self.unknown_session_update(&mut state, session, event);
        };
        // State, not history: kept even while a load replays.
        if let Some(raw) = raw {
            session_state.controls.apply_update(raw);
            if let Some(title) = acp_protocol::session_title(raw) {
                session_state.title = Some(title);
            }
            if session_state.keep_commands(raw) {
                self.commands_arrived.notify_waiters();
            }
        }
        if let Some(replayed) = session_state.replaying.as_mut() {
            *replayed += 1;
            return;
        }
        match marker {
            Some(RunMarker::Started(run_id)) => session_state.active_run_id = Some(run_id),
            Some(RunMarker::Cleared) => session_state.active_run_id = None,
            None => {}
        }
        if let Some(turn) = session_state.turn.as_mut() {
            if let TurnEvent::UserMessageChunk {
                steer_message_id: Some(message_id),
                ..
            } = &event
            {
                turn.folded_steers.insert(message_id.clone());
            }
            turn.transcript.observe(&event);
            if !turn.deliver_update(event) {
                self.drops.dropped(DroppedUpdate::TurnEventsFull);
            }
            return;
        }
        tracing::trace!(agent = %self.agent, %session, ?event, "update outside a turn kept in the session backlog");
        if session_state.backlog.len() == SESSION_BACKLOG_LIMIT {
            session_state.backlog.pop_front();
            self.drops.dropped(DroppedUpdate::BacklogFull);
            if !std::mem::replace(&mut session_state.backlog_overflowed, true) {
                tracing::warn!(
                    agent = %self.agent, %session, limit = SESSION_BACKLOG_LIMIT,
                    "session backlog full: its oldest updates are dropped (counted)"
                );
            }
        }
        session_state.backlog.push_back(event);
    }

    /// Hands a question (or a withdrawal) to its turn's caller; one that
    /// finds even the questions' reserve full is dropped, which answers a
    /// question cancelled.
    fn deliver_question(&self, turn: &LiveTurn, event: TurnEvent) {
        if !turn.deliver_question(event) {
            self.drops.dropped(DroppedUpdate::QuestionOverflow);
            tracing::warn!(
                agent = %self.agent, unread = TURN_EVENTS_CAPACITY,
                "a question found its turn's events full: answered cancelled"
            );
        }
    }

    /// The agent withdraws one of its requests. Only questions (permission,
    /// elicitation) wait on us for long: one still open is answered -32800
    /// (request cancelled) and its turn is told, so that no later answer is
    /// applied to nothing.
    fn on_cancel_request(self: &Arc<Self>, params: &Value) {
        let Some(request_id) = params.get("requestId").or_else(|| params.get("id")).cloned() else {
            tracing::warn!(agent = %self.agent, "$/cancel_request without a request id");
            return;
        };
        let mut state = self.lock();
        let withdrawn = state.sessions.iter_mut().find_map(|(session, session_state)| {
            let position = session_state
                .open_requests
                .iter()
                .position(|open| open.rpc_id == request_id)?;
            session_state.open_requests.remove(position);
            Some(session.clone())
        });
        let Some(session) = withdrawn else {
            tracing::debug!(agent = %self.agent, %request_id, "$/cancel_request for nothing pending");
            return;
        };
        tracing::info!(agent = %self.agent, %request_id, "the agent withdrew its question");
        self.write_detached(jsonrpc::error_response(
            &request_id,
            codes::REQUEST_CANCELLED,
            "Request cancelled",
        ));
        let turn = state
            .sessions
            .get(&session)
            .and_then(|session_state| session_state.turn.as_ref());
        if let Some(turn) = turn {
            self.deliver_question(turn, TurnEvent::QuestionWithdrawn { request_id });
        }
    }

    fn on_request(self: &Arc<Self>, id: Value, method: &str, params: Value) {
        if method == methods::REQUEST_PERMISSION {
            return self.on_permission_request(id, params);
        }
        if method == methods::ELICITATION_CREATE {
            return self.on_elicitation(id, params);
        }
        tracing::debug!(agent = %self.agent, method, "answered an unknown agent request with -32601");
        self.write_detached(jsonrpc::error_response(
            &id,
            codes::METHOD_NOT_FOUND,
            "Method not found",
        ));
    }

    fn on_permission_request(self: &Arc<Self>, id: Value, params: Value) {
        let request = match PermissionRequest::parse(params) {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(agent = %self.agent, %error, "malformed permission request");
                self.write_detached(jsonrpc::error_response(
                    &id,
                    codes::INVALID_PARAMS,
                    "Invalid params",
                ));
                return;
            }
        };
        let mut state = self.lock();
        let Some(session_state) = state.sessions.get_mut(&request.session_id) else {
            tracing::warn!(
                agent = %self.agent, session = %request.session_id,
                "permission asked for a session this client never opened: answered cancelled"
            );
            self.write_detached(jsonrpc::response(&id, &permission_outcome(None)));
            return;
        };
        let Some(turn) = session_state.turn.as_ref() else {
            tracing::warn!(
                agent = %self.agent, session = %request.session_id,
                "permission asked outside a turn: answered cancelled"
            );
            self.write_detached(jsonrpc::response(&id, &permission_outcome(None)));
            return;
        };
        let own_tool = self
            .own_mcp_server
            .is_some_and(|server| request.is_tool_of_mcp_server(server));
        // The caller's own tools are bounded by the caller; asking a person
        // (or refusing) each of them would only get in the way.
        let policy = if own_tool {
            PermissionPolicy::AllowOnce
        } else {
            turn.policy
        };
        let event = match policy {
            PermissionPolicy::AskCaller => {
                let open = PermissionQuestion::open_request(id);
                let open_requests = &mut session_state.open_requests;
                let pending = self.pending_answer(open_requests, turn, &request.session_id, open);
                let asked = TurnEvent::PermissionAsked(PermissionQuestion::new(request, pending));
                return self.deliver_question(turn, asked);
            }
            policy => {
                let chosen = policy.choose(&request);
                self.write_detached(jsonrpc::response(&id, &permission_outcome(chosen.as_ref())));
                TurnEvent::PermissionAnswered { request, chosen }
            }
        };
        // Answered already: for the caller's information only.
        if !turn.deliver_update(event) {
            self.drops.dropped(DroppedUpdate::TurnEventsFull);
        }
    }

    /// `elicitation/create`: a form question for the caller when the turn
    /// asks the caller ([`PermissionPolicy::AskCaller`], the only case in
    /// which the client advertises elicitation); otherwise, and for forms
    /// this client cannot ask, `decline` with a log line.
    fn on_elicitation(self: &Arc<Self>, id: Value, params: Value) {
        let decline = |conn: &Arc<Self>| {
            conn.write_detached(jsonrpc::response(&id, &ElicitationAction::Decline.result()));
        };
        let request = match ElicitationRequest::parse(params) {
            Ok(request) => request,
            Err(unsupported) => {
                tracing::warn!(agent = %self.agent, %unsupported, "elicitation answered decline");
                return decline(self);
            }
        };
        let mut state = self.lock();
        let Some(session_state) = state.sessions.get_mut(&request.session_id) else {
            tracing::warn!(
                agent = %self.agent, session = %request.session_id,
                "elicitation for a session this client never opened: answered cancel"
            );
            self.write_detached(jsonrpc::response(&id, &ElicitationAction::Cancel.result()));
            return;
        };
        let Some(turn) = session_state.turn.as_ref() else {
            tracing::warn!(
                agent = %self.agent, session = %request.session_id,
                "elicitation outside a turn: answered cancel"
            );
            self.write_detached(jsonrpc::response(&id, &ElicitationAction::Cancel.result()));
            return;
        };
        if turn.policy != PermissionPolicy::AskCaller {
            tracing::warn!(
                agent = %self.agent, session = %request.session_id,
                "elicitation although none was advertised (nobody answers questions): answered decline"
            );
            return decline(self);
        }
        let open = ElicitationQuestion::open_request(id);
        let pending = self.pending_answer(&mut session_state.open_requests, turn, &request.session_id, open);
        let asked = TurnEvent::ElicitationAsked(ElicitationQuestion::new(request, pending));
        self.deliver_question(turn, asked);
    }

    /// Records `open` as waiting on the caller in `turn` and returns its
    /// answering end.
    fn pending_answer(
        self: &Arc<Self>,
        open_requests: &mut Vec<OpenRequest>,
        turn: &LiveTurn,
        session: &SessionId,
        open: OpenRequest,
    ) -> PendingAnswer {
        open_requests.push(open.clone());
        PendingAnswer::new(
            session.clone(),
            open,
            Arc::<Self>::clone(self),
            Arc::clone(&turn.open_questions),
        )
    }

    /// Answers an open question, unless it was already answered (for
    /// example `cancelled` by a cancel of its turn, or withdrawn). Returns
    /// whether this call answered it.
    pub(crate) async fn answer_open_request(
        &self,
        session: &SessionId,
        rpc_id: &Value,
        outcome: Value,
    ) -> Result<bool, AcpError> {
        let was_open = {
            let mut state = self.lock();
            state.sessions.get_mut(session).is_some_and(|session_state| {
                let before = session_state.open_requests.len();
                session_state.open_requests.retain(|open| open.rpc_id != *rpc_id);
                session_state.open_requests.len() != before
            })
        };
        if !was_open {
            return Ok(false);
        }
        self.write(jsonrpc::response(rpc_id, &outcome)).await?;
        Ok(true)
    }

    /// Takes the session's open questions (to answer them `cancelled` when
    /// the turn is cancelled).
    pub(crate) fn take_open_requests(&self, session: &SessionId) -> Vec<OpenRequest> {
        let mut state = self.lock();
        state
            .sessions
            .get_mut(session)
            .map(|session_state| std::mem::take(&mut session_state.open_requests))
            .unwrap_or_default()
    }

    /// Starts (`true`) or ends the replay of a session's history; returns
    /// how many updates the replay brought (dropped).
    pub(crate) fn set_replaying(&self, session: &SessionId, replaying: bool) -> usize {
        let mut state = self.lock();
        let session_state = state.sessions.entry(session.clone()).or_default();
        let replayed = session_state.replaying.take().unwrap_or(0);
        if replaying {
            session_state.replaying = Some(0);
        }
        replayed
    }

    pub(crate) fn take_backlog(&self, session: &SessionId) -> Vec<TurnEvent> {
        let mut state = self.lock();
        state
            .sessions
            .get_mut(session)
            .map(|session_state| {
                session_state.backlog_overflowed = false;
                session_state.backlog.drain(..).collect()
            })
            .unwrap_or_default()
    }
}

/// Ends the session's turn whose prompt had request id `prompt_id`: drops its
/// open questions (the agent stopped waiting), wakes `cancel`, and returns
/// the steer ledger and what the turn's updates added up to.
fn finish_turn(session_state: &mut SessionState, prompt_id: u64) -> Option<(Vec<SteerDelivery>, Transcript)> {
    if session_state.turn.as_ref().map(|turn| turn.prompt_id) != Some(prompt_id) {
        return None;
    }
    let turn = session_state.turn.take()?;
    session_state.open_requests.clear();
    // The run is over even if the agent never said so: a stale run id
    // must not be offered to the next steer.
    session_state.active_run_id = None;
    turn.done.send_replace(true);
    Some((turn.steer_report(), turn.transcript))
}

fn excerpt(line: &str) -> String {
    if line.chars().count() <= LOG_EXCERPT_CHARS {
        return line.to_owned();
    }
    let head: String = line.chars().take(LOG_EXCERPT_CHARS).collect();
    format!("{head}… ({} bytes)", line.len())
}
