//! Intake: from raw relay events to accepted mentions.
//!
//! Owns the screening of every event, cheapest check first, so that floods
//! from strangers cost next to nothing: kind and mention → own event →
//! already seen → time window → author gate (on the claimed author; only
//! refusals are decided before the signature is checked) → signature →
//! loop bound → size → rate limit → journal. Only an event that passes all
//! of them becomes a [`Mention`], journaled (the durable queue, which is
//! also the seen set) before it is handed on, so a crash after acceptance
//! loses nothing. Gift-wrapped DMs are unwrapped (seal signature verified)
//! before the author is known.
//!
//! Intake never runs a turn; it hands mentions to the heart through a
//! channel. Every drop is logged at debug with its reason and counted.

mod admission;
pub mod relay_link;

pub use admission::INTAKE_BATCH;
use admission::{Admitted, NextStep};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use nostr_sdk::prelude::{
    Event, EventId, Keys, Kind, PublicKey, RelayUrl, Tag, TagKind, Timestamp, UnwrappedGift,
};
use tokio::sync::{mpsc, watch};

use crate::commands::OwnerCommand;
use crate::gate::{AuthorFacts, AuthorGate, Standing};
use crate::ledger::Ledger;
use crate::loop_guard::LoopGuard;
use crate::mention::{self, Mention, Thread};
use crate::rate_limit::{Admission, RateLimiter};
use crate::reply::Replier;
use crate::store::Store;

/// Events dated further ahead than this are refused (the SDK does not).
pub const MAX_FUTURE_SKEW_SECS: u64 = 120;
/// Authors tracked by the rate limiter at most.
const RATE_LIMIT_TRACKED_AUTHORS: usize = 10_000;

/// What a relay link hands to the intake, in arrival order.
#[derive(Debug)]
pub enum Arrival {
    /// A (re)subscription from `floor`: older events are refused from now on.
    Subscribed {
        relay: RelayUrl,
        floor: Timestamp,
    },
    Event {
        relay: RelayUrl,
        event: Box<Event>,
    },
    /// Everything up to `at` has been delivered: the watermark may move.
    CaughtUp {
        relay: RelayUrl,
        at: Timestamp,
    },
}

/// Per relay, the floor of its live subscription: events dated before it
/// are refused. The intake owns them and publishes each change; housekeeping
/// reads the latest, since it may forget a seen event only once every relay
/// would refuse it by its date.
pub type SubscriptionFloors = HashMap<RelayUrl, Timestamp>;

/// What the intake hands to the heart.
#[derive(Debug)]
pub enum Inbound {
    Mention(Mention),
    /// An owner command (checked before the author gate, owner only).
    Command {
        mention: Mention,
        command: OwnerCommand,
    },
}

/// Why an event was not accepted (label of the `events_dropped` metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    OwnEvent,
    NotAMention,
    Duplicate,
    TooOld,
    FromTheFuture,
    Malformed,
    Undecryptable,
    BadSignature,
    Gate(crate::gate::Refusal),
    LoopBound,
    RateLimited,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::OwnEvent => "own_event",
            DropReason::NotAMention => "not_a_mention",
            DropReason::Duplicate => "duplicate",
            DropReason::TooOld => "too_old",
            DropReason::FromTheFuture => "from_the_future",
            DropReason::Malformed => "malformed",
            DropReason::Undecryptable => "undecryptable",
            DropReason::BadSignature => "bad_signature",
            DropReason::Gate(refusal) => refusal.as_str(),
            DropReason::LoopBound => "loop_bound",
            DropReason::RateLimited => "rate_limited",
        }
    }
}

/// Limits the intake enforces.
#[derive(Debug, Clone)]
pub struct IntakeLimits {
    pub kinds: Vec<Kind>,
    pub max_content_bytes: usize,
    pub rate_limit_burst: u32,
    pub rate_limit_refill: std::time::Duration,
    pub max_bot_hops: u32,
    pub session_policy: crate::config::SessionPolicy,
}

/// A message of one author, before it is a mention: the fields shared by
/// public events and unwrapped DMs.
struct Candidate<'a> {
    dedup_id: EventId,
    author: PublicKey,
    kind: Kind,
    created_at: Timestamp,
    content: &'a str,
    tags: &'a [Tag],
    thread: Thread,
    replies_to: Option<EventId>,
    signature: Signature<'a>,
}

/// Whether the author's signature still needs checking.
enum Signature<'a> {
    /// A public event: verified only once the gate would hear its author.
    Unchecked(&'a Event),
    /// A DM: the seal's signature was verified while unwrapping.
    Verified,
}

