//! Screening: what one event is to become, decided without I/O.
//!
//! The checks run in the order the intake's top doc lists, cheapest first.
//! [`Screener`] holds screening's own memory (the subscription floors, the
//! rate buckets, the events held or parked) and decides; it reads no clock
//! (the shell passes [`Now`]) and touches no store, relay, signer or
//! channel. What it must know of the world it asks through [`Lookups`],
//! only when a check needs it and in the checks' order (an answer can cost
//! a store read or queue a profile lookup); the intake answers them from
//! its journal, author gate and loop guard.
//!
//! The shell (`shell`) acts on the [`Verdict`]: it journals the mention
//! and hands it on, sends the notice, counts and logs the drop. One step
//! is the shell's alone: unwrapping a gift wrap needs the bot's signer,
//! which may be remote, so a DM goes [`Screener::address`] → unwrap (the
//! shell) → [`direct`] → [`Screener::judge`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use acp_bridge_core::media_refs;
use acp_bridge_core::mention::{self, CommandCall, Intent, Mention, Thread};
use acp_bridge_core::standing::Standing;
use nostr_sdk::prelude::{Event, EventId, Kind, PublicKey, RelayUrl, Tag, TagKind, Timestamp, UnsignedEvent};

use super::before_start::BeforeStart;
use super::untaken::{Parked, Parking};
use super::{DropReason, IntakeLimits, SubscriptionFloors};
use crate::base::clock_skew::{FOLLOW_UP_CLOCK_SKEW_SECS, MAX_FUTURE_SKEW_SECS};
use crate::outbound::groups::GroupDirectory;
use crate::policy::gate::{AuthorFacts, Hearing};
use crate::policy::loop_guard::Hop;
use crate::policy::rate_limit::{Admission, RateLimiter};
use crate::policy::shard::Shard;
use crate::state::ledger::OtherShards;

/// Authors tracked by the rate limiter at most.
const RATE_LIMIT_TRACKED_AUTHORS: usize = 10_000;
/// Past `--max-queued`, this many overload notices in a burst, then one
/// per interval: a flood from many senders gets a few, not one each.
const OVERLOAD_NOTICE_BURST: u32 = 5;
const OVERLOAD_NOTICE_REFILL: Duration = Duration::from_secs(30);

/// The notice for an author past their rate limit, once per burst.
const RATE_LIMITED_NOTICE: &str =
    "You are sending mentions faster than I can take them; I will ignore new ones for a little while.";
/// The notice while `--max-queued` mentions wait, as long as the overload
/// notices last.
const OVERLOADED_NOTICE: &str =
    "Too many messages are waiting for me right now; please send yours again in a few minutes.";

/// What screening decided about one event.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Not taken, for this reason: refused, or untaken for now (see
    /// [`DropReason::is_passing`]).
    Drop(DropReason),
    /// Answered with `text` instead of a turn (too long, too fast, no room,
    /// a reply chain near its bound); journaled like a mention first, so a
    /// replay is a duplicate.
    Notice { mention: Mention, text: String },
    /// A mention to journal and hand on: a turn, or an owner command.
    Take(Mention),
    /// Another shard's conversation (`--shard`): journaled as seen only.
    OtherShard(OtherShards),
}

/// The moment screening judges by, read by the shell.
#[derive(Debug, Clone, Copy)]
pub(super) struct Now {
    /// Against event dates.
    pub(super) wall: Timestamp,
    /// For the rate buckets.
    pub(super) instant: Instant,
}

impl Now {
    pub(super) fn read() -> Now {
        Now {
            wall: Timestamp::now(),
            instant: Instant::now(),
        }
    }
}

/// The owner command `content` is, if it is exactly one its author
/// (`from_owner`: the owner) may give: the heart's registry
/// (`heart::commands::recognise`), a plain function so screening stays a
/// function of its inputs.
pub type RecogniseCommand = fn(&str, bool) -> Option<CommandCall>;

/// Recognises no command.
pub(super) fn no_commands(_content: &str, _from_owner: bool) -> Option<CommandCall> {
    None
}

