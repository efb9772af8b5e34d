//! SIGHUP: the config file read again, and what of it may change while the
//! daemon runs.
//!
//! The allowlist, the rate limits and the profile fields are taken: the
//! gate reads the allowlist on every event from one place (its rules), the
//! intake takes new rate limits before its next admission, so both hold
//! from the next event; a new profile is published as at start. Every other key that differs from the file the daemon started
//! with is refused with a line naming it: the stages copy their settings
//! when they are wired, and a restart applies them. The file is also the
//! lowest layer on a reload: a key set by its `ACP_BRIDGE_*` variable or
//! its flag wins over it, and the reload says so instead of changing it; a
//! key left out of the file goes back to its default.

use std::collections::{BTreeMap, BTreeSet};

use clap::ArgMatches;
use clap::parser::ValueSource;
use nostr_sdk::prelude::PublicKey;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::keys;
use super::{ConfigFile, daemon_flags};
use crate::base::flags::parse_duration;
use crate::intake::RateLimit;
use crate::outbound::identity::ProfileFields;
use crate::outbound::identity::profile_fields;
use crate::policy::gate::RespondTo;
use crate::policy::gate::args::parse_allowlist;

const ALLOWLIST: &str = "allowlist";
const RATE_LIMIT_BURST: &str = "rate-limit-burst";
const RATE_LIMIT_REFILL: &str = "rate-limit-refill";
const PROFILE: [&str; 3] = ["profile-name", "profile-about", "profile-picture"];
/// The keys a reload applies; every other one waits for a restart.
const RELOADABLE: [&str; 6] = [
    ALLOWLIST,
    RATE_LIMIT_BURST,
    RATE_LIMIT_REFILL,
    PROFILE[0],
    PROFILE[1],
    PROFILE[2],
];

/// What a reload changes in the running daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reload {
    pub allowlist: Option<BTreeSet<PublicKey>>,
    pub rate_limit: Option<RateLimit>,
    pub profile: Option<ProfileFields>,
}

/// On every SIGHUP until `reloads` closes: reads `file` again and sends
/// what may change (after a line for each key that may not). `matches` are
/// the start's, to tell a value from the file from one set by a variable
/// or a flag.
pub async fn reload_on_hangup(file: ConfigFile, matches: ArgMatches, reloads: mpsc::UnboundedSender<Reload>) {
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: the config file is read at start only");
        return;
    };
    let mut in_force = InForce::at_start(&matches);
    loop {
        tokio::select! {
            received = hangups.recv() => if received.is_none() { return },
            () = reloads.closed() => return,
        }
        let newer = match ConfigFile::read(file.path()) {
            Ok(newer) => newer,
            Err(error) => {
                tracing::warn!(%error, "SIGHUP: the config file was not reloaded; the settings in force stay");
                continue;
            }
        };
        if let Some(reload) = changes(&file, &newer, &matches, &mut in_force)
            && reloads.send(reload).is_err()
        {
            return;
        }
    }
}