#[derive(Debug)]
pub struct Intake {
    keys: Keys,
    store: Arc<Store>,
    ledger: Ledger,
    gate: AuthorGate,
    replier: Replier,
    loop_guard: LoopGuard,
    limits: IntakeLimits,
    limiter: RateLimiter<PublicKey>,
    floors: SubscriptionFloors,
    floors_published: watch::Sender<SubscriptionFloors>,
    inbound: mpsc::Sender<Inbound>,
    /// The bot's key as `p` tags carry it, computed once: every event is
    /// checked against it.
    bot_hex: String,
}

impl Intake {
    pub fn new(
        keys: Keys,
        store: Arc<Store>,
        gate: AuthorGate,
        replier: Replier,
        loop_guard: LoopGuard,
        limits: IntakeLimits,
        inbound: mpsc::Sender<Inbound>,
    ) -> Self {
        Intake {
            limiter: RateLimiter::new(
                limits.rate_limit_burst,
                limits.rate_limit_refill,
                RATE_LIMIT_TRACKED_AUTHORS,
            ),
            bot_hex: keys.public_key().to_hex(),
            keys,
            ledger: Ledger::new(Arc::clone(&store)),
            store,
            gate,
            replier,
            loop_guard,
            limits,
            floors: SubscriptionFloors::default(),
            floors_published: watch::Sender::new(SubscriptionFloors::default()),
            inbound,
        }
    }

    /// The floors of the live subscriptions as they change, for housekeeping.
    pub fn floors(&self) -> watch::Receiver<SubscriptionFloors> {
        self.floors_published.subscribe()
    }

    /// A (re)subscription from `floor`: older events are refused from now on.
    fn set_floor(&mut self, relay: RelayUrl, floor: Timestamp) {
        self.floors.insert(relay.clone(), floor);
        self.floors_published.send_modify(|floors| {
            floors.insert(relay, floor);
        });
    }

    /// Runs until every relay link is gone (the arrivals channel closes).
    pub async fn run(mut self, mut arrivals: mpsc::Receiver<Arrival>) {
        let mut batch = Vec::with_capacity(INTAKE_BATCH);
        while arrivals.recv_many(&mut batch, INTAKE_BATCH).await > 0 {
            self.take_in(batch.drain(..)).await;
        }
    }

    /// Runs one event through every check but the journal's: what it is
    /// to become, or why it is dropped.
    async fn screen(&mut self, relay: &RelayUrl, event: &Event) -> Result<Admitted, DropReason> {
        if !self.limits.kinds.contains(&event.kind) {
            return Err(DropReason::NotAMention);
        }
        if event.pubkey == self.keys.public_key() {
            return Err(DropReason::OwnEvent);
        }
        if !mentions(&event.tags, &self.bot_hex) {
            return Err(DropReason::NotAMention);
        }
        if self.ledger.seen(&event.id.to_hex()) {
            return Err(DropReason::Duplicate);
        }
        if event.kind == Kind::GiftWrap {
            // The wrap's own date is randomized into the past (NIP-59): only
            // the future is checked here, the rumor's date below.
            if event.created_at.as_secs() > Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS {
                return Err(DropReason::FromTheFuture);
            }
            if event.verify().is_err() {
                return Err(DropReason::BadSignature);
            }
            let gift = UnwrappedGift::from_gift_wrap(&self.keys, event)
                .await
                .map_err(|_| DropReason::Undecryptable)?;
            if gift.rumor.kind != Kind::PrivateDirectMessage || gift.sender == self.keys.public_key() {
                return Err(DropReason::NotAMention);
            }
            let mut rumor = gift.rumor;
            let rumor_id = rumor.id();
            let (thread, replies_to) = mention::direct_thread(gift.sender, &rumor, rumor_id);
            let candidate = Candidate {
                dedup_id: event.id,
                author: gift.sender,
                kind: rumor.kind,
                created_at: rumor.created_at,
                content: &rumor.content,
                tags: rumor.tags.as_slice(),
                thread,
                replies_to,
                signature: Signature::Verified,
            };
            return self.judge(relay, candidate).await;
        }
        let (thread, replies_to) = mention::public_thread(event).ok_or(DropReason::Malformed)?;
        let candidate = Candidate {
            dedup_id: event.id,
            author: event.pubkey,
            kind: event.kind,
            created_at: event.created_at,
            content: &event.content,
            tags: event.tags.as_slice(),
            thread,
            replies_to,
            signature: Signature::Unchecked(event),
        };
        self.judge(relay, candidate).await
    }