/// What screening asks of the world outside it, answered by the intake.
/// Asked only when a check needs the answer, in the checks' order.
pub(super) trait Lookups {
    /// Whether the journal has `id` (an event's id, or a DM's rumor id).
    fn seen(&self, id: &EventId) -> bool;
    /// When the bot first answered in the thread rooted at `root` (seconds).
    fn first_answered(&self, root: &EventId) -> Option<i64>;
    /// How the author gate hears `facts.author`; may queue a profile lookup.
    fn hear(&mut self, facts: AuthorFacts<'_>) -> Hearing;
    /// Whether this replica asked `question`, when the replica that asked
    /// it is known (from the bot's copy of the question).
    fn asked_here(&self, question: EventId) -> Option<bool>;
    /// Whether `question` is open in this replica's store.
    fn question_open(&self, question: &EventId) -> bool;
    /// The reply-chain depth of a mention replying to `replies_to`.
    fn depth_of(&mut self, replies_to: Option<EventId>) -> u32;
    /// The depth of an untagged follow-up in the thread rooted at `root`.
    fn follow_up_depth(&mut self, root: EventId, replies_to: Option<EventId>) -> u32;
    /// Mentions waiting for a turn, in all conversations.
    fn queued(&mut self) -> usize;
}

/// What [`Screener::address`] found: the event is to be judged, or to be
/// unwrapped first.
#[expect(
    clippy::large_enum_variant,
    reason = "lives for one event, on the stack; boxing would cost an allocation per event"
)]
pub(super) enum Addressed<'a> {
    Public(Candidate<'a>),
    /// A gift wrap whose own signature holds: the shell unwraps it, then
    /// [`direct`] reads the DM inside.
    Sealed,
    /// A Marmot group message (kind 445) not seen before, its wrapper's
    /// signature holding: the shell decrypts it, then [`encrypted`] reads
    /// the message inside.
    Encrypted,
}

/// A message of one author, before it is a mention: the fields shared by
/// public events and unwrapped DMs.
pub(super) struct Candidate<'a> {
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

/// The DM `rumor` that `sender` sealed in the gift wrap `delivered` (the
/// seal's signature verified while unwrapping; not the bot's own copy).
pub(super) fn direct<'a>(
    delivered: &'a Event,
    sender: PublicKey,
    rumor: &'a UnsignedEvent,
    rumor_id: EventId,
) -> Result<Candidate<'a>, DropReason> {
    if rumor.kind != Kind::PrivateDirectMessage {
        return Err(DropReason::NotAMention);
    }
    let (thread, replies_to) = mention::direct_thread(sender, rumor, rumor_id);
    Ok(Candidate {
        dedup_id: delivered.id,
        author: sender,
        kind: rumor.kind,
        created_at: rumor.created_at,
        content: &rumor.content,
        tags: rumor.tags.as_slice(),
        thread,
        replies_to,
        signature: Signature::Verified,
        delivered,
        follow_up: false,
    })
}

/// The message `rumor` of a Marmot encrypted group `group`, decrypted from
/// the wrapper `delivered` (the journal's dedup id, as a DM's is its gift
/// wrap). mdk checked that its `pubkey` is the sender's MLS credential, so
/// the gate judges that key: membership alone does not make anyone heard.
/// Addressed to the bot when it tags or names the bot, or when `context`
/// says so (a reply to one of the bot's messages, or a group of two,
/// where every message is to the bot as in a DM).
pub(super) fn encrypted<'a>(
    delivered: &'a Event,
    group: String,
    rumor: &'a UnsignedEvent,
    bot: &PublicKey,
    context: bool,
) -> Result<Candidate<'a>, DropReason> {
    if rumor.pubkey == *bot {
        return Err(DropReason::OwnEvent);
    }
    if rumor.kind != Kind::Custom(9) {
        return Err(DropReason::NotAMention);
    }
    let tagged = mentions(&rumor.tags, &bot.to_hex()) || mention::names_in_content(&rumor.content, bot);
    if !tagged && !context {
        return Err(DropReason::NotAMention);
    }
    let message = rumor.id.ok_or(DropReason::Malformed)?;
    let replies_to = rumor.tags.event_ids().next().copied();
    Ok(Candidate {
        dedup_id: delivered.id,
        author: rumor.pubkey,
        kind: rumor.kind,
        created_at: rumor.created_at,
        content: &rumor.content,
        tags: rumor.tags.as_slice(),
        thread: Thread::Marmot { group, message },
        replies_to,
        signature: Signature::Verified,
        delivered,
        follow_up: false,
    })
}

