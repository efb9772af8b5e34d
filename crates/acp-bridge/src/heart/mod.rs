//! The heart: accepted mentions become agent turns.
//!
//! Owns every conversation's live state on one task, without locks: one
//! [`Conversation`](acp_bridge_core::conversations) per key holds its waiting mentions and
//! its state (idle, backing off, running a turn); a running turn is a
//! synchronous [`TurnMachine`] (the core's `turn`) that holds the turn's mentions with
//! their roles. The heart feeds each machine its inputs (mid-turn mentions
//! through the mode gate, owner commands, the owner's answers to its
//! questions as [`question_replies`] routes them, the agents' calls of the
//! bridge's MCP tools as [`tools`] carries them out, and what the turn's
//! driver reports) and routes the actions that come out: agent work to the
//! turn's [`driver`], mentions back to their conversation, notices to
//! [`notices`]. It never waits on anything slow: sends to drivers and the
//! pool never block, notices go out on tasks of their own.
//!
//! A delegated task on the pool is a turn like any, of a conversation of
//! its own, whose answer goes back to the delegating conversation (see
//! [`tasks`]).
//!
//! Every mention the heart takes ends in a reply, a merge into a reply, or a
//! notice (a task's: its result handed back); a failed turn is retried with backoff, then given up with a
//! notice. Shutdown: the intake stops first; turns in flight get the grace
//! period, then are abandoned (their mentions stay pending in the journal
//! and resume at the next start).

pub(crate) mod args;
mod command_desk;
mod controls;
mod driver;
mod forgetting;
mod notices;
mod progress;
mod question_replies;
mod steer_strategy;
mod tasks;
mod tool_desk;
mod usage;
mod wait_notices;
// Satellites of this wing (docs/architecture.md, "Wings").
pub(crate) mod commands;
pub(crate) mod profiles;
pub(crate) mod schedule;

use std::time::{Duration, Instant};

use nostr_sdk::prelude::Timestamp;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use acp_bridge_core::conversations::{Conversations, Retry, Running};
use acp_bridge_core::mention::{CommandCall, ConversationKey, Intent, Mention};
use acp_bridge_core::mode_gate::{Decision, ModeGate};
use acp_bridge_core::turn::{Action, HeartAction, Input, Outcome, Routed, TurnEnd, TurnMachine, TurnStart};
pub(crate) use driver::TurnServices;
pub(crate) use forgetting::Forgetting;

use crate::base::backoff::Backoff;
use crate::base::deadline::sleep_until;
use crate::intake::inbound::Inbound;
use crate::state::ledger::Ledger;
use crate::state::store::LeftOver;
use crate::telemetry::metrics;
use crate::tools::{self, ToolRequest};
use driver::{AnswerTo, DriverLink, Report};
use notices::Notices;
use question_replies::{ClosedQuestions, QuestionReply, Venue};
use wait_notices::NoticeBudget;

/// Attempts of one mention before it is given up with a notice.
pub(crate) const MAX_TURN_ATTEMPTS: u32 = 3;
const RETRY_BACKOFF_MIN: Duration = Duration::from_secs(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Reports waiting from turn drivers; a driver waits when it is full.
const REPORT_QUEUE: usize = 1024;

/// Steer counters for `!status`.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    turns_started: u64,
    absorbed: u64,
    queued_mid_turn: u64,
    /// Calls of the bridge's MCP tools (see [`tools`]).
    tool_calls: u64,
}

/// What becomes of a turn's work once the turn ended.
#[derive(Debug)]
enum AfterTurn {
    /// Nothing more to decide: the turn answered, notified, was cancelled
    /// or abandoned, or failed while draining (its work stays journaled).
    Settled,
    /// It failed in a way worth another attempt: the work goes back to the
    /// front of the queue, and the conversation waits until the retry.
    RetryLater(Retry),
    /// It failed for good: the people are told why, in `notice`.
    GiveUp { notice: String },
}

impl AfterTurn {
    /// The retry the conversation waits for, if any.
    fn retry(&self) -> Option<&Retry> {
        match self {
            AfterTurn::RetryLater(retry) => Some(retry),
            AfterTurn::Settled | AfterTurn::GiveUp { .. } => None,
        }
    }
}

