//! The owner's schedules from chat: `!every <interval> <prompt>`,
//! `!at <time> <prompt>`, `!unschedule <id>` (and `!schedules`, which
//! lists these beside the config file's).
//!
//! Owns the commands' grammar and answers, the chat's ids (`c1`, `c2`, …)
//! and keeping the schedules in the store; the running scheduler hears of
//! each change over a channel ([`Change`]). A chat schedule's target is
//! the conversation the command was given in. Times are UTC.

use std::time::Duration;

use acp_bridge_core::mention::{Mention, Thread};
use chrono::{DateTime, NaiveTime, Utc};
use tokio::sync::mpsc;

use super::target::Target;
use super::when::When;
use super::{Board, Origin, Schedule};
use crate::base::flags::parse_duration;
use crate::state::store::{ChatScheduleRow, ChatSchedules};

/// The shortest `!every` interval: a run a second is already more than any
/// agent answers in, and the schedule's previous run still going skips a fire.
const SHORTEST_INTERVAL: Duration = Duration::from_secs(1);
/// The longest `!every` interval, a leap year: a longer one is a typo more
/// likely than a plan, and one past the calendar's end (`!every
/// 100000000d`) has no fire time at all (issue 35 §4).
const LONGEST_INTERVAL: Duration = Duration::from_secs(366 * 86_400);
/// How many schedules the chat may keep at once: each is a paid run at
/// its times, and each a timer the scheduler holds; the config file's
/// `[[schedule]]` entries are not counted.
const MAX_CHAT_SCHEDULES: usize = 50;

/// What the running scheduler is told of the chat's schedules.
#[derive(Debug)]
pub(crate) enum Change {
    Add(Box<Schedule>),
    Remove(String),
}

/// Whether `id` has the form of the chat's ids (`c` and digits), which a
/// config file's schedule may not take.
pub(crate) fn is_chat_id(id: &str) -> bool {
    id.strip_prefix('c')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()))
}

/// The heart's side of the schedules: the commands, and what `!schedules`
/// and `!status` show. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Planner {
    store: ChatSchedules,
    changes: mpsc::UnboundedSender<Change>,
    board: Board,
}

impl Planner {
    /// A planner keeping chat schedules in `store`, showing `board`; the
    /// receiver is the scheduler's.
    pub(crate) fn new(store: ChatSchedules, board: Board) -> (Planner, mpsc::UnboundedReceiver<Change>) {
        let (changes, heard) = mpsc::unbounded_channel();
        (
            Planner {
                store,
                changes,
                board,
            },
            heard,
        )
    }

    pub(crate) fn board(&self) -> &Board {
        &self.board
    }

    /// The chat's schedules kept in the store, for the scheduler's start.
    pub(crate) fn kept(&self) -> Vec<Schedule> {
        let rows = match self.store.all() {
            Ok(rows) => rows,
            Err(error) => {
                tracing::error!(%error, "cannot read the chat's schedules; they do not run");
                return Vec::new();
            }
        };
        rows.into_iter()
            .filter_map(|row| {
                let id = row.id.clone();
                from_row(row)
                    .inspect_err(|reason| tracing::warn!(schedule = %id, %reason, "a kept chat schedule is unreadable; it does not run"))
                    .ok()
            })
            .collect()
    }

    /// `!every <interval> <prompt>` given in `mention`'s conversation.
    pub(crate) fn every(&self, spec: &str, mention: &Mention, now: DateTime<Utc>) -> String {
        const USAGE: &str =
            "Usage: !every <interval> <prompt>, e.g. !every 1h summarise what changed (s, m, h or d).";
        let Some((interval, prompt)) = split_spec(spec) else {
            return USAGE.to_owned();
        };
        let interval = match parse_duration(interval).and_then(checked_interval) {
            Ok(interval) => interval,
            Err(reason) => return format!("Not scheduled: {reason}. {USAGE}"),
        };
        let when = When::Every { interval, since: now };
        self.add(when, prompt, mention, now)
    }

