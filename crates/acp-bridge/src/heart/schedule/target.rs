//! Where a schedule's runs are answered: the owner's DM, a NIP-29 group,
//! or a public note thread, written as the bridge's own conversation keys
//! (`dm`, `group:<relay>'<group id>`, `note:<event id>`).

use std::fmt;

use acp_bridge_core::mention::is_plausible_group_id;
use nostr_sdk::prelude::{EventId, RelayUrl};

/// A schedule's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A NIP-17 DM to the owner.
    Dm,
    /// NIP-29 group `group` on `relay`.
    Group { relay: RelayUrl, group: String },
    /// The public note thread under `root`.
    Note { root: EventId },
}

impl Target {
    /// Reads a target as written in the config file.
    pub(crate) fn parse(text: &str) -> Result<Target, String> {
        let text = text.trim();
        if text == "dm" {
            return Ok(Target::Dm);
        }
        if let Some(hex) = text.strip_prefix("note:") {
            let root = EventId::from_hex(hex)
                .map_err(|_| format!("`{text}`: `{hex}` is not an event id (64 hex digits)"))?;
            return Ok(Target::Note { root });
        }
        if let Some(rest) = text.strip_prefix("group:") {
            let (relay, group) = rest
                .rsplit_once('\'')
                .ok_or_else(|| format!("`{text}`: a group target is `group:<relay>'<group id>`"))?;
            let relay =
                RelayUrl::parse(relay).map_err(|_| format!("`{text}`: `{relay}` is not a relay URL"))?;
            if !is_plausible_group_id(group) {
                return Err(format!(
                    "`{text}`: `{group}` is not a NIP-29 group id (a-z, 0-9, - and _)"
                ));
            }
            return Ok(Target::Group {
                relay,
                group: group.to_owned(),
            });
        }
        Err(format!(
            "`{text}` is not a target: `dm`, `group:<relay>'<group id>` or `note:<event id>`"
        ))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Dm => f.write_str("dm"),
            Target::Group { relay, group } => {
                write!(f, "group:{}'{group}", relay.as_str_without_trailing_slash())
            }
            Target::Note { root } => write!(f, "note:{}", root.to_hex()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_targets_read_and_write_back() {
        let note = format!("note:{}", "ab".repeat(32));
        for text in ["dm", "group:wss://relay.example'dev-team", note.as_str()] {
            assert_eq!(Target::parse(text).expect(text).to_string(), text);
        }
    }

    #[test]
    fn a_bad_target_is_refused_with_the_forms() {
        for (text, says) in [
            ("group:wss://relay.example", "group:<relay>'<group id>"),
            ("group:wss://relay.example'a b", "not a NIP-29 group id"),
            ("group:nope'room", "not a relay URL"),
            ("note:xyz", "not an event id"),
            ("owner", "not a target"),
        ] {
            let refusal = Target::parse(text).expect_err(text);
            assert!(refusal.contains(says), "{text}: {refusal}");
        }
    }
}