/// What the heart is configured with.
#[derive(Debug, Clone)]
pub(crate) struct HeartSettings {
    pub mode_gate: ModeGate,
    /// The schedules: `!every`, `!at`, `!unschedule`, and their next runs
    /// for `!schedules` and `!status` (`None`: no scheduler, for want of an
    /// owner, hence of anyone to give those commands).
    pub schedules: Option<crate::heart::schedule::Planner>,
    /// Turns in flight at most (agents × turns per agent).
    pub capacity: usize,
    /// `--permission-timeout`.
    pub question_timeout: Duration,
    /// `--cancel-timeout`: how long an abandoned turn may take to stop.
    pub cancel_timeout: Duration,
    /// `--wait-notice-after` (`None`: off).
    pub wait_notice_after: Option<Duration>,
    /// `--shard`: the conversations this replica answers.
    pub shard: crate::policy::shard::Shard,
    /// Which shard asked each question in the owner's DM (the intake
    /// learns it from the copies of the questions).
    pub question_askers: crate::policy::shard::QuestionAskers,
}

#[derive(Debug)]
pub(crate) struct Heart {
    conversations: Conversations<DriverLink>,
    services: TurnServices,
    ledger: Ledger,
    notices: Notices,
    settings: HeartSettings,
    next_turn_id: u64,
    counters: Counters,
    reports_tx: mpsc::Sender<Report>,
    reports_rx: mpsc::Receiver<Report>,
    /// Shutting down: nothing new starts, nothing is retried.
    draining: bool,
    /// Drivers of turns abandoned at shutdown, to be waited for.
    abandoned: Vec<DriverLink>,
    /// How many waiting notices may go out (their facts are the
    /// conversations').
    wait_notices: NoticeBudget,
    /// Questions posted and since closed: a reply to one is told so.
    closed_questions: ClosedQuestions,
    /// Messages each conversation's agent may still post mid-turn
    /// (`post_message`; see [`tools`]).
    tool_posts: crate::policy::rate_limit::RateLimiter<ConversationKey>,
    /// Thread reads each conversation's agent may still make
    /// (`read_thread`: each is a relay query; see [`tools`]).
    tool_reads: crate::policy::rate_limit::RateLimiter<ConversationKey>,
    /// Tasks the agents delegated (`delegate`; see [`tasks`]).
    tasks: tasks::Tasks,
}

impl Heart {
    pub(crate) fn new(services: TurnServices, ledger: Ledger, settings: HeartSettings) -> Self {
        let (reports_tx, reports_rx) = mpsc::channel(REPORT_QUEUE);
        let tasks = tasks::Tasks::new(&ledger);
        Heart {
            conversations: Conversations::new(settings.wait_notice_after),
            notices: Notices::new(services.replier.clone()),
            wait_notices: NoticeBudget::default(),
            services,
            ledger,
            settings,
            next_turn_id: 0,
            counters: Counters::default(),
            reports_tx,
            reports_rx,
            draining: false,
            abandoned: Vec::new(),
            closed_questions: ClosedQuestions::default(),
            tool_posts: tools::tool_budget(),
            tool_reads: tools::tool_budget(),
            tasks,
        }
    }

    /// Takes up what the last run left: permission questions it posted died
    /// with their turns (their threads are told so; the resumed mention will
    /// ask again), and the journal's unfinished mentions are queued again.
    pub(crate) fn resume(&mut self) {
        self.expire_stale_questions();
        let mut resumed = 0;
        let mut page = self.ledger.pending_page(None);
        loop {
            let (mentions, next) = page;
            resumed += mentions.len();
            for mention in mentions {
                // A task's conversation is its delegating one's, for shards.
                let conversation = match &mention.intent {
                    Intent::Task { parent, .. } => parent,
                    _ => &mention.conversation,
                };
                self.settings.shard.log_if_moved(conversation.as_str());
                self.resume_one(mention);
            }
            match next {
                Some(cursor) => page = self.ledger.pending_page(Some(cursor)),
                None => break,
            }
        }
        if resumed > 0 {
            tracing::info!(
                mentions = resumed,
                "resuming mentions accepted before the last stop"
            );
        }
    }

