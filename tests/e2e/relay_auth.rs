//! Relays that ask for authentication (NIP-42), against the real binary,
//! rust-nostr's relay in its NIP-42 modes and the scripted agent: the bot
//! authenticates on the connection it has and reads, answers and
//! publishes there; a `CLOSED auth-required:` is no reason to reconnect.
//! Each test prints how its messages ended.

use nostr_sdk::prelude::{Event, Filter, Keys, Kind};

use crate::support::*;

/// The link's answer to a CLOSED it took for a broken link.
const RECONNECT_ON_CLOSED: &str = "relay closed our subscription; reconnecting";
/// Any reconnection of the link.
const RECONNECTING: &str = "reconnecting to relay";
/// The link waits for the SDK to authenticate instead.
const ASKED_TO_AUTHENTICATE: &str =
    "the relay asks us to authenticate (NIP-42); the subscription is sent again once we are";
const AUTHENTICATED: &str = "authenticated to the relay (NIP-42); the closed subscriptions are sent again";
/// The SDK's own line when it answered a challenge.
const SDK_AUTHENTICATED: &str = "Authenticated to relay.";

/// The owner mentions the bot in a group and DMs it; both are answered.
/// Returns the mention's tally (the DM is counted by its answer).
async fn mention_and_dm_answered<R: RelayServer>(scene: &Scene<R>, label: &str) -> Tally {
    let mention: Event = scene.mention("room", &format!("{label}: in the group")).await;
    let dm_text = format!("{label}: in private");
    let dms_before = scene.owner.direct_messages_from(&scene.bot, 0).await.len();
    scene.owner.dm(&scene.bot, &dm_text).await;
    let answers = scene.owner.direct_messages_from(&scene.bot, dms_before + 1).await;
    let dm_answers = answers
        .iter()
        .filter(|answer| answer.content.contains(&dm_text))
        .count();
    println!("{label}: DM answered {dm_answers} time(s)");
    assert_eq!(dm_answers, 1, "the DM is answered once");
    scene.tally(&format!("{label}: group mention"), &[mention]).await
}

