//! One prompt turn as the caller sees it: a stream of typed events that ends
//! in an outcome or a typed error.
//!
//! The turn enforces its own time limits while the caller reads it:
//! - the idle timeout restarts with every event of the turn, and is
//!   suspended while a permission question is open (the agent is waiting on
//!   us then, not the other way round);
//! - the hard deadline counts from the prompt and is checked before anything
//!   else on every poll, so an agent that streams without pause cannot
//!   starve it.
//!
//! A timed-out turn is still running on the agent: the caller decides
//! whether to cancel it or to kill the agent.
//!
//! The agent's text is bounded in memory by [`TurnOptions::max_text_bytes`]:
//! past the bound chunks are still read (the turn ends normally) but their
//! text is dropped from the first byte that does not fit on (cut on a UTF-8
//! boundary), and the outcome says that it was truncated. The bound holds
//! for the whole text and, separately, for the text of the messages that
//! can still be the answer: a message that turns out to be narration gives
//! its text back to that budget (it stays in the whole text), so a long
//! narration cannot crowd out the answer.
//!
//! What the outcome says (text, messages, usage, run id) is gathered as the
//! agent's updates are routed, in a [`crate::transcript::Transcript`] the
//! connection keeps with the live turn, not as the caller reads the events:
//! events the caller reads too slowly are not all delivered (the connection
//! bounds them, see
//! [`crate::connection::TURN_EVENTS_CAPACITY`]), and the outcome must not
//! depend on that.

use std::sync::Arc;
use std::time::Duration;

use acp_protocol::{PermissionPolicy, SteerDelivery, StopReason, Usage};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};

use crate::TurnEvent;
use crate::connection::{Connection, PromptCompletion};
use crate::error::TurnError;
use crate::transcript::AgentMessage;

/// Default idle timeout of a turn.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(900);
/// Default hard deadline of a turn.
pub const DEFAULT_MAX_TURN_DURATION: Duration = Duration::from_secs(7200);
/// Default bound on the agent's text kept in memory per turn: far more
/// than a chat answer needs (some sixty pages), little memory (the whole
/// text and the answer are bounded apart, so at most twice this per turn).
pub const DEFAULT_MAX_TEXT_BYTES: usize = 256 * 1024;

/// Limits and policy of one turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnOptions {
    pub idle_timeout: Duration,
    pub max_duration: Duration,
    pub permission: PermissionPolicy,
    /// The most of the agent's text kept, in bytes (see the module doc).
    pub max_text_bytes: usize,
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_duration: DEFAULT_MAX_TURN_DURATION,
            permission: PermissionPolicy::default(),
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
        }
    }
}

/// How a turn ended when the agent answered the prompt.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    pub stop_reason: StopReason,
    /// The assistant's message chunks of this turn, concatenated, up to
    /// [`TurnOptions::max_text_bytes`].
    pub message: String,
    /// `message` lost text at the bound.
    pub message_truncated: bool,
    /// `messages` lost text at the bound (text that could have been the
    /// answer when it came).
    pub messages_truncated: bool,
    /// The same chunks, as the agent's messages.
    pub messages: Vec<AgentMessage>,
    /// The last usage the agent reported during the turn.
    pub usage: Option<Usage>,
    /// The last run id the agent advertised during the turn.
    pub run_id: Option<String>,
    /// Every steer the agent accepted during this turn, with whether the
    /// turn folded it in.
    pub steers: Vec<SteerDelivery>,
    /// The raw prompt result (usage and other extensions).
    pub result: Value,
    pub duration: Duration,
}

impl TurnOutcome {
    /// What the agent answered: its messages that no tool call or plan
    /// followed, a blank line between two; the whole text when every
    /// message was narration (the turn ended on a tool's work).
    pub fn answer(&self) -> String {
        let answers: Vec<&str> = self
            .messages
            .iter()
            .filter(|message| !message.narration)
            .map(|message| message.text.trim_end_matches('\n'))
            .filter(|text| !text.trim().is_empty())
            .collect();
        if answers.is_empty() {
            return self.message.clone();
        }
        answers.join("\n\n")
    }

