//! A conversation's session on a granted agent: the one it had, reopened,
//! or a new one.
//!
//! Owns the choice and the bookkeeping that makes a conversation's memory
//! outlive an agent process (a crash, an idle reap, a daemon restart): the
//! session id is kept in the state dir with the agent command it belongs
//! to, and a fresh process reopens it with `session/resume` when the agent
//! advertises it (no replay), else `session/load` (the replayed history is
//! dropped by the client), else a new session is opened. An agent that no
//! longer knows the session gets a new one, and the log says so. A new
//! session answered -32000 ("authentication required") is a configuration
//! problem, explained by [`AuthPolicy`]. Runs on the lessee's task, never
//! on the pool's actor.
//!
//! Every open (new, load, resume) offers the session the bridge's own MCP
//! server when it runs (see `mcp`): the same entry, token included, each
//! time within one daemon run, until the session is forgotten.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use acp_bridge_core::mention::ConversationKey;
use acp_client::{AcpError, AgentClient, AgentInfo, AgentUser, ListedSession, SessionId, codes};

use super::auth::{AuthChoice, AuthPolicy};
use super::{McpOffer, PoolError};
use crate::agents::workspace::{WorkspaceError, Workspaces};
use crate::state::store::{PastSession, Sessions};

/// What the profile's agent can do with sessions beyond opening them, as
/// its last `initialize` said: the owner's session commands are worded by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SessionCaps {
    /// `session/list`.
    pub list: bool,
    /// `session/resume` or `session/load`: a kept session can be reopened.
    pub reopen: bool,
    /// `session/fork`.
    pub fork: bool,
}

impl SessionCaps {
    fn of(info: &AgentInfo) -> Self {
        SessionCaps {
            list: info.list_sessions,
            reopen: info.resume_session || info.load_session,
            fork: info.fork_session,
        }
    }
}

/// Where conversations' sessions are kept, and how they are opened.
#[derive(Debug)]
pub(super) struct SessionBook {
    sessions: Sessions,
    /// The agent command line: a session means something only to the
    /// agent that made it.
    agent: String,
    /// Where each conversation's sessions run.
    workspaces: Workspaces,
    auth: AuthPolicy,
    /// The MCP servers offered (`None`: `--mcp off` and no operator's).
    mcp: Option<Arc<dyn McpOffer>>,
    /// What the agent said of sessions when one was last opened (`None`:
    /// no agent has opened one yet in this run).
    caps: Mutex<Option<SessionCaps>>,
}

impl SessionBook {
    pub(super) fn new(
        sessions: Sessions,
        agent: String,
        workspaces: Workspaces,
        auth: AuthPolicy,
        mcp: Option<Arc<dyn McpOffer>>,
    ) -> Self {
        SessionBook {
            sessions,
            agent,
            workspaces,
            auth,
            mcp,
            caps: Mutex::new(None),
        }
    }

