//! The config file's keys: every daemon flag, the table (section) it sits
//! in, and whether its value is a secret.
//!
//! One table, written once: the file's reader, `acp-bridge config` and the
//! example file in `deploy/config/` all follow it, and a unit test checks
//! that every flag of the daemon is in it exactly once, so a new flag
//! cannot be forgotten.

/// A table of the config file: the stage its settings belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Relays,
    Signer,
    Identity,
    Gate,
    Groups,
    Agent,
    Mcp,
    Turns,
    Replies,
    Budget,
    State,
    Telemetry,
    Daemon,
}

impl Section {
    /// Every section, in the order the file and `acp-bridge config` show
    /// them: the path of a mention, from the relays to the reply, then the
    /// daemon's own.
    pub(crate) const ALL: [Section; 13] = [
        Section::Relays,
        Section::Signer,
        Section::Identity,
        Section::Gate,
        Section::Groups,
        Section::Agent,
        Section::Mcp,
        Section::Turns,
        Section::Replies,
        Section::Budget,
        Section::State,
        Section::Telemetry,
        Section::Daemon,
    ];

    /// The table's name in the file (`[relays]`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Section::Relays => "relays",
            Section::Signer => "signer",
            Section::Identity => "identity",
            Section::Gate => "gate",
            Section::Groups => "groups",
            Section::Agent => "agent",
            Section::Mcp => "mcp",
            Section::Turns => "turns",
            Section::Replies => "replies",
            Section::Budget => "budget",
            Section::State => "state",
            Section::Telemetry => "telemetry",
            Section::Daemon => "daemon",
        }
    }

    pub(crate) fn named(name: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|section| section.name() == name)
    }
}

/// One key of the file: a flag's long name (without `--`) in its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) section: Section,
    /// For a flag whose value is a secret itself (not a path to one): what
    /// to do instead of writing it in the file, which is meant to be
    /// shared (a ConfigMap, a world-readable /etc file). `None` for the
    /// rest.
    pub(crate) secret: Option<&'static str>,
}

const fn key(name: &'static str, section: Section) -> Key {
    Key {
        name,
        section,
        secret: None,
    }
}

const fn secret(name: &'static str, section: Section, instead: &'static str) -> Key {
    Key {
        name,
        section,
        secret: Some(instead),
    }
}

/// Every key, grouped by section in [`Section::ALL`]'s order.
pub(crate) const KEYS: &[Key] = &[
    key("relay", Section::Relays),
    key("dm-relays", Section::Relays),
    key("directory-relays", Section::Relays),
    key("allow-insecure-relays", Section::Relays),
    key("allow-private-relays", Section::Relays),
    key("kinds", Section::Relays),
    key("follow-threads", Section::Relays),
    key("relay-buffer", Section::Relays),
    key("max-parked-bytes", Section::Relays),
    key("secret-key-file", Section::Signer),
    key("signer-file", Section::Signer),
    secret(
        "signer",
        Section::Signer,
        "put the bunker URI in a file of its own (chmod 600) and name it with signer-file, or set ACP_BRIDGE_SIGNER",
    ),
    key("signer-timeout", Section::Signer),
    key("profile-name", Section::Identity),
    key("profile-about", Section::Identity),
    key("profile-picture", Section::Identity),
    key("owner", Section::Gate),
    key("respond-to", Section::Gate),
    key("allowlist", Section::Gate),
    key("rate-limit-burst", Section::Gate),
    key("rate-limit-refill", Section::Gate),
    key("max-bot-hops", Section::Gate),
    key("max-reply-chain", Section::Gate),
    key("max-content-bytes", Section::Gate),
    key("group", Section::Groups),
    key("other-groups", Section::Groups),
    secret(
        "group-invite-code",
        Section::Groups,
        "set ACP_BRIDGE_GROUP_INVITE_CODE",
    ),
    key("agent-command", Section::Agent),
    key("agent-args", Section::Agent),
    key("agent-env", Section::Agent),
    key("agent-auth-method", Section::Agent),
    key("agent-user", Section::Agent),
    key("agent-uids", Section::Agent),
    key("agents", Section::Agent),
    key("turns-per-agent", Section::Agent),
    key("cwd", Section::Agent),
    key("workspace", Section::Agent),
    key("workspace-repo", Section::Agent),
    key("workspace-extra-dir", Section::Agent),
    key("agent-start-timeout", Section::Agent),
    key("session-idle", Section::Agent),
    key("max-live-sessions", Section::Agent),
    key("permission-policy", Section::Agent),
    key("permission-timeout", Section::Agent),
    key("mcp", Section::Mcp),
    key("mcp-servers", Section::Mcp),
    key("blossom", Section::Mcp),
    key("max-file-bytes", Section::Mcp),
    key("session-policy", Section::Turns),
    key("multiple-event-handling", Section::Turns),
    key("dedup", Section::Turns),
    key("max-queued", Section::Turns),
    key("wait-notice-after", Section::Turns),
    key("idle-timeout", Section::Turns),
    key("max-turn-duration", Section::Turns),
    key("cancel-timeout", Section::Turns),
    key("thread-context", Section::Turns),
    key("thread-context-from", Section::Turns),
    key("thread-context-bytes", Section::Turns),
    key("max-image-bytes", Section::Turns),
    key("max-audio-bytes", Section::Turns),
    key("media-fetch-timeout", Section::Turns),
    key("fetch-private-addresses", Section::Turns),
    key("reply-mode", Section::Replies),
    key("reply-content", Section::Replies),
    key("no-reactions", Section::Replies),
    key("max-reply-bytes", Section::Replies),
    key("budget-bot-per-day", Section::Budget),
    key("budget-bot-per-month", Section::Budget),
    key("budget-author-per-day", Section::Budget),
    key("budget-author-per-month", Section::Budget),
    key("budget-stranger-per-day", Section::Budget),
    key("budget-stranger-per-month", Section::Budget),
    key("budget-conversation-per-day", Section::Budget),
    key("budget-conversation-per-month", Section::Budget),
    key("budget-turn-cap", Section::Budget),
    key("budget-warn-at", Section::Budget),
    key("state-dir", Section::State),
    key("retention", Section::State),
    key("log-format", Section::Telemetry),
    key("log-level", Section::Telemetry),
    key("metrics-addr", Section::Telemetry),
    key("shard", Section::Daemon),
    key("shutdown-grace", Section::Daemon),
    key("worker-threads", Section::Daemon),
];

/// The key of flag `--name`, in whichever section.
pub(crate) fn key_named(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name)
}

/// The keys of `section`, in the table's order.
pub(crate) fn keys_of(section: Section) -> impl Iterator<Item = &'static Key> {
    KEYS.iter().filter(move |key| key.section == section)
}
