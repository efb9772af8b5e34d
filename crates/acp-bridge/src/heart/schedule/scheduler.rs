//! The scheduler task: at each schedule's fire time, a run.
//!
//! A run is a mention from the owner ([`Intent::Scheduled`], naming the
//! schedule and its agent profile) whose event id is derived from the
//! schedule id and the fire time, so a fire is journaled once: the ledger
//! refuses the same id twice, and a run journaled before a crash resumes
//! from the journal like any mention. It goes to the heart as the intake
//! hands a mention on (`Inbound::Mention`), hence is a turn like any other.
//! A schedule whose target conversation hashes to another shard fires
//! there, not here. A fire while the schedule's previous run still waits
//! or runs is skipped (logged, counted).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use acp_bridge_core::mention::{Intent, Mention, SessionPolicy, Thread};
use chrono::{DateTime, Utc};
use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::prelude::{EventId, Kind, PublicKey, Timestamp};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::chat::{self, Change, Planner};
use super::missed::{self, AtStart};
use super::target::Target;
use super::when::When;
use super::{Board, Origin, Schedule};
use crate::intake::inbound::Inbound;
use crate::outbound::reply::Replier;
use crate::policy::shard::Shard;
use crate::state::ledger::Ledger;
use crate::state::store::{ChatSchedules, ScheduleFires, Store};
use crate::telemetry::metrics;

/// NIP-29 group chat messages.
const GROUP_CHAT_KIND: u16 = 9;
/// How much of a prompt `!schedules` shows.
const PROMPT_SHOWN_CHARS: usize = 60;

