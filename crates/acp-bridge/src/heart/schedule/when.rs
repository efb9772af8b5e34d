//! When a schedule fires: a cron expression read in an IANA time zone.
//!
//! Owns parsing the two (5 fields, or 6 with seconds first; no year
//! field) and the next fire time after an instant. Fire times are UTC
//! instants; the zone only decides which instants the fields name, so
//! `0 9 * * *` in `Europe/Paris` fires at 09:00 Paris time across DST.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A cron expression and the zone it is read in.
#[derive(Debug, Clone)]
pub(crate) struct CronTime {
    cron: Cron,
    zone: Tz,
}

impl CronTime {
    /// Parses `cron` and the IANA zone name `zone`; the refusal says which
    /// is wrong and why.
    pub(crate) fn parse(cron: &str, zone: &str) -> Result<CronTime, String> {
        let fields = cron.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "`{cron}` has {fields} fields; a cron has 5 (minute hour day month weekday), or 6 with seconds first"
            ));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let cron = parser
            .parse(cron)
            .map_err(|error| format!("`{cron}` is not a cron expression: {error}"))?;
        let zone = zone
            .parse::<Tz>()
            .map_err(|_| format!("`{zone}` is not an IANA time zone (e.g. UTC, Europe/Paris)"))?;
        Ok(CronTime { cron, zone })
    }

    /// The first fire time strictly after `after`; `None` when the
    /// expression never matches again (`0 0 30 2 *`).
    pub(crate) fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

/// When a schedule fires: a cron in a zone (the config file), or, from
/// chat, every `interval` counted from when it was set (`!every`), or
/// once (`!at`).
#[derive(Debug, Clone)]
pub(crate) enum When {
    Cron(Box<CronTime>),
    Every {
        interval: std::time::Duration,
        since: DateTime<Utc>,
    },
    Once(DateTime<Utc>),
}

impl When {
    /// The first fire time strictly after `after`; `None` when there is
    /// none left (a one-shot that fired, a cron that never matches).
    pub(crate) fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            When::Cron(cron) => cron.next_after(after),
            // Checked throughout: an interval past the calendar's end (a
            // kept `every:8640000000000`) has no next time, it never panics.
            When::Every { interval, since } => {
                let step = chrono::Duration::from_std(*interval).ok()?;
                if after < *since {
                    return since.checked_add_signed(step);
                }
                let step_ms = step.num_milliseconds().max(1);
                let elapsed = (after - *since).num_milliseconds();
                let steps = elapsed / step_ms + 1;
                let ahead = chrono::Duration::try_milliseconds(steps.checked_mul(step_ms)?)?;
                since.checked_add_signed(ahead)
            }
            When::Once(at) => (*at > after).then_some(*at),
        }
    }

    /// A one-shot: done once it has fired.
    pub(crate) fn is_once(&self) -> bool {
        matches!(self, When::Once(_))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An RFC 3339 instant, for the schedule module's tests.
    pub(crate) fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("rfc3339")
            .with_timezone(&Utc)
    }

    #[test]
    fn five_fields_fire_on_the_minute_and_six_take_seconds_first() {
        let daily = CronTime::parse("30 9 * * *", "UTC").expect("cron");
        assert_eq!(
            daily.next_after(at("2026-01-01T09:29:59Z")),
            Some(at("2026-01-01T09:30:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-01-01T09:30:00Z")),
            Some(at("2026-01-02T09:30:00Z"))
        );
        let every_two = CronTime::parse("*/2 * * * * *", "UTC").expect("cron");
        assert_eq!(
            every_two.next_after(at("2026-01-01T00:00:01Z")),
            Some(at("2026-01-01T00:00:02Z"))
        );
    }

    #[test]
    fn the_zone_decides_the_instant_across_daylight_saving() {
        let paris = CronTime::parse("0 9 * * *", "Europe/Paris").expect("cron");
        // Winter: UTC+1; summer: UTC+2.
        assert_eq!(
            paris.next_after(at("2026-01-10T00:00:00Z")),
            Some(at("2026-01-10T08:00:00Z"))
        );
        assert_eq!(
            paris.next_after(at("2026-07-10T00:00:00Z")),
            Some(at("2026-07-10T07:00:00Z"))
        );
    }

    #[test]
    fn a_bad_expression_or_zone_is_refused_by_name() {
        for (cron, zone, says) in [
            ("* * * *", "UTC", "4 fields"),
            ("* * * * * * *", "UTC", "7 fields"),
            ("61 * * * *", "UTC", "not a cron expression"),
            ("* * * * *", "Mars/Olympus", "not an IANA time zone"),
        ] {
            let refusal = CronTime::parse(cron, zone).expect_err(cron);
            assert!(refusal.contains(says), "{cron} {zone}: {refusal}");
        }
    }

    #[test]
    fn a_date_that_never_comes_has_no_next_time() {
        let never = CronTime::parse("0 0 30 2 *", "UTC").expect("cron");
        assert_eq!(never.next_after(at("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn an_interval_past_the_calendars_end_has_no_next_time() {
        let since = at("2026-01-01T00:00:00Z");
        let every = When::Every {
            interval: std::time::Duration::from_secs(100_000_000 * 86_400),
            since,
        };
        assert_eq!(every.next_after(since), None);
        assert_eq!(every.next_after(at("2025-01-01T00:00:00Z")), None);
    }

    #[test]
    fn every_counts_from_when_it_was_set_and_once_fires_once() {
        let since = at("2026-01-01T00:00:00Z");
        let every = When::Every {
            interval: std::time::Duration::from_secs(1800),
            since,
        };
        assert_eq!(every.next_after(since), Some(at("2026-01-01T00:30:00Z")));
        assert_eq!(
            every.next_after(at("2026-01-01T01:10:00Z")),
            Some(at("2026-01-01T01:30:00Z"))
        );
        assert_eq!(
            every.next_after(at("2026-01-01T01:30:00Z")),
            Some(at("2026-01-01T02:00:00Z"))
        );
        let once = When::Once(at("2026-01-01T09:00:00Z"));
        assert_eq!(once.next_after(since), Some(at("2026-01-01T09:00:00Z")));
        assert_eq!(once.next_after(at("2026-01-01T09:00:00Z")), None);
    }
}
