//! Delegated tasks: the heart's side of the `delegate`, `task_status` and
//! `task_stop` tools (issue 24 §1), and how a task on the pool is a turn
//! (issue 36 §2).
//!
//! `delegate(prompt, to: "self")` starts a task: a mention of the
//! delegating turn's author (the author of the mention it works on) in a
//! conversation of its own, keyed `<parent>/task/<id>`, with
//! [`Intent::Task`] naming the task and its parent and the task's prompt
//! as content. It is journaled through the ledger like any mention, and
//! queued like one: its turn is started by the heart's dispatch, in one
//! of the turn slots (`--agents` × `--turns-per-agent`), after the same
//! budget check as any turn, and driven by the turn's driver, on a fresh
//! session of the parent's agent profile, with its prompt alone under the
//! bridge's framing (`prompt::task_prompt`: no thread context, no group
//! preface). Its permission questions go to the owner like any turn's
//! (under the delegating mention). `task_stop` is the owner's cancel of
//! that turn. The one thing its driver does differently is where the
//! answer goes ([`Delegator`], `driver::AnswerTo`): handed back here, not
//! published; and its turn's end is an [`Ending`] here, never a notice
//! or a retry (see [`Heart::task_turn_ended`]).
//!
//! The tool answers with the task's id at once (`background`, the
//! default), or waits for the result for at most [`FOREGROUND_WAIT`],
//! below the agents' own MCP tool timeouts (codex and goose: 300 s), and
//! then says the task still runs.
//!
//! When a task ends (done, failed, or stopped) its result goes back to the
//! conversation that delegated it, framed as the result of task T in the
//! bridge's own words (`prompt::quote_message`): a mention of the parent
//! conversation ([`Intent::TaskResult`]) journaled in the same store
//! transaction that finishes the task's row ([`crate::state::ledger::Ledger::hand_back`]),
//! then delivered into the turn in flight through the steer path (native
//! steer where the agent has one, else cancel + merge, as a steered
//! mention; the turn's answer still threads under the mention it works
//! on), or, with no turn in flight, as the work of the conversation's
//! next turn, answered in the thread under the mention whose turn
//! delegated. A result the foreground wait took as the tool's answer is
//! not delivered again (its row is finished without a result row).
//!
//! A restart: a task whose row is still pending resumes as any journaled
//! mention does (its turn runs again from its prompt), and a result
//! journaled but not yet answered in the parent conversation resumes as
//! that conversation's work; a row finished is neither, so nothing is
//! delivered twice. The task ids go on from the highest a resumed row
//! names.
//!
//! Bounds: a task's session gets its own MCP token, bound to the task's
//! key, whose depth is the number of `/task/` in it; a session at depth
//! [`MAX_DELEGATION_DEPTH`] cannot delegate. A conversation has at most
//! [`MAX_OPEN_TASKS`] tasks running. With no turn slot free (counting the
//! tasks waiting for their turn) the call is refused rather than made to
//! wait, so a parent waiting for its task cannot deadlock the pool.
//!
//! Budgets: a task is work for the delegating turn's author in its
//! conversation ([`Tasks::billed`]). The budget is checked when the task
//! is delegated (a refusal is the tool's error), and again as its turn
//! starts, as any turn's (a refusal then ends the task as failed, and its
//! result, in the parent conversation, meets the same budget); its turn
//! counts one turn, and what its prompt spends counts against that
//! author and conversation and against the delegating turn's
//! `--budget-turn-cap`, as the task's share. A task that takes the turn
//! past its cap ends the turn as capped (its people told); a turn that
//! ends capped stops its tasks.
//!
//! `to: <sibling bot>` hands the task to a sibling bot instead (see
//! [`sibling`]); its reply is the result, which goes the same way, its
//! reply's row finished with the result journaled. Such a task is kept
//! in memory only: after a restart the sibling's reply is an ordinary
//! mention.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::prelude::{EventId, PublicKey};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod sibling;

use acp_bridge_core::mention::{ConversationKey, Intent, Mention};
use acp_bridge_core::prompt::Framing;
use acp_bridge_core::turn::{Input, Outcome, TurnFailure};

