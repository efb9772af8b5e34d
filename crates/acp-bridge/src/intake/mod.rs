//! Intake: from raw relay events to accepted mentions.
//!
//! Owns the screening of every event, cheapest check first, so that floods
//! from strangers cost next to nothing: kind and mention → own event →
//! already seen → served group (`--group`, `--other-groups`) → time window → author gate (on the claimed author; only
//! refusals are decided before the signature is checked) → signature →
//! shard (`--shard`: another replica's conversation is journaled as seen
//! and goes no further, so it never costs this one a notice) → answered
//! before this start (an event from before the daemon's start whose reply
//! by the bot is on the relay: a fresh state dir, a new shard count; see
//! [`before_start`]) → loop bound
//! → rate limit → queue cap → size → journal. Only an event that passes all
//! of them becomes a [`Mention`], journaled (the durable queue, which is
//! also the seen set) before it is handed on, so a crash after acceptance
//! loses nothing. Gift-wrapped DMs are unwrapped (seal signature verified)
//! before the author is known.
//!
//! Intake never runs a turn, and never waits on the network: it hands
//! mentions to the heart through a channel, asks for profile lookups and
//! for the bot's replies to events from before its start without waiting
//! for them, and leaves reactions and notices to the
//! publisher. Every drop is logged at debug with its reason and counted.
//! An event that can be neither taken nor refused yet is *untaken* (see
//! [`untaken`]): it holds its relay's watermark back until it is.

mod admission;
mod before_start;
mod followed_threads;
pub(crate) mod interest;
mod own_replies;
pub(crate) mod relay_link;
mod reply_lookup;
mod subscriptions;
mod untaken;

pub use admission::INTAKE_BATCH;
use before_start::BeforeStart;
use reply_lookup::ReplyLookup;
pub use untaken::DEFAULT_MAX_PARKED_BYTES;
use untaken::{Parked, Parking, Untaken};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use clap::ValueEnum;
use nostr_sdk::prelude::{
    Event, EventId, Kind, PublicKey, RelayUrl, Tag, TagKind, Timestamp, UnsignedEvent, UnwrappedGift,
};
use tokio::sync::{mpsc, watch};

use crate::commands::OwnerCommand;
use crate::gate::{AuthorFacts, AuthorGate, Hearing, Standing};
use crate::groups::GroupDirectory;
use crate::ledger::{Ledger, OtherShards};
use crate::loop_guard::{ChainBounds, Hop, LoopGuard};
use crate::mention::{self, Intent, Mention, Thread};
use crate::rate_limit::{Admission, RateLimiter};
use crate::reply::Replier;
use crate::shard::{QuestionAskers, Shard};
use crate::signer::BotSigner;
use crate::store::{AnsweredThreads, Questions, Store, Watermarks};

/// Which replies without the bot's `p` tag count as mentions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FollowThreads {
    /// Replies in a thread the bot has answered in, by authors it hears.
    Involved,
    /// None: only events that tag the bot.
    Off,
}

/// Events dated further ahead than this are refused (the SDK does not).
pub(crate) const MAX_FUTURE_SKEW_SECS: u64 = 120;
/// Authors tracked by the rate limiter at most.
const RATE_LIMIT_TRACKED_AUTHORS: usize = 10_000;
/// Past `--max-queued`, this many overload notices in a burst, then one
/// per interval: a flood from many senders gets a few, not one each.
const OVERLOAD_NOTICE_BURST: u32 = 5;
const OVERLOAD_NOTICE_REFILL: std::time::Duration = std::time::Duration::from_secs(30);
/// The journal's count of queued mentions is read again at most this often.
const QUEUED_COUNT_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);
/// How much earlier than the bot's first answer in a thread a reply there
/// may be dated and still follow up on it: people's clocks run a little
/// behind the bot's, but a reply from before the answer was not to it.
const FOLLOW_UP_CLOCK_SKEW_SECS: i64 = 5;

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
    /// The bot's own replies on a relay answer these mentions, which the
    /// store did not know as handled (see `before_start`).
    AnsweredOnRelay {
        answered: Vec<EventId>,
    },
}

