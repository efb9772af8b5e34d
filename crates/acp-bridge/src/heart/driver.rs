//! The async shell around one turn: performs the turn machine's actions
//! against the agent and the replier, and reports what happened.
//!
//! Owns the I/O of a turn and nothing of its logic: the lease, the live
//! prompt's event stream, a cancel under way, the handles of the agent's
//! questions (permission and form; the agent waits on those), and the machine's timer. It decides
//! nothing: every outcome goes back to the heart as an [`Input`], and the
//! heart answers with actions. Actions run one at a time, in order; while
//! one awaits the agent (a steer's answer), the prompt's events wait in
//! their channel, so a steer's answer always reaches the machine before the
//! end of the prompt it steered.
//!
//! It is handed only the machine's [`DriverAction`]s (the heart keeps the
//! rest), and where the turn's answer goes ([`AnswerTo`]): published in
//! its thread, or, for a delegated task's turn, handed back to the
//! conversation that delegated it (see `super::tasks`), whose account
//! the task spends on. The driver ends with [`DriverAction::Publish`] (which also frees
//! the agent), [`DriverAction::Release`] or [`DriverAction::Abandon`], or
//! when the heart drops its end of the channel.
//!
//! What the first prompt needs besides the agent (the thread context, the
//! batch's media) is made beside the lease (`prepare`).

mod prepare;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use acp_bridge_core::approvals::{self, Verdict};
use acp_bridge_core::media_refs::MediaRef;
use acp_bridge_core::mention::{ConversationKey, Mention, Thread};
use acp_bridge_core::prompt::BRIDGE_MARK;
use acp_bridge_core::slash::SlashCommand;
use acp_bridge_core::turn::{
    Answer, Ask, Asked, CancelSettled, DriverAction, Input, PromptEnd, Publication, QuestionTicket,
    TurnFailure, TurnUsage, summary,
};
use acp_bridge_core::work::{ToolStep, WorkLog, WorkSummary};
use acp_client::{
    AcpError, AnswerError, CancelOutcome, ContentBlock, ElicitationAction, ElicitationQuestion,
    PermissionKind, PermissionQuestion, TurnError, TurnEvent, TurnOptions, TurnProgress,
};
use nostr_sdk::prelude::{EventId, PublicKey, Timestamp};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::controls;
use super::progress::Progress;
use super::steer_strategy::SteerMethod;
use super::tasks::Delegator;
use super::usage;
use crate::agents::pool::{Lease, Pools};
use crate::base::deadline::sleep_until;
use crate::intake::media::{self, AgentTakes, FetchedAhead, MediaCache, MediaFetcher};
use crate::intake::thread_context::{PendingMark, ThreadContext};
use crate::outbound::groups::GroupDirectory;
use crate::outbound::reply::{ProgressSettings, Replier, ReplyContent};
use crate::policy::budget::turn_cap::{CapReached, SharedSpend};
use crate::state::store::{Approvals, Controls, Outbox, Questions, Sessions};
use crate::telemetry::metrics;
use prepare::TakesSeen;
use prepare::{Preparation, Prepared};

/// How long a slash command waits for a fresh session's list of commands
/// (agents send it right after `session/new` is answered).
const COMMANDS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// What every turn's driver shares.
#[derive(Debug, Clone)]
pub(crate) struct TurnServices {
    /// Each agent profile's pool.
    pub pool: Pools,
    /// How a conversation's session is rotated, or the whole of it forgotten.
    pub forgetting: super::Forgetting,
    /// Which profile each conversation's turns run on.
    pub profiles: crate::heart::profiles::ProfileBook,
    pub replier: Replier,
    pub options: TurnOptions,
    /// With `--permission-policy ask-owner`: the owner, who answers the
    /// agent's questions. Without, questions are answered `cancelled`.
    pub owner: Option<PublicKey>,
    /// The outbox's refusals, for `!status`.
    pub outbox: Outbox,
    /// The owner's model and mode choices and the agent's offers.
    pub controls: Controls,
    /// Sessions' usage is recorded, for `!status`.
    pub sessions: Sessions,
    /// Open questions are recorded, so a restart can mark them expired.
    pub questions: Questions,
    /// The owner's remembered "always" answers, which answer a permission
    /// question before it is asked.
    pub approvals: Approvals,
    /// What turns may spend; each prompt's spend is counted in it.
    pub budget: crate::policy::budget::Budget,
    /// `--reply-content`.
    pub reply_content: ReplyContent,
    /// `--thread-context` (`None`: off).
    pub context: Option<ThreadContext>,
    /// What the groups' relays say of them, for the prompts.
    pub groups: GroupDirectory,
    /// How the images mentions carry are fetched into prompts.
    pub media: MediaFetcher,
    /// How the agents' `send_file` calls are carried out.
    pub files: crate::tools::upload::FileSender,
    /// Who the gate hears: which bots a task may be delegated to.
    pub gate: Option<crate::policy::gate::GateRules>,
    /// The media fetched lately, shared by every turn.
    pub media_cache: MediaCache,
    /// What each profile's agent took inline when last leased: which
    /// media a turn fetches before its lease (see `prepare`).
    pub takes_seen: TakesSeen,
    /// `--work-summary`: the account of the work appended to answers.
    pub work_summary: WorkSummary,
    /// When a long turn shows its progress in its thread.
    pub progress: ProgressSettings,
}

