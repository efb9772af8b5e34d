//! Screening as a table: one row per way out of it today, each against
//! a world of fixed answers (no store, no relay, a fixed clock).

use std::collections::HashSet;

use acp_bridge_core::mention::SessionPolicy;
use nostr_sdk::prelude::{EventBuilder, Keys};

use super::*;
use crate::outbound::groups::{GroupSettings, OtherGroups};
use crate::policy::gate::Refusal;
use crate::policy::loop_guard::ChainBounds;

const MAX_CONTENT_BYTES: usize = 64;
const MAX_QUEUED: usize = 100;
const MAX_REPLY_CHAIN: u32 = 20;
/// When the daemon started, and when the rows are screened.
const STARTED_AT: u64 = 1_700_000_000;
const NOW: u64 = STARTED_AT + 3_600;

/// The world as screening asks it: the answers of the row's arrangement.
struct World {
    seen: HashSet<EventId>,
    first_answered: Option<i64>,
    hearing: Hearing,
    asked_here: Option<bool>,
    question_open: bool,
    depth: u32,
    queued: usize,
}

impl Lookups for World {
    fn seen(&self, id: &EventId) -> bool {
        self.seen.contains(id)
    }
    fn first_answered(&self, _root: &EventId) -> Option<i64> {
        self.first_answered
    }
    fn hear(&mut self, _facts: AuthorFacts<'_>) -> Hearing {
        self.hearing
    }
    fn asked_here(&self, _question: EventId) -> Option<bool> {
        self.asked_here
    }
    fn question_open(&self, _question: &EventId) -> bool {
        self.question_open
    }
    fn depth_of(&mut self, _replies_to: Option<EventId>) -> u32 {
        self.depth
    }
    fn follow_up_depth(&mut self, _root: EventId, _replies_to: Option<EventId>) -> u32 {
        self.depth
    }
    fn queued(&mut self) -> usize {
        self.queued
    }
}

struct Rig {
    screener: Screener,
    world: World,
    bot: Keys,
    owner: Keys,
    author: Keys,
    relay: RelayUrl,
    /// The one moment every row is screened at.
    now: Now,
}

fn rig() -> Rig {
    let (bot, owner) = (Keys::generate(), Keys::generate());
    let limits = IntakeLimits {
        kinds: vec![Kind::Custom(9), Kind::TextNote, Kind::GiftWrap],
        max_content_bytes: MAX_CONTENT_BYTES,
        rate_limit_burst: 2,
        rate_limit_refill: Duration::from_secs(60),
        chain_bounds: ChainBounds {
            max_bot_hops: 3,
            max_reply_chain: MAX_REPLY_CHAIN,
        },
        session_policy: SessionPolicy::Conversation,
        max_queued: MAX_QUEUED,
        follow_threads: true,
        max_parked_bytes: 1 << 20,
    };
    let started_at = Timestamp::from_secs(STARTED_AT);
    Rig {
        screener: Screener::new(
            bot.public_key(),
            Some(owner.public_key()),
            limits,
            started_at,
            crate::heart::commands::recognise,
        ),
        world: World {
            seen: HashSet::new(),
            first_answered: None,
            hearing: Hearing::Heard(Standing::Allowlisted),
            asked_here: None,
            question_open: false,
            depth: 0,
            queued: 0,
        },
        bot,
        owner,
        author: Keys::generate(),
        relay: RelayUrl::parse("ws://127.0.0.1:1").expect("url"),
        now: Now {
            wall: Timestamp::from_secs(NOW),
            instant: Instant::now(),
        },
    }
}

/// What a row expects, as comparable as a verdict can be.
#[derive(Debug, PartialEq)]
enum Seen {
    Drop(DropReason),
    /// A notice whose text starts so.
    Notice(&'static str),
    Take(Intent),
    OtherShard,
    /// A gift wrap to unwrap (not a verdict yet).
    Sealed,
}

/// What a row hands to screening.
enum Input {
    /// An event as a relay delivers it (a gift wrap stops at `Sealed`).
    Delivered(Event),
    /// The DM `rumor` from `sender`, as the shell unwraps it.
    Direct { sender: PublicKey, rumor: UnsignedEvent },
}

impl Rig {
    /// A group message by `by` tagging the bot, dated `at`.
    fn group_message(&self, by: &Keys, text: &str, at: u64) -> Event {
        EventBuilder::new(Kind::Custom(9), text)
            .tag(Tag::public_key(self.bot.public_key()))
            .tag(Tag::custom(TagKind::h(), ["room"]))
            .custom_created_at(Timestamp::from_secs(at))
            .sign_with_keys(by)
            .expect("sign")
    }