use super::Heart;
use crate::policy::budget::turn_cap::SharedSpend;
use crate::state::ledger::Ledger;
use crate::state::store::Finish;
use crate::telemetry::metrics;
use crate::tools::{Answer, DelegateCall, FOREGROUND_WAIT};

/// Sessions at this depth (a task's own is 1) cannot delegate.
pub(crate) const MAX_DELEGATION_DEPTH: usize = 1;
/// Tasks a conversation may have running at once.
pub(crate) const MAX_OPEN_TASKS: usize = 3;
/// Ended tasks whose status is still answered (the oldest is forgotten).
const ENDED_TASKS_KEPT: usize = 256;
/// Tasks' news waiting for the heart.
const NEWS_QUEUE: usize = 64;
/// Between the delegating conversation's key and the task id in a task's.
const TASK_SEGMENT: &str = "/task/";

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// Its final message.
    Done(String),
    Failed(String),
    Stopped,
    /// Stopped at the delegating turn's `--budget-turn-cap`: the notice.
    Capped(String),
}

impl Ending {
    fn label(&self) -> &'static str {
        match self {
            Ending::Done(_) => "done",
            Ending::Failed(_) => "failed",
            Ending::Stopped => "stopped",
            Ending::Capped(_) => "capped",
        }
    }

    /// What the delegating session is told.
    fn result_text(&self) -> String {
        match self {
            Ending::Done(message) => message.clone(),
            Ending::Failed(why) => format!("The task failed: {why}"),
            Ending::Stopped => "The task was stopped before it ended.".to_owned(),
            Ending::Capped(_) => {
                "The task was stopped at the per-turn spending cap, and this turn with it.".to_owned()
            }
        }
    }
}

#[derive(Debug)]
enum State {
    Running { since: Instant },
    Ended(Ending),
}

/// Who does a task's work.
#[derive(Debug)]
enum Work {
    /// A turn of the conversation `key` on this bridge's agents.
    Pool { key: ConversationKey },
    /// The sibling bot `bot`, asked by the message `posted` once posted:
    /// its reply to that message is the result. `stop` ends the wait.
    Sibling {
        bot: PublicKey,
        posted: Option<EventId>,
        stop: CancellationToken,
    },
}

#[derive(Debug)]
struct Task {
    /// Its place in the order tasks were started in.
    number: u64,
    /// The conversation that delegated it: the only one that sees it.
    owner: ConversationKey,
    /// The mention whose turn delegated it (of the owner's conversation):
    /// its result is answered under it.
    under: Mention,
    /// That turn's id: a task that takes it past its cap ends it (0 for a
    /// task resumed after a restart: its turn is gone).
    turn_id: u64,
    /// That turn's spend against `--budget-turn-cap`, the task's with it.
    cap: Option<SharedSpend>,
    state: State,
    /// A `background: false` call still waiting for the result.
    foreground: Option<oneshot::Sender<String>>,
    work: Work,
    /// Its journal row, finished when its result is handed back: its
    /// turn's mention on the pool, the sibling's reply once it came.
    row: Option<Mention>,
}

/// A task just ended, as its delivery needs it.
#[derive(Debug)]
struct EndedTask {
    owner: ConversationKey,
    under: Mention,
    turn_id: u64,
    row: Option<Mention>,
    /// Its result went to a foreground call that waited for it.
    returned: bool,
}

/// What a task's own work tells the heart.
#[derive(Debug)]
pub(super) enum TaskNews {
    /// It ended.
    Ended { id: String, ending: Ending },
    /// Its prompt was posted for a sibling bot, as `event`.
    Posted { id: String, event: EventId },
}

/// What the driver of a task's turn hands its answer back through, and
/// whose account the turn spends on (see `driver::AnswerTo`).
#[derive(Debug)]
pub(super) struct Delegator {
    /// The task's id: its share of the delegating turn's spend.
    pub task: String,
    /// The delegating conversation, which the task's spend counts against.
    pub parent: ConversationKey,
    /// The delegating turn's spend against `--budget-turn-cap` (`None`:
    /// no cap).
    pub cap: Option<SharedSpend>,
    news: mpsc::Sender<TaskNews>,
}

impl Delegator {
    /// The task's turn answered with `answer`: the heart hands it back.
    pub(super) async fn hand_back(&self, answer: String) {
        let ended = TaskNews::Ended {
            id: self.task.clone(),
            ending: Ending::Done(answer),
        };
        if self.news.send(ended).await.is_err() {
            tracing::debug!("heart gone; the task's row stays journaled");
        }
    }
}

