//! The bot's identity as clients read it: a profile with NIP-24 `bot: true`
//! and the operator's fields, a NIP-65 relay list and a NIP-17 DM inbox
//! naming its relays; edits made in another client survive a restart, an
//! unchanged restart publishes nothing, and `check` shows all three.

use std::time::Duration;

use nostr_sdk::prelude::*;
use serde_json::Value;

use crate::support::*;

/// How long a daemon gets to stop on SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(20);

/// The log line of a start that published some of the identity.
const PUBLISHING: &str = "the bot's identity changed; publishing it";
/// The log line of a start that found the identity as configured.
const UP_TO_DATE: &str = "the bot's identity is up to date";

fn profile_json(event: &Event) -> Value {
    serde_json::from_str(&event.content).expect("the profile is JSON")
}

/// The relay URLs of the tags named `name` (`r` or `relay`).
fn relays_in(event: &Event, name: &str) -> Vec<RelayUrl> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind().as_str() == name)
        .filter_map(|tag| tag.content())
        .map(|url| RelayUrl::parse(url).expect("a relay URL"))
        .collect()
}

fn relay_url(scene: &Scene) -> RelayUrl {
    RelayUrl::parse(&scene.relay.url()).expect("the relay's URL")
}

/// Waits for all three identity events of the bot on the relay.
async fn published_identity(scene: &Scene) -> [Event; 3] {
    let [profile, relay_list, inbox] = [Kind::Metadata, Kind::RelayList, Kind::InboxRelays];
    [
        scene.owner.newest_where(&scene.bot, profile, |_| true).await,
        scene.owner.newest_where(&scene.bot, relay_list, |_| true).await,
        scene.owner.newest_where(&scene.bot, inbox, |_| true).await,
    ]
}