    fn authors_message(&self, text: &str) -> Input {
        Input::Delivered(self.group_message(&self.author, text, NOW - 10))
    }

    fn owners_message(&self, text: &str) -> Input {
        Input::Delivered(self.group_message(&self.owner, text, NOW - 10))
    }

    /// A DM to the bot from `by`, dated `at`.
    fn dm(&self, by: &Keys, text: &str, at: u64) -> Input {
        let rumor = EventBuilder::private_msg_rumor(self.bot.public_key(), text)
            .custom_created_at(Timestamp::from_secs(at))
            .build(by.public_key());
        Input::Direct {
            sender: by.public_key(),
            rumor,
        }
    }

    /// Everything screening decides about `input`, as the shell runs it.
    fn screen(&mut self, input: Input) -> Seen {
        let (relay, now) = (self.relay.clone(), self.now);
        match input {
            Input::Delivered(event) => match self.screener.address(&relay, &event, now, &self.world) {
                Err(reason) => Seen::Drop(reason),
                Ok(Addressed::Sealed | Addressed::Encrypted) => Seen::Sealed,
                Ok(Addressed::Public(candidate)) => {
                    seen(self.screener.judge(&relay, candidate, now, &mut self.world))
                }
            },
            Input::Direct { sender, mut rumor } => {
                // The gift wrap the relay delivered; its content is the shell's business.
                let wrap = EventBuilder::new(Kind::GiftWrap, "")
                    .sign_with_keys(&Keys::generate())
                    .expect("sign");
                let rumor_id = rumor.id();
                match direct(&wrap, sender, &rumor, rumor_id) {
                    Err(reason) => Seen::Drop(reason),
                    Ok(candidate) => seen(self.screener.judge(&relay, candidate, now, &mut self.world)),
                }
            }
        }
    }
}

fn seen(verdict: Verdict) -> Seen {
    match verdict {
        Verdict::Drop(reason) => Seen::Drop(reason),
        Verdict::Take(mention) => Seen::Take(mention.intent),
        Verdict::OtherShard(_) => Seen::OtherShard,
        Verdict::Notice { text, .. } => {
            let known = [
                "Your message is too long for me",
                RATE_LIMITED_NOTICE,
                OVERLOADED_NOTICE,
                "This reply chain is 20 replies deep",
            ];
            Seen::Notice(
                known
                    .into_iter()
                    .find(|start| text.starts_with(start))
                    .unwrap_or_else(|| panic!("an unknown notice: {text}")),
            )
        }
    }
}

type Row = (&'static str, fn(&mut Rig) -> Input, Seen);

/// One row per way out of screening today: each drop reason screening
/// gives, each notice, each kind of take. (`undecryptable` and the bot's
/// own DM copies are the shell's, around the unwrap; `not_journaled`
/// and journal duplicates are the batch's.)
fn rows() -> Vec<Row> {
    use DropReason::*;
    vec![
        (
            "a heard author's mention is a turn",
            |rig| rig.authors_message("hello"),
            Seen::Take(Intent::Turn),
        ),
        (
            "a kind the intake does not read",
            |rig| {
                let event = EventBuilder::new(Kind::Reaction, "+")
                    .tag(Tag::public_key(rig.bot.public_key()))
                    .sign_with_keys(&rig.author)
                    .expect("sign");
                Input::Delivered(event)
            },
            Seen::Drop(NotAMention),
        ),
        (
            "the bot's own event",
            |rig| Input::Delivered(rig.group_message(&rig.bot.clone(), "mine", NOW)),
            Seen::Drop(OwnEvent),
        ),
        (
            "no p tag and no thread the bot answered in",
            |rig| {
                let event = EventBuilder::text_note("just talking")
                    .sign_with_keys(&rig.author)
                    .expect("sign");
                Input::Delivered(event)
            },
            Seen::Drop(NotAMention),
        ),
        (
            "an untagged reply in a thread the bot answered in follows up",
            |rig| {
                rig.world.first_answered = Some((NOW - 100) as i64);
                let root = EventId::from_slice(&[1; 32]).expect("32 bytes");
                let event = EventBuilder::text_note("and also")
                    .tag(Tag::parse(["e", &root.to_hex(), "", "root"]).expect("tag"))
                    .custom_created_at(Timestamp::from_secs(NOW - 10))
                    .sign_with_keys(&rig.author)
                    .expect("sign");
                Input::Delivered(event)
            },
            Seen::Take(Intent::Turn),
        ),
        (
            "an untagged reply from before the bot's first answer there",
            |rig| {
                rig.world.first_answered = Some((NOW - 10) as i64);
                let root = EventId::from_slice(&[1; 32]).expect("32 bytes");
                let event = EventBuilder::text_note("among people")
                    .tag(Tag::parse(["e", &root.to_hex(), "", "root"]).expect("tag"))
                    .custom_created_at(Timestamp::from_secs(
                        NOW - 10 - FOLLOW_UP_CLOCK_SKEW_SECS as u64 - 1,
                    ))
                    .sign_with_keys(&rig.author)
                    .expect("sign");
                Input::Delivered(event)
            },
            Seen::Drop(NotAMention),
        ),
        (
            "seen already",
            |rig| {
                let event = rig.group_message(&rig.author, "again", NOW - 10);
                rig.world.seen.insert(event.id);
                Input::Delivered(event)
            },
            Seen::Drop(Duplicate),
        ),
        (
            "seen already, as answered by the bot's reply on a relay",
            |rig| {
                let event = rig.group_message(&rig.author, "answered", NOW - 10);
                rig.world.seen.insert(event.id);
                rig.screener.before_start.answered_on_relay([event.id]);
                Input::Delivered(event)
            },
            Seen::Drop(AnsweredBeforeStart),
        ),
        (
            "a gift wrap from the future",
            |rig| {
                let wrap = EventBuilder::new(Kind::GiftWrap, "sealed")
                    .tag(Tag::public_key(rig.bot.public_key()))
                    .custom_created_at(Timestamp::from_secs(NOW + MAX_FUTURE_SKEW_SECS + 1))
                    .sign_with_keys(&Keys::generate())
                    .expect("sign");
                Input::Delivered(wrap)
            },
            Seen::Drop(FromTheFuture),
        ),
        (
            "a gift wrap whose signature fails",
            |rig| {
                let mut wrap = EventBuilder::new(Kind::GiftWrap, "sealed")
                    .tag(Tag::public_key(rig.bot.public_key()))
                    .custom_created_at(Timestamp::from_secs(NOW - 10))
                    .sign_with_keys(&Keys::generate())
                    .expect("sign");
                wrap.content = "tampered".into();
                Input::Delivered(wrap)
            },
            Seen::Drop(BadSignature),
        ),
        (
            "a sound gift wrap goes to the shell to unwrap",
            |rig| {
                let wrap = EventBuilder::new(Kind::GiftWrap, "sealed")
                    .tag(Tag::public_key(rig.bot.public_key()))
                    .custom_created_at(Timestamp::from_secs(NOW - 10))
                    .sign_with_keys(&Keys::generate())
                    .expect("sign");
                Input::Delivered(wrap)
            },
            Seen::Sealed,
        ),
        (
            "a group message without its h tag",
            |rig| {
                let event = EventBuilder::new(Kind::Custom(9), "where am I")
                    .tag(Tag::public_key(rig.bot.public_key()))
                    .sign_with_keys(&rig.author)
                    .expect("sign");
                Input::Delivered(event)
            },
            Seen::Drop(Malformed),
        ),
        (
            "a group the bot does not serve",
            |rig| {
                rig.screener.groups = GroupDirectory::new(&GroupSettings {
                    other_groups: OtherGroups::Ignore,
                    ..GroupSettings::default()
                });
                rig.authors_message("hello")
            },
            Seen::Drop(UnservedGroup),
        ),
        (
            "dated too far ahead",
            |rig| Input::Delivered(rig.group_message(&rig.author, "soon", NOW + MAX_FUTURE_SKEW_SECS + 1)),
            Seen::Drop(FromTheFuture),
        ),
        (
            "dated before the subscription's floor",
            |rig| {
                rig.screener
                    .floors
                    .insert(rig.relay.clone(), Timestamp::from_secs(NOW - 5));
                rig.authors_message("old")
            },
            Seen::Drop(TooOld),
        ),
        (
            "the gate refuses the author",
            |rig| {
                rig.world.hearing = Hearing::Refused(Refusal::NotHeard);
                rig.authors_message("hello")
            },
            Seen::Drop(Gate(Refusal::NotHeard)),
        ),
        (
            "the author's profile is being looked up: parked",
            |rig| {
                rig.world.hearing = Hearing::AwaitingProfile;
                rig.authors_message("hello")
            },
            Seen::Drop(AwaitingProfile),
        ),
        (
            "the profile lookups are saturated",
            |rig| {
                rig.world.hearing = Hearing::LookupsBusy;
                rig.authors_message("hello")
            },
            Seen::Drop(LookupsBusy),
        ),
        (
            "a heard author's event whose signature fails",
            |rig| {
                let mut event = rig.group_message(&rig.author, "harmless", NOW - 10);
                event.content = "changed".into();
                Input::Delivered(event)
            },
            Seen::Drop(BadSignature),
        ),
        (
            "another shard's conversation",
            |rig| {
                rig.move_to_another_shard();
                rig.authors_message("hello")
            },
            Seen::OtherShard,
        ),
        (
            "the owner's reply to a question this replica asked, whatever the hash",
            |rig| {
                rig.move_to_another_shard();
                rig.world.asked_here = Some(true);
                rig.owners_answer_to_a_question()
            },
            Seen::Take(Intent::Turn),
        ),
        (
            "the owner's reply to a question still open here, its copy not back yet",
            |rig| {
                rig.move_to_another_shard();
                rig.world.question_open = true;
                rig.owners_answer_to_a_question()
            },
            Seen::Take(Intent::Turn),
        ),
        (
            "a public event from before this start while its relay replays: held for the reply lookup",
            |rig| {
                rig.screener.looks_up_replies = true;
                rig.screener.before_start.subscribed(rig.relay.clone());
                Input::Delivered(rig.group_message(&rig.author, "old", STARTED_AT - 10))
            },
            Seen::Drop(AwaitingCatchUp),
        ),
        (
            "a DM from before this start whose answer the bot's copy journaled",
            |rig| {
                let mut input = rig.dm(&rig.owner.clone(), "answered", STARTED_AT - 10);
                if let Input::Direct { rumor, .. } = &mut input {
                    rig.world.seen.insert(rumor.id());
                }
                input
            },
            Seen::Drop(AnsweredBeforeStart),
        ),
        (
            "a DM from before this start while its relay replays: held",
            |rig| {
                rig.screener.before_start.subscribed(rig.relay.clone());
                rig.dm(&rig.owner.clone(), "waiting", STARTED_AT - 10)
            },
            Seen::Drop(AwaitingCatchUp),
        ),
        (
            "a DM from a heard author is a turn",
            |rig| rig.dm(&rig.author.clone(), "hi", NOW - 10),
            Seen::Take(Intent::Turn),
        ),
        (
            "a rumor that is not a DM",
            |rig| {
                let rumor = EventBuilder::text_note("not a DM").build(rig.author.public_key());
                Input::Direct {
                    sender: rig.author.public_key(),
                    rumor,
                }
            },
            Seen::Drop(NotAMention),
        ),
        (
            "a reply chain at its bound earns a notice",
            |rig| {
                rig.world.depth = MAX_REPLY_CHAIN;
                rig.authors_message("deep")
            },
            Seen::Notice("This reply chain is 20 replies deep"),
        ),
        (
            "a reply chain past its bound is cut",
            |rig| {
                rig.world.depth = MAX_REPLY_CHAIN + 1;
                rig.authors_message("deeper")
            },
            Seen::Drop(LoopBound),
        ),
        (
            "the first mention past the rate limit earns a notice",
            |rig| {
                spend_tokens(rig, 2);
                rig.authors_message("fast")
            },
            Seen::Notice(RATE_LIMITED_NOTICE),
        ),
        (
            "the next ones are dropped",
            |rig| {
                spend_tokens(rig, 3);
                rig.authors_message("faster")
            },
            Seen::Drop(RateLimited),
        ),
        (
            "the queue is full: an overload notice",
            |rig| {
                rig.world.queued = MAX_QUEUED;
                rig.authors_message("busy?")
            },
            Seen::Notice(OVERLOADED_NOTICE),
        ),
        (
            "the queue is full and the overload notices are spent",
            |rig| {
                rig.world.queued = MAX_QUEUED;
                for _ in 0..OVERLOAD_NOTICE_BURST + 1 {
                    rig.screener.overload_notices.admit(&(), rig.now.instant);
                }
                rig.authors_message("busy?")
            },
            Seen::Drop(Overloaded),
        ),
        (
            "too long earns a notice",
            |rig| rig.authors_message(&"x".repeat(MAX_CONTENT_BYTES + 1)),
            Seen::Notice("Your message is too long for me"),
        ),
        (
            "the owner is exempt from the rate and the cap",
            |rig| {
                rig.world.queued = MAX_QUEUED;
                spend_tokens_of(rig, rig.owner.public_key(), 3);
                rig.owners_message("hello")
            },
            Seen::Take(Intent::Turn),
        ),
        (
            "but not from the size",
            |rig| rig.owners_message(&"x".repeat(MAX_CONTENT_BYTES + 1)),
            Seen::Notice("Your message is too long for me"),
        ),
        (
            "an owner command passes the gate that refuses everyone",
            |rig| {
                rig.world.hearing = Hearing::Refused(Refusal::NobodyHeard);
                rig.owners_message("!status")
            },
            Seen::Take(Intent::Command(CommandCall {
                name: "!status".to_owned(),
                args: String::new(),
            })),
        ),
        (
            "anyone else's command is plain text, and the gate decides",
            |rig| {
                rig.world.hearing = Hearing::Refused(Refusal::NotHeard);
                rig.authors_message("!status")
            },
            Seen::Drop(Gate(Refusal::NotHeard)),
        ),
    ]
}

impl Rig {
    /// The owner's message in the room, replying to a question of the bot's.
    fn owners_answer_to_a_question(&self) -> Input {
        let question = EventId::from_slice(&[7; 32]).expect("32 bytes");
        let event = EventBuilder::new(Kind::Custom(9), "allow")
            .tag(Tag::public_key(self.bot.public_key()))
            .tag(Tag::custom(TagKind::h(), ["room"]))
            .tag(Tag::parse(["e", &question.to_hex(), "", "reply"]).expect("tag"))
            .custom_created_at(Timestamp::from_secs(NOW - 10))
            .sign_with_keys(&self.owner)
            .expect("sign");
        Input::Delivered(event)
    }

    /// This replica answers the other half of two shards: not the room's.
    fn move_to_another_shard(&mut self) {
        let conversation = format!("group:{}'room", self.relay);
        let other = 1 - Shard::owner_index(&conversation, 2);
        self.screener.shard = Shard::new(other, 2).expect("shard");
    }
}

fn spend_tokens(rig: &mut Rig, count: usize) {
    spend_tokens_of(rig, rig.author.public_key(), count);
}

fn spend_tokens_of(rig: &mut Rig, author: PublicKey, count: usize) {
    for _ in 0..count {
        rig.screener.limiter.admit(&author, rig.now.instant);
    }
}

#[test]
fn each_way_out_of_screening_as_a_table() {
    let mut failures = Vec::new();
    for (name, arrange, expected) in rows() {
        let mut rig = rig();
        let input = arrange(&mut rig);
        let got = rig.screen(input);
        if got != expected {
            failures.push(format!("{name}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_drop_reason_screening_gives_has_a_row() {
    let covered: HashSet<&str> = rows()
        .into_iter()
        .filter_map(|(_, _, expected)| match expected {
            Seen::Drop(reason) => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    // Given around screening, not by it: the unwrap (the shell), the
    // journal (the batch), and another shard's mention, which screening
    // gives as `Verdict::OtherShard` for the batch to journal as seen.
    let elsewhere = ["undecryptable", "not_journaled", "other_shard"];
    let all = [
        DropReason::OwnEvent,
        DropReason::NotAMention,
        DropReason::Duplicate,
        DropReason::TooOld,
        DropReason::FromTheFuture,
        DropReason::Malformed,
        DropReason::BadSignature,
        DropReason::Gate(Refusal::NotHeard),
        DropReason::LoopBound,
        DropReason::RateLimited,
        DropReason::Overloaded,
        DropReason::AwaitingProfile,
        DropReason::LookupsBusy,
        DropReason::UnservedGroup,
        DropReason::AnsweredBeforeStart,
        DropReason::AwaitingCatchUp,
        DropReason::Undecryptable,
        DropReason::NotJournaled,
        DropReason::OtherShard,
    ];
    for reason in all {
        assert!(
            covered.contains(reason.as_str()) || elsewhere.contains(&reason.as_str()),
            "no row drops for {}",
            reason.as_str()
        );
    }
}

#[test]
fn a_mention_taken_is_dated_by_now_and_knows_its_relay() {
    let mut rig = rig();
    let event = rig.group_message(&rig.author.clone(), "hello", NOW - 10);
    let relay = rig.relay.clone();
    let Ok(Addressed::Public(candidate)) = rig.screener.address(&relay, &event, rig.now, &rig.world) else {
        panic!("addressed to the bot");
    };
    let Verdict::Take(mention) = rig.screener.judge(&relay, candidate, rig.now, &mut rig.world) else {
        panic!("taken");
    };
    assert_eq!(mention.accepted_at, NOW);
    assert_eq!(mention.origin, Some(relay));
    assert_eq!(mention.event_id, event.id);
    assert!(!mention.from_owner && !mention.from_sibling);
}
