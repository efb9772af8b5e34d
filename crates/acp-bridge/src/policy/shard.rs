//! Shards of one bot: which replica answers which conversation.
//!
//! Several daemons may run with the same key on the same relays, each with
//! `--shard INDEX/COUNT`. All of them receive every mention; a replica acts
//! only on conversations whose key hashes to its index, so each
//! conversation has exactly one owner without any coordination between the
//! replicas. The fence against two live owners of one index is the
//! deployment's: a Kubernetes StatefulSet runs at most one pod per ordinal,
//! and `auto/COUNT` takes the index from that ordinal (the hostname's
//! trailing `-N`).
//!
//! The hash is part of the contract between replicas and between versions
//! (a rolling upgrade runs two at once): the first 8 bytes of the SHA-256
//! of the conversation key's text, as a big-endian integer, modulo COUNT.
//! Never change it; the pinned values in the tests guard it.
//!
//! Owns parsing the flag, reading the ordinal and the ownership test; the
//! intake applies it (another shard's mention is journaled as seen, and
//! nothing else).
//!
//! One exception to the hash: the owner's reply to a question. A question
//! about a DM with someone else is asked in the owner's DM, a conversation
//! that may hash to another replica; the reply belongs to the replica that
//! asked, and must not also be taken as a message by the one that owns the
//! owner's DM. So a replica that asks in a DM marks the question's rumor
//! with its index ([`Shard::question_tag`]) and gift-wraps a copy to the
//! bot itself, as NIP-17 asks of every sender; every replica reads those
//! copies into [`QuestionAskers`] and routes a reply by the question it
//! tags ([`Shard::takes_reply_to_question`]); the heart asks it whether
//! another replica may have a question open in the owner's DM, when an
//! untagged DM must not be taken for an answer.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::prelude::{EventId, Tag, TagKind};

/// The tag that names the replica that asked a question: `[name, INDEX]`.
const QUESTION_TAG: &str = "acp-bridge-asked-by-shard";
/// Questions of every replica remembered, the newest kept: far more than
/// can be open at once (each turn asks one at a time, and times out).
const MAX_QUESTIONS_REMEMBERED: usize = 4096;

/// More replicas than this are refused: past it the flag is surely a typo.
pub(crate) const MAX_SHARD_COUNT: u32 = 1024;
/// Where the kernel keeps the hostname, read when `HOSTNAME` is not set.
const KERNEL_HOSTNAME_PATH: &str = "/proc/sys/kernel/hostname";

