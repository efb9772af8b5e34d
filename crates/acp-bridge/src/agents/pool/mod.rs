//! The supervisor pool: agent processes and their sessions.
//!
//! Owns `--agents` process slots, each lazily started on first work and
//! reaped after sitting idle, so an idle daemon holds no agents. One process
//! hosts many sessions; a conversation keeps its session (affinity) while
//! its process lives. Crashed agents are respawned on the next lease; when
//! several fail within a minute, a circuit breaker stops respawns for a
//! cool-down and says so, so a broken agent binary cannot spin the machine.
//! An agent whose process cannot start at all (its program gone or not
//! executable) is a state of its own ([`Starts::CannotStart`]), told with
//! its reason, since it is no crash and only the operator can fix it.
//!
//! The pool is an actor ([`actor`]) behind a cheap [`Pool`] handle, so that
//! one agent slow to start never freezes another conversation, the heart's
//! commands or its status: only `lease` waits (for its own slot's agent),
//! and everything else returns at once. Does not own how many turns run:
//! the heart's capacity does.

mod actor;
pub(crate) mod args;
mod auth;
mod breaker;
mod launcher;
mod mcp_offer;
mod policy_mode;
mod pools;
pub(crate) mod reaper;
mod session_state;
mod sessions;
mod side_question;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use acp_bridge_core::live_sessions::LiveBounds;
use acp_bridge_core::mention::ConversationKey;
use acp_bridge_core::turn::{LeaseFailure, Remedy};
use acp_bridge_core::waiting::Awaited;
use acp_client::{AgentClient, AgentUser, ClientConfig, ListedSession, SessionId};
use clap::ValueEnum;
use tokio::sync::{mpsc, oneshot, watch};

use crate::state::store::{AgentGroups, AgentUids, Sessions};
use crate::telemetry::AgentCircuit;
use actor::{Actor, Request};
pub use args::AGENT_ENV_BASELINE;
pub(crate) use auth::{AuthChoice, AuthPolicy};
use breaker::CRASHES_TO_OPEN;
use launcher::Launcher;
pub(crate) use launcher::{agent_command, check_program};
pub(crate) use mcp_offer::McpOffer;
pub(crate) use policy_mode::policy_mode;
pub(crate) use pools::Pools;
use sessions::SessionBook;
pub(crate) use sessions::SessionCaps;

/// How permission questions of agents are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionPolicyArg {
    Allow,
    Reject,
    AskOwner,
}

/// How to run agents: `--agent-*` and the rest of [`args::AgentArgs`],
/// checked.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub command: String,
    pub args: Vec<String>,
    /// The agents' complete environment (baseline + pass-through, as found
    /// in the daemon's environment at start-up).
    pub env: Vec<(String, String)>,
    pub processes: u32,
    pub turns_per_agent: u32,
    pub cwd: PathBuf,
    /// `--workspace`: which directory under `cwd` each conversation's
    /// sessions run in.
    pub workspace: crate::agents::workspace::WorkspaceMode,
    /// `--workspace-repo` (canonical): new workspaces are worktrees of it.
    pub workspace_repo: Option<PathBuf>,
    /// `--workspace-extra-dir` (canonical): offered to every session as
    /// `additionalDirectories`.
    pub extra_dirs: Vec<PathBuf>,
    pub cancel_timeout: Duration,
    /// `--agent-start-timeout`: the bound on an agent's `initialize`.
    pub start_timeout: Duration,
    /// `--agent-auth-method`.
    pub auth_method: Option<String>,
    /// `--agent-user`; agents run as the daemon's user when `None`.
    pub user: Option<AgentUser>,
    /// `--agent-uids`: each conversation's agent runs as a uid of its own
    /// from this range (with `user`'s group), one conversation per agent
    /// process.
    pub uids: Option<std::ops::RangeInclusive<u32>>,
    /// `--session-idle` and `--max-live-sessions`: what stays live.
    pub live: LiveBounds,
}

/// Why no agent could be leased.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PoolError {
    /// The agent's process could not be started (its program is gone or
    /// not executable, its working directory is gone): not a crash.
    #[error("the agent cannot start: {0}")]
    CannotStart(String),
    #[error("the agent failed to start up: {0}")]
    Initialize(String),
    /// The agent answered `initialize`, and what it answered rules it out
    /// (an error, another protocol version).
    #[error("the agent refused to start: {0}")]
    Refused(String),
    #[error("the agent could not be authenticated: {0}")]
    Auth(String),
    #[error("the agent could not open a session: {0}")]
    Session(String),
    /// Carries the last failure, so the person and the operator learn why
    /// the agents keep failing and not only that they do.
    #[error(
        "agents are not started for {seconds}s after a misconfiguration or {CRASHES_TO_OPEN} failures \
         within a minute (last: {last_failure})"
    )]
    CircuitOpen { seconds: u64, last_failure: String },
    #[error("the daemon is shutting down")]
    ShutDown,
    /// `--agent-uids`: every uid of the range is held by a conversation.
    #[error("{0}")]
    NoIdentity(String),
}