    /// A mention accepted before the last stop becomes what it was meant
    /// to be: a command runs now (`!cancel` finds nothing to cancel and
    /// says so), a notice is sent, an answer to a question that died with
    /// the last run is told so; only a turn is queued.
    fn resume_one(&mut self, mention: Mention) {
        match mention.intent.clone() {
            Intent::Turn | Intent::Scheduled { .. } => self.enqueue(mention),
            Intent::Task { task, parent } => self.resume_task(mention, &task, parent),
            Intent::TaskResult { .. } => self.requeue(mention),
            Intent::Command(command) => self.on_command(mention, command),
            Intent::Notice(text) => self.notices.notify(vec![mention], text),
            Intent::Answer => self.notices.notify(
                vec![mention],
                "Your answer came for a question of a turn that the bridge's restart ended; if the agent still needs it, it will ask again.",
            ),
        }
    }

    /// Runs until `stop` is cancelled, then drains (see the module doc).
    /// `tool_requests` are the calls of the bridge's MCP tools.
    pub(crate) async fn run(
        mut self,
        mut inbound: mpsc::Receiver<Inbound>,
        mut tool_requests: mpsc::Receiver<ToolRequest>,
        stop: CancellationToken,
        grace: Duration,
    ) {
        let mut inbound_open = true;
        loop {
            self.dispatch();
            self.tell_waiting(Instant::now());
            let wake = self.next_wake();
            tokio::select! {
                () = stop.cancelled() => break,
                received = inbound.recv(), if inbound_open => match received {
                    Some(Inbound::Mention(mention)) => self.on_mention(mention),
                    Some(Inbound::Command { mention, command }) => self.on_command(mention, command),
                    None => inbound_open = false,
                },
                Some(report) = self.reports_rx.recv() => self.on_report(report),
                Some(request) = tool_requests.recv() => self.on_tool_request(request),
                Some(news) = self.tasks.news.recv() => self.on_task_news(news),
                () = sleep_until(wake.map(Into::into)) => self.conversations.wake(Instant::now()),
            }
        }
        self.drain(grace, tool_requests).await;
    }

    fn on_mention(&mut self, mention: Mention) {
        if self.sibling_result(&mention) {
            return;
        }
        match self.question_reply(&mention) {
            QuestionReply::Answers(key) => self.on_answer(key, mention),
            QuestionReply::Closed => self.on_closed_question(mention),
            QuestionReply::Mention => self.take_mention(mention),
        }
    }

    /// A mention that answers no question: queued, or handed to its
    /// conversation's turn in flight by the mode gate.
    fn take_mention(&mut self, mention: Mention) {
        let key = mention.conversation.clone();
        if self.conversations.running(&key).is_none() {
            return self.enqueue(mention);
        }
        match self.settings.mode_gate.decide(&mention) {
            Decision::Queue => {
                self.counters.queued_mid_turn += 1;
                // The owner's mid-turn mention is a steer: no waiting notice.
                if mention.from_owner {
                    self.requeue(mention);
                } else {
                    self.enqueue(mention);
                }
            }
            Decision::Drop => self.notices.give_up(
                vec![mention],
                "I am busy with this conversation and set to drop messages that arrive meanwhile; please send it again when I have answered.".to_owned(),
            ),
            Decision::Absorb(framing) => {
                // Folded into a turn, a mention is work as a turn's is:
                // it passes the budget's check before it reaches the agent.
                if let Some(refusal) = self.budget_refusal(&mention) {
                    return self.refuse_over_budget(vec![(mention, refusal)]);
                }
                self.counters.absorbed += 1;
                let mentions = vec![mention];
                self.step(&key, Input::Absorb { mentions, framing });
            }
        }
    }

    /// Which question of the turns in flight `mention` answers, if any
    /// (see [`question_replies`]).
    fn question_reply(&self, mention: &Mention) -> QuestionReply {
        let shard = self.settings.shard;
        let venue = Venue {
            owns_conversation: shard.owns(mention.conversation.as_str()),
            asked_elsewhere: self.settings.question_askers.another_may_be_open(
                shard,
                self.settings.question_timeout,
                Instant::now(),
            ),
        };
        let turns = self
            .conversations
            .running_turns()
            .map(|(key, running)| (key, &running.turn));
        question_replies::route(mention, turns, &self.closed_questions, venue)
    }