/// Sleeps `wait`, or for ever when `None` (no schedule has a time left).
async fn sleep_for(wait: Option<std::time::Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// Runs the schedules until `stop`.
#[derive(Debug)]
pub(crate) struct Scheduler {
    schedules: Vec<Schedule>,
    owner: PublicKey,
    policy: SessionPolicy,
    shard: Shard,
    ledger: Ledger,
    fires: ScheduleFires,
    inbound: mpsc::Sender<Inbound>,
    /// Each schedule's latest run of this daemon run: a fire while it
    /// still waits or runs is skipped.
    latest_runs: Mutex<HashMap<String, EventId>>,
    /// Where the next fire times are shown to the heart.
    board: Board,
    /// The chat's schedules set and removed while running (`!every`,
    /// `!at`, `!unschedule`), and where a one-shot is forgotten once run.
    changes: mpsc::UnboundedReceiver<Change>,
    chat: ChatSchedules,
    /// Posts each run's prompt in its target.
    replier: Replier,
}

impl Scheduler {
    /// The scheduler of the config file's `schedules` and the chat's kept
    /// ones, run as `owner`'s mentions; `None` with no owner to run them as
    /// (logged when the file has schedules: their runs are the owner's
    /// turns, and only the owner sets schedules from chat).
    pub(crate) fn new(
        schedules: Vec<Schedule>,
        owner: Option<PublicKey>,
        policy: SessionPolicy,
        shard: Shard,
        store: &Arc<Store>,
        (inbound, replier): (mpsc::Sender<Inbound>, Replier),
        (planner, changes): (&Planner, mpsc::UnboundedReceiver<Change>),
    ) -> Option<Scheduler> {
        let Some(owner) = owner else {
            if !schedules.is_empty() {
                tracing::error!(
                    schedules = schedules.len(),
                    "schedules are not run: they run as the owner's turns, and no --owner is set"
                );
            }
            return None;
        };
        let mut schedules = schedules;
        schedules.extend(planner.kept());
        Some(Scheduler {
            schedules,
            owner,
            policy,
            shard,
            ledger: Ledger::new(Arc::clone(store)),
            fires: ScheduleFires::new(Arc::clone(store)),
            inbound,
            latest_runs: Mutex::default(),
            board: planner.board().clone(),
            changes,
            chat: ChatSchedules::new(Arc::clone(store)),
            replier,
        })
    }

    /// Fires each schedule at its times, and takes the chat's changes,
    /// until `stop` (a fire whose conversation another shard owns is left
    /// to it).
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let schedules = std::mem::take(&mut self.schedules);
        for schedule in &schedules {
            self.catch_up(schedule).await;
        }
        let mut armed: Vec<(Schedule, Option<DateTime<Utc>>)> = Vec::new();
        for schedule in schedules {
            self.show(&schedule);
            let next = arm(&schedule, Utc::now(), &self.board);
            armed.push((schedule, next));
        }
        loop {
            self.forget_spent_one_shots(&mut armed);
            let soonest = armed.iter().filter_map(|(_, next)| *next).min();
            let wait = soonest.map(|at| (at - Utc::now()).to_std().unwrap_or_default());
            tokio::select! {
                () = stop.cancelled() => return,
                change = self.changes.recv() => match change {
                    Some(change) => self.take(change, &mut armed),
                    None => return stop.cancelled().await,
                },
                () = sleep_for(wait) => {}
            }
            for (schedule, due) in &mut armed {
                let Some(at) = due.filter(|at| *at <= Utc::now()) else {
                    continue;
                };
                self.fire(schedule, at, false).await;
                *due = arm(schedule, at, &self.board);
            }
        }
    }

    /// A chat schedule set or removed while running.
    fn take(&self, change: Change, armed: &mut Vec<(Schedule, Option<DateTime<Utc>>)>) {
        match change {
            Change::Add(schedule) => {
                self.show(&schedule);
                let next = arm(&schedule, Utc::now(), &self.board);
                armed.push((*schedule, next));
            }
            Change::Remove(id) => {
                armed.retain(|(schedule, _)| schedule.id != id);
                self.board.remove(&id);
                tracing::info!(schedule = %id, "schedule unarmed");
            }
        }
    }

    /// A chat one-shot that has run is removed from the store and the
    /// board: `!schedules` lists what is still to come.
    fn forget_spent_one_shots(&self, armed: &mut Vec<(Schedule, Option<DateTime<Utc>>)>) {
        armed.retain(|(schedule, next)| {
            let spent = next.is_none() && schedule.when.is_once() && schedule.origin != Origin::File;
            if spent {
                if let Err(error) = self.chat.remove(&schedule.id) {
                    tracing::warn!(schedule = %schedule.id, %error, "cannot forget a one-shot schedule that ran");
                }
                self.board.remove(&schedule.id);
            }
            !spent
        });
    }

    /// Shows what `schedule` is on the board.
    fn show(&self, schedule: &Schedule) {
        let when = match &schedule.when {
            When::Cron(_) => "config file".to_owned(),
            when => chat::describe(when),
        };
        let prompt: String = schedule.prompt.chars().take(PROMPT_SHOWN_CHARS).collect();
        let ellipsis = if prompt.len() < schedule.prompt.len() {
            "…"
        } else {
            ""
        };
        self.board.describe(
            &schedule.id,
            format!("{when}, in {}: {prompt}{ellipsis}", schedule.target),
        );
    }

    /// Posts the run's prompt in its target, so that readers see what was
    /// asked and the answer threads under a message they can reply to;
    /// the journaled run is rewritten to thread under it. Returns the
    /// post's id. A post that cannot be made is logged, and the run still
    /// runs (its answer then threads under the run's own id).
    async fn announce(&self, schedule: &Schedule, mention: &mut Mention) -> Option<EventId> {
        let text = format!("Scheduled `{}`: {}", schedule.id, schedule.prompt);
        let posted = match self.replier.announce(mention, &text).await {
            Ok(posted) => posted,
            Err(error) => {
                tracing::warn!(schedule = %schedule.id, %error, "cannot post the scheduled prompt; the answer threads under the run");
                return None;
            }
        };
        match &mut mention.thread {
            Thread::Group { root, mention, .. } => (*root, *mention) = (posted, posted),
            Thread::Note { mention, .. } | Thread::Comment { mention, .. } => *mention = posted,
            Thread::Direct { message, .. } | Thread::Marmot { message, .. } => *message = posted,
        }
        mention.conversation = mention.thread.conversation(self.policy, mention.origin.as_ref());
        if let Err(error) = self.ledger.reclassify(mention) {
            tracing::warn!(schedule = %schedule.id, %error, "cannot journal where the scheduled run is answered");
        }
        Some(posted)
    }

    /// The latest run of schedule `id`, when it still waits or runs.
    fn still_pending(&self, id: &str) -> Option<EventId> {
        let previous = *self
            .latest_runs
            .lock()
            .expect("never poisoned: no panic while held")
            .get(id)?;
        match self.ledger.is_pending(&previous) {
            Ok(pending) => pending.then_some(previous),
            Err(error) => {
                tracing::warn!(schedule = %id, %error, "cannot read whether the previous run ended; running anyway");
                None
            }
        }
    }

    /// The one catch-up run of `schedule` when a fire time passed while
    /// the daemon was down (see [`missed`]).
    async fn catch_up(&self, schedule: &Schedule) {
        let last = match self.fires.last(&schedule.id) {
            Ok(last) => last.and_then(|seconds| DateTime::from_timestamp(seconds, 0)),
            Err(error) => {
                tracing::error!(schedule = %schedule.id, %error, "cannot read when the schedule last fired; no catch-up run");
                return;
            }
        };
        // A chat schedule's fire times count from when it was set: one due
        // before its first run, while the daemon was down, is missed too.
        let since = match schedule.origin {
            Origin::Chat { since } => Some(since),
            Origin::File => None,
        };
        let decision = missed::at_start(
            last.or(since),
            |after| schedule.when.next_after(after),
            Utc::now(),
        );
        if let AtStart::CatchUp { due } = decision {
            tracing::info!(schedule = %schedule.id, due = %due, "schedule caught up");
            self.fire(schedule, due, true).await;
        }
    }

    /// Journals the run of `schedule` due `at` (a catch-up run when
    /// `missed`), keeps `at` as its last fire time, and hands the run to
    /// the heart.
    async fn fire(&self, schedule: &Schedule, at: DateTime<Utc>, missed: bool) {
        if let Some(previous) = self.still_pending(&schedule.id) {
            tracing::info!(schedule = %schedule.id, due = %at, %previous, reason = "previous run still waiting or running", "schedule run skipped");
            return metrics::schedule_run("skipped");
        }
        let mut mention = run_mention(schedule, self.owner, self.policy, at);
        // Per fire, not per schedule: under `--session-policy thread` each
        // run in a group is a thread, hence a conversation, of its own.
        if !self.shard.owns(mention.conversation.as_str()) {
            tracing::debug!(schedule = %schedule.id, due = %at, conversation = %mention.conversation, "schedule fire is another shard's");
            return;
        }
        if let Intent::Scheduled { missed_due, .. } = &mut mention.intent {
            *missed_due = missed.then(|| at.timestamp());
        }
        let journaled = self.ledger.take_in(&[&mention], &[]);
        if let Err(error) = self.fires.record(&schedule.id, at.timestamp()) {
            tracing::error!(schedule = %schedule.id, %error, "cannot keep the schedule's last fire time");
        }
        match journaled {
            Ok((fresh, _)) if fresh.first() == Some(&true) => {}
            Ok(_) => {
                tracing::info!(schedule = %schedule.id, due = %at, reason = "journaled before", "schedule run skipped");
                return metrics::schedule_run("skipped");
            }
            Err(error) => {
                tracing::error!(schedule = %schedule.id, due = %at, %error, reason = "cannot journal it", "schedule run skipped");
                return metrics::schedule_run("skipped");
            }
        }
        let prompt_event = self.announce(schedule, &mut mention).await;
        metrics::schedule_run(if missed { "caught_up" } else { "fired" });
        self.latest_runs
            .lock()
            .expect("never poisoned: no panic while held")
            .insert(schedule.id.clone(), mention.event_id);
        tracing::info!(
            schedule = %schedule.id, due = %at, event_id = %mention.event_id, conversation = %mention.conversation,
            prompt_event = prompt_event.map(|id| id.to_hex()).unwrap_or_default(),
            "schedule fired"
        );
        let _ = self.inbound.send(Inbound::Mention(mention)).await;
    }
}