/// The raw values in force of the keys a reload applies.
#[derive(Debug, Clone)]
struct InForce(BTreeMap<&'static str, Vec<String>>);

impl InForce {
    fn at_start(matches: &ArgMatches) -> InForce {
        let flags = daemon_flags();
        InForce(
            RELOADABLE
                .into_iter()
                .map(|long| {
                    let raw = matches
                        .get_raw(id_of(&flags, long).as_str())
                        .map(|values| values.map(|value| value.to_string_lossy().into_owned()).collect())
                        .unwrap_or_default();
                    (long, raw)
                })
                .collect(),
        )
    }

    fn get(&self, long: &str) -> &[String] {
        self.0.get(long).map_or(&[], Vec::as_slice)
    }
}

/// What `newer` changes against the file the daemon `started` with and the
/// values `in_force`; a warning for each key it cannot change.
fn changes(
    started: &ConfigFile,
    newer: &ConfigFile,
    matches: &ArgMatches,
    in_force: &mut InForce,
) -> Option<Reload> {
    let file = newer.path().display().to_string();
    for key in waiting_for_restart(started, newer) {
        tracing::warn!(
            %key,
            %file,
            "SIGHUP: this setting cannot change while the daemon runs; restart it to apply the file's value"
        );
    }
    let flags = daemon_flags();
    let mut wanted: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for long in RELOADABLE {
        let set_above_the_file = matches!(
            matches.value_source(id_of(&flags, long).as_str()),
            Some(ValueSource::EnvVariable | ValueSource::CommandLine)
        );
        if set_above_the_file {
            if started.raw(long) != newer.raw(long) {
                tracing::warn!(
                    key = %path_of(long),
                    %file,
                    "SIGHUP: a variable or a flag sets this and wins over the file: it stays"
                );
            }
            continue;
        }
        let value = file_layer(newer, &flags, long);
        if value.as_slice() != in_force.get(long) {
            wanted.insert(long, value);
        }
    }
    let allowlist = wanted
        .remove(ALLOWLIST)
        .and_then(|value| new_allowlist(value, matches, &file, in_force));
    let profile = if PROFILE.iter().any(|long| wanted.contains_key(long)) {
        new_profile(&mut wanted, &file, in_force)
    } else {
        None
    };
    let rate_limit = if wanted.is_empty() {
        None
    } else {
        new_rate_limit(wanted, &file, in_force)
    };
    (allowlist.is_some() || rate_limit.is_some() || profile.is_some()).then_some(Reload {
        allowlist,
        rate_limit,
        profile,
    })
}

/// The profile fields with the `wanted` ones (those in force for the
/// rest), once checked, and then in force.
fn new_profile(
    wanted: &mut BTreeMap<&'static str, Vec<String>>,
    file: &str,
    in_force: &mut InForce,
) -> Option<ProfileFields> {
    let values = PROFILE.map(|long| wanted.remove(long).unwrap_or_else(|| in_force.get(long).to_vec()));
    let [name, about, picture] = values.clone().map(|raw| raw.into_iter().next());
    match profile_fields(&name, &about, &picture) {
        Ok(profile) => {
            for (long, raw) in PROFILE.into_iter().zip(values) {
                in_force.0.insert(long, raw);
            }
            Some(profile)
        }
        Err(error) => {
            tracing::warn!(key = %path_of("profile-picture"), %file, %error, "SIGHUP: the profile stays");
            None
        }
    }
}

/// The allowlist `value` once checked, and then in force.
fn new_allowlist(
    value: Vec<String>,
    matches: &ArgMatches,
    file: &str,
    in_force: &mut InForce,
) -> Option<BTreeSet<PublicKey>> {
    let key = path_of(ALLOWLIST);
    let allowlist = match parse_allowlist(&value) {
        Ok(allowlist) => allowlist,
        Err(error) => {
            tracing::warn!(%key, %file, %error, "SIGHUP: the allowlist stays");
            return None;
        }
    };
    if allowlist.is_empty() && matches.get_one::<RespondTo>("respond_to") == Some(&RespondTo::Allowlist) {
        tracing::warn!(
            %key,
            %file,
            "SIGHUP: the new allowlist is empty, but respond-to allowlist needs at least one key: the allowlist stays"
        );
        return None;
    }
    in_force.0.insert(ALLOWLIST, value);
    Some(allowlist)
}

/// The rate limits with the `wanted` burst and refill (the one in force
/// for the other), once checked, and then in force.
fn new_rate_limit(
    mut wanted: BTreeMap<&'static str, Vec<String>>,
    file: &str,
    in_force: &mut InForce,
) -> Option<RateLimit> {
    let mut take = |long: &'static str| wanted.remove(long).unwrap_or_else(|| in_force.get(long).to_vec());
    let (burst_raw, refill_raw) = (take(RATE_LIMIT_BURST), take(RATE_LIMIT_REFILL));
    let burst = match burst_raw.first().map(|text| text.parse::<u32>()) {
        Some(Ok(burst)) if burst > 0 => burst,
        _ => {
            tracing::warn!(key = %path_of(RATE_LIMIT_BURST), %file, "SIGHUP: not a number of at least 1: the rate limits stay");
            return None;
        }
    };
    let refill = match refill_raw.first().map(|text| parse_duration(text)) {
        Some(Ok(refill)) if !refill.is_zero() => refill,
        _ => {
            tracing::warn!(key = %path_of(RATE_LIMIT_REFILL), %file, "SIGHUP: not a duration longer than zero: the rate limits stay");
            return None;
        }
    };
    in_force.0.insert(RATE_LIMIT_BURST, burst_raw);
    in_force.0.insert(RATE_LIMIT_REFILL, refill_raw);
    Some(RateLimit { burst, refill })
}

/// What the file gives flag `--long` (its default when the file is silent).
fn file_layer(file: &ConfigFile, flags: &clap::Command, long: &str) -> Vec<String> {
    file.raw(long).map_or_else(
        || {
            arg_of(flags, long)
                .get_default_values()
                .iter()
                .map(|value| value.to_string_lossy().into_owned())
                .collect()
        },
        <[String]>::to_vec,
    )
}

fn arg_of<'a>(flags: &'a clap::Command, long: &str) -> &'a clap::Arg {
    flags
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .expect("every key is a flag (keys::tests)")
}

fn id_of(flags: &clap::Command, long: &str) -> String {
    arg_of(flags, long).get_id().as_str().to_owned()
}