/// The turn's work as the agent reports it (plan, tool calls), fed by its
/// driver and read by `!status` and the progress messages. Locked for one
/// call at a time, never across an await (see [`lock_work`]).
pub(crate) type SharedWork = Arc<Mutex<WorkLog>>;

/// The work log, to feed or read; a panic elsewhere while it was held
/// leaves a record that is still worth reading.
pub(crate) fn lock_work(work: &SharedWork) -> MutexGuard<'_, WorkLog> {
    work.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a driver tells the heart.
#[derive(Debug)]
pub(crate) struct Report {
    pub conversation: ConversationKey,
    pub turn_id: u64,
    pub input: Input,
}

/// Where a turn's answer goes.
#[derive(Debug)]
pub(super) enum AnswerTo {
    /// Published in the thread of the turn's mentions.
    Thread,
    /// Handed back to the conversation that delegated the task the turn
    /// runs (no thread context, no group preface: its prompt is all it
    /// sees), on whose account it spends.
    Delegator(Delegator),
}

impl AnswerTo {
    /// The task whose turn this is, if any.
    fn task(&self) -> Option<&Delegator> {
        match self {
            AnswerTo::Thread => None,
            AnswerTo::Delegator(delegator) => Some(delegator),
        }
    }
}

/// How the heart reaches a driver.
#[derive(Debug)]
pub(crate) struct DriverLink {
    actions: mpsc::UnboundedSender<DriverAction>,
    task: JoinHandle<()>,
    span: tracing::Span,
    /// The turn's spend against `--budget-turn-cap`, which its tasks
    /// share (`None`: no cap).
    spend: Option<SharedSpend>,
    work: SharedWork,
}

impl DriverLink {
    /// Hands actions to the driver; never waits. A driver that is gone
    /// (its turn ended) needs none.
    pub(super) fn send(&self, action: DriverAction) {
        let _ = self.actions.send(action);
    }

    /// The turn's span: the heart logs the turn's steps inside it.
    pub(super) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The turn's spend against the per-turn cap, for a task it delegates.
    pub(super) fn turn_spend(&self) -> Option<SharedSpend> {
        self.spend.clone()
    }

    /// The turn's work so far, for `!status` and progress messages.
    pub(crate) fn work(&self) -> SharedWork {
        Arc::clone(&self.work)
    }

    /// Waits for the driver to end (shutdown).
    pub(super) async fn ended(self) {
        let _ = self.task.await;
    }
}

/// Starts the driver of turn `turn_id` for `batch`'s conversation, whose
/// answer goes to `answer_to`.
pub(super) fn spawn(
    services: TurnServices,
    conversation: ConversationKey,
    turn_id: u64,
    batch: &[Mention],
    reports: mpsc::Sender<Report>,
    answer_to: AnswerTo,
) -> DriverLink {
    let newest = batch.last();
    let profile = match answer_to.task() {
        // A task runs on its delegating conversation's profile.
        Some(task) => services.profiles.of(&task.parent),
        None => services.profiles.for_turn(&conversation, batch.first()),
    };
    let span = tracing::info_span!(
        "turn",
        turn_id,
        conversation = %conversation,
        profile = %profile,
        event_id = newest.map(|m| m.event_id.to_hex()).unwrap_or_default(),
        author = newest.map(Mention::author_short).unwrap_or_default(),
        session = tracing::field::Empty,
        steer_method = tracing::field::Empty,
        run_id = tracing::field::Empty,
    );
    let (actions_tx, actions) = mpsc::unbounded_channel();
    let in_thread = answer_to.task().is_none();
    let context_for = (in_thread && services.context.is_some()).then(|| batch.to_vec());
    let group_preface = match batch.first() {
        Some(Mention {
            thread: Thread::Group { channel, .. },
            origin: Some(relay),
            ..
        }) if in_thread => services.groups.preface(relay, channel),
        _ => String::new(),
    };
    let spend = match answer_to.task() {
        Some(task) => task.cap.clone(),
        None => services.budget.turn_spend().map(SharedSpend::new),
    };
    let work = SharedWork::default();
    let progress = in_thread.then(|| Progress::new(services.progress, batch));
    let preparation = Preparation::of(&services, &profile, batch, context_for.as_deref());
    let driver = Driver {
        services,
        conversation,
        profile,
        turn_id,
        actions,
        reports,
        lease: None,
        turn: None,
        cancel: None,
        timer: None,
        questions: HashMap::new(),
        next_question: 0,
        strangers_in_batch: batch.iter().any(|mention| !mention.from_owner),
        steer: SteerMethod::GooseRun,
        anchor: newest.cloned(),
        context_for,
        preparation,
        prepared: Prepared::default(),
        context_mark: None,
        group_preface,
        turn_spend: spend.clone(),
        answer_to,
        work: Arc::clone(&work),
        progress,
    };
    let task = tokio::spawn(driver.run().instrument(span.clone()));
    DriverLink {
        actions: actions_tx,
        task,
        span,
        spend,
        work,
    }
}

