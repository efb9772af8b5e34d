//! NIP-29 groups as a member sees them, against the real binary, a real
//! relay and the scripted agent. rust-nostr's relay implements none of
//! NIP-29's moderation, so the test plays the group relay's part itself: a
//! "relay admin" key signs the group's metadata (kind 39000) and members
//! (kind 39002), and adds the bot to the members once it sees the bot's
//! join request (kind 9021). Each test prints what it counted.

use std::process::Command;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use nostr_sdk::prelude::{
    Alphabet, Event, EventBuilder, Filter, Keys, Kind, PublicKey, SingleLetterTag, Tag, Timestamp,
};

use crate::support::*;

const GROUP: &str = "pizza";
const GROUP_NAME: &str = "Pizza Lovers";
const GROUP_ABOUT: &str = "a group for people who love pizza";

const JOINED: &str = "join request accepted: the bot joined the group";
const ALREADY_MEMBER: &str = "the bot is a member of the group; no join request";
const LEFT: &str = "left the group: it is no longer configured";

/// The group's metadata: closed, so only the admins add members.
fn group_metadata() -> EventBuilder {
    EventBuilder::new(Kind::from(39000), "").tags([
        Tag::parse(["d", GROUP]).unwrap(),
        Tag::parse(["name", GROUP_NAME]).unwrap(),
        Tag::parse(["about", GROUP_ABOUT]).unwrap(),
        Tag::parse(["closed"]).unwrap(),
    ])
}

/// The group's members list naming `members`. The tests only add members,
/// so a longer list is dated later (a second per member): it replaces the
/// shorter one even when both are made within the same second.
fn group_members(members: &[PublicKey]) -> EventBuilder {
    let mut tags = vec![Tag::parse(["d", GROUP]).unwrap()];
    tags.extend(
        members
            .iter()
            .map(|member| Tag::parse(["p", &member.to_hex()]).unwrap()),
    );
    EventBuilder::new(Kind::from(39002), "")
        .tags(tags)
        .custom_created_at(Timestamp::now() + members.len() as u64)
}

/// The bot's events of `kind` in the group that the relay holds.
async fn requests(person: &Person, bot: &PublicKey, kind: u16) -> Vec<Event> {
    let filter = Filter::new()
        .author(*bot)
        .kind(Kind::from(kind))
        .custom_tag(SingleLetterTag::lowercase(Alphabet::H), GROUP);
    person
        .client
        .fetch_events(filter, Duration::from_secs(5))
        .await
        .expect("fetch")
        .into_iter()
        .collect()
}

