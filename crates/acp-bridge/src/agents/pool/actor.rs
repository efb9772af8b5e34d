//! The pool's actor: the one task that owns the slots, the sessions and the
//! circuit breaker, and answers the [`Pool`](super::Pool) handles' requests.
//!
//! It never awaits an agent. Starting one (spawn + `initialize`, up to the
//! start timeout) runs on a task of its own that reports back; leases that
//! arrive meanwhile wait, parked on the starting slot, while every other
//! request is answered at once. `session/new` is the lessee's to await: the
//! actor grants an agent and is told later which session was opened on it.
//! Owns reaping idle agents too. Does not own how many turns run at once:
//! the heart's capacity (agents × turns per agent) bounds that.
//!
//! With `--agent-uids` (the book's workspaces have an owner per
//! conversation) each slot serves one conversation, whose agent runs as
//! that conversation's uid: a conversation goes to the slot it holds; a new
//! one takes an empty slot, else stops an idle slot's agent and takes it,
//! else waits in order (with the leases waiting for a live session) until
//! a slot frees. Sessions there are never closed on their own: the agent is
//! stopped, which frees its slot.

use std::sync::Arc;
use std::time::Duration;

use acp_bridge_core::live_sessions::{self, Activity, AgentDues, LiveBounds};
use acp_bridge_core::mention::ConversationKey;
use acp_client::{AgentClient, AgentUser, ClientConfig, ExitReason, SessionId};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::breaker::Breaker;
use super::launcher::{Launcher, StartFailure};
use super::session_state::{SessionRef, SessionStates};
use super::sessions::SessionBook;
use super::{Awaited, PoolError, PoolStatus};
use crate::base::deadline::sleep_until;
use crate::telemetry::metrics;

/// An agent with no lease for this long is stopped.
pub(super) const IDLE_AGENT_REAP: Duration = Duration::from_secs(600);
/// At shutdown, an agent whose stdin was closed gets this long to exit.
pub(super) const AGENT_STOP_GRACE: Duration = Duration::from_secs(3);
/// How often idle agents are looked for.
pub(super) const REAP_INTERVAL: Duration = Duration::from_secs(30);

/// What the handles (and the pool's own helper tasks) ask of the actor.
#[derive(Debug)]
pub(super) enum Request {
    /// An agent for a turn of `conversation`, answered once one is live;
    /// with `--agent-uids`, `user` is the conversation's identity, which its
    /// slot's agent is started as.
    Lease {
        conversation: ConversationKey,
        user: Option<AgentUser>,
        reply: oneshot::Sender<Result<Grant, PoolError>>,
    },
    /// A lessee opened `session` for `conversation` on the agent it was
    /// granted; ignored unless that agent is still the slot's.
    SessionOpened {
        conversation: ConversationKey,
        slot: usize,
        generation: u64,
        session: SessionId,
    },
    /// A lease of `conversation` ended (or a grant was never taken up).
    Release {
        slot: usize,
        generation: u64,
        conversation: ConversationKey,
    },
    /// The lessee killed its agent; the slot starts a fresh one when next leased.
    Discard { slot: usize, generation: u64 },
    /// The conversation's next turn opens a fresh session.
    Rotate { conversation: ConversationKey },
    /// The agent is done closing these conversations' sessions (its
    /// `session/close` answered, or the agent stopped): their leases may
    /// reopen them.
    Closed { conversations: Vec<ConversationKey> },
    /// An agent exited without being killed (from its exit watcher).
    Crashed { failure: String },
    /// A lessee met a misconfiguration (authentication): stop starting
    /// agents for the cool-down.
    Misconfigured { failure: String },
    /// Kill every agent, then answer and stop.
    Shutdown { done: oneshot::Sender<()> },
}

/// A live agent granted to a lessee, with the conversation's session on it
/// when it has one. Dropped without becoming a lease, it gives its slot back.
#[derive(Debug)]
pub(super) struct Grant {
    pub(super) client: AgentClient,
    pub(super) session: Option<SessionId>,
    pub(super) hold: Hold,
}