/// Whether the driver goes on after an action.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// A question of the agent's, waiting for the owner.
#[derive(Debug)]
struct Question {
    handle: Handle,
    /// Set once posted.
    event: Option<EventId>,
    /// The mention it was asked under, once posted: whose turn it is.
    under: Option<Box<Mention>>,
}

/// The answering end of a question, whatever it asks.
#[derive(Debug)]
enum Handle {
    Permission(PermissionQuestion),
    Form(ElicitationQuestion),
}

impl Handle {
    fn request_id(&self) -> &serde_json::Value {
        match self {
            Handle::Permission(question) => question.request_id(),
            Handle::Form(question) => question.request_id(),
        }
    }

    /// What the turn keeps of the question.
    fn asked(&self, ticket: QuestionTicket) -> Asked {
        match self {
            Handle::Permission(question) => Asked {
                ticket,
                summary: summary(question.request().title().unwrap_or("a tool call")),
                shows: approvals::shown(&question.request().tool_call),
                ask: Ask::Permission(question.request().options.clone()),
            },
            Handle::Form(question) => Asked {
                ticket,
                summary: summary(&question.request().message),
                shows: String::new(),
                ask: Ask::Form(question.request().fields.clone()),
            },
        }
    }

    /// Nobody answers any more: `cancelled` (a form: `cancel`).
    async fn cancel(self) -> Result<(), AnswerError> {
        match self {
            Handle::Permission(question) => question.cancel().await,
            Handle::Form(question) => question.answer(ElicitationAction::Cancel).await,
        }
    }

    /// The owner's answer, or (`None`, timed out) a refusal: a permission
    /// is rejected once or always, else `cancelled` (never allowed); a form
    /// is declined.
    async fn answer(self, answer: Option<Answer>) -> Result<(), AnswerError> {
        match (self, answer) {
            (Handle::Permission(question), Some(Answer::Option(option))) => question.answer(&option.id).await,
            (Handle::Permission(question), None) => {
                let reject = question
                    .request()
                    .option_of_kind(&[PermissionKind::RejectOnce, PermissionKind::RejectAlways])
                    .map(|option| option.id.clone());
                match reject {
                    Some(option_id) => question.answer(&option_id).await,
                    None => question.cancel().await,
                }
            }
            (Handle::Form(question), Some(Answer::Form(content))) => {
                question.answer(ElicitationAction::Accept(content)).await
            }
            (Handle::Form(question), None) => question.answer(ElicitationAction::Decline).await,
            (handle, Some(_)) => {
                tracing::error!("an answer of the wrong kind for the question: cancelled instead");
                handle.cancel().await
            }
        }
    }
}

#[derive(Debug)]
struct Driver {
    services: TurnServices,
    conversation: ConversationKey,
    /// The agent profile the turn leases from.
    profile: String,
    turn_id: u64,
    actions: mpsc::UnboundedReceiver<DriverAction>,
    reports: mpsc::Sender<Report>,
    lease: Option<Lease>,
    turn: Option<acp_client::Turn>,
    cancel: Option<JoinHandle<Result<CancelOutcome, AcpError>>>,
    timer: Option<Instant>,
    questions: HashMap<QuestionTicket, Question>,
    next_question: QuestionTicket,
    /// Whether the turn's batch holds someone else's mention than the
    /// owner's: an "always" answer in it is not remembered.
    strangers_in_batch: bool,
    steer: SteerMethod,
    /// The batch's newest mention: where the owner is told that a choice
    /// of theirs could not apply.
    anchor: Option<Mention>,
    /// The batch, until its first prompt is given the thread's context.
    context_for: Option<Vec<Mention>>,
    /// What the first prompt needs besides the agent, until the lease
    /// makes it (`None` then, or for a slash command).
    preparation: Option<Preparation>,
    /// What the lease made of it, until the first prompt takes it.
    prepared: Prepared,
    /// The session's thread-context mark, recorded once the agent answers
    /// the prompt that carried the context (a failed prompt is retried
    /// with it again).
    context_mark: Option<PendingMark>,
    /// What the group's relay says of the group the batch is in (see
    /// `groups`), put before every prompt of the turn; empty outside
    /// groups.
    group_preface: String,
    /// The turn's spend against `--budget-turn-cap`, its tasks' with it
    /// (`None`: no cap); a task's turn's is its delegating turn's.
    turn_spend: Option<SharedSpend>,
    answer_to: AnswerTo,
    work: SharedWork,
    /// What the turn's thread is shown of its progress (`None`: a
    /// delegated task's turn, whose answer goes to no thread).
    progress: Option<Progress>,
}

