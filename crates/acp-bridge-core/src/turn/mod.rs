//! One turn of one conversation, as a synchronous state machine.
//!
//! Owns every mention the turn holds, each with its role (in the prompt,
//! steering, steered and awaiting proof of delivery, waiting for a merge,
//! held behind an owner question, or deferred to the next turn), and the
//! turn's phase. Inputs are what happened (the lease, the agent's answers,
//! mid-turn mentions, the owner's controls, the clock); outputs are
//! [`Action`]s, each for the one who acts on it: what to write to the agent
//! and what to publish go to the driver ([`DriverAction`]); which mentions
//! go back to the conversation, whom to tell, and which way each steer went
//! go to the heart ([`HeartAction`]). It performs no I/O, reads no clock
//! (`now` comes in) and records no metrics (the heart counts what it
//! reports), so every path is a plain unit test; the driver
//! (`acp-bridge`'s `heart::driver`) performs the actions and the heart
//! feeds it inputs.
//!
//! The invariant that matters: every mention handed to a turn leaves it in
//! exactly one [`HeartAction::Finished`] (as the turn's work or returned for
//! the next turn) or in an [`HeartAction::Requeue`]. The end of a turn
//! partitions the entries by role in one place (`TurnMachine::finish`),
//! so no exit can forget one.
//!
//! Steering is behavioural and method-agnostic: the machine asks for a
//! steer and learns whether it was delivered, will be proven by a fold, the
//! turn was already over, or the agent cannot steer. How the steer is
//! written (goose's method today) is the driver's per-agent strategy. When
//! the agent cannot steer, the fallback is cancel + merge: cancel the live
//! prompt and re-prompt once with its work and the new messages under one
//! framing; mentions that arrive while that cancel is under way join the
//! merge, and a short quiet period gathers the rest of a burst, so a burst
//! costs one cancel.

mod form;
mod io;
mod questions;
mod usage;

use std::time::{Duration, Instant};

use acp_protocol::StopReason;
use nostr::prelude::EventId;

use crate::media_refs::MediaRef;
use crate::mention::Mention;
use crate::prompt::{self, Framing};
use crate::slash::{SlashCommand, is_command};
pub use io::{
    Action, CancelSettled, DriverAction, HeartAction, Input, LeaseFailure, Outcome, PromptEnd, Publication,
    Remedy, SteerAnswer, SteerOutcome, SteerTicket, TurnEnd, TurnFailure,
};
pub use questions::{Answer, Ask, Asked, QuestionTicket, Routed, summary};
use questions::{Asking, MAX_QUESTIONS_PER_TURN, Questions};
pub use usage::TurnUsage;

/// A merged re-prompt waits this long without new mentions before it goes
/// out, so that a burst of mentions is merged into one prompt.
pub const MERGE_QUIET_PERIOD: Duration = Duration::from_millis(250);
/// ... but never longer than this in total.
pub const MERGE_GATHER_MAX: Duration = Duration::from_secs(2);

/// A mention's place in the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// In the prompt the agent is working on.
    Prompted,
    /// A steer carrying it was written; the agent has not answered.
    Steering(SteerTicket),
    /// The agent queued the steer; delivered once the turn folds `message_id`.
    Steered { message_id: String },
    /// Waiting for the cancel that lets it join a merged re-prompt.
    Merging,
    /// Held while the owner answers a question; steered in after.
    Held,
    /// For the next turn.
    Deferred,
}

#[derive(Debug)]
struct Entry {
    mention: Mention,
    role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Leasing,
    Prompting,
    /// The cancelled prompt ended; the merge gathers the rest of its burst.
    Gathering {
        quiet_until: Instant,
        give_up_at: Instant,
    },
    Publishing(Publication),
    Done,
}

/// What the turn was told to do beside its work.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Intent {
    Work,
    OwnerCancelled,
    /// Cancelled at the per-turn cap; the notice its people are given.
    Capped(String),
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

