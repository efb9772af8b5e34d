//! Shards of one bot (`--shard INDEX/COUNT`): several daemons with the same
//! key on one relay, each with a state dir of its own, answer every
//! mention exactly once between them, each conversation from one shard.

use std::collections::{BTreeMap, BTreeSet};

use acp_bridge::{Attestation, Shard};
use futures_util::future::join_all;
use nostr_sdk::prelude::*;

use crate::support::*;

/// Conversations each test spreads over its shards.
const CONVERSATIONS: usize = 30;

/// Turns long enough (5 rounds of 150 ms) for a second mention to land
/// mid-turn, and room for many at once per shard.
const AGENT: &[&str] = &["--rounds", "5", "--round-delay-ms", "150"];
const CAPACITY: &[&str] = &["--agents", "2", "--turns-per-agent", "8"];

/// The scene's daemon as shard 0 of `count`, and shards 1.. beside it.
async fn sharded(count: usize) -> (Scene, Vec<Bridge>) {
    let mut flags = vec!["--shard".to_owned(), format!("0/{count}")];
    flags.extend(CAPACITY.iter().map(|flag| (*flag).to_owned()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder().agent(AGENT).flags(&flags).start().await;
    let mut replicas = Vec::new();
    for index in 1..count {
        replicas.push(start_shard(&scene.spec(), index, count).await);
    }
    (scene, replicas)
}

async fn start_shard(like: &BridgeSpec, index: usize, count: usize) -> Bridge {
    let shard = format!("{index}/{count}");
    let mut flags = vec!["--shard", shard.as_str()];
    flags.extend(CAPACITY);
    let bridge = Bridge::start(&like.replica(&flags));
    bridge.ready().await;
    bridge
}

/// Waits until one of `bridges` logs `line` after its cursor in `marks`;
/// returns which.
async fn wait_any(bridges: &[&Bridge], marks: &[Cursor], line: Line) -> usize {
    let probe = async || {
        bridges
            .iter()
            .zip(marks)
            .position(|(bridge, mark)| !bridge.log.matching(*mark, line.clone()).is_empty())
    };
    eventually(PATIENCE, probe, || format!("{line} in any shard's log")).await
}

/// The shards that took `mention` as theirs (logged it accepted).
fn takers(bridges: &[&Bridge], mention: &Event) -> Vec<usize> {
    (0..bridges.len())
        .filter(|shard| {
            let log = &bridges[*shard].log;
            !log.matching(log.start(), Line::accepted(&mention.id)).is_empty()
        })
        .collect()
}

/// Per shard, the conversations whose turns finished there.
fn turn_conversations(bridges: &[&Bridge]) -> Vec<BTreeSet<String>> {
    bridges
        .iter()
        .map(|bridge| {
            let log = &bridge.log;
            log.matching(log.start(), Line::new("turn finished"))
                .iter()
                .filter_map(|line| line["span"]["conversation"].as_str().map(str::to_owned))
                .collect()
        })
        .collect()
}

/// In each of [`CONVERSATIONS`] channels a mention, and once its turn
/// runs (in whichever shard owns it) a second one, mid-turn. Returns the
/// mentions by channel.
async fn mid_turn_traffic(scene: &Scene, bridges: &[&Bridge]) -> BTreeMap<String, Vec<Event>> {
    let marks: Vec<Cursor> = bridges.iter().map(|bridge| bridge.log.cursor()).collect();
    let conversation = async |n: usize| {
        let channel = format!("room-{n}");
        let first = scene.mention(&channel, &format!("work in {channel}")).await;
        let run = Line::new("agent run started").in_turn(&first.id);
        wait_any(bridges, &marks, run).await;
        let second = scene
            .mention(&channel, &format!("also this, {channel} [rounds=1]"))
            .await;
        (channel, vec![first, second])
    };
    join_all((0..CONVERSATIONS).map(conversation))
        .await
        .into_iter()
        .collect()
}

/// Every mention answered once, each taken by exactly one shard, each
/// conversation's mentions and turns all on one shard, and every shard
/// owning some.
async fn check_one_owner_per_conversation(scene: &Scene, bridges: &[&Bridge], label: &str) {
    let traffic = mid_turn_traffic(scene, bridges).await;
    let mentions: Vec<Event> = traffic.values().flatten().cloned().collect();
    assert_exactly_once(scene.tally(label, &mentions).await);

    let mut owned = vec![0; bridges.len()];
    for (channel, mentions) in &traffic {
        let shards: BTreeSet<Vec<usize>> = mentions.iter().map(|mention| takers(bridges, mention)).collect();
        assert_eq!(shards.len(), 1, "{channel}: its mentions went to {shards:?}");
        let shard = shards.into_iter().next().expect("one");
        assert_eq!(shard.len(), 1, "{channel}: taken by {shard:?}");
        owned[shard[0]] += 1;
    }
    let turns = turn_conversations(bridges);
    for (shard, conversations) in turns.iter().enumerate() {
        for (other, theirs) in turns.iter().enumerate().skip(shard + 1) {
            let both: Vec<&String> = conversations.intersection(theirs).collect();
            assert!(
                both.is_empty(),
                "shards {shard} and {other} both ran turns of {both:?}"
            );
        }
    }
    println!("{label}: conversations per shard {owned:?}");
    assert!(
        owned.iter().all(|count| *count > 0),
        "every shard owns some: {owned:?}"
    );

    // An owner command is a mention in a conversation: its shard answers,
    // and says which it is; the others decline it.
    let (channel, mentions) = traffic.iter().next().expect("a conversation");
    let owner = takers(bridges, &mentions[0])[0];
    let marks: Vec<Cursor> = bridges.iter().map(|bridge| bridge.log.cursor()).collect();
    let status = scene.mention(channel, "!status").await;
    let answer = scene.reply_to(&status).await;
    let expected = format!("Answered by shard {owner} of {}.", bridges.len());
    assert!(answer.content.contains(&expected), "{}", answer.content);
    for (shard, bridge) in bridges.iter().enumerate().filter(|(shard, _)| *shard != owner) {
        let declined = Line::dropped(&status.id, "other_shard");
        bridge.log.wait(marks[shard], declined).await;
    }
    assert_exactly_once(scene.tally(&format!("{label}: !status"), &[status]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_answer_every_mention_once_each_conversation_from_one_shard() {
    let (scene, replicas) = sharded(2).await;
    let bridges: Vec<&Bridge> = std::iter::once(&scene.bridge).chain(&replicas).collect();
    check_one_owner_per_conversation(&scene, &bridges, "2 shards, 30 conversations, mid-turn mentions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_answer_every_mention_once_each_conversation_from_one_shard() {
    let (scene, replicas) = sharded(3).await;
    let bridges: Vec<&Bridge> = std::iter::once(&scene.bridge).chain(&replicas).collect();
    check_one_owner_per_conversation(&scene, &bridges, "3 shards, 30 conversations, mid-turn mentions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shards_conversations_wait_for_its_restart_and_nothing_is_answered_twice() {
    let (scene, mut replicas) = sharded(2).await;
    let victim = replicas.remove(0);
    let spec = victim.spec.clone();

    // Turns run on both shards; then shard 1 dies mid-turn (SIGKILL).
    let mut traffic = mid_turn_traffic(&scene, &[&scene.bridge, &victim]).await;
    // A long turn in a fresh conversation of shard 1 (the documented hash
    // picks it; a busy one would fold the mention into its live turn).
    let relay = scene.relay.url();
    let victims_channel = (0..)
        .map(|n| format!("long-{n}"))
        .find(|channel| {
            let key = format!("group:{}'{channel}", relay.trim_end_matches('/'));
            acp_bridge::Shard::owner_index(&key, 2) == 1
        })
        .expect("a channel of shard 1");
    let mark = victim.log.cursor();
    let long = scene.mention(&victims_channel, "a long one [rounds=40]").await;
    victim
        .log
        .wait(mark, Line::new("agent run started").in_turn(&long.id))
        .await;
    traffic.insert(victims_channel, vec![long]);
    let mut victim = victim;
    // Its agents go with it (SIGKILL is their parent-death signal).
    victim.kill_hard();

    // While it is down, every conversation gets another mention: shard 0
    // takes its own and declines the others.
    let mark = scene.bridge.log.cursor();
    let later = join_all(
        traffic
            .keys()
            .map(|channel| scene.mention(channel, "while one shard is down [rounds=1]")),
    )
    .await;
    let mut waiting = Vec::new();
    for mention in &later {
        let ours = Line::accepted(&mention.id);
        let theirs = Line::dropped(&mention.id, "other_shard");
        let decided = async || {
            let log = &scene.bridge.log;
            if !log.matching(mark, ours.clone()).is_empty() {
                Some(true)
            } else {
                (!log.matching(mark, theirs.clone()).is_empty()).then_some(false)
            }
        };
        if !eventually(PATIENCE, decided, || {
            format!("shard 0 to decide on {}", mention.id)
        })
        .await
        {
            waiting.push(mention.clone());
        }
    }
    for mention in &later {
        if !waiting.contains(mention) {
            scene.reply_to(mention).await;
        }
    }
    assert!(!waiting.is_empty(), "the killed shard owned some conversations");
    // Shard 0 answered all of its own after it declined these: they wait.
    for mention in &waiting {
        let answers = scene.owner.events_referencing(&scene.bot, &mention.id).await;
        assert!(
            answers.is_empty(),
            "answered while its shard was down: {answers:?}"
        );
    }

    let restarted = Bridge::start(&spec);
    restarted.ready().await;
    let resumed = Line::new("resuming mentions accepted before the last stop");
    restarted.log.wait(restarted.log.start(), resumed).await;
    let mut all: Vec<Event> = traffic.into_values().flatten().collect();
    all.extend(later);
    println!("mentions waiting for the killed shard: {}", waiting.len());
    assert_exactly_once(
        scene
            .tally("2 shards, one SIGKILLed mid-turn and restarted", &all)
            .await,
    );
}

/// How a permission question starts.
const ASKED: &str = "asks for permission";

/// The index of the shard (of 2) that owns the DM conversation with `key`.
fn dm_shard(key: &PublicKey) -> usize {
    Shard::owner_index(&format!("dm:{}", key.to_hex()), 2) as usize
}

/// Two shards that ask the owner (`ask-owner`), the second started beside
/// the scene's daemon, and a sibling whose DM hashes to the other shard
/// than the owner's DM. Returns them and the index of the owner's DM's shard.
async fn shards_that_ask_the_owner() -> (Scene, Bridge, Person, usize) {
    let ask_owner = ["--permission-policy", "ask-owner"];
    let stage = Scene::builder()
        .agent(&["--rounds", "2", "--round-delay-ms", "50"])
        .flags(&[&["--shard", "0/2"][..], &ask_owner].concat())
        .stage()
        .await;
    let owners_shard = dm_shard(&stage.owner.public_key());
    let sibling_keys = std::iter::repeat_with(Keys::generate)
        .find(|keys| dm_shard(&keys.public_key()) != owners_shard)
        .expect("a key whose DM hashes to the other shard");
    let sibling = Person::join_as(sibling_keys, &stage.relay.url()).await;
    let attestation = Attestation::sign(&stage.owner.keys, &sibling.public_key(), "").expect("sign");
    sibling
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    let scene = stage.start().await;
    let replica = Bridge::start(
        &scene
            .spec()
            .replica(&[&["--shard", "1/2"][..], &ask_owner].concat()),
    );
    replica.ready().await;
    (scene, replica, sibling, owners_shard)
}

/// Issue 21: with shards, the owner's DM conversation may hash to another
/// shard than the one that asked (a question about a sibling's DM is asked
/// in the owner's DM). The owner's answer reaches the shard that asked and
/// only it: the shard of the owner's DM, which has a question of its own
/// open there, neither applies the answer to it nor takes it as a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_answer_reaches_the_shard_that_asked_and_no_other() {
    let (scene, replica, sibling, owners_shard) = shards_that_ask_the_owner().await;
    let bridges = [&scene.bridge, &replica];
    let (owner, bot) = (&scene.owner, scene.bot);

    // The owner's own DM asks on its shard; the sibling's, on the other
    // shard, asks in the owner's DM too.
    owner.dm(&bot, "tidy my notes [permission]").await;
    let mut own_question = owner.dm_containing(&bot, ASKED).await;
    sibling.dm(&bot, "clean the disk [permission]").await;
    let mut siblings_question = owner.dm_containing(&bot, "About the private conversation").await;

    let answer = owner.dm_replying(&bot, &siblings_question.id(), "1").await;
    let done = sibling.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: allowed (allow_once)"),
        "{}",
        done.content
    );
    let log = &bridges[owners_shard].log;
    log.wait(log.start(), Line::dropped(&answer.id, "other_shard"))
        .await;
    let taken_by = takers(&bridges, &answer);
    assert_eq!(taken_by, [1 - owners_shard], "only the shard that asked took it");

    // The owner's own question was left open for its own answer.
    owner.dm_replying(&bot, &own_question.id(), "Reject once").await;
    let own_done = owner.dm_containing(&bot, "done:").await;
    assert!(
        own_done.content.contains("tool: rejected (reject_once)"),
        "the sibling's answer was not applied to the owner's question: {}",
        own_done.content
    );
    let answered = questions_answered(&bridges);
    println!(
        "2 shards, 2 questions in the owner's DM: answers accepted 2, taken by {} shard(s) each, questions answered {answered}, applied to the wrong question 0, taken as a message 0",
        taken_by.len()
    );
    assert_eq!(answered, 2);
}

/// How many times any of `bridges` took the owner's answer to a question.
fn questions_answered(bridges: &[&Bridge]) -> usize {
    bridges
        .iter()
        .map(|bridge| {
            let log = &bridge.log;
            log.matching(log.start(), Line::new("the owner answered the agent's question"))
                .len()
        })
        .sum()
}

/// With shards, the owner's untagged DM answers the one question open in
/// the owner's DM, as without them; but while another shard may have a
/// question open there too (its copy came within `--permission-timeout`),
/// it answers none: it waits behind the question, and the owner is told to
/// reply to the question to answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_shards_an_untagged_dm_answers_only_while_no_other_shard_may_have_asked() {
    let (scene, replica, sibling, owners_shard) = shards_that_ask_the_owner().await;
    let bridges = [&scene.bridge, &replica];
    let (owner, bot) = (&scene.owner, scene.bot);

    owner.dm(&bot, "tidy my notes [permission]").await;
    owner.dm_containing(&bot, ASKED).await;
    owner.dm(&bot, "allow once").await;
    owner.dm_containing(&bot, "Answered the agent: Allow once").await;
    owner.dm_containing(&bot, "tool: allowed (allow_once)").await;

    // The other shard asks in the owner's DM; the owner's shard reads its copy.
    let log = &bridges[owners_shard].log;
    let mark = log.cursor();
    sibling.dm(&bot, "clean the disk [permission]").await;
    let mut siblings_question = owner.dm_containing(&bot, "About the private conversation").await;
    log.wait(mark, Line::new("event dropped").with("reason", "own_event"))
        .await;
    owner.dm(&bot, "second job [permission]").await;
    log.wait(mark, Line::new("asked the owner")).await;
    let untagged = owner.dm(&bot, "1").await;
    owner
        .dm_containing(&bot, "(to answer it, reply to the question itself)")
        .await;
    assert_eq!(
        takers(&bridges, &untagged),
        [owners_shard],
        "the owner's DM's shard took it, as a message"
    );

    owner
        .dm_replying(&bot, &siblings_question.id(), "Reject once")
        .await;
    let done = sibling.dm_containing(&bot, "done:").await;
    assert!(
        done.content.contains("tool: rejected (reject_once)"),
        "{}",
        done.content
    );
    let answered = questions_answered(&bridges);
    assert_eq!(answered, 2, "the untagged \"1\" answered neither open question");
    println!(
        "2 shards: untagged owner DMs 2; answered the one open question 1; held while another shard may have asked 1; wrong question answered 0"
    );
}

/// Threads answered by one daemon are followed by whichever shard owns
/// them after the bot is split in two: the new shard, whose state dir
/// never saw them, learns from the bot's own replies on the relay which
/// threads it answered in (the owner's untagged follow-up in each is
/// answered exactly once, by the shard its conversation hashes to) and
/// which mentions were answered (the relay offers them again, within the
/// new shard's first look-back, and none is answered twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_answered_before_a_shard_count_change_are_followed_by_their_new_shard() {
    /// Threads per shard after the split.
    const EACH: usize = 2;
    let mut scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let shard_of = |root: &Event| Shard::owner_index(&format!("note:{}", root.id.to_hex()), 2) as usize;
    let mut roots: Vec<Event> = Vec::new();
    let mut per_shard = [0; 2];
    while per_shard.iter().any(|count| *count < EACH) {
        let root = owner.mention_in_note(&bot, "hello").await;
        if per_shard[shard_of(&root)] < EACH {
            per_shard[shard_of(&root)] += 1;
            scene.reply_to(&root).await;
            roots.push(root);
        }
    }
    scene.bridge.terminate(PATIENCE).await;
    let spec = scene.spec();
    scene.restart(spec.clone().flags(&["--shard", "0/2"])).await;
    let fresh = start_shard(&spec, 1, 2).await;
    let shards = [&scene.bridge, &fresh];

    let mut follow_ups = Vec::new();
    for root in &roots {
        // A reply in the thread that does not tag the bot.
        let untagged = EventBuilder::text_note_reply("and one more thing", root, Some(root), None);
        follow_ups.push(scene.owner.publish(untagged).await);
    }
    assert_exactly_once(scene.tally("follow-ups after the split", &follow_ups).await);
    for (root, follow_up) in roots.iter().zip(&follow_ups) {
        assert_eq!(takers(&shards, follow_up), [shard_of(root)]);
        // Their subscriptions re-read the roots before the follow-ups came.
        assert_eq!(takers(&shards, root), [0; 0], "answered before the split");
    }
}

/// After the bot is split in two, each shard with a fresh state dir, the
/// shard that now owns a conversation answered before the split finds the
/// bot's replies on the relay: the mention, the DM and the owner's command
/// answered before are neither answered nor run again, by any shard, and
/// new ones are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_answered_before_a_shard_count_change_is_not_answered_again_by_a_fresh_shard() {
    let mut scene = Scene::builder().start().await;
    let before = scene.answer_one_of_each("room").await;
    scene.bridge.terminate(PATIENCE).await;

    let spec = scene.spec();
    scene
        .restart(spec.replica(&["--shard", "0/2"]).flags(CAPACITY))
        .await;
    let second = start_shard(&spec, 1, 2).await;
    let shards = [&scene.bridge, &second];
    let starts = [scene.bridge.log.start(), second.log.start()];
    // The mention's answer is public: both shards learn of it. The DM's
    // and the command's conversation is one shard's.
    for old in before.events() {
        wait_any(&shards, &starts, Line::answered_before_start(old)).await;
    }
    scene.settle("room").await;
    scene.assert_only_a_new_dm_answered(&before).await;
    for old in before.events() {
        assert_eq!(takers(&shards, old), [0; 0], "answered before the split");
    }
    for shard in shards {
        let commands = shard.log.matching(shard.log.start(), Line::new("owner command"));
        assert!(
            commands.is_empty(),
            "the old command is not run again: {commands:?}"
        );
    }
}
