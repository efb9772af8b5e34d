//! A NIP-29 group identifier as the operator writes it: `<host>'<group-id>`.
//!
//! NIP-29 names a group by the host of the relay that hosts it and its id,
//! joined by `'`. A bare host means `wss://host`; a full `ws://` or
//! `wss://` URL may stand before the `'` instead (a relay on loopback has
//! no TLS). The id is held to the rule group mentions are held to at
//! intake (`a-z0-9-_`, see `mention::group_id`), so a configured group can
//! always match a mention's `h` tag.

use std::fmt;
use std::str::FromStr;

use acp_bridge_core::mention::is_plausible_group_id;
use nostr_sdk::prelude::RelayUrl;

/// Why a `--group` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupAddressError {
    #[error("`{0}` is not a NIP-29 group identifier: write it as <host>'<group-id>")]
    NoSeparator(String),
    #[error("`{0}` names no relay before the `'`")]
    NoRelay(String),
    #[error("`{value}`: `{relay}` is not a relay ({reason})")]
    BadRelay {
        value: String,
        relay: String,
        reason: String,
    },
    #[error("`{0}`: a group id is 1 to 128 of the characters a-z, 0-9, `-` and `_`")]
    BadId(String),
}

/// One group: the relay that hosts it and its id there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupAddress {
    pub relay: RelayUrl,
    pub id: String,
}

impl GroupAddress {
    pub fn new(relay: RelayUrl, id: &str) -> Self {
        GroupAddress {
            relay,
            id: id.to_owned(),
        }
    }

    /// Whether this is group `id` on `relay` (URLs compared without their
    /// trailing slash, as conversation keys write them).
    pub fn is(&self, relay: &RelayUrl, id: &str) -> bool {
        self.id == id && same_relay(&self.relay, relay)
    }
}

/// Whether two URLs name the same relay.
pub(crate) fn same_relay(a: &RelayUrl, b: &RelayUrl) -> bool {
    a.as_str_without_trailing_slash() == b.as_str_without_trailing_slash()
}

impl FromStr for GroupAddress {
    type Err = GroupAddressError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim();
        let (host, id) = value
            .split_once('\'')
            .ok_or_else(|| GroupAddressError::NoSeparator(value.to_owned()))?;
        if host.is_empty() {
            return Err(GroupAddressError::NoRelay(value.to_owned()));
        }
        if !is_plausible_group_id(id) {
            return Err(GroupAddressError::BadId(value.to_owned()));
        }
        let url = if host.starts_with("ws://") || host.starts_with("wss://") {
            host.to_owned()
        } else if host.contains("://") {
            return Err(GroupAddressError::BadRelay {
                value: value.to_owned(),
                relay: host.to_owned(),
                reason: "only ws:// and wss:// relays".to_owned(),
            });
        } else {
            format!("wss://{host}")
        };
        let relay = RelayUrl::parse(&url).map_err(|error| GroupAddressError::BadRelay {
            value: value.to_owned(),
            relay: host.to_owned(),
            reason: error.to_string(),
        })?;
        Ok(GroupAddress::new(relay, id))
    }
}

impl fmt::Display for GroupAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'{}", self.relay.as_str_without_trailing_slash(), self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(value: &str) -> Result<(String, String), GroupAddressError> {
        value
            .parse::<GroupAddress>()
            .map(|group| (group.relay.as_str_without_trailing_slash().to_owned(), group.id))
    }

    #[test]
    fn a_bare_host_means_wss() {
        assert_eq!(
            parsed("groups.example.com'pizza"),
            Ok(("wss://groups.example.com".to_owned(), "pizza".to_owned()))
        );
    }

    #[test]
    fn a_full_relay_url_is_taken_as_written() {
        assert_eq!(
            parsed("ws://127.0.0.1:7777'room-1"),
            Ok(("ws://127.0.0.1:7777".to_owned(), "room-1".to_owned()))
        );
        assert_eq!(
            parsed(" wss://relay.example.com/'a_b "),
            Ok(("wss://relay.example.com".to_owned(), "a_b".to_owned()))
        );
    }

    #[test]
    fn malformed_values_are_refused_with_the_reason() {
        assert!(matches!(parsed("pizza"), Err(GroupAddressError::NoSeparator(_))));
        assert!(matches!(parsed("'pizza"), Err(GroupAddressError::NoRelay(_))));
        assert!(matches!(
            parsed("relay.example.com'"),
            Err(GroupAddressError::BadId(_))
        ));
        assert!(matches!(
            parsed("relay.example.com'no spaces"),
            Err(GroupAddressError::BadId(_))
        ));
        assert!(matches!(
            parsed("relay.example.com'a'b"),
            Err(GroupAddressError::BadId(_))
        ));
        assert!(matches!(
            parsed("https://relay.example.com'pizza"),
            Err(GroupAddressError::BadRelay { .. })
        ));
        assert!(matches!(
            parsed("ws://'pizza"),
            Err(GroupAddressError::BadRelay { .. })
        ));
    }

    #[test]
    fn it_reads_back_as_written() {
        let group: GroupAddress = "ws://127.0.0.1:7777'room".parse().unwrap();
        assert_eq!(group.to_string(), "ws://127.0.0.1:7777'room");
        assert_eq!(group.to_string().parse::<GroupAddress>(), Ok(group));
    }
}