/// The text of every prompt the agents were given.
fn prompts(scene: &Scene) -> Vec<String> {
    scene
        .agent_frames()
        .iter()
        .filter(|frame| frame["method"] == "session/prompt")
        .filter_map(|frame| frame["params"]["prompt"][0]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_group_is_joined_named_to_the_agent_and_left_once_unconfigured() {
    let mut stage = Scene::builder().frame_log().stage().await;
    let relay_url = stage.relay.url();
    let admin = stage.join().await;
    admin.publish(group_metadata()).await;
    admin.publish(group_members(&[stage.owner.public_key()])).await;
    let group = format!("{relay_url}'{GROUP}");
    stage.spec.flags.extend(["--group".to_owned(), group.clone()]);
    let mut scene = stage.start().await;
    let log = &scene.bridge.log;

    // Not a member of a closed group: the bot asks to join, and the relay
    // admin adds it on seeing the request.
    log.wait(log.start(), Line::new(JOINED).with("group", group.as_str()))
        .await;
    let joins = requests(&scene.owner, &scene.bot, 9021).await;
    println!("first start: {} join request(s)", joins.len());
    assert_eq!(joins.len(), 1, "{joins:?}");
    admin
        .publish(group_members(&[scene.owner.public_key(), scene.bot]))
        .await;

    // A mention in a group it was not asked to serve is dropped at intake;
    // one in its group, sent after it, is answered.
    let stranger_group = scene.mention("pasta", "not served here").await;
    log.wait(log.start(), Line::dropped(&stranger_group.id, "unserved_group"))
        .await;
    let served = scene.mention(GROUP, "served here").await;
    assert_exactly_once(scene.tally("configured group", &[served]).await);
    let unserved_answers = scene.owner.answers_from(&scene.bot, &stranger_group.id).await;
    println!("unconfigured group: answered {} time(s)", unserved_answers.len());
    assert!(unserved_answers.is_empty(), "{unserved_answers:?}");

    // The agent is told which group it is answering in.
    let prompts = prompts(&scene);
    let named = prompts
        .iter()
        .filter(|prompt| {
            prompt.contains(&format!("`{GROUP}` on {relay_url}"))
                && prompt.contains(&format!("> name: {GROUP_NAME}"))
                && prompt.contains(&format!("> about: {GROUP_ABOUT}"))
        })
        .count();
    println!("prompts naming the group: {named} of {}", prompts.len());
    assert!(named >= 1, "{prompts:?}");

    // A restart with the group still configured: a member now, so no
    // join request, and nothing is left.
    scene.bridge.terminate(Duration::from_secs(30)).await;
    let spec = scene.spec();
    scene.restart(spec.clone()).await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new(ALREADY_MEMBER).with("group", group.as_str()),
    )
    .await;
    let joins = requests(&scene.owner, &scene.bot, 9021).await;
    println!(
        "second start (still configured): {} join request(s) in all",
        joins.len()
    );
    assert_eq!(joins.len(), 1, "{joins:?}");

    // The group dropped from the configuration: a leave request at the
    // next start. There is exactly one in the end, so the restart above
    // (group configured) left nothing.
    scene.bridge.terminate(Duration::from_secs(30)).await;
    let mut unconfigured = spec.clone();
    unconfigured
        .flags
        .retain(|flag| flag != "--group" && flag != &group);
    scene.restart(unconfigured.clone()).await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new(LEFT).with("group", group.as_str()))
        .await;
    let leaves = requests(&scene.owner, &scene.bot, 9022).await;
    println!("third start (unconfigured): {} leave request(s)", leaves.len());
    assert_eq!(leaves.len(), 1, "{leaves:?}");

    // Without --group, group mentions are answered wherever they are
    // heard (the default of --other-groups), and the group once left is
    // not left again.
    let anywhere = scene.mention("pasta", "answered without --group").await;
    assert_exactly_once(scene.tally("no group configured", &[anywhere]).await);
    scene.bridge.terminate(Duration::from_secs(30)).await;
    scene.restart(unconfigured).await;
    let again = scene.mention("pasta", "still answered").await;
    assert_exactly_once(scene.tally("no group configured, restarted", &[again]).await);
    let leaves = requests(&scene.owner, &scene.bot, 9022).await;
    println!(
        "fourth start (unconfigured): {} leave request(s) in all",
        leaves.len()
    );
    assert_eq!(leaves.len(), 1, "{leaves:?}");
}

/// `--group` values the daemon refuses at start, before it connects: one
/// line naming the flag and what to do.
#[test]
fn malformed_groups_and_groups_on_relays_the_bot_does_not_read_are_refused() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    for (group, says) in [
        ("pizza", "<host>'<group-id>"),
        ("ws://127.0.0.1:1'no spaces", "a group id is"),
        ("groups.example.com'pizza", "add it to --relay"),
    ] {
        let output = Command::new(bridge_binary())
            .args(["--relay", "ws://127.0.0.1:1", "--owner", &owner, "--group", group])
            .env_clear()
            .env("ACP_BRIDGE_SECRET_KEY", &secret)
            .output()
            .expect("run acp-bridge");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let refusals: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("acp-bridge:"))
            .collect();
        println!("--group {group}: {refusals:?}");
        assert!(!output.status.success(), "{stderr}");
        assert_eq!(refusals.len(), 1, "{stderr}");
        assert!(
            refusals[0].contains("--group") && refusals[0].contains(says),
            "{stderr}"
        );
    }
}