    /// `!at <time> <prompt>` given in `mention`'s conversation.
    pub(crate) fn at(&self, spec: &str, mention: &Mention, now: DateTime<Utc>) -> String {
        const USAGE: &str = "Usage: !at <time> <prompt>; the time is HH:MM (UTC, the next one), an RFC 3339 instant (2026-12-01T09:00:00Z), or +<duration> from now (+90m).";
        let Some((time, prompt)) = split_spec(spec) else {
            return USAGE.to_owned();
        };
        match parse_time(time, now) {
            Ok(at) if at > now => self.add(When::Once(at), prompt, mention, now),
            Ok(at) => format!("Not scheduled: {} is not in the future.", at.to_rfc3339()),
            Err(reason) => format!("Not scheduled: {reason}. {USAGE}"),
        }
    }

    /// `!unschedule <id>`.
    pub(crate) fn unschedule(&self, id: &str) -> String {
        let id = id.trim();
        if id.is_empty() {
            return "Usage: !unschedule <id> (the ids are in !schedules).".to_owned();
        }
        if !is_chat_id(id) {
            return if self.board.has(id) {
                format!(
                    "`{id}` is a schedule of the config file: it stops when its [[schedule]] entry is removed and the daemon restarted."
                )
            } else {
                format!("No schedule is named `{id}` (the ids are in !schedules).")
            };
        }
        match self.store.remove(id) {
            Ok(true) => {
                let _ = self.changes.send(Change::Remove(id.to_owned()));
                tracing::info!(schedule = %id, "schedule removed from chat");
                format!("Unscheduled {id}: it runs no more.")
            }
            Ok(false) => format!("No schedule is named `{id}` (the ids are in !schedules)."),
            Err(error) => format!("Cannot unschedule {id}: {error}."),
        }
    }

    fn add(&self, when: When, prompt: &str, mention: &Mention, now: DateTime<Utc>) -> String {
        let target = match target_of(mention) {
            Ok(target) => target,
            Err(reason) => return format!("Not scheduled: {reason}."),
        };
        match self.store.all() {
            Ok(kept) if kept.len() >= MAX_CHAT_SCHEDULES => {
                return format!(
                    "Not scheduled: {} chat schedules are kept, the most there may be; remove one with !unschedule <id> (the ids are in !schedules).",
                    kept.len()
                );
            }
            Ok(_) => {}
            Err(error) => return format!("Not scheduled: cannot read the kept schedules ({error})."),
        }
        let number = match self.store.next_number() {
            Ok(number) => number,
            Err(error) => return format!("Not scheduled: cannot read the kept schedules ({error})."),
        };
        let schedule = Schedule {
            id: format!("c{number}"),
            when,
            origin: Origin::Chat { since: now },
            target,
            prompt: prompt.to_owned(),
            agent: None,
        };
        let Some(row) = to_row(&schedule, now) else {
            return "Not scheduled: the chat sets no cron.".to_owned();
        };
        if let Err(error) = self.store.add(&row) {
            return format!("Not scheduled: cannot keep it ({error}).");
        }
        let first = schedule.when.next_after(now);
        let answer = format!(
            "Scheduled {}: {}; first run {}. Stop it with !unschedule {}.",
            schedule.id,
            describe(&schedule.when),
            first.map_or_else(|| "never".to_owned(), |at| at.to_rfc3339()),
            schedule.id,
        );
        tracing::info!(schedule = %schedule.id, target = %schedule.target, "schedule set from chat");
        let _ = self.changes.send(Change::Add(Box::new(schedule)));
        answer
    }
}

/// `interval` when `!every` may take it: whole seconds, from
/// [`SHORTEST_INTERVAL`] to [`LONGEST_INTERVAL`]; else why not.
fn checked_interval(interval: Duration) -> Result<Duration, String> {
    if interval.subsec_nanos() != 0 || interval < SHORTEST_INTERVAL {
        return Err("the interval is whole seconds, at least 1s".to_owned());
    }
    if interval > LONGEST_INTERVAL {
        return Err(format!(
            "the interval is at most {} (a year)",
            seconds_text(LONGEST_INTERVAL.as_secs())
        ));
    }
    Ok(interval)
}

/// A chat schedule's words for `!schedules` and its answer.
pub(crate) fn describe(when: &When) -> String {
    match when {
        When::Every { interval, .. } => format!("every {}", seconds_text(interval.as_secs())),
        When::Once(at) => format!("once at {}", at.to_rfc3339()),
        When::Cron(_) => "on its cron".to_owned(),
    }
}