/// A lease counted on a slot; sends the release if dropped before
/// [`Hold::keep`] (a lessee cancelled mid-`lease`, a failed `session/new`).
#[derive(Debug)]
pub(super) struct Hold {
    requests: mpsc::WeakUnboundedSender<Request>,
    pub(super) slot: usize,
    pub(super) generation: u64,
    conversation: ConversationKey,
    kept: bool,
}

impl Hold {
    /// The hold becomes a lease, released by [`Pool::release`](super::Pool::release).
    pub(super) fn keep(mut self) -> (usize, u64) {
        self.kept = true;
        (self.slot, self.generation)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.kept
            && let Some(requests) = self.requests.upgrade()
        {
            let _ = requests.send(Request::Release {
                slot: self.slot,
                generation: self.generation,
                conversation: self.conversation.clone(),
            });
        }
    }
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    /// Leases asked for, granted or parked, and not yet released: the load
    /// by which new conversations pick a slot, and what keeps it from the reaper.
    leases: usize,
    /// With `--agent-uids`: the one conversation the slot's agent (while
    /// it has one) serves.
    owner: Option<ConversationKey>,
}

#[derive(Debug)]
enum SlotState {
    Empty,
    Starting {
        generation: u64,
        /// The start task, to find the slot again if that task panics.
        task: tokio::task::Id,
        waiters: Vec<Waiter>,
    },
    Live(LiveAgent),
}

#[derive(Debug)]
struct Waiter {
    conversation: ConversationKey,
    /// The identity to start an agent as (`--agent-uids`).
    user: Option<AgentUser>,
    reply: oneshot::Sender<Result<Grant, PoolError>>,
}

#[derive(Debug)]
struct LiveAgent {
    client: AgentClient,
    generation: u64,
    last_used: Instant,
}

impl LiveAgent {
    /// Answers a lease with this agent, in `slot`, counting the turn on
    /// the conversation's session when it has one here. If the lessee is
    /// gone, the dropped grant's hold releases the slot again.
    fn grant(
        &self,
        slot: usize,
        sessions: &mut SessionStates<Waiter>,
        requests: &mpsc::WeakUnboundedSender<Request>,
        waiter: Waiter,
    ) {
        let session = sessions
            .live_mut(&waiter.conversation)
            .filter(|known| known.slot == slot && known.generation == self.generation)
            .map(|known| {
                known.activity.begin();
                known.session.clone()
            });
        let grant = Grant {
            client: self.client.clone(),
            session,
            hold: Hold {
                requests: requests.clone(),
                slot,
                generation: self.generation,
                conversation: waiter.conversation.clone(),
                kept: false,
            },
        };
        let _ = waiter.reply.send(Ok(grant));
    }
}

/// How a start task ended.
#[derive(Debug)]
struct Started {
    slot: usize,
    generation: u64,
    result: Result<AgentClient, StartFailure>,
}

#[derive(Debug)]
pub(super) struct Actor {
    launcher: Launcher,
    client_config: ClientConfig,
    slots: Vec<Slot>,
    /// Each conversation's session: opening, live, closing, or its leases
    /// parked (while `--max-live-sessions` are live and busy, or, with
    /// `--agent-uids`, every agent slot serves another busy conversation)
    /// until one frees.
    sessions: SessionStates<Waiter>,
    breaker: Breaker,
    next_generation: u64,
    requests: mpsc::UnboundedReceiver<Request>,
    /// For holds and exit watchers: weak, so the actor ends once every
    /// handle is gone.
    myself: mpsc::WeakUnboundedSender<Request>,
    status: watch::Sender<PoolStatus>,
    /// The agent profile whose agents these are: their metrics' label.
    profile: Arc<str>,
    starts: JoinSet<Started>,
    /// Cancels the starts under way (shutdown).
    stop: CancellationToken,
    /// When quiet sessions are closed, and how many may be live.
    bounds: LiveBounds,
    /// What a closed session releases beside the agent's side (its MCP token).
    book: Arc<SessionBook>,
}