    /// Whether [`answer`](Self::answer) lost text at the turn's text bound.
    pub fn answer_truncated(&self) -> bool {
        let answered = self
            .messages
            .iter()
            .any(|message| !message.narration && !message.text.trim().is_empty());
        if answered {
            self.messages_truncated
        } else {
            self.message_truncated
        }
    }

    /// Accepted steers the run never folded in; they must be delivered again.
    pub fn unconfirmed_steers(&self) -> impl Iterator<Item = &SteerDelivery> {
        self.steers.iter().filter(|steer| !steer.folded)
    }
}

/// One step of a turn.
#[derive(Debug)]
pub enum TurnProgress {
    Event(TurnEvent),
    Finished(TurnOutcome),
}

/// A prompt in flight. Read it with [`Turn::next`] until it finishes.
#[derive(Debug)]
pub struct Turn {
    conn: Arc<Connection>,
    events: mpsc::Receiver<TurnEvent>,
    events_open: bool,
    completion: oneshot::Receiver<PromptCompletion>,
    open_questions: watch::Receiver<usize>,
    questions_open: bool,
    options: TurnOptions,
    started: Instant,
    last_activity: Instant,
    finished: bool,
}

impl Turn {
    pub(crate) fn new(
        conn: Arc<Connection>,
        events: mpsc::Receiver<TurnEvent>,
        completion: oneshot::Receiver<PromptCompletion>,
        open_questions: watch::Receiver<usize>,
        options: TurnOptions,
    ) -> Self {
        let now = Instant::now();
        Turn {
            conn,
            events,
            events_open: true,
            completion,
            open_questions,
            questions_open: true,
            options,
            started: now,
            last_activity: now,
            finished: false,
        }
    }

    /// The next event, or the outcome once the agent answered the prompt.
    /// Events streamed before the answer are always delivered before it.
    pub async fn next(&mut self) -> Result<TurnProgress, TurnError> {
        if self.finished {
            return Err(TurnError::AlreadyFinished);
        }
        let deadline = self.started + self.options.max_duration;
        loop {
            let waiting_on_us = *self.open_questions.borrow() > 0;
            let idle_at = self.last_activity + self.options.idle_timeout;
            tokio::select! {
                biased;
                () = sleep_until(deadline) => {
                    self.finished = true;
                    return Err(TurnError::DeadlineExceeded(self.options.max_duration));
                }
                event = self.events.recv(), if self.events_open => match event {
                    Some(event) => {
                        self.last_activity = Instant::now();
                        return Ok(TurnProgress::Event(event));
                    }
                    None => self.events_open = false,
                },
                completion = &mut self.completion => {
                    self.finished = true;
                    return self.finish(completion.ok());
                }
                changed = self.open_questions.changed(), if self.questions_open => {
                    self.last_activity = Instant::now();
                    if changed.is_err() {
                        self.questions_open = false;
                    }
                }
                () = sleep_until(idle_at), if !waiting_on_us => {
                    self.finished = true;
                    return Err(TurnError::IdleTimeout(self.options.idle_timeout));
                }
            }
        }
    }

    /// Reads the turn to its end, discarding the events.
    pub async fn finish_quietly(mut self) -> Result<TurnOutcome, TurnError> {
        loop {
            if let TurnProgress::Finished(outcome) = self.next().await? {
                return Ok(outcome);
            }
        }
    }

    fn finish(&mut self, completion: Option<PromptCompletion>) -> Result<TurnProgress, TurnError> {
        // No completion means the connection closed under the turn.
        let Some(completion) = completion else {
            return Err(TurnError::AgentExited(self.conn.exit_info()));
        };
        let result = completion.result.map_err(TurnError::Rpc)?;
        let stop_reason = result
            .get("stopReason")
            .and_then(Value::as_str)
            .map(StopReason::parse)
            .ok_or_else(|| TurnError::MalformedResult(format!("no stopReason in {result}")))?;
        let transcript = completion.transcript;
        Ok(TurnProgress::Finished(TurnOutcome {
            stop_reason,
            message: transcript.message,
            message_truncated: transcript.message_truncated,
            messages_truncated: transcript.messages_truncated,
            messages: transcript.messages,
            usage: transcript.usage,
            run_id: transcript.run_id,
            steers: completion.steers,
            result,
            duration: self.started.elapsed(),
        }))
    }
}