/// The next fire time of `schedule` after `after`, logged and shown on
/// `board`.
fn arm(schedule: &Schedule, after: DateTime<Utc>, board: &Board) -> Option<DateTime<Utc>> {
    let next = schedule.when.next_after(after);
    board.set_next(&schedule.id, next);
    match next {
        Some(at) => tracing::info!(schedule = %schedule.id, next = %at, "schedule armed"),
        None if schedule.when.is_once() => tracing::debug!(schedule = %schedule.id, "one-shot schedule ran"),
        None => tracing::warn!(schedule = %schedule.id, "schedule has no fire time left"),
    }
    next
}

/// The run of `schedule` due `at`: a mention from the owner in the
/// schedule's target conversation, with an event id of its own.
fn run_mention(schedule: &Schedule, owner: PublicKey, policy: SessionPolicy, at: DateTime<Utc>) -> Mention {
    let event_id = run_event_id(&schedule.id, at);
    // The run's own id stands for the message answered until the run's
    // prompt is posted in the target (see `Scheduler::announce`).
    let (kind, thread, origin) = match &schedule.target {
        Target::Dm => {
            let thread = Thread::Direct {
                peer: owner,
                message: event_id,
            };
            (Kind::PrivateDirectMessage, thread, None)
        }
        Target::Group { relay, group } => {
            let thread = Thread::Group {
                channel: group.clone(),
                root: event_id,
                mention: event_id,
            };
            (Kind::Custom(GROUP_CHAT_KIND), thread, Some(relay.clone()))
        }
        Target::Note { root } => {
            let thread = Thread::Note {
                root: *root,
                mention: event_id,
            };
            (Kind::TextNote, thread, None)
        }
    };
    let seconds = u64::try_from(at.timestamp()).unwrap_or_default();
    Mention {
        event_id,
        author: owner,
        kind,
        created_at: Timestamp::from_secs(seconds),
        content: schedule.prompt.clone(),
        conversation: thread.conversation(policy, origin.as_ref()),
        thread,
        replies_to: None,
        from_owner: true,
        from_sibling: false,
        from_allowlist: false,
        chain_depth: 0,
        accepted_at: u64::try_from(Utc::now().timestamp()).unwrap_or_default(),
        origin,
        intent: Intent::Scheduled {
            schedule: schedule.id.clone(),
            agent: schedule.agent.clone(),
            missed_due: None,
        },
        media: Vec::new(),
    }
}

/// The event id of the run of schedule `id` due `at`: the same fire is
/// the same id, which the journal takes once.
fn run_event_id(id: &str, at: DateTime<Utc>) -> EventId {
    let seed = format!("acp-bridge/schedule/{id}/{}", at.timestamp());
    EventId::from_byte_array(sha256::Hash::hash(seed.as_bytes()).to_byte_array())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fire_has_one_event_id_and_another_fire_another() {
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let later = DateTime::from_timestamp(1_800_000_060, 0).expect("time");
        assert_eq!(run_event_id("standup", at), run_event_id("standup", at));
        assert_ne!(run_event_id("standup", at), run_event_id("standup", later));
        assert_ne!(run_event_id("standup", at), run_event_id("review", at));
    }
}
