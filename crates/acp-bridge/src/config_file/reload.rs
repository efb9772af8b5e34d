//! SIGHUP: the config file read again, and what of it may change while the
//! daemon runs.
//!
//! Only the allowlist is taken: the gate reads it on every event from one
//! place (its rules), so a new list holds from the next event. Every other
//! key that differs from the file the daemon started with is refused with
//! a line naming it: the stages copy their settings when they are wired,
//! and a restart applies them. The file is also the lowest layer on a
//! reload: an allowlist set by `ACP_BRIDGE_ALLOWLIST` or `--allowlist`
//! wins over it, and the reload says so instead of changing it.

use std::collections::BTreeSet;

use clap::ArgMatches;
use clap::parser::ValueSource;
use nostr_sdk::prelude::PublicKey;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::ConfigFile;
use super::keys::{KEYS, Key, key_named};
use crate::config::parse_allowlist;
use crate::gate::RespondTo;

/// The one key a reload applies.
const ALLOWLIST: &str = "allowlist";

/// What a reload changes in the running daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reload {
    pub allowlist: BTreeSet<PublicKey>,
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
    let mut allowlist_in_force = file.raw(ALLOWLIST).map(<[String]>::to_vec);
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
        if let Some(reload) = changes(&file, &newer, &matches, &mut allowlist_in_force)
            && reloads.send(reload).is_err()
        {
            return;
        }
    }
}

/// What `newer` changes against the file the daemon `started` with and the
/// allowlist in force; a warning for each key it cannot change.
fn changes(
    started: &ConfigFile,
    newer: &ConfigFile,
    matches: &ArgMatches,
    allowlist_in_force: &mut Option<Vec<String>>,
) -> Option<Reload> {
    let file = newer.path().display().to_string();
    for key in KEYS
        .iter()
        .filter(|key| key.name != ALLOWLIST && started.raw(key.name) != newer.raw(key.name))
    {
        tracing::warn!(
            key = %path_of(key),
            %file,
            "SIGHUP: this setting cannot change while the daemon runs; restart it to apply the file's value"
        );
    }
    let wanted = newer.raw(ALLOWLIST).map(<[String]>::to_vec);
    if wanted == *allowlist_in_force {
        return None;
    }
    let key = path_of(key_named(ALLOWLIST).expect("a key"));
    if matches!(
        matches.value_source(ALLOWLIST),
        Some(ValueSource::EnvVariable | ValueSource::CommandLine)
    ) {
        tracing::warn!(
            %key,
            %file,
            "SIGHUP: ACP_BRIDGE_ALLOWLIST or --allowlist is set and wins over the file: the allowlist stays"
        );
        return None;
    }
    let allowlist = match parse_allowlist(wanted.as_deref().unwrap_or_default()) {
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
    *allowlist_in_force = wanted;
    Some(Reload { allowlist })
}

fn path_of(key: &Key) -> String {
    format!("{}.{}", key.section.name(), key.name)
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
        let in_force = || started.raw(ALLOWLIST).map(<[String]>::to_vec);

        let mut applied = in_force();
        let reload = changes(&started, &newer, &matches(&started, &[]), &mut applied);
        assert_eq!(
            reload.map(|reload| reload.allowlist),
            Some(BTreeSet::from([second]))
        );
        assert_eq!(
            changes(&started, &newer, &matches(&started, &[]), &mut applied),
            None,
            "the same file again changes nothing"
        );

        let by_flag = matches(&started, &["--allowlist", &first.to_hex()]);
        assert_eq!(
            changes(&started, &newer, &by_flag, &mut in_force()),
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
}