/// Screening's own memory, and the checks.
#[derive(Debug)]
pub(super) struct Screener {
    pub(super) limits: IntakeLimits,
    bot: PublicKey,
    /// The bot's key as `p` tags carry it, computed once: every event is
    /// checked against it.
    bot_hex: String,
    owner: Option<PublicKey>,
    pub(super) limiter: RateLimiter<PublicKey>,
    overload_notices: RateLimiter<()>,
    pub(super) floors: SubscriptionFloors,
    /// Per relay, how far it has delivered, once its stored events are
    /// through: a live event is judged no earlier than that.
    pub(super) caught_up: HashMap<RelayUrl, Timestamp>,
    /// What the bot answered before this start, as the relays show it.
    pub(super) before_start: BeforeStart,
    pub(super) parked: Parked,
    /// The conversations this replica answers (`--shard`).
    pub(super) shard: Shard,
    /// Which texts are owner commands: the heart's registry, handed in by
    /// whoever builds the intake, so the intake does not import the heart.
    pub(super) recognise: RecogniseCommand,
    /// Which groups' mentions are answered (`--group`).
    pub(super) groups: GroupDirectory,
    /// Whether public events from before this start are held for a relay to
    /// say if the bot replied to them (the intake has a `reply_lookup`);
    /// without one they are answered unchecked.
    pub(super) looks_up_replies: bool,
    /// Screening stored events again after their lookup (they were held
    /// while their relay replayed them): judged by their own date, as
    /// during the replay (see `judged_date`).
    pub(super) replaying_held: bool,
}

impl Screener {
    /// Keeps a group event heard on `relay` among its group's recent
    /// events, which the bot's own events there name (NIP-29 `previous`),
    /// whatever screening then makes of it: the relay holds it either way.
    pub(super) fn heard(&self, relay: &RelayUrl, event: &Event) {
        self.groups.heard(relay, event, &self.bot);
    }

    pub(super) fn new(
        bot: PublicKey,
        owner: Option<PublicKey>,
        limits: IntakeLimits,
        started_at: Timestamp,
        recognise: RecogniseCommand,
    ) -> Self {
        Screener {
            recognise,
            limiter: RateLimiter::new(
                limits.rate_limit_burst,
                limits.rate_limit_refill,
                RATE_LIMIT_TRACKED_AUTHORS,
            ),
            overload_notices: RateLimiter::new(OVERLOAD_NOTICE_BURST, OVERLOAD_NOTICE_REFILL, 1),
            parked: Parked::new(limits.max_parked_bytes),
            bot_hex: bot.to_hex(),
            bot,
            owner,
            limits,
            floors: SubscriptionFloors::default(),
            caught_up: HashMap::new(),
            before_start: BeforeStart::new(started_at),
            shard: Shard::WHOLE,
            groups: GroupDirectory::default(),
            looks_up_replies: false,
            replaying_held: false,
        }
    }

