//! The intake end to end, with a real store and real signatures: a batch
//! of arrivals in, what was journaled and handed on out.

use nostr_sdk::prelude::{Client, EventBuilder, Keys, Tag, TagKind};

use super::before_start::BeforeStart;
use super::*;
use crate::outbound::reply::ReplyMode;
use crate::policy::gate::GateRules;
use crate::policy::gate::RespondTo;
use crate::state::store::scratch::ScratchDir;

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
    let (recorder, loop_guard) = crate::policy::loop_guard::loop_guard();
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
        ..IntakeLimits::default()
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
        )
        .with_owner_commands(crate::heart::commands::recognise),
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
    assert!(matches!(rig.inbound.try_recv(), Ok(Inbound::Mention(m)) if m.author == owner && m.from_owner));
}

#[tokio::test]
async fn another_shards_mention_is_journaled_as_seen_and_nothing_else() {
    let mut rig = rig();
    let conversation = "group:ws://127.0.0.1:1'room";
    let owner_index = Shard::owner_index(conversation, 2);
    rig.intake.screener.shard = Shard::new(1 - owner_index, 2).unwrap();
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
        crate::state::store::Outbox::new(Arc::clone(&rig.store))
            .due(i64::MAX)
            .unwrap()
            .is_empty(),
        "no notice"
    );

    rig.intake.screener.shard = Shard::new(owner_index, 2).unwrap();
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
    rig.intake.screener.shard = Shard::new(index, 2).unwrap();
    let question = EventId::from_slice(&[7; 32]).expect("32 bytes");
    let answer = |text: &'static str| EventBuilder::private_msg(&owner, bot, text, [Tag::event(question)]);

    let early = answer("allow").await.expect("wrap");
    assert_eq!(
        rig.screen(&early).await,
        Err(DropReason::OtherShard),
        "no question asked yet"
    );
    rig.intake
        .questions
        .open(
            question,
            &acp_bridge_core::mention::test_mention("room", 1, "may I?", true),
        )
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
async fn a_dm_from_before_the_start_waits_for_the_stored_events_and_is_dropped_if_the_bots_copy_answers_it() {
    let mut rig = rig();
    let (owner, bot) = (rig.owner.clone(), rig.bot.clone());
    rig.intake.screener.before_start = BeforeStart::new(Timestamp::now() + 60);
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