    async fn judge(&mut self, relay: &RelayUrl, candidate: Candidate<'_>) -> Result<Admitted, DropReason> {
        self.check_time_window(relay, candidate.created_at)?;
        let from_owner = Some(candidate.author) == self.gate.owner();
        // Owner commands come before the author gate (they work even with
        // `--respond-to nobody`); anyone else's `!cancel` is plain text.
        let command = if from_owner {
            OwnerCommand::parse(candidate.content)
        } else {
            None
        };
        let standing = match command {
            Some(_) => Standing::Owner,
            None => self
                .gate
                .admit(AuthorFacts {
                    author: candidate.author,
                    kind: candidate.kind,
                    created_at: candidate.created_at,
                    tags: candidate.tags,
                    direct_message: candidate.thread.is_direct(),
                })
                .await
                .map_err(DropReason::Gate)?,
        };
        // Refusals above were decided on the claimed author, which costs
        // nothing; hearing someone needs their signature.
        if let Signature::Unchecked(event) = candidate.signature {
            event.verify().map_err(|_| DropReason::BadSignature)?;
        }
        let chain_depth = self.loop_guard.depth_of(candidate.replies_to);
        if standing == Standing::Sibling && chain_depth >= self.limits.max_bot_hops {
            tracing::info!(
                author = %mention::short_npub(&candidate.author), depth = chain_depth, limit = self.limits.max_bot_hops,
                "bot-to-bot reply chain cut: not answering"
            );
            return Err(DropReason::LoopBound);
        }
        let mention = Mention {
            event_id: candidate.dedup_id,
            author: candidate.author,
            kind: candidate.kind,
            created_at: candidate.created_at,
            content: candidate.content.to_owned(),
            conversation: candidate
                .thread
                .conversation(self.limits.session_policy, Some(relay)),
            thread: candidate.thread,
            replies_to: candidate.replies_to,
            from_owner,
            from_sibling: standing == Standing::Sibling,
            chain_depth,
            accepted_at: Timestamp::now().as_secs(),
            origin: Some(relay.clone()),
        };
        self.admit(mention, command)
    }

    /// The last checks, which answer rather than drop (size, rate): what
    /// the mention becomes once journaled.
    fn admit(&mut self, mention: Mention, command: Option<OwnerCommand>) -> Result<Admitted, DropReason> {
        let next = if let Some(command) = command {
            NextStep::Command(command)
        } else if mention.content.len() > self.limits.max_content_bytes {
            NextStep::Notice(format!(
                "Your message is too long for me ({} bytes; the limit is {}). Please shorten it.",
                mention.content.len(),
                self.limits.max_content_bytes
            ))
        } else if mention.from_owner {
            NextStep::Turn
        } else {
            match self.limiter.admit(&mention.author, Instant::now()) {
                Admission::Admitted => NextStep::Turn,
                Admission::LimitedFirst => NextStep::Notice(
                    "You are sending mentions faster than I can take them; I will ignore new ones for a little while."
                        .to_owned(),
                ),
                Admission::Limited => return Err(DropReason::RateLimited),
            }
        };
        Ok(Admitted { mention, next })
    }

    fn check_time_window(&self, relay: &RelayUrl, created_at: Timestamp) -> Result<(), DropReason> {
        let created = created_at.as_secs();
        if created > Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS {
            return Err(DropReason::FromTheFuture);
        }
        match self.floors.get(relay).copied() {
            Some(floor) if created < floor.as_secs() => Err(DropReason::TooOld),
            _ => Ok(()),
        }
    }
}

