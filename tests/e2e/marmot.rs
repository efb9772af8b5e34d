//! Marmot (MLS) encrypted groups (docs/marmot.md), against members built on
//! mdk-core on the test side, as White Noise is: a member finds the bot's
//! key package, creates a group with it and invites the bot, mentions it
//! and reads its answer, decrypted and threaded; a member the gate does
//! not hear gets nothing; a stranger's welcome is declined.

use std::cell::RefCell;
use std::time::Duration;

use mdk_core::MDK;
use mdk_core::groups::NostrGroupConfigData;
use mdk_core::messages::MessageProcessingResult;
use mdk_core::prelude::GroupId;
use mdk_memory_storage::MdkMemoryStorage;
use nostr_sdk::prelude::*;

use crate::support::*;

/// The addressable key package's kind (MIP-00).
const KEY_PACKAGE: Kind = Kind::Custom(30443);

/// A Marmot member: a person on the relay with MLS state of its own.
struct Member {
    person: Person,
    mdk: MDK<MdkMemoryStorage>,
    /// The group messages it decrypted so far, in the order read.
    messages: RefCell<Vec<UnsignedEvent>>,
    /// The 445 wrappers it read (mdk reads each once).
    wrappers: RefCell<Vec<EventId>>,
}

impl Member {
    async fn join<R: RelayServer>(scene: &Scene<R>) -> Member {
        Member::as_person(scene.join().await)
    }

    fn as_person(person: Person) -> Member {
        Member {
            person,
            mdk: MDK::new(MdkMemoryStorage::default()),
            messages: RefCell::default(),
            wrappers: RefCell::default(),
        }
    }

    /// The bot's key package as the relay holds it, once it is there.
    async fn bot_key_package<R: RelayServer>(&self, scene: &Scene<R>) -> Event {
        self.person.newest_where(&scene.bot, KEY_PACKAGE, |_| true).await
    }

    /// Creates a group of this member and the bot on the scene's relay and
    /// sends the bot its welcome, gift-wrapped; returns the group's ids.
    async fn invite_bot<R: RelayServer>(&self, scene: &Scene<R>) -> Group {
        let package = self.bot_key_package(scene).await;
        let relay = RelayUrl::parse(&scene.relay.url()).unwrap();
        let config = NostrGroupConfigData::new(
            "test group".into(),
            "a group with the bot".into(),
            None,
            None,
            None,
            vec![relay],
            vec![self.person.public_key()],
        );
        let created = self
            .mdk
            .create_group(&self.person.public_key(), vec![package], config)
            .expect("create the group");
        let group = Group {
            mls: created.group.mls_group_id.clone(),
            nostr: hex(&created.group.nostr_group_id),
        };
        self.mdk
            .merge_pending_commit(&group.mls)
            .expect("merge the group's creation");
        for welcome in created.welcome_rumors {
            self.gift_wrap(&scene.bot, welcome).await;
        }
        group
    }

    /// [`Self::invite_bot`], then waits until the bot says it joined.
    async fn bring_in_bot<R: RelayServer>(&self, scene: &Scene<R>) -> Group {
        let joined = scene.bridge.log.start();
        let group = self.invite_bot(scene).await;
        scene
            .bridge
            .log
            .wait(
                joined,
                Line::new("joined a Marmot encrypted group").with("group", group.nostr.clone()),
            )
            .await;
        group
    }

    async fn gift_wrap(&self, to: &PublicKey, rumor: UnsignedEvent) {
        let wrap = EventBuilder::gift_wrap(&self.person.keys, to, rumor, [])
            .await
            .expect("wrap the welcome");
        self.person.send(&wrap).await;
    }

