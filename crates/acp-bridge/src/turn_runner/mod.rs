//! One turn of one conversation, from lease to reply.
//!
//! Owns everything that happens while a turn is live: the prompt, the
//! stream of the agent's events, and mentions that arrive mid-turn, which
//! the heart hands over as [`Control::Absorb`]. Absorbing tries goose's
//! native steer first (steer framing); when the agent refuses or cannot, it
//! falls back to cancel + merge: cancel the live prompt, keep its batch, and
//! re-prompt once with the batch and the new messages under one framing.
//! While that cancel is under way, later mentions join the pending merge, so
//! a burst costs exactly one cancel.
//!
//! Delivery is confirmed, not assumed: a native steer counts as delivered
//! only when the turn's outcome shows it folded in. Unconfirmed steers, and
//! steers refused because the turn had just ended, go back to the heart for
//! the next turn. Every mention handed to a runner comes back in its report,
//! answered or not: nothing is dropped here.

use std::sync::Arc;
use std::time::Instant;

use acp_client::{
    AcpError, CancelOutcome, ContentBlock, StopReason, TurnError, TurnEvent, TurnOptions, TurnOutcome,
    TurnProgress,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

mod questions;

pub use questions::AskOwner;
use questions::OwnerQuestions;

use crate::framing::{self, Framing};
use crate::mention::{ConversationKey, Mention};
use crate::pool::{Lease, Pool, PoolError};
use crate::reply::Replier;
use crate::telemetry::metrics;

/// A merged re-prompt waits this long without new mentions before it goes
/// out, so that a burst of mentions is merged into one prompt.
const MERGE_QUIET_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);
/// ... but never longer than this in total.
const MERGE_GATHER_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// What the heart tells a live turn.
#[derive(Debug)]
pub enum Control {
    /// Mentions that arrived mid-turn, to be folded in under `framing`.
    Absorb {
        mentions: Vec<Mention>,
        framing: Framing,
    },
    /// The owner's `!cancel`.
    CancelByOwner,
    /// Shutdown past the grace period: stop, leaving the mentions journaled
    /// for the next start.
    Abandon,
}

/// How a turn ended, with every mention it was given.
#[derive(Debug)]
pub struct TurnReport {
    pub conversation: ConversationKey,
    pub turn_id: u64,
    pub end: TurnEnd,
    /// Mentions for the next turn: unconfirmed steers, steers refused
    /// because the turn had ended, merges that missed their turn.
    pub returned: Vec<Mention>,
}

#[derive(Debug)]
pub enum TurnEnd {
    /// The answer is stored in the outbox; the mentions are finished.
    Answered { mentions: Vec<Mention> },
    /// The people were told why there is no answer; the mentions are finished.
    Notified { mentions: Vec<Mention> },
    /// Nothing was answered; the heart retries or gives up.
    Failed {
        mentions: Vec<Mention>,
        failure: TurnFailure,
    },
    /// Cancelled by the owner; the heart tells them.
    CancelledByOwner { mentions: Vec<Mention> },
    /// Stopped at shutdown; the mentions stay pending in the journal.
    Abandoned { mentions: Vec<Mention> },
}

/// Why a turn failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TurnFailure {
    #[error("{0}")]
    Pool(#[from] PoolError),
    #[error("the agent stopped: {0}")]
    Agent(String),
    #[error("the agent went silent")]
    IdleTimeout,
    #[error("the turn ran past its time limit")]
    Deadline,
    #[error("the reply could not be stored: {0}")]
    Store(String),
}

impl TurnFailure {
    /// Worth another attempt (the next may land on a healthy agent).
    pub fn retryable(&self) -> bool {
        !matches!(self, TurnFailure::Deadline)
    }
}

/// Which steer path a turn took (for its closing log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SteerPath {
    None,
    Native,
    Fallback,
}

impl SteerPath {
    fn as_str(self) -> &'static str {
        match self {
            SteerPath::None => "none",
            SteerPath::Native => "native",
            SteerPath::Fallback => "fallback",
        }
    }
}

/// A merge waiting for the live prompt to end.
#[derive(Debug)]
struct PendingMerge {
    framing: Framing,
    mentions: Vec<Mention>,
}

/// What every turn of the daemon shares.
#[derive(Debug, Clone)]
pub struct TurnContext {
    pub pool: Arc<Pool>,
    pub replier: Replier,
    pub options: TurnOptions,
    /// Set with `--permission-policy ask-owner`.
    pub ask: Option<AskOwner>,
}