    /// The owner's answer to the open question (permission or form) of the
    /// turn of `key`. A reply to the question that does not fit it gets a
    /// correction; an untagged DM that does not fit is no answer at all,
    /// but a message like any other.
    fn on_answer(&mut self, key: ConversationKey, reply: Mention) {
        let routed = self
            .conversations
            .running(&key)
            .and_then(|running| running.turn.route(&reply.content));
        let text = match routed {
            Some(Routed::Answered(answer)) => format!("Answered the agent: {}.", answer.describe()),
            Some(Routed::Unrecognized { correction }) if reply.replies_to.is_some() => correction,
            Some(Routed::Unrecognized { .. }) | None => return self.take_mention(reply),
        };
        let mut reply = reply;
        reply.intent = Intent::Answer;
        if let Err(error) = self.ledger.reclassify(&reply) {
            tracing::warn!(event_id = %reply.event_id, %error, "cannot journal that a mention is an answer");
        }
        self.step(&key, Input::OwnerReply(reply.content.clone()));
        self.notices.notify(vec![reply], text);
    }

    /// The owner replied to a question that is closed: told so, and neither
    /// applied to another question nor prompted (it was meant as an answer).
    fn on_closed_question(&mut self, reply: Mention) {
        tracing::info!(
            conversation = %reply.conversation, event_id = %reply.event_id,
            question = reply.replies_to.map(|id| id.to_hex()).unwrap_or_default(),
            "the owner replied to a question that is closed: not applied to another"
        );
        let text = "That question is closed (answered, timed out, withdrawn, or its turn ended), so your reply was not applied to it or to any other question. If the agent still needs an answer, it asks again.";
        let mut reply = reply;
        reply.intent = Intent::Notice(text.to_owned());
        if let Err(error) = self.ledger.reclassify(&reply) {
            tracing::warn!(event_id = %reply.event_id, %error, "cannot journal that a mention is a notice");
        }
        self.notices.notify(vec![reply], text);
    }

    /// Runs an owner command (see `commands`) with what the heart lends
    /// it, and answers the owner.
    fn on_command(&mut self, mention: Mention, call: CommandCall) {
        tracing::info!(conversation = %mention.conversation, command = call.name.as_str(), "owner command");
        let mut desk = command_desk::CommandDesk {
            heart: self,
            mention: &mention,
            later: None,
        };
        let answer = crate::heart::commands::apply(&call, &mut desk);
        match desk.later.take() {
            Some(work) => {
                let notices = self.notices.clone();
                tokio::spawn(async move { notices.notify(vec![mention], work.await) });
            }
            None => self.notices.notify(vec![mention], answer),
        }
    }

    /// The conversation's next turn starts on a fresh session (`!rotate`,
    /// `!agent` switching): now, or once its turn in flight has ended,
    /// which keeps its session until then. Its queue, tasks and tool
    /// limits are the conversation's, not the session's, and stay.
    fn rotate_conversation(&mut self, key: &ConversationKey) {
        match self.conversations.running_mut(key) {
            Some(running) => running.rotate_after = true,
            None => self.services.forgetting.rotate(key),
        }
    }

    fn on_report(&mut self, report: Report) {
        let current = self
            .conversations
            .running(&report.conversation)
            .is_some_and(|running| running.turn_id == report.turn_id);
        if current {
            self.step(&report.conversation, report.input);
        }
    }

    /// Feeds the conversation's turn one input, inside the turn's span, and
    /// routes what comes out.
    fn step(&mut self, key: &ConversationKey, input: Input) {
        let now = Instant::now();
        let stepped = self.conversations.step(key, input, now, |running, input| {
            let asked = running.turn.question_event();
            let actions = {
                let _span = running.link.span().clone().entered();
                running.turn.handle(input, now)
            };
            let closed = asked.filter(|asked| running.turn.question_event() != Some(*asked));
            (closed, actions)
        });
        let Some((closed, actions)) = stepped else {
            return;
        };
        if let Some(asked) = closed {
            self.closed_questions.record(asked);
        }
        self.apply(key, actions);
    }

