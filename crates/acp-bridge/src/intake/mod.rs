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
//!
//! Who does what: [`screening`] decides what one event is to become (a
//! drop with its reason, a notice, a mention to take) without I/O or a
//! clock; [`shell`] reads the clock, answers screening's lookups from the
//! journal, the gate and the loop guard, and unwraps gift wraps;
//! [`admission`] journals a batch's verdicts and acts on them (hands on,
//! notices, drop counts and logs); [`before_start_shell`] releases and
//! looks up what [`before_start`] holds; [`event_loop`] is the task that
//! feeds them all. [`DropReason`] names every drop.

mod admission;
pub(crate) mod args;
mod before_start;
mod before_start_shell;
mod drop_reason;
mod event_loop;
mod followed_threads;
pub(crate) mod interest;
pub(crate) mod marmot;
mod own_replies;
mod queued_count;
pub(crate) mod relay_link;
mod reply_lookup;
mod screening;
mod shell;
mod subscriptions;
#[cfg(test)]
mod tests;
mod unheard_log;
mod untaken;
// Satellites of this wing (docs/architecture.md, "Wings").
pub(crate) mod inbound;
pub(crate) mod media;
pub(crate) mod thread_context;

pub use admission::INTAKE_BATCH;
pub(crate) use drop_reason::DropReason;
use queued_count::QueuedCount;
use reply_lookup::ReplyLookup;
pub use screening::RecogniseCommand;
use screening::Screener;
use screening::no_commands;
pub use untaken::DEFAULT_MAX_PARKED_BYTES;
use untaken::Untaken;

use std::collections::HashMap;
use std::sync::Arc;

use clap::ValueEnum;
use nostr_sdk::prelude::{Event, EventId, Kind, RelayUrl, Timestamp};
use tokio::sync::{mpsc, watch};

use crate::edge::signer::BotSigner;
use crate::intake::inbound::Inbound;
use crate::outbound::groups::GroupDirectory;
use crate::outbound::reply::Replier;
use crate::policy::gate::AuthorGate;
use crate::policy::loop_guard::{ChainBounds, LoopGuard};
use crate::policy::shard::{QuestionAskers, Shard};
use crate::state::ledger::Ledger;
use crate::state::store::{AnsweredThreads, Questions, Store, Watermarks};

/// Which replies without the bot's `p` tag count as mentions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FollowThreads {
    /// Replies in a thread the bot has answered in, by authors it hears.
    Involved,
    /// None: only events that tag the bot.
    Off,
}

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
    pub session_policy: acp_bridge_core::mention::SessionPolicy,
    /// `--max-queued`: mentions waiting in all conversations, at most.
    pub max_queued: usize,
    /// `--follow-threads involved`: a reply in a thread the bot answered
    /// in counts as a mention.
    pub follow_threads: bool,
    /// `--max-parked-bytes`: events waiting for a profile lookup hold at
    /// most this many bytes.
    pub max_parked_bytes: usize,
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
    /// The checks, and the memory they keep (floors, rate buckets, held
    /// and parked events); see `screening`.
    screener: Screener,
    /// New rate limits from a reload of the config file, taken before the
    /// next admission.
    rate_limits: Option<watch::Receiver<RateLimit>>,
    queued: QueuedCount,
    floors_published: watch::Sender<SubscriptionFloors>,
    untaken: Untaken,
    inbound: mpsc::Sender<Inbound>,
    /// Which replica asked each of the bot's questions (`--shard`).
    question_askers: QuestionAskers,
    /// Asks a relay which public events from before this start the bot
    /// replied to; without it they are answered unchecked.
    reply_lookup: Option<ReplyLookup>,
    /// Whose refused mentions the operator was told of lately.
    unheard: unheard_log::UnheardLog,
    /// Marmot encrypted groups (`--marmot`): welcomes and group messages.
    marmot: Option<marmot::MarmotIntake>,
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
            screener: Screener::new(
                signer.public_key(),
                gate.owner(),
                limits,
                Timestamp::now(),
                no_commands,
            ),
            rate_limits: None,
            queued: QueuedCount::default(),
            signer,
            ledger: Ledger::new(Arc::clone(&store)),
            questions: Questions::new(Arc::clone(&store)),
            watermarks: Watermarks::new(Arc::clone(&store)),
            threads: AnsweredThreads::new(store),
            gate,
            replier,
            loop_guard,
            floors_published: watch::Sender::new(SubscriptionFloors::default()),
            untaken: Untaken::default(),
            inbound,
            question_askers: QuestionAskers::default(),
            reply_lookup: None,
            unheard: unheard_log::UnheardLog::new(std::time::Instant::now()),
            marmot: None,
        }
    }

    /// Checks public events from before this start against the bot's
    /// replies on their relay, through `client` (see `reply_lookup`).
    pub fn with_reply_lookup(mut self, client: nostr_sdk::prelude::Client) -> Self {
        let public = self
            .screener
            .limits
            .kinds
            .iter()
            .copied()
            .filter(|kind| *kind != Kind::GiftWrap)
            .collect();
        self.reply_lookup = Some(ReplyLookup::new(client, self.signer.public_key(), public));
        self.screener.looks_up_replies = true;
        self
    }

    /// Owner commands are recognised with `recognise` (the daemon hands
    /// in the heart's registry, `heart::commands::recognise`). Without, no
    /// text is a command: the benches' and the intake's own rigs.
    pub fn with_owner_commands(mut self, recognise: RecogniseCommand) -> Self {
        self.screener.recognise = recognise;
        self
    }

    /// Answers only the conversations of `shard`; without it, all of them.
    /// Joins Marmot encrypted groups and reads their messages.
    pub(crate) fn with_marmot(mut self, marmot: marmot::MarmotIntake) -> Self {
        self.marmot = Some(marmot);
        self
    }

    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.screener.shard = shard;
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
        self.screener.groups = groups;
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
}