/// How often the log since `from` says `message`.
fn count<R: RelayServer>(scene: &Scene<R>, from: Cursor, message: &str) -> usize {
    scene.bridge.log.matching(from, Line::new(message)).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_serving_dms_only_to_their_authenticated_recipient_is_read_and_answered() {
    let relay = AuthRelay::start(AuthFor::DmsToTheirRecipient).await;
    let scene = Scene::builder().start_on(relay).await;
    let log = &scene.bridge.log;

    let tally = mention_and_dm_answered(&scene, "DM inbox relay").await;
    assert_exactly_once(tally);
    // Bounded by the answers above: the DMs' subscription was refused
    // once, the bot authenticated, and nothing reconnected.
    log.wait(log.start(), Line::new(AUTHENTICATED)).await;
    let asked = count(&scene, log.start(), ASKED_TO_AUTHENTICATE);
    let reconnects =
        count(&scene, log.start(), RECONNECT_ON_CLOSED) + count(&scene, log.start(), RECONNECTING);
    println!("DM inbox relay: asked to authenticate {asked} time(s), reconnected {reconnects} time(s)");
    assert_eq!(asked, 1, "{}", log.tail(40));
    assert_eq!(reconnects, 0, "{}", log.tail(40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_asking_for_authentication_to_read_is_read_and_answered() {
    let relay = AuthRelay::start(AuthFor::Reads).await;
    let scene = Scene::builder().start_on(relay).await;
    let log = &scene.bridge.log;

    let tally = mention_and_dm_answered(&scene, "read-auth relay").await;
    assert_exactly_once(tally);
    let authentications = count(&scene, log.start(), SDK_AUTHENTICATED);
    let reconnects =
        count(&scene, log.start(), RECONNECT_ON_CLOSED) + count(&scene, log.start(), RECONNECTING);
    println!("read-auth relay: authenticated {authentications} time(s), reconnected {reconnects} time(s)");
    assert!(authentications >= 1, "{}", log.tail(40));
    assert_eq!(reconnects, 0, "{}", log.tail(40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_refused_auth_required_is_accepted_once_authenticated() {
    let relay = AuthRelay::start(AuthFor::Writes).await;
    let scene = Scene::builder().start_on(relay).await;
    let log = &scene.bridge.log;

    let mention = scene.mention("room", "answer on a write-auth relay").await;
    assert_exactly_once(scene.tally("write-auth relay", &[mention]).await);
    // The relay accepts no event unauthenticated: the answer on it proves
    // the bot authenticated and sent its reply again.
    let authentications = count(&scene, log.start(), SDK_AUTHENTICATED);
    println!("write-auth relay: authenticated {authentications} time(s)");
    assert!(authentications >= 1, "{}", log.tail(40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_relay_restart_the_bot_authenticates_again() {
    let relay = AuthRelay::start(AuthFor::DmsToTheirRecipient).await;
    let mut scene = Scene::builder().start_on(relay).await;
    assert_exactly_once(mention_and_dm_answered(&scene, "before the restart").await);

    let mark = scene.bridge.log.cursor();
    scene.relay.restart().await;
    let log = &scene.bridge.log;
    log.wait(mark, Line::new("reconnecting to relay")).await;
    log.wait(mark, Line::new(AUTHENTICATED)).await;
    scene.reconnect_owner().await;
    let tally = mention_and_dm_answered(&scene, "after the restart").await;
    assert_exactly_once(tally);
    let reconnects = count(&scene, scene.bridge.log.start(), RECONNECT_ON_CLOSED);
    println!("relay restart: reconnected on CLOSED {reconnects} time(s)");
    assert_eq!(reconnects, 0, "{}", scene.bridge.log.tail(40));
}

/// A relay that refuses every REQ for gift wraps, as one that carries no
/// DMs may.
async fn relay_refusing_dms() -> PickyRelay {
    let relay = PickyRelay::start().await;
    let asks_for_dms = |filter: &Filter| {
        filter
            .kinds
            .as_ref()
            .is_some_and(|kinds| kinds.contains(&Kind::GiftWrap))
    };
    relay.refuse_queries(asks_for_dms, "restricted: no DMs here");
    relay
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_refusing_dms_leaves_the_group_mentions_heard() {
    let scene = Scene::builder().start_on(relay_refusing_dms().await).await;
    let log = &scene.bridge.log;

    let mention = scene.mention("room", "heard without DMs").await;
    assert_exactly_once(scene.tally("relay refusing DMs", &[mention]).await);
    let refused = log
        .matching(
            log.start(),
            Line::new("the relay refuses our subscription; what it reads is not read from this relay until we reconnect")
                .with("reading", "DM"),
        )
        .len();
    let reconnects =
        count(&scene, log.start(), RECONNECT_ON_CLOSED) + count(&scene, log.start(), RECONNECTING);
    println!(
        "relay refusing DMs: DM subscription refused {refused} time(s), reconnected {reconnects} time(s)"
    );
    assert_eq!(refused, 1, "{}", log.tail(40));
    assert_eq!(reconnects, 0, "{}", log.tail(40));
}

/// `acp-bridge check` against `relay_url` with the built-in agent: its exit
/// code and what it printed.
async fn check(relay_url: String) -> (Option<i32>, String) {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let run = move || check_with_scripted_agent(&relay_url, &owner, Some(&secret), &[]);
    // The relay runs on this test's runtime: the check blocks elsewhere.
    let output = tokio::task::spawn_blocking(run).await.expect("check ran");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_subscriptions_accepted_after_authenticating() {
    let relay = AuthRelay::start(AuthFor::DmsToTheirRecipient).await;
    let (code, stdout) = check(relay.url()).await;
    println!("{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("ok, subscription `acp-bridge-mentions` accepted\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok, subscription `acp-bridge-dms` accepted after authenticating (NIP-42)"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_a_relay_that_refuses_a_subscription() {
    let relay = relay_refusing_dms().await;
    let (code, stdout) = check(relay.url()).await;
    println!("{stdout}");
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("FAILED, subscription `acp-bridge-dms` refused: restricted: no DMs here"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok, subscription `acp-bridge-mentions` accepted"),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: NOT ready"), "{stdout}");
}
