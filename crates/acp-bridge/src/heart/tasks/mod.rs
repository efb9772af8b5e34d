//! Delegated tasks: the heart's side of the `delegate`, `task_status` and
//! `task_stop` tools (issue 24 §1).
//!
//! `delegate(prompt, to: "self")` starts a task: one prompt on a fresh
//! session of the pool (see [`runner`]), seeded
//! with the prompt alone under the bridge's framing. The tool answers with
//! the task's id at once (`background`, the default), or waits for the
//! result for at most [`FOREGROUND_WAIT`], below the agents' own MCP tool
//! timeouts (codex and goose: 300 s), and then says the task still runs.
//!
//! When a task ends (done, failed, or stopped) its result goes back to the
//! conversation that delegated it, framed as the result of task T in the
//! bridge's own words (`prompt::quote_message`): into the turn in flight
//! through the steer path (native steer where the agent has one, else
//! cancel + merge, as a steered mention; the turn's answer still threads
//! under the mention it works on), or, with no turn in flight, as the work
//! of the conversation's next turn, answered in the thread under the
//! mention whose turn delegated. A result the foreground wait took as the
//! tool's answer is not delivered again.
//!
//! Bounds: a task's session gets its own MCP token, bound to the task's
//! key, whose depth is the number of `/task/` in it; a session at depth
//! [`MAX_DELEGATION_DEPTH`] cannot delegate. A conversation has at most
//! [`MAX_OPEN_TASKS`] tasks running. A task on the pool takes one of the
//! heart's turn slots (`--agents` × `--turns-per-agent`) until it ends,
//! as a turn does; with none free the call is refused rather than made to
//! wait, so a parent waiting for its task cannot deadlock the pool.
//!
//! Budgets: a task is work for the delegating turn's author (the author
//! of the mention it works on) in its conversation. The budget is checked
//! before a task starts, and a refusal is the tool's error; a task on the
//! pool counts one turn when it starts, and what its prompt spends counts
//! against that author and conversation and against the delegating
//! turn's `--budget-turn-cap` (see [`runner`]). A task that takes the turn
//! past its cap ends the turn as capped (its people told); a turn that
//! ends capped stops its tasks.
//!
//! `to: <sibling bot>` hands the task to a sibling bot instead (see
//! [`sibling`]); its reply is the result, which goes the same way.
//!
//! Tasks live in memory only: a daemon restart loses running tasks and
//! their results (the delegating turn's mention resumes and the agent can
//! delegate again). While the daemon runs no result is lost: every task
//! ends in one of its endings and reports it (a capped one by ending its
//! turn at the cap, or telling its people when that turn is over).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{EventId, PublicKey};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod runner;
mod sibling;

use acp_bridge_core::mention::{ConversationKey, Intent};
use acp_bridge_core::prompt::{self, Framing};
use acp_bridge_core::turn::Input;

use super::Heart;
use super::tools::Answer;
use crate::budget::turn_cap::SharedSpend;
use crate::mcp::{DelegateCall, FOREGROUND_WAIT};
use crate::telemetry::metrics;

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
    Running { stop: CancellationToken, since: Instant },
    Ended(Ending),
}

#[derive(Debug)]
struct Task {
    /// Its place in the order tasks were started in.
    number: u64,
    /// The conversation that delegated it: the only one that sees it.
    owner: ConversationKey,
    /// The mention whose turn delegated it: its result is answered under it.
    under: acp_bridge_core::mention::Mention,
    /// That turn's id: a task that takes it past its cap ends it.
    turn_id: u64,
    state: State,
    /// A `background: false` call still waiting for the result.
    foreground: Option<oneshot::Sender<String>>,
    /// Handed to this sibling bot, by this message once posted: its reply
    /// to that message is the result.
    sibling: Option<(PublicKey, Option<EventId>)>,
}

/// A task just ended, as its delivery needs it.
#[derive(Debug)]
struct EndedTask {
    owner: ConversationKey,
    under: acp_bridge_core::mention::Mention,
    turn_id: u64,
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

impl Default for Tasks {
    fn default() -> Self {
        let (news_tx, news) = mpsc::channel(NEWS_QUEUE);
        Tasks {
            tasks: HashMap::new(),
            ended: VecDeque::new(),
            next_id: 0,
            news_tx,
            news,
        }
    }
}

impl Tasks {
    /// How many tasks run on the pool, each in a turn slot.
    pub(super) fn on_pool(&self) -> usize {
        self.tasks
            .values()
            .filter(|task| task.sibling.is_none() && matches!(task.state, State::Running { .. }))
            .count()
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
        let (under, turn_id, spend) = self
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
        self.may_spend_on_task(key, &under, spend.as_ref(), sibling.is_none())?;
        self.tasks.next_id += 1;
        let id = format!("t{}", self.tasks.next_id);
        let stop = CancellationToken::new();
        let news = self.tasks.news_tx.clone();
        match sibling {
            None => {
                let now = crate::store::sql_now();
                self.services.budget.turn_started(key, &under.author, now);
                let payer = runner::Payer {
                    budget: self.services.budget.clone(),
                    sessions: self.services.sessions.clone(),
                    conversation: key.clone(),
                    author: under.author,
                    cap: spend,
                    task: id.clone(),
                };
                self.run_on_self(key, &id, &call.prompt, payer, (stop.clone(), news))
            }
            Some(bot) => self.hand_to_sibling(&under, bot, &id, &call.prompt, stop.clone(), news),
        }
        tracing::info!(conversation = %key, task_id = %id, background = call.background, "task started");
        self.tasks.tasks.insert(
            id.clone(),
            Task {
                number: self.tasks.next_id,
                owner: key.clone(),
                under,
                turn_id,
                state: State::Running {
                    stop,
                    since: Instant::now(),
                },
                foreground: None,
                sibling: sibling.map(|bot| (bot, None)),
            },
        );
        Ok(id)
    }

