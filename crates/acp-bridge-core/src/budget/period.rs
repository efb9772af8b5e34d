//! A budget's periods: the UTC day (from midnight) and the UTC month (from
//! the 1st at midnight). Pure calendar arithmetic on unix seconds, with
//! `now` always passed in, so the boundaries are tested without a clock.

const SECONDS_PER_DAY: i64 = 86_400;

/// A period a limit counts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
}

impl Period {
    pub const ALL: [Period; 2] = [Period::Day, Period::Month];

    /// The word flags and `!budget` use (`day`, `month`).
    pub fn word(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Month => "month",
        }
    }

    /// The adjective a notice uses (`the bot's daily budget`).
    pub fn adjective(self) -> &'static str {
        match self {
            Period::Day => "daily",
            Period::Month => "monthly",
        }
    }

    /// Where the period holding `now` began (unix seconds).
    pub fn start(self, now: i64) -> i64 {
        let day = now.div_euclid(SECONDS_PER_DAY);
        match self {
            Period::Day => day * SECONDS_PER_DAY,
            Period::Month => {
                let (year, month, _) = civil_from_days(day);
                days_from_civil(year, month, 1) * SECONDS_PER_DAY
            }
        }
    }

    /// Where the next period begins: when a limit spent at `now` resets.
    pub fn next_start(self, now: i64) -> i64 {
        let day = now.div_euclid(SECONDS_PER_DAY);
        match self {
            Period::Day => (day + 1) * SECONDS_PER_DAY,
            Period::Month => {
                let (year, month, _) = civil_from_days(day);
                let (year, month) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                days_from_civil(year, month, 1) * SECONDS_PER_DAY
            }
        }
    }
}

/// `at` (unix seconds) as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_minute(at: i64) -> String {
    let (year, month, day) = civil_from_days(at.div_euclid(SECONDS_PER_DAY));
    let second = at.rem_euclid(SECONDS_PER_DAY);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        second / 3600,
        second % 3600 / 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-26 22:53:24 UTC.
    const NOW: i64 = 1_795_733_604;

    #[test]
    fn a_day_runs_from_midnight_to_midnight_utc() {
        assert_eq!(utc_minute(Period::Day.start(NOW)), "2026-11-26 00:00 UTC");
        assert_eq!(utc_minute(Period::Day.next_start(NOW)), "2026-11-27 00:00 UTC");
        let midnight = Period::Day.next_start(NOW);
        assert_eq!(
            Period::Day.start(midnight),
            midnight,
            "midnight opens the new day"
        );
        assert_eq!(Period::Day.start(midnight - 1), Period::Day.start(NOW));
    }

    #[test]
    fn a_month_runs_from_the_first_and_wraps_the_year() {
        assert_eq!(utc_minute(Period::Month.start(NOW)), "2026-11-01 00:00 UTC");
        assert_eq!(utc_minute(Period::Month.next_start(NOW)), "2026-12-01 00:00 UTC");
        let december = Period::Month.next_start(NOW);
        assert_eq!(
            utc_minute(Period::Month.next_start(december)),
            "2027-01-01 00:00 UTC"
        );
        assert_eq!(Period::Month.start(december - 1), Period::Month.start(NOW));
    }

    #[test]
    fn february_of_a_leap_year_has_29_days() {
        let march_first_2028 = days_from_civil(2028, 3, 1) * SECONDS_PER_DAY;
        assert_eq!(
            utc_minute(Period::Month.start(march_first_2028 - 1)),
            "2028-02-01 00:00 UTC"
        );
        assert_eq!(
            utc_minute(march_first_2028 - SECONDS_PER_DAY),
            "2028-02-29 00:00 UTC"
        );
        assert_eq!(utc_minute(0), "1970-01-01 00:00 UTC");
    }
}