    fn apply(&mut self, key: &ConversationKey, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Driver(for_driver) => {
                    if let Some(running) = self.conversations.running(key) {
                        running.link.send(for_driver);
                    }
                }
                Action::Heart(HeartAction::Inform { mention, text }) => self.notices.inform(*mention, text),
                Action::Heart(HeartAction::QuestionNotice { under, text }) => {
                    self.notices.about_question(*under, self.services.owner, text)
                }
                Action::Heart(HeartAction::Requeue(mentions)) => {
                    mentions.into_iter().for_each(|mention| self.requeue(mention))
                }
                Action::Heart(HeartAction::Steered(outcome)) => metrics::steer(outcome.label()),
                Action::Heart(HeartAction::Finished(end)) => self.on_turn_end(key, end),
            }
        }
    }

    fn on_turn_end(&mut self, key: &ConversationKey, end: TurnEnd) {
        let TurnEnd {
            outcome,
            work,
            returned,
        } = end;
        if outcome.ran() {
            metrics::turn_finished(outcome.label());
        }
        // A task's turn ends the task (see `tasks`): never retried or
        // told, its result goes back to its delegator.
        let task = self.tasks.is_task(key);
        let after = if task {
            AfterTurn::Settled
        } else {
            self.after_turn(key, &outcome, &work)
        };
        let retry = after.retry().cloned();
        let Some(ended) = self.conversations.end_turn(key, retry) else {
            return;
        };
        if ended.rotate_after {
            self.rotate_conversation(key);
        }
        if task {
            self.task_turn_ended(key, &outcome);
        } else if outcome == Outcome::CancelledByOwner {
            self.notices.cancelled_by_owner(work.clone());
        } else if let Outcome::Capped(notice) = &outcome {
            metrics::budget_turn_capped();
            self.notices.give_up(work.clone(), notice.clone());
            self.stop_tasks_of_capped_turn(key, ended.turn_id, notice);
        }
        if self.draining {
            // Failed and returned mentions stay pending in the journal.
            if outcome == Outcome::Abandoned {
                self.abandoned.push(ended.link);
            }
            return;
        }
        for dropped in self.conversations.push_front(returned) {
            self.overflowed(dropped);
        }
        match after {
            AfterTurn::RetryLater(_) => {
                for dropped in self.conversations.push_front(work) {
                    self.overflowed(dropped);
                }
            }
            AfterTurn::GiveUp { notice } => self.notices.give_up(work, notice),
            AfterTurn::Settled => {}
        }
        metrics::queue_depth(self.conversations.waiting());
    }

    /// What becomes of `work` after its turn ended with `outcome`: a failure
    /// is retried after a backoff while attempts remain and it is worth
    /// one, else given up with a notice; while draining, failed work stays
    /// pending in the journal.
    fn after_turn(&self, key: &ConversationKey, outcome: &Outcome, work: &[Mention]) -> AfterTurn {
        let failure = match outcome {
            Outcome::Failed(failure) if !self.draining => failure,
            _ => return AfterTurn::Settled,
        };
        let attempts = self.ledger.attempted(work, MAX_TURN_ATTEMPTS);
        if failure.retryable() && attempts < MAX_TURN_ATTEMPTS {
            let delay = retry_delay(attempts);
            tracing::warn!(conversation = %key, attempts, retry_in_ms = delay.as_millis() as u64, %failure, "turn failed; will retry");
            return AfterTurn::RetryLater(Retry {
                at: Instant::now() + delay,
                after: failure.to_string(),
            });
        }
        let notice = if failure.needs_operator() {
            tracing::error!(conversation = %key, %failure, "turn failed on the agent's setup; not retried");
            format!(
                "Sorry, I cannot answer this: {failure}. The agent's setup needs the operator; trying again will not help until then."
            )
        } else {
            tracing::error!(conversation = %key, attempts, %failure, "turn failed; giving up");
            format!("Sorry, I could not answer this: {failure}. Giving up after {attempts} attempt(s).")
        };
        AfterTurn::GiveUp { notice }
    }

    /// Starts turns while there is capacity and work.
    fn dispatch(&mut self) {
        if self.draining {
            return;
        }
        // Delegated tasks' turns hold turn slots as any (see `tasks`).
        while self.conversations.running_count() < self.settings.capacity {
            let now = crate::state::store::sql_now();
            let (budget, tasks) = (&self.services.budget, &self.tasks);
            let refused = self.conversations.refuse_next(|mention| {
                let billed = tasks.billed(&mention.conversation);
                budget.refusal(&mention.author, mention.standing(), &billed, now)
            });
            if !refused.is_empty() {
                self.refuse_over_budget(refused);
                continue;
            }
            let started = self.conversations.start_next(|key, batch| {
                let delegator = self.tasks.delegator(key);
                if let Some(newest) = batch.last() {
                    let budget = &self.services.budget;
                    let billed = delegator.as_ref().map_or(key, |task| &task.parent);
                    budget.turn_started(billed, &newest.author, now);
                    // A task's people are its delegating turn's, told there.
                    let warnings = match delegator {
                        Some(_) => Vec::new(),
                        None => budget.warnings(&newest.author, newest.standing(), key, now),
                    };
                    for warning in warnings {
                        self.notices.inform(newest.clone(), warning);
                    }
                }
                self.next_turn_id += 1;
                self.counters.turns_started += 1;
                let turn_id = self.next_turn_id;
                let answer_to = delegator.map_or(AnswerTo::Thread, AnswerTo::Delegator);
                let link = driver::spawn(
                    self.services.clone(),
                    key.clone(),
                    turn_id,
                    &batch,
                    self.reports_tx.clone(),
                    answer_to,
                );
                let start = TurnStart {
                    queue_wait_ms: queue_wait_ms(&batch),
                    batch,
                    question_timeout: self.settings.question_timeout,
                };
                let (turn, lease) = TurnMachine::start(start, Instant::now());
                link.send(lease);
                Running {
                    turn_id,
                    turn,
                    link,
                    rotate_after: false,
                }
            });
            match started {
                Some(key) => self.task_turn_started(&key),
                None => break,
            }
        }
        metrics::queue_depth(self.conversations.waiting());
    }

    /// The limit work for `mention`'s author in its conversation would
    /// pass now, if any (see [`crate::policy::budget::Budget::refusal`]).
    fn budget_refusal(&self, mention: &Mention) -> Option<crate::policy::budget::Refusal> {
        let now = crate::state::store::sql_now();
        let billed = self.tasks.billed(&mention.conversation);
        self.services
            .budget
            .refusal(&mention.author, mention.standing(), &billed, now)
    }

    /// Gives up mentions a budget refused, each told which limit and
    /// when it resets (see [`crate::policy::budget`]).
    fn refuse_over_budget(&mut self, refused: Vec<(Mention, crate::policy::budget::Refusal)>) {
        for (mention, refusal) in refused {
            tracing::info!(
                conversation = %mention.conversation,
                event_id = %mention.event_id,
                scope = refusal.scope.label(),
                "mention refused: budget spent"
            );
            metrics::budget_refused(refusal.scope.label());
            if self.task_refused(&mention, refusal.reason()) {
                continue;
            }
            let notice = refusal.notice(self.services.budget.is_owner(&mention.author));
            self.notices.give_up(vec![mention], notice);
        }
    }

    /// Queues a mention for a turn; its author is told if it waits long.
    fn enqueue(&mut self, mention: Mention) {
        if let Some(dropped) = self.conversations.enqueue(mention, Instant::now()) {
            self.overflowed(dropped);
        }
    }

    /// Queues a mention without a waiting notice (a steer given back).
    fn requeue(&mut self, mention: Mention) {
        if let Some(dropped) = self.conversations.push_back(mention) {
            self.overflowed(dropped);
        }
    }

    fn overflowed(&mut self, dropped: Mention) {
        self.notices.overflowed(dropped);
    }

    /// When the heart must look again without being told: a backoff ends or
    /// a waiting mention is due its notice.
    fn next_wake(&self) -> Option<Instant> {
        [self.conversations.next_wake(), self.conversations.next_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Tells the authors of mentions waiting past `--wait-notice-after` why,
    /// one notice per conversation's waiting batch, within the global budget.
    fn tell_waiting(&mut self, now: Instant) {
        if self.draining {
            return;
        }
        for (key, id) in self.conversations.take_due(now) {
            let capacity = self.settings.capacity;
            let Some((holdup, mention)) = self.conversations.why_waits(&key, &id, now, capacity) else {
                continue;
            };
            let awaited = self.services.pool.status().awaiting.get(&key).copied();
            let holdup = holdup.for_a_lease_that(awaited);
            let mention = mention.clone();
            if !self.wait_notices.admit(now) {
                metrics::wait_notice(holdup.label(), false);
                tracing::info!(conversation = %key, reason = holdup.label(), "waiting notice budget spent: not telling a waiting mention why");
                continue;
            }
            metrics::wait_notice(holdup.label(), true);
            tracing::info!(conversation = %key, event_id = %id, reason = holdup.label(), "telling a waiting mention why it waits");
            self.notices.inform(mention, holdup.describe());
        }
    }

    /// Questions posted before a crash died with their turns: their threads
    /// are told so and they are forgotten.
    fn expire_stale_questions(&mut self) {
        let stale = match self.services.questions.expire_left_over() {
            Ok(stale) => stale,
            Err(error) => return tracing::error!(%error, "cannot read the open questions"),
        };
        for LeftOver { question, under } in stale {
            if let Some(mention) = under {
                tracing::info!(%question, "marking a stale question expired");
                let text = "This question expired: the bridge restarted. If the agent still needs it, it will ask again.";
                self.notices
                    .about_question(mention, self.services.owner, text.to_owned());
            }
            self.closed_questions.record(question);
        }
    }

    /// Shutdown: turns in flight get `grace` to end on their own (nothing
    /// new starts), then are abandoned; their drivers get the cancel
    /// timeout to stop. The agents are stopped after this, by the daemon.
    /// Their calls of the bridge's tools are still carried out meanwhile:
    /// a turn finishing in the grace may post its progress. A task whose
    /// turn ends in the grace hands its result back (journaled, delivered
    /// at the next start), so it does not run again.
    async fn drain(mut self, grace: Duration, mut tool_requests: mpsc::Receiver<ToolRequest>) {
        self.draining = true;
        tracing::info!(
            in_flight = self.conversations.running_count(),
            grace_s = grace.as_secs(),
            "shutting down: letting turns in flight finish"
        );
        let deadline = tokio::time::Instant::now() + grace;
        while self.conversations.running_count() > 0 {
            let next = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    report = self.reports_rx.recv() => Drained::Report(report),
                    Some(request) = tool_requests.recv() => Drained::ToolCall(request),
                    Some(news) = self.tasks.news.recv() => Drained::TaskNews(news),
                }
            });
            match next.await {
                Ok(Drained::Report(Some(report))) => self.on_report(report),
                Ok(Drained::ToolCall(request)) => self.on_tool_request(request),
                Ok(Drained::TaskNews(news)) => self.on_task_news(news),
                Ok(Drained::Report(None)) | Err(_) => break,
            }
        }
        // A task's answer is sent before its turn's end is reported.
        while let Ok(news) = self.tasks.news.try_recv() {
            self.on_task_news(news);
        }
        if self.conversations.running_count() > 0 {
            tracing::warn!(
                in_flight = self.conversations.running_count(),
                "grace period over: cancelling the remaining turns (their mentions resume at the next start)"
            );
            let keys: Vec<ConversationKey> = self
                .conversations
                .running_turns()
                .map(|(key, _)| key.clone())
                .collect();
            for key in keys {
                self.step(&key, Input::Abandon);
            }
        }
        let stopped = futures_util::future::join_all(self.abandoned.drain(..).map(DriverLink::ended));
        if tokio::time::timeout(self.settings.cancel_timeout, stopped)
            .await
            .is_err()
        {
            tracing::warn!("some abandoned turns did not stop within the cancel timeout");
        }
    }
}

/// What the heart takes while it drains.
enum Drained {
    Report(Option<Report>),
    ToolCall(ToolRequest),
    TaskNews(tasks::TaskNews),
}

/// The backoff before retry number `attempts`.
fn retry_delay(attempts: u32) -> Duration {
    let mut backoff = Backoff::new(RETRY_BACKOFF_MIN, RETRY_BACKOFF_MAX);
    (0..attempts)
        .map(|_| backoff.next_delay())
        .last()
        .unwrap_or(RETRY_BACKOFF_MIN)
}

/// How long the oldest mention of a batch waited, in milliseconds.
fn queue_wait_ms(batch: &[Mention]) -> u64 {
    batch
        .first()
        .map(|m| Timestamp::now().as_secs().saturating_sub(m.accepted_at) * 1000)
        .unwrap_or_default()
}
