//! How far the clocks of relays, people and this daemon may disagree: the
//! bounds every stage that judges an event by its date shares.
//!
//! The intake refuses what is dated too far ahead and reaches back when it
//! subscribes; housekeeping forgets seen events only past the reach of
//! both; the thread context skips future-dated history the same way.

use std::time::Duration;

/// Events dated further ahead than this are refused (the SDK does not).
pub(crate) const MAX_FUTURE_SKEW_SECS: u64 = 120;

/// Subscriptions start this far before the watermark, for clock skew and
/// delivery delay.
pub(crate) const SINCE_SKEW: Duration = Duration::from_secs(300);

/// How much earlier than the bot's first answer in a thread a reply there
/// may be dated and still follow up on it: people's clocks run a little
/// behind the bot's, but a reply from before the answer was not to it.
pub(crate) const FOLLOW_UP_CLOCK_SKEW_SECS: i64 = 5;