/// Every task of this daemon run.
#[derive(Debug)]
pub(super) struct Tasks {
    tasks: HashMap<String, Task>,
    /// Ended tasks, oldest first, for forgetting.
    ended: VecDeque<String>,
    next_id: u64,
    news_tx: mpsc::Sender<TaskNews>,
    /// Where the heart takes the tasks' news from.
    pub(super) news: mpsc::Receiver<TaskNews>,
}

impl Tasks {
    /// No task yet; new ids go on after every one the journal holds, in
    /// any state: the delegating conversation's session may resume and
    /// still name an old task, and `task_status` must not then answer
    /// about another. A journal that cannot be read is logged, and ids
    /// start at `t1` as before.
    pub(super) fn new(ledger: &Ledger) -> Self {
        let (news_tx, news) = mpsc::channel(NEWS_QUEUE);
        let mut tasks = Tasks {
            tasks: HashMap::new(),
            ended: VecDeque::new(),
            next_id: 0,
            news_tx,
            news,
        };
        match ledger.task_ids() {
            Ok(ids) => ids.iter().for_each(|id| {
                tasks.seen_id(id);
            }),
            Err(error) => tracing::error!(%error, "cannot read the journal's task ids; task ids start at t1"),
        }
        tasks
    }

    /// The ids of the conversation's tasks still running, oldest first.
    pub(super) fn running_in(&self, key: &ConversationKey) -> Vec<&str> {
        let mut running: Vec<(u64, &str)> = self
            .tasks
            .iter()
            .filter(|(_, task)| task.owner == *key && matches!(task.state, State::Running { .. }))
            .map(|(id, task)| (task.number, id.as_str()))
            .collect();
        running.sort_unstable();
        running.into_iter().map(|(_, id)| id).collect()
    }

    /// The conversation's task `id`; another conversation's is not found.
    fn of(&mut self, key: &ConversationKey, id: &str) -> Result<&mut Task, String> {
        self.tasks
            .get_mut(id.trim())
            .filter(|task| task.owner == *key)
            .ok_or_else(|| format!("no task {id} in this conversation"))
    }

    /// The task on the pool whose turns are the conversation `key`'s.
    fn at(&self, key: &ConversationKey) -> Option<(&String, &Task)> {
        self.tasks
            .iter()
            .find(|(_, task)| matches!(&task.work, Work::Pool { key: at } if at == key))
    }

    /// The keys of the tasks on the pool still running.
    fn running_on_pool(&self) -> impl Iterator<Item = &ConversationKey> {
        self.tasks
            .values()
            .filter_map(|task| match (&task.work, &task.state) {
                (Work::Pool { key }, State::Running { .. }) => Some(key),
                _ => None,
            })
    }

    /// The conversation whose budget a turn of `key` spends: a task's
    /// delegating one, else its own.
    pub(super) fn billed(&self, key: &ConversationKey) -> ConversationKey {
        self.at(key)
            .map_or_else(|| key.clone(), |(_, task)| task.owner.clone())
    }

    /// Whether the turns of `key` are a task's.
    pub(super) fn is_task(&self, key: &ConversationKey) -> bool {
        self.at(key).is_some()
    }

    /// Where the answer of a turn of `key` goes, for a task's turn: back
    /// to its delegator; `None` for any other turn (published).
    pub(super) fn delegator(&self, key: &ConversationKey) -> Option<Delegator> {
        let (id, task) = self.at(key)?;
        Some(Delegator {
            task: id.clone(),
            parent: task.owner.clone(),
            cap: task.cap.clone(),
            news: self.news_tx.clone(),
        })
    }

    /// A new task id; ids go on from the highest the journal named.
    fn next(&mut self) -> (u64, String) {
        self.next_id += 1;
        (self.next_id, format!("t{}", self.next_id))
    }

    /// The journal names task `id`: new ids go on after it.
    fn seen_id(&mut self, id: &str) -> u64 {
        let number = id.strip_prefix('t').and_then(|n| n.parse().ok()).unwrap_or(0);
        self.next_id = self.next_id.max(number);
        number
    }
}