/// Stops the daemon and starts it again on `spec` (the same key and state).
async fn restart(scene: &mut Scene, spec: BridgeSpec) {
    let status = scene.bridge.terminate(STOP_WITHIN).await;
    assert!(status.success(), "the daemon stopped cleanly: {status:?}");
    scene.restart(spec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_bot_publishes_a_bot_profile_and_relay_lists_naming_its_relays() {
    let scene = Scene::builder()
        .flags(&[
            "--profile-name",
            "Helper",
            "--profile-about",
            "I answer mentions",
            "--profile-picture",
            "https://example.com/helper.png",
        ])
        .start()
        .await;
    scene
        .bridge
        .log
        .wait(scene.bridge.log.start(), Line::new(PUBLISHING))
        .await;

    let [profile, relay_list, inbox] = published_identity(&scene).await;
    let fields = profile_json(&profile);
    println!(
        "profile: {fields}; relay list: {:?}; inbox: {:?}",
        relay_list.tags, inbox.tags
    );
    assert_eq!(fields["bot"], true, "{fields}");
    assert_eq!(fields["name"], "Helper", "{fields}");
    assert_eq!(fields["display_name"], "Helper", "{fields}");
    assert_eq!(fields["about"], "I answer mentions", "{fields}");
    assert_eq!(fields["picture"], "https://example.com/helper.png", "{fields}");
    assert_eq!(relays_in(&relay_list, "r"), [relay_url(&scene)]);
    assert_eq!(relays_in(&inbox, "relay"), [relay_url(&scene)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_edited_in_another_client_keeps_its_fields_when_the_operator_changes_one() {
    let mut scene = Scene::builder()
        .flags(&["--profile-name", "Helper", "--profile-about", "first words"])
        .start()
        .await;
    let [first, _, _] = published_identity(&scene).await;

    // Another client, holding the bot's key, adds fields of its own.
    let spec = scene.spec();
    let other_client = Person::join_as(spec.bot.clone(), &scene.relay.url()).await;
    let mut edited = profile_json(&first);
    edited["website"] = "https://example.com".into();
    edited["lud16"] = "helper@example.com".into();
    let edit = other_client
        .publish(
            EventBuilder::new(Kind::Metadata, edited.to_string()).custom_created_at(first.created_at + 1),
        )
        .await;
    scene
        .owner
        .newest_where(&scene.bot, Kind::Metadata, |event| event.id == edit.id)
        .await;

    let mut changed = spec.clone();
    changed.flags = vec![
        "--profile-name".into(),
        "Helper".into(),
        "--profile-about".into(),
        "second words".into(),
    ];
    restart(&mut scene, changed).await;
    scene
        .bridge
        .log
        .wait(scene.bridge.log.start(), Line::new(PUBLISHING))
        .await;
    let merged = scene
        .owner
        .newest_where(&scene.bot, Kind::Metadata, |event| event.id != edit.id)
        .await;
    let fields = profile_json(&merged);
    println!("after the restart: {fields}");
    assert_eq!(fields["about"], "second words", "{fields}");
    assert_eq!(fields["name"], "Helper", "{fields}");
    assert_eq!(fields["display_name"], "Helper", "{fields}");
    assert_eq!(fields["bot"], true, "{fields}");
    assert_eq!(fields["website"], "https://example.com", "{fields}");
    assert_eq!(fields["lud16"], "helper@example.com", "{fields}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_restart_publishes_nothing() {
    let mut scene = Scene::builder()
        .flags(&["--profile-about", "steady"])
        .start()
        .await;
    let before = published_identity(&scene).await.map(|event| event.id);

    let spec = scene.spec();
    restart(&mut scene, spec).await;
    // Bounded by the daemon's own verdict on the identity.
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new(UP_TO_DATE)).await;
    let stored = log.matching(log.start(), Line::new(PUBLISHING)).len();
    let after = published_identity(&scene).await.map(|event| event.id);
    let republished = before.iter().zip(&after).filter(|(was, is)| was != is).count();
    println!("unchanged restart: identity events stored {stored}, republished {republished}");
    assert_eq!(stored, 0, "identity events stored by the unchanged restart");
    assert_eq!(before, after, "the relay holds the first start's events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_relays_change_the_inbox_and_nothing_else() {
    let mut scene = Scene::builder().start().await;
    let [profile, relay_list, inbox] = published_identity(&scene).await;
    assert_eq!(relays_in(&inbox, "relay"), [relay_url(&scene)]);
    assert_eq!(profile_json(&profile)["name"], "acp-bridge bot");

    let inbox_relay = RelayUrl::parse("wss://inbox.example.com").expect("url");
    let spec = scene.spec().flags(&["--dm-relays", inbox_relay.as_str()]);
    restart(&mut scene, spec).await;
    let log = &scene.bridge.log;
    let publishing = log.wait(log.start(), Line::new(PUBLISHING)).await;
    println!("with --dm-relays: {publishing}");
    assert_eq!(publishing["kinds"], "[10050]", "{publishing}");
    let moved = scene
        .owner
        .newest_where(&scene.bot, Kind::InboxRelays, |event| event.id != inbox.id)
        .await;
    assert_eq!(relays_in(&moved, "relay"), [inbox_relay]);
    let [profile_after, relay_list_after, _] = published_identity(&scene).await;
    assert_eq!(profile_after.id, profile.id);
    assert_eq!(relay_list_after.id, relay_list.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_what_the_relays_hold_and_what_would_be_published() {
    let scene = Scene::builder()
        .flags(&["--profile-about", "as held"])
        .start()
        .await;
    published_identity(&scene).await;
    let spec = scene.spec();

    let output = check_with_scripted_agent(
        &scene.relay.url(),
        &spec.owner.to_hex(),
        Some(&spec.bot.secret_key().to_secret_hex()),
        &["--profile-about", "as configured now"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}");
    let line = |label: &str| {
        stdout
            .lines()
            .find(|line| line.starts_with(label))
            .unwrap_or_else(|| panic!("a line `{label}…` in {stdout}"))
            .to_owned()
    };
    let profile = line("identity profile (kind 0): the relays hold {");
    assert!(profile.contains(r#""about":"as held""#), "{profile}");
    assert!(profile.contains(r#""bot":true"#), "{profile}");
    assert!(profile.contains(r#"would publish {"#), "{profile}");
    assert!(profile.contains(r#""about":"as configured now""#), "{profile}");
    let url = relay_url(&scene);
    for label in [
        "identity relay list (kind 10002)",
        "identity DM inbox (kind 10050)",
    ] {
        let relays = line(label);
        assert!(
            relays.ends_with(&format!("the relays hold {url}; up to date, nothing to publish")),
            "{relays}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_down_at_start_gets_the_identity_once_it_is_back() {
    let mut stage = Scene::builder().stage().await;
    stage.relay.stop();
    let mut scene = stage.launch();
    let log = &scene.bridge.log;
    log.wait_nth(log.start(), 2, Line::new("relay unreachable")).await;
    scene.relay.restart().await;
    scene.bridge.ready().await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new(PUBLISHING)).await;
    scene.reconnect_owner().await;
    let [profile, relay_list, inbox] = published_identity(&scene).await;
    println!(
        "after the relay came back: profile {}, relay list {:?}, inbox {:?}",
        profile.content, relay_list.tags, inbox.tags
    );
    assert_eq!(profile_json(&profile)["bot"], true);
    assert_eq!(relays_in(&inbox, "relay"), [relay_url(&scene)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_event_a_relay_turns_away_for_now_is_published_again() {
    let stage = Scene::builder().stage_on(PickyRelay::start().await).await;
    let bot = stage.bot;
    stage.relay.answer_with(move |event| {
        if event.pubkey == bot && event.kind == Kind::Metadata {
            Answer::Refuse("rate-limited: one moment".to_owned())
        } else {
            Answer::Accept
        }
    });
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let retry = log
        .wait(log.start(), Line::new("no relay accepted a reply; will retry"))
        .await;
    scene.relay.answer_with(|_| Answer::Accept);
    let profile = scene.owner.newest_where(&bot, Kind::Metadata, |_| true).await;
    let offers = scene
        .relay
        .received(|event| event.pubkey == bot && event.kind == Kind::Metadata);
    println!(
        "profile offered {} times, accepted once ({}); first refusal: {retry}",
        offers.len(),
        profile.id
    );
    assert_eq!(
        retry["event_id"],
        profile.id.to_hex(),
        "the same signed event is retried"
    );
    assert!(
        offers.len() >= 2,
        "offered again after the refusal: {}",
        offers.len()
    );
    assert!(offers.iter().all(|offer| offer.id == profile.id));
}
