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
//! A failed publish is logged and never fails the turn: progress is
//! courtesy, the answer is what counts (and progress messages are labelled
//! interim, so nothing takes one for the answer).

use std::time::Duration;

use acp_bridge_core::mention::Mention;
use nostr_sdk::prelude::EventId;
use tokio::time::Instant;

use crate::outbound::reply::{Activity, ActivityState, ProgressSettings, Replier};

/// Progress messages of one turn, at most.
pub(super) const MAX_MESSAGES: u32 = 5;
/// Progress messages of one turn in a DM, at most: the threshold's and one
/// more, as they are never deleted.
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

/// What the turn's work looks like now.
#[derive(Debug)]
struct View {
    milestone: u64,
    text: String,
    activity: Activity,
}

impl Progress {
    /// The clock of a turn answering `batch`, started now.
    pub(super) fn new(settings: ProgressSettings, batch: &[Mention]) -> Self {
        let started = Instant::now();
        let direct = batch.last().is_none_or(|newest| newest.thread.is_direct());
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

    /// When [`Progress::tick`] has something to do next (`None`: nothing
    /// unless the work moves on).
    pub(super) fn due(&self) -> Option<Instant> {
        let message = self.next_message(self.view(Instant::now()).milestone);
        [message, self.next_activity].into_iter().flatten().min()
    }

    /// Sends what is due: an activity event, a progress message.
    pub(super) async fn tick(&mut self, replier: &Replier) {
        let now = Instant::now();
        let view = self.view(now);
        if let Some(every) = self.settings.activity_every
            && self.next_activity.is_some_and(|at| at <= now)
        {
            self.next_activity = Some(now + every);
            self.send_activity(replier, &view.activity).await;
        }
        if self.next_message(view.milestone).is_some_and(|at| at <= now) {
            self.post(replier, view, now).await;
        }
    }

    /// The turn's answer or closing notice is out (or the turn ended
    /// without one): deletes the standing progress message after it, and
    /// says the turn ended to those who had its activity.
    pub(super) async fn finish(&mut self, replier: &Replier) {
        if let Some(standing) = self.standing.take() {
            self.retract(replier, standing).await;
        }
        if self.activities > 0 {
            let mut ended = self.view(Instant::now()).activity;
            ended.state = ActivityState::Ended;
            self.send_activity(replier, &ended).await;
        }
        tracing::info!(
            progress_messages = self.posted,
            activity_events = self.activities,
            "the turn's progress ended"
        );
        self.next_activity = None;
        self.posted = self.cap();
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
            .is_none_or(|newest| newest.thread.is_direct())
    }

    fn cap(&self) -> u32 {
        match self.direct() {
            true => MAX_DM_MESSAGES,
            false => MAX_MESSAGES,
        }
    }

    /// Posts `view` as the newest progress message, then deletes the one
    /// before it (never in a DM).
    async fn post(&mut self, replier: &Replier, view: View, now: Instant) {
        self.posted += 1;
        self.last_post = Some(now);
        self.milestone = view.milestone;
        let Some(newest) = self.mentions.last() else {
            return;
        };
        let posted = match replier.post_progress(newest, &view.text).await {
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

    /// The turn's work as of `now`.
    fn view(&self, now: Instant) -> View {
        let elapsed = now.saturating_duration_since(self.started);
        View {
            milestone: 0,
            text: interim_line(elapsed),
            activity: Activity {
                v: 1,
                state: ActivityState::Working,
                elapsed_s: elapsed.as_secs(),
                plan: Vec::new(),
                tool: None,
                tools_done: 0,
            },
        }
    }
}

/// The first line of every progress message: it says it is interim, and
/// for how long the agent has worked.
fn interim_line(elapsed: Duration) -> String {
    format!("⏳ Working for {} — interim; the answer follows.", words(elapsed))
}

/// `elapsed` in a reader's words: `25 s`, `3 min 5 s`, `1 h 2 min`.
fn words(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    match (seconds / 3600, seconds / 60 % 60, seconds % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_reads_as_a_person_says_it() {
        let cases = [
            (25, "25 s"),
            (60, "1 min"),
            (185, "3 min 5 s"),
            (3600, "1 h"),
            (3725, "1 h 2 min"),
        ];
        for (seconds, said) in cases {
            assert_eq!(words(Duration::from_secs(seconds)), said);
        }
        assert!(interim_line(Duration::from_secs(25)).contains("interim"));
    }
}