impl PoolError {
    /// A misconfiguration (a missing binary, a refused `initialize`,
    /// authentication): trying again cannot help until the operator acts.
    pub(crate) fn is_configuration(&self) -> bool {
        matches!(
            self,
            PoolError::CannotStart(_) | PoolError::Refused(_) | PoolError::Auth(_)
        )
    }
}

/// What a turn needs to know of a lease that failed: the words, and what
/// may help: another attempt (a start-up or a session that may succeed on
/// the next agent), only the operator (a misconfiguration, the breaker
/// holding agents back), or neither.
impl From<PoolError> for LeaseFailure {
    fn from(error: PoolError) -> Self {
        let remedy = match &error {
            PoolError::Initialize(_) | PoolError::Session(_) => Remedy::Retry,
            PoolError::CircuitOpen { .. } => Remedy::Operator,
            configuration if configuration.is_configuration() => Remedy::Operator,
            _ => Remedy::Nothing,
        };
        LeaseFailure {
            reason: error.to_string(),
            remedy,
        }
    }
}

/// An agent and a session, leased for one turn.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub client: AgentClient,
    pub session: SessionId,
    /// This lease opened the session (new, resumed or loaded) rather than
    /// finding it live: the session starts here, in the mode the
    /// permission policy wants ([`policy_mode`]).
    pub opened: bool,
    /// Whose session it is: its release ends a turn on that session.
    conversation: ConversationKey,
    slot: usize,
    generation: u64,
    /// Which of [`Pools`] it came from.
    pool: usize,
}

/// A conversation's sessions, as `!sessions` shows them.
#[derive(Debug, Clone)]
pub(crate) struct SessionsView {
    /// The session the conversation runs on now.
    pub live: SessionId,
    /// Its sessions, the latest first: those it has had that the agent
    /// lists in its workspace (`None`: the agent lists no sessions).
    pub listed: Option<Vec<ListedPast>>,
}

/// One of a conversation's past sessions that its agent still lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedPast {
    pub id: String,
    /// The agent's title, else the one it last gave while a turn ran.
    pub title: Option<String>,
    /// Its last activity, as the agent words it (RFC 3339), if it does.
    pub updated_at: Option<String>,
    /// When the conversation last took it up (Unix seconds).
    pub used_at: i64,
}

/// What the pool looks like now, for `!status` and `/healthz`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PoolStatus {
    /// Agents initialized and not yet exited.
    pub alive: usize,
    /// Whether agents are started, and if not, why.
    pub starts: Starts,
    /// The breaker's last recorded failure, kept after it closes.
    pub last_failure: Option<String>,
    /// The conversations whose session lives on an agent now.
    pub live_sessions: std::collections::BTreeSet<ConversationKey>,
    /// The conversations whose turn waits for a live session or an agent
    /// slot to free, with which: their waiting notice says so.
    pub awaiting: std::collections::BTreeMap<ConversationKey, Awaited>,
}

/// Whether the pool starts agents. An agent that cannot start at all is a
/// state of its own, apart from agents that keep crashing: only the
/// operator can fix it, and they are told what to fix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Starts {
    /// Agents are started as work needs them.
    #[default]
    Allowed,
    /// The last start failed before the agent ran (why: the reason, with
    /// what to do). Holds until a start gets past the spawn; starts are
    /// tried again only after the breaker's cool-down.
    CannotStart(String),
    /// The circuit breaker holds starts back for its cool-down, after
    /// repeated failures or an agent that cannot work as configured.
    Paused,
}

/// A handle to the pool; cheap to clone. Requests go over an unbounded
/// channel, so no call waits to be heard.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    requests: mpsc::UnboundedSender<Request>,
    status: watch::Receiver<PoolStatus>,
    /// How leases open their conversation's session.
    sessions: Arc<SessionBook>,
}