/// The keys (`section.key`) that `newer` changes against `started` and a
/// reload cannot apply; `agents` for the agent profiles, whose pools are
/// started once.
fn waiting_for_restart(started: &ConfigFile, newer: &ConfigFile) -> Vec<String> {
    let mut keys: Vec<String> = keys::all()
        .iter()
        .filter(|key| {
            !RELOADABLE.contains(&key.flag.as_str()) && started.raw(&key.flag) != newer.raw(&key.flag)
        })
        .map(keys::Key::path)
        .collect();
    if started.profiles() != newer.profiles() {
        keys.push(super::profiles::AGENTS_TABLE.to_owned());
    }
    keys
}

fn path_of(long: &str) -> String {
    keys::key_of_flag(long)
        .expect("every reloadable key is a key")
        .path()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use nostr_sdk::prelude::Keys;

    use super::*;
    use crate::config_file::daemon_flags;

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(Path::new("/etc/acp-bridge.toml"), text).expect("a valid file")
    }

    /// The start's matches: `args` on the command line over `started`.
    fn matches(started: &ConfigFile, args: &[&str]) -> ArgMatches {
        started
            .as_defaults(daemon_flags())
            .try_get_matches_from(std::iter::once("acp-bridge").chain(args.iter().copied()))
            .expect("flags parse")
    }

    fn allowlist_file(keys: &[&str], agents: u32) -> ConfigFile {
        let quoted: Vec<String> = keys.iter().map(|key| format!("\"{key}\"")).collect();
        file(&format!(
            "[gate]\nrespond-to = \"allowlist\"\nallowlist = [{}]\n[agent]\nagents = {agents}\n",
            quoted.join(", ")
        ))
    }

    #[test]
    fn only_a_new_allowlist_from_the_file_reloads() {
        let (first, second) = (Keys::generate().public_key(), Keys::generate().public_key());
        let started = allowlist_file(&[&first.to_hex()], 1);
        let newer = allowlist_file(&[&second.to_hex()], 2);
        let in_force = || InForce::at_start(&matches(&started, &[]));

        let mut applied = in_force();
        let reload = changes(&started, &newer, &matches(&started, &[]), &mut applied);
        assert_eq!(
            reload,
            Some(Reload {
                allowlist: Some(BTreeSet::from([second])),
                rate_limit: None,
                profile: None,
            })
        );
        assert_eq!(
            changes(&started, &newer, &matches(&started, &[]), &mut applied),
            None,
            "the same file again changes nothing"
        );

        let by_flag = matches(&started, &["--allowlist", &first.to_hex()]);
        assert_eq!(
            changes(&started, &newer, &by_flag, &mut InForce::at_start(&by_flag)),
            None,
            "a flag wins over the file"
        );
        let empty = allowlist_file(&[], 1);
        assert_eq!(
            changes(&started, &empty, &matches(&started, &[]), &mut in_force()),
            None,
            "allowlist mode needs a key"
        );
        let broken = allowlist_file(&["npub1broken"], 1);
        assert_eq!(
            changes(&started, &broken, &matches(&started, &[]), &mut in_force()),
            None
        );
    }

    #[test]
    fn changed_agent_profiles_wait_for_a_restart() {
        let started = file("[agents.a]\ncommand = \"a\"\n");
        let newer = file("[agents.a]\ncommand = \"b\"\n[turns]\nsession-policy = \"thread\"\n");
        assert_eq!(
            waiting_for_restart(&started, &newer),
            ["turns.session-policy", "agents"]
        );
        assert!(waiting_for_restart(&started, &started).is_empty());
    }

    #[test]
    fn a_new_rate_limit_keeps_the_other_half_in_force() {
        let started = file("[gate]\nrate-limit-burst = 2\n");
        let mut in_force = InForce::at_start(&matches(&started, &[]));
        let newer = file("[gate]\nrate-limit-burst = 2\nrate-limit-refill = \"1s\"\n");
        let reload = changes(&started, &newer, &matches(&started, &[]), &mut in_force);
        assert_eq!(
            reload.and_then(|reload| reload.rate_limit),
            Some(RateLimit {
                burst: 2,
                refill: std::time::Duration::from_secs(1)
            })
        );
        let silent = file("");
        let back = changes(&started, &silent, &matches(&started, &[]), &mut in_force);
        assert_eq!(
            back.and_then(|reload| reload.rate_limit),
            Some(RateLimit {
                burst: 10,
                refill: std::time::Duration::from_secs(6)
            }),
            "a key left out of the file goes back to its default"
        );
        let zero = file("[gate]\nrate-limit-burst = 0\n");
        assert_eq!(
            changes(&started, &zero, &matches(&started, &[]), &mut in_force),
            None
        );
    }
}