/// Per relay, the oldest date it may deliver from now on: the floor of its
/// live subscription (events dated before it are refused), or where the
/// link is to fetch an untaken event again, when that is older. The intake
/// owns them and publishes each change; housekeeping reads the latest,
/// since it may forget a seen event only once every relay would refuse it
/// by its date.
pub(crate) type SubscriptionFloors = HashMap<RelayUrl, Timestamp>;

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
    /// `--max-queued` mentions wait, and the overload notices are spent.
    Overloaded,
    /// Untaken: waits in memory for the author's profile lookup.
    AwaitingProfile,
    /// Untaken: the profile lookups are saturated, or the events waiting
    /// for one fill their bounds (count, `--max-parked-bytes`); fetched
    /// again later.
    LookupsBusy,
    /// Untaken: the journal write failed; fetched again later.
    NotJournaled,
    /// Another shard's conversation (`--shard`): journaled as seen only.
    OtherShard,
    /// A group the bot was not asked to serve (`--group`, `--other-groups`).
    UnservedGroup,
    /// From before this start, and the bot's own reply to it is on a relay
    /// (a fresh state dir, a new shard count: see `before_start`).
    AnsweredBeforeStart,
    /// Untaken: an event from before this start, held until its relay's
    /// stored events are through (for a DM: among them the bot's copy of
    /// its answer) and, if public, the relay has said whether the bot
    /// replied to it.
    AwaitingCatchUp,
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
            DropReason::Overloaded => "overloaded",
            DropReason::AwaitingProfile => "awaiting_profile",
            DropReason::LookupsBusy => "lookups_busy",
            DropReason::NotJournaled => "not_journaled",
            DropReason::OtherShard => "other_shard",
            DropReason::UnservedGroup => "unserved_group",
            DropReason::AnsweredBeforeStart => "answered_before_start",
            DropReason::AwaitingCatchUp => "awaiting_catch_up",
        }
    }

    /// Not a verdict on the event: it is to be taken later.
    pub fn is_passing(self) -> bool {
        matches!(
            self,
            DropReason::AwaitingProfile
                | DropReason::LookupsBusy
                | DropReason::NotJournaled
                | DropReason::AwaitingCatchUp
        )
    }
}

/// `--rate-limit-burst` and `--rate-limit-refill`, as a reload of the
/// config file hands them to a running intake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub burst: u32,
    pub refill: std::time::Duration,
}

/// Limits the intake enforces.
#[derive(Debug, Clone)]
pub struct IntakeLimits {
    pub kinds: Vec<Kind>,
    pub max_content_bytes: usize,
    pub rate_limit_burst: u32,
    pub rate_limit_refill: std::time::Duration,
    pub chain_bounds: ChainBounds,
    pub session_policy: crate::mention::SessionPolicy,
    /// `--max-queued`: mentions waiting in all conversations, at most.
    pub max_queued: usize,
    /// `--follow-threads involved`: a reply in a thread the bot answered
    /// in counts as a mention.
    pub follow_threads: bool,
    /// `--max-parked-bytes`: events waiting for a profile lookup hold at
    /// most this many bytes.
    pub max_parked_bytes: usize,
}

/// An event that passed screening: a mention to act on, or one of a
/// conversation another shard answers, to be journaled as seen only.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "lives for one batch; boxing would cost an allocation per mention"
)]
enum Screened {
    Ours(Mention),
    OtherShards(OtherShards),
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
    /// The event as the relay delivered it (for DMs: the gift wrap), kept
    /// if the candidate has to wait for a lookup.
    delivered: &'a Event,
    /// Heard only as a reply in a thread the bot answered in (it does not
    /// tag the bot): it continues the thread's exchange (see `loop_guard`).
    follow_up: bool,
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
    signer: BotSigner,
    ledger: Ledger,
    /// Whether an owner's reply answers a question asked here.
    questions: Questions,
    /// Each relay's watermark, advanced as the intake catches up.
    watermarks: Watermarks,
    /// Whether a reply is in a thread the bot answered in.
    threads: AnsweredThreads,
    gate: AuthorGate,
    replier: Replier,
    loop_guard: LoopGuard,
    limits: IntakeLimits,
    limiter: RateLimiter<PublicKey>,
    /// New rate limits from a reload of the config file, taken before the
    /// next admission.
    rate_limits: Option<watch::Receiver<RateLimit>>,
    overload_notices: RateLimiter<()>,
    queued: QueuedCount,
    floors: SubscriptionFloors,
    floors_published: watch::Sender<SubscriptionFloors>,
    /// Per relay, how far it has delivered, once its stored events are
    /// through: a live event is judged no earlier than that.
    caught_up: HashMap<RelayUrl, Timestamp>,
    untaken: Untaken,
    parked: Parked,
    inbound: mpsc::Sender<Inbound>,
    /// The bot's key as `p` tags carry it, computed once: every event is
    /// checked against it.
    bot_hex: String,
    /// The conversations this replica answers (`--shard`).
    shard: Shard,
    /// Which replica asked each of the bot's questions (`--shard`).
    question_askers: QuestionAskers,
    /// Which groups' mentions are answered (`--group`).
    groups: GroupDirectory,
    /// What the bot answered before this start, as the relays show it.
    before_start: BeforeStart,
    /// Asks a relay which public events from before this start the bot
    /// replied to; without it they are answered unchecked.
    reply_lookup: Option<ReplyLookup>,
    /// Screening stored events again after their lookup (they were held
    /// while their relay replayed them): judged by their own date, as
    /// during the replay (see `judged_date`).
    replaying_held: bool,
}