impl Pool {
    /// Starts the pool's actor of agent profile `profile` on the current
    /// runtime; conversations' sessions are kept in `sessions`, the agents'
    /// process groups in `groups`.
    pub(crate) fn start(
        profile: &str,
        settings: AgentSettings,
        client_config: ClientConfig,
        (sessions, uids): (Sessions, &AgentUids),
        groups: AgentGroups,
        mcp: Option<Arc<dyn McpOffer>>,
    ) -> Pool {
        let processes = settings.processes as usize;
        let agent = std::iter::once(settings.command.as_str())
            .chain(settings.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let workspaces = settings.workspaces(uids);
        let live = settings.live;
        let sessions = SessionBook::new(sessions, agent, workspaces, AuthPolicy::new(&settings), mcp);
        let launcher = Launcher::Command(Box::new(settings), groups);
        Pool::with_launcher(profile, launcher, processes, (sessions, live), client_config)
    }

    fn with_launcher(
        profile: &str,
        launcher: Launcher,
        processes: usize,
        (sessions, live): (SessionBook, LiveBounds),
        client_config: ClientConfig,
    ) -> Pool {
        let (requests, inbox) = mpsc::unbounded_channel();
        let (status_tx, status) = watch::channel(PoolStatus::default());
        let sessions = Arc::new(sessions);
        let actor = Actor::new(
            launcher,
            processes,
            client_config,
            (requests.downgrade(), inbox),
            status_tx,
            profile.into(),
            (live, Arc::clone(&sessions)),
        );
        tokio::spawn(actor.run());
        Pool {
            requests,
            status,
            sessions,
        }
    }

    /// An agent and the conversation's session, starting either as needed.
    /// Waits only for this lease's own slot: its agent's start, then
    /// `session/new` on this task.
    pub(crate) async fn lease(&self, conversation: &ConversationKey) -> Result<Lease, PoolError> {
        let user = self.sessions.identity(conversation).await?;
        let (reply, granted) = oneshot::channel();
        let request = Request::Lease {
            conversation: conversation.clone(),
            user,
            reply,
        };
        self.requests.send(request).map_err(|_| PoolError::ShutDown)?;
        let grant = granted.await.map_err(|_| PoolError::ShutDown)??;
        let opened = grant.session.is_none();
        let session = match grant.session {
            Some(session) => {
                self.sessions.mark_used(conversation);
                session
            }
            None => {
                // A failure here drops the grant, whose hold releases the slot.
                let opened = self.sessions.open(&grant.client, conversation).await;
                let session = opened.inspect_err(|error| {
                    if error.is_configuration() {
                        let _ = self.requests.send(Request::Misconfigured {
                            failure: error.to_string(),
                        });
                    }
                })?;
                let _ = self.requests.send(Request::SessionOpened {
                    conversation: conversation.clone(),
                    slot: grant.hold.slot,
                    generation: grant.hold.generation,
                    session: session.clone(),
                });
                session
            }
        };
        let (slot, generation) = grant.hold.keep();
        Ok(Lease {
            client: grant.client,
            session,
            opened,
            conversation: conversation.clone(),
            slot,
            generation,
            pool: 0,
        })
    }

    /// Ends a lease; the title the agent gave its session meanwhile is kept.
    pub(crate) fn release(&self, lease: &Lease) {
        self.sessions
            .keep_title(&lease.client, &lease.conversation, &lease.session);
        let _ = self.requests.send(Request::Release {
            slot: lease.slot,
            generation: lease.generation,
            conversation: lease.conversation.clone(),
        });
    }

    /// Kills a leased agent that stopped honouring the protocol (ignored a
    /// cancel), now; the next lease starts a fresh one. The lease is still
    /// to be released.
    pub(crate) fn discard(&self, lease: &Lease) {
        tracing::warn!(agent = lease.client.name(), "discarding an unresponsive agent");
        lease.client.kill();
        let _ = self.requests.send(Request::Discard {
            slot: lease.slot,
            generation: lease.generation,
        });
    }

    /// Forgets the conversation's session (and closes it on the agent when
    /// the agent offers that) and revokes its MCP token: its next turn
    /// opens a fresh one. The kept records a fresh session must not
    /// inherit go in one transaction (`store::ConversationRecords::rotate`).
    /// The heart's `Forgetting` is the one caller beside the tests.
    pub(crate) fn rotate(&self, conversation: &ConversationKey) {
        self.sessions.forget(conversation);
        let _ = self.requests.send(Request::Rotate {
            conversation: conversation.clone(),
        });
    }

    /// What the agent can do with sessions, as it last said (`None`: no
    /// session was opened in this run yet).
    pub(crate) fn session_caps(&self) -> Option<SessionCaps> {
        self.sessions.caps()
    }

    /// Whether the conversation's session lives on an agent now, as the
    /// actor last published it (never waits for the actor): its lease is
    /// then a matter of microseconds.
    pub(crate) fn has_live_session(&self, conversation: &ConversationKey) -> bool {
        self.status.borrow().live_sessions.contains(conversation)
    }

    /// The conversation's kept session id, if any.
    pub(crate) fn kept_session(&self, conversation: &ConversationKey) -> Option<String> {
        self.sessions.kept(conversation)
    }

    /// The sessions the conversation has had, the latest first.
    pub(crate) fn past_sessions(
        &self,
        conversation: &ConversationKey,
    ) -> Vec<crate::state::store::PastSession> {
        self.sessions.past(conversation)
    }

    /// The conversation's sessions that its agent lists in its workspace,
    /// with the one it runs on (leased, so opened if it had none). Only
    /// sessions the conversation has had are shown: in a shared workspace
    /// the agent lists every conversation's.
    pub(crate) async fn sessions_view(
        &self,
        conversation: &ConversationKey,
    ) -> Result<SessionsView, PoolError> {
        let lease = self.lease(conversation).await?;
        let lists = lease.client.info().is_some_and(|info| info.list_sessions);
        let listed = if lists {
            Some(self.sessions.list(&lease.client, conversation).await)
        } else {
            None
        };
        self.release(&lease);
        let listed = listed
            .transpose()?
            .map(|listed| self.conversations_own(conversation, &listed));
        Ok(SessionsView {
            live: lease.session,
            listed,
        })
    }

    /// Of the agent's `listed` sessions, those the conversation has had,
    /// the latest first, with the agent's words for them.
    fn conversations_own(&self, conversation: &ConversationKey, listed: &[ListedSession]) -> Vec<ListedPast> {
        let each: Vec<String> = listed
            .iter()
            .map(|listed| format!("{} ({})", listed.id, listed.cwd))
            .collect();
        tracing::debug!(%conversation, listed = ?each, "the agent's sessions of the conversation's workspace");
        self.sessions
            .past(conversation)
            .into_iter()
            .filter_map(|past| {
                let agents = listed
                    .iter()
                    .find(|listed| listed.id.as_str() == past.session_id)?;
                Some(ListedPast {
                    title: agents.title.clone().or(past.title),
                    updated_at: agents.updated_at.clone(),
                    used_at: past.used_at,
                    id: past.session_id,
                })
            })
            .collect()
    }

    /// `session` (one the conversation has had) becomes its session again:
    /// the live one is closed and the conversation's next lease reopens
    /// the chosen one (`session/resume`, else `session/load`).
    pub(crate) fn resume(&self, conversation: &ConversationKey, session: &str) -> Result<(), PoolError> {
        self.sessions.choose(conversation, session)?;
        let _ = self.requests.send(Request::Rotate {
            conversation: conversation.clone(),
        });
        Ok(())
    }

    /// `question` answered in a fork of the conversation's session (see
    /// [`side_question`]); `None` when the agent does not fork sessions.
    pub(crate) async fn side_question(
        &self,
        conversation: &ConversationKey,
        question: &str,
    ) -> Result<Option<String>, PoolError> {
        let lease = self.lease(conversation).await?;
        let answered = if lease.client.info().is_some_and(|info| info.fork_session) {
            side_question::ask(
                &self.sessions,
                &lease.client,
                (conversation, &lease.session),
                question,
            )
            .await
            .map(Some)
        } else {
            Ok(None)
        };
        self.release(&lease);
        answered
    }

    /// The pool as the actor last published it; never waits for the actor.
    pub(crate) fn status(&self) -> PoolStatus {
        self.status.borrow().clone()
    }

    /// The pool's status as the actor publishes it, to watch.
    pub(crate) fn watch_status(&self) -> watch::Receiver<PoolStatus> {
        self.status.clone()
    }

    /// Whether agents are started now, and if not, why.
    pub(crate) fn starts(&self) -> Starts {
        self.status.borrow().starts.clone()
    }

    /// Kills every agent, those still starting too, and ends the actor;
    /// leases still waiting fail with [`PoolError::ShutDown`].
    pub(crate) async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.requests.send(Request::Shutdown { done }).is_ok() {
            let _ = finished.await;
        }
    }
}

impl AgentCircuit for Pool {
    fn unhealthy(&self) -> Option<String> {
        match self.starts() {
            Starts::Allowed => None,
            Starts::CannotStart(reason) => Some(format!("agent cannot start: {reason}")),
            Starts::Paused => Some("agents keep crashing: circuit breaker open".to_owned()),
        }
    }
}