    /// What the agent can do with sessions, as it last said.
    pub(super) fn caps(&self) -> Option<SessionCaps> {
        *self.caps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The conversation's kept session, if any.
    pub(super) fn kept(&self, conversation: &ConversationKey) -> Option<String> {
        self.sessions
            .of(conversation, &self.agent)
            .inspect_err(|error| tracing::warn!(%conversation, %error, "cannot read the kept session id"))
            .ok()
            .flatten()
    }

    /// The sessions the conversation has had with this agent, the latest first.
    pub(super) fn past(&self, conversation: &ConversationKey) -> Vec<PastSession> {
        self.sessions
            .past(conversation, &self.agent)
            .inspect_err(
                |error| tracing::warn!(%conversation, %error, "cannot read the conversation's sessions"),
            )
            .unwrap_or_default()
    }

    /// `session` (one of the conversation's past ones) becomes its session
    /// again: kept, to be reopened by its next lease; the live one's MCP
    /// token goes (the reopened session is offered a new one).
    pub(super) fn choose(&self, conversation: &ConversationKey, session: &str) -> Result<(), PoolError> {
        self.release(conversation);
        self.sessions
            .keep(conversation, &self.agent, session)
            .map_err(|error| PoolError::Session(error.to_string()))
    }

    /// Keeps the title the agent gave the leased session, if it gave one.
    pub(super) fn keep_title(
        &self,
        client: &AgentClient,
        conversation: &ConversationKey,
        session: &SessionId,
    ) {
        let Some(title) = client.session_title(session) else {
            return;
        };
        if let Err(error) = self.sessions.record_title(conversation, session.as_str(), &title) {
            tracing::warn!(%conversation, %error, "cannot keep the session's title");
        }
    }

    /// The conversation's workspace, made ready: the `cwd` its sessions
    /// are opened, listed and forked in.
    async fn workspace(&self, conversation: &ConversationKey) -> Result<PathBuf, PoolError> {
        self.workspaces
            .prepare(conversation)
            .await
            .map_err(|error| PoolError::Session(error.to_string()))
    }

    /// The agent's sessions in the conversation's workspace
    /// (`session/list` with its `cwd`).
    pub(super) async fn list(
        &self,
        client: &AgentClient,
        conversation: &ConversationKey,
    ) -> Result<Vec<ListedSession>, PoolError> {
        let cwd = self.workspace(conversation).await?;
        client
            .list_sessions(&cwd)
            .await
            .map_err(|error| PoolError::Session(error.to_string()))
    }

    /// A fork of the conversation's `session` in its workspace
    /// (`session/fork`), offered the conversation's MCP servers.
    pub(super) async fn fork(
        &self,
        client: &AgentClient,
        conversation: &ConversationKey,
        session: &SessionId,
    ) -> Result<SessionId, PoolError> {
        let cwd = self.workspace(conversation).await?;
        client
            .fork_session(session, &cwd, self.mcp_servers(client, conversation))
            .await
            .map_err(|error| PoolError::Session(error.to_string()))
    }

    /// The `mcpServers` the conversation's session is opened with: its
    /// token taken over the local socket only from the uid its agent runs
    /// as (the daemon's when no owner); with `--agent-uids` over stdio
    /// only (an HTTP header handed to the agent may end up in a child's
    /// argv, which every uid can read; a stdio child's environment is its
    /// uid's).
    fn mcp_servers(&self, client: &AgentClient, conversation: &ConversationKey) -> Vec<serde_json::Value> {
        let Some(mcp) = &self.mcp else {
            return Vec::new();
        };
        let owner = match self.workspaces.owner_of(conversation) {
            Ok(owner) => owner,
            Err(error) => {
                tracing::error!(%conversation, %error, "the session is opened without MCP servers");
                return Vec::new();
            }
        };
        let agent_uid = owner.map_or_else(|| nix::unistd::geteuid().as_raw(), |user| user.uid);
        let http = !self.dedicated();
        mcp.servers(client.info(), conversation, (agent_uid, http))
    }

    /// Whether each conversation has an agent of its own (`--agent-uids`).
    pub(super) fn dedicated(&self) -> bool {
        self.workspaces.per_conversation_owners()
    }

    /// With `--agent-uids`, the conversation's identity (assigned on first
    /// use) and its workspace made ready, its agent's `HOME`, before the
    /// agent starts; `None` otherwise.
    pub(super) async fn identity(
        &self,
        conversation: &ConversationKey,
    ) -> Result<Option<AgentUser>, PoolError> {
        if !self.dedicated() {
            return Ok(None);
        }
        let (_, user) = self
            .workspaces
            .prepare_owned(conversation)
            .await
            .map_err(|error| match error {
                WorkspaceError::NoOwner(error) => {
                    tracing::warn!(%conversation, %error, "no agent identity for the conversation");
                    PoolError::NoIdentity(error.to_string())
                }
                other => PoolError::Session(other.to_string()),
            })?;
        Ok(user)
    }

    /// The conversation's session on `client`'s agent: reopened if the
    /// agent can and still knows it, else new (and kept).
    pub(super) async fn open(
        &self,
        client: &AgentClient,
        conversation: &ConversationKey,
    ) -> Result<SessionId, PoolError> {
        let cwd = self.workspace(conversation).await?;
        if let Some(info) = client.info() {
            *self.caps.lock().unwrap_or_else(PoisonError::into_inner) = Some(SessionCaps::of(info));
        }
        if let Some(session) = self.reopen(client, conversation, &cwd).await {
            return Ok(session);
        }
        let session = client
            .new_session(&cwd, self.mcp_servers(client, conversation))
            .await
            .map_err(|error| self.new_session_failed(client.info(), error))?;
        tracing::info!(%conversation, session = %session, agent = client.name(), "session opened");
        if let Err(error) = self.sessions.keep(conversation, &self.agent, session.as_str()) {
            tracing::warn!(%conversation, %error, "cannot keep the session id; the next agent process starts afresh");
        }
        Ok(session)
    }

    /// The conversation's next turn starts a fresh session.
    pub(super) fn forget(&self, conversation: &ConversationKey) {
        self.release(conversation);
        if let Err(error) = self.sessions.forget(conversation) {
            tracing::warn!(%conversation, %error, "cannot forget the session id");
        }
    }

    /// The conversation's session was closed on the agent (it is kept, to
    /// be reopened): what it held while live goes, its MCP token first
    /// (the reopened session is offered a new one).
    pub(super) fn release(&self, conversation: &ConversationKey) {
        if let Some(mcp) = &self.mcp {
            mcp.revoke(conversation);
        }
    }

    /// The conversation's live session takes a turn: its workspace is in
    /// use (so not pruned as idle).
    pub(super) fn mark_used(&self, conversation: &ConversationKey) {
        self.workspaces.mark_used(conversation);
    }

    async fn reopen(
        &self,
        client: &AgentClient,
        conversation: &ConversationKey,
        cwd: &Path,
    ) -> Option<SessionId> {
        let kept = match self.sessions.of(conversation, &self.agent) {
            Ok(kept) => SessionId(kept?),
            Err(error) => {
                tracing::warn!(%conversation, %error, "cannot read the kept session id");
                return None;
            }
        };
        let info = client.info()?;
        let asked = Instant::now();
        let (how, reopened) = if info.resume_session {
            (
                "resumed",
                client
                    .resume_session(&kept, cwd, self.mcp_servers(client, conversation))
                    .await,
            )
        } else if info.load_session {
            (
                "loaded",
                client
                    .load_session(&kept, cwd, self.mcp_servers(client, conversation))
                    .await,
            )
        } else {
            tracing::info!(%conversation, session = %kept, "the agent cannot reopen sessions; opening a new one");
            return None;
        };
        match reopened {
            Ok(()) => {
                let latency_ms = asked.elapsed().as_millis() as u64;
                tracing::info!(%conversation, session = %kept, agent = client.name(), how, latency_ms, "session reopened");
                Some(kept)
            }
            Err(error) => {
                tracing::info!(%conversation, session = %kept, %error, "the agent no longer knows the conversation's session; opening a new one");
                None
            }
        }
    }

    fn new_session_failed(&self, info: Option<&AgentInfo>, error: AcpError) -> PoolError {
        let auth_required =
            matches!(&error, AcpError::Rpc { error, .. } if error.code == codes::AUTH_REQUIRED);
        if !auth_required {
            return PoolError::Session(error.to_string());
        }
        PoolError::Auth(match info.map(|info| self.auth.choose(info)) {
            Some(AuthChoice::Unresolved(why)) => why,
            Some(AuthChoice::Method(method)) => {
                format!("the agent still requires authentication after `{method}` succeeded: {error}")
            }
            Some(AuthChoice::NotNeeded) | None => {
                format!("the agent requires authentication but offers no method to use: {error}")
            }
        })
    }
}