#[derive(Debug)]
pub struct TurnRunner {
    turn_id: u64,
    conversation: ConversationKey,
    batch: Vec<Mention>,
    pool: Arc<Pool>,
    replier: Replier,
    options: TurnOptions,
    ask: Option<AskOwner>,
    control: mpsc::Receiver<Control>,
    reports: mpsc::Sender<TurnReport>,
    /// Set once the agent answered a steer with -32601: later mid-turn
    /// mentions of this turn go straight to cancel + merge.
    native_steer_unsupported: bool,
    /// Mentions for the next turn, gathered as the turn goes.
    returned: Vec<Mention>,
    path: SteerPath,
}

/// Where a turn reports to and takes orders from.
#[derive(Debug)]
pub struct TurnChannels {
    pub control: mpsc::Receiver<Control>,
    pub reports: mpsc::Sender<TurnReport>,
}

/// The state of one prompt in flight.
#[derive(Debug, Default)]
struct PromptState {
    /// Accepted native steers, with the `messageId` that proves their fold.
    steered: Vec<(Vec<Mention>, String)>,
    merge: Option<PendingMerge>,
    cancel: Option<JoinHandle<Result<CancelOutcome, AcpError>>>,
    owner_cancelled: bool,
    abandoned: bool,
    questions: OwnerQuestions,
}

impl TurnRunner {
    pub fn new(
        turn_id: u64,
        conversation: ConversationKey,
        batch: Vec<Mention>,
        context: TurnContext,
        channels: TurnChannels,
    ) -> Self {
        TurnRunner {
            turn_id,
            conversation,
            batch,
            pool: context.pool,
            replier: context.replier,
            options: context.options,
            ask: context.ask,
            control: channels.control,
            reports: channels.reports,
            native_steer_unsupported: false,
            returned: Vec::new(),
            path: SteerPath::None,
        }
    }

    pub async fn run(mut self) {
        let newest = self.batch.last();
        let span = tracing::info_span!(
            "turn",
            turn_id = self.turn_id,
            conversation = %self.conversation,
            event_id = newest.map(|m| m.event_id.to_hex()).unwrap_or_default(),
            author = newest.map(Mention::author_short).unwrap_or_default(),
            session = tracing::field::Empty,
            run_id = tracing::field::Empty,
        );
        let mut report = self.execute().instrument(span).await;
        report.returned.extend(self.drain_control());
        if self.reports.send(report).await.is_err() {
            tracing::debug!("heart gone before the turn report; mentions stay journaled");
        }
    }

    /// Mentions the heart handed over after the last prompt ended (its
    /// reply can be out before this report is in). Closing first makes later
    /// sends fail, so the heart queues those itself: none is dropped here.
    fn drain_control(&mut self) -> Vec<Mention> {
        self.control.close();
        let mut late = Vec::new();
        while let Ok(control) = self.control.try_recv() {
            if let Control::Absorb { mentions, .. } = control {
                late.extend(mentions);
            }
        }
        if !late.is_empty() {
            tracing::info!(
                mentions = late.len(),
                "mentions arrived as the turn ended; they go to the next turn"
            );
        }
        late
    }

    async fn execute(&mut self) -> TurnReport {
        let batch = std::mem::take(&mut self.batch);
        let queue_wait_ms = batch
            .first()
            .map(|m| {
                nostr_sdk::prelude::Timestamp::now()
                    .as_secs()
                    .saturating_sub(m.accepted_at)
                    * 1000
            })
            .unwrap_or_default();
        let started = Instant::now();
        let lease = match self.pool.lease(&self.conversation).await {
            Ok(lease) => lease,
            Err(error) => {
                tracing::warn!(%error, "no agent for the turn");
                return self.report(
                    TurnEnd::Failed {
                        mentions: batch,
                        failure: error.into(),
                    },
                    Vec::new(),
                );
            }
        };
        tracing::Span::current().record("session", lease.session.as_str());
        let (end, stop) = self.drive(&lease, batch).await;
        let returned = std::mem::take(&mut self.returned);
        self.pool.release(&lease);
        let outcome = end_label(&end);
        metrics::turn_finished(outcome);
        tracing::info!(
            outcome,
            stop_reason = stop.as_ref().map(StopReason::as_str).unwrap_or("none"),
            steer_path = self.path.as_str(),
            queue_wait_ms,
            agent_ms = started.elapsed().as_millis() as u64,
            returned = returned.len(),
            "turn finished"
        );
        self.report(end, returned)
    }