    /// The first checks, on the event as delivered: kind and mention, own
    /// event, already seen; for a gift wrap its date and signature (the
    /// DM inside is read after the shell unwraps it); for a public event
    /// its threading and group.
    pub(super) fn address<'a>(
        &mut self,
        relay: &RelayUrl,
        event: &'a Event,
        now: Now,
        lookups: &impl Lookups,
    ) -> Result<Addressed<'a>, DropReason> {
        if event.kind == Kind::MlsGroupMessage {
            // Only the Marmot feed subscribes to these (`--marmot`); who
            // is addressed is known once it is decrypted.
            if lookups.seen(&event.id) {
                return Err(DropReason::Duplicate);
            }
            if event.verify().is_err() {
                return Err(DropReason::BadSignature);
            }
            return Ok(Addressed::Encrypted);
        }
        if !self.limits.kinds.contains(&event.kind) {
            return Err(DropReason::NotAMention);
        }
        if event.pubkey == self.bot {
            return Err(DropReason::OwnEvent);
        }
        let tagged = mentions(&event.tags, &self.bot_hex)
            || (event.kind != Kind::GiftWrap && mention::names_in_content(&event.content, &self.bot));
        if !tagged && !self.follows_up(event, lookups) {
            return Err(DropReason::NotAMention);
        }
        if lookups.seen(&event.id) {
            return Err(match self.before_start.take_answered(&event.id) {
                true => DropReason::AnsweredBeforeStart,
                false => DropReason::Duplicate,
            });
        }
        if event.kind == Kind::GiftWrap {
            // The wrap's own date is randomized into the past (NIP-59): only
            // the future is checked here, the rumor's date in `judge`.
            if event.created_at.as_secs() > now.wall.as_secs() + MAX_FUTURE_SKEW_SECS {
                return Err(DropReason::FromTheFuture);
            }
            if event.verify().is_err() {
                return Err(DropReason::BadSignature);
            }
            return Ok(Addressed::Sealed);
        }
        let (thread, replies_to) = mention::public_thread(event).ok_or(DropReason::Malformed)?;
        if let Thread::Group { channel, .. }
        | Thread::Comment {
            channel: Some(channel),
            ..
        } = &thread
            && !self.groups.serves(relay, channel)
        {
            return Err(DropReason::UnservedGroup);
        }
        Ok(Addressed::Public(Candidate {
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
        }))
    }

    /// The rest of the checks, on a message whose author is known: time
    /// window, author gate, signature, shard, answered before this start,
    /// loop bound, then the admission (rate limit, queue cap, size).
    pub(super) fn judge(
        &mut self,
        relay: &RelayUrl,
        candidate: Candidate<'_>,
        now: Now,
        lookups: &mut impl Lookups,
    ) -> Verdict {
        self.judge_candidate(relay, candidate, now, lookups)
            .unwrap_or_else(Verdict::Drop)
    }

    fn judge_candidate(
        &mut self,
        relay: &RelayUrl,
        candidate: Candidate<'_>,
        now: Now,
        lookups: &mut impl Lookups,
    ) -> Result<Verdict, DropReason> {
        self.check_time_window(relay, candidate.created_at, now.wall)?;
        let from_owner = Some(candidate.author) == self.owner;
        // Owner commands come before the author gate (they work even with
        // `--respond-to nobody`); anyone else's `!cancel` is plain text.
        let command = (self.recognise)(candidate.content, from_owner);
        let standing = match command {
            Some(_) => Standing::Owner,
            None => match lookups.hear(AuthorFacts {
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
        let ours = match self.reply_to_a_question(from_owner, candidate.replies_to, lookups) {
            Some(asked_here) => asked_here,
            None => self.shard.owns(conversation.as_str()),
        };
        if !ours {
            return Ok(Verdict::OtherShard(OtherShards {
                event_id: candidate.dedup_id,
                author: candidate.author,
                conversation,
                accepted_at: now.wall.as_secs(),
            }));
        }
        match candidate.thread {
            Thread::Direct { message, .. } => {
                self.dm_answered_before_start(relay, message, &candidate, lookups)?
            }
            Thread::Group { .. } | Thread::Note { .. } | Thread::Comment { .. } => {
                self.hold_for_reply_lookup(relay, &candidate)?
            }
            // Deduplicated on its wrapper by the journal, and never read
            // twice by mdk (`state::mls`): nothing to look up.
            Thread::Marmot { .. } => {}
        }
        let chain_depth = match candidate.thread.root_event() {
            Some(root) if candidate.follow_up => lookups.follow_up_depth(root, candidate.replies_to),
            _ => lookups.depth_of(candidate.replies_to),
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
            from_allowlist: standing == Standing::Allowlisted,
            chain_depth,
            accepted_at: now.wall.as_secs(),
            origin: Some(relay.clone()),
            intent: Intent::Turn,
            media: media_refs::media_of(candidate.tags, candidate.content),
        };
        Ok(self.admit(mention, command, hop, now, lookups))
    }

    /// A DM from before this start: dropped when the bot's copy of its
    /// answer to `rumor_id` was seen, held while its relay still delivers
    /// stored events (the copy may come among them); see `before_start`.
    fn dm_answered_before_start(
        &mut self,
        relay: &RelayUrl,
        rumor_id: EventId,
        candidate: &Candidate<'_>,
        lookups: &impl Lookups,
    ) -> Result<(), DropReason> {
        if !self.before_start.predates_start(candidate.created_at) {
            return Ok(());
        }
        if lookups.seen(&rumor_id) {
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
        let held = self.looks_up_replies
            && self
                .before_start
                .hold(relay, candidate.created_at, candidate.delivered);
        match held {
            true => Err(DropReason::AwaitingCatchUp),
            false => Ok(()),
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
        mention: Mention,
        command: Option<CommandCall>,
        hop: Hop,
        now: Now,
        lookups: &mut impl Lookups,
    ) -> Verdict {
        if let Some(command) = command {
            return Verdict::Take(Mention {
                intent: Intent::Command(command),
                ..mention
            });
        }
        if mention.from_owner {
            return self.size_check(mention);
        }
        match self.limiter.admit(&mention.author, now.instant) {
            Admission::Admitted if lookups.queued() >= self.limits.max_queued => {
                self.overload_notice(mention, now)
            }
            Admission::Admitted if hop == Hop::Notice => Verdict::Notice {
                text: self.limits.chain_bounds.notice(),
                mention,
            },
            Admission::Admitted => self.size_check(mention),
            Admission::LimitedFirst => Verdict::Notice {
                mention,
                text: RATE_LIMITED_NOTICE.to_owned(),
            },
            Admission::Limited => Verdict::Drop(DropReason::RateLimited),
        }
    }

    fn size_check(&self, mention: Mention) -> Verdict {
        let bytes = mention.content.len();
        if bytes <= self.limits.max_content_bytes {
            return Verdict::Take(mention);
        }
        Verdict::Notice {
            text: format!(
                "Your message is too long for me ({bytes} bytes; the limit is {}). Please shorten it.",
                self.limits.max_content_bytes
            ),
            mention,
        }
    }

    /// A notice that the bot is overloaded, while the global budget for
    /// them lasts; past it the mention is dropped unanswered.
    fn overload_notice(&mut self, mention: Mention, now: Now) -> Verdict {
        match self.overload_notices.admit(&(), now.instant) {
            Admission::Admitted => Verdict::Notice {
                mention,
                text: OVERLOADED_NOTICE.to_owned(),
            },
            Admission::LimitedFirst | Admission::Limited => Verdict::Drop(DropReason::Overloaded),
        }
    }

    /// Whether an owner's message replying to a question is this shard's
    /// to take: `Some` when it replies to a question some shard asked (it
    /// goes to that shard only, whatever the conversation's hash says, see
    /// `shard`), `None` otherwise.
    fn reply_to_a_question(
        &self,
        from_owner: bool,
        replies_to: Option<EventId>,
        lookups: &impl Lookups,
    ) -> Option<bool> {
        let replied = replies_to.filter(|_| from_owner && self.shard.is_sharded())?;
        if let Some(asked_here) = lookups.asked_here(replied) {
            return Some(asked_here);
        }
        // A question asked here whose copy has not come back (yet).
        lookups.question_open(&replied).then_some(true)
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

    /// Refuses a date further ahead of `now` than the clocks may disagree,
    /// or older than the floor of `relay`'s subscription.
    pub(super) fn check_time_window(
        &self,
        relay: &RelayUrl,
        created_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), DropReason> {
        let created = created_at.as_secs();
        if created > now.as_secs() + MAX_FUTURE_SKEW_SECS {
            return Err(DropReason::FromTheFuture);
        }
        match self.floors.get(relay).copied() {
            Some(floor) if created < floor.as_secs() => Err(DropReason::TooOld),
            _ => Ok(()),
        }
    }

    /// A public reply in a thread the bot answered in, when it follows
    /// threads: it counts as a mention (the gate still decides who is
    /// heard).
    fn follows_up(&self, event: &Event, lookups: &impl Lookups) -> bool {
        if !self.limits.follow_threads || event.kind == Kind::GiftWrap {
            return false;
        }
        let first_answer = mention::followed_root(event).and_then(|root| lookups.first_answered(&root));
        // Replies older than the bot's first answer were talk among people
        // (the thread's subscription delivers them again): not addressed to it.
        first_answer.is_some_and(|first| {
            event.created_at.as_secs() as i64 >= first.saturating_sub(FOLLOW_UP_CLOCK_SKEW_SECS)
        })
    }
}

/// True when a `p` tag names the bot (`bot_hex`, lowercase hex).
fn mentions(tags: &nostr_sdk::prelude::Tags, bot_hex: &str) -> bool {
    tags.iter()
        .any(|tag| tag.kind() == TagKind::p() && tag.content() == Some(bot_hex))
}

#[cfg(test)]
mod tests;
