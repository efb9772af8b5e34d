//! What every stage's flags share: the one-line refusal that names its
//! flag, the duration parser, the flags'
//! own spelling of an enum, the parser of a core policy's words, and a
//! group's defaults as clap makes them.
//!
//! Each stage owns its flags (a clap `Args` group next to the stage:
//! `pool::args`, `intake::args`, …) and `config::RunArgs` flattens them.
//! This module sits below all of them, so that a group can refuse a value
//! without importing `config`, which imports the groups.

use std::fmt;
use std::time::Duration;

use acp_bridge_core::choice::Choice;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Arg, Args, Command, FromArgMatches, ValueEnum};

/// A refusal of the configuration: one line, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub flag: &'static str,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.problem)
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn refuse(flag: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        problem: problem.into(),
    }
}

/// The flags' defaults of group `A`: what clap makes of an empty command
/// line, with the environment ignored. A group's `Default` is this, so
/// that its `#[arg(default_value…)]` attributes are the one place a
/// default is written: settings built without flags (the demo, the
/// benchmarks, the test rigs) start from the same values as the daemon.
pub(crate) fn flag_defaults<A: Args + FromArgMatches>() -> A {
    let command = A::augment_args(Command::new("defaults"))
        .no_binary_name(true)
        .mut_args(|arg| arg.env(None::<&'static str>));
    let matches = command
        .try_get_matches_from(std::iter::empty::<String>())
        .expect("every flag of a group has a default or is optional");
    A::from_arg_matches(&matches).expect("the defaults are the group's own values")
}

/// Flag `arg`'s default as `--help-long` and docs/flags.md show it
/// (`9,1,1059`); none for a switch or a flag without one.
pub(crate) fn shown_default(arg: &Arg) -> Option<String> {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    (arg.get_action().takes_values() && !defaults.is_empty()).then(|| defaults.join(", "))
}

/// Flag `arg`'s possible values, each with its help: what its value enum
/// declares; none for a switch or a free-form value.
pub(crate) fn shown_values(arg: &Arg) -> Vec<PossibleValue> {
    if !arg.get_action().takes_values() {
        return Vec::new();
    }
    arg.get_possible_values()
        .into_iter()
        .filter(|value| !value.is_hide_set())
        .collect()
}

/// `value` as its flag spells it (`owner-only`, not `OwnerOnly`): clap's
/// own spelling, the one source of it, so that the log and `check` speak
/// the flags' language.
pub(crate) fn flag_spelling<T: ValueEnum>(value: &T) -> String {
    value.to_possible_value().map_or_else(
        || "(unnamed)".to_owned(),
        |possible| possible.get_name().to_owned(),
    )
}

/// The parser of a flag that picks a policy of the core crate by word
/// (`--dedup drop`): the core knows no clap, so its policy lists its words
/// and their help ([`Choice`]) and this turns the list into clap's
/// possible values, which `--help` shows as it shows a `ValueEnum`'s.
pub(crate) fn choice<T: Choice>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(
        T::WORDS
            .iter()
            .map(|word| PossibleValue::new(word.word).help(word.help)),
    )
    .map(|word| T::from_word(&word).expect("clap takes only the policy's own words"))
}

/// Refuses a zero `value` of `flag`: a bound of zero would end at once
/// what it bounds.
pub(crate) fn longer_than_zero(flag: &'static str, value: Duration) -> Result<Duration, ConfigError> {
    if value.is_zero() {
        return Err(refuse(flag, "must be longer than zero"));
    }
    Ok(value)
}

/// Refuses a zero `value` of `flag`.
pub(crate) fn at_least_one<T: Default + PartialEq + Copy>(
    flag: &'static str,
    value: T,
) -> Result<T, ConfigError> {
    if value == T::default() {
        return Err(refuse(flag, "must be at least 1"));
    }
    Ok(value)
}

/// Parses `90s`, `15m`, `2h`, `7d` or `500ms`; `0` alone needs no unit.
/// A unit is required otherwise: `5` could mean seconds or minutes, and a
/// guess is how a timeout ends up sixty times too short.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (examples: 90s, 15m, 2h)"))?;
    let seconds_per_unit = match unit {
        "" if number == 0 => return Ok(Duration::ZERO),
        "" => {
            return Err(format!(
                "`{text}` has no unit: add one, e.g. {text}s (ms, s, m, h or d)"
            ));
        }
        "ms" => return Ok(Duration::from_millis(number)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 24 * 3600,
        _ => return Err(format!("`{text}` has an unknown unit (use ms, s, m, h or d)")),
    };
    number
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO), "zero needs no unit");
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 24 * 3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5w").is_err());
        assert_eq!(
            parse_duration("5"),
            Err("`5` has no unit: add one, e.g. 5s (ms, s, m, h or d)".to_owned())
        );
    }

    /// A group's defaults never read the environment: settings built
    /// without flags are the same on every machine.
    #[test]
    fn a_group_s_defaults_ignore_the_environment() {
        #[derive(Debug, Args)]
        struct Group {
            /// Read from `PATH`, which every test process has.
            #[arg(long, env = "PATH", default_value = "no-path")]
            path: String,
            #[arg(long, default_value = "90s", value_parser = parse_duration)]
            timeout: Duration,
        }
        assert!(std::env::var_os("PATH").is_some(), "the test needs a PATH");
        let defaults = flag_defaults::<Group>();
        assert_eq!(
            (defaults.path.as_str(), defaults.timeout),
            ("no-path", Duration::from_secs(90))
        );
    }
}
