//! [`AgentClient`]: the public face of one agent connection.
//!
//! Owns the request-level operations (initialize, sessions, prompt, cancel,
//! steer) and the reader task's lifetime. The connection state and routing
//! live in [`crate::connection`]; the turn's own clock lives in
//! [`crate::turn`].

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use acp_protocol::{
    AgentExit, AgentInfo, AvailableCommand, ContentBlock, ControlRoute, ExitReason, ListedSession,
    PROTOCOL_VERSION, RpcError, SessionControls, SessionId, SteerAccepted, SteerRefusal, SteeringOutcome,
    methods,
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use crate::TurnEvent;
use crate::connection::{Connection, LiveTurn, SteerReply, Waiter};
use crate::dropped::DropObserver;
use crate::error::AcpError;
use crate::framing::{DEFAULT_MAX_LINE_BYTES, Frame, FrameCodec};
use crate::jsonrpc;
use crate::process::{AgentCommand, AgentProcess, ProcessProbe};
use crate::turn::{Turn, TurnOptions};

/// Default timeout of ordinary requests (and of one write to the agent).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Pages of `session/list` read at most: a bound on an agent that hands
/// out cursors forever.
pub const LIST_PAGES: usize = 20;
/// Default timeout of `initialize`: some agents resolve providers, load
/// extensions or start MCP servers first and take many seconds.
pub const DEFAULT_INITIALIZE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default bound on how long a cancelled turn may take to answer `cancelled`.
pub const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for the exit status once stdout closed.
const EXIT_STATUS_GRACE: Duration = Duration::from_secs(2);

/// Limits of one client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub max_line_bytes: usize,
    pub request_timeout: Duration,
    pub initialize_timeout: Duration,
    pub cancel_timeout: Duration,
    /// Advertise form elicitation (`elicitation/create`) in `initialize`:
    /// only when a person answers the agent's questions (the turn's
    /// permission policy is [`crate::PermissionPolicy::AskCaller`]), so
    /// agents never ask what nobody answers.
    pub elicitation: bool,
    /// Told of every update the client drops at one of its bounds (see
    /// [`crate::DroppedUpdate`]).
    pub drops: DropObserver,
    /// The name of an MCP server the caller itself offers its sessions: a
    /// permission question about one of its tools is allowed whatever the
    /// turn's policy, since the caller bounds those tools itself (see
    /// [`crate::PermissionRequest::is_tool_of_mcp_server`]).
    pub own_mcp_server: Option<&'static str>,
    /// Directories (absolute) every session may use beside its `cwd`,
    /// sent as `additionalDirectories` on `session/new`, `load` and
    /// `resume` to agents that advertise
    /// `sessionCapabilities.additionalDirectories`, and left out (said once
    /// per agent, at `initialize`) for the others.
    pub additional_directories: Vec<PathBuf>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            initialize_timeout: DEFAULT_INITIALIZE_TIMEOUT,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            elicitation: false,
            drops: DropObserver::default(),
            own_mcp_server: None,
            additional_directories: Vec::new(),
        }
    }
}

/// How a cancel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// No turn was in flight; nothing was sent.
    NoTurn,
    /// The turn answered its prompt (normally with `cancelled`; the reason
    /// is in the turn's outcome).
    Ended,
}

/// Observes how an agent connection ends.
#[derive(Debug, Clone)]
pub struct ExitWatch {
    conn: Arc<Connection>,
}

impl ExitWatch {
    /// Resolves once the connection is closed, with how it ended.
    pub async fn wait(self) -> AgentExit {
        let mut closed = self.conn.subscribe_closed();
        let _ = closed.wait_for(|closed| *closed).await;
        self.conn.exit_info()
    }
}

/// One agent connection: a spawned process, or any pair of byte streams.
/// Cheap to clone; the process is killed when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct AgentClient {
    conn: Arc<Connection>,
    process: Option<Arc<AgentProcess>>,
    config: ClientConfig,
    /// What the agent said in `initialize`, once it did.
    info: Arc<OnceLock<AgentInfo>>,
}