impl Actor {
    pub(super) fn new(
        launcher: Launcher,
        processes: usize,
        client_config: ClientConfig,
        requests: (
            mpsc::WeakUnboundedSender<Request>,
            mpsc::UnboundedReceiver<Request>,
        ),
        status: watch::Sender<PoolStatus>,
        profile: Arc<str>,
        (bounds, book): (LiveBounds, Arc<SessionBook>),
    ) -> Self {
        Actor {
            bounds,
            book,
            profile,
            launcher,
            client_config,
            slots: (0..processes)
                .map(|_| Slot {
                    state: SlotState::Empty,
                    leases: 0,
                    owner: None,
                })
                .collect(),
            sessions: SessionStates::default(),
            breaker: Breaker::default(),
            next_generation: 0,
            myself: requests.0,
            requests: requests.1,
            status,
            starts: JoinSet::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Serves requests until a shutdown, or until every handle is dropped.
    pub(super) async fn run(mut self) {
        let mut reap = tokio::time::interval_at(Instant::now() + REAP_INTERVAL, REAP_INTERVAL);
        reap.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // Timers first: a reap that is due happens before the requests
            // that arrived with it (deterministic under a paused clock).
            tokio::select! {
                biased;
                _ = reap.tick() => self.reap_idle(),
                () = sleep_until(self.breaker.open_until) => self.close_breaker_when_due(),
                () = sleep_until(self.next_idle_close()) => self.close_idle_sessions(),
                Some(joined) = self.starts.join_next() => self.on_started(joined),
                request = self.requests.recv() => {
                    let Some(request) = request else {
                        return self.shut_down().await;
                    };
                    if let Some(done) = self.on_request(request) {
                        self.shut_down().await;
                        let _ = done.send(());
                        return;
                    }
                }
            }
            self.admit_awaiting();
            self.publish_live_sessions();
        }
    }

    /// Tells [`PoolStatus`] which conversations have a live session now
    /// (workspace pruning spares them) and which wait for one, and the
    /// live gauge, when that changed: not on every request of a mention.
    /// With `--agent-uids`, a conversation whose agent runs counts as
    /// live too (its workspace and uid are in use).
    fn publish_live_sessions(&self) {
        let owners = self
            .slots
            .iter()
            .filter(|slot| !matches!(slot.state, SlotState::Empty))
            .filter_map(|slot| slot.owner.as_ref());
        let live: std::collections::BTreeSet<&ConversationKey> = self
            .sessions
            .live_sessions()
            .map(|(key, _)| key)
            .chain(owners)
            .collect();
        self.status.send_if_modified(|status| {
            let same = status.live_sessions.len() == live.len()
                && live.iter().all(|key| status.live_sessions.contains(*key));
            if !same {
                status.live_sessions = live.iter().map(|key| (*key).clone()).collect();
                metrics::sessions_live(&self.profile, self.sessions.live_count());
            }
            let awaiting = self.sessions.parked();
            let same_awaiting = status.awaiting.len() == awaiting.clone().count()
                && awaiting
                    .clone()
                    .all(|(key, awaited)| status.awaiting.get(key) == Some(&awaited));
            if !same_awaiting {
                status.awaiting = awaiting.map(|(key, awaited)| (key.clone(), awaited)).collect();
            }
            !same || !same_awaiting
        });
    }

    /// Answers a request; a shutdown is handed back to the loop.
    fn on_request(&mut self, request: Request) -> Option<oneshot::Sender<()>> {
        match request {
            Request::Lease {
                conversation,
                user,
                reply,
            } => self.lease(Waiter {
                conversation,
                user,
                reply,
            }),
            Request::SessionOpened {
                conversation,
                slot,
                generation,
                session,
            } => {
                // A report for an agent that is gone is stale: its session
                // went with it.
                self.sessions.stop_opening(&conversation);
                if self.live(slot, generation).is_some() {
                    let session = SessionRef {
                        slot,
                        generation,
                        session,
                        activity: Activity::opened_for_turn(Instant::now()),
                    };
                    self.sessions.opened(conversation, session);
                }
            }
            Request::Release {
                slot,
                generation,
                conversation,
            } => {
                self.slots[slot].leases = self.slots[slot].leases.saturating_sub(1);
                if let Some(agent) = self.live(slot, generation) {
                    agent.last_used = Instant::now();
                }
                // A conversation runs one turn at a time: its lease ended,
                // so it opens nothing any more (a failed open ends here).
                self.sessions.stop_opening(&conversation);
                if let Some(known) = self.sessions.live_mut(&conversation)
                    && known.slot == slot
                    && known.generation == generation
                {
                    known.activity.end(Instant::now());
                }
            }
            Request::Discard { slot, generation } => {
                if self.live(slot, generation).is_some() {
                    self.vacate(slot);
                }
            }
            Request::Rotate { conversation } => {
                if let Some(old) = self.sessions.take_live(&conversation)
                    && let Some(agent) = self.live(old.slot, old.generation)
                {
                    close_session(&agent.client, old.session, || ());
                }
            }
            Request::Closed { conversations } => {
                for conversation in conversations {
                    for waiter in self.sessions.closed(&conversation) {
                        self.lease(waiter);
                    }
                }
            }
            Request::Crashed { failure } => {
                self.breaker.record_crash(Instant::now(), failure);
                self.publish_breaker();
            }
            Request::Misconfigured { failure } => {
                self.breaker.trip(Instant::now(), failure);
                self.publish_breaker();
            }
            Request::Shutdown { done } => return Some(done),
        }
        None
    }

    /// Grants the slot's live agent at once, or parks the lease on the
    /// slot's start (beginning one if the slot has no agent).
    fn lease(&mut self, waiter: Waiter) {
        let conversation = waiter.conversation.clone();
        let Some(waiter) = self.sessions.wait_for_close(&conversation, waiter) else {
            return;
        };
        // Affinity: a conversation goes back to its session's slot, even if
        // that agent died (its replacement starts there). Others go to the
        // least loaded slot, counting leases still waiting for a start; with
        // --agent-uids, to a slot of their own.
        let index = if self.book.dedicated() {
            let Some(index) = self.own_slot(&waiter.conversation) else {
                tracing::info!(
                    conversation = %waiter.conversation,
                    agents = self.slots.len(),
                    "every agent serves another conversation (--agent-uids): the turn waits for one to free"
                );
                self.sessions.park(&conversation, Awaited::AgentSlot, waiter);
                return;
            };
            index
        } else {
            match self.sessions.live(&waiter.conversation) {
                Some(known) => known.slot,
                None => self.least_loaded(),
            }
        };
        if let SlotState::Live(agent) = &self.slots[index].state
            && agent.client.exit().is_some()
        {
            self.vacate(index);
            metrics::agent_respawned(&self.profile);
        }
        if !self.sessions.holds_a_session(&conversation) {
            if !self.room_for_a_session() {
                tracing::info!(
                    %conversation,
                    live = self.sessions.counted(),
                    "every live session is busy: the turn waits for one to free"
                );
                self.sessions.park(&conversation, Awaited::LiveSession, waiter);
                return;
            }
            self.sessions.opening(&conversation);
        }
        self.slots[index].leases += 1;
        match &mut self.slots[index].state {
            SlotState::Live(agent) => {
                agent.last_used = Instant::now();
                agent.grant(index, &mut self.sessions, &self.myself, waiter);
            }
            SlotState::Starting { waiters, .. } => waiters.push(waiter),
            SlotState::Empty => match self.breaker.open_for(Instant::now()) {
                Some(seconds) => {
                    self.slots[index].leases -= 1;
                    self.sessions.stop_opening(&conversation);
                    let refusal = match &self.breaker.cannot_start {
                        Some(reason) => PoolError::CannotStart(reason.clone()),
                        None => PoolError::CircuitOpen {
                            seconds,
                            last_failure: self.breaker.last_failure.clone().unwrap_or_default(),
                        },
                    };
                    let _ = waiter.reply.send(Err(refusal));
                }
                None => self.begin_start(index, waiter),
            },
        }
    }

    /// Whether one more session may be live (`--max-live-sessions`),
    /// making room by closing the least recently used idle session that
    /// can be closed now. Leases already waiting go first.
    fn room_for_a_session(&mut self) -> bool {
        let Some(max) = self.bounds.max_live_sessions else {
            return true;
        };
        if self.sessions.any_parked() {
            return false;
        }
        if self.sessions.counted() < max {
            return true;
        }
        let closable = self
            .sessions
            .live_sessions()
            .filter(|(_, known)| self.closable_now(known.slot))
            .map(|(key, known)| (key, &known.activity));
        let Some(oldest) = live_sessions::least_recently_used(closable).cloned() else {
            return false;
        };
        let Some(slot) = self.sessions.live(&oldest).map(|known| known.slot) else {
            return false;
        };
        if self.slot_closes_sessions(slot) {
            self.close_session_of(&oldest, CloseReason::Lru);
        } else {
            self.stop_agent_for_its_sessions(slot, CloseReason::Lru);
        }
        self.sessions.counted() < max
    }

    /// Whether an idle session on `slot` can be closed now: its agent
    /// closes sessions, or has nothing else running and can be stopped.
    fn closable_now(&self, slot: usize) -> bool {
        self.slot_closes_sessions(slot)
            || (self.slots[slot].leases == 0
                && self
                    .sessions_on(slot)
                    .all(|(_, known)| known.activity.idle_since().is_some()))
    }

    fn slot_closes_sessions(&self, slot: usize) -> bool {
        matches!(&self.slots[slot].state, SlotState::Live(agent) if self.closes(&agent.client))
    }

    /// Whether a quiet session of `client` is closed alone: with
    /// `--agent-uids` never (its agent is stopped, freeing the slot).
    fn closes(&self, client: &AgentClient) -> bool {
        !self.book.dedicated() && closes_sessions(client)
    }

    /// Leases waiting for a live session, tried again in their order (a
    /// session freed or closed since); those whose lessee is gone are dropped.
    fn admit_awaiting(&mut self) {
        if !self.sessions.any_parked() {
            return;
        }
        for waiter in self.sessions.unpark_all() {
            if !waiter.reply.is_closed() {
                self.lease(waiter);
            }
        }
    }

    /// With `--agent-uids`, the slot `conversation`'s agent runs (or starts)
    /// in: the one it holds, else an empty one, else one whose agent is idle
    /// (no lease, every session quiet), stopped now; `None`: every agent
    /// serves another conversation that is busy, or leases wait before it.
    fn own_slot(&mut self, conversation: &ConversationKey) -> Option<usize> {
        let held = self.slots.iter().position(|slot| {
            !matches!(slot.state, SlotState::Empty) && slot.owner.as_ref() == Some(conversation)
        });
        if held.is_some() {
            return held;
        }
        if self.sessions.any_parked() {
            return None;
        }
        let empty = self
            .slots
            .iter()
            .position(|slot| matches!(slot.state, SlotState::Empty) && slot.leases == 0);
        let index = match empty {
            Some(index) => index,
            None => {
                let idle = (0..self.slots.len()).find(|index| {
                    matches!(self.slots[*index].state, SlotState::Live(_)) && self.closable_now(*index)
                })?;
                self.stop_agent_for_its_sessions(idle, CloseReason::Lru);
                idle
            }
        };
        self.slots[index].owner = Some(conversation.clone());
        Some(index)
    }

    fn least_loaded(&self) -> usize {
        (0..self.slots.len())
            .min_by_key(|index| self.slots[*index].leases)
            .unwrap_or(0)
    }

    /// Starts the slot's next agent on a task of its own; `first` waits for it.
    fn begin_start(&mut self, index: usize, first: Waiter) {
        self.next_generation += 1;
        let generation = self.next_generation;
        let start = self.launcher.clone().start(
            index,
            generation,
            (self.client_config.clone(), first.user.clone()),
            self.stop.clone(),
        );
        let task = self.starts.spawn(async move {
            Started {
                slot: index,
                generation,
                result: start.await,
            }
        });
        self.slots[index].state = SlotState::Starting {
            generation,
            task: task.id(),
            waiters: vec![first],
        };
    }

    fn on_started(&mut self, joined: Result<Started, JoinError>) {
        let started = match joined {
            Ok(started) => started,
            Err(error) => {
                // A bug in the start step: fail its waiters rather than
                // leave them parked forever.
                let Some((slot, generation)) = self.start_of_task(error.id()) else {
                    return;
                };
                Started {
                    slot,
                    generation,
                    result: Err(StartFailure {
                        error: PoolError::Initialize(error.to_string()),
                        note: format!("the start task failed: {error}"),
                    }),
                }
            }
        };
        let index = started.slot;
        let waiters = match &mut self.slots[index].state {
            SlotState::Starting {
                generation, waiters, ..
            } if *generation == started.generation => std::mem::take(waiters),
            // Only its own start ends a Starting slot; were that ever not
            // so, nothing would wait for this agent.
            _ => {
                if let Ok(client) = started.result {
                    client.kill();
                }
                return;
            }
        };
        match started.result {
            Ok(client) => {
                self.breaker.spawned();
                self.publish_breaker();
                self.watch_exit(&client);
                let agent = LiveAgent {
                    client,
                    generation: started.generation,
                    last_used: Instant::now(),
                };
                for waiter in waiters {
                    agent.grant(index, &mut self.sessions, &self.myself, waiter);
                }
                self.slots[index].state = SlotState::Live(agent);
            }
            Err(failure) => {
                let slot = &mut self.slots[index];
                slot.state = SlotState::Empty;
                slot.leases = slot.leases.saturating_sub(waiters.len());
                match &failure.error {
                    PoolError::CannotStart(reason) => {
                        self.breaker.cannot_start(Instant::now(), reason.clone())
                    }
                    configuration if configuration.is_configuration() => {
                        self.breaker.spawned();
                        self.breaker.trip(Instant::now(), failure.note);
                    }
                    _ => {
                        self.breaker.spawned();
                        self.breaker.record_crash(Instant::now(), failure.note);
                    }
                }
                self.publish_breaker();
                for waiter in waiters {
                    self.sessions.stop_opening(&waiter.conversation);
                    let _ = waiter.reply.send(Err(failure.error.clone()));
                }
            }
        }
    }

    fn start_of_task(&self, task: tokio::task::Id) -> Option<(usize, u64)> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(index, slot)| match &slot.state {
                SlotState::Starting {
                    generation,
                    task: started_by,
                    ..
                } if *started_by == task => Some((index, *generation)),
                _ => None,
            })
    }

    /// The slot's agent, if it is `generation`.
    fn live(&mut self, slot: usize, generation: u64) -> Option<&mut LiveAgent> {
        match &mut self.slots[slot].state {
            SlotState::Live(agent) if agent.generation == generation => Some(agent),
            _ => None,
        }
    }

    /// Takes the slot's live agent out (the caller kills it if need be)
    /// and forgets the sessions it hosted.
    fn vacate(&mut self, index: usize) -> Option<LiveAgent> {
        let state = std::mem::replace(&mut self.slots[index].state, SlotState::Empty);
        let SlotState::Live(agent) = state else {
            self.slots[index].state = state;
            return None;
        };
        self.sessions.vacate(index);
        Some(agent)
    }

    fn reap_idle(&mut self) {
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            let idle = slot.leases == 0
                && matches!(&slot.state, SlotState::Live(agent) if agent.last_used.elapsed() >= IDLE_AGENT_REAP);
            if idle && let Some(agent) = self.vacate(index) {
                tracing::info!(agent = agent.client.name(), "stopping idle agent");
                agent.client.kill();
            }
        }
    }

    /// When the next quiet session is due to close (`--session-idle`): one
    /// on an agent that closes sessions, or the last of an agent's sessions
    /// on one that does not (and has no lease in flight), since such an
    /// agent can only be stopped as a whole. One pass over the sessions:
    /// this runs after every request the actor answers.
    fn next_idle_close(&self) -> Option<Instant> {
        let limit = self.bounds.session_idle?;
        if self.sessions.live_count() == 0 {
            return None;
        }
        let mut dues = vec![AgentDues::default(); self.slots.len()];
        for (_, known) in self.sessions.live_sessions() {
            dues[known.slot].add(&known.activity, limit);
        }
        let mut next: Option<Instant> = None;
        for (slot, dues) in self.slots.iter().zip(dues) {
            let SlotState::Live(agent) = &slot.state else {
                continue;
            };
            let due = if self.closes(&agent.client) {
                dues.first_idle()
            } else if slot.leases == 0 {
                dues.all_idle()
            } else {
                None
            };
            next = next.into_iter().chain(due).min();
        }
        next
    }

    /// The sessions kept on `slot`'s agent.
    fn sessions_on(&self, slot: usize) -> impl Iterator<Item = (&ConversationKey, &SessionRef)> {
        self.sessions
            .live_sessions()
            .filter(move |(_, known)| known.slot == slot)
    }

    /// Closes the sessions quiet past `--session-idle`: each with
    /// `session/close` where its agent offers it; else the agent is stopped
    /// once all its sessions are quiet (the conversations' next mentions
    /// reopen them on a fresh process).
    fn close_idle_sessions(&mut self) {
        let Some(limit) = self.bounds.session_idle else {
            return;
        };
        let now = Instant::now();
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            let SlotState::Live(agent) = &slot.state else {
                continue;
            };
            if self.closes(&agent.client) {
                let quiet: Vec<ConversationKey> = live_sessions::idle_past(
                    self.sessions_on(index).map(|(key, known)| (key, &known.activity)),
                    now,
                    limit,
                )
                .into_iter()
                .cloned()
                .collect();
                for conversation in quiet {
                    self.close_session_of(&conversation, CloseReason::Idle);
                }
            } else if slot.leases == 0
                && live_sessions::all_idle_due(
                    self.sessions_on(index).map(|(_, known)| &known.activity),
                    limit,
                )
                .is_some_and(|due| due <= now)
            {
                self.stop_agent_for_its_sessions(index, CloseReason::Idle);
            }
        }
    }

    /// Closes `conversation`'s session on its agent (which offers
    /// `session/close`) and releases what the session held.
    fn close_session_of(&mut self, conversation: &ConversationKey, reason: CloseReason) {
        let Some(old) = self.sessions.take_live(conversation) else {
            return;
        };
        let Some(client) = self
            .live(old.slot, old.generation)
            .map(|agent| agent.client.clone())
        else {
            return;
        };
        let agent_name = client.name().to_owned();
        let done = self.report_closed(vec![conversation.clone()]);
        close_session(&client, old.session.clone(), done);
        self.closed(conversation, &old.session, &agent_name, reason, "session/close");
    }

    /// Marks `conversations` as closing; the returned step, run once the
    /// agent is done, tells the actor so.
    fn report_closed(&mut self, conversations: Vec<ConversationKey>) -> impl FnOnce() + Send + 'static {
        for conversation in &conversations {
            self.sessions.closing(conversation);
        }
        let requests = self.myself.clone();
        move || {
            if let Some(requests) = requests.upgrade() {
                let _ = requests.send(Request::Closed { conversations });
            }
        }
    }

    /// Stops `slot`'s agent, which cannot close a session, and releases
    /// what each of its sessions held. Its stdin is closed first, so that
    /// an agent that saves its sessions on the way out can reopen them.
    fn stop_agent_for_its_sessions(&mut self, slot: usize, reason: CloseReason) {
        let hosted: Vec<(ConversationKey, SessionId)> = self
            .sessions_on(slot)
            .map(|(key, known)| (key.clone(), known.session.clone()))
            .collect();
        let Some(agent) = self.vacate(slot) else {
            return;
        };
        let agent_name = agent.client.name().to_owned();
        let done = self.report_closed(hosted.iter().map(|(key, _)| key.clone()).collect());
        tokio::spawn(async move {
            agent.client.stop(AGENT_STOP_GRACE).await;
            done();
        });
        for (conversation, session) in hosted {
            self.closed(&conversation, &session, &agent_name, reason, "agent stopped");
        }
    }

    /// Releases what a closed session held (its MCP token), and says so.
    fn closed(
        &self,
        conversation: &ConversationKey,
        session: &SessionId,
        agent: &str,
        reason: CloseReason,
        how: &'static str,
    ) {
        self.book.release(conversation);
        metrics::session_closed(reason.as_str());
        tracing::info!(
            %conversation,
            %session,
            agent,
            how,
            reason = reason.as_str(),
            "session closed ({})",
            reason.as_str()
        );
    }

    fn close_breaker_when_due(&mut self) {
        self.breaker.open_for(Instant::now());
        self.publish_breaker();
    }

    fn publish_breaker(&self) {
        let starts = self.breaker.starts();
        let last_failure = self.breaker.last_failure.clone();
        self.status.send_if_modified(|status| {
            let changed = status.starts != starts || status.last_failure != last_failure;
            status.starts = starts;
            status.last_failure = last_failure;
            changed
        });
    }

    /// Counts the agent alive until it exits, and reports its exit as a
    /// crash unless it was killed. Outlives the actor: agents killed at
    /// shutdown are still counted out.
    fn watch_exit(&self, client: &AgentClient) {
        let exit = client.exit_watch();
        let name = client.name().to_owned();
        let status = self.status.clone();
        let profile = Arc::clone(&self.profile);
        let crashes = self.myself.clone();
        count_alive(&status, &profile, 1);
        tokio::spawn(async move {
            let exit = exit.wait().await;
            count_alive(&status, &profile, -1);
            if exit.reason != ExitReason::Killed {
                tracing::warn!(agent = %name, %exit, "agent exited unexpectedly");
                if let Some(crashes) = crashes.upgrade() {
                    let _ = crashes.send(Request::Crashed {
                        failure: format!("{name}: {exit}"),
                    });
                }
            }
        });
    }

    /// Kills every agent, live or still starting; parked leases fail.
    async fn shut_down(&mut self) {
        self.stop.cancel();
        for waiter in self.sessions.clear() {
            let _ = waiter.reply.send(Err(PoolError::ShutDown));
        }
        let mut stopping = Vec::new();
        for slot in &mut self.slots {
            match std::mem::replace(&mut slot.state, SlotState::Empty) {
                SlotState::Live(agent) => stopping.push(agent.client),
                SlotState::Starting { waiters, .. } => {
                    for waiter in waiters {
                        let _ = waiter.reply.send(Err(PoolError::ShutDown));
                    }
                }
                SlotState::Empty => {}
            }
        }
        // Live agents get their stdin closed and a moment to save their
        // sessions (some write them only on the way out), then are killed.
        futures_util::future::join_all(stopping.iter().map(|client| client.stop(AGENT_STOP_GRACE))).await;
        // Each start kills its agent when stopped; one that finished just
        // before is killed here.
        while let Some(joined) = self.starts.join_next().await {
            if let Ok(Started {
                result: Ok(client), ..
            }) = joined
            {
                client.kill();
            }
        }
        self.sessions.clear();
    }
}

