//! The heart: accepted mentions become agent turns.
//!
//! Owns the conversations' live state on one task (no locks): the queue,
//! which conversation has a turn in flight and how to reach it, retries, and
//! owner commands. Mentions arrive from the intake; a mention for a
//! conversation with a turn in flight goes through the mode gate (queue it,
//! or hand it to the live turn to steer or interrupt). Turns run on their
//! own tasks ([`TurnRunner`]) and report back; every mention they were given
//! comes back answered, notified, failed (retried with backoff, then a
//! notice) or returned for the next turn. Nothing accepted is dropped
//! silently.
//!
//! Shutdown: the intake stops first; turns in flight get the grace period,
//! then are abandoned (their mentions stay pending in the journal and are
//! resumed at the next start).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ask_owner::Routed;
use crate::backoff::Backoff;
use crate::commands::OwnerCommand;
use crate::intake::Inbound;
use crate::mention::{ConversationKey, Mention};
use crate::mode_gate::{Decision, ModeGate};
use crate::queue::Queue;
use crate::reply::Replier;
use crate::store::Store;
use crate::store::{Finish, sql_now};
use crate::telemetry::metrics;
use crate::turn_runner::{Control, TurnChannels, TurnContext, TurnEnd, TurnReport, TurnRunner};

/// Attempts of one mention before it is given up with a notice.
pub const MAX_TURN_ATTEMPTS: u32 = 3;
const RETRY_BACKOFF_MIN: Duration = Duration::from_secs(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// A turn in flight, as the heart reaches it.
#[derive(Debug)]
struct LiveTurn {
    turn_id: u64,
    control: mpsc::Sender<Control>,
}

/// Steer counters for `!status`.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    turns_started: u64,
    absorbed: u64,
    queued_mid_turn: u64,
}

pub struct Heart {
    queue: Queue,
    live: HashMap<ConversationKey, LiveTurn>,
    /// What turns share; the heart uses its pool, replier and desk too.
    turns: TurnContext,
    store: Arc<Store>,
    mode_gate: ModeGate,
    capacity: usize,
    next_turn_id: u64,
    counters: Counters,
    reports_tx: mpsc::Sender<TurnReport>,
    reports_rx: mpsc::Receiver<TurnReport>,
    /// Conversations whose session is to be rotated once their turn ends.
    rotate_after_turn: Vec<ConversationKey>,
}

impl std::fmt::Debug for Heart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heart")
            .field("queued", &self.queue.depth())
            .field("live", &self.live.len())
            .finish_non_exhaustive()
    }
}

impl Heart {
    /// `capacity`: turns in flight at most (agents × turns per agent).
    pub fn new(turns: TurnContext, store: Arc<Store>, mode_gate: ModeGate, capacity: usize) -> Self {
        let (reports_tx, reports_rx) = mpsc::channel(64);
        Heart {
            queue: Queue::default(),
            live: HashMap::new(),
            turns,
            store,
            mode_gate,
            capacity,
            next_turn_id: 0,
            counters: Counters::default(),
            reports_tx,
            reports_rx,
            rotate_after_turn: Vec::new(),
        }
    }

    /// Queues the journal's unfinished mentions (after a restart).
    pub fn resume(&mut self, pending: Vec<Mention>) {
        if !pending.is_empty() {
            tracing::info!(
                mentions = pending.len(),
                "resuming mentions accepted before the last stop"
            );
        }
        for mention in pending {
            self.enqueue(mention);
        }
    }

    /// Runs until `stop` is cancelled and the shutdown grace has passed.
    pub async fn run(
        mut self,
        mut inbound: mpsc::Receiver<Inbound>,
        stop: CancellationToken,
        grace: Duration,
    ) {
        let mut inbound_open = true;
        loop {
            self.dispatch().await;
            let wake = self.queue.next_wake();
            tokio::select! {
                () = stop.cancelled() => break,
                received = inbound.recv(), if inbound_open => match received {
                    Some(Inbound::Mention(mention)) => self.on_mention(mention).await,
                    Some(Inbound::Command { mention, command }) => self.on_command(mention, command).await,
                    None => inbound_open = false,
                },
                Some(report) = self.reports_rx.recv() => self.on_report(report).await,
                () = sleep_until_opt(wake) => {}
            }
        }
        self.shut_down(grace).await;
    }