impl AgentClient {
    /// Starts the agent process and its reader task.
    pub fn spawn(command: &AgentCommand, config: ClientConfig) -> Result<Self, AcpError> {
        let spawned = AgentProcess::spawn(command)?;
        let probe = spawned.process.probe().clone();
        let mut client = Self::start(
            command.name.clone(),
            spawned.stdout,
            spawned.stdin,
            config,
            Some(probe),
        );
        client.process = Some(Arc::new(spawned.process));
        Ok(client)
    }

    /// Speaks ACP over the given streams (an in-process agent, a socket).
    pub fn connect<R, W>(name: impl Into<String>, reader: R, writer: W, config: ClientConfig) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        Self::start(name.into(), reader, writer, config, None)
    }

    fn start<R, W>(
        name: String,
        reader: R,
        writer: W,
        config: ClientConfig,
        probe: Option<ProcessProbe>,
    ) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        let conn = Arc::new(Connection::new(
            name,
            Box::pin(writer),
            config.request_timeout,
            config.drops.clone(),
            config.own_mcp_server,
        ));
        let frames = FramedRead::new(reader, FrameCodec::new(config.max_line_bytes));
        tokio::spawn(read_loop(Arc::clone(&conn), frames, probe));
        AgentClient {
            conn,
            process: None,
            config,
            info: Arc::new(OnceLock::new()),
        }
    }

    pub fn name(&self) -> &str {
        &self.conn.agent
    }

    /// The agent's process id (also its process group's), for a spawned
    /// agent.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|process| process.probe().pid())
    }

    /// The last lines the agent wrote to its stderr (see
    /// [`crate::STDERR_TAIL_LINES`]), oldest first: what a failed agent said
    /// of why. Waits up to `grace` for its stderr to end; empty for an
    /// agent on streams ([`AgentClient::connect`]).
    pub async fn stderr_tail(&self, grace: Duration) -> Vec<String> {
        match &self.process {
            Some(process) => process.stderr().lines(grace).await,
            None => Vec::new(),
        }
    }

    /// How the agent went away, once it has.
    pub fn exit(&self) -> Option<AgentExit> {
        self.conn.exit()
    }

    /// Resolves once the connection is closed, with how it ended.
    pub async fn closed(&self) -> AgentExit {
        self.exit_watch().wait().await
    }

    /// A handle that observes the agent's exit without keeping it alive
    /// (the process is killed when the last [`AgentClient`] is dropped,
    /// whatever watchers remain).
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch {
            conn: Arc::clone(&self.conn),
        }
    }

    /// Kills the agent's process group. Every waiting call then fails with
    /// [`AcpError::AgentExited`].
    pub fn kill(&self) {
        self.conn.mark_killed();
        if let Some(process) = &self.process {
            process.probe().kill();
        }
    }

    /// Stops the agent the polite way: its stdin is closed (end of input,
    /// which ACP agents take as the end of the conversation, and some need
    /// to save their sessions), and it gets `grace` to exit before its
    /// process group is killed.
    pub async fn stop(&self, grace: Duration) {
        self.conn.mark_killed();
        self.conn.close_input().await;
        if tokio::time::timeout(grace, self.closed()).await.is_err() {
            tracing::debug!(agent = %self.conn.agent, "agent still running after its stdin closed: killed");
        }
        self.kill();
    }

    /// Negotiates the protocol. Fails unless the agent answers version 1.
    pub async fn initialize(&self) -> Result<AgentInfo, AcpError> {
        let result = self
            .request(
                methods::INITIALIZE,
                acp_protocol::initialize_params(self.config.elicitation, env!("CARGO_PKG_VERSION")),
                self.config.initialize_timeout,
            )
            .await?;
        let answered = result.get("protocolVersion").cloned().unwrap_or(Value::Null);
        if answered.as_u64() != Some(PROTOCOL_VERSION) {
            return Err(AcpError::UnsupportedProtocolVersion {
                expected: PROTOCOL_VERSION,
                answered,
            });
        }
        let info = AgentInfo::from_initialize_result(&result);
        if !self.config.additional_directories.is_empty() && !info.additional_directories {
            tracing::warn!(agent = %self.conn.agent, "the agent does not take additionalDirectories; its sessions get only their cwd");
        }
        let _ = self.info.set(info.clone());
        Ok(info)
    }

    /// The params of opening a session in `cwd` (with `sessionId` when
    /// given), with the configured `additionalDirectories` when the agent
    /// takes them.
    fn session_params(&self, session: Option<&SessionId>, cwd: &Path, mcp_servers: Vec<Value>) -> Value {
        let mut params = json!({"cwd": cwd, "mcpServers": mcp_servers});
        if let Some(session) = session {
            params["sessionId"] = json!(session);
        }
        let takes_them = self.info().is_some_and(|info| info.additional_directories);
        if takes_them && !self.config.additional_directories.is_empty() {
            params["additionalDirectories"] = json!(self.config.additional_directories);
        }
        params
    }

    /// What the agent said in `initialize`; `None` before it answered.
    pub fn info(&self) -> Option<&AgentInfo> {
        self.info.get()
    }

    /// Opens a session. `mcp_servers` are ACP `McpServer` objects, passed through.
    /// The session is known (its updates kept) from the moment its answer
    /// is read; updates the agent sent for it before are kept too, within
    /// [`crate::UNCLAIMED_UPDATES_LIMIT`].
    pub async fn new_session(&self, cwd: &Path, mcp_servers: Vec<Value>) -> Result<SessionId, AcpError> {
        self.open_session(methods::SESSION_NEW, None, cwd, mcp_servers)
            .await
    }

    /// Opens a session the agent names in its answer (`session/new`, or
    /// `session/fork` of `from`), keeping the controls it describes.
    async fn open_session(
        &self,
        method: &'static str,
        from: Option<&SessionId>,
        cwd: &Path,
        mcp_servers: Vec<Value>,
    ) -> Result<SessionId, AcpError> {
        let params = self.session_params(from, cwd, mcp_servers);
        let result = self
            .request_as(Waiter::OpenSession, method, params, self.config.request_timeout)
            .await?;
        let session =
            result
                .get("sessionId")
                .and_then(Value::as_str)
                .ok_or_else(|| AcpError::MalformedResult {
                    method: method.into(),
                    detail: format!("no sessionId in {result}"),
                })?;
        let session = SessionId(session.to_owned());
        self.keep_controls(&session, &result);
        Ok(session)
    }

    /// Authenticates with one of the agent's `authMethods`.
    pub async fn authenticate(&self, method_id: &str) -> Result<(), AcpError> {
        let params = json!({"methodId": method_id});
        self.request(methods::AUTHENTICATE, params, self.config.request_timeout)
            .await
            .map(drop)
    }

    /// Reopens a session of an earlier agent process without replaying it
    /// (`sessionCapabilities.resume`).
    pub async fn resume_session(
        &self,
        session: &SessionId,
        cwd: &Path,
        mcp_servers: Vec<Value>,
    ) -> Result<(), AcpError> {
        // Known before the answer: the agent may describe it first.
        self.conn.lock().sessions.entry(session.clone()).or_default();
        let params = self.session_params(Some(session), cwd, mcp_servers);
        let result = self
            .request(methods::SESSION_RESUME, params, self.config.request_timeout)
            .await?;
        self.keep_controls(session, &result);
        Ok(())
    }

    /// Reopens a session of an earlier agent process (`loadSession`). The
    /// agent replays the session's history as updates before it answers;
    /// they are history, not a turn's output, and are discarded.
    pub async fn load_session(
        &self,
        session: &SessionId,
        cwd: &Path,
        mcp_servers: Vec<Value>,
    ) -> Result<(), AcpError> {
        self.conn.set_replaying(session, true);
        let params = self.session_params(Some(session), cwd, mcp_servers);
        let loaded = self
            .request(methods::SESSION_LOAD, params, self.config.request_timeout)
            .await;
        let replayed = self.conn.set_replaying(session, false);
        tracing::debug!(agent = %self.conn.agent, %session, replayed, "session history replayed and discarded");
        self.keep_controls(session, &loaded?);
        Ok(())
    }

    /// The session's model and mode as the agent last described them
    /// (empty for a session it described nothing of, or does not know).
    pub fn session_controls(&self, session: &SessionId) -> SessionControls {
        let state = self.conn.lock();
        state
            .sessions
            .get(session)
            .map(|session_state| session_state.controls.clone())
            .unwrap_or_default()
    }

    /// The session's slash commands as the agent last advertised them;
    /// `None` while it has advertised none (or does not know the session).
    pub fn session_commands(&self, session: &SessionId) -> Option<Vec<AvailableCommand>> {
        let state = self.conn.lock();
        state.sessions.get(session)?.commands.clone()
    }

    /// [`Self::session_commands`], waiting up to `patience` for a list
    /// that has not arrived yet: agents advertise their commands with an
    /// update sent after `session/new` is answered, so a command given as
    /// a fresh session's first prompt may come before them.
    pub async fn session_commands_within(
        &self,
        session: &SessionId,
        patience: Duration,
    ) -> Option<Vec<AvailableCommand>> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let arrived = self.conn.commands_arrived.notified();
            if let Some(commands) = self.session_commands(session) {
                return Some(commands);
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return self.session_commands(session);
            }
        }
    }

    /// Sets one of the session's controls to `value` through `route`
    /// (ACP allows it while a turn runs; the caller decides when).
    pub async fn set_control(
        &self,
        session: &SessionId,
        route: &ControlRoute,
        value: &str,
    ) -> Result<(), AcpError> {
        let (method, params) = route.request(session.as_str(), value);
        let answer = self.request(method, params, self.config.request_timeout).await?;
        let mut state = self.conn.lock();
        let session_state = state.sessions.entry(session.clone()).or_default();
        session_state.controls.applied(route, value, &answer);
        Ok(())
    }

    /// Remembers what an opened session offers.
    fn keep_controls(&self, session: &SessionId, result: &Value) {
        let controls = SessionControls::from_result(result);
        let mut state = self.conn.lock();
        state.sessions.entry(session.clone()).or_default().controls = controls;
    }

    /// The agent's sessions of `cwd` (`session/list`, every page up to
    /// [`LIST_PAGES`]), as the agent lists them: which of them a caller may
    /// show is the caller's to decide.
    pub async fn list_sessions(&self, cwd: &Path) -> Result<Vec<ListedSession>, AcpError> {
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..LIST_PAGES {
            let mut params = json!({"cwd": cwd});
            if let Some(cursor) = &cursor {
                params["cursor"] = json!(cursor);
            }
            let result = self
                .request(methods::SESSION_LIST, params, self.config.request_timeout)
                .await?;
            let (page, next) = acp_protocol::session_list_page(&result);
            listed.extend(page);
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        Ok(listed)
    }

    /// A new session in `cwd` with `session`'s history
    /// (`sessionCapabilities.fork`); `session` is left as it was.
    pub async fn fork_session(
        &self,
        session: &SessionId,
        cwd: &Path,
        mcp_servers: Vec<Value>,
    ) -> Result<SessionId, AcpError> {
        self.open_session(methods::SESSION_FORK, Some(session), cwd, mcp_servers)
            .await
    }

    /// The session's title, as the agent last set it
    /// (`session_info_update`); `None` before it set one.
    pub fn session_title(&self, session: &SessionId) -> Option<String> {
        let state = self.conn.lock();
        state
            .sessions
            .get(session)
            .and_then(|session_state| session_state.title.clone())
            .filter(|title| !title.is_empty())
    }

    /// Ends a session on the agent (`sessionCapabilities.close`) and forgets it.
    pub async fn close_session(&self, session: &SessionId) -> Result<(), AcpError> {
        let params = json!({"sessionId": session});
        let closed = self
            .request(methods::SESSION_CLOSE, params, self.config.request_timeout)
            .await;
        self.forget_session(session);
        closed.map(drop)
    }

    /// Steers the session's running turn with `text` through
    /// `_session/steering`, asking the agent not to start a turn of its own
    /// when none runs (`idleBehavior: promptRequired`).
    pub async fn steer_session(
        &self,
        session: &SessionId,
        text: &str,
    ) -> Result<SteeringOutcome, SteerRefusal> {
        self.steer_session_with(session, vec![ContentBlock::text(text)])
            .await
    }

    /// [`AgentClient::steer_session`] with any content blocks (text,
    /// images, …): `_session/steering` takes a prompt like `session/prompt`.
    pub async fn steer_session_with(
        &self,
        session: &SessionId,
        prompt: Vec<ContentBlock>,
    ) -> Result<SteeringOutcome, SteerRefusal> {
        let params = json!({
            "sessionId": session,
            "prompt": prompt,
            "_meta": {"steering": {"idleBehavior": "promptRequired"}},
        });
        let answer = self
            .request(methods::SESSION_STEERING, params, self.config.request_timeout)
            .await;
        match answer {
            Ok(result) => SteeringOutcome::parse(&result).ok_or(SteerRefusal::Malformed(result)),
            Err(AcpError::Rpc { error, .. }) => Err(SteerRefusal::from_rpc(error)),
            Err(AcpError::AgentExited(exit)) => Err(SteerRefusal::AgentExited(exit)),
            Err(other) => Err(SteerRefusal::Transport(other.to_string())),
        }
    }

    /// Sends `session/cancel` for a turn this client did not start (one an
    /// agent started by itself); nothing waits for it to end.
    pub async fn cancel_detached(&self, session: &SessionId) -> Result<(), AcpError> {
        self.conn
            .write(jsonrpc::notification(
                methods::SESSION_CANCEL,
                &json!({"sessionId": session}),
            ))
            .await
    }

    /// Sends a prompt; the returned [`Turn`] streams its events. One turn
    /// per session at a time: a second prompt fails with
    /// [`AcpError::TurnInFlight`] without reaching the agent.
    pub async fn prompt(
        &self,
        session: &SessionId,
        prompt: Vec<ContentBlock>,
        options: TurnOptions,
    ) -> Result<Turn, AcpError> {
        let (completion_tx, completion_rx) = oneshot::channel();
        let (id, open_questions, events_rx) = {
            let mut state = self.conn.lock();
            self.conn.ensure_open()?;
            let seq = state.next_turn_seq();
            let session_state = state.sessions.entry(session.clone()).or_default();
            if session_state.turn.is_some() {
                return Err(AcpError::TurnInFlight(session.to_string()));
            }
            let id = self.conn.next_request_id();
            let (turn, events_rx) = LiveTurn::new(seq, id, options.permission, options.max_text_bytes);
            let open_questions = turn.open_questions.subscribe();
            // Whatever run was advertised before belongs to an earlier turn.
            session_state.active_run_id = None;
            session_state.turn = Some(turn);
            state.pending.insert(
                id,
                Waiter::Prompt {
                    session: session.clone(),
                    tx: completion_tx,
                },
            );
            (id, open_questions, events_rx)
        };
        let params = json!({"sessionId": session, "prompt": prompt});
        if let Err(error) = self
            .conn
            .write(jsonrpc::request(id, methods::SESSION_PROMPT, &params))
            .await
        {
            let mut state = self.conn.lock();
            state.pending.remove(&id);
            if let Some(session_state) = state.sessions.get_mut(session) {
                session_state.turn = None;
            }
            return Err(error);
        }
        Ok(Turn::new(
            Arc::clone(&self.conn),
            events_rx,
            completion_rx,
            open_questions,
            options,
        ))
    }

    /// Cancels the session's turn: answers its open questions `cancelled`
    /// (permission) or `cancel` (elicitation), sends `session/cancel`, and waits (bounded by
    /// `cancel_timeout`) until the agent answers the prompt. Past the bound
    /// the agent is not honouring the cancel: respawn it.
    pub async fn cancel(&self, session: &SessionId) -> Result<CancelOutcome, AcpError> {
        let done = {
            let state = self.conn.lock();
            self.conn.ensure_open()?;
            match state
                .sessions
                .get(session)
                .and_then(|session_state| session_state.turn.as_ref())
            {
                Some(turn) => turn.done.subscribe(),
                None => return Ok(CancelOutcome::NoTurn),
            }
        };
        for open in self.conn.take_open_requests(session) {
            self.conn
                .write(jsonrpc::response(&open.rpc_id, &open.cancelled))
                .await?;
        }
        self.conn
            .write(jsonrpc::notification(
                methods::SESSION_CANCEL,
                &json!({"sessionId": session}),
            ))
            .await?;
        let mut done = done;
        match tokio::time::timeout(self.config.cancel_timeout, done.wait_for(|done| *done)).await {
            Ok(Ok(_)) => Ok(CancelOutcome::Ended),
            Ok(Err(_)) => Err(AcpError::AgentExited(self.conn.exit_info())),
            Err(_) => Err(AcpError::CancelTimedOut(
                session.to_string(),
                self.config.cancel_timeout,
            )),
        }
    }

    /// Steers the session's live turn with `text` via goose's extension.
    /// `expectedRunId` is the freshest run the agent advertised, read while
    /// holding the writer, i.e. at the moment the request is written. When
    /// no turn is in flight or no run id is known, nothing is written.
    pub async fn steer(&self, session: &SessionId, text: &str) -> Result<SteerAccepted, SteerRefusal> {
        self.steer_with(session, vec![ContentBlock::text(text)]).await
    }

    /// [`AgentClient::steer`] with any content blocks (text, images, …):
    /// goose's steer takes a prompt like `session/prompt`.
    pub async fn steer_with(
        &self,
        session: &SessionId,
        prompt: Vec<ContentBlock>,
    ) -> Result<SteerAccepted, SteerRefusal> {
        let (reply_tx, reply_rx) = oneshot::channel();
        {
            let mut writer = self.conn.writer().await;
            let (id, params) = {
                let mut state = self.conn.lock();
                if let Some(exit) = self.conn.exit() {
                    return Err(SteerRefusal::AgentExited(exit));
                }
                let Some(session_state) = state.sessions.get(session) else {
                    return Err(SteerRefusal::NoTurn);
                };
                let Some(turn_seq) = session_state.turn.as_ref().map(|turn| turn.seq) else {
                    return Err(SteerRefusal::NoTurn);
                };
                let Some(run_id) = session_state.active_run_id.clone() else {
                    return Err(SteerRefusal::NoRunId);
                };
                let id = self.conn.next_request_id();
                state.pending.insert(
                    id,
                    Waiter::Steer {
                        session: session.clone(),
                        turn_seq,
                        tx: reply_tx,
                    },
                );
                let params = json!({
                    "sessionId": session,
                    "expectedRunId": run_id,
                    "prompt": prompt,
                });
                (id, params)
            };
            let frame = jsonrpc::request(id, methods::GOOSE_STEER, &params);
            if let Err(error) = self.conn.write_locked(&mut writer, frame).await {
                self.conn.lock().pending.remove(&id);
                return Err(match error {
                    AcpError::AgentExited(exit) => SteerRefusal::AgentExited(exit),
                    other => SteerRefusal::Transport(other.to_string()),
                });
            }
        }
        let reply = tokio::time::timeout(self.config.request_timeout, reply_rx).await;
        match reply {
            Ok(Ok(SteerReply::Accepted(accepted))) => Ok(accepted),
            Ok(Ok(SteerReply::AcceptedAfterTurn)) => Err(SteerRefusal::TurnEnded),
            Ok(Ok(SteerReply::Malformed(value))) => Err(SteerRefusal::Malformed(value)),
            Ok(Ok(SteerReply::Refused(error))) => Err(SteerRefusal::from_rpc(error)),
            Ok(Err(_)) => Err(SteerRefusal::AgentExited(self.conn.exit_info())),
            Err(_) => Err(SteerRefusal::Transport(format!(
                "no answer to the steer within {:?}",
                self.config.request_timeout
            ))),
        }
    }

    /// The run the agent currently advertises for the session, if any.
    pub fn active_run_id(&self, session: &SessionId) -> Option<String> {
        let state = self.conn.lock();
        state.sessions.get(session)?.active_run_id.clone()
    }

    /// Updates that arrived for the session while no turn was in flight
    /// (before `session/new` answered, after a prompt answered).
    pub fn take_backlog(&self, session: &SessionId) -> Vec<TurnEvent> {
        self.conn.take_backlog(session)
    }

    /// Forgets a session locally (after rotating it). Its updates, if the
    /// agent sends any, are dropped as those of a session never opened.
    pub fn forget_session(&self, session: &SessionId) {
        self.conn.lock().sessions.remove(session);
    }

    async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, AcpError> {
        self.request_as(Waiter::Plain, method, params, timeout).await
    }

    /// A request whose answer is routed to a waiter of kind `waiter`.
    async fn request_as(
        &self,
        waiter: fn(oneshot::Sender<Result<Value, RpcError>>) -> Waiter,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut state = self.conn.lock();
            self.conn.ensure_open()?;
            let id = self.conn.next_request_id();
            state.pending.insert(id, waiter(tx));
            id
        };
        if let Err(error) = self.conn.write(jsonrpc::request(id, method, &params)).await {
            self.conn.lock().pending.remove(&id);
            return Err(error);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(rpc_error(method, error)),
            Ok(Err(_)) => Err(AcpError::AgentExited(self.conn.exit_info())),
            Err(_) => {
                self.conn.lock().pending.remove(&id);
                Err(AcpError::Timeout {
                    method: method.to_owned(),
                    after: timeout,
                })
            }
        }
    }
}

