//! When a running turn shows its progress, and what it says
//! (docs/progress.md): the per-turn clock its driver runs.
//!
//! Past `--progress-after` the turn gets one interim message in its thread;
//! a newer one only when the work's milestone advanced, at most once per
//! `--progress-every`, and each newer one deletes the one before; once the
//! answer (or the closing notice) is out, [`Progress::finish`] deletes the
//! last, so a finished thread reads mention, answer. At most
//! [`MAX_MESSAGES`] per turn whatever happens; in a DM, whose deletions no
//! client honours, at most [`MAX_DM_MESSAGES`], never deleted. Beside
//! them, in public threads, an ephemeral activity event every
//! `--activity-every`, and one saying the turn ended.
//!
//! What they say is the turn's work record (`acp_bridge_core::work`): the
//! driver lends it to each call, locked only while it is read, never
//! across a publish.
//!
//! A failed publish is logged and never fails the turn: progress is
//! courtesy, the answer is what counts (and progress messages are labelled
//! interim, so nothing takes one for the answer).

use acp_bridge_core::mention::Mention;
use acp_bridge_core::work::{PlanStatus, WorkLog};
use nostr_sdk::prelude::EventId;
use tokio::time::Instant;

use crate::outbound::reply::{Activity, ActivityState, PlanItem, ProgressSettings, Replier, ToolNow};

/// Progress messages of one turn, at most.
pub(super) const MAX_MESSAGES: u32 = 5;
/// Progress messages of one turn in a DM or an encrypted group, at most:
/// the threshold's and one more, as they are never deleted.
pub(super) const MAX_DM_MESSAGES: u32 = 2;

/// One turn's progress: what it posted and when it acts next.
#[derive(Debug)]
pub(super) struct Progress {
    settings: ProgressSettings,
    /// The turn's mentions, the newest last: the thread it answers in.
    mentions: Vec<Mention>,
    started: Instant,
    /// Progress messages posted so far.
    posted: u32,
    /// The newest progress message, while it stands (public threads).
    standing: Option<EventId>,
    /// When the newest progress message went out.
    last_post: Option<Instant>,
    /// The work's milestone the newest progress message showed.
    milestone: u64,
    /// When the next activity event is due (`None`: none).
    next_activity: Option<Instant>,
    /// Activity events sent so far.
    activities: u32,
}

/// What is due now, taken from the work while it was lent.
#[derive(Debug, Default)]
pub(super) struct Step {
    activity: Option<Activity>,
    /// A progress message's text.
    message: Option<String>,
}

impl Progress {
    /// The clock of a turn answering `batch`, started now.
    pub(super) fn new(settings: ProgressSettings, batch: &[Mention]) -> Self {
        let started = Instant::now();
        let direct = batch.last().is_none_or(|newest| newest.thread.is_private());
        let next_activity = match direct {
            true => None,
            false => settings.activity_every.map(|every| started + every),
        };
        Progress {
            settings,
            mentions: batch.to_vec(),
            started,
            posted: 0,
            standing: None,
            last_post: None,
            milestone: 0,
            next_activity,
            activities: 0,
        }
    }

    /// When [`Progress::step`] has something to do next, `work` as it
    /// is (`None`: nothing unless the work moves on).
    pub(super) fn due(&self, work: &WorkLog) -> Option<Instant> {
        let message = self.next_message(work.milestone());
        [message, self.next_activity].into_iter().flatten().min()
    }

    /// What is due now of `work`: an activity event, a progress message
    /// (counted as sent: a failed one is not tried again).
    pub(super) fn step(&mut self, work: &WorkLog) -> Step {
        let now = Instant::now();
        let mut step = Step::default();
        if let Some(every) = self.settings.activity_every
            && self.next_activity.is_some_and(|at| at <= now)
        {
            self.next_activity = Some(now + every);
            step.activity = Some(self.activity(work, ActivityState::Working, now));
        }
        if self.next_message(work.milestone()).is_some_and(|at| at <= now) {
            self.posted += 1;
            self.last_post = Some(now);
            self.milestone = work.milestone();
            step.message = Some(progress_text(work, now - self.started));
        }
        step
    }

    /// The last step, once the turn is over: the activity event saying it
    /// ended, to those who had its activity.
    pub(super) fn last_step(&mut self, work: &WorkLog) -> Step {
        let ended = (self.activities > 0).then(|| self.activity(work, ActivityState::Ended, Instant::now()));
        self.next_activity = None;
        Step {
            activity: ended,
            message: None,
        }
    }

    /// Sends `step`.
    pub(super) async fn send(&mut self, replier: &Replier, step: Step) {
        if let Some(activity) = step.activity {
            self.send_activity(replier, &activity).await;
        }
        if let Some(text) = step.message {
            self.post(replier, &text).await;
        }
    }

