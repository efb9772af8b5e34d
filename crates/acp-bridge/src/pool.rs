//! The supervisor pool: agent processes and their sessions.
//!
//! Owns `--agents` process slots, each lazily spawned on first work and
//! reaped after sitting idle, so an idle daemon holds no agents. One process
//! hosts many sessions; a conversation keeps its session (affinity) while
//! its process lives. Crashed agents are respawned on the next lease; when
//! several crash within a minute, a circuit breaker stops respawns for a
//! cool-down and says so, so a broken agent binary cannot spin the machine.
//!
//! Turns run on their own tasks and lease from here concurrently: each slot
//! has its own async lock (spawning and `initialize` take seconds and must
//! not hold up other slots), and the session table a plain mutex.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_client::{AcpError, AgentClient, AgentCommand, AgentInfo, ClientConfig, ExitReason, SessionId};

use crate::config::AgentSettings;
use crate::mention::ConversationKey;
use crate::telemetry::metrics;

/// Crashes within [`CRASH_WINDOW`] that open the circuit breaker.
const CRASHES_TO_OPEN: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// How long an open breaker refuses to spawn.
const BREAKER_COOL_DOWN: Duration = Duration::from_secs(60);
/// An agent with no turn in flight for this long is stopped.
pub const IDLE_AGENT_REAP: Duration = Duration::from_secs(600);

/// Why no agent could be leased.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("the agent could not be started: {0}")]
    Spawn(String),
    #[error("the agent failed to start up: {0}")]
    Initialize(String),
    #[error("the agent could not open a session: {0}")]
    Session(String),
    /// Carries the last failure, so the person and the operator learn why
    /// the agents keep failing and not only that they do.
    #[error(
        "agents failed {CRASHES_TO_OPEN} times within a minute (last: {last_failure}); \
         not restarting them for {seconds}s"
    )]
    CircuitOpen { seconds: u64, last_failure: String },
}

/// An agent and a session, leased for one turn.
#[derive(Debug, Clone)]
pub struct Lease {
    pub client: AgentClient,
    pub session: SessionId,
    pub slot: usize,
    generation: u64,
}

#[derive(Debug)]
struct LiveAgent {
    client: AgentClient,
    generation: u64,
    busy: usize,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Slot {
    agent: Option<LiveAgent>,
}

#[derive(Debug, Clone)]
struct SessionRef {
    slot: usize,
    generation: u64,
    session: SessionId,
}

#[derive(Debug, Default)]
struct Breaker {
    crashes: VecDeque<Instant>,
    open_until: Option<Instant>,
    last_failure: String,
}

impl Breaker {
    fn record_crash(&mut self, now: Instant, failure: String) {
        self.crashes.push_back(now);
        self.last_failure = failure;
        while self
            .crashes
            .front()
            .is_some_and(|at| now.duration_since(*at) > CRASH_WINDOW)
        {
            self.crashes.pop_front();
        }
        if self.crashes.len() >= CRASHES_TO_OPEN && self.open_until.is_none() {
            self.open_until = Some(now + BREAKER_COOL_DOWN);
            tracing::error!(
                crashes = self.crashes.len(),
                window_s = CRASH_WINDOW.as_secs(),
                cool_down_s = BREAKER_COOL_DOWN.as_secs(),
                last_failure = %self.last_failure,
                "agents keep crashing: circuit breaker open, no respawns during the cool-down"
            );
        }
    }