/// What a turn starts from.
#[derive(Debug)]
pub struct TurnStart {
    pub batch: Vec<Mention>,
    /// How long the oldest mention waited for this turn (for the log).
    pub queue_wait_ms: u64,
    /// `--permission-timeout`.
    pub question_timeout: Duration,
}

#[derive(Debug)]
pub struct TurnMachine {
    entries: Vec<Entry>,
    phase: Phase,
    /// The phase the turn ended from (a published turn's driver is gone).
    phase_before_done: Option<Phase>,
    intent: Intent,
    /// A cancel was asked for the live prompt.
    cancel_asked: bool,
    /// The framing of the pending merge, once a fallback began.
    merge: Option<Framing>,
    questions: Questions,
    timer: Option<Instant>,
    next_ticket: u64,
    path: SteerPath,
    stop_reason: Option<StopReason>,
    usage: TurnUsage,
    started: Instant,
    /// The `now` of the input being handled.
    now: Instant,
    queue_wait_ms: u64,
}

impl TurnMachine {
    /// A turn for `start.batch` (oldest first, at least one mention), and
    /// its driver's first action: the lease.
    pub fn start(start: TurnStart, now: Instant) -> (Self, DriverAction) {
        debug_assert!(!start.batch.is_empty(), "a turn has at least one mention");
        let machine = TurnMachine {
            entries: start
                .batch
                .into_iter()
                .map(|mention| Entry {
                    mention,
                    role: Role::Prompted,
                })
                .collect(),
            phase: Phase::Leasing,
            phase_before_done: None,
            intent: Intent::Work,
            cancel_asked: false,
            merge: None,
            questions: Questions::new(start.question_timeout),
            timer: None,
            next_ticket: 0,
            path: SteerPath::None,
            stop_reason: None,
            usage: TurnUsage::default(),
            started: now,
            now,
            queue_wait_ms: start.queue_wait_ms,
        };
        (machine, DriverAction::Lease)
    }

