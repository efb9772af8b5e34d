//! A line at info when it tells the operator something, at debug when it
//! would only say "nothing happened" on every turn.
//!
//! Each JSON line of a turn costs about 40,000 instructions (the span's
//! fields are parsed again for every line): five lines per answered
//! mention were a tenth of the daemon's own work (BENCHMARKS §10). The
//! lines that are the same on every quiet turn go to debug, where the
//! filter drops them before anything is formatted; the tests, which log
//! the bridge at debug, still read them.

/// `tracing::info!` when `$worth` is true, else `tracing::debug!`, with the
/// same fields and message.
macro_rules! info_when {
    ($worth:expr, $($line:tt)+) => {
        if $worth {
            tracing::info!($($line)+)
        } else {
            tracing::debug!($($line)+)
        }
    };
}

pub(crate) use info_when;