    async fn on_mention(&mut self, mention: Mention) {
        if self
            .turns
            .ask
            .as_ref()
            .is_some_and(|ask| ask.desk.is_answer(&mention))
        {
            return self.on_answer(mention).await;
        }
        let key = mention.conversation.clone();
        let Some(live) = self.live.get(&key) else {
            self.enqueue(mention);
            return;
        };
        match self.mode_gate.decide(&mention) {
            Decision::Queue => {
                self.counters.queued_mid_turn += 1;
                self.enqueue(mention);
            }
            Decision::Drop => {
                self.notify(&[mention], "I am busy with this conversation and set to drop messages that arrive meanwhile; please send it again when I have answered.")
                    .await;
            }
            Decision::Absorb(framing) => {
                self.counters.absorbed += 1;
                let control = Control::Absorb {
                    mentions: vec![mention],
                    framing,
                };
                if let Err(mpsc::error::SendError(Control::Absorb { mentions, .. })) =
                    live.control.send(control).await
                {
                    // The turn just ended: the mention belongs to the next one.
                    for mention in mentions {
                        self.enqueue(mention);
                    }
                }
            }
        }
    }

    /// A reply to an open permission question. Only the owner answers;
    /// anyone else's reply is ignored (logged, and not prompted either).
    async fn on_answer(&mut self, reply: Mention) {
        let Some(ask) = &self.turns.ask else { return };
        if !reply.from_owner {
            tracing::info!(
                conversation = %reply.conversation, event_id = %reply.event_id, author = %reply.author_short(),
                "ignored a reply to a permission question from someone other than the owner"
            );
            if let Err(error) =
                self.store
                    .journal_finish(&[&reply.event_id.to_hex()], Finish::Dropped, sql_now())
            {
                tracing::error!(%error, "cannot finish the ignored reply");
            }
            return;
        }
        let text = match ask.desk.answer(&reply) {
            Routed::Answered(option) => format!("Answered the agent: {}.", option.name),
            Routed::Unrecognized { options } => {
                format!(
                    "I did not understand that answer. Reply with the number or the name of one of:\n{options}"
                )
            }
            // Closed between the check and now (timed out): an ordinary mention.
            Routed::NotAnAnswer => return self.enqueue(reply),
        };
        self.notify(&[reply], &text).await;
    }

    async fn on_command(&mut self, mention: Mention, command: OwnerCommand) {
        tracing::info!(conversation = %mention.conversation, command = command.as_str(), "owner command");
        let key = mention.conversation.clone();
        let answer = match command {
            OwnerCommand::Cancel => match self.live.get(&key) {
                Some(live) if live.control.send(Control::CancelByOwner).await.is_ok() => {
                    "Cancelling the turn in flight.".to_owned()
                }
                _ => "Nothing to cancel: no turn is running in this conversation.".to_owned(),
            },
            OwnerCommand::Rotate => {
                if self.live.contains_key(&key) {
                    self.rotate_after_turn.push(key.clone());
                    "This conversation gets a fresh agent session after the turn in flight.".to_owned()
                } else {
                    self.turns.pool.rotate(&key);
                    "This conversation gets a fresh agent session from its next turn.".to_owned()
                }
            }
            OwnerCommand::Status => self.status_text().await,
        };
        self.notify(&[mention], &answer).await;
    }

    async fn status_text(&self) -> String {
        let blocked: Vec<String> = self
            .live
            .keys()
            .filter_map(|key| {
                let question = self.turns.ask.as_ref()?.desk.waiting_in(key)?;
                Some(format!(
                    " {key} is waiting for the owner to answer a permission question ({question})."
                ))
            })
            .collect();
        format!(
            "Turns in flight: {}. Mentions waiting: {}. Agents alive: {}{}. Turns started: {}; mid-turn mentions handed to live turns: {}, queued: {}.{}",
            self.live.len(),
            self.queue.depth(),
            self.turns.pool.alive(),
            if self.turns.pool.circuit_open() {
                " (restarts paused after repeated crashes)"
            } else {
                ""
            },
            self.counters.turns_started,
            self.counters.absorbed,
            self.counters.queued_mid_turn,
            blocked.concat(),
        )
    }

    async fn on_report(&mut self, report: TurnReport) {
        let key = report.conversation.clone();
        if self
            .live
            .get(&key)
            .is_some_and(|live| live.turn_id == report.turn_id)
        {
            self.live.remove(&key);
        }
        if let Some(position) = self.rotate_after_turn.iter().position(|pending| *pending == key) {
            self.rotate_after_turn.swap_remove(position);
            self.turns.pool.rotate(&key);
        }
        for dropped in self.queue.push_front(report.returned) {
            self.queue_overflow(dropped).await;
        }
        let mut not_before = None;
        match report.end {
            TurnEnd::Answered { .. } | TurnEnd::Notified { .. } | TurnEnd::Abandoned { .. } => {}
            TurnEnd::CancelledByOwner { mentions } => {
                self.notify(&mentions, "Cancelled by the owner.").await;
            }
            TurnEnd::Failed { mentions, failure } => {
                let attempts = self.record_attempts(&mentions);
                if failure.retryable() && attempts < MAX_TURN_ATTEMPTS {
                    let mut backoff = Backoff::new(RETRY_BACKOFF_MIN, RETRY_BACKOFF_MAX);
                    let delay = (0..attempts)
                        .map(|_| backoff.next_delay())
                        .last()
                        .unwrap_or(RETRY_BACKOFF_MIN);
                    tracing::warn!(conversation = %key, attempts, retry_in_ms = delay.as_millis() as u64, %failure, "turn failed; will retry");
                    not_before = Some(Instant::now() + delay);
                    for dropped in self.queue.push_front(mentions) {
                        self.queue_overflow(dropped).await;
                    }
                } else {
                    tracing::error!(conversation = %key, attempts, %failure, "turn failed; giving up");
                    let text = format!(
                        "Sorry, I could not answer this: {failure}. Giving up after {attempts} attempt(s)."
                    );
                    self.notify(&mentions, &text).await;
                }
            }
        }
        self.queue.turn_ended(&key, not_before);
        metrics::queue_depth(self.queue.depth());
    }

