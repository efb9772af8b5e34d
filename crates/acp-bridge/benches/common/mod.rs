//! What the intake benches share: a real [`Intake`] wired as the daemon wires
//! it (SQLite store in a fresh scratch dir, owner-only author gate, replier
//! without reactions, loop guard) and pre-signed kind-9 mentions.
//!
//! No relay is involved: owner mentions never make the gate look anything
//! up, and with reactions off an accepted mention publishes nothing. A
//! stranger's mention makes the gate try a profile lookup, which fails at
//! once without relays (and is soon refused by the lookup budget anyway).
//!
//! The scratch dir is under `$ACP_BRIDGE_BENCH_DIR` when set, else the
//! system temp dir: SQLite's cost depends on the file system under it, so
//! bench where the daemon's `--state-dir` would live.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use acp_bridge::{Arrival, INTAKE_BATCH, Inbound, Intake, IntakeLimits};
use acp_bridge::{AuthorGate, GateRules};
use acp_bridge::{BotSigner, Replier};
use acp_bridge::{NewMention, Store};
use acp_bridge::{ReplyMode, RespondTo};
use nostr_sdk::prelude::{Client, Event, EventBuilder, Keys, Kind, RelayUrl, Tag, TagKind, Timestamp};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// The NIP-29 group the mentions are posted in.
const GROUP: &str = "bench-group";
/// Mentions waiting between the intake and the (absent) heart; drained
/// after every event, so one slot would do.
const INBOUND_QUEUE: usize = 1024;

/// A single-threaded runtime: every figure is "on one core".
pub fn one_core_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread tokio runtime")
}

/// The keys of one bench run.
#[derive(Debug, Clone)]
pub struct Cast {
    pub bot: Keys,
    pub owner: Keys,
}

impl Cast {
    pub fn generate() -> Cast {
        Cast {
            bot: Keys::generate(),
            owner: Keys::generate(),
        }
    }
}

/// A realistic mention text of about 150 bytes; `seq` makes every event id
/// distinct.
fn mention_text(seq: u64) -> String {
    format!(
        "nostr:npub1bench please look at the failing integration test in crates/acp-bridge \
         and tell me what broke since yesterday (request #{seq})"
    )
}

/// `count` kind-9 mentions of the bot signed by `author`, each passing every
/// check of the intake when `author` is the owner: `p` tag of the bot, `h`
/// tag of the group, dated now, distinct ids.
pub fn signed_mentions(cast: &Cast, author: &Keys, count: usize) -> Vec<Event> {
    static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);
    let now = Timestamp::now();
    (0..count)
        .map(|_| {
            let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
            EventBuilder::new(Kind::Custom(9), mention_text(seq))
                .tags([
                    Tag::public_key(cast.bot.public_key()),
                    Tag::custom(TagKind::h(), [GROUP]),
                ])
                .custom_created_at(now)
                .sign_with_keys(author)
                .expect("signing a mention")
        })
        .collect()
}

/// A state dir that does not exist yet (the store creates it), removed with
/// its contents when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new() -> ScratchDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::var_os("ACP_BRIDGE_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("acp-bridge-bench-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        ScratchDir(path)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One real intake and the receiving end of what it hands on.
#[derive(Debug)]
pub struct IntakeRig {
    // Field order is drop order: the store closes before its dir goes.
    intake: Intake,
    inbound: mpsc::Receiver<Inbound>,
    store: Arc<Store>,
    relay: RelayUrl,
    /// Size of the last journaled mention's JSON (for [`IntakeRig::journal_only`]).
    payload_bytes: usize,
    _dir: ScratchDir,
}