/// This replica's share of the bot's conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// One replica that owns every conversation (no `--shard`).
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 || count > MAX_SHARD_COUNT {
            return Err(ShardError::Count(count));
        }
        if index >= count {
            return Err(ShardError::IndexOutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    pub fn index(self) -> u32 {
        self.index
    }

    pub fn count(self) -> u32 {
        self.count
    }

    /// The index of the replica that owns `conversation` among `count`.
    pub fn owner_index(conversation: &str, count: u32) -> u32 {
        let digest = sha256::Hash::hash(conversation.as_bytes()).to_byte_array();
        let mut head = [0u8; 8];
        head.copy_from_slice(&digest[..8]);
        // `count` is at most MAX_SHARD_COUNT, so the remainder fits.
        (u64::from_be_bytes(head) % u64::from(count.max(1))) as u32
    }

    /// Whether this replica acts on `conversation`.
    pub fn owns(self, conversation: &str) -> bool {
        self.count == 1 || Shard::owner_index(conversation, self.count) == self.index
    }

    /// Logs a mention resumed from this replica's journal whose
    /// conversation hashes elsewhere now (COUNT changed since it was
    /// taken in). This replica still finishes it: it journaled it, and no
    /// other replica did; only new mentions go to the new owner.
    pub fn log_if_moved(self, conversation: &str) {
        if !self.owns(conversation) {
            tracing::info!(
                %conversation, shard = %self, owner = Shard::owner_index(conversation, self.count),
                "resuming a mention of a conversation another shard owns now; new mentions there go to it"
            );
        }
    }
}

impl Shard {
    /// Whether this replica is one of several.
    pub fn is_sharded(self) -> bool {
        self.count > 1
    }

    /// The tag a question's rumor carries when this replica asks it.
    pub fn question_tag(self) -> Tag {
        Tag::custom(TagKind::custom(QUESTION_TAG), [self.index.to_string()])
    }

    /// Whether this replica takes the owner's reply to `question`: `Some`
    /// when it is a question some replica asked (this one or another),
    /// `None` when it is none known (the conversation's hash decides).
    pub fn takes_reply_to_question(self, askers: &QuestionAskers, question: EventId) -> Option<bool> {
        askers.asker(question).map(|index| index == self.index)
    }
}

/// Which replica asked each of the bot's questions asked in a DM, and when
/// its copy came, as read off the copies the askers wrap to the bot
/// itself; the newest [`MAX_QUESTIONS_REMEMBERED`]. Rebuilt after a
/// restart from the copies the relay delivers again (a DM subscription
/// reaches back past NIP-59's randomised dates). One handle, shared: the
/// intake records and routes by it, the heart asks whether another replica
/// may have a question open in the owner's DM.
#[derive(Debug, Clone, Default)]
pub struct QuestionAskers {
    askers: Arc<Mutex<Askers>>,
}

#[derive(Debug, Default)]
struct Askers {
    by_question: HashMap<EventId, (u32, Instant)>,
    order: VecDeque<EventId>,
}

impl QuestionAskers {
    /// Remembers who asked `rumor` (the bot's own DM, as its copy to itself
    /// shows it) when it is a question, as seen `now`; true when it was one.
    pub fn record(&self, rumor: EventId, tags: &[Tag], now: Instant) -> bool {
        let asker = tags
            .iter()
            .find(|tag| tag.kind() == TagKind::custom(QUESTION_TAG))
            .and_then(|tag| tag.content()?.parse::<u32>().ok());
        let Some(asker) = asker else {
            return false;
        };
        let mut askers = self.lock();
        if askers.by_question.insert(rumor, (asker, now)).is_none() {
            askers.order.push_back(rumor);
            if askers.order.len() > MAX_QUESTIONS_REMEMBERED
                && let Some(oldest) = askers.order.pop_front()
            {
                askers.by_question.remove(&oldest);
            }
        }
        true
    }

    /// The index of the replica that asked `question`, if it is one.
    pub fn asker(&self, question: EventId) -> Option<u32> {
        self.lock().by_question.get(&question).map(|(index, _)| *index)
    }

    /// Whether a replica other than `shard` asked a question in a DM (the
    /// owner's) that may still be open at `now`: its copy came less than
    /// `open_at_most` (`--permission-timeout`) ago. No replica learns when
    /// another's question closes, so this errs on the side of "open".
    pub fn another_may_be_open(&self, shard: Shard, open_at_most: Duration, now: Instant) -> bool {
        self.lock()
            .by_question
            .values()
            .any(|(index, seen)| *index != shard.index && now.saturating_duration_since(*seen) < open_at_most)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Askers> {
        // Plain maps, never left half-written: a panic elsewhere poisons nothing real.
        self.askers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What `!status` says of the shard that answers it (nothing unsharded).
pub(crate) fn status_text(shard: Shard) -> String {
    if shard.count == 1 {
        return String::new();
    }
    format!(" Answered by shard {} of {}.", shard.index, shard.count)
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The `--shard` flag as written: a fixed index, or `auto` (the ordinal in
/// the hostname), out of COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    Fixed(Shard),
    Auto { count: u32 },
}

impl FromStr for ShardSpec {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Self, ShardError> {
        let malformed = || ShardError::Malformed(text.to_owned());
        let (index, count) = text.trim().split_once('/').ok_or_else(malformed)?;
        let count: u32 = count.parse().map_err(|_| malformed())?;
        if index == "auto" {
            // Checked here too, so a bad count is refused before any hostname is read.
            Shard::new(0, count)?;
            return Ok(ShardSpec::Auto { count });
        }
        let index: u32 = index.parse().map_err(|_| malformed())?;
        Ok(ShardSpec::Fixed(Shard::new(index, count)?))
    }
}

impl ShardSpec {
    /// The shard this replica is. `auto` reads the hostname: `hostname`
    /// (the `HOSTNAME` variable, which container runtimes set to the pod's
    /// name) when given, else the kernel's.
    pub fn resolve(self, hostname: Option<String>) -> Result<Shard, ShardError> {
        let count = match self {
            ShardSpec::Fixed(shard) => return Ok(shard),
            ShardSpec::Auto { count } => count,
        };
        let hostname = match hostname.filter(|name| !name.trim().is_empty()) {
            Some(name) => name,
            None => std::fs::read_to_string(KERNEL_HOSTNAME_PATH)
                .map_err(|error| ShardError::NoHostname(error.to_string()))?,
        };
        let hostname = hostname.trim();
        let ordinal = hostname
            .rsplit_once('-')
            .and_then(|(_, ordinal)| ordinal.parse::<u32>().ok())
            .ok_or_else(|| ShardError::NoOrdinal(hostname.to_owned()))?;
        Shard::new(ordinal, count).map_err(|_| ShardError::OrdinalOutOfRange {
            hostname: hostname.to_owned(),
            count,
        })
    }
}

/// Why `--shard` cannot be used; each is one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("`{0}` is not INDEX/COUNT or auto/COUNT (for example 0/3 or auto/3)")]
    Malformed(String),
    #[error("COUNT must be between 1 and {MAX_SHARD_COUNT}, not {0}")]
    Count(u32),
    #[error("index {index} is out of range for {count} shards (0 to {})", count - 1)]
    IndexOutOfRange { index: u32, count: u32 },
    #[error("auto cannot read the hostname: {0}")]
    NoHostname(String),
    #[error(
        "auto takes the index from the hostname's trailing -N (a StatefulSet pod's ordinal), but the hostname `{0}` has none"
    )]
    NoOrdinal(String),
    #[error("the hostname `{hostname}` gives an index out of range for {count} shards (0 to {})", count - 1)]
    OrdinalOutOfRange { hostname: String, count: u32 },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auto(spec: &str, hostname: &str) -> Result<Shard, ShardError> {
        spec.parse::<ShardSpec>()?.resolve(Some(hostname.to_owned()))
    }

    #[test]
    fn fixed_shards_parse_and_bad_ones_are_refused() {
        assert_eq!("2/3".parse(), Ok(ShardSpec::Fixed(Shard::new(2, 3).unwrap())));
        assert_eq!(" 0/1 ".parse(), Ok(ShardSpec::Fixed(Shard::WHOLE)));
        assert_eq!("auto/4".parse(), Ok(ShardSpec::Auto { count: 4 }));
        assert_eq!(
            "3/3".parse::<ShardSpec>(),
            Err(ShardError::IndexOutOfRange { index: 3, count: 3 })
        );
        assert_eq!("0/0".parse::<ShardSpec>(), Err(ShardError::Count(0)));
        assert_eq!("auto/0".parse::<ShardSpec>(), Err(ShardError::Count(0)));
        assert_eq!("auto/5000".parse::<ShardSpec>(), Err(ShardError::Count(5000)));
        for malformed in ["", "3", "a/3", "1/b", "-1/3", "auto", "1/2/3"] {
            assert_eq!(
                malformed.parse::<ShardSpec>(),
                Err(ShardError::Malformed(malformed.to_owned())),
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn auto_takes_the_index_from_the_hostnames_ordinal() {
        assert_eq!(auto("auto/3", "bot-2"), Ok(Shard::new(2, 3).unwrap()));
        assert_eq!(
            auto("auto/3", "acp-bridge-mybot-0\n"),
            Ok(Shard::new(0, 3).unwrap())
        );
        assert_eq!(
            auto("auto/3", "bot"),
            Err(ShardError::NoOrdinal("bot".to_owned()))
        );
        assert_eq!(
            auto("auto/3", "bot-x"),
            Err(ShardError::NoOrdinal("bot-x".to_owned()))
        );
        assert_eq!(
            auto("auto/3", "bot-7"),
            Err(ShardError::OrdinalOutOfRange {
                hostname: "bot-7".to_owned(),
                count: 3
            })
        );
        // A fixed index never reads the hostname.
        assert_eq!(auto("1/3", "bot"), Ok(Shard::new(1, 3).unwrap()));
    }

    #[test]
    fn the_hash_is_pinned_so_every_replica_and_version_agree() {
        // First 8 bytes of SHA-256, big-endian, mod COUNT (computed apart
        // with Python's hashlib). These values are a contract: a change here splits conversations between
        // replicas of different versions during a rolling upgrade.
        let pinned = [
            ("group:ws://relay.example'room", 3, 1),
            (
                "note:00000000000000000000000000000000000000000000000000000000000000aa",
                3,
                2,
            ),
            (
                "dm:0000000000000000000000000000000000000000000000000000000000000001",
                2,
                0,
            ),
            ("", 1000, 652),
        ];
        for (key, count, index) in pinned {
            assert_eq!(Shard::owner_index(key, count), index, "{key:?} among {count}");
        }
        // SHA-256("") starts e3b0c44298fc1c14.
        assert_eq!(
            Shard::owner_index("", MAX_SHARD_COUNT),
            (0xe3b0_c442_98fc_1c14_u64 % u64::from(MAX_SHARD_COUNT)) as u32
        );
    }

    #[test]
    fn a_reply_to_a_question_goes_to_the_replica_that_asked_it() {
        let (first, second) = (Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap());
        let askers = QuestionAskers::default();
        let now = Instant::now();
        let question = EventId::from_slice(&[7; 32]).unwrap();
        let other = EventId::from_slice(&[8; 32]).unwrap();
        let peer = Tag::public_key(nostr_sdk::prelude::Keys::generate().public_key());
        assert!(askers.record(question, &[peer, second.question_tag()], now));
        assert!(!askers.record(other, &[], now), "a DM that is no question");
        assert_eq!(second.takes_reply_to_question(&askers, question), Some(true));
        assert_eq!(first.takes_reply_to_question(&askers, question), Some(false));
        assert_eq!(first.takes_reply_to_question(&askers, other), None);

        for n in 0..MAX_QUESTIONS_REMEMBERED as u64 {
            let mut bytes = [1u8; 32];
            bytes[..8].copy_from_slice(&n.to_be_bytes());
            askers.record(EventId::from_slice(&bytes).unwrap(), &[first.question_tag()], now);
        }
        assert_eq!(askers.lock().by_question.len(), MAX_QUESTIONS_REMEMBERED);
        assert_eq!(askers.asker(question), None, "the oldest is forgotten");
    }

    #[test]
    fn another_replicas_question_may_be_open_until_its_timeout() {
        let (first, second) = (Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap());
        let askers = QuestionAskers::default();
        let (now, timeout) = (Instant::now(), Duration::from_secs(60));
        askers.record(
            EventId::from_slice(&[7; 32]).unwrap(),
            &[first.question_tag()],
            now,
        );
        assert!(!askers.another_may_be_open(first, timeout, now), "its own");
        assert!(askers.another_may_be_open(second, timeout, now));
        assert!(askers.another_may_be_open(second, timeout, now + timeout - Duration::from_secs(1)));
        assert!(
            !askers.another_may_be_open(second, timeout, now + timeout),
            "timed out by now"
        );
    }

    #[test]
    fn every_conversation_has_exactly_one_owner() {
        for count in 1..=4 {
            let shards: Vec<Shard> = (0..count)
                .map(|index| Shard::new(index, count).unwrap())
                .collect();
            for n in 0..200 {
                let key = format!("group:ws://relay'room-{n}");
                let owners = shards.iter().filter(|shard| shard.owns(&key)).count();
                assert_eq!(owners, 1, "{key} among {count}");
            }
        }
        assert!(Shard::WHOLE.owns("anything"));
    }
}
