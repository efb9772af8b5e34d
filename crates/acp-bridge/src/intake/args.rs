//! The intake's flags (what is heard: kinds, followed threads; and its
//! bounds: size, rate, loops, queue, parked bytes) and their validation
//! into [`IntakeLimits`].

use std::time::Duration;

use acp_bridge_core::mention::SessionPolicy;
use clap::Args;
use nostr_sdk::prelude::Kind;

use super::{FollowThreads, IntakeLimits, RateLimit};
use crate::base::flags::{
    ConfigError, at_least_one, choice, flag_defaults, longer_than_zero, parse_duration, refuse,
};
use crate::policy::loop_guard::ChainBounds;

/// The kinds `--kinds` takes: group chat, notes, gift-wrapped DMs,
/// NIP-22 comments and NIP-7D threads.
const SUPPORTED_KINDS: [u16; 5] = [9, 1, 1059, 1111, 11];

/// The intake's flags. They sit in the tables of what they bound (the
/// relays' listening, the gate's limits, the turns' queue), each naming its
/// own.
#[derive(Debug, Clone, Args)]
pub struct IntakeArgs {
    /// Kinds listened to (9 groups, 1 notes, 1059 DMs, 1111/11 comments)
    ///
    /// Event kinds to listen to: 9 (NIP-29 group chat), 1 (notes), 1059 (NIP-17 DMs),
    /// 1111 (NIP-22 comments), 11 (NIP-7D threads).
    #[arg(
        long,
        env = "ACP_BRIDGE_KINDS",
        help_heading = "Relays",
        value_delimiter = ',',
        default_value = "9,1,1059,1111,11"
    )]
    pub kinds: Vec<u16>,

    /// Replies in threads the bot answered in count as mentions
    ///
    /// Replies in a thread the bot has answered in count as mentions
    /// (`involved`), without the bot's `p` tag; `off`: only tagged events.
    #[arg(
        long,
        env = "ACP_BRIDGE_FOLLOW_THREADS",
        help_heading = "Relays",
        value_enum,
        default_value = "involved"
    )]
    pub follow_threads: FollowThreads,

    /// Largest mention taken for a turn
    ///
    /// Largest mention content accepted for a turn; bigger ones get a notice.
    #[arg(long, env = "ACP_BRIDGE_MAX_CONTENT_BYTES", help_heading = "Gate", default_value_t = 64 * 1024)]
    pub max_content_bytes: usize,

    /// Mentions an author may send in a burst
    ///
    /// Mentions an author may send in a burst before being rate-limited (the owner is exempt).
    #[arg(
        long,
        env = "ACP_BRIDGE_RATE_LIMIT_BURST",
        help_heading = "Gate",
        default_value_t = 10
    )]
    pub rate_limit_burst: u32,

    /// One more mention per this interval after the burst
    ///
    /// One more mention is allowed per this interval once the burst is spent.
    #[arg(long, env = "ACP_BRIDGE_RATE_LIMIT_REFILL", help_heading = "Gate", default_value = "6s", value_parser = parse_duration)]
    pub rate_limit_refill: Duration,

    /// Sibling bots' reply chains this deep at most
    ///
    /// Sibling bots may chain replies to our replies at most this deep.
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_BOT_HOPS",
        help_heading = "Gate",
        default_value_t = 3
    )]
    pub max_bot_hops: u32,

    /// Mentions waiting for a turn, at most
    ///
    /// Mentions waiting for a turn, in all conversations, at most; past it
    /// new mentions get a (rate-limited) notice instead (the owner's are
    /// still taken).
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_QUEUED",
        help_heading = "Turns",
        default_value_t = 10_000
    )]
    pub max_queued: usize,

    /// Bytes of events waiting for a profile lookup, at most
    ///
    /// Bytes held at most by events that wait for their author's profile
    /// lookup (one author: a sixteenth of it); past it an event is left to
    /// the relay and fetched again later.
    #[arg(long, env = "ACP_BRIDGE_MAX_PARKED_BYTES", help_heading = "Relays", default_value_t = super::DEFAULT_MAX_PARKED_BYTES)]
    pub max_parked_bytes: usize,

    /// Reply chains from others this deep at most
    ///
    /// Anyone else but the owner may chain replies to our replies this deep:
    /// at this depth they are told to start afresh, past it they are not answered.
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_REPLY_CHAIN",
        help_heading = "Gate",
        default_value_t = 20
    )]
    pub max_reply_chain: u32,

    /// Which conversations share an agent session.
    #[arg(
        long,
        env = "ACP_BRIDGE_SESSION_POLICY",
        help_heading = "Turns",
        value_parser = choice::<SessionPolicy>(),
        default_value = "conversation"
    )]
    pub session_policy: SessionPolicy,
}

impl Default for IntakeArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Default for IntakeLimits {
    /// The flags' defaults.
    fn default() -> Self {
        IntakeArgs::default()
            .validate()
            .expect("the flags' defaults are valid")
    }
}

impl IntakeLimits {
    /// `--rate-limit-burst` and `--rate-limit-refill`, as a reload hands
    /// them to the running intake.
    pub(crate) fn rate_limit(&self) -> RateLimit {
        RateLimit {
            burst: self.rate_limit_burst,
            refill: self.rate_limit_refill,
        }
    }
}

impl IntakeArgs {
    pub(crate) fn validate(&self) -> Result<IntakeLimits, ConfigError> {
        Ok(IntakeLimits {
            kinds: parse_kinds(&self.kinds)?,
            max_content_bytes: at_least_one("--max-content-bytes", self.max_content_bytes)?,
            rate_limit_burst: at_least_one("--rate-limit-burst", self.rate_limit_burst)?,
            rate_limit_refill: longer_than_zero("--rate-limit-refill", self.rate_limit_refill)?,
            chain_bounds: ChainBounds {
                max_bot_hops: self.max_bot_hops,
                max_reply_chain: self.max_reply_chain,
            },
            session_policy: self.session_policy,
            max_queued: at_least_one("--max-queued", self.max_queued)?,
            follow_threads: self.follow_threads == FollowThreads::Involved,
            max_parked_bytes: at_least_one("--max-parked-bytes", self.max_parked_bytes)?,
        })
    }
}

fn parse_kinds(values: &[u16]) -> Result<Vec<Kind>, ConfigError> {
    let mut kinds = Vec::new();
    for &value in values {
        if !SUPPORTED_KINDS.contains(&value) {
            return Err(refuse(
                "--kinds",
                format!(
                    "kind {value} is not supported (supported: 9 group chat, 1 notes, 1059 DMs, 1111 comments, 11 threads)"
                ),
            ));
        }
        if !kinds.contains(&Kind::from(value)) {
            kinds.push(Kind::from(value));
        }
    }
    if kinds.is_empty() {
        return Err(refuse("--kinds", "at least one kind is required"));
    }
    Ok(kinds)
}