    /// Feeds one input; returns what to do, in order.
    pub fn handle(&mut self, input: Input, now: Instant) -> Vec<Action> {
        self.now = now;
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            // A finished turn holds nothing; mentions sent its way go back.
            if let Input::Absorb { mentions, .. } = input {
                out.push(HeartAction::Requeue(mentions).into());
            }
            return out;
        }
        match input {
            Input::Leased => self.on_leased(&mut out),
            Input::LeaseFailed(error) => {
                tracing::warn!(%error, "no agent for the turn");
                self.finish(Outcome::Failed(error.into()), &mut out);
            }
            Input::Absorb { mentions, framing } => self.absorb(mentions, framing, now, &mut out),
            Input::SteerAnswered { ticket, answer } => self.on_steer_answered(ticket, answer, &mut out),
            Input::CancelSettled(settled) => match settled {
                CancelSettled::Done => {}
                CancelSettled::TimedOut => out.push(DriverAction::Discard.into()),
                CancelSettled::Failed(error) => tracing::warn!(%error, "cancel failed"),
            },
            Input::PromptEnded(ended) => self.on_prompt_ended(ended, now, &mut out),
            Input::CommandRefused(notice) => self.on_command_refused(notice, &mut out),
            Input::QuestionAsked(asked) => self.on_question_asked(asked, &mut out),
            Input::QuestionPosted { ticket, event } => match event {
                Some(event) => self.questions.posted(ticket, event, now),
                None => self.close_question(ticket, &mut out),
            },
            Input::QuestionWithdrawn { ticket } => {
                if let Some(asked) = self.questions.withdraw(ticket) {
                    tracing::info!(ticket, "the agent withdrew its question");
                    if let Some(under) = self.under() {
                        let text = format!(
                            "The agent no longer needs an answer to its question ({}); no need to reply.",
                            asked.summary
                        );
                        out.push(HeartAction::QuestionNotice { under, text }.into());
                    }
                    self.close_question(ticket, &mut out);
                }
            }
            Input::OwnerReply(text) => self.on_owner_reply(&text, &mut out),
            Input::OwnerCancel => self.on_owner_cancel(&mut out),
            Input::CapReached(notice) => self.on_cap_reached(notice, &mut out),
            Input::Abandon => self.finish(Outcome::Abandoned, &mut out),
            Input::Published(stored) => {
                let Phase::Publishing(publication) = self.phase else {
                    return out;
                };
                let outcome = match (stored, publication) {
                    (Ok(()), Publication::Answer) => Outcome::Answered,
                    (Ok(()), Publication::Notice) => Outcome::Notified,
                    (Err(error), _) => Outcome::Failed(TurnFailure::Store(error)),
                };
                self.finish(outcome, &mut out);
            }
            Input::Timer => self.on_timer(now, &mut out),
        }
        self.keep_timer(&mut out);
        out
    }

    /// The mention the agent works on now, under which a message it posts
    /// mid-turn threads (`post_message`): the newest one in its prompt or
    /// folded into it, else the turn's first.
    pub fn working_on(&self) -> &Mention {
        let prompted = self
            .entries
            .iter()
            .rev()
            .find(|entry| matches!(entry.role, Role::Prompted | Role::Steered { .. }));
        &prompted.unwrap_or(&self.entries[0]).mention
    }

    /// When the turn started (its lease was asked for).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The question this turn waits on, for `!status` and steer notices.
    pub fn waiting_on(&self) -> Option<String> {
        self.questions.waiting_on()
    }

    /// The open question's id once posted, as the owner's answer
    /// references it; `None` once the turn is over (its questions died
    /// with it).
    pub fn question_event(&self) -> Option<EventId> {
        match self.phase {
            Phase::Done => None,
            _ => self.questions.open_event(),
        }
    }

    /// Whether the turn waits for its agent (the lease), which may take a
    /// while the first time; its mentions still wait meanwhile.
    pub fn agent_starting(&self) -> bool {
        self.phase == Phase::Leasing
    }

    /// The turn's mention `id`, whatever its role.
    pub fn mention(&self, id: &EventId) -> Option<&Mention> {
        self.entries
            .iter()
            .map(|entry| &entry.mention)
            .find(|mention| mention.event_id == *id)
    }

    /// Whether this turn's questions are asked in a DM (the owner's own, or
    /// the owner's about a DM with someone else).
    pub fn asks_privately(&self) -> bool {
        self.entries
            .first()
            .is_some_and(|entry| entry.mention.thread.is_direct())
    }

    /// Maps the owner's reply onto the open question without acting on it
    /// (the heart tells the owner what it understood).
    pub fn route(&self, text: &str) -> Option<Routed> {
        self.questions.route(text).map(|(_, routed)| routed)
    }

    fn on_leased(&mut self, out: &mut Vec<Action>) {
        if self.phase != Phase::Leasing {
            return;
        }
        if self.intent == Intent::OwnerCancelled {
            // Cancelled before anything was asked of the agent.
            return self.finish(Outcome::CancelledByOwner, out);
        }
        if let Some(command) = self.command() {
            tracing::info!(command = %command.name, "running the agent's slash command");
            self.phase = Phase::Prompting;
            self.cancel_asked = false;
            return out.push(DriverAction::AgentCommand(command).into());
        }
        let prompted = self.mentions_in(&Role::Prompted);
        self.prompt(prompt::fresh_prompt(&prompted), media_of(&prompted), out);
    }

    /// The agent's slash command this turn runs, if it runs one: a
    /// command is always a turn's whole batch (see `slash`).
    fn command(&self) -> Option<SlashCommand> {
        let mut prompted = self.entries.iter().filter(|entry| entry.role == Role::Prompted);
        match (prompted.next(), prompted.next()) {
            (Some(only), None) => SlashCommand::of(&only.mention),
            _ => None,
        }
    }

    /// The session does not offer the turn's command: its notice ends it.
    fn on_command_refused(&mut self, notice: String, out: &mut Vec<Action>) {
        if self.phase != Phase::Prompting {
            return;
        }
        tracing::info!("the agent does not offer the slash command: not sent");
        self.phase = Phase::Publishing(Publication::Notice);
        out.push(
            DriverAction::Publish {
                mentions: self.mentions_in(&Role::Prompted),
                text: notice,
                publication: Publication::Notice,
            }
            .into(),
        );
    }

    /// Sets aside for the next turn the mentions that cannot join this
    /// one: a slash command (a turn of its own), and anything while this
    /// turn runs one (its prompt is the command alone). Returns the rest.
    fn defer_commands(&mut self, mentions: Vec<Mention>) -> Vec<Mention> {
        let runs_command = self.command().is_some();
        let (deferred, rest): (Vec<Mention>, Vec<Mention>) = mentions
            .into_iter()
            .partition(|mention| runs_command || is_command(mention));
        if !deferred.is_empty() {
            tracing::info!(
                mentions = deferred.len(),
                "slash command kept for a turn of its own"
            );
            self.add(deferred, Role::Deferred);
        }
        rest
    }

    /// Prompts the agent with `text` and the images `media`.
    fn prompt(&mut self, text: String, media: Vec<MediaRef>, out: &mut Vec<Action>) {
        tracing::info!(mentions = self.count(&Role::Prompted), "prompting the agent");
        self.phase = Phase::Prompting;
        self.cancel_asked = false;
        out.push(DriverAction::Prompt(text, media).into());
    }

    fn absorb(&mut self, mentions: Vec<Mention>, framing: Framing, now: Instant, out: &mut Vec<Action>) {
        if matches!(self.phase, Phase::Publishing(_) | Phase::Done) {
            return out.push(HeartAction::Requeue(mentions).into());
        }
        let mentions = self.defer_commands(mentions);
        if mentions.is_empty() {
            return;
        }
        match self.phase {
            // Nothing was asked of the agent yet: they join the first prompt.
            Phase::Leasing => self.add(mentions, Role::Prompted),
            Phase::Prompting => self.absorb_live(mentions, framing, out),
            Phase::Gathering { give_up_at, .. } => {
                self.add(mentions, Role::Merging);
                self.phase = Phase::Gathering {
                    quiet_until: (now + MERGE_QUIET_PERIOD).min(give_up_at),
                    give_up_at,
                };
            }
            Phase::Publishing(_) | Phase::Done => out.push(HeartAction::Requeue(mentions).into()),
        }
    }

    /// Folds mid-turn mentions into the live prompt.
    fn absorb_live(&mut self, mentions: Vec<Mention>, framing: Framing, out: &mut Vec<Action>) {
        if self.intent != Intent::Work {
            return self.add(mentions, Role::Deferred);
        }
        if self.merge.is_some() {
            // A cancel for a merge is already under way: join it (one
            // burst, one cancel).
            return self.add(mentions, Role::Merging);
        }
        if let Some(question) = self.questions.waiting_on() {
            // A steer cannot reach an agent parked on a question: say so
            // honestly, and deliver it once the owner answered. The owner's
            // own message was not taken as the answer (it did not reply to
            // the question, and more than one may be open): say how to answer.
            tracing::info!(
                mentions = mentions.len(),
                "mid-turn mentions held until the owner answers"
            );
            for mention in &mentions {
                let how = if mention.from_owner {
                    " (to answer it, reply to the question itself)"
                } else {
                    ""
                };
                let text = format!(
                    "The agent is waiting for the owner to answer {question}{how}. It will see your message once that is answered."
                );
                out.push(
                    HeartAction::Inform {
                        mention: Box::new(mention.clone()),
                        text,
                    }
                    .into(),
                );
            }
            return self.add(mentions, Role::Held);
        }
        match framing {
            Framing::Steer => {
                self.next_ticket += 1;
                let ticket = self.next_ticket;
                out.push(
                    DriverAction::Steer {
                        ticket,
                        text: prompt::steer_text(&mentions),
                        media: media_of(&mentions),
                    }
                    .into(),
                );
                self.add(mentions, Role::Steering(ticket));
            }
            Framing::Interrupt => self.fall_back(mentions, framing, out),
        }
    }

    /// Cancel + merge: the mentions wait for the live prompt's cancel.
    fn fall_back(&mut self, mentions: Vec<Mention>, framing: Framing, out: &mut Vec<Action>) {
        self.add(mentions, Role::Merging);
        self.begin_merge(framing, out);
    }

    /// Starts (or joins) the cancel the merge waits for.
    fn begin_merge(&mut self, framing: Framing, out: &mut Vec<Action>) {
        out.push(HeartAction::Steered(SteerOutcome::Fallback).into());
        self.path = SteerPath::Fallback;
        self.merge.get_or_insert(framing);
        self.cancel(out);
    }

    fn cancel(&mut self, out: &mut Vec<Action>) {
        if !self.cancel_asked {
            self.cancel_asked = true;
            out.push(DriverAction::Cancel.into());
        }
    }

    fn on_steer_answered(&mut self, ticket: SteerTicket, answer: SteerAnswer, out: &mut Vec<Action>) {
        let steering = Role::Steering(ticket);
        if self.count(&steering) == 0 {
            return; // the prompt ended first; its end deferred them
        }
        match answer {
            SteerAnswer::Delivered => {
                out.push(HeartAction::Steered(SteerOutcome::Native).into());
                self.path = SteerPath::Native;
                tracing::info!(mentions = self.count(&steering), "steered into the live turn");
                self.relabel(&steering, Role::Prompted);
            }
            SteerAnswer::AwaitingFold { message_id } => {
                out.push(HeartAction::Steered(SteerOutcome::Native).into());
                self.path = SteerPath::Native;
                tracing::info!(%message_id, mentions = self.count(&steering), "steered into the live turn");
                self.relabel(&steering, Role::Steered { message_id });
            }
            SteerAnswer::TurnOver(refusal) => {
                out.push(HeartAction::Steered(SteerOutcome::Refused).into());
                tracing::info!(%refusal, "steer refused because the turn was ending; queued for the next turn");
                self.relabel(&steering, Role::Deferred);
            }
            SteerAnswer::Unsupported(refusal) => {
                tracing::info!(%refusal, "native steer not possible; falling back to cancel + merge");
                // Relabelled in place: mentions that joined the merge while
                // this steer was under way came after them, and the merge
                // keeps arrival order (the reply threads under the newest).
                if self.intent != Intent::Work {
                    self.relabel(&steering, Role::Deferred);
                } else {
                    self.relabel(&steering, Role::Merging);
                    self.begin_merge(Framing::Steer, out);
                }
            }
        }
    }

    fn on_prompt_ended(
        &mut self,
        ended: Result<PromptEnd, TurnFailure>,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        if self.phase != Phase::Prompting {
            return;
        }
        // Questions die with their prompt; held mentions go to the next turn.
        if self.questions.clear() {
            out.push(DriverAction::CancelQuestions.into());
        }
        self.relabel(&Role::Held, Role::Deferred);
        // Steers the run folded in are part of this turn's work; the others
        // go to the next turn.
        let folded: &[String] = ended.as_ref().map_or(&[], |end| end.folded.as_slice());
        for entry in &mut self.entries {
            match &entry.role {
                Role::Steered { message_id } if folded.contains(message_id) => entry.role = Role::Prompted,
                Role::Steered { message_id } => {
                    tracing::info!(%message_id, "steer acknowledged but not folded in; it goes to the next turn");
                    entry.role = Role::Deferred;
                }
                Role::Steering(_) => entry.role = Role::Deferred,
                _ => {}
            }
        }
        if self.intent == Intent::OwnerCancelled {
            return self.finish(Outcome::CancelledByOwner, out);
        }
        if let Intent::Capped(notice) = &self.intent {
            self.stop_reason = ended.as_ref().ok().map(|end| end.stop_reason.clone());
            return self.finish(Outcome::Capped(notice.clone()), out);
        }
        let end = match ended {
            Ok(end) => end,
            Err(failure) => {
                if matches!(failure, TurnFailure::IdleTimeout | TurnFailure::Deadline) {
                    out.push(DriverAction::StopRunaway.into());
                }
                return self.finish(Outcome::Failed(failure), out);
            }
        };
        self.stop_reason = Some(end.stop_reason.clone());
        self.usage.add(end.usage.clone());
        if self.merge.is_some() {
            if end.stop_reason == StopReason::Cancelled {
                self.phase = Phase::Gathering {
                    quiet_until: now + MERGE_QUIET_PERIOD,
                    give_up_at: now + MERGE_GATHER_MAX,
                };
                return;
            }
            // The prompt ended on its own before the cancel landed: it
            // answers its work, the merge becomes the next turn.
            self.merge = None;
            self.relabel(&Role::Merging, Role::Deferred);
        }
        self.conclude(end, out);
    }

    /// Turns a finished prompt into an answer or a notice.
    fn conclude(&mut self, end: PromptEnd, out: &mut Vec<Action>) {
        let (text, publication) = match end.stop_reason {
            StopReason::Refusal => (
                "The agent declined to answer this.".to_owned(),
                Publication::Notice,
            ),
            StopReason::Cancelled => {
                let failure = TurnFailure::Agent("the agent cancelled the turn by itself".into());
                return self.finish(Outcome::Failed(failure), out);
            }
            reason => {
                if matches!(reason, StopReason::MaxTokens | StopReason::MaxTurnRequests) {
                    out.push(DriverAction::RotateSession.into());
                }
                let text = match self.command() {
                    // Many commands act and print nothing (claude's `/compact`).
                    Some(command) if end.message.trim().is_empty() => {
                        format!("(Ran /{}: the agent wrote nothing back.)", command.name)
                    }
                    _ if end.message.trim().is_empty() => {
                        "(The agent finished without writing an answer.)".to_owned()
                    }
                    _ => end.message,
                };
                (text, Publication::Answer)
            }
        };
        self.phase = Phase::Publishing(publication);
        out.push(
            DriverAction::Publish {
                mentions: self.mentions_in(&Role::Prompted),
                text,
                publication,
            }
            .into(),
        );
    }

    fn on_timer(&mut self, now: Instant, out: &mut Vec<Action>) {
        if let Some(asked) = self.questions.expired(now) {
            let (ticket, text) = (asked.ticket, self.questions.timeout_text(asked));
            tracing::warn!(
                ticket,
                "no answer from the owner in time: rejected (permission) or declined (form)"
            );
            out.push(DriverAction::RejectQuestion { ticket }.into());
            if let Some(under) = self.under() {
                out.push(HeartAction::QuestionNotice { under, text }.into());
            }
            self.close_question(ticket, out);
        }
        if let Phase::Gathering {
            quiet_until,
            give_up_at,
        } = self.phase
            && now >= quiet_until.min(give_up_at)
        {
            self.reprompt_merged(out);
        }
    }

    fn reprompt_merged(&mut self, out: &mut Vec<Action>) {
        let framing = self.merge.take().unwrap_or(Framing::Steer);
        let new = self.mentions_in(&Role::Merging);
        tracing::info!(
            framing = framing.as_str(),
            new = new.len(),
            "re-prompting with the merged messages"
        );
        let text = prompt::merged_prompt(&self.mentions_in(&Role::Prompted), &new, framing);
        self.relabel(&Role::Merging, Role::Prompted);
        // The session saw the earlier mentions' images with their prompt.
        self.prompt(text, media_of(&new), out);
    }

    fn on_question_asked(&mut self, asked: Asked, out: &mut Vec<Action>) {
        if self.phase != Phase::Prompting || self.intent != Intent::Work {
            // Nobody will answer it: the driver answers it `cancelled`.
            out.push(DriverAction::CancelQuestions.into());
            return;
        }
        let ticket = asked.ticket;
        match self.questions.asked(asked) {
            Asking::Post(asked, text) => {
                if let Some(under) = self.under() {
                    out.push(
                        DriverAction::PostQuestion {
                            ticket: asked.ticket,
                            under,
                            text,
                        }
                        .into(),
                    );
                }
            }
            Asking::Wait => {}
            Asking::Refuse { first } => {
                tracing::warn!(
                    ticket,
                    limit = MAX_QUESTIONS_PER_TURN,
                    "the agent asked more questions than a turn may put to the owner: refused"
                );
                out.push(DriverAction::RejectQuestion { ticket }.into());
                if first && let Some(under) = self.under() {
                    let text = format!(
                        "The agent has asked {MAX_QUESTIONS_PER_TURN} questions in this turn; its further questions are refused (permission rejected, form declined) without asking you."
                    );
                    out.push(HeartAction::QuestionNotice { under, text }.into());
                }
            }
        }
    }

    fn on_owner_reply(&mut self, text: &str, out: &mut Vec<Action>) {
        if let Some((ticket, Routed::Answered(answer))) = self.questions.route(text) {
            let question = self.questions.open_event().map(|event| event.to_hex());
            let kind = match &answer {
                Answer::Option(option) => option.kind.as_str().to_owned(),
                Answer::Form(_) => "form".to_owned(),
            };
            tracing::info!(
                question = question.unwrap_or_default(),
                kind,
                "the owner answered the agent's question"
            );
            out.push(DriverAction::AnswerQuestion { ticket, answer }.into());
            self.close_question(ticket, out);
        }
    }

    /// Closes a question; posts the next, or delivers the held mentions
    /// once nothing is open.
    fn close_question(&mut self, ticket: QuestionTicket, out: &mut Vec<Action>) {
        if let Some((next, text)) = self.questions.close(ticket) {
            if let Some(under) = self.under() {
                out.push(
                    DriverAction::PostQuestion {
                        ticket: next.ticket,
                        under,
                        text,
                    }
                    .into(),
                );
            }
            return;
        }
        let held = self.take(&Role::Held);
        if !held.is_empty() {
            tracing::info!(
                mentions = held.len(),
                "delivering the mentions held while the owner was asked"
            );
            self.absorb_live(held, Framing::Steer, out);
        }
    }

    fn on_owner_cancel(&mut self, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Leasing => self.intent = Intent::OwnerCancelled,
            // Already being cancelled at the cap: that is what it is told.
            Phase::Prompting if matches!(self.intent, Intent::Capped(_)) => {}
            Phase::Prompting => {
                self.intent = Intent::OwnerCancelled;
                if self.questions.clear() {
                    out.push(DriverAction::CancelQuestions.into());
                }
                self.cancel(out);
            }
            // The owner cancelled what is being merged: the merged prompt
            // is still owed to the people who wrote it.
            Phase::Gathering { .. } => self.reprompt_merged(out),
            Phase::Publishing(_) | Phase::Done => {}
        }
    }

    /// The turn's spend reached `--budget-turn-cap`: cancel the live
    /// prompt and end with `notice` once it stopped. Between prompts (a
    /// merge gathering) it ends now; a turn publishing its answer has
    /// nothing left to stop.
    fn on_cap_reached(&mut self, notice: String, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Prompting if self.intent == Intent::Work => {
                self.intent = Intent::Capped(notice);
                if self.questions.clear() {
                    out.push(DriverAction::CancelQuestions.into());
                }
                self.cancel(out);
            }
            Phase::Gathering { .. } => self.finish(Outcome::Capped(notice), out),
            Phase::Leasing | Phase::Prompting | Phase::Publishing(_) | Phase::Done => {}
        }
    }

    /// Ends the turn: the entries in the prompt are its work, every other
    /// entry goes back for the next turn.
    fn finish(&mut self, outcome: Outcome, out: &mut Vec<Action>) {
        self.phase_before_done = Some(self.phase);
        self.phase = Phase::Done;
        let (work, returned): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|entry| entry.role == Role::Prompted);
        let work: Vec<Mention> = work.into_iter().map(|entry| entry.mention).collect();
        let returned: Vec<Mention> = returned.into_iter().map(|entry| entry.mention).collect();
        // A turn that never got an agent never ran: only the lease failure is logged.
        if outcome.ran() {
            tracing::info!(
                outcome = outcome.label(),
                stop_reason = self
                    .stop_reason
                    .as_ref()
                    .map(StopReason::as_str)
                    .unwrap_or("none"),
                steer_path = self.path.as_str(),
                queue_wait_ms = self.queue_wait_ms,
                agent_ms = self.now.duration_since(self.started).as_millis() as u64,
                returned = returned.len(),
                tokens_in = self.usage.input_tokens,
                tokens_out = self.usage.output_tokens,
                context_used = self.usage.context_used,
                context_size = self.usage.context_size,
                cost = self.usage.cost,
                "turn finished"
            );
        }
        if !matches!(self.phase_before_done, Some(Phase::Publishing(_))) {
            let stop = if outcome == Outcome::Abandoned {
                DriverAction::Abandon
            } else {
                DriverAction::Release
            };
            out.push(stop.into());
        }
        out.push(
            HeartAction::Finished(TurnEnd {
                outcome,
                work,
                returned,
            })
            .into(),
        );
    }

    /// Keeps the driver's timer on the machine's next deadline.
    fn keep_timer(&mut self, out: &mut Vec<Action>) {
        let deadline = match self.phase {
            Phase::Gathering {
                quiet_until,
                give_up_at,
            } => Some(quiet_until.min(give_up_at)),
            Phase::Prompting => self.questions.deadline(),
            _ => None,
        };
        if deadline != self.timer && self.phase != Phase::Done {
            self.timer = deadline;
            out.push(DriverAction::SetTimer(deadline).into());
        }
    }

    /// The newest mention of the work: questions and notices thread under
    /// it. Boxed, as the actions carry it: a mention is large beside the
    /// rest of any action.
    fn under(&self) -> Option<Box<Mention>> {
        self.entries
            .iter()
            .rev()
            .find(|entry| entry.role == Role::Prompted)
            .map(|entry| Box::new(entry.mention.clone()))
    }

    fn add(&mut self, mentions: Vec<Mention>, role: Role) {
        self.entries.extend(mentions.into_iter().map(|mention| Entry {
            mention,
            role: role.clone(),
        }));
    }

    fn count(&self, role: &Role) -> usize {
        self.entries.iter().filter(|entry| entry.role == *role).count()
    }

    fn mentions_in(&self, role: &Role) -> Vec<Mention> {
        self.entries
            .iter()
            .filter(|entry| entry.role == *role)
            .map(|entry| entry.mention.clone())
            .collect()
    }

    fn relabel(&mut self, from: &Role, to: Role) {
        for entry in self.entries.iter_mut().filter(|entry| entry.role == *from) {
            entry.role = to.clone();
        }
    }

    fn take(&mut self, role: &Role) -> Vec<Mention> {
        let (taken, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|entry| entry.role == *role);
        self.entries = kept;
        taken.into_iter().map(|entry| entry.mention).collect()
    }
}

/// The images `mentions` carry, in order.
fn media_of(mentions: &[Mention]) -> Vec<MediaRef> {
    mentions
        .iter()
        .flat_map(|mention| mention.media.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests;