/// A group relay that asks for authentication (NIP-42), as closed and
/// private groups need: the bot reads the group and sends its join request
/// on its authenticated connection. Returns how often the SDK answered a
/// challenge.
async fn joined_on_a_relay_asking_for_authentication(auth_for: AuthFor) -> usize {
    let mut stage = Scene::builder()
        .frame_log()
        .stage_on(AuthRelay::start(auth_for).await)
        .await;
    let admin = stage.join().await;
    admin.publish(group_metadata()).await;
    admin.publish(group_members(&[stage.owner.public_key()])).await;
    let group = format!("{}'{GROUP}", stage.relay.url());
    stage.spec.flags.extend(["--group".to_owned(), group.clone()]);
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("read the group's metadata")
            .with("group", group.as_str())
            .with("name", GROUP_NAME),
    )
    .await;
    log.wait(log.start(), Line::new(JOINED).with("group", group.as_str()))
        .await;
    let joins = requests(&scene.owner, &scene.bot, 9021).await;
    assert_eq!(joins.len(), 1, "{joins:?}");
    let served = scene.mention(GROUP, "served on an authenticating relay").await;
    assert_exactly_once(
        scene
            .tally(&format!("{auth_for:?}: configured group"), &[served])
            .await,
    );
    let authentications = log
        .matching(log.start(), Line::new("Authenticated to relay."))
        .len();
    println!(
        "{auth_for:?}: {} join request(s), authenticated {authentications} time(s)",
        joins.len()
    );
    authentications
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_on_a_relay_asking_for_authentication_to_read_is_read_and_joined() {
    assert!(joined_on_a_relay_asking_for_authentication(AuthFor::Reads).await >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_request_refused_auth_required_is_accepted_once_authenticated() {
    assert!(joined_on_a_relay_asking_for_authentication(AuthFor::Writes).await >= 1);
}

/// `acp-bridge check` says what the group's relay holds and what the
/// daemon would do: a join request while the bot is not listed, none once
/// it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_shows_the_group_and_whether_a_join_request_would_be_sent() {
    let stage = Scene::builder().stage().await;
    let admin = stage.join().await;
    admin.publish(group_metadata()).await;
    admin.publish(group_members(&[stage.owner.public_key()])).await;
    let group = format!("{}'{GROUP}", stage.relay.url());
    let check = || {
        let output = check_with_scripted_agent(
            &stage.relay.url(),
            &stage.owner.public_key().to_hex(),
            Some(&stage.spec.bot.secret_key().to_secret_hex()),
            &["--group", &group],
        );
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}");
        let line = stdout
            .lines()
            .find(|line| line.starts_with(&format!("group {group}:")))
            .map(str::to_owned);
        line.unwrap_or_else(|| panic!("no group line in:\n{stdout}"))
    };
    let before = check();
    println!("{before}");
    assert!(before.contains(&format!("\"{GROUP_NAME}\" (closed)")), "{before}");
    assert!(before.contains("would send a join request"), "{before}");

    admin
        .publish(group_members(&[stage.owner.public_key(), stage.bot]))
        .await;
    let after = check();
    println!("{after}");
    assert!(after.contains("the bot is a member"), "{after}");
}

/// The relay's answer to a join request is logged for what it means, with
/// the relay's own words; a pending request is remembered, so dropping the
/// group from the configuration withdraws it with a leave request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relays_answer_to_a_join_request_is_logged_for_what_it_means() {
    for (answer, logged) in [
        (
            "duplicate: already a member",
            "join request answered: the bot is a member already",
        ),
        (
            "pending: the admins will decide",
            "join request pending: the group's admins decide",
        ),
        ("blocked: this group takes no new members", "join request refused"),
    ] {
        let relay = PickyRelay::start().await;
        relay.answer_with(move |event: &Event| match event.kind == Kind::from(9021) {
            true => Answer::Refuse(answer.to_owned()),
            false => Answer::Accept,
        });
        let mut stage = Scene::builder().stage_on(relay).await;
        let admin = stage.join().await;
        admin.publish(group_metadata()).await;
        admin.publish(group_members(&[stage.owner.public_key()])).await;
        let group = format!("{}'{GROUP}", stage.relay.url());
        stage.spec.flags.extend(["--group".to_owned(), group.clone()]);
        let mut scene = stage.start().await;
        let log = &scene.bridge.log;
        let line = Line::new(logged)
            .with("group", group.as_str())
            .with("relay_message", answer);
        log.wait(log.start(), line).await;
        println!("join request answered {answer:?}: logged {logged:?}");

        if answer.starts_with("pending:") {
            scene.bridge.terminate(Duration::from_secs(30)).await;
            let mut unconfigured = scene.spec();
            unconfigured
                .flags
                .retain(|flag| flag != "--group" && flag != &group);
            scene.restart(unconfigured).await;
            let log = &scene.bridge.log;
            log.wait(log.start(), Line::new(LEFT).with("group", group.as_str()))
                .await;
            let leaves = scene.relay.received(|event| event.kind == Kind::from(9022));
            println!("pending request withdrawn: {} leave request(s)", leaves.len());
            assert_eq!(leaves.len(), 1, "{leaves:?}");
        }
    }
}