    /// Seconds left while open.
    fn open_for(&mut self, now: Instant) -> Option<u64> {
        match self.open_until {
            Some(until) if now < until => Some((until - now).as_secs().max(1)),
            Some(_) => {
                self.open_until = None;
                self.crashes.clear();
                tracing::info!("circuit breaker closed: agents may be started again");
                None
            }
            None => None,
        }
    }
}

#[derive(Debug)]
pub struct Pool {
    settings: AgentSettings,
    client_config: ClientConfig,
    slots: Vec<tokio::sync::Mutex<Slot>>,
    sessions: Mutex<HashMap<ConversationKey, SessionRef>>,
    /// Busy turns per slot, readable without the slot's async lock.
    load: Mutex<Vec<usize>>,
    breaker: Arc<Mutex<Breaker>>,
    next_generation: Mutex<u64>,
    /// Agents alive, kept by the exit watchers.
    alive: Arc<AtomicUsize>,
}

impl Pool {
    pub fn new(settings: AgentSettings, client_config: ClientConfig) -> Self {
        let processes = settings.processes as usize;
        Pool {
            slots: (0..processes)
                .map(|_| tokio::sync::Mutex::new(Slot::default()))
                .collect(),
            load: Mutex::new(vec![0; processes]),
            settings,
            client_config,
            sessions: Mutex::new(HashMap::new()),
            breaker: Arc::new(Mutex::new(Breaker::default())),
            next_generation: Mutex::new(0),
            alive: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Whether the circuit breaker currently refuses to start agents.
    pub fn circuit_open(&self) -> bool {
        lock(&self.breaker).open_for(Instant::now()).is_some()
    }

    /// An agent and the conversation's session, starting either as needed.
    pub async fn lease(&self, conversation: &ConversationKey) -> Result<Lease, PoolError> {
        let known = lock(&self.sessions).get(conversation).cloned();
        // The slot is counted as loaded before its (slow) spawn, so that
        // leases arriving meanwhile spread over the other slots.
        let slot_index = self.reserve_slot(known.as_ref().map(|known| known.slot));
        let leased = self.lease_in(slot_index, conversation, known).await;
        if leased.is_err() {
            self.unreserve_slot(slot_index);
        }
        leased
    }

    async fn lease_in(
        &self,
        slot_index: usize,
        conversation: &ConversationKey,
        known: Option<SessionRef>,
    ) -> Result<Lease, PoolError> {
        let mut slot = self.slots[slot_index].lock().await;
        let (client, generation) = self.live_agent(&mut slot, slot_index).await?;
        let session = match known.filter(|known| known.generation == generation) {
            Some(known) => known.session,
            None => {
                let session = client
                    .new_session(&self.settings.cwd, Vec::new())
                    .await
                    .map_err(|error| PoolError::Session(error.to_string()))?;
                tracing::info!(%conversation, session = %session, agent = client.name(), "session opened");
                lock(&self.sessions).insert(
                    conversation.clone(),
                    SessionRef {
                        slot: slot_index,
                        generation,
                        session: session.clone(),
                    },
                );
                session
            }
        };
        if let Some(agent) = slot.agent.as_mut() {
            agent.busy += 1;
            agent.last_used = Instant::now();
        }
        Ok(Lease {
            client,
            session,
            slot: slot_index,
            generation,
        })
    }

    /// Ends a lease.
    pub async fn release(&self, lease: &Lease) {
        let mut slot = self.slots[lease.slot].lock().await;
        if let Some(agent) = slot
            .agent
            .as_mut()
            .filter(|agent| agent.generation == lease.generation)
        {
            agent.busy = agent.busy.saturating_sub(1);
            agent.last_used = Instant::now();
        }
        self.unreserve_slot(lease.slot);
    }

    /// Forgets the conversation's session: the next turn opens a fresh one.
    /// The agent's side of the old session is left to the agent (ACP has no
    /// stable way to close one); the client forgets its bookkeeping for it.
    pub async fn rotate(&self, conversation: &ConversationKey) {
        let Some(old) = lock(&self.sessions).remove(conversation) else {
            return;
        };
        let slot = self.slots[old.slot].lock().await;
        if let Some(agent) = slot
            .agent
            .as_ref()
            .filter(|agent| agent.generation == old.generation)
        {
            agent.client.forget_session(&old.session);
        }
    }

    /// Kills a leased agent that stopped honouring the protocol (ignored a
    /// cancel); the next lease starts a fresh one.
    pub async fn discard(&self, lease: &Lease) {
        tracing::warn!(agent = lease.client.name(), "discarding an unresponsive agent");
        lease.client.kill();
        let mut slot = self.slots[lease.slot].lock().await;
        if slot
            .agent
            .as_ref()
            .is_some_and(|agent| agent.generation == lease.generation)
        {
            slot.agent = None;
        }
    }

    /// Agents currently alive.
    pub fn alive(&self) -> usize {
        self.alive.load(Ordering::Relaxed)
    }

    /// Stops agents idle for `idle_for`; their sessions are forgotten.
    pub async fn reap_idle(&self, idle_for: Duration) {
        for (index, slot) in self.slots.iter().enumerate() {
            let mut slot = slot.lock().await;
            let idle = slot
                .agent
                .as_ref()
                .is_some_and(|agent| agent.busy == 0 && agent.last_used.elapsed() >= idle_for);
            if idle {
                if let Some(agent) = slot.agent.take() {
                    tracing::info!(agent = agent.client.name(), "stopping idle agent");
                    agent.client.kill();
                }
                lock(&self.sessions).retain(|_, session| session.slot != index);
            }
        }
    }

    /// Kills every agent (shutdown).
    pub async fn shutdown(&self) {
        for slot in &self.slots {
            if let Some(agent) = slot.lock().await.agent.take() {
                agent.client.kill();
            }
        }
        lock(&self.sessions).clear();
    }

    /// Counts one more turn on `preferred` (the conversation's session),
    /// or else on the least loaded slot; returns the slot.
    fn reserve_slot(&self, preferred: Option<usize>) -> usize {
        let mut load = lock(&self.load);
        let index =
            preferred.unwrap_or_else(|| (0..load.len()).min_by_key(|index| load[*index]).unwrap_or(0));
        load[index] += 1;
        index
    }

    fn unreserve_slot(&self, index: usize) {
        let mut load = lock(&self.load);
        load[index] = load[index].saturating_sub(1);
    }

    /// The slot's agent, spawned and initialized if it has none or it died.
    async fn live_agent(&self, slot: &mut Slot, index: usize) -> Result<(AgentClient, u64), PoolError> {
        if let Some(agent) = &slot.agent {
            if agent.client.exit().is_none() {
                return Ok((agent.client.clone(), agent.generation));
            }
            slot.agent = None;
            lock(&self.sessions).retain(|_, session| session.slot != index);
            metrics::agent_respawned();
        }
        {
            let mut breaker = lock(&self.breaker);
            if let Some(seconds) = breaker.open_for(Instant::now()) {
                return Err(PoolError::CircuitOpen {
                    seconds,
                    last_failure: breaker.last_failure.clone(),
                });
            }
        }
        let generation = {
            let mut next = lock(&self.next_generation);
            *next += 1;
            *next
        };
        let name = format!("{}#{}.{}", self.agent_name(), index + 1, generation);
        let command = AgentCommand {
            name: name.clone(),
            program: self.settings.command.clone().into(),
            args: self.settings.args.iter().map(Into::into).collect(),
            cwd: Some(self.settings.cwd.clone()),
            env: self
                .settings
                .env
                .iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        };
        let client = AgentClient::spawn(&command, self.client_config.clone()).map_err(|error| {
            let hint = spawn_hint(&error, &self.settings.command);
            lock(&self.breaker).record_crash(Instant::now(), hint.clone());
            PoolError::Spawn(hint)
        })?;
        let info = match client.initialize().await {
            Ok(info) => info,
            Err(error) => {
                client.kill();
                let failure = format!("initialize failed: {error}");
                lock(&self.breaker).record_crash(Instant::now(), failure);
                return Err(PoolError::Initialize(error.to_string()));
            }
        };
        log_started(&name, &info);
        self.watch_exit(&client);
        slot.agent = Some(LiveAgent {
            client: client.clone(),
            generation,
            busy: 0,
            last_used: Instant::now(),
        });
        Ok((client, generation))
    }

    /// Keeps the alive count, and counts the agent's exit as a crash
    /// unless we killed it.
    fn watch_exit(&self, client: &AgentClient) {
        let exit = client.exit_watch();
        let breaker = Arc::clone(&self.breaker);
        let alive = Arc::clone(&self.alive);
        metrics::agents_alive(alive.fetch_add(1, Ordering::Relaxed) + 1);
        let name = client.name().to_owned();
        tokio::spawn(async move {
            let exit = exit.wait().await;
            metrics::agents_alive(alive.fetch_sub(1, Ordering::Relaxed).saturating_sub(1));
            if exit.reason != ExitReason::Killed {
                tracing::warn!(agent = %name, %exit, "agent exited unexpectedly");
                lock(&breaker).record_crash(Instant::now(), format!("{name}: {exit}"));
            }
        });
    }

    fn agent_name(&self) -> &str {
        std::path::Path::new(&self.settings.command)
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("agent")
    }
}

fn log_started(name: &str, info: &AgentInfo) {
    tracing::info!(
        agent = name,
        agent_name = info.name.as_deref().unwrap_or("?"),
        agent_version = info.version.as_deref().unwrap_or("?"),
        steering_hint = info.steering_hint.is_some(),
        "agent initialized"
    );
}

fn spawn_hint(error: &AcpError, command: &str) -> String {
    match error {
        AcpError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!("`{command}` was not found (install it, or point --agent-command at it)")
        }
        other => other.to_string(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_opens_after_repeated_failures_and_remembers_the_last_one() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        for attempt in 0..CRASHES_TO_OPEN - 1 {
            breaker.record_crash(start, format!("failure {attempt}"));
            assert_eq!(breaker.open_for(start), None, "opened early at {attempt}");
        }
        breaker.record_crash(start, "`agent` was not found".into());
        assert!(breaker.open_for(start).is_some());
        assert_eq!(breaker.last_failure, "`agent` was not found");
        assert_eq!(
            breaker.open_for(start + BREAKER_COOL_DOWN),
            None,
            "closes after the cool-down"
        );
    }

    #[test]
    fn failures_spread_beyond_the_window_do_not_open_the_breaker() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        for attempt in 0..CRASHES_TO_OPEN * 2 {
            let at = start + (CRASH_WINDOW / 2 + Duration::from_secs(1)) * attempt as u32;
            breaker.record_crash(at, "crash".into());
            assert_eq!(breaker.open_for(at), None);
        }
    }
}