    /// Adds `newcomer` to `group` (a commit: the epoch moves on), which
    /// joins from its welcome.
    async fn add<R: RelayServer>(&self, scene: &Scene<R>, group: &Group, newcomer: &Member) {
        let relay = RelayUrl::parse(&scene.relay.url()).unwrap();
        let data = newcomer
            .mdk
            .create_key_package_for_event(&newcomer.person.public_key(), [relay])
            .expect("the newcomer's key package");
        let package = newcomer
            .person
            .publish(EventBuilder::new(KEY_PACKAGE, data.content).tags(data.tags_30443))
            .await;
        let added = self
            .mdk
            .add_members(&group.mls, &[package])
            .expect("add the newcomer");
        self.person.send(&added.evolution_event).await;
        self.mdk
            .merge_pending_commit(&group.mls)
            .expect("merge the addition");
        let welcome = added.welcome_rumors.expect("a welcome").remove(0);
        let welcome = newcomer
            .mdk
            .process_welcome(&EventId::all_zeros(), &welcome)
            .expect("the newcomer reads its welcome");
        newcomer.mdk.accept_welcome(&welcome).expect("the newcomer joins");
    }

    /// Says `text` in `group`, tagging `tags`; returns the rumor's id.
    async fn say(&self, group: &Group, text: &str, tags: Vec<Tag>) -> EventId {
        let (id, event) = self.seal(group, text, tags);
        self.person.send(&event).await;
        id
    }

    /// Encrypts `text` for `group` in its current epoch without sending
    /// it; returns the rumor's id and the kind 445 to send.
    fn seal(&self, group: &Group, text: &str, tags: Vec<Tag>) -> (EventId, Event) {
        let mut rumor = EventBuilder::new(Kind::Custom(9), text)
            .tags(tags)
            .build(self.person.public_key());
        let id = rumor.id();
        let event = self
            .mdk
            .create_message(&group.mls, rumor, None)
            .expect("encrypt the message");
        (id, event)
    }

    /// Reads the group's messages on the relay that this member has not
    /// read yet (commits are merged, application messages kept).
    async fn read(&self, group: &Group) -> Vec<UnsignedEvent> {
        let filter = Filter::new()
            .kind(Kind::MlsGroupMessage)
            .custom_tag(SingleLetterTag::lowercase(Alphabet::H), group.nostr.clone());
        let mut events: Vec<Event> = self
            .person
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch")
            .into_iter()
            .collect();
        events.sort_by_key(|event| event.created_at);
        let mut messages = Vec::new();
        for event in events {
            if self.wrappers.borrow().contains(&event.id) {
                continue;
            }
            self.wrappers.borrow_mut().push(event.id);
            if let Ok(MessageProcessingResult::ApplicationMessage(message)) = self.mdk.process_message(&event)
            {
                messages.push(message.event);
            }
        }
        messages
    }

    /// The bot's messages read so far that reply to `message`.
    fn bot_answers_to(&self, bot: &PublicKey, message: EventId) -> Vec<UnsignedEvent> {
        self.messages
            .borrow()
            .iter()
            .filter(|rumor| rumor.pubkey == *bot && replies_to(rumor, message))
            .cloned()
            .collect()
    }

    /// Waits for the bot's message in `group` replying to `message`.
    async fn answer_to<R: RelayServer>(
        &self,
        scene: &Scene<R>,
        group: &Group,
        message: EventId,
    ) -> UnsignedEvent {
        let probe = async || {
            let new = self.read(group).await;
            self.messages.borrow_mut().extend(new);
            self.bot_answers_to(&scene.bot, message).into_iter().next()
        };
        eventually(PATIENCE, probe, || {
            format!(
                "the bot's answer to {message} in the group; read: {:?}",
                self.messages.borrow()
            )
        })
        .await
    }

    /// Mentions the bot with `text` and returns once its agent is prompted
    /// (the turn runs), with the message's id.
    async fn ask_for_a_long_turn<R: RelayServer>(
        &self,
        scene: &Scene<R>,
        group: &Group,
        text: &str,
    ) -> EventId {
        let prompted = scene.bridge.log.start();
        let asked = self.say(group, text, vec![Tag::public_key(scene.bot)]).await;
        scene
            .bridge
            .log
            .wait(prompted, Line::new("prompting the agent"))
            .await;
        asked
    }