    /// The turn's answer or closing notice is out (or the turn ended
    /// without one): deletes the standing progress message after it, and
    /// sends `last` ([`Progress::last_step`]).
    pub(super) async fn finish(&mut self, replier: &Replier, last: Step) {
        if let Some(standing) = self.standing.take() {
            self.retract(replier, standing).await;
        }
        self.send(replier, last).await;
        crate::telemetry::info_when!(
            self.posted + self.activities > 0,
            progress_messages = self.posted,
            activity_events = self.activities,
            "the turn's progress ended"
        );
    }

    /// When the next progress message is due, the work being at
    /// `milestone`: the first past the threshold, a newer one once the
    /// milestone moved and the interval passed, none past the cap.
    fn next_message(&self, milestone: u64) -> Option<Instant> {
        let after = self.settings.after?;
        if self.posted >= self.cap() {
            return None;
        }
        match self.last_post {
            None => Some(self.started + after),
            Some(last) if milestone > self.milestone => Some(last + self.settings.every),
            Some(_) => None,
        }
    }

    fn direct(&self) -> bool {
        self.mentions
            .last()
            .is_none_or(|newest| newest.thread.is_private())
    }

    fn cap(&self) -> u32 {
        match self.direct() {
            true => MAX_DM_MESSAGES,
            false => MAX_MESSAGES,
        }
    }

    /// Posts `text` as the newest progress message, then deletes the one
    /// before it (never in a DM).
    async fn post(&mut self, replier: &Replier, text: &str) {
        let Some(newest) = self.mentions.last() else {
            return;
        };
        let posted = match replier.post_progress(newest, text).await {
            Ok(posted) => posted,
            Err(error) => {
                return tracing::warn!(%error, "cannot post a progress message; the turn goes on");
            }
        };
        tracing::info!(progress_message = %posted, count = self.posted, "posted a progress message");
        if self.direct() {
            return;
        }
        if let Some(before) = self.standing.replace(posted) {
            self.retract(replier, before).await;
        }
    }

    async fn retract(&self, replier: &Replier, message: EventId) {
        let Some(newest) = self.mentions.last() else {
            return;
        };
        match replier.retract(newest, &[message]).await {
            Ok(deletion) => {
                tracing::info!(progress_message = %message, %deletion, "deleted a progress message")
            }
            Err(error) => {
                tracing::warn!(%error, progress_message = %message, "cannot delete a progress message")
            }
        }
    }

    async fn send_activity(&mut self, replier: &Replier, activity: &Activity) {
        self.activities += 1;
        if let Err(error) = replier.send_activity(&self.mentions, activity).await {
            tracing::warn!(%error, "cannot send an activity event");
        }
    }

    /// The activity event's content: `work` as of `now`.
    fn activity(&self, work: &WorkLog, state: ActivityState, now: Instant) -> Activity {
        let plan = work.plan().iter().map(|entry| PlanItem {
            content: entry.content.clone(),
            status: status_word(entry.status).to_owned(),
        });
        let tool = work.running().map(|call| ToolNow {
            title: call.title.clone(),
            kind: call.kind.as_str().to_owned(),
        });
        Activity {
            v: 1,
            state,
            elapsed_s: (now - self.started).as_secs(),
            plan: plan.collect(),
            tool,
            tools_done: work.tools_done(),
        }
    }
}

/// A plan entry's status as ACP words it.
fn status_word(status: PlanStatus) -> &'static str {
    match status {
        PlanStatus::Pending => "pending",
        PlanStatus::InProgress => "in_progress",
        PlanStatus::Completed => "completed",
    }
}

/// A progress message: the work's progress text (how long, the plan as a
/// checklist, the call running now), its first line saying it is interim.
fn progress_text(work: &WorkLog, elapsed: std::time::Duration) -> String {
    let text = work.progress_text(elapsed);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let rest = match rest {
        "" => String::new(),
        rest => format!("\n{rest}"),
    };
    format!("⏳ {first} — interim; the answer follows.{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_message_says_first_that_it_is_interim_then_the_work() {
        let mut work = WorkLog::default();
        let idle = progress_text(&work, std::time::Duration::from_secs(25));
        assert_eq!(idle, "⏳ Working for 25 s — interim; the answer follows.");
        work.observe_plan(&serde_json::json!([
            {"content": "read the code", "status": "completed"},
            {"content": "fix it", "status": "in_progress"}
        ]));
        let planned = progress_text(&work, std::time::Duration::from_secs(25));
        let lines: Vec<&str> = planned.lines().collect();
        assert_eq!(lines[0], "⏳ Working for 25 s — interim; the answer follows.");
        assert!(lines[1..].iter().any(|line| line.contains("fix it")), "{planned}");
    }
}