/// What a `background: false` call of task `id` answers: the task's
/// result if it comes within `wait`, else that the task still runs. The
/// receiver is dropped on return, so a result that comes later finds it
/// gone and is delivered as a message instead (never lost, never twice).
async fn foreground_answer(id: &str, result: oneshot::Receiver<String>, wait: Duration) -> String {
    let waited = tokio::time::timeout(wait, result).await;
    match waited {
        Ok(Ok(result)) => result,
        _ => format!(
            "task {id} still runs after {} s; {FOREGROUND_LATER}",
            wait.as_secs()
        ),
    }
}

/// How a task's result reaches the delegating session when the tool call
/// does not return it.
const FOREGROUND_LATER: &str = "its result will reach you as a message framed by the bridge when it ends";

/// How many delegations deep the session of `key` is.
fn depth(key: &ConversationKey) -> usize {
    key.as_str().matches(TASK_SEGMENT).count()
}

/// An id for a row the heart journals itself (a task's, a result's),
/// which no relay event has: the hash of what it is and when it was made.
fn made_id(what: &str, of: &EventId) -> EventId {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let text = format!("acp-bridge {what} {} {nanos}", of.to_hex());
    EventId::from_byte_array(sha256::Hash::hash(text.as_bytes()).to_byte_array())
}

/// Task `id`'s result as a mention of its parent conversation, made from
/// `base` (where its answer threads): the content is `text`.
fn result_mention(base: &Mention, owner: &ConversationKey, id: &str, text: String) -> Mention {
    let mut result = base.clone();
    result.event_id = made_id(&format!("result of task {id}"), &base.event_id);
    result.conversation = owner.clone();
    result.content = text;
    result.intent = Intent::TaskResult { task: id.to_owned() };
    result.media.clear();
    result.accepted_at = nostr_sdk::prelude::Timestamp::now().as_secs();
    result
}