/// `90` → `90s`, `3600` → `1h`: the largest unit that divides it.
fn seconds_text(seconds: u64) -> String {
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if seconds >= size && seconds.is_multiple_of(size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// `<word> <rest>`: the first word and the prompt after it (kept as the
/// owner wrote it); `None` when either is missing.
fn split_spec(spec: &str) -> Option<(&str, &str)> {
    let (word, rest) = spec.trim().split_once(char::is_whitespace)?;
    let rest = rest.trim();
    (!rest.is_empty()).then_some((word, rest))
}

/// `!at`'s time: `+<duration>`, `HH:MM` (UTC, the next one), or RFC 3339.
fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Some(after) = text.strip_prefix('+') {
        let after = parse_duration(after)?;
        return chrono::Duration::from_std(after)
            .ok()
            .and_then(|after| now.checked_add_signed(after))
            .ok_or_else(|| format!("`{text}` is too far ahead"));
    }
    if let Ok(time) = NaiveTime::parse_from_str(text, "%H:%M") {
        let today = now.date_naive().and_time(time).and_utc();
        return Ok(if today > now {
            today
        } else {
            today + chrono::Duration::days(1)
        });
    }
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| format!("`{text}` is not a time"))
}

/// The conversation `mention` was given in, as a schedule's target.
fn target_of(mention: &Mention) -> Result<Target, String> {
    match &mention.thread {
        Thread::Direct { .. } => Ok(Target::Dm),
        Thread::Marmot { .. } => Err("schedules do not run in encrypted groups yet".to_owned()),
        Thread::Note { root, .. } => Ok(Target::Note { root: *root }),
        Thread::Comment { .. } => Err("schedules cannot be set in a comment thread yet".to_owned()),
        Thread::Group { channel, .. } => match &mention.origin {
            Some(relay) => Ok(Target::Group {
                relay: relay.clone(),
                group: channel.clone(),
            }),
            None => Err("this group's relay is not known".to_owned()),
        },
    }
}

/// The row kept for a chat schedule (`None` for a cron, which only the
/// config file sets).
fn to_row(schedule: &Schedule, since: DateTime<Utc>) -> Option<ChatScheduleRow> {
    let timing = match &schedule.when {
        When::Every { interval, .. } => format!("every:{}", interval.as_secs()),
        When::Once(at) => format!("once:{}", at.timestamp()),
        When::Cron(_) => return None,
    };
    Some(ChatScheduleRow {
        id: schedule.id.clone(),
        timing,
        target: schedule.target.to_string(),
        prompt: schedule.prompt.clone(),
        since: since.timestamp(),
    })
}

