//! The log filter's syntax (`--log-level`, `RUST_LOG`), checked before
//! anything is logged.
//!
//! tracing's `EnvFilter` is lenient in two ways that hide a mistake: it
//! takes a word it does not know as a target name (`loud` turns on every
//! level of a target nobody logs under, so nothing at all is printed), and
//! it refuses the whole filter for one bad level (`acp_bridge=loud`), which
//! the caller then replaces with a default. Here every comma-separated
//! directive must be a level or `target=level` (`target[span]=level` as
//! `EnvFilter` reads it), and anything else is refused with the remedy.

use std::fmt;
use std::str::FromStr;

use tracing_subscriber::filter::Directive;

/// The levels a directive may name, from quietest to loudest.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The variable that, when set and not empty, replaces `--log-level`.
pub const RUST_LOG_ENV: &str = "RUST_LOG";

/// Why a log filter was refused. Each says what would be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFilterError {
    #[error("is empty: give a level (off, error, warn, info, debug, trace) or target=level")]
    Empty,
    #[error(
        "`{0}` is not a level: use off, error, warn, info, debug or trace, or target=level (e.g. acp_bridge=debug)"
    )]
    NotALevel(String),
    #[error(
        "`{directive}` sets the unknown level `{level}`: use off, error, warn, info, debug or trace (e.g. acp_bridge=debug)"
    )]
    UnknownLevel { directive: String, level: String },
    #[error("`{0}` names no target before `=`: write target=level (e.g. acp_bridge=debug) or a level alone")]
    NoTarget(String),
    #[error("`{directive}` is not a filter directive ({reason}): write target=level, e.g. acp_bridge=debug")]
    Malformed { directive: String, reason: String },
}

/// A log filter whose every directive was checked; what `EnvFilter` gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter(String);

impl LogFilter {
    /// The filter in force: `RUST_LOG` when set and not empty (it wins, as
    /// its users expect), else `flag` (`--log-level`). A bad `RUST_LOG`
    /// is refused rather than skipped: an operator who set it expects it
    /// to apply, and falling back would hide the typo.
    pub fn in_force(flag: &LogFilter, rust_log: Option<String>) -> Result<LogFilter, RustLogError> {
        match rust_log.filter(|value| !value.trim().is_empty()) {
            Some(value) => value.parse().map_err(RustLogError),
            None => Ok(flag.clone()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for LogFilter {
    type Err = LogFilterError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let directives: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|directive| !directive.is_empty())
            .collect();
        if directives.is_empty() {
            return Err(LogFilterError::Empty);
        }
        directives
            .iter()
            .try_for_each(|directive| check_directive(directive))?;
        Ok(LogFilter(directives.join(",")))
    }
}

impl fmt::Display for LogFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A bad `RUST_LOG`: names the variable and how to get past it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{RUST_LOG_ENV} {0}; fix it, or unset it to use --log-level")]
pub struct RustLogError(pub LogFilterError);

fn is_level(word: &str) -> bool {
    LOG_LEVELS.iter().any(|level| level.eq_ignore_ascii_case(word))
}

/// One directive: `level`, or `target=level` with an optional `[span]`.
fn check_directive(directive: &str) -> Result<(), LogFilterError> {
    let Some((target, level)) = directive.rsplit_once('=') else {
        return if is_level(directive) {
            Ok(())
        } else {
            Err(LogFilterError::NotALevel(directive.to_owned()))
        };
    };
    if !is_level(level.trim()) {
        return Err(LogFilterError::UnknownLevel {
            directive: directive.to_owned(),
            level: level.trim().to_owned(),
        });
    }
    if target.trim().is_empty() {
        return Err(LogFilterError::NoTarget(directive.to_owned()));
    }
    // The target and span part as tracing itself reads them.
    Directive::from_str(directive)
        .map(drop)
        .map_err(|error| LogFilterError::Malformed {
            directive: directive.to_owned(),
            reason: error.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<String, LogFilterError> {
        text.parse::<LogFilter>().map(|filter| filter.0)
    }

    #[test]
    fn levels_and_target_levels_are_taken() {
        assert_eq!(parse("info").as_deref(), Ok("info"));
        assert_eq!(
            parse("info, acp_bridge=debug,agent_stderr=WARN,").as_deref(),
            Ok("info,acp_bridge=debug,agent_stderr=WARN")
        );
        assert!(parse("acp_bridge::heart=trace").is_ok());
        assert!(parse("acp_bridge[turn]=debug").is_ok());
    }

    #[test]
    fn a_word_that_is_no_level_is_refused_not_taken_for_a_target() {
        assert_eq!(parse("loud"), Err(LogFilterError::NotALevel("loud".into())));
        assert_eq!(
            parse("info,acp_bridge"),
            Err(LogFilterError::NotALevel("acp_bridge".into()))
        );
        assert!(matches!(
            parse("acp_bridge=loud"),
            Err(LogFilterError::UnknownLevel { level, .. }) if level == "loud"
        ));
        assert_eq!(parse("=debug"), Err(LogFilterError::NoTarget("=debug".into())));
        assert_eq!(parse(" , "), Err(LogFilterError::Empty));
        assert!(matches!(
            parse("acp_bridge[turn=debug"),
            Err(LogFilterError::Malformed { .. })
        ));
    }

    #[test]
    fn rust_log_wins_when_set_and_is_refused_when_bad() {
        let flag: LogFilter = "warn".parse().expect("a level");
        assert_eq!(LogFilter::in_force(&flag, None), Ok(flag.clone()));
        assert_eq!(LogFilter::in_force(&flag, Some(" ".into())), Ok(flag.clone()));
        assert_eq!(
            LogFilter::in_force(&flag, Some("debug".into())).map(|filter| filter.0),
            Ok("debug".to_owned())
        );
        let refused = LogFilter::in_force(&flag, Some("loud".into())).expect_err("bad");
        assert_eq!(
            refused.to_string(),
            "RUST_LOG `loud` is not a level: use off, error, warn, info, debug or trace, or target=level (e.g. acp_bridge=debug); fix it, or unset it to use --log-level"
        );
    }
}