    /// Whether a task for the turn working on `under` may start: the
    /// budget of its author and conversation, the turn's cap, and (for a
    /// task on the pool) a free turn slot. Each refusal is the tool's
    /// error, for the model to read.
    fn may_spend_on_task(
        &self,
        key: &ConversationKey,
        under: &acp_bridge_core::mention::Mention,
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
        let busy = self.conversations.running_count() + self.tasks.on_pool();
        if on_pool && busy >= capacity {
            tracing::info!(conversation = %key, busy, capacity, "task refused: every turn slot is taken");
            return Err(format!(
                "no task started: every agent turn is taken ({busy} of {capacity}); do the work in this turn, or delegate once one has ended"
            ));
        }
        Ok(())
    }

    /// Runs the task on a fresh session of the pool, on `payer`'s account.
    fn run_on_self(
        &self,
        key: &ConversationKey,
        id: &str,
        prompt: &str,
        payer: runner::Payer,
        (stop, news): (CancellationToken, mpsc::Sender<TaskNews>),
    ) {
        let task_key = ConversationKey::from_journal(&format!("{key}{TASK_SEGMENT}{id}"));
        let span = tracing::info_span!("task", task_id = %id, conversation = %task_key);
        let run = runner::Run {
            pool: self.services.pool.clone(),
            // A task runs on its conversation's profile.
            profile: self.services.profiles.of(key),
            options: self.services.options,
            key: task_key,
            prompt: prompt::task_prompt(id, prompt),
            forgetting: self.services.forgetting.clone(),
        };
        let run = runner::run(run, payer, stop);
        let id = id.to_owned();
        tokio::spawn(
            async move {
                let ending = run.await;
                let _ = news.send(TaskNews::Ended { id, ending }).await;
            }
            .instrument(span),
        );
    }

    /// What a task's work reports.
    pub(super) fn on_task_news(&mut self, news: TaskNews) {
        match news {
            TaskNews::Ended { id, ending } => self.on_task_ended(id, ending),
            TaskNews::Posted { id, event } => {
                if let Some(Task {
                    sibling: Some((_, posted)),
                    ..
                }) = self.tasks.tasks.get_mut(&id)
                {
                    *posted = Some(event);
                }
            }
        }
    }

    /// A task ended: its result goes to a foreground call still waiting,
    /// else into the delegating conversation (see the module doc). A task
    /// that took its turn past the per-turn cap ends that turn instead.
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
            return self.task_capped(ended, notice);
        }
        if ended.returned {
            return;
        }
        let EndedTask { owner, under, .. } = ended;
        // In a live turn the result joins the mention it works on now, so
        // the turn's answer still threads under that one.
        let live = self
            .conversations
            .running(&owner)
            .map(|running| running.turn.working_on().clone());
        let steer = live.is_some();
        let mut result = live.unwrap_or(under);
        result.content = text;
        result.intent = Intent::TaskResult { task: id.clone() };
        result.media.clear();
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
        let foreground = task.foreground.take();
        let ended = EndedTask {
            owner: task.owner.clone(),
            under: task.under.clone(),
            turn_id: task.turn_id,
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
            .filter_map(|(id, task)| match &task.state {
                State::Running { stop, .. } => {
                    stop.cancel();
                    Some(id.clone())
                }
                State::Ended(_) => None,
            })
            .collect();
        for id in of_turn {
            self.settle_task(&id, Ending::Capped(notice.to_owned()));
        }
    }

    /// `task_status`: where the conversation's task stands.
    pub(super) fn task_status(&mut self, key: &ConversationKey, id: &str) -> Result<String, String> {
        let task = self.tasks.of(key, id)?;
        Ok(match &task.state {
            State::Running { since, .. } => {
                format!("task {id} is running (for {} s)", since.elapsed().as_secs())
            }
            State::Ended(Ending::Done(message)) => format!("task {id} is done; its result: {message}"),
            State::Ended(Ending::Failed(why)) => format!("task {id} failed: {why}"),
            State::Ended(Ending::Stopped) => format!("task {id} was stopped"),
            State::Ended(Ending::Capped(_)) => format!("task {id} was stopped at the per-turn spending cap"),
        })
    }

    /// `task_stop`: cancels the conversation's running task; it then
    /// reports back as stopped.
    pub(super) fn task_stop(&mut self, key: &ConversationKey, id: &str) -> Result<String, String> {
        let task = self.tasks.of(key, id)?;
        match &task.state {
            State::Running { stop, .. } => {
                stop.cancel();
                tracing::info!(conversation = %key, task_id = %id, "stopping a task");
                Ok(format!(
                    "task {id} is stopping; you will be told once it has stopped"
                ))
            }
            State::Ended(ending) => Err(format!("task {id} has already ended ({})", ending.label())),
        }
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