fn from_row(row: ChatScheduleRow) -> Result<Schedule, String> {
    let since = DateTime::from_timestamp(row.since, 0).ok_or("a bad time")?;
    let when = match row.timing.split_once(':') {
        Some(("every", seconds)) => When::Every {
            interval: seconds
                .parse()
                .map_err(|_| "a bad interval".to_owned())
                .map(Duration::from_secs)
                .and_then(checked_interval)?,
            since,
        },
        Some(("once", at)) => When::Once(
            at.parse()
                .ok()
                .and_then(|at| DateTime::from_timestamp(at, 0))
                .ok_or("a bad time")?,
        ),
        _ => return Err(format!("an unknown timing `{}`", row.timing)),
    };
    Ok(Schedule {
        id: row.id,
        when,
        origin: Origin::Chat { since },
        target: Target::parse(&row.target)?,
        prompt: row.prompt,
        agent: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::when::tests::at;
    use super::*;

    #[test]
    fn at_reads_a_duration_ahead_a_clock_time_and_an_instant() {
        let now = at("2026-11-26T23:30:00Z");
        assert_eq!(parse_time("+90m", now), Ok(at("2026-11-27T01:00:00Z")));
        assert_eq!(parse_time("23:45", now), Ok(at("2026-11-26T23:45:00Z")));
        assert_eq!(parse_time("09:00", now), Ok(at("2026-11-27T09:00:00Z")));
        assert_eq!(
            parse_time("2026-12-01T09:00:00+01:00", now),
            Ok(at("2026-12-01T08:00:00Z"))
        );
        assert!(parse_time("soon", now).unwrap_err().contains("not a time"));
        assert!(parse_time("+5y", now).is_err());
    }

    #[test]
    fn a_spec_is_a_word_and_a_prompt_kept_as_written() {
        assert_eq!(
            split_spec(" 1h  summarise\nthe day "),
            Some(("1h", "summarise\nthe day"))
        );
        assert_eq!(split_spec("1h"), None);
        assert_eq!(split_spec(""), None);
    }

    #[test]
    fn chat_ids_are_c_and_digits() {
        assert!(is_chat_id("c1"));
        assert!(is_chat_id("c42"));
        assert!(!is_chat_id("c"));
        assert!(!is_chat_id("standup"));
        assert!(!is_chat_id("c1a"));
    }

    #[test]
    fn every_takes_whole_seconds_from_one_second_to_a_year() {
        assert_eq!(
            checked_interval(Duration::from_secs(1)),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(checked_interval(LONGEST_INTERVAL), Ok(LONGEST_INTERVAL));
        assert!(checked_interval(Duration::from_millis(1500)).is_err());
        let refusal = checked_interval(LONGEST_INTERVAL + Duration::from_secs(1)).unwrap_err();
        assert_eq!(refusal, "the interval is at most 366d (a year)");
    }

    /// A row kept before the bounds (or written by hand) whose interval
    /// runs past the calendar's end is refused by the loader, by name:
    /// it does not run, and the start does not panic on it.
    #[test]
    fn a_kept_row_with_an_overflowing_interval_is_refused_not_run() {
        let row = ChatScheduleRow {
            id: "c1".into(),
            timing: format!("every:{}", 100_000_000_u64 * 86_400),
            target: Target::Dm.to_string(),
            prompt: "ping".into(),
            since: at("2026-11-26T12:00:00Z").timestamp(),
        };
        let refusal = from_row(row).expect_err("out of bounds");
        assert!(refusal.contains("at most 366d"), "{refusal}");
    }

    /// Past [`MAX_CHAT_SCHEDULES`] kept, `!every` and `!at` are refused in
    /// one line naming the way out; removing one makes room again.
    #[test]
    fn the_chat_keeps_at_most_its_cap_of_schedules() {
        let dir = crate::state::store::scratch::ScratchDir::new("chat-cap");
        let store = std::sync::Arc::new(crate::state::store::Store::open(dir.path()).expect("store"));
        let (planner, _heard) = Planner::new(ChatSchedules::new(store), Board::default());
        let mut mention = acp_bridge_core::mention::test_mention("dm", 1, "", true);
        mention.thread = Thread::Direct {
            peer: mention.author,
            message: mention.event_id,
        };
        let now = at("2026-11-26T12:00:00Z");
        for n in 1..=MAX_CHAT_SCHEDULES {
            let set = planner.every("1h ping", &mention, now);
            assert!(set.starts_with(&format!("Scheduled c{n}:")), "{set}");
        }
        for refused in [
            planner.every("1h one too many", &mention, now),
            planner.at("+1h one too many", &mention, now),
        ] {
            assert!(
                refused.starts_with("Not scheduled: 50 chat schedules are kept, the most there may be;"),
                "{refused}"
            );
            assert_eq!(refused.lines().count(), 1, "{refused}");
        }
        assert!(planner.unschedule("c1").starts_with("Unscheduled c1"));
        let set = planner.every("1h room again", &mention, now);
        assert!(set.starts_with("Scheduled c51:"), "{set}");
    }

    #[test]
    fn a_kept_row_reads_back_as_its_schedule() {
        let since = at("2026-11-26T12:00:00Z");
        for when in [
            When::Every {
                interval: Duration::from_secs(5400),
                since,
            },
            When::Once(at("2026-11-27T09:00:00Z")),
        ] {
            let schedule = Schedule {
                id: "c3".into(),
                when,
                origin: Origin::Chat { since },
                target: Target::Dm,
                prompt: "ping".into(),
                agent: None,
            };
            let back = from_row(to_row(&schedule, since).expect("a chat timing")).expect("reads back");
            assert_eq!(back.id, "c3");
            assert_eq!(describe(&back.when), describe(&schedule.when));
            assert_eq!(back.when.next_after(since), schedule.when.next_after(since));
            assert_eq!(back.origin, schedule.origin);
        }
        assert_eq!(
            describe(&When::Every {
                interval: Duration::from_secs(5400),
                since
            }),
            "every 90m"
        );
    }
}