    fn report(&self, end: TurnEnd, returned: Vec<Mention>) -> TurnReport {
        TurnReport {
            conversation: self.conversation.clone(),
            turn_id: self.turn_id,
            end,
            returned,
        }
    }

    /// Prompts, absorbs mid-turn mentions, re-prompts after fallback
    /// merges, and answers.
    async fn drive(&mut self, lease: &Lease, batch: Vec<Mention>) -> (TurnEnd, Option<StopReason>) {
        let mut working_on = batch;
        let mut prompt_text = framing::fresh_prompt(&working_on);
        loop {
            tracing::info!(mentions = working_on.len(), "prompting the agent");
            let turn = self.lease_prompt(lease, &prompt_text).await;
            let mut turn = match turn {
                Ok(turn) => turn,
                Err(failure) => {
                    return (
                        TurnEnd::Failed {
                            mentions: working_on,
                            failure,
                        },
                        None,
                    );
                }
            };
            let mut state = PromptState::default();
            let under = working_on
                .last()
                .cloned()
                .expect("a turn has at least one mention");
            let ended = self.pump(lease, &mut turn, &mut state, &under).await;
            // Questions die with their prompt; held mentions go to the next turn.
            state.questions.cancel_all(self.ask.as_ref()).await;
            self.returned.extend(state.questions.take_held());
            // A cancel still under way is left to finish on its own (it ends
            // with the prompt, or writes its notification at shutdown).
            drop(state.cancel.take());
            // Steers the run folded in are part of this turn's work; the
            // others go back to the queue.
            let folded_ids: Vec<String> = match &ended {
                Ok(outcome) => outcome
                    .steers
                    .iter()
                    .filter(|steer| steer.folded)
                    .map(|steer| steer.accepted.message_id.clone())
                    .collect(),
                Err(_) => Vec::new(),
            };
            for (mentions, message_id) in state.steered.drain(..) {
                if folded_ids.contains(&message_id) {
                    working_on.extend(mentions);
                } else {
                    tracing::info!(%message_id, "steer acknowledged but not folded in; it goes to the next turn");
                    self.returned.extend(mentions);
                }
            }
            if state.abandoned {
                self.returned
                    .extend(state.merge.take().map(|merge| merge.mentions).unwrap_or_default());
                return (TurnEnd::Abandoned { mentions: working_on }, None);
            }
            if state.owner_cancelled {
                self.returned
                    .extend(state.merge.take().map(|merge| merge.mentions).unwrap_or_default());
                return (TurnEnd::CancelledByOwner { mentions: working_on }, None);
            }
            if let Err(TurnError::IdleTimeout(_) | TurnError::DeadlineExceeded(_)) = &ended {
                // The prompt is still running on the agent: stop it, or stop
                // the agent, before the session is used again.
                if lease.client.cancel(&lease.session).await.is_err() {
                    self.pool.discard(lease);
                }
            }
            let outcome = match ended {
                Ok(outcome) => outcome,
                Err(error) => {
                    self.returned
                        .extend(state.merge.take().map(|merge| merge.mentions).unwrap_or_default());
                    return (
                        TurnEnd::Failed {
                            mentions: working_on,
                            failure: failure_of(&error),
                        },
                        None,
                    );
                }
            };
            match state.merge.take() {
                Some(mut merge) if outcome.stop_reason == StopReason::Cancelled => {
                    if self.gather_burst(&mut merge).await {
                        self.returned.extend(merge.mentions);
                        return (TurnEnd::Abandoned { mentions: working_on }, None);
                    }
                    tracing::info!(
                        framing = merge.framing.as_str(),
                        new = merge.mentions.len(),
                        "re-prompting with the merged messages"
                    );
                    prompt_text = framing::merged_prompt(&working_on, &merge.mentions, merge.framing);
                    working_on.extend(merge.mentions);
                    continue;
                }
                Some(merge) => {
                    // The turn ended on its own before the cancel landed: it
                    // answers its batch, the merge becomes the next turn.
                    self.returned.extend(merge.mentions);
                }
                None => {}
            }
            let stop = outcome.stop_reason.clone();
            return (self.conclude(working_on, outcome).await, Some(stop));
        }
    }