impl Intake {
    pub fn new(
        signer: BotSigner,
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
            rate_limits: None,
            overload_notices: RateLimiter::new(OVERLOAD_NOTICE_BURST, OVERLOAD_NOTICE_REFILL, 1),
            parked: Parked::new(limits.max_parked_bytes),
            queued: QueuedCount::default(),
            bot_hex: signer.public_key().to_hex(),
            signer,
            ledger: Ledger::new(Arc::clone(&store)),
            questions: Questions::new(Arc::clone(&store)),
            watermarks: Watermarks::new(Arc::clone(&store)),
            threads: AnsweredThreads::new(store),
            gate,
            replier,
            loop_guard,
            limits,
            floors: SubscriptionFloors::default(),
            floors_published: watch::Sender::new(SubscriptionFloors::default()),
            caught_up: HashMap::new(),
            untaken: Untaken::default(),
            inbound,
            shard: Shard::WHOLE,
            question_askers: QuestionAskers::default(),
            groups: GroupDirectory::default(),
            before_start: BeforeStart::new(Timestamp::now()),
            reply_lookup: None,
            replaying_held: false,
        }
    }

    /// Checks public events from before this start against the bot's
    /// replies on their relay, through `client` (see `reply_lookup`).
    pub fn with_reply_lookup(mut self, client: nostr_sdk::prelude::Client) -> Self {
        let public = self
            .limits
            .kinds
            .iter()
            .copied()
            .filter(|kind| *kind != Kind::GiftWrap)
            .collect();
        self.reply_lookup = Some(ReplyLookup::new(client, self.signer.public_key(), public));
        self
    }

    /// Answers only the conversations of `shard`; without it, all of them.
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Keeps which replica asked each question in `askers`, a handle the
    /// heart reads too (see `shard`).
    pub fn with_question_askers(mut self, askers: QuestionAskers) -> Self {
        self.question_askers = askers;
        self
    }

    /// Takes the rate limits `updates` holds whenever they change.
    pub fn with_rate_limits(mut self, updates: watch::Receiver<RateLimit>) -> Self {
        self.rate_limits = Some(updates);
        self
    }

    /// Answers only the groups `groups` serves; without it, all of them.
    pub fn with_groups(mut self, groups: GroupDirectory) -> Self {
        self.groups = groups;
        self
    }

    /// The floors of the live subscriptions as they change, for housekeeping.
    pub fn floors(&self) -> watch::Receiver<SubscriptionFloors> {
        self.floors_published.subscribe()
    }

    /// What the link of `relay` watches for requests to fetch untaken
    /// events again.
    pub fn refetch_requests(&mut self, relay: RelayUrl) -> untaken::RefetchFrom {
        self.untaken.link(relay)
    }

    /// A (re)subscription from `floor`: older events are refused from now
    /// on, and the stored events come first (not live yet).
    fn set_floor(&mut self, relay: RelayUrl, floor: Timestamp) {
        self.caught_up.remove(&relay);
        self.before_start.subscribed(relay.clone());
        self.floors.insert(relay, floor);
        self.publish_floors();
    }

    /// Publishes each relay's floor, lowered to its oldest untaken event's
    /// reach-back, when either changed.
    fn publish_floors(&self) {
        self.floors_published.send_if_modified(|published| {
            let mut changed = false;
            for (relay, floor) in &self.floors {
                let reach = self
                    .untaken
                    .oldest(relay)
                    .map_or(*floor, |oldest| oldest.min(*floor));
                changed |= published.insert(relay.clone(), reach) != Some(reach);
            }
            changed
        });
    }

    /// Runs until every relay link is gone (the arrivals channel closes).
    /// Finished profile lookups are taken between batches: the events that
    /// waited for them are screened again.
    pub async fn run(mut self, mut arrivals: mpsc::Receiver<Arrival>) {
        let mut batch = Vec::with_capacity(INTAKE_BATCH);
        loop {
            tokio::select! {
                received = arrivals.recv_many(&mut batch, INTAKE_BATCH) => {
                    if received == 0 {
                        return;
                    }
                    self.take_in(batch.drain(..)).await;
                }
                author = self.gate.looked_up() => {
                    let waiting = self.parked.unpark(&author);
                    self.take_in(waiting.into_iter().map(|(relay, event)| Arrival::Event { relay, event })).await;
                }
                looked = next_lookup(&mut self.reply_lookup) => self.take_looked(looked).await,
            }
        }
    }

    /// Runs one event through every check but the journal's: what it is
    /// to become, or why it is dropped.
    async fn screen(&mut self, relay: &RelayUrl, event: &Event) -> Result<Screened, DropReason> {
        if !self.limits.kinds.contains(&event.kind) {
            return Err(DropReason::NotAMention);
        }
        if event.pubkey == self.signer.public_key() {
            return Err(DropReason::OwnEvent);
        }
        let tagged = mentions(&event.tags, &self.bot_hex)
            || (event.kind != Kind::GiftWrap
                && mention::names_in_content(&event.content, &self.signer.public_key()));
        if !tagged && !self.follows_up(event) {
            return Err(DropReason::NotAMention);
        }
        if self.ledger.seen(&event.id.to_hex()) {
            return Err(match self.before_start.take_answered(&event.id) {
                true => DropReason::AnsweredBeforeStart,
                false => DropReason::Duplicate,
            });
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
            let gift = UnwrappedGift::from_gift_wrap(&self.signer, event)
                .await
                .map_err(|_| DropReason::Undecryptable)?;
            let mut rumor = gift.rumor;
            let rumor_id = rumor.id();
            if gift.sender == self.signer.public_key() {
                // The bot's copy of its own DM (NIP-17): a replica's
                // question says which replica asked it.
                self.question_askers
                    .record(rumor_id, rumor.tags.as_slice(), Instant::now());
                self.learn_own_answer(relay, &rumor);
                return Err(DropReason::OwnEvent);
            }
            if rumor.kind != Kind::PrivateDirectMessage {
                return Err(DropReason::NotAMention);
            }
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
                delivered: event,
                follow_up: false,
            };
            return self.judge(relay, candidate);
        }
        let (thread, replies_to) = mention::public_thread(event).ok_or(DropReason::Malformed)?;
        if let Thread::Group { channel, .. } = &thread
            && !self.groups.serves(relay, channel)
        {
            return Err(DropReason::UnservedGroup);
        }
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
            delivered: event,
            follow_up: !tagged,
        };
        self.judge(relay, candidate)
    }

    fn judge(&mut self, relay: &RelayUrl, candidate: Candidate<'_>) -> Result<Screened, DropReason> {
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
            None => match self.gate.admit(AuthorFacts {
                author: candidate.author,
                kind: candidate.kind,
                created_at: self.judged_date(relay, candidate.created_at),
                tags: candidate.tags,
                direct_message: candidate.thread.is_direct(),
            }) {
                Hearing::Heard(standing) => standing,
                Hearing::Refused(refusal) => return Err(DropReason::Gate(refusal)),
                Hearing::AwaitingProfile => return Err(self.park(relay, &candidate)),
                Hearing::LookupsBusy => return Err(DropReason::LookupsBusy),
            },
        };
        // Refusals above were decided on the claimed author, which costs
        // nothing; hearing someone needs their signature.
        if let Signature::Unchecked(event) = candidate.signature {
            event.verify().map_err(|_| DropReason::BadSignature)?;
        }
        let conversation = candidate
            .thread
            .conversation(self.limits.session_policy, Some(relay));
        let ours = match self.reply_to_a_question(from_owner, candidate.replies_to) {
            Some(asked_here) => asked_here,
            None => self.shard.owns(conversation.as_str()),
        };
        if !ours {
            return Ok(Screened::OtherShards(OtherShards {
                event_id: candidate.dedup_id,
                author: candidate.author,
                conversation,
                accepted_at: Timestamp::now().as_secs(),
            }));
        }
        match candidate.thread {
            Thread::Direct { message, .. } => self.dm_answered_before_start(relay, message, &candidate)?,
            Thread::Group { .. } | Thread::Note { .. } => self.hold_for_reply_lookup(relay, &candidate)?,
        }
        let chain_depth = match candidate.thread {
            Thread::Group { root, .. } | Thread::Note { root, .. } if candidate.follow_up => {
                self.loop_guard.follow_up_depth(root, candidate.replies_to)
            }
            _ => self.loop_guard.depth_of(candidate.replies_to),
        };
        let hop = self.limits.chain_bounds.hop(chain_depth, standing);
        if hop == Hop::Cut {
            tracing::info!(
                author = %mention::short_npub(&candidate.author), depth = chain_depth, sibling = standing == Standing::Sibling,
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
            conversation,
            thread: candidate.thread,
            replies_to: candidate.replies_to,
            from_owner,
            from_sibling: standing == Standing::Sibling,
            chain_depth,
            accepted_at: Timestamp::now().as_secs(),
            origin: Some(relay.clone()),
            intent: Intent::Turn,
        };
        self.admit(mention, command, hop).map(Screened::Ours)
    }

    /// A DM from before this start: dropped when the bot's copy of its
    /// answer to `rumor_id` was seen, held while its relay still delivers
    /// stored events (the copy may come among them); see `before_start`.
    fn dm_answered_before_start(
        &mut self,
        relay: &RelayUrl,
        rumor_id: EventId,
        candidate: &Candidate<'_>,
    ) -> Result<(), DropReason> {
        if !self.before_start.predates_start(candidate.created_at) {
            return Ok(());
        }
        if self.ledger.seen(&rumor_id.to_hex()) {
            return Err(DropReason::AnsweredBeforeStart);
        }
        if self
            .before_start
            .hold(relay, candidate.created_at, candidate.delivered)
        {
            return Err(DropReason::AwaitingCatchUp);
        }
        Ok(())
    }

    /// A public event from before this start, while its relay still
    /// delivers stored events: held, to be looked up with the rest once
    /// they are through (see `reply_lookup`).
    fn hold_for_reply_lookup(
        &mut self,
        relay: &RelayUrl,
        candidate: &Candidate<'_>,
    ) -> Result<(), DropReason> {
        let held = self.reply_lookup.is_some()
            && self
                .before_start
                .hold(relay, candidate.created_at, candidate.delivered);
        match held {
            true => Err(DropReason::AwaitingCatchUp),
            false => Ok(()),
        }
    }

    /// The bot's copy of a DM it sent before this start (NIP-17): the
    /// message its rumor replies to was answered, by this bot key if not by
    /// this daemon. Journaled as seen by its rumor id, which is how a DM's
    /// answer names it (see `before_start`). Only a copy dated within the
    /// subscription's window: an answer is never older than the DM it
    /// answers, and a DM older than the window is refused anyway (the DM
    /// filter reaches two days further back, for the wraps' dates).
    fn learn_own_answer(&self, relay: &RelayUrl, rumor: &UnsignedEvent) {
        let in_window = self.check_time_window(relay, rumor.created_at).is_ok();
        if !in_window || !self.before_start.predates_start(rumor.created_at) {
            return;
        }
        let answered: Vec<EventId> = own_replies::answered_mentions(&rumor.tags)
            .filter(|answered| !self.ledger.seen(&answered.to_hex()))
            .collect();
        if answered.is_empty() {
            return;
        }
        if let Err(error) = self.ledger.taken_elsewhere(&answered) {
            tracing::warn!(%error, messages = ?answered, "cannot journal a DM the bot answered before this start");
        }
    }

    /// Parks a candidate whose author is being looked up, when there is
    /// room; past the bounds it is left to its relay to deliver again
    /// (the lookups are, in effect, busy for it).
    fn park(&mut self, relay: &RelayUrl, candidate: &Candidate<'_>) -> DropReason {
        let parking = self.parked.park(candidate.author, relay, candidate.delivered);
        let (events, bytes, author_bytes) = self.parked.held(&candidate.author);
        tracing::debug!(
            event_id = %candidate.dedup_id, author = %candidate.author, outcome = parking.as_str(),
            parked_events = events, parked_bytes = bytes, author_bytes, max_parked_bytes = self.limits.max_parked_bytes,
            "parking an event for its author's profile lookup"
        );
        match parking {
            Parking::Parked => DropReason::AwaitingProfile,
            Parking::Full | Parking::TooManyBytes => DropReason::LookupsBusy,
        }
    }

    /// The last checks, which answer rather than drop: what the mention is
    /// to become once journaled. The rate limit comes first, so a stranger
    /// sending what would each earn a notice (too long, no room, a chain
    /// too deep) earns one and then silence. The owner is exempt from the
    /// rate and the cap.
    fn admit(
        &mut self,
        mut mention: Mention,
        command: Option<OwnerCommand>,
        hop: Hop,
    ) -> Result<Mention, DropReason> {
        mention.intent = if let Some(command) = command {
            Intent::Command(command)
        } else if mention.from_owner {
            self.size_check(&mention)
        } else {
            if let Some(updates) = &mut self.rate_limits
                && updates.has_changed().unwrap_or(false)
            {
                let rate = *updates.borrow_and_update();
                self.limiter.set_rate(rate.burst, rate.refill);
            }
            match self.limiter.admit(&mention.author, Instant::now()) {
                Admission::Admitted if self.queue_is_full() => self.overload_notice()?,
                Admission::Admitted if hop == Hop::Notice => Intent::Notice(self.limits.chain_bounds.notice()),
                Admission::Admitted => self.size_check(&mention),
                Admission::LimitedFirst => Intent::Notice(
                    "You are sending mentions faster than I can take them; I will ignore new ones for a little while."
                        .to_owned(),
                ),
                Admission::Limited => return Err(DropReason::RateLimited),
            }
        };
        if mention.intent == Intent::Turn {
            self.queued.add_one();
        }
        Ok(mention)
    }

    fn size_check(&self, mention: &Mention) -> Intent {
        if mention.content.len() <= self.limits.max_content_bytes {
            return Intent::Turn;
        }
        Intent::Notice(format!(
            "Your message is too long for me ({} bytes; the limit is {}). Please shorten it.",
            mention.content.len(),
            self.limits.max_content_bytes
        ))
    }

    /// Whether `--max-queued` mentions wait already, by the journal's count
    /// (read at most once per [`QUEUED_COUNT_REFRESH`], plus what was
    /// admitted since).
    fn queue_is_full(&mut self) -> bool {
        let ledger = &self.ledger;
        self.queued.get(Instant::now(), || ledger.pending_count()) >= self.limits.max_queued
    }

    /// A notice that the bot is overloaded, while the global budget for
    /// them lasts; past it the mention is dropped unanswered.
    fn overload_notice(&mut self) -> Result<Intent, DropReason> {
        match self.overload_notices.admit(&(), Instant::now()) {
            Admission::Admitted => Ok(Intent::Notice(
                "Too many messages are waiting for me right now; please send yours again in a few minutes."
                    .to_owned(),
            )),
            Admission::LimitedFirst | Admission::Limited => Err(DropReason::Overloaded),
        }
    }

    /// Whether an owner's message replying to a question is this shard's
    /// to take: `Some` when it replies to a question some shard asked (it
    /// goes to that shard only, whatever the conversation's hash says, see
    /// `shard`), `None` otherwise.
    fn reply_to_a_question(&self, from_owner: bool, replies_to: Option<EventId>) -> Option<bool> {
        let replied = replies_to.filter(|_| from_owner && self.shard.is_sharded())?;
        if let Some(asked_here) = self.shard.takes_reply_to_question(&self.question_askers, replied) {
            return Some(asked_here);
        }
        // A question asked here whose copy has not come back (yet).
        let open_here = self
            .questions
            .is_open(replied)
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read the open questions; the owner's reply goes by the shard hash");
                false
            });
        open_here.then_some(true)
    }

    /// The date an author's attestation must cover for an event dated
    /// `created_at`: its own while the relay replays stored events (they
    /// are bounded below by the floor), but no earlier than what the relay
    /// had delivered before it once it is live. A sibling whose attestation
    /// expired cannot backdate a new message into its validity.
    fn judged_date(&self, relay: &RelayUrl, created_at: Timestamp) -> Timestamp {
        match self.caught_up.get(relay) {
            Some(caught_up) if !self.replaying_held => created_at.max(*caught_up),
            _ => created_at,
        }
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

/// The number of mentions waiting for a turn, as the journal counts them,
/// read again only once [`QUEUED_COUNT_REFRESH`] has passed; admissions in
/// between are added to it.
#[derive(Debug, Default)]
struct QueuedCount {
    known: usize,
    read_at: Option<Instant>,
}

impl QueuedCount {
    fn get(&mut self, now: Instant, read: impl FnOnce() -> Result<u64, crate::store::StoreError>) -> usize {
        let fresh = self
            .read_at
            .is_some_and(|at| now.saturating_duration_since(at) < QUEUED_COUNT_REFRESH);
        if !fresh {
            match read() {
                Ok(count) => self.known = usize::try_from(count).unwrap_or(usize::MAX),
                Err(error) => tracing::warn!(%error, "cannot count the queued mentions"),
            }
            self.read_at = Some(now);
        }
        self.known
    }

    fn add_one(&mut self) {
        self.known = self.known.saturating_add(1);
    }
}

impl Intake {
    /// A public reply in a thread the bot answered in, when it follows
    /// threads: it counts as a mention (the gate still decides who is
    /// heard).
    fn follows_up(&self, event: &Event) -> bool {
        if !self.limits.follow_threads || event.kind == Kind::GiftWrap {
            return false;
        }
        let (root, reply) = mention::nip10_threading(&event.tags);
        let first_answer = root
            .or(reply)
            .and_then(|root| self.threads.first_answered(root).ok().flatten());
        // Replies older than the bot's first answer were talk among people
        // (the thread's subscription delivers them again): not addressed to it.
        first_answer.is_some_and(|first| {
            event.created_at.as_secs() as i64 >= first.saturating_sub(FOLLOW_UP_CLOCK_SKEW_SECS)
        })
    }
}

/// The next finished reply lookup, if the intake makes them.
async fn next_lookup(lookup: &mut Option<ReplyLookup>) -> reply_lookup::Looked {
    match lookup {
        Some(lookup) => lookup.finished().await,
        None => std::future::pending().await,
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
    use crate::gate::GateRules;
    use crate::gate::RespondTo;
    use crate::mention::SessionPolicy;
    use crate::reply::ReplyMode;
    use crate::store::scratch::ScratchDir;

    struct Rig {
        intake: Intake,
        inbound: mpsc::Receiver<Inbound>,
        bot: Keys,
        owner: Keys,
        relay: RelayUrl,
        store: Arc<Store>,
        _dir: ScratchDir,
    }

    fn rig() -> Rig {
        let dir = ScratchDir::new("intake");
        let store = Arc::new(Store::open(dir.path()).expect("store"));
        let (bot, owner) = (Keys::generate(), Keys::generate());
        let client = Client::builder().signer(bot.clone()).build();
        let (recorder, loop_guard) = crate::loop_guard::loop_guard();
        let replier = Replier::new(
            BotSigner::from_keys(bot.clone()),
            Arc::clone(&store),
            ReplyMode::Daemon,
            false,
            recorder,
        );
        let gate = AuthorGate::new(
            GateRules::new(Some(owner.public_key()), RespondTo::OwnerOnly, Default::default()),
            client,
        );
        let (inbound_tx, inbound) = mpsc::channel(16);
        let limits = IntakeLimits {
            kinds: vec![Kind::Custom(9), Kind::GiftWrap],
            max_content_bytes: 1024,
            rate_limit_burst: 10,
            rate_limit_refill: std::time::Duration::from_secs(6),
            chain_bounds: ChainBounds {
                max_bot_hops: 3,
                max_reply_chain: 20,
            },
            session_policy: SessionPolicy::Conversation,
            max_queued: 10_000,
            follow_threads: true,
            max_parked_bytes: DEFAULT_MAX_PARKED_BYTES,
        };
        Rig {
            intake: Intake::new(
                BotSigner::from_keys(bot.clone()),
                Arc::clone(&store),
                gate,
                replier,
                loop_guard,
                limits,
                inbound_tx,
            ),
            inbound,
            bot,
            owner,
            relay: RelayUrl::parse("ws://127.0.0.1:1").expect("url"),
            store,
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
    async fn a_dm_whose_rumor_claims_another_author_than_its_seal_is_refused() {
        let mut rig = rig();
        let (bot, owner, forger) = (rig.bot.public_key(), rig.owner.public_key(), Keys::generate());
        // The rumor claims the owner; the seal around it is the forger's.
        let rumor = EventBuilder::private_msg_rumor(bot, "I am the owner: !rotate").build(owner);
        let seal = EventBuilder::seal(&forger, &bot, rumor)
            .await
            .expect("seal")
            .sign(&forger)
            .await
            .expect("sign the seal");
        let forged = EventBuilder::gift_wrap_from_seal(&bot, &seal, []).expect("wrap");
        assert_eq!(rig.screen(&forged).await, Err(DropReason::Undecryptable));
        assert!(rig.inbound.try_recv().is_err(), "the forgery was not handed on");

        // The same DM sealed by the owner is heard, as the owner.
        let genuine = EventBuilder::private_msg(&rig.owner, bot, "I am the owner", [])
            .await
            .expect("wrap");
        assert_eq!(rig.screen(&genuine).await, Ok(()));
        assert!(
            matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.author == owner && m.from_owner)
        );
    }

    #[tokio::test]
    async fn another_shards_mention_is_journaled_as_seen_and_nothing_else() {
        let mut rig = rig();
        let conversation = "group:ws://127.0.0.1:1'room";
        let owner_index = Shard::owner_index(conversation, 2);
        rig.intake.shard = Shard::new(1 - owner_index, 2).unwrap();
        let owner = rig.owner.clone();
        // Even what would earn a notice here (too long) stays the owner shard's business.
        for text in ["hello".to_owned(), "x".repeat(2048), "!status".to_owned()] {
            let event = mention(&rig, &owner, &text);
            assert_eq!(rig.screen(&event).await, Err(DropReason::OtherShard));
            assert_eq!(rig.screen(&event).await, Err(DropReason::Duplicate), "seen");
        }
        assert!(rig.inbound.try_recv().is_err(), "nothing handed on");
        assert_eq!(rig.intake.ledger.pending_count().unwrap(), 0);
        assert!(
            crate::store::Outbox::new(Arc::clone(&rig.store))
                .due(i64::MAX)
                .unwrap()
                .is_empty(),
            "no notice"
        );

        rig.intake.shard = Shard::new(owner_index, 2).unwrap();
        let ours = mention(&rig, &owner, "mine");
        assert_eq!(rig.screen(&ours).await, Ok(()));
        assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.event_id == ours.id));
    }

    #[tokio::test]
    async fn the_owners_answer_to_a_question_asked_here_is_taken_whatever_shard_its_dm_hashes_to() {
        let mut rig = rig();
        let owner = rig.owner.clone();
        let bot = rig.bot.public_key();
        let owners_dm = format!("dm:{}", owner.public_key().to_hex());
        let index = 1 - Shard::owner_index(&owners_dm, 2);
        rig.intake.shard = Shard::new(index, 2).unwrap();
        let question = EventId::from_slice(&[7; 32]).expect("32 bytes");
        let answer =
            |text: &'static str| EventBuilder::private_msg(&owner, bot, text, [Tag::event(question)]);

        let early = answer("allow").await.expect("wrap");
        assert_eq!(
            rig.screen(&early).await,
            Err(DropReason::OtherShard),
            "no question asked yet"
        );
        rig.intake
            .questions
            .open(question, &crate::mention::test_mention("room", 1, "may I?", true))
            .unwrap();
        let allow = answer("allow, really").await.expect("wrap");
        assert_eq!(rig.screen(&allow).await, Ok(()));
        assert!(
            matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.replies_to == Some(question) && m.from_owner)
        );
        let chat = EventBuilder::private_msg(&owner, bot, "just chatting", [])
            .await
            .expect("wrap");
        assert_eq!(
            rig.screen(&chat).await,
            Err(DropReason::OtherShard),
            "the rest of the DM goes by the hash"
        );
    }

    #[tokio::test]
    async fn housekeeping_sees_the_floor_lowered_to_an_untaken_events_date() {
        let mut rig = rig();
        let floors = rig.intake.floors();
        let now = Timestamp::now().as_secs();
        let subscribed = |floor: u64| Arrival::Subscribed {
            relay: rig.relay.clone(),
            floor: Timestamp::from_secs(floor),
        };
        // A stranger's mention waits for the lookup of its profile.
        let waiting = EventBuilder::new(Kind::Custom(9), "wait for my profile")
            .tag(Tag::public_key(rig.bot.public_key()))
            .tag(Tag::custom(TagKind::h(), ["room"]))
            .custom_created_at(Timestamp::from_secs(now - 200))
            .sign_with_keys(&Keys::generate())
            .expect("sign");
        let event = Arrival::Event {
            relay: rig.relay.clone(),
            event: Box::new(waiting.clone()),
        };
        let first = rig.intake.take_in([subscribed(now - 300), event]).await;
        assert_eq!(first, [Err(DropReason::AwaitingProfile)]);
        assert_eq!(floors.borrow()[&rig.relay].as_secs(), now - 300);

        // A reconnection subscribes from later on: the untaken event still
        // holds the floor housekeeping goes by.
        rig.intake.take_in([subscribed(now - 100)]).await;
        assert_eq!(floors.borrow()[&rig.relay].as_secs(), now - 200);
    }

    #[tokio::test]
    async fn a_dm_from_before_the_start_waits_for_the_stored_events_and_is_dropped_if_the_bots_copy_answers_it()
     {
        let mut rig = rig();
        let (owner, bot) = (rig.owner.clone(), rig.bot.clone());
        rig.intake.before_start = BeforeStart::new(Timestamp::now() + 60);
        let relay = rig.relay.clone();
        let event = |event: &Event| Arrival::Event {
            relay: relay.clone(),
            event: Box::new(event.clone()),
        };
        let answered =
            EventBuilder::private_msg_rumor(bot.public_key(), "answered before").build(owner.public_key());
        let answered_id = answered.id.expect("a built rumor has its id");
        let answered_dm = EventBuilder::gift_wrap(&owner, &bot.public_key(), answered, [])
            .await
            .expect("wrap");
        let unanswered = EventBuilder::private_msg(&owner, bot.public_key(), "never answered", [])
            .await
            .expect("wrap");
        // The bot's copy of its answer, arriving after the DM it answers.
        let answer = EventBuilder::private_msg_rumor(owner.public_key(), "the answer")
            .tag(Tag::parse(["e", &answered_id.to_hex(), "", "reply"]).expect("tag"))
            .build(bot.public_key());
        let copy = EventBuilder::gift_wrap(&bot, &bot.public_key(), answer, [])
            .await
            .expect("wrap");

        let subscribed = Arrival::Subscribed {
            relay: relay.clone(),
            floor: Timestamp::from_secs(0),
        };
        let stored = rig
            .intake
            .take_in([subscribed, event(&answered_dm), event(&unanswered), event(&copy)])
            .await;
        assert_eq!(
            stored,
            [
                Err(DropReason::AwaitingCatchUp),
                Err(DropReason::AwaitingCatchUp),
                Err(DropReason::OwnEvent)
            ]
        );
        assert!(rig.inbound.try_recv().is_err(), "nothing handed on yet");

        let caught_up = Arrival::CaughtUp {
            relay: relay.clone(),
            at: Timestamp::now(),
        };
        let released = rig.intake.take_in([caught_up]).await;
        assert_eq!(released, [Err(DropReason::AnsweredBeforeStart), Ok(())]);
        assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.event_id == unanswered.id));
        assert!(
            rig.inbound.try_recv().is_err(),
            "the answered one was not handed on"
        );
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
        assert_eq!(rig.intake.watermarks.of(&rig.relay).unwrap(), Some(1_000));
        assert_eq!(rig.intake.ledger.pending_count().unwrap(), 2);
    }
}