impl IntakeRig {
    /// Wires an intake as `daemon::run` does, with a fresh store. Must be
    /// called inside the runtime (the nostr client wants one).
    pub fn new(cast: &Cast) -> IntakeRig {
        let dir = ScratchDir::new();
        let store = Arc::new(Store::open(&dir.0).expect("opening the store"));
        let client = Client::builder().signer(cast.bot.clone()).build();
        let (reply_recorder, loop_guard) = acp_bridge::loop_guard();
        let replier = Replier::new(
            BotSigner::from_keys(cast.bot.clone()),
            Arc::clone(&store),
            ReplyMode::Daemon,
            false, // --no-reactions: an accepted mention publishes nothing
            reply_recorder,
        );
        let gate = AuthorGate::new(
            GateRules::new(
                Some(cast.owner.public_key()),
                RespondTo::OwnerOnly,
                Default::default(),
            ),
            client,
        );
        let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE);
        // The daemon's defaults.
        let limits = IntakeLimits::default();
        let intake = Intake::new(
            BotSigner::from_keys(cast.bot.clone()),
            Arc::clone(&store),
            gate,
            replier,
            loop_guard,
            limits,
            inbound_tx,
        );
        IntakeRig {
            intake,
            inbound,
            store,
            relay: RelayUrl::parse("wss://relay.bench.invalid").expect("a relay url"),
            payload_bytes: 0,
            _dir: dir,
        }
    }

    /// Takes every event in, timed, `batch` at a time (the daemon drains a
    /// flood [`INTAKE_BATCH`] at a time, a trickle one at a time); each must
    /// be accepted and handed on (what is handed on is received and
    /// dropped, as the heart would take it off the queue). The arrivals are
    /// built before the clock starts.
    pub async fn accept_all(&mut self, events: &[Event], batch: usize) -> Duration {
        let batches = self.arrivals(events.iter(), batch);
        let mut last = None;
        let start = Instant::now();
        for batch in batches {
            for outcome in self.intake.take_in(batch).await {
                if let Err(reason) = outcome {
                    panic!("an owner mention was dropped: {}", reason.as_str());
                }
                match self.inbound.try_recv() {
                    Ok(Inbound::Mention(mention)) => last = Some(std::hint::black_box(mention)),
                    other => panic!("expected a mention handed on, got {other:?}"),
                }
            }
        }
        let elapsed = start.elapsed();
        if let Some(mention) = last {
            self.payload_bytes = serde_json::to_string(&mention).map_or(0, |json| json.len());
        }
        elapsed
    }

    /// Size of the JSON the last [`IntakeRig::accept_all`] journaled.
    pub fn journaled_payload_bytes(&self) -> usize {
        self.payload_bytes
    }

    /// Takes `count` events in, taken round-robin from `pool`, timed, in
    /// batches of [`INTAKE_BATCH`]; each must be refused. Refused
    /// events leave no trace in the store, so a pool can be screened again
    /// and again.
    pub async fn refuse(&mut self, pool: &[Event], count: u64) -> Duration {
        let batches = self.arrivals(pool.iter().cycle().take(count as usize), INTAKE_BATCH);
        let start = Instant::now();
        for batch in batches {
            let outcomes = self.intake.take_in(batch).await;
            assert!(
                outcomes.iter().all(Result::is_err),
                "a stranger's mention was heard"
            );
        }
        start.elapsed()
    }

    /// The events as the relay link would queue them, in batches.
    fn arrivals<'a>(&self, events: impl Iterator<Item = &'a Event>, batch: usize) -> Vec<Vec<Arrival>> {
        let events: Vec<&Event> = events.collect();
        events
            .chunks(batch)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|event| Arrival::Event {
                        relay: self.relay.clone(),
                        event: Box::new((*event).clone()),
                    })
                    .collect()
            })
            .collect()
    }

    /// The store's share of an accepted mention in a flood, alone: the
    /// dedup lookup and the journal transaction of each [`INTAKE_BATCH`]
    /// the intake runs, with a payload of the
    /// size the last [`IntakeRig::accept_all`] journaled. Not a bench of its
    /// own: a breakdown row. Use a fresh rig (the ids must be unseen).
    pub fn journal_only(&self, events: &[Event], payload_bytes: usize) -> Duration {
        let payload = "x".repeat(payload_bytes);
        let start = Instant::now();
        for batch in events.chunks(INTAKE_BATCH) {
            let ids: Vec<String> = batch.iter().map(|event| event.id.to_hex()).collect();
            for event_id in &ids {
                assert!(!self.store.journal_contains(event_id).expect("seen lookup"));
            }
            let records: Vec<NewMention<'_>> = ids
                .iter()
                .map(|event_id| NewMention {
                    event_id,
                    conversation: "group:bench-group",
                    payload: &payload,
                    accepted_at: 1,
                })
                .collect();
            let fresh = self.store.journal_accept_all(&records).expect("journal insert");
            assert!(fresh.into_iter().all(|fresh| fresh));
        }
        start.elapsed()
    }
}

/// Strangers' mentions: `count` events from `authors` different keys, round
/// robin, otherwise exactly like the owner's.
pub fn strangers_mentions(cast: &Cast, authors: usize, count: usize) -> Vec<Event> {
    let strangers: Vec<Keys> = (0..authors).map(|_| Keys::generate()).collect();
    (0..count)
        .flat_map(|i| signed_mentions(cast, &strangers[i % authors], 1))
        .collect()
}

/// Profile lookups the gate allows in a burst are 30; screening this many
/// strangers first spends them, so that what is measured is the steady
/// state of a flood (refused without a lookup).
pub const STRANGER_WARM_UP_EVENTS: u64 = 64;

/// Verifies every event (id and Schnorr signature), timed: the floor of
/// the intake's cost.
pub fn verify_all(events: &[Event]) -> Duration {
    let start = Instant::now();
    for event in events {
        std::hint::black_box(event).verify().expect("a valid signature");
    }
    start.elapsed()
}