    /// How many answers of the bot to `asked` the group holds once a later
    /// mention is answered: turns of a conversation run one at a time, so a
    /// second answer to `asked` would have come before the later one's.
    async fn answers_once_settled<R: RelayServer>(
        &self,
        scene: &Scene<R>,
        group: &Group,
        asked: EventId,
    ) -> usize {
        let later = self
            .say(group, "and this one, bot", vec![Tag::public_key(scene.bot)])
            .await;
        self.answer_to(scene, group, later).await;
        self.bot_answers_to(&scene.bot, asked).len()
    }
}

/// A group's MLS id and its Nostr id (the 445 wrappers' `h`, hex).
struct Group {
    mls: GroupId,
    nostr: String,
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `rumor` replies to `message` (an `e` tag of it).
fn replies_to(rumor: &UnsignedEvent, message: EventId) -> bool {
    rumor.tags.event_ids().any(|id| *id == message)
}

/// The relay URLs of the `relay` tags of `event` (kind 10051).
fn relay_tags(event: &Event) -> Vec<String> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind().as_str() == "relay")
        .filter_map(|tag| tag.content().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_finds_the_bots_key_package_and_key_package_relays() {
    let scene = Scene::builder().flags(&["--marmot"]).start().await;
    let member = Member::join(&scene).await;

    let package = member.bot_key_package(&scene).await;
    let parsed = member.mdk.parse_key_package(&package);
    let relays = member
        .person
        .newest_where(&scene.bot, Kind::MlsKeyPackageRelays, |_| true)
        .await;
    println!(
        "key package {} ({} bytes of content); 10051 relays: {:?}",
        package.id,
        package.content.len(),
        relay_tags(&relays)
    );
    assert!(parsed.is_ok(), "mdk parses the bot's key package: {parsed:?}");
    assert_eq!(
        relay_tags(&relays),
        [RelayUrl::parse(&scene.relay.url()).unwrap().to_string()]
    );
    let legacy = member.person.newest(&scene.bot, Kind::MlsKeyPackage).await;
    assert!(
        legacy.is_some_and(|event| event.content == package.content),
        "the legacy 443 copy"
    );
    // NIP-89: clients looking up a handler of encrypted group messages find it.
    let handler = member
        .person
        .newest_where(&scene.bot, Kind::Custom(31990), |_| true)
        .await;
    let handled: Vec<&str> = handler
        .tags
        .iter()
        .filter(|tag| tag.kind() == TagKind::k())
        .filter_map(|tag| tag.content())
        .collect();
    println!("handler information k tags: {handled:?}");
    assert!(handled.contains(&"445"), "{handled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_invites_the_bot_to_an_encrypted_group_and_reads_its_encrypted_threaded_answer() {
    let scene = Scene::builder().flags(&["--marmot"]).start().await;
    let owner = Member::as_person(Person::join_as(scene.owner.keys.clone(), &scene.relay.url()).await);
    let group = owner.bring_in_bot(&scene).await;

    let asked = owner
        .say(
            &group,
            "hello bot, what is in the vault?",
            vec![Tag::public_key(scene.bot)],
        )
        .await;
    let answer = owner.answer_to(&scene, &group, asked).await;
    println!(
        "the bot's answer in the encrypted group: {:?} tags {:?}",
        answer.content, answer.tags
    );
    assert_eq!(answer.kind, Kind::Custom(9));
    assert!(answer.content.contains("done: "), "{}", answer.content);
    assert!(
        answer.content.contains("the vault"),
        "the prompt carried the message: {}",
        answer.content
    );
    assert!(
        answer
            .tags
            .public_keys()
            .any(|key| *key == owner.person.public_key()),
        "the answer tags its author"
    );
    // Nothing of the exchange is public: no kind 9 or reaction by the bot.
    let public = scene
        .owner
        .client
        .fetch_events(
            Filter::new()
                .author(scene.bot)
                .kinds([Kind::Custom(9), Kind::Reaction, Kind::TextNote]),
            Duration::from_secs(5),
        )
        .await
        .expect("fetch");
    assert!(public.is_empty(), "nothing public: {public:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_the_gate_does_not_hear_gets_nothing_and_a_strangers_welcome_is_declined() {
    let scene = Scene::builder().flags(&["--marmot"]).start().await;
    let owner = Member::as_person(Person::join_as(scene.owner.keys.clone(), &scene.relay.url()).await);
    let stranger = Member::join(&scene).await;

    // A stranger's welcome: declined, and logged.
    let declined = scene.bridge.log.start();
    let strangers_group = stranger.invite_bot(&scene).await;
    scene
        .bridge
        .log
        .wait(
            declined,
            Line::new("declined a Marmot welcome: its sender is not heard"),
        )
        .await;

    // The owner's group, which the stranger then joins too.
    let group = owner.bring_in_bot(&scene).await;
    owner.add(&scene, &group, &stranger).await;

    // The stranger mentions the bot first, then the owner does.
    let unheard = stranger
        .say(&group, "bot, answer me too", vec![Tag::public_key(scene.bot)])
        .await;
    let asked = owner
        .say(&group, "bot, and me?", vec![Tag::public_key(scene.bot)])
        .await;
    owner.answer_to(&scene, &group, asked).await;
    let to_stranger = owner.bot_answers_to(&scene.bot, unheard);
    println!(
        "messages read in the group: {}; answers to the unheard member: {}",
        owner.messages.borrow().len(),
        to_stranger.len()
    );
    assert!(
        to_stranger.is_empty(),
        "the unheard member got an answer: {to_stranger:?}"
    );
    let strangers_read = stranger.read(&strangers_group).await;
    assert!(
        strangers_read.iter().all(|rumor| rumor.pubkey != scene.bot),
        "the bot said nothing in the stranger's group"
    );
}

/// Starts a bot, has the owner invite it, and waits until it joined.
async fn owner_and_bot_in_a_group(flags: &[&str]) -> (Scene, Member, Group) {
    let scene = Scene::builder()
        .flags(flags)
        .log_filter("info,acp_bridge::intake=debug")
        .start()
        .await;
    let owner = Member::as_person(Person::join_as(scene.owner.keys.clone(), &scene.relay.url()).await);
    let group = owner.bring_in_bot(&scene).await;
    (scene, owner, group)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_answers_nothing_twice_and_still_answers_a_new_mention() {
    let (mut scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let first = owner
        .say(&group, "first question, bot", vec![Tag::public_key(scene.bot)])
        .await;
    owner.answer_to(&scene, &group, first).await;

    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "the daemon stopped cleanly: {status:?}");
    scene.restart(scene.spec()).await;
    let answers = owner.answers_once_settled(&scene, &group, first).await;
    println!("answers to the first mention after a restart: {answers}");
    assert_eq!(answers, 1, "the first mention is answered exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_between_decrypting_and_journaling_answers_exactly_once() {
    let (mut scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    // The journal cannot be written: the message is decrypted (mdk commits
    // its own file), then the daemon waits on the journal and is killed.
    let lock = scene.bridge.lock_journal();
    let decrypted = scene.bridge.log.start();
    let asked = owner
        .say(&group, "answer this once, bot", vec![Tag::public_key(scene.bot)])
        .await;
    scene
        .bridge
        .log
        .wait(decrypted, Line::new("a Marmot group event decrypted"))
        .await;
    scene.bridge.kill_hard();
    lock.release();

    scene.restart(scene.spec()).await;
    owner.answer_to(&scene, &group, asked).await;
    let log = &scene.bridge.log;
    let recovered = log.matching(
        log.start(),
        Line::new("a Marmot message decrypted before the crash, read back from the MLS state"),
    );
    let answers = owner.answers_once_settled(&scene, &group, asked).await;
    println!(
        "read back after the kill: {} time(s); answers: {answers}",
        recovered.len()
    );
    assert_eq!(
        recovered.len(),
        1,
        "mdk's copy was read back, not decrypted again"
    );
    assert_eq!(answers, 1, "answered exactly once across the kill");
}

/// A SIGKILL while the agent's turn runs: the journaled mention runs again
/// after the restart, and the group gets one answer, encrypted with the MLS
/// state the daemon left on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_turn_answers_once_after_the_restart() {
    let (mut scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let asked = owner
        .ask_for_a_long_turn(&scene, &group, "a long one, bot [rounds=40][delay=100]")
        .await;
    scene.bridge.kill_hard();

    scene.restart(scene.spec()).await;
    owner.answer_to(&scene, &group, asked).await;
    let answers = owner.answers_once_settled(&scene, &group, asked).await;
    println!("answers to the mention killed mid-turn: {answers}");
    assert_eq!(answers, 1, "answered exactly once across the kill");
}

/// A message sealed in one epoch and delivered after a commit moved the
/// group on (its sender was offline, or a relay delivered it late) is
/// still read and answered: mdk keeps the past epochs' secrets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_from_a_past_epoch_delivered_after_a_commit_is_answered() {
    let (scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let (asked, sealed) = owner.seal(
        &group,
        "sealed before the commit, bot",
        vec![Tag::public_key(scene.bot)],
    );
    let newcomer = Member::join(&scene).await;
    let moved = scene.bridge.log.start();
    owner.add(&scene, &group, &newcomer).await;
    scene
        .bridge
        .log
        .wait(
            moved,
            Line::new("a Marmot group's epoch moved on (members or keys changed)"),
        )
        .await;
    owner.person.send(&sealed).await;
    let answer = owner.answer_to(&scene, &group, asked).await;
    println!("the late message's answer: {}", answer.content);
    assert!(replies_to(&answer, asked));
}

/// Two messages delivered in the reverse of the order they were sealed in
/// (MLS numbers them in the sender's ratchet) are both read and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_delivered_out_of_order_are_each_answered() {
    let (scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let mention = || vec![Tag::public_key(scene.bot)];
    let (first, sealed_first) = owner.seal(&group, "first, bot", mention());
    let (second, sealed_second) = owner.seal(&group, "second, bot", mention());
    // The later one first, answered, and only then the earlier one: each
    // its own turn, so the test reads two answers, not one merged.
    for (asked, sealed) in [(second, sealed_second), (first, sealed_first)] {
        owner.person.send(&sealed).await;
        let answer = owner.answer_to(&scene, &group, asked).await;
        assert!(replies_to(&answer, asked));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_is_refused_in_an_encrypted_group_and_nothing_is_uploaded() {
    let blossom = test_support::blossom::BlossomServer::start().expect("blossom server");
    let cwd = temp_dir("marmot-send-file-cwd");
    std::fs::write(cwd.join("chart.png"), b"\x89PNG\r\n\x1a\nsecret chart").expect("file");
    let base = blossom.base_url();
    let flags = [
        "--marmot",
        "--cwd",
        cwd.to_str().expect("utf-8 path"),
        "--blossom",
        &base,
        "--fetch-private-addresses",
    ];
    let (scene, owner, group) = owner_and_bot_in_a_group(&flags).await;
    let asked = owner
        .say(
            &group,
            "send it [mcp-send-file=chart.png|the chart]",
            vec![Tag::public_key(scene.bot)],
        )
        .await;
    let answer = owner.answer_to(&scene, &group, asked).await;
    println!(
        "blobs uploaded: {}; answer: {}",
        blossom.blob_count(),
        answer.content
    );
    assert!(
        answer
            .content
            .contains("mcp send_file: error: files are not sent in an encrypted group"),
        "{}",
        answer.content
    );
    assert_eq!(blossom.blob_count(), 0, "nothing was uploaded in the clear");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_change_mid_turn_still_leaves_the_answer_readable_by_every_member() {
    let (scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let newcomer = Member::join(&scene).await;
    let started = scene.bridge.log.start();
    let asked = owner
        .ask_for_a_long_turn(&scene, &group, "take your time [rounds=10][delay=300]")
        .await;
    // While the turn runs, the owner adds a member: a commit, a new epoch.
    let moved = scene.bridge.log.start();
    owner.add(&scene, &group, &newcomer).await;
    scene
        .bridge
        .log
        .wait(
            moved,
            Line::new("a Marmot group's epoch moved on (members or keys changed)"),
        )
        .await;
    let turn_still_running = scene
        .bridge
        .log
        .matching(started, Line::new("turn finished"))
        .is_empty();

    let answer = owner.answer_to(&scene, &group, asked).await;
    let newcomers_copy = newcomer.answer_to(&scene, &group, asked).await;
    println!(
        "commit read while the turn ran: {turn_still_running}; the newcomer decrypted the answer: {}",
        newcomers_copy.id == answer.id
    );
    assert!(turn_still_running, "the epoch moved on mid-turn");
    assert_eq!(
        newcomers_copy.id, answer.id,
        "the answer went out in the new epoch"
    );
    let answers = owner.bot_answers_to(&scene.bot, asked).len();
    assert_eq!(answers, 1, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_leave_publishes_a_self_removal_and_the_admins_commit_removes_the_bot() {
    let (scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let asked = owner
        .say(&group, "!leave", vec![Tag::public_key(scene.bot)])
        .await;
    let removed = scene.bridge.log.start();
    // The owner's client (an admin) commits the bot's self-removal proposal.
    let committed = RefCell::new(false);
    let probe = async || {
        let filter = Filter::new()
            .kind(Kind::MlsGroupMessage)
            .custom_tag(SingleLetterTag::lowercase(Alphabet::H), group.nostr.clone());
        let events = owner
            .person
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch");
        let mut events: Vec<Event> = events.into_iter().collect();
        events.sort_by_key(|event| event.created_at);
        for event in events {
            if let Ok(MessageProcessingResult::Proposal(update)) = owner.mdk.process_message(&event) {
                owner.person.send(&update.evolution_event).await;
                owner
                    .mdk
                    .merge_pending_commit(&group.mls)
                    .expect("merge the removal");
                *committed.borrow_mut() = true;
            }
        }
        (*committed.borrow()).then_some(())
    };
    eventually(PATIENCE, probe, || "the bot's self-removal proposal".to_owned()).await;
    scene
        .bridge
        .log
        .wait(
            removed,
            Line::new("removed from a Marmot encrypted group").with("group", group.nostr.clone()),
        )
        .await;
    let members = owner.mdk.get_members(&group.mls).expect("members");
    println!("members after the removal: {}; asked {asked}", members.len());
    assert!(!members.contains(&scene.bot), "the bot is no longer a member");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_group_message_is_dropped_and_the_next_mention_is_answered() {
    let (scene, owner, group) = owner_and_bot_in_a_group(&["--marmot"]).await;
    let dropped = scene.bridge.log.start();
    // Signed by a throwaway key, as 445s are, but its content is no MLS message.
    let garbled = EventBuilder::new(Kind::MlsGroupMessage, "bm90IGFuIE1MUyBtZXNzYWdl")
        .tag(Tag::custom(TagKind::h(), [group.nostr.clone()]))
        .sign_with_keys(&Keys::generate())
        .expect("sign");
    owner.person.send(&garbled).await;
    let line = scene
        .bridge
        .log
        .wait(
            dropped,
            Line::new("event dropped").with("event_id", garbled.id.to_hex()),
        )
        .await;
    let asked = owner
        .say(&group, "still there, bot?", vec![Tag::public_key(scene.bot)])
        .await;
    owner.answer_to(&scene, &group, asked).await;
    println!("the garbled 445: {}", line["reason"]);
    assert_eq!(line["reason"], "undecryptable");
}