    /// Starts turns while there is capacity and work.
    async fn dispatch(&mut self) {
        while self.live.len() < self.capacity {
            let Some((key, batch)) = self.queue.next_batch(Instant::now()) else {
                break;
            };
            self.next_turn_id += 1;
            self.counters.turns_started += 1;
            let (control_tx, control_rx) = mpsc::channel(64);
            self.live.insert(
                key.clone(),
                LiveTurn {
                    turn_id: self.next_turn_id,
                    control: control_tx,
                },
            );
            let runner = TurnRunner::new(
                self.next_turn_id,
                key,
                batch,
                self.turns.clone(),
                TurnChannels {
                    control: control_rx,
                    reports: self.reports_tx.clone(),
                },
            );
            tokio::spawn(runner.run());
        }
        metrics::queue_depth(self.queue.depth());
    }

    fn enqueue(&mut self, mention: Mention) {
        if let Some(dropped) = self.queue.push_back(mention) {
            // Synchronous callers: the notice is sent on its own task.
            let replier = self.turns.replier.clone();
            tokio::spawn(async move { notify_overflow(&replier, dropped).await });
        }
    }

    async fn queue_overflow(&self, dropped: Mention) {
        notify_overflow(&self.turns.replier, dropped).await;
    }

    fn record_attempts(&self, mentions: &[Mention]) -> u32 {
        mentions
            .iter()
            .filter_map(|mention| self.store.journal_record_attempt(&mention.event_id.to_hex()).ok())
            .max()
            .unwrap_or(MAX_TURN_ATTEMPTS)
    }

    async fn notify(&self, mentions: &[Mention], text: &str) {
        if let Err(error) = self.turns.replier.notify(mentions, text).await {
            tracing::error!(%error, "cannot store a notice");
        }
    }

    async fn shut_down(mut self, grace: Duration) {
        tracing::info!(
            in_flight = self.live.len(),
            grace_s = grace.as_secs(),
            "shutting down: letting turns in flight finish"
        );
        let deadline = tokio::time::Instant::now() + grace;
        while !self.live.is_empty() {
            match tokio::time::timeout_at(deadline, self.reports_rx.recv()).await {
                Ok(Some(report)) => self.on_report_at_shutdown(report).await,
                Ok(None) | Err(_) => break,
            }
        }
        if !self.live.is_empty() {
            tracing::warn!(
                in_flight = self.live.len(),
                "grace period over: cancelling the remaining turns (their mentions resume at the next start)"
            );
            for live in self.live.values() {
                let _ = live.control.send(Control::Abandon).await;
            }
            let abandon_deadline = tokio::time::Instant::now() + acp_client::DEFAULT_CANCEL_TIMEOUT;
            while !self.live.is_empty() {
                match tokio::time::timeout_at(abandon_deadline, self.reports_rx.recv()).await {
                    Ok(Some(report)) => {
                        self.live.remove(&report.conversation);
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
        self.turns.pool.shutdown().await;
    }

    /// During the grace period turns still end normally; nothing new starts.
    async fn on_report_at_shutdown(&mut self, report: TurnReport) {
        let key = report.conversation.clone();
        self.live.remove(&key);
        if let TurnEnd::CancelledByOwner { mentions } = &report.end {
            self.notify(mentions, "Cancelled by the owner.").await;
        }
        // Failed and returned mentions stay pending in the journal.
    }
}

async fn notify_overflow(replier: &Replier, dropped: Mention) {
    tracing::warn!(conversation = %dropped.conversation, event_id = %dropped.event_id, "conversation queue full: dropped its oldest mention");
    if let Err(error) = replier
        .notify(&[dropped], "Too many messages are waiting in this conversation; this one was dropped. Please send it again later.")
        .await
    {
        tracing::error!(%error, "cannot store a notice");
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