impl Heart {
    /// Starts a task for the conversation `key`, whose turn is in flight.
    pub(super) fn delegate(&mut self, key: &ConversationKey, call: DelegateCall, answer: Answer) {
        let started = self.start_task(key, &call);
        let id = match started {
            Ok(id) => id,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        if call.background {
            let _ = answer.send(Ok(format!("task {id} started; {FOREGROUND_LATER}")));
            return;
        }
        let (result_tx, result) = oneshot::channel();
        if let Some(task) = self.tasks.tasks.get_mut(&id) {
            task.foreground = Some(result_tx);
        }
        tokio::spawn(async move {
            let said = foreground_answer(&id, result, FOREGROUND_WAIT).await;
            let _ = answer.send(Ok(said));
        });
    }

    /// Checks the call against the bounds and starts its task; its id.
    fn start_task(&mut self, key: &ConversationKey, call: &DelegateCall) -> Result<String, String> {
        let sibling = match call.to.trim() {
            "self" => None,
            to => Some(self.sibling(to)?),
        };
        if depth(key) >= MAX_DELEGATION_DEPTH {
            return Err(format!(
                "this session runs a delegated task itself, and tasks may be delegated at most {MAX_DELEGATION_DEPTH} level(s) deep: do the work yourself"
            ));
        }
        let max_bytes = self.services.options.max_text_bytes;
        if call.prompt.trim().is_empty() {
            return Err("the task's prompt is empty".to_owned());
        }
        if call.prompt.len() > max_bytes {
            return Err(format!(
                "the task's prompt is {} bytes; at most {max_bytes}",
                call.prompt.len()
            ));
        }
        if self.tasks.running_in(key).len() >= MAX_OPEN_TASKS {
            return Err(format!(
                "this conversation already has {MAX_OPEN_TASKS} tasks running; wait for one to end or stop one"
            ));
        }
        let (under, turn_id, cap) = self
            .conversations
            .running(key)
            .map(|running| {
                let under = running.turn.working_on().clone();
                (under, running.turn_id, running.link.turn_spend())
            })
            .ok_or(
                "no turn is in flight in this conversation: delegate works only while you answer a message",
            )?;
        if sibling.is_some() && under.thread.is_direct() {
            return Err(
                "a private conversation cannot mention another bot: delegate to \"self\" here".to_owned(),
            );
        }
        self.may_spend_on_task(key, &under, cap.as_ref(), sibling.is_none())?;
        let (number, id) = self.tasks.next();
        let (work, row) = match sibling {
            None => {
                let mention = self.task_mention(key, &under, &id, &call.prompt)?;
                let work = Work::Pool {
                    key: mention.conversation.clone(),
                };
                (work, Some(mention))
            }
            Some(bot) => {
                let stop = CancellationToken::new();
                let news = self.tasks.news_tx.clone();
                self.hand_to_sibling(&under, bot, &id, &call.prompt, stop.clone(), news);
                let work = Work::Sibling {
                    bot,
                    posted: None,
                    stop,
                };
                (work, None)
            }
        };
        tracing::info!(conversation = %key, task_id = %id, background = call.background, "task started");
        let task = Task {
            number,
            owner: key.clone(),
            under,
            turn_id,
            cap,
            state: State::Running {
                since: Instant::now(),
            },
            foreground: None,
            work,
            row: row.clone(),
        };
        self.tasks.tasks.insert(id.clone(), task);
        if let Some(mention) = row {
            // Its turn waits for a slot as any turn; no waiting notice.
            self.requeue(mention);
        }
        Ok(id)
    }

    /// Task `id`'s turn's mention: `under`'s author in the conversation
    /// `<key>/task/<id>`, journaled before it is queued.
    fn task_mention(
        &self,
        key: &ConversationKey,
        under: &Mention,
        id: &str,
        prompt: &str,
    ) -> Result<Mention, String> {
        let mut mention = under.clone();
        mention.event_id = made_id(&format!("task {id}"), &under.event_id);
        mention.conversation = ConversationKey::from_journal(&format!("{key}{TASK_SEGMENT}{id}"));
        mention.content = prompt.to_owned();
        mention.intent = Intent::Task {
            task: id.to_owned(),
            parent: key.clone(),
        };
        mention.media.clear();
        mention.accepted_at = nostr_sdk::prelude::Timestamp::now().as_secs();
        match self.ledger.take_in(&[&mention], &[]) {
            Ok(_) => Ok(mention),
            Err(error) => {
                tracing::error!(conversation = %key, %error, "cannot journal a task");
                Err(format!(
                    "no task started: the bridge could not journal it ({error})"
                ))
            }
        }
    }

    /// Whether a task for the turn working on `under` may start: the
    /// budget of its author and conversation, the turn's cap, and (for a
    /// task on the pool) a free turn slot. Each refusal is the tool's
    /// error, for the model to read.
    fn may_spend_on_task(
        &self,
        key: &ConversationKey,
        under: &Mention,
        spend: Option<&SharedSpend>,
        on_pool: bool,
    ) -> Result<(), String> {
        if let Some(refusal) = self.budget_refusal(under) {
            tracing::info!(conversation = %key, scope = refusal.scope.label(), "task refused: budget spent");
            metrics::budget_refused(refusal.scope.label());
            return Err(format!("no task started: {}", refusal.reason()));
        }
        if let Some(reached) = spend.and_then(|spend| spend.lock().reached().cloned()) {
            return Err(format!(
                "no task started: this turn reached the per-turn spending cap ({} of {})",
                reached.cap.show(reached.spent),
                reached.cap
            ));
        }
        let capacity = self.settings.capacity;
        let busy = self.conversations.running_count() + self.tasks_waiting_for_a_turn();
        if on_pool && busy >= capacity {
            tracing::info!(conversation = %key, busy, capacity, "task refused: every turn slot is taken");
            return Err(format!(
                "no task started: every agent turn is taken ({busy} of {capacity}); do the work in this turn, or delegate once one has ended"
            ));
        }
        Ok(())
    }

    /// Tasks on the pool whose turn has not started yet: each will take a
    /// slot.
    fn tasks_waiting_for_a_turn(&self) -> usize {
        self.tasks
            .running_on_pool()
            .filter(|key| self.conversations.running(key).is_none())
            .count()
    }

    /// A task's turn just started for `key`: a task stopped while it
    /// waited for it is cancelled at once (the cancel ends it before the
    /// agent is prompted).
    pub(super) fn task_turn_started(&mut self, key: &ConversationKey) {
        let ended = self
            .tasks
            .at(key)
            .is_some_and(|(_, task)| matches!(task.state, State::Ended(_)));
        if ended {
            self.step(key, Input::OwnerCancel);
        }
    }

    /// A task's row, journaled before the last stop, resumes: the task is
    /// known again (with no turn of its parent's in flight) and its turn
    /// queued.
    pub(super) fn resume_task(&mut self, mention: Mention, id: &str, parent: ConversationKey) {
        let number = self.tasks.seen_id(id);
        let mut under = mention.clone();
        under.conversation = parent.clone();
        under.intent = Intent::Turn;
        let cap = self.services.budget.turn_spend().map(SharedSpend::new);
        tracing::info!(conversation = %parent, task_id = %id, "task resumed");
        let task = Task {
            number,
            owner: parent,
            under,
            turn_id: 0,
            cap,
            state: State::Running {
                since: Instant::now(),
            },
            foreground: None,
            work: Work::Pool {
                key: mention.conversation.clone(),
            },
            row: Some(mention.clone()),
        };
        self.tasks.tasks.insert(id.to_owned(), task);
        self.requeue(mention);
    }

    /// The turn of `key`, a task's, ended with `outcome` (see
    /// `Heart::on_turn_end`): its ending, never a notice or a retry. An
    /// answer came as the task's news already; a turn abandoned or failed
    /// while the daemon stops leaves its row pending for the next start.
    pub(super) fn task_turn_ended(&mut self, key: &ConversationKey, outcome: &Outcome) {
        let Some(id) = self.tasks.at(key).map(|(id, _)| id.clone()) else {
            return;
        };
        if *outcome == Outcome::Abandoned {
            return;
        }
        // One prompt: its session, MCP token and records are not kept.
        self.services.forgetting.forget(key);
        if self.draining {
            return;
        }
        let ending = match outcome {
            Outcome::Answered | Outcome::Notified | Outcome::Abandoned => return,
            Outcome::CancelledByOwner => Ending::Stopped,
            Outcome::Capped(notice) => Ending::Capped(notice.clone()),
            Outcome::Failed(TurnFailure::Pool(error)) => {
                Ending::Failed(format!("no agent for the task: {error}"))
            }
            Outcome::Failed(failure) => Ending::Failed(failure.to_string()),
        };
        self.on_task_ended(id, ending);
    }

    /// The budget refused a task's turn as it was to start: the task
    /// fails with the refusal, its result going back as any.
    pub(super) fn task_refused(&mut self, mention: &Mention, reason: String) -> bool {
        let Some(id) = self.tasks.at(&mention.conversation).map(|(id, _)| id.clone()) else {
            return false;
        };
        self.on_task_ended(id, Ending::Failed(format!("no task started: {reason}")));
        true
    }

    /// What a task's work reports.
    pub(super) fn on_task_news(&mut self, news: TaskNews) {
        match news {
            TaskNews::Ended { id, ending } => self.on_task_ended(id, ending),
            TaskNews::Posted { id, event } => {
                if let Some(Task {
                    work: Work::Sibling { posted, .. },
                    ..
                }) = self.tasks.tasks.get_mut(&id)
                {
                    *posted = Some(event);
                }
            }
        }
    }

    /// A task ended: its result goes to a foreground call still waiting,
    /// else, journaled first, into the delegating conversation (see the
    /// module doc). A task that took its turn past the per-turn cap ends
    /// that turn instead.
    fn on_task_ended(&mut self, id: String, ending: Ending) {
        let capped = match &ending {
            Ending::Capped(notice) => Some(notice.clone()),
            _ => None,
        };
        let text = ending.result_text();
        // A task ends once: a stop after a sibling's reply changes nothing.
        let Some(ended) = self.settle_task(&id, ending) else {
            return;
        };
        if let Some(notice) = capped {
            self.hand_back(&ended, None);
            return self.task_capped(ended, notice);
        }
        if ended.returned {
            self.hand_back(&ended, None);
            return;
        }
        // In a live turn the result joins the mention it works on now, so
        // the turn's answer still threads under that one.
        let live = self
            .conversations
            .running(&ended.owner)
            .map(|running| running.turn.working_on().clone());
        let steer = live.is_some();
        let base = live.as_ref().unwrap_or(&ended.under);
        let result = result_mention(base, &ended.owner, &id, text);
        if !self.hand_back(&ended, Some(&result)) {
            return;
        }
        let owner = ended.owner;
        if steer {
            tracing::info!(conversation = %owner, task_id = %id, "task result steered into the live turn");
            self.step(
                &owner,
                Input::Absorb {
                    mentions: vec![result],
                    framing: Framing::Steer,
                },
            );
        } else {
            tracing::info!(conversation = %owner, task_id = %id, "task result starts the next turn");
            self.requeue(result);
        }
    }

    /// Journals that the task `ended` handed back `result` (`None`:
    /// nothing to deliver): its row finished, the result pending in the
    /// parent conversation, together. False when its row was finished
    /// before (its result is not delivered again); a store error is
    /// logged and the result delivered all the same.
    fn hand_back(&self, ended: &EndedTask, result: Option<&Mention>) -> bool {
        let finish = match (result, ended.returned) {
            (None, false) => Finish::Dropped,
            _ => Finish::Answered,
        };
        self.ledger
            .hand_back(ended.row.as_ref(), finish, result)
            .unwrap_or_else(|error| {
                tracing::error!(conversation = %ended.owner, %error, "cannot journal a task's result");
                true
            })
    }

    /// Marks the running task `id` ended (counted, logged, its result
    /// handed to a foreground call still waiting for it); `None` when it
    /// had already ended.
    fn settle_task(&mut self, id: &str, ending: Ending) -> Option<EndedTask> {
        let task = self
            .tasks
            .tasks
            .get_mut(id)
            .filter(|task| matches!(task.state, State::Running { .. }))?;
        metrics::delegated_task(ending.label());
        tracing::info!(conversation = %task.owner, task_id = %id, outcome = ending.label(), "task ended");
        let text = ending.result_text();
        task.state = State::Ended(ending);
        if let Work::Sibling { stop, .. } = &task.work {
            stop.cancel();
        }
        let foreground = task.foreground.take();
        let ended = EndedTask {
            owner: task.owner.clone(),
            under: task.under.clone(),
            turn_id: task.turn_id,
            row: task.row.clone(),
            returned: foreground.is_some_and(|waiting| waiting.send(text).is_ok()),
        };
        if ended.returned {
            tracing::info!(task_id = %id, "task result returned to the waiting tool call");
        }
        self.tasks.ended.push_back(id.to_owned());
        if self.tasks.ended.len() > ENDED_TASKS_KEPT
            && let Some(oldest) = self.tasks.ended.pop_front()
        {
            self.tasks.tasks.remove(&oldest);
        }
        Some(ended)
    }

    /// A task took its turn past the per-turn cap: the turn, if still in
    /// flight, ends capped (its people told, its other tasks stopped);
    /// else the people under its mention are told. Its result is not
    /// delivered: another turn would spend past the cap.
    fn task_capped(&mut self, ended: EndedTask, notice: String) {
        let live = self
            .conversations
            .running(&ended.owner)
            .is_some_and(|running| running.turn_id == ended.turn_id);
        if live {
            self.step(&ended.owner, Input::CapReached(notice));
        } else {
            self.notices.inform(ended.under, notice);
        }
    }

    /// Turn `turn_id` of `key` ended at the per-turn cap (`notice`): its
    /// tasks still running stop, and end capped without a result.
    pub(in crate::heart) fn stop_tasks_of_capped_turn(
        &mut self,
        key: &ConversationKey,
        turn_id: u64,
        notice: &str,
    ) {
        let of_turn: Vec<String> = self
            .tasks
            .tasks
            .iter()
            .filter(|(_, task)| task.owner == *key && task.turn_id == turn_id)
            .filter(|(_, task)| matches!(task.state, State::Running { .. }))
            .map(|(id, _)| id.clone())
            .collect();
        for id in of_turn {
            if let Some(ended) = self.settle_task(&id, Ending::Capped(notice.to_owned())) {
                self.hand_back(&ended, None);
            }
            self.stop_turn_of(&id);
        }
    }

    /// Cancels the turn of task `id`, if it is on the pool and running.
    fn stop_turn_of(&mut self, id: &str) {
        let key = match self.tasks.tasks.get(id) {
            Some(Task {
                work: Work::Pool { key },
                ..
            }) => key.clone(),
            _ => return,
        };
        if self.conversations.running(&key).is_some() {
            self.step(&key, Input::OwnerCancel);
        }
    }

    /// `task_status`: where the conversation's task stands.
    pub(super) fn task_status(&mut self, key: &ConversationKey, id: &str) -> Result<String, String> {
        let task = self.tasks.of(key, id)?;
        Ok(match &task.state {
            State::Running { since } => {
                format!("task {id} is running (for {} s)", since.elapsed().as_secs())
            }
            State::Ended(Ending::Done(message)) => format!("task {id} is done; its result: {message}"),
            State::Ended(Ending::Failed(why)) => format!("task {id} failed: {why}"),
            State::Ended(Ending::Stopped) => format!("task {id} was stopped"),
            State::Ended(Ending::Capped(_)) => format!("task {id} was stopped at the per-turn spending cap"),
        })
    }

    /// `task_stop`: cancels the conversation's running task (its turn, as
    /// the owner's `!cancel` would); it then reports back as stopped. A
    /// task still waiting for its turn is stopped at once.
    pub(super) fn task_stop(&mut self, key: &ConversationKey, id: &str) -> Result<String, String> {
        let id = id.trim().to_owned();
        let task = self.tasks.of(key, &id)?;
        if let State::Ended(ending) = &task.state {
            return Err(format!("task {id} has already ended ({})", ending.label()));
        }
        tracing::info!(conversation = %key, task_id = %id, "stopping a task");
        match &task.work {
            Work::Sibling { stop, .. } => stop.cancel(),
            Work::Pool { key: at } if self.conversations.running(at).is_some() => {
                let at = at.clone();
                self.step(&at, Input::OwnerCancel);
            }
            Work::Pool { .. } => self.on_task_ended(id.clone(), Ending::Stopped),
        }
        Ok(format!(
            "task {id} is stopping; you will be told once it has stopped"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_foreground_call_returns_the_result_in_time_and_leaves_a_late_one_to_be_delivered() {
        let (sender, result) = oneshot::channel();
        sender.send("42".to_owned()).expect("send");
        assert_eq!(
            foreground_answer("t1", result, Duration::from_secs(5)).await,
            "42"
        );

        let (sender, result) = oneshot::channel::<String>();
        let said = foreground_answer("t2", result, Duration::from_millis(10)).await;
        assert!(said.starts_with("task t2 still runs"), "{said}");
        assert!(
            sender.send("late".to_owned()).is_err(),
            "a late result is refused here, so the heart delivers it as a message"
        );
    }

    #[test]
    fn the_rows_the_heart_makes_have_ids_no_event_has() {
        let under = acp_bridge_core::mention::test_mention("room", 1, "", true);
        let task = made_id("task t1", &under.event_id);
        let other = made_id("task t2", &under.event_id);
        let base = ConversationKey::from_journal("group:room");
        let result = result_mention(&under, &base, "t1", "42".to_owned());
        assert_ne!(task, under.event_id);
        assert_ne!(task, other);
        assert_ne!(result.event_id, under.event_id);
        assert_eq!(
            result.thread, under.thread,
            "the result threads where its base does"
        );
        assert_eq!(
            result.intent,
            Intent::TaskResult {
                task: "t1".to_owned()
            }
        );
    }

    #[test]
    fn depth_counts_the_task_segments_of_a_key() {
        assert_eq!(depth(&ConversationKey::from_journal("group:room")), 0);
        assert_eq!(depth(&ConversationKey::from_journal("group:room/task/t1")), 1);
        assert_eq!(
            depth(&ConversationKey::from_journal("group:room/task/t1/task/t2")),
            2
        );
    }

    #[test]
    fn each_ending_tells_the_delegating_session_what_became_of_the_task() {
        assert_eq!(Ending::Done("42".to_owned()).result_text(), "42");
        assert!(Ending::Failed("boom".to_owned()).result_text().contains("boom"));
        assert!(Ending::Stopped.result_text().contains("stopped"));
        let labels: Vec<&str> = [
            Ending::Done(String::new()),
            Ending::Failed(String::new()),
            Ending::Stopped,
        ]
        .iter()
        .map(Ending::label)
        .collect();
        assert_eq!(labels, ["done", "failed", "stopped"]);
    }
}