/// Why a live session was closed while its conversation kept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseReason {
    /// Quiet past `--session-idle`.
    Idle,
    /// The least recently used idle one, to make room under
    /// `--max-live-sessions`.
    Lru,
}

impl CloseReason {
    fn as_str(self) -> &'static str {
        match self {
            CloseReason::Idle => "idle",
            CloseReason::Lru => "lru",
        }
    }
}

/// Whether the agent offers `session/close`.
fn closes_sessions(client: &AgentClient) -> bool {
    client.info().is_some_and(|info| info.close_session)
}

/// Ends a session the conversation no longer uses: closed on the agent when
/// it offers `session/close` (on a task of its own: the actor never waits),
/// else only forgotten by the client; `done` runs once that is over.
fn close_session(client: &AgentClient, session: SessionId, done: impl FnOnce() + Send + 'static) {
    if !closes_sessions(client) {
        client.forget_session(&session);
        return done();
    }
    let client = client.clone();
    tokio::spawn(async move {
        if let Err(error) = client.close_session(&session).await {
            tracing::debug!(%session, %error, "session/close failed; the session is forgotten all the same");
        }
        done();
    });
}

fn count_alive(status: &watch::Sender<PoolStatus>, profile: &str, change: isize) {
    let mut alive = 0;
    status.send_modify(|status| {
        status.alive = status.alive.saturating_add_signed(change);
        alive = status.alive;
    });
    metrics::agents_alive(profile, alive);
}