impl Driver {
    async fn run(mut self) {
        loop {
            tokio::select! {
                action = self.actions.recv() => match action {
                    Some(action) => {
                        if self.perform(action).await == Flow::Stop {
                            break;
                        }
                    }
                    None => break,
                },
                progress = next_progress(&mut self.turn) => self.on_progress(progress).await,
                settled = join_cancel(&mut self.cancel) => {
                    self.cancel = None;
                    self.report(Input::CancelSettled(settled)).await;
                }
                () = sleep_until(self.timer) => {
                    self.timer = None;
                    self.report(Input::Timer).await;
                }
                () = sleep_until(self.progress.as_ref().and_then(|progress| progress.due(&lock_work(&self.work)))) => {
                    if let Some(progress) = &mut self.progress {
                        let step = progress.step(&lock_work(&self.work));
                        progress.send(&self.services.replier, step).await;
                    }
                }
            }
        }
        // After the answer or notice the last action stored.
        if let Some(progress) = &mut self.progress {
            let last = progress.last_step(&lock_work(&self.work));
            progress.finish(&self.services.replier, last).await;
        }
    }

    async fn report(&self, input: Input) {
        let report = Report {
            conversation: self.conversation.clone(),
            turn_id: self.turn_id,
            input,
        };
        if self.reports.send(report).await.is_err() {
            tracing::debug!("heart gone; the turn's mentions stay journaled");
        }
    }

