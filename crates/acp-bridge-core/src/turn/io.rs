//! The turn machine's vocabulary: what it is told ([`Input`]), what it asks
//! for ([`Action`]), and how a turn ends ([`TurnEnd`]). Owns no behaviour:
//! the machine (`super`) decides, the driver and the heart act.

use std::time::Instant;

use acp_protocol::StopReason;
use nostr::prelude::EventId;

use super::questions::{Answer, Asked, QuestionTicket};
use super::usage::TurnUsage;
use crate::media_refs::MediaRef;
use crate::mention::Mention;
use crate::prompt::Framing;
use crate::slash::SlashCommand;

/// Names one steer request within its turn.
pub type SteerTicket = u64;

/// What happened, as the machine learns it.
#[derive(Debug)]
pub enum Input {
    /// An agent and the conversation's session are ready.
    Leased,
    LeaseFailed(LeaseFailure),
    /// Mentions that arrived mid-turn, to be folded in under `framing`.
    Absorb {
        mentions: Vec<Mention>,
        framing: Framing,
    },
    SteerAnswered {
        ticket: SteerTicket,
        answer: SteerAnswer,
    },
    /// The cancel of the live prompt settled (the prompt's own end comes
    /// as [`Input::PromptEnded`]).
    CancelSettled(CancelSettled),
    PromptEnded(Result<PromptEnd, TurnFailure>),
    /// The session does not offer the turn's slash command: the notice its
    /// author is given, which ends the turn.
    CommandRefused(String),
    /// The agent asked a question: permission or a form (the driver holds
    /// its handle).
    QuestionAsked(Asked),
    /// The question is posted as `event`; `None`: it could not be posted
    /// (the driver answered the agent `cancelled`).
    QuestionPosted {
        ticket: QuestionTicket,
        event: Option<EventId>,
    },
    /// The agent withdrew its question (`$/cancel_request`); the driver has
    /// already let go of it.
    QuestionWithdrawn {
        ticket: QuestionTicket,
    },
    /// The owner's reply to the open question (the heart checked it is the
    /// owner's and that it answers this turn's question).
    OwnerReply(String),
    /// The owner's `!cancel`.
    OwnerCancel,
    /// The turn's spend reached `--budget-turn-cap`; the notice its
    /// people are given.
    CapReached(String),
    /// Shutdown past the grace period: stop, leaving the mentions journaled
    /// for the next start.
    Abandon,
    /// The answer or notice is stored (or could not be).
    Published(Result<(), String>),
    /// The timer set by [`DriverAction::SetTimer`] fired.
    Timer,
}

/// How the agent took a steer, whatever the method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteerAnswer {
    /// In the live turn, which answers it before it ends (`_session/steering`).
    Delivered,
    /// Queued for the live run; delivered once the turn shows this
    /// `message_id` folded in (goose).
    AwaitingFold { message_id: String },
    /// The turn ended before the steer could land: it belongs to the next turn.
    TurnOver(String),
    /// The agent cannot steer this turn: fall back to cancel + merge.
    Unsupported(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelSettled {
    Done,
    /// The agent ignores cancels: only a kill ends the prompt.
    TimedOut,
    Failed(String),
}

/// How a prompt ended when the agent answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEnd {
    pub stop_reason: StopReason,
    /// What the reply carries (per `--reply-content`).
    pub message: String,
    /// `messageId`s of the steers the run folded in.
    pub folded: Vec<String>,
    pub usage: TurnUsage,
}

/// Why the pool could not lease an agent, as a turn needs to know it: the
/// words the person and the log are told, and what may help. The driver
/// makes one of the pool's own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct LeaseFailure {
    pub reason: String,
    pub remedy: Remedy,
}

/// What may help after a lease failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Another attempt later: the next may land on a healthy agent.
    Retry,
    /// Only the operator (a misconfigured agent, or a breaker that holds
    /// agents back): telling the person at once beats retrying.
    Operator,
    /// Neither (the daemon is stopping, no identity is free).
    Nothing,
}

/// Why a turn failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TurnFailure {
    #[error("{0}")]
    Pool(#[from] LeaseFailure),
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
        match self {
            TurnFailure::Pool(error) => error.remedy == Remedy::Retry,
            TurnFailure::Deadline => false,
            _ => true,
        }
    }

    /// Only the operator can fix it (a misconfigured agent, or a breaker
    /// that holds agents back): telling the person at once beats retrying.
    pub fn needs_operator(&self) -> bool {
        matches!(self, TurnFailure::Pool(error) if error.remedy == Remedy::Operator)
    }
}

/// What the turn's answer is published as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publication {
    Answer,
    Notice,
}

/// What the machine asks for, by who acts on it. One list keeps the order
/// between the two sides (the driver's stop comes before the heart's
/// [`HeartAction::Finished`]); each side matches its own enum whole.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// For the turn's driver, which the heart forwards untouched.
    Driver(DriverAction),
    /// For the heart itself.
    Heart(HeartAction),
}