fn rpc_error(method: &str, error: RpcError) -> AcpError {
    AcpError::Rpc {
        method: method.to_owned(),
        error,
    }
}

/// The one task that reads the agent's stdout and routes every frame.
async fn read_loop<R>(
    conn: Arc<Connection>,
    mut frames: FramedRead<R, FrameCodec>,
    probe: Option<ProcessProbe>,
) where
    R: AsyncRead + Unpin,
{
    let mut reason = ExitReason::StdoutClosed;
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(Frame::Line(line)) => conn.route_line(&line),
            Ok(Frame::Oversized) => tracing::warn!(
                agent = %conn.agent,
                limit_bytes = frames.decoder().max_line_bytes(),
                "skipped an oversized line from the agent"
            ),
            Ok(Frame::NotUtf8) => {
                tracing::warn!(agent = %conn.agent, "skipped a non-UTF-8 line from the agent")
            }
            Err(error) => {
                tracing::warn!(agent = %conn.agent, %error, "reading the agent's stdout failed");
                reason = ExitReason::ReadFailed;
                break;
            }
        }
    }
    if conn.was_killed() {
        reason = ExitReason::Killed;
    }
    let status = match &probe {
        Some(probe) => {
            // A process that closed stdout but lives on is of no use: make
            // sure it (and its children) are gone before we report.
            let status = probe.exit_status(EXIT_STATUS_GRACE).await;
            if status.is_none() {
                probe.kill();
            }
            status
        }
        None => None,
    };
    conn.close(AgentExit {
        code: status.and_then(|status| status.code()),
        signal: status.and_then(|status| status.signal()),
        reason,
    });
}