    async fn perform(&mut self, action: DriverAction) -> Flow {
        match action {
            DriverAction::Lease => match self.lease().await {
                Ok(lease) => {
                    tracing::Span::current().record("session", lease.session.as_str());
                    if let Some(task) = self.answer_to.task() {
                        tracing::info!(task_id = %task.task, session = %lease.session, "task session leased");
                    }
                    let takes = AgentTakes::of(lease.client.info());
                    self.services.takes_seen.saw(&self.profile, takes);
                    self.steer = SteerMethod::for_agent(&lease.client);
                    tracing::Span::current().record("steer_method", self.steer.as_str());
                    let anchor = self.anchor.as_ref();
                    controls::on_lease(
                        &self.services.controls,
                        &self.services.replier,
                        &self.conversation,
                        controls::Leased {
                            lease: &lease,
                            profile: &self.profile,
                        },
                        self.steer,
                        self.services.options.permission,
                        anchor,
                    )
                    .await;
                    self.lease = Some(lease);
                    self.report(Input::Leased).await;
                }
                Err(error) => self.report(Input::LeaseFailed(error.into())).await,
            },
            DriverAction::Prompt(text, media) => self.prompt(text, media).await,
            DriverAction::AgentCommand(command) => self.agent_command(command).await,
            DriverAction::Steer { ticket, text, media } => {
                if let Some(lease) = &self.lease {
                    let blocks = self.blocks(lease, text, media, FetchedAhead::default()).await;
                    let answer = self.steer.steer(&lease.client, &lease.session, blocks).await;
                    self.report(Input::SteerAnswered { ticket, answer }).await;
                }
            }
            DriverAction::Cancel => self.start_cancel(),
            DriverAction::StopRunaway => {
                if let Some(lease) = &self.lease
                    && lease.client.cancel(&lease.session).await.is_err()
                {
                    self.services.pool.discard(lease);
                }
            }
            DriverAction::Discard => {
                if let Some(lease) = &self.lease {
                    self.services.pool.discard(lease);
                }
            }
            DriverAction::RotateSession => self.services.forgetting.rotate(&self.conversation),
            DriverAction::PostQuestion { ticket, under, text } => {
                self.post_question(ticket, &under, &text).await
            }
            DriverAction::AnswerQuestion { ticket, answer } => {
                self.answer_question(ticket, Some(answer)).await
            }
            DriverAction::RejectQuestion { ticket } => self.answer_question(ticket, None).await,
            DriverAction::CancelQuestions => {
                for (_, question) in self.questions.drain() {
                    close_question(&self.services.questions, question.event);
                    let _ = question.handle.cancel().await;
                }
            }
            DriverAction::Publish {
                mentions,
                text,
                publication,
            } => {
                // The agent's part is over: free it before the answer is
                // even stored, then report and stop.
                self.release();
                let stored = self.publish(&mentions, &text, publication).await;
                self.report(Input::Published(stored)).await;
                return Flow::Stop;
            }
            DriverAction::SetTimer(at) => self.timer = at.map(Instant::from_std),
            DriverAction::Abandon => {
                // Shutdown: ask the agent to stop, but do not wait for it;
                // the pool kills every agent next.
                self.start_cancel();
                self.cancel = None;
                self.release();
                return Flow::Stop;
            }
            DriverAction::Release => {
                self.release();
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// The conversation's session, with the first prompt's parts made
    /// meanwhile when the lease has to wait (see `prepare`).
    async fn lease(&mut self) -> Result<Lease, crate::agents::pool::PoolError> {
        let pool = &self.services.pool;
        // A live session is leased at once: nothing to hide behind it, and
        // two things in flight keep both runtime workers awake where one
        // did the two in turn (BENCHMARKS §10). The prompt then reads and
        // fetches in line.
        let preparation = self
            .preparation
            .take()
            .filter(|_| !pool.has_live_session(&self.profile, &self.conversation));
        let lease = pool.lease(&self.profile, &self.conversation);
        match preparation {
            Some(preparation) => {
                let (leased, prepared) = preparation.beside(lease).await;
                self.prepared = prepared;
                leased
            }
            None => lease.await,
        }
    }

    async fn prompt(&mut self, text: String, media: Vec<MediaRef>) {
        let mut prepared = std::mem::take(&mut self.prepared);
        // The first prompt carries what the session has not seen of the thread.
        let text = match (self.context_for.take(), &self.services.context) {
            (Some(batch), Some(context)) => {
                let gathered = prepared.context(context, &batch).await;
                self.context_mark = gathered.mark;
                gathered.text + &text
            }
            _ => text,
        };
        let text = self.group_preface.clone() + &text;
        self.send_prompt(text, media, prepared.media).await;
    }

    /// Runs the agent's slash command (see `acp_bridge_core::slash`) if
    /// the session offers it: its text alone is the prompt (no thread
    /// context, no group preface, no images); else its notice ends the
    /// turn. A fresh session's list may come a moment after it opened.
    async fn agent_command(&mut self, command: SlashCommand) {
        let Some(lease) = &self.lease else { return };
        let known = lease
            .client
            .session_commands_within(&lease.session, COMMANDS_PATIENCE)
            .await;
        match command.check(known.as_deref()) {
            Ok(()) => {
                let (text, media) = (command.prompt(), Vec::new());
                self.send_prompt(text, media, FetchedAhead::default()).await
            }
            Err(notice) => self.report(Input::CommandRefused(notice)).await,
        }
    }

    /// Prompts the leased session with `text` as it is, and `media`
    /// (those fetched `ahead` not fetched again).
    async fn send_prompt(&mut self, text: String, media: Vec<MediaRef>, ahead: FetchedAhead) {
        let Some(lease) = &self.lease else { return };
        let blocks = self.blocks(lease, text, media, ahead).await;
        let prompt = lease
            .client
            .prompt(&lease.session, blocks, self.services.options)
            .await;
        match prompt {
            Ok(turn) => self.turn = Some(turn),
            Err(error) => {
                // Not accepted: the retry's prompt carries the context again.
                self.context_mark = None;
                let failure = TurnFailure::Agent(error.to_string());
                self.report(Input::PromptEnded(Err(failure))).await;
            }
        }
    }

    /// The blocks of a prompt or steer of `text` whose mentions carry
    /// `media`, fetched (unless fetched `ahead`) for what the leased agent
    /// takes; says in the log what they carry when there are media.
    async fn blocks(
        &self,
        lease: &Lease,
        text: String,
        media: Vec<MediaRef>,
        ahead: FetchedAhead,
    ) -> Vec<ContentBlock> {
        let takes = AgentTakes::of(lease.client.info());
        let carries_media = !media.is_empty();
        let (blocks, summary) = media::prompt_blocks(
            &self.services.media,
            &self.services.media_cache,
            text,
            BRIDGE_MARK,
            media,
            takes,
            ahead,
        )
        .await;
        if carries_media {
            tracing::info!(
                images_shown = summary.shown,
                image_bytes = summary.shown_bytes,
                audio_shown = summary.audio_shown,
                audio_bytes = summary.audio_bytes,
                images_as_text = summary.as_text,
                linked = summary.linked,
                agent_takes_images = takes.image,
                agent_takes_audio = takes.audio,
                "prompt carries images"
            );
        }
        blocks
    }

    fn start_cancel(&mut self) {
        if self.cancel.is_none()
            && let Some(lease) = &self.lease
        {
            let (client, session) = (lease.client.clone(), lease.session.clone());
            self.cancel = Some(tokio::spawn(async move { client.cancel(&session).await }));
        }
    }

    fn release(&mut self) {
        if let Some(lease) = self.lease.take() {
            let leased = controls::Leased {
                lease: &lease,
                profile: &self.profile,
            };
            controls::on_release(&self.services.controls, &self.conversation, leased);
            self.services.pool.release(&lease);
        }
    }

    async fn on_progress(&mut self, progress: Result<TurnProgress, TurnError>) {
        match progress {
            Ok(TurnProgress::Event(TurnEvent::PermissionAsked(question))) => {
                self.asked(Handle::Permission(question)).await
            }
            Ok(TurnProgress::Event(TurnEvent::ElicitationAsked(question))) => {
                self.asked(Handle::Form(question)).await
            }
            Ok(TurnProgress::Event(TurnEvent::QuestionWithdrawn { request_id })) => {
                let ticket = self
                    .questions
                    .iter()
                    .find(|(_, question)| *question.handle.request_id() == request_id)
                    .map(|(ticket, _)| *ticket);
                if let Some(question) = ticket.and_then(|ticket| self.questions.remove(&ticket)) {
                    // Answered -32800 by the client already: nothing to send.
                    close_question(&self.services.questions, question.event);
                }
                if let Some(ticket) = ticket {
                    self.report(Input::QuestionWithdrawn { ticket }).await;
                }
            }
            Ok(TurnProgress::Event(TurnEvent::Usage(usage))) => {
                if let Some(cost) = &usage.cost {
                    let reached = self.live_cost(cost.amount, &cost.currency);
                    self.stop_at_cap(reached).await;
                }
            }
            Ok(TurnProgress::Event(TurnEvent::Plan { entries })) => {
                lock_work(&self.work).observe_plan(&entries)
            }
            Ok(TurnProgress::Event(TurnEvent::ToolCall(call) | TurnEvent::ToolCallUpdate(call))) => {
                let step = lock_work(&self.work).observe_tool(&call, std::time::Instant::now());
                log_tool_step(step);
            }
            Ok(TurnProgress::Event(event)) => observe(&event),
            Ok(TurnProgress::Finished(outcome)) => {
                self.prompt_over();
                if let Some(mark) = self.context_mark.take() {
                    mark.commit();
                }
                if let Some(run_id) = &outcome.run_id {
                    tracing::Span::current().record("run_id", run_id.as_str());
                }
                let usage = usage::record(&self.services.sessions, &self.conversation, &outcome);
                self.count_spend(&usage);
                let reached = self.turn_spend.as_ref().and_then(|spend| {
                    let (tokens, cost) = usage.spent();
                    match self.answer_to.task() {
                        Some(task) => spend.lock().task_ended(&task.task, tokens, cost),
                        None => spend.lock().prompt_ended(tokens, cost),
                    }
                });
                let end = PromptEnd {
                    folded: outcome
                        .steers
                        .iter()
                        .filter(|steer| steer.folded)
                        .map(|steer| steer.accepted.message_id.clone())
                        .collect(),
                    usage,
                    message: self.reply_text(&outcome),
                    stop_reason: outcome.stop_reason,
                };
                self.report(Input::PromptEnded(Ok(end))).await;
                // After the end: a prompt that finished keeps its answer;
                // only a turn going on (a merge) is stopped.
                self.stop_at_cap(reached).await;
            }
            Err(error) => {
                self.prompt_over();
                self.context_mark = None;
                self.report(Input::PromptEnded(Err(failure_of(&error)))).await;
            }
        }
    }

    /// A live report of the session's total cost, against the turn's cap;
    /// the session's cost before the prompt is read once per prompt.
    fn live_cost(&self, total: f64, currency: &str) -> Option<CapReached> {
        let spend = self.turn_spend.as_ref()?;
        if let Some(task) = self.answer_to.task() {
            // A task's session is fresh: its total is what it spent.
            return spend.lock().task_cost(&task.task, total, currency);
        }
        if spend.lock().needs_baseline() {
            let before = self.services.sessions.usage(&self.conversation).ok().flatten();
            spend
                .lock()
                .set_baseline(before.and_then(|before| before.cost.zip(before.currency)));
        }
        spend.lock().session_cost(total, currency)
    }

    /// Tells the turn machine the turn passed its cap (counted and logged
    /// by the heart at the turn's end).
    async fn stop_at_cap(&self, reached: Option<CapReached>) {
        let Some(reached) = reached else { return };
        tracing::warn!(
            spent = %reached.cap.show(reached.spent),
            cap = %reached.cap,
            "turn spend reached --budget-turn-cap: cancelling the turn"
        );
        self.report(Input::CapReached(reached.notice())).await;
    }

    /// Counts a prompt's spend against the budget of the batch's newest
    /// mention's author, in the conversation (a task's: its delegating
    /// one).
    fn count_spend(&self, usage: &TurnUsage) {
        let Some(anchor) = &self.anchor else { return };
        let (tokens, cost) = usage.spent();
        let now = crate::state::store::sql_now();
        let billed = self
            .answer_to
            .task()
            .map_or(&self.conversation, |task| &task.parent);
        self.services
            .budget
            .prompt_spent(billed, &anchor.author, tokens, cost, now);
    }

    /// What of the agent's text the reply carries (`--reply-content`),
    /// saying so at its end when it was cut at `--max-reply-bytes`.
    fn reply_text(&self, outcome: &acp_client::TurnOutcome) -> String {
        let (text, truncated) = match self.services.reply_content {
            ReplyContent::Answer => (outcome.answer(), outcome.answer_truncated()),
            ReplyContent::Full => (outcome.message.clone(), outcome.message_truncated),
        };
        if !truncated {
            return text;
        }
        let max_reply_bytes = self.services.options.max_text_bytes;
        tracing::warn!(
            max_reply_bytes,
            "the agent's answer was truncated at --max-reply-bytes"
        );
        metrics::reply_truncated();
        format!("{text}\n\n{}", truncation_marker(max_reply_bytes))
    }

    /// The prompt answered: a cancel still under way is left to finish on
    /// its own (it ends with the prompt).
    fn prompt_over(&mut self) {
        self.turn = None;
        self.cancel = None;
    }

    /// The agent asked a question the policy hands to us.
    async fn asked(&mut self, question: Handle) {
        if self.services.owner.is_none() {
            // Not asking the owner: dropping the question answers it `cancelled`.
            return drop(question);
        }
        let question = match question {
            Handle::Permission(question) => match self.answer_remembered(question).await {
                Some(question) => Handle::Permission(question),
                None => return,
            },
            form => form,
        };
        self.next_question += 1;
        let ticket = self.next_question;
        let asked = question.asked(ticket);
        self.questions.insert(
            ticket,
            Question {
                handle: question,
                event: None,
                under: None,
            },
        );
        self.report(Input::QuestionAsked(asked)).await;
    }

    async fn post_question(&mut self, ticket: QuestionTicket, under: &Mention, text: &str) {
        let (Some(owner), Some(question)) = (self.services.owner, self.questions.get_mut(&ticket)) else {
            return;
        };
        let summary = question.handle.asked(ticket).summary;
        let event = match self.services.replier.ask(under, owner, text).await {
            Ok(event) => event,
            Err(error) => {
                tracing::error!(%error, "cannot post the agent's question; cancelling it");
                if let Some(question) = self.questions.remove(&ticket) {
                    let _ = question.handle.cancel().await;
                }
                return self.report(Input::QuestionPosted { ticket, event: None }).await;
            }
        };
        let kind = match question.handle {
            Handle::Permission(_) => "permission",
            Handle::Form(_) => "form",
        };
        tracing::info!(question = %event, kind, %summary, "asked the owner");
        question.event = Some(event);
        question.under = Some(Box::new(under.clone()));
        if let Err(error) = self.services.questions.open(event, under) {
            tracing::warn!(%error, "cannot record the open question");
        }
        self.report(Input::QuestionPosted {
            ticket,
            event: Some(event),
        })
        .await;
    }

    /// Answers a question with the owner's answer, or (`None`, timed out)
    /// refuses it ([`Handle::answer`]).
    async fn answer_question(&mut self, ticket: QuestionTicket, answer: Option<Answer>) {
        let Some(question) = self.questions.remove(&ticket) else {
            return;
        };
        close_question(&self.services.questions, question.event);
        if let (Handle::Permission(asked), Some(Answer::Option(option)), Some(under)) =
            (&question.handle, &answer, &question.under)
            && let Some(verdict) = Verdict::remembered_from(&option.kind)
        {
            self.remember(asked, verdict, under).await;
        }
        if let Err(error) = question.handle.answer(answer).await {
            tracing::warn!(%error, "the answer did not reach the agent");
        }
    }

    /// `answer` with the account of the turn's work below a separator line
    /// (`--work-summary`); as it was when the turn called no tool.
    fn with_work_summary(&self, answer: &str) -> String {
        match lock_work(&self.work).summary(self.services.work_summary) {
            Some(summary) => format!("{answer}\n\n---\n{summary}"),
            None => answer.to_owned(),
        }
    }

    /// Answers `question` with the owner's remembered choice for its tool
    /// in this conversation, if there is one the agent offers an option
    /// for; else hands it back, to be asked. Not while the prompt is being
    /// cancelled: the turn machine answers that one `cancelled`.
    async fn answer_remembered(&self, question: PermissionQuestion) -> Option<PermissionQuestion> {
        if self.cancel.is_some() {
            return Some(question);
        }
        let request = question.request();
        let Some(tool) = approvals::tool_key(&request.tool_call) else {
            return Some(question);
        };
        let verdict = match self.services.approvals.remembered(&self.conversation, &tool) {
            Ok(Some(verdict)) => verdict,
            Ok(None) => return Some(question),
            Err(error) => {
                tracing::warn!(%error, "cannot read the remembered permission choices; asking");
                return Some(question);
            }
        };
        let Some(option) = verdict.option(&request.options).cloned() else {
            return Some(question);
        };
        tracing::info!(
            conversation = %self.conversation,
            tool,
            %verdict,
            option = option.kind.as_str(),
            "permission answered by remembered choice"
        );
        if let Err(error) = question.answer(&option.id).await {
            tracing::warn!(%error, "the answer did not reach the agent");
        }
        None
    }

    /// The owner answered a permission question "always" (`verdict`):
    /// remembered for its tool in this conversation when the turn is the
    /// owner's own; in anyone else's it is used once, and the owner is
    /// told how to make it stick.
    async fn remember(&self, question: &PermissionQuestion, verdict: Verdict, under: &Mention) {
        let Some(tool) = approvals::tool_key(&question.request().tool_call) else {
            tracing::info!(%verdict, "an always answer about a tool with no short name: used once, not remembered");
            return;
        };
        if self.strangers_in_batch || !under.from_owner {
            tracing::info!(conversation = %self.conversation, tool, %verdict, "an always answer in someone else's turn: used once, not remembered");
            let text = format!(
                "Used once, not remembered: this turn is not yours. To {verdict} {tool} in this conversation from now on, send `!permissions {verdict} {tool}` here."
            );
            if let Err(error) = self
                .services
                .replier
                .about_question(under, self.services.owner, &text)
                .await
            {
                tracing::error!(%error, "cannot store the notice");
            }
            return;
        }
        match self
            .services
            .approvals
            .remember(&self.conversation, &tool, verdict)
        {
            Ok(()) => {
                tracing::info!(conversation = %self.conversation, tool, %verdict, "permission choice remembered")
            }
            Err(error) => tracing::warn!(%error, "cannot remember the permission choice"),
        }
    }

    async fn publish(
        &self,
        mentions: &[Mention],
        text: &str,
        publication: Publication,
    ) -> Result<(), String> {
        let text = match publication {
            Publication::Answer => self.with_work_summary(text),
            Publication::Notice => text.to_owned(),
        };
        let text = text.as_str();
        if let Some(task) = self.answer_to.task() {
            task.hand_back(text.to_owned()).await;
            return Ok(());
        }
        let replier = &self.services.replier;
        let stored = match publication {
            Publication::Answer => {
                // The session's title, kept as the lease was released (a
                // NIP-14 subject where the answer opens a note thread).
                let title = self.services.sessions.title(&self.conversation).ok().flatten();
                let answered = replier.answer_titled(mentions, text, title.as_deref()).await;
                answered.map(|_| ())
            }
            Publication::Notice => replier.notify(mentions, text).await.map(|_| ()),
        };
        match stored {
            Ok(()) => {
                let now = Timestamp::now().as_secs();
                for mention in mentions {
                    metrics::mention_to_reply(now.saturating_sub(mention.created_at.as_secs()) as f64);
                }
                Ok(())
            }
            Err(error) => Err(error.to_string()),
        }
    }
}

/// The line that ends an answer cut at `max_reply_bytes`.
fn truncation_marker(max_reply_bytes: usize) -> String {
    format!("[answer truncated at {max_reply_bytes} bytes]")
}

fn close_question(questions: &Questions, event: Option<EventId>) {
    if let Some(event) = event
        && let Err(error) = questions.close(event)
    {
        tracing::warn!(%error, "cannot forget the closed question");
    }
}

/// The live prompt's next step; never resolves without one.
async fn next_progress(turn: &mut Option<acp_client::Turn>) -> Result<TurnProgress, TurnError> {
    match turn {
        Some(turn) => turn.next().await,
        None => std::future::pending().await,
    }
}

/// How the cancel under way settled; never resolves without one.
async fn join_cancel(cancel: &mut Option<JoinHandle<Result<CancelOutcome, AcpError>>>) -> CancelSettled {
    let Some(task) = cancel else {
        return std::future::pending().await;
    };
    match task.await {
        Ok(Ok(_)) | Err(_) => CancelSettled::Done,
        Ok(Err(AcpError::CancelTimedOut(..))) => CancelSettled::TimedOut,
        Ok(Err(error)) => CancelSettled::Failed(error.to_string()),
    }
}

fn observe(event: &TurnEvent) {
    match event {
        TurnEvent::RunStarted { run_id } => {
            tracing::Span::current().record("run_id", run_id.as_str());
            tracing::debug!(%run_id, "agent run started");
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

/// One info line when a tool call starts and one when it ends, so a turn
/// that seems to do nothing shows what it is doing.
fn log_tool_step(step: Option<ToolStep>) {
    match step {
        Some(ToolStep::Started(call)) => tracing::info!(
            tool = %call.title,
            kind = call.kind.as_str(),
            call_id = %call.id,
            status = call.status.as_str(),
            "tool call started"
        ),
        Some(ToolStep::Ended { call, duration }) => tracing::info!(
            tool = %call.title,
            kind = call.kind.as_str(),
            call_id = %call.id,
            status = call.status.as_str(),
            duration_ms = duration.as_millis() as u64,
            "tool call ended"
        ),
        None => {}
    }
}

fn failure_of(error: &TurnError) -> TurnFailure {
    match error {
        TurnError::IdleTimeout(_) => TurnFailure::IdleTimeout,
        TurnError::DeadlineExceeded(_) => TurnFailure::Deadline,
        other => TurnFailure::Agent(other.to_string()),
    }
}