    /// Before a merged re-prompt, lets the rest of a burst arrive: mentions
    /// keep joining the merge until none came for [`MERGE_QUIET_PERIOD`]
    /// (at most [`MERGE_GATHER_MAX`]), so a burst costs one cancel and one
    /// re-prompt. Returns true when shutdown abandoned the turn meanwhile.
    async fn gather_burst(&mut self, merge: &mut PendingMerge) -> bool {
        let give_up = tokio::time::Instant::now() + MERGE_GATHER_MAX;
        loop {
            let quiet_until = (tokio::time::Instant::now() + MERGE_QUIET_PERIOD).min(give_up);
            match tokio::time::timeout_at(quiet_until, self.control.recv()).await {
                Ok(Some(Control::Absorb { mentions, .. })) => merge.mentions.extend(mentions),
                Ok(Some(Control::Abandon)) => return true,
                // The owner cancelled what is being merged: the merged
                // prompt is still owed to the people who wrote it.
                Ok(Some(Control::CancelByOwner)) | Ok(None) | Err(_) => return false,
            }
        }
    }

    async fn lease_prompt(&self, lease: &Lease, text: &str) -> Result<acp_client::Turn, TurnFailure> {
        lease
            .client
            .prompt(&lease.session, vec![ContentBlock::text(text)], self.options)
            .await
            .map_err(|error| TurnFailure::Agent(error.to_string()))
    }

    /// Reads one prompt to its end while serving control messages.
    async fn pump(
        &mut self,
        lease: &Lease,
        turn: &mut acp_client::Turn,
        state: &mut PromptState,
        under: &Mention,
    ) -> Result<TurnOutcome, TurnError> {
        let mut control_open = true;
        loop {
            tokio::select! {
                progress = turn.next() => match progress? {
                    TurnProgress::Finished(outcome) => return Ok(outcome),
                    TurnProgress::Event(TurnEvent::PermissionAsked(question)) => match &self.ask {
                        Some(ask) => state.questions.asked(question, under, ask, &self.replier).await,
                        // Not asking the owner: dropping the question answers it `cancelled`.
                        None => drop(question),
                    },
                    TurnProgress::Event(event) => observe(&event),
                },
                resolution = state.questions.resolution() => {
                    if let Some(ask) = &self.ask {
                        state.questions.resolve(resolution, under, ask, &self.replier).await;
                    }
                    let held = state.questions.take_held();
                    if !held.is_empty() {
                        tracing::info!(mentions = held.len(), "delivering the mentions held while the owner was asked");
                        self.absorb(lease, state, held, Framing::Steer).await;
                    }
                }
                control = self.control.recv(), if control_open => match control {
                    Some(Control::Absorb { mentions, framing }) => {
                        self.absorb(lease, state, mentions, framing).await;
                    }
                    Some(Control::CancelByOwner) => {
                        state.owner_cancelled = true;
                        state.questions.cancel_all(self.ask.as_ref()).await;
                        start_cancel(lease, state);
                    }
                    Some(Control::Abandon) => {
                        // Shutdown: ask the agent to stop, but do not wait
                        // for it; the pool kills every agent next.
                        state.abandoned = true;
                        start_cancel(lease, state);
                        // The caller checks `abandoned` before the result.
                        return Err(TurnError::AlreadyFinished);
                    }
                    None => control_open = false,
                },
                cancelled = async { state.cancel.as_mut().expect("guarded").await }, if state.cancel.is_some() => {
                    state.cancel = None;
                    match cancelled {
                        Ok(Ok(_)) => {}
                        Ok(Err(AcpError::CancelTimedOut(..))) => {
                            // The agent ignores cancels: only a kill ends this
                            // prompt (the turn then fails and is retried).
                            self.pool.discard(lease);
                        }
                        Ok(Err(error)) => tracing::warn!(%error, "cancel failed"),
                        Err(_) => {}
                    }
                }
            }
        }
    }