/// True when a `p` tag names the bot (`bot_hex`, lowercase hex).
fn mentions(tags: &nostr_sdk::prelude::Tags, bot_hex: &str) -> bool {
    tags.iter()
        .any(|tag| tag.kind() == TagKind::p() && tag.content() == Some(bot_hex))
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{Client, EventBuilder, Keys};

    use super::*;
    use crate::config::{ReplyMode, RespondTo, SessionPolicy};
    use crate::store::scratch::ScratchDir;

    struct Rig {
        intake: Intake,
        inbound: mpsc::Receiver<Inbound>,
        bot: Keys,
        owner: Keys,
        relay: RelayUrl,
        _dir: ScratchDir,
    }

    fn rig() -> Rig {
        let dir = ScratchDir::new("intake");
        let store = Arc::new(Store::open(dir.path()).expect("store"));
        let (bot, owner) = (Keys::generate(), Keys::generate());
        let client = Client::builder().signer(bot.clone()).build();
        let (recorder, loop_guard) = crate::loop_guard::loop_guard();
        let replier = Replier::new(
            bot.clone(),
            Arc::clone(&store),
            ReplyMode::Daemon,
            false,
            recorder,
        );
        let gate = AuthorGate::new(
            Some(owner.public_key()),
            RespondTo::OwnerOnly,
            Default::default(),
            client,
        );
        let (inbound_tx, inbound) = mpsc::channel(16);
        let limits = IntakeLimits {
            kinds: vec![Kind::Custom(9)],
            max_content_bytes: 1024,
            rate_limit_burst: 10,
            rate_limit_refill: std::time::Duration::from_secs(6),
            max_bot_hops: 3,
            session_policy: SessionPolicy::Conversation,
        };
        Rig {
            intake: Intake::new(bot.clone(), store, gate, replier, loop_guard, limits, inbound_tx),
            inbound,
            bot,
            owner,
            relay: RelayUrl::parse("ws://127.0.0.1:1").expect("url"),
            _dir: dir,
        }
    }

    impl Rig {
        /// One event through the whole intake, as a batch of its own.
        async fn screen(&mut self, event: &Event) -> Result<(), DropReason> {
            let arrival = Arrival::Event {
                relay: self.relay.clone(),
                event: Box::new(event.clone()),
            };
            let mut outcomes = self.intake.take_in([arrival]).await;
            assert_eq!(outcomes.len(), 1, "one outcome per event");
            outcomes.remove(0)
        }
    }

    fn mention(rig: &Rig, author: &Keys, text: &str) -> Event {
        EventBuilder::new(Kind::Custom(9), text)
            .tag(Tag::public_key(rig.bot.public_key()))
            .tag(Tag::custom(TagKind::h(), ["room"]))
            .sign_with_keys(author)
            .expect("sign")
    }

    #[tokio::test]
    async fn forged_events_are_refused_even_when_they_claim_the_owner() {
        let mut rig = rig();
        let stranger = Keys::generate();

        // Signed by a stranger, with the owner's key pasted in as author.
        let mut impersonation = mention(&rig, &stranger, "I am the owner");
        impersonation.pubkey = rig.owner.public_key();
        // The owner's event with its content changed after signing.
        let mut tampered = mention(&rig, &rig.owner.clone(), "harmless");
        tampered.content = "delete everything".into();
        // The owner's event with another event's signature.
        let mut resigned = mention(&rig, &rig.owner.clone(), "mine");
        resigned.sig = mention(&rig, &rig.owner.clone(), "other").sig;

        for forged in [impersonation, tampered, resigned] {
            assert_eq!(rig.screen(&forged).await, Err(DropReason::BadSignature));
        }
        assert!(rig.inbound.try_recv().is_err(), "nothing forged was handed on");

        let genuine = mention(&rig, &rig.owner.clone(), "hello");
        assert_eq!(rig.screen(&genuine).await, Ok(()));
        assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.event_id == genuine.id));
        // The forgeries did not poison the seen set: a replay of the genuine one is the duplicate.
        assert_eq!(rig.screen(&genuine).await, Err(DropReason::Duplicate));
    }

    #[tokio::test]
    async fn a_forged_copy_of_a_genuine_event_cannot_shadow_it() {
        let mut rig = rig();
        let genuine = mention(&rig, &rig.owner.clone(), "the real one");
        let mut forged_copy = genuine.clone();
        forged_copy.sig = mention(&rig, &rig.owner.clone(), "x").sig;
        // The forgery arrives first, with the genuine event's id.
        assert_eq!(rig.screen(&forged_copy).await, Err(DropReason::BadSignature));
        assert_eq!(rig.screen(&genuine).await, Ok(()));
        assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(_))));
    }

    #[tokio::test]
    async fn a_batch_journals_each_mention_once_and_hands_them_on_in_order() {
        let mut rig = rig();
        let owner = rig.owner.clone();
        let (first, second) = (mention(&rig, &owner, "first"), mention(&rig, &owner, "second"));
        let other_relay = RelayUrl::parse("ws://127.0.0.1:2").expect("url");
        let event = |relay: &RelayUrl, event: &Event| Arrival::Event {
            relay: relay.clone(),
            event: Box::new(event.clone()),
        };
        let arrivals = vec![
            event(&rig.relay, &first),
            event(&other_relay, &first),
            Arrival::CaughtUp {
                relay: rig.relay.clone(),
                at: Timestamp::from_secs(1_000),
            },
            event(&other_relay, &second),
        ];

        let outcomes = rig.intake.take_in(arrivals).await;

        assert_eq!(outcomes, [Ok(()), Err(DropReason::Duplicate), Ok(())]);
        for expected in [&first, &second] {
            assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.event_id == expected.id));
        }
        assert!(
            rig.inbound.try_recv().is_err(),
            "the copy from the second relay was not handed on"
        );
        assert_eq!(
            rig.intake.store.watermark(rig.relay.as_str()).unwrap(),
            Some(1_000)
        );
        assert_eq!(rig.intake.store.journal_pending_count().unwrap(), 2);
    }
}