/// A front on its own port for the relay on `target`: a request for the
/// relay's NIP-11 document gets one naming `key` as the relay's own;
/// everything else (the websocket) passes through to the relay.
async fn nip11_front(target: u16, key: PublicKey) -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let document = format!(
        r#"{{"name":"group relay","supported_nips":[29],"self":"{}"}}"#,
        key.to_hex()
    );
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let document = document.clone();
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let seen = loop {
                    let Ok(seen) = inbound.peek(&mut head).await else {
                        return;
                    };
                    let text = String::from_utf8_lossy(&head[..seen]).to_lowercase();
                    if seen == 0 || seen == head.len() || text.contains("\r\n\r\n") {
                        break text;
                    }
                    tokio::task::yield_now().await;
                };
                if seen.contains("application/nostr+json") && !seen.contains("upgrade: websocket") {
                    let answer = format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: application/nostr+json\r\nContent-Length: {}\r\n\r\n{document}",
                        document.len()
                    );
                    let _ = inbound.write_all(answer.as_bytes()).await;
                    let _ = inbound.shutdown().await;
                    return;
                }
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    port
}

/// A group relay that names its key (NIP-11): a metadata and members list
/// signed by anyone else are not read, even when newer. The forged ones
/// say the group is open and the bot a member; the relay's say it is
/// closed and the bot is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_the_group_relays_own_key_signed_is_read() {
    let mut stage = Scene::builder().stage().await;
    let admin = stage.join().await;
    admin.publish(group_metadata()).await;
    admin.publish(group_members(&[stage.owner.public_key()])).await;
    let forger = stage.join().await;
    let later = Timestamp::now() + 60;
    forger
        .publish(
            EventBuilder::new(Kind::from(39000), "")
                .tags([
                    Tag::parse(["d", GROUP]).unwrap(),
                    Tag::parse(["name", "Forged"]).unwrap(),
                ])
                .custom_created_at(later),
        )
        .await;
    forger
        .publish(group_members(&[stage.owner.public_key(), stage.bot]).custom_created_at(later))
        .await;
    let front = format!(
        "ws://127.0.0.1:{}",
        nip11_front(stage.relay.port(), admin.public_key()).await
    );
    stage.spec.relay_url = front.clone();
    let group = format!("{front}'{GROUP}");
    stage.spec.flags.extend(["--group".to_owned(), group.clone()]);
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("the group relay's key (NIP-11): only what it signed is read")
            .with("relay_key", admin.public_key().to_hex()),
    )
    .await;
    let read = log
        .wait(
            log.start(),
            Line::new("read the group's metadata").with("group", group.as_str()),
        )
        .await;
    println!(
        "read with the relay's key: name {} member {}",
        read["name"], read["member"]
    );
    assert_eq!(read["name"], GROUP_NAME, "{read}");
    assert_eq!(read["member"], false, "{read}");
    log.wait(log.start(), Line::new(JOINED).with("group", group.as_str()))
        .await;
}

/// 0xchat names the bot in a group message only in its text (a NIP-27
/// `nostr:nprofile1…`), with no `p` tag: the bot reads its served groups'
/// whole chat and takes such a message as a mention; chat that does not
/// name it stays unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_in_the_text_only_is_heard_in_a_served_group() {
    use nostr_sdk::prelude::{Nip19Profile, ToBech32};

    let mut stage = Scene::builder().stage().await;
    let relay_url = stage.relay.url();
    let admin = stage.join().await;
    admin
        .publish(EventBuilder::new(Kind::from(39000), "").tag(Tag::parse(["d", GROUP]).unwrap()))
        .await;
    stage
        .spec
        .flags
        .extend(["--group".to_owned(), format!("{relay_url}'{GROUP}")]);
    let scene = stage.start().await;
    let in_group = Tag::parse(["h", GROUP]).unwrap();

    let chat = scene
        .owner
        .publish(EventBuilder::new(Kind::Custom(9), "just chatting, no bot here").tag(in_group.clone()))
        .await;
    let nprofile = Nip19Profile::new(scene.bot, []).to_bech32().unwrap();
    let named = scene
        .owner
        .publish(
            EventBuilder::new(Kind::Custom(9), format!("nostr:{nprofile} what is on the menu?"))
                .tag(in_group),
        )
        .await;
    let answers = scene.owner.replies_from(&scene.bot, &named.id, 1).await;
    // Bounded by that answer, to a message sent after the chat.
    let chat_answers = scene.owner.events_referencing(&scene.bot, &chat.id).await;
    println!(
        "served group: named in the text only answered {} time(s); plain chat answered {} time(s)",
        answers.len(),
        chat_answers.len()
    );
    assert_eq!(answers.len(), 1);
    assert!(chat_answers.is_empty(), "{chat_answers:?}");
}