    /// Folds mid-turn mentions into the live prompt.
    async fn absorb(
        &mut self,
        lease: &Lease,
        state: &mut PromptState,
        mentions: Vec<Mention>,
        framing: Framing,
    ) {
        if let Some(merge) = state.merge.as_mut() {
            // A cancel for a merge is already under way: join it (one burst,
            // one cancel).
            merge.mentions.extend(mentions);
            return;
        }
        if state.owner_cancelled || state.abandoned {
            self.returned.extend(mentions);
            return;
        }
        if let Some(question) = state.questions.waiting_on() {
            // A steer cannot reach an agent parked on a question: say so
            // honestly, and deliver it once the owner answered.
            let text = format!(
                "The agent is waiting for the owner to answer a permission question ({question}). It will see your message once that is answered."
            );
            for mention in &mentions {
                if let Err(error) = self.replier.inform(mention, &text).await {
                    tracing::error!(%error, "cannot store the notice");
                }
            }
            tracing::info!(
                mentions = mentions.len(),
                "mid-turn mentions held until the owner answers"
            );
            state.questions.hold(mentions);
            return;
        }
        if framing == Framing::Steer {
            match lease
                .client
                .steer(&lease.session, &framing::steer_text(&mentions))
                .await
            {
                Ok(accepted) => {
                    metrics::steer("native");
                    self.path = SteerPath::Native;
                    tracing::info!(message_id = %accepted.message_id, mentions = mentions.len(), "steered into the live turn");
                    state.steered.push((mentions, accepted.message_id));
                    return;
                }
                Err(refusal) if refusal.turn_already_over() => {
                    metrics::steer("refused");
                    tracing::info!(%refusal, "steer refused because the turn was ending; queued for the next turn");
                    self.returned.extend(mentions);
                    return;
                }
                Err(refusal) => {
                    tracing::info!(%refusal, "native steer not possible; falling back to cancel + merge");
                    self.native_steer_unsupported = refusal == acp_client::SteerRefusal::MethodNotFound;
                }
            }
        }
        metrics::steer("fallback");
        self.path = SteerPath::Fallback;
        state.merge = Some(PendingMerge { framing, mentions });
        start_cancel(lease, state);
    }

    /// Turns a finished prompt into an answer or a notice.
    async fn conclude(&self, mentions: Vec<Mention>, outcome: TurnOutcome) -> TurnEnd {
        if let Some(run_id) = &outcome.run_id {
            tracing::Span::current().record("run_id", run_id.as_str());
        }
        let stored = match outcome.stop_reason {
            StopReason::Refusal => self
                .replier
                .notify(&mentions, "The agent declined to answer this.")
                .await
                .map(|_| TurnEnd::Notified {
                    mentions: mentions.clone(),
                }),
            StopReason::Cancelled => {
                return TurnEnd::Failed {
                    mentions,
                    failure: TurnFailure::Agent("the agent cancelled the turn by itself".into()),
                };
            }
            ref reason => {
                if matches!(reason, StopReason::MaxTokens | StopReason::MaxTurnRequests) {
                    // The session is full or stuck: the next turn starts fresh.
                    self.pool.rotate(&self.conversation);
                }
                let text = if outcome.message.trim().is_empty() {
                    "(The agent finished without writing an answer.)".to_owned()
                } else {
                    outcome.message.clone()
                };
                self.replier
                    .answer(&mentions, &text)
                    .await
                    .map(|_| TurnEnd::Answered {
                        mentions: mentions.clone(),
                    })
            }
        };
        match stored {
            Ok(end) => {
                for mention in &mentions {
                    let waited = nostr_sdk::prelude::Timestamp::now()
                        .as_secs()
                        .saturating_sub(mention.created_at.as_secs());
                    metrics::mention_to_reply(waited as f64);
                }
                end
            }
            Err(error) => TurnEnd::Failed {
                mentions,
                failure: TurnFailure::Store(error.to_string()),
            },
        }
    }
}

fn start_cancel(lease: &Lease, state: &mut PromptState) {
    if state.cancel.is_none() {
        let client = lease.client.clone();
        let session = lease.session.clone();
        state.cancel = Some(tokio::spawn(async move { client.cancel(&session).await }));
    }
}

fn observe(event: &TurnEvent) {
    match event {
        TurnEvent::RunStarted { run_id } => {
            tracing::Span::current().record("run_id", run_id.as_str());
            tracing::debug!(%run_id, "agent run started");
        }
        TurnEvent::ToolCall(call) => {
            tracing::debug!(tool = call.title.as_deref().unwrap_or("?"), "tool call")
        }
        TurnEvent::PermissionAnswered { request, chosen } => tracing::info!(
            tool = request.title().unwrap_or("?"),
            chosen = chosen
                .as_ref()
                .map(|option| option.kind.as_str())
                .unwrap_or("cancelled"),
            "permission answered by policy"
        ),
        _ => {}
    }
}

fn failure_of(error: &TurnError) -> TurnFailure {
    match error {
        TurnError::IdleTimeout(_) => TurnFailure::IdleTimeout,
        TurnError::DeadlineExceeded(_) => TurnFailure::Deadline,
        other => TurnFailure::Agent(other.to_string()),
    }
}

fn end_label(end: &TurnEnd) -> &'static str {
    match end {
        TurnEnd::Answered { .. } => "answered",
        TurnEnd::Notified { .. } => "notified",
        TurnEnd::Failed { .. } => "failed",
        TurnEnd::CancelledByOwner { .. } => "cancelled_by_owner",
        TurnEnd::Abandoned { .. } => "abandoned",
    }
}