impl From<DriverAction> for Action {
    fn from(action: DriverAction) -> Self {
        Action::Driver(action)
    }
}

impl From<HeartAction> for Action {
    fn from(action: HeartAction) -> Self {
        Action::Heart(action)
    }
}

/// What the driver performs: the agent's work, the owner's questions, the
/// publishing of the turn's answer, the machine's timer.
#[derive(Debug, PartialEq)]
pub enum DriverAction {
    Lease,
    /// Prompt the agent with this text and the images of these mentions.
    Prompt(String, Vec<MediaRef>),
    /// Run the agent's slash command: prompt with its text alone when the
    /// session offers it, else report [`Input::CommandRefused`].
    AgentCommand(SlashCommand),
    /// Steer the live prompt with this text and the media of its mentions.
    Steer {
        ticket: SteerTicket,
        text: String,
        media: Vec<MediaRef>,
    },
    /// Cancel the live prompt (once per prompt).
    Cancel,
    /// A timed-out prompt still runs on the agent: cancel it, or discard
    /// the agent, before the session is used again.
    StopRunaway,
    /// Kill the agent (it ignored a cancel).
    Discard,
    /// The session is full or stuck: the next turn starts a fresh one.
    RotateSession,
    PostQuestion {
        ticket: QuestionTicket,
        under: Box<Mention>,
        text: String,
    },
    AnswerQuestion {
        ticket: QuestionTicket,
        answer: Answer,
    },
    /// Timed out: reject a permission (never allow), decline a form.
    RejectQuestion {
        ticket: QuestionTicket,
    },
    /// Every question of the prompt is answered `cancelled` (a form: `cancel`).
    CancelQuestions,
    /// Store and publish the turn's answer or notice; the agent's part of
    /// the turn is over, so the driver releases the agent and stops.
    Publish {
        mentions: Vec<Mention>,
        text: String,
        publication: Publication,
    },
    SetTimer(Option<Instant>),
    /// Shutdown: ask the agent to stop without waiting, release, stop.
    Abandon,
    /// The turn is over for the driver: release the agent and stop (a
    /// turn that published has no driver left to tell).
    Release,
}

/// What the heart routes: notices to people, mentions back to their
/// conversation, and the turn's end.
#[derive(Debug, PartialEq)]
pub enum HeartAction {
    /// Tell the author of `mention` something, without finishing it.
    Inform { mention: Box<Mention>, text: String },
    /// Tell the owner something about a question asked under `under`
    /// (timed out, withdrawn), where the question was asked: the thread,
    /// or the owner's DM for a DM with someone else, who was never asked.
    QuestionNotice { under: Box<Mention>, text: String },
    /// Mentions the turn cannot take (it is concluding): back to the
    /// conversation's queue.
    Requeue(Vec<Mention>),
    /// A steer went this way; the heart counts it.
    Steered(SteerOutcome),
    /// The turn is over; the heart counts it (if it ran) and settles its
    /// mentions.
    Finished(TurnEnd),
}

/// Which way a steer went, as its metric counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerOutcome {
    /// The agent took it into the live turn (delivered, or queued for a fold).
    Native,
    /// The agent cannot steer: cancel + merge (each time a merge is begun
    /// or joined by a steer the agent refused).
    Fallback,
    /// The turn was ending: the steer goes to the next turn.
    Refused,
}

impl SteerOutcome {
    pub fn label(self) -> &'static str {
        match self {
            SteerOutcome::Native => "native",
            SteerOutcome::Fallback => "fallback",
            SteerOutcome::Refused => "refused",
        }
    }
}

/// How a turn ended, with every mention it held.
#[derive(Debug, PartialEq)]
pub struct TurnEnd {
    pub outcome: Outcome,
    /// The mentions the turn worked on (answered, notified, failed, cancelled).
    pub work: Vec<Mention>,
    /// Mentions for the next turn: unconfirmed steers, steers the ended
    /// turn refused, merges that missed their turn, held mentions.
    pub returned: Vec<Mention>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The answer is stored in the outbox; the work is finished.
    Answered,
    /// The people were told why there is no answer; the work is finished.
    Notified,
    /// Nothing was answered; the heart retries or gives up.
    Failed(TurnFailure),
    /// Cancelled by the owner; the heart tells them.
    CancelledByOwner,
    /// Cancelled at `--budget-turn-cap`; the heart gives the work up with
    /// this notice.
    Capped(String),
    /// Stopped at shutdown; the mentions stay pending in the journal.
    Abandoned,
}

impl Outcome {
    /// Whether the turn ran: one that never got an agent (its lease
    /// failed) is neither logged nor counted as a finished turn.
    pub fn ran(&self) -> bool {
        !matches!(self, Outcome::Failed(TurnFailure::Pool(_)))
    }

    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Notified => "notified",
            Outcome::Failed(_) => "failed",
            Outcome::CancelledByOwner => "cancelled_by_owner",
            Outcome::Capped(_) => "capped",
            Outcome::Abandoned => "abandoned",
        }
    }
}
