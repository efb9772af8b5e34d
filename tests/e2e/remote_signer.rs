//! The bot's key off the host (NIP-46), against the real binary, the test
//! relay, the scripted agent and nostr-connect's own signer side running
//! in the test process with the bot's key: the daemon is given only the
//! bunker URI. Each test prints how its messages ended.

use std::path::{Path, PathBuf};

use crate::support::*;

/// The daemon's line when the remote signer stops answering.
const SIGNER_SILENT: &str = "signer: no signature from the remote signer; signatures and DM decryption wait for it (mentions stay in the journal)";
/// The daemon's line when it signs again.
const SIGNER_BACK: &str = "signer: the remote signer signs again; waiting signatures go out";
/// What /healthz says meanwhile.
const HEALTH_SIGNER_SILENT: &str = "the remote signer does not sign";
/// Short, so that an outage shows within the test's patience.
const SIGNER_TIMEOUT: &str = "2s";

/// A stage whose daemon signs through an in-process bunker holding the
/// bot's key (`up`: answering from the start; else started later by the
/// test), given only the bunker's URI in a 0600 file, with a short
/// `--signer-timeout`.
async fn signing_stage(builder: SceneBuilder, up: bool) -> (Stage, RemoteSigner) {
    let mut stage = builder.flags(&["--signer-timeout", SIGNER_TIMEOUT]).stage().await;
    let signer = match up {
        true => RemoteSigner::start(&stage.spec.bot, &stage.relay.url()).await,
        false => RemoteSigner::down(&stage.spec.bot, &stage.relay.url()),
    };
    hand_over(&mut stage, &signer);
    (stage, signer)
}

/// Gives the daemon of `stage` only `signer`'s URI, in a 0600 file.
fn hand_over<R: RelayServer>(stage: &mut Stage<R>, signer: &RemoteSigner) {
    let file = temp_dir("bunker").join("bunker-uri");
    std::fs::write(&file, signer.bunker_uri()).expect("write the bunker URI");
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&file, private).expect("chmod 600");
    stage.spec.signer_file = Some(file);
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// True when no file in the daemon's state dir and no line of its log
/// holds the bot's secret key or the bunker's connection secret.
fn no_secret_on_the_host<R: RelayServer>(scene: &Scene<R>) -> bool {
    let bot_secret = scene.bridge.spec.bot.secret_key().to_secret_hex();
    let log = scene.bridge.log.text();
    let in_state = files_under(&scene.bridge.spec.state_dir).into_iter().any(|file| {
        let bytes = std::fs::read(&file).unwrap_or_default();
        String::from_utf8_lossy(&bytes).contains(&bot_secret)
    });
    !in_state && !log.contains(&bot_secret) && !log.contains(BUNKER_SECRET)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_and_a_dm_are_signed_and_decrypted_by_the_remote_signer_with_no_key_on_the_host() {
    let (stage, _signer) = signing_stage(Scene::builder(), true).await;
    let scene = stage.start().await;

    let mention = scene.mention("room", "answer me through the bunker").await;
    let reply = scene.reply_to(&mention).await;
    assert_eq!(reply.pubkey, scene.bot, "signed with the bot's key");
    assert!(reply.verify().is_ok());

    let dm_text = "a private word for the bunker";
    scene.owner.dm(&scene.bot, dm_text).await;
    scene.owner.dm_containing(&scene.bot, dm_text).await;
    let tally = scene.tally("remote signer: group mention", &[mention]).await;
    let dm_answers = scene.owner.direct_messages_from(&scene.bot, 1).await;
    let dm_answered = dm_answers
        .iter()
        .filter(|dm| dm.content.contains(dm_text))
        .count();
    println!("remote signer: {tally}; DM answered {dm_answered} time(s)");
    assert_exactly_once(tally);
    assert_eq!(dm_answered, 1);
    assert!(no_secret_on_the_host(&scene), "{}", scene.bridge.log.tail(40));
}

/// A relay that sends no `OK` for the daemon's NIP-46 requests (ephemeral
/// kind 24133, as nostr-rs-relay 0.8 treats them; issue 35 §5): a DM,
/// answered through the bunker, costs each signature the bunker's time, not
/// a wait for an `OK` that never comes (nostr-connect's client waited 10 s
/// for it before reading the answer it had, per request). The bunker's own
/// answers are acknowledged: its wait for `OK` is the bunker's business
/// (nostr-connect's signer side waits the same way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_at_the_bunkers_pace_through_a_relay_that_never_acknowledges_requests() {
    /// nostr-relay-pool's wait for an `OK` (its `WAIT_FOR_OK_TIMEOUT`).
    const OK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
    let mut stage = Scene::builder()
        .flags(&["--signer-timeout", SIGNER_TIMEOUT])
        .stage_on(PickyRelay::start().await)
        .await;
    let signer = RemoteSigner::start(&stage.spec.bot, &stage.relay.url()).await;
    let file = temp_dir("bunker").join("bunker-uri");
    std::fs::write(&file, signer.bunker_uri()).expect("write the bunker URI");
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&file, private).expect("chmod 600");
    stage.spec.signer_file = Some(file);
    let bunker = signer.public_key();
    let is_request =
        move |event: &nostr_sdk::prelude::Event| event.kind.is_ephemeral() && event.pubkey != bunker;
    stage.relay.answer_with(move |event| match is_request(event) {
        true => Answer::Hold,
        false => Answer::Accept,
    });
    let scene = stage.start().await;
    let before = scene.relay.received(is_request).len();

    let asked = std::time::Instant::now();
    let dm_text = "a private word past a relay that never says OK";
    scene.owner.dm(&scene.bot, dm_text).await;
    scene.owner.dm_containing(&scene.bot, dm_text).await;
    let took = asked.elapsed();
    let requests = scene.relay.received(is_request).len() - before;
    println!(
        "DM answered through the bunker in {} ms over {requests} signer requests, none acknowledged (a wait for each OK: {} s)",
        took.as_millis(),
        requests as u64 * OK_WAIT.as_secs()
    );
    assert!(
        requests >= 3,
        "the DM took the bunker's decryptions and signatures: {requests}"
    );
    assert!(
        took < OK_WAIT,
        "{} ms: a request still waits for the relay's OK",
        took.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signer_outage_mid_turn_holds_the_answer_until_the_signer_is_back_then_it_goes_out_once() {
    let (stage, mut signer) = signing_stage(Scene::builder().metrics(), true).await;
    let scene = stage.start().await;
    let (log, port) = (&scene.bridge.log, scene.metrics_port());

    let healthy_at_start = http_get(port, "/healthz").await;
    assert!(healthy_at_start.starts_with("HTTP/1.1 200"), "{healthy_at_start}");
    assert_eq!(metric(port, "acp_bridge_signer_up").await, 1.0, "up after start");
    let mark = log.cursor();
    // Two rounds of 1.5 s: the signer is gone before the agent answers.
    let mention = scene
        .mention_mid_turn("room", "[delay=1500] answer after the outage")
        .await;
    signer.stop();
    log.wait(mark, Line::new(SIGNER_SILENT)).await;
    let health = http_get(port, "/healthz").await;
    let up_while_silent = metric(port, "acp_bridge_signer_up").await;
    let answers_while_silent = scene
        .owner
        .events_referencing(&scene.bot, &mention.id)
        .await
        .len();
    println!(
        "outage: /healthz said {:?}; signer_up {up_while_silent}; answers meanwhile {answers_while_silent}",
        health.lines().last()
    );
    assert!(health.contains(HEALTH_SIGNER_SILENT), "{health}");
    assert_eq!(up_while_silent, 0.0);
    assert_eq!(
        answers_while_silent, 0,
        "nothing can be signed while the signer is gone"
    );

    signer.resume().await;
    log.wait(mark, Line::new(SIGNER_BACK)).await;
    let tally = scene
        .tally("signer outage mid-turn", std::slice::from_ref(&mention))
        .await;
    let turns = log
        .matching(mark, Line::new("agent run started").in_turn(&mention.id))
        .len();
    let healthy = http_get(port, "/healthz").await;
    println!(
        "outage: {tally}; agent runs {turns}; /healthz after {:?}",
        healthy.lines().last()
    );
    assert_exactly_once(tally);
    assert_eq!(turns, 1, "the answer waited; the turn was not run again");
    assert!(healthy.starts_with("HTTP/1.1 200"), "{healthy}");
    assert_eq!(metric(port, "acp_bridge_signer_up").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bunker_refusing_the_answer_holds_it_until_it_signs_then_it_goes_out_once() {
    let (stage, signer) = signing_stage(Scene::builder(), true).await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let mark = log.cursor();
    let mention = scene
        .mention_mid_turn("room", "[delay=1000] answer once approved")
        .await;
    signer.refuse_signatures(true);
    let refused = log.wait(mark, Line::new(SIGNER_SILENT)).await;
    let answers_while_refused = scene
        .owner
        .events_referencing(&scene.bot, &mention.id)
        .await
        .len();
    println!(
        "refusal: {}; answers meanwhile {answers_while_refused}",
        refused["error"]
    );
    assert_eq!(answers_while_refused, 0);

    signer.refuse_signatures(false);
    log.wait(mark, Line::new(SIGNER_BACK)).await;
    let tally = scene
        .tally("bunker refusing the answer", std::slice::from_ref(&mention))
        .await;
    let turns = log
        .matching(mark, Line::new("agent run started").in_turn(&mention.id))
        .len();
    println!("refusal: {tally}; agent runs {turns}");
    assert_exactly_once(tally);
    assert_eq!(turns, 1, "the answer waited; the turn was not run again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_that_arrives_while_the_signer_is_gone_waits_and_is_answered_once_it_is_back() {
    let (stage, mut signer) = signing_stage(Scene::builder(), true).await;
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    signer.stop();
    let mark = log.cursor();
    let dm_text = "said while the bunker was gone";
    let dm = scene.owner.dm(&scene.bot, dm_text).await;
    log.wait(mark, Line::new(SIGNER_SILENT)).await;
    signer.resume().await;
    log.wait(mark, Line::new(SIGNER_BACK)).await;
    let answered = times_answered(&scene, dm_text).await;
    let dropped = log.matching(mark, Line::dropped(&dm.id, "undecryptable")).len();
    println!("DM during an outage: answered {answered} time(s), dropped {dropped} time(s)");
    assert_eq!(answered, 1);
    assert_eq!(dropped, 0);
}

/// How many answers the owner's DM saying `text` got, once it got one;
/// bounded by a later DM's answer, after which nothing more comes for it.
async fn times_answered(scene: &Scene, text: &str) -> usize {
    scene.owner.dm_containing(&scene.bot, text).await;
    scene.owner.dm(&scene.bot, "and one more").await;
    scene.owner.dm_containing(&scene.bot, "and one more").await;
    let answers = scene.owner.direct_messages_from(&scene.bot, 2).await;
    answers
        .iter()
        .filter(|answer| answer.content.contains(text))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bunker_down_at_start_holds_the_start_and_loses_no_mention() {
    let (stage, mut signer) = signing_stage(Scene::builder(), false).await;
    let mut scene = stage.launch();
    let log = &scene.bridge.log;

    log.wait(log.start(), Line::new(SIGNER_SILENT)).await;
    // Said while the daemon waits for its signer, not subscribed yet.
    let mention = scene.mention("room", "said while the bunker was down").await;
    signer.resume().await;
    scene.bridge.ready().await;
    let tally = scene.tally("bunker down at start", &[mention]).await;
    let alive = scene.bridge.alive();
    println!("bunker down at start: {tally}; the first process still running: {alive}");
    assert_exactly_once(tally);
    assert!(alive, "waited for the signer instead of exiting");
}

/// `acp-bridge check` with the bunker URI and no key: whether the bunker
/// answers, and the bot's key as the bunker gave it.
fn check_through(stage: &Stage, state_dir: &Path) -> (String, bool) {
    let signer_file = stage.spec.signer_file.as_ref().expect("a signer file");
    let output = check_with_scripted_agent(
        &stage.relay.url(),
        &stage.owner.public_key().to_hex(),
        None,
        &[
            "--signer-file",
            signer_file.to_str().expect("a UTF-8 path"),
            "--state-dir",
            state_dir.to_str().expect("a UTF-8 path"),
            "--signer-timeout",
            SIGNER_TIMEOUT,
        ],
    );
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        output.status.success(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_whether_the_remote_signer_answers() {
    let (stage, mut signer) = signing_stage(Scene::builder(), true).await;
    let state_dir = temp_dir("check-state");
    let bot = nostr_sdk::prelude::ToBech32::to_bech32(&stage.bot).expect("npub");

    let (answered, ready) = check_through(&stage, &state_dir);
    println!("check, bunker up (ready: {ready}):\n{answered}");
    assert!(
        answered.contains("signer: ok (remote signer bunker://"),
        "{answered}"
    );
    assert!(answered.contains(&format!("config: ok (bot {bot}")), "{answered}");
    assert!(!answered.contains(BUNKER_SECRET), "{answered}");
    assert!(ready, "{answered}");

    signer.stop();
    let (silent, ready) = check_through(&stage, &state_dir);
    println!("check, bunker down (ready: {ready}):\n{silent}");
    assert!(
        silent.contains("signer: the remote signer did not answer within"),
        "{silent}"
    );
    assert!(!ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_waiting_for_its_bunker_stops_cleanly_on_sigterm() {
    let (stage, _signer) = signing_stage(Scene::builder(), false).await;
    let mut scene = stage.launch();
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new(SIGNER_SILENT)).await;

    let status = scene.bridge.terminate(std::time::Duration::from_secs(10)).await;
    println!("stopped while waiting for the bunker: {status}");
    assert!(status.success(), "{status}; {}", scene.bridge.log.tail(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_waiting_for_the_signer_when_the_daemon_stops_is_answered_after_the_restart() {
    let (stage, mut signer) = signing_stage(Scene::builder(), true).await;
    let mut scene = stage.start().await;

    signer.stop();
    let mark = scene.bridge.log.cursor();
    let dm_text = "said just before the daemon stopped";
    scene.owner.dm(&scene.bot, dm_text).await;
    scene.bridge.log.wait(mark, Line::new(SIGNER_SILENT)).await;
    let status = scene.bridge.terminate(std::time::Duration::from_secs(15)).await;
    println!("stopped while the DM waited for the signer: {status}");
    assert!(status.success(), "{status}");

    signer.resume().await;
    let spec = scene.spec();
    scene.restart(spec).await;
    let answered = times_answered(&scene, dm_text).await;
    println!("DM waiting for the signer at stop: answered {answered} time(s) after the restart");
    assert_eq!(answered, 1);
}

/// Issue 39: the copy of its DM answer that the bot wraps to itself
/// (NIP-17) comes back to its intake, which knows it by its wrapper's id
/// and asks the bunker for nothing: the DM costs the bunker the unwrap of
/// the owner's DM (two decryptions), not a second unwrap of the bot's own
/// copy (two more round trips, in line before the next DM).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bots_copy_of_its_own_dm_answer_is_not_sent_to_the_bunker_to_unwrap() {
    let (stage, signer) = signing_stage(Scene::builder(), true).await;
    let scene = stage.start().await;
    let watch = signer.watch().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();

    let dm_text = "no second unwrap, please";
    scene.owner.dm(&scene.bot, dm_text).await;
    scene.owner.dm_containing(&scene.bot, dm_text).await;
    // The intake dropping the copy as the bot's own: after the unwrap it
    // took, if it took one.
    log.wait(mark, Line::new("event dropped").with("reason", "own_event"))
        .await;
    // The owner's DM unwrapped (2), the answer's two gift wraps (4).
    let seen = watch.settled(6).await;
    println!(
        "a DM answered through the bunker: {} requests, {} of them decryptions",
        seen.sent, seen.decryptions
    );
    assert_eq!(seen.decryptions, 2, "only the owner's DM was unwrapped: {seen:?}");
}

/// The bunker's round trip in the pipelining tests (a phone's, roughly):
/// long against loopback, so requests sent together overlap in it.
const FAR: std::time::Duration = std::time::Duration::from_millis(150);

/// A stage whose daemon signs through a bunker [`FAR`] away.
async fn far_signing_stage() -> (Stage, RemoteSigner) {
    let mut stage = Scene::builder().flags(&["--signer-timeout", "10s"]).stage().await;
    let signer = RemoteSigner::start(&stage.spec.bot, &stage.relay.url())
        .await
        .far(FAR)
        .await;
    hand_over(&mut stage, &signer);
    (stage, signer)
}

/// Issue 39: a DM's answer is gift-wrapped twice (to the owner, and the
/// copy to the bot), each an encryption then a seal's signature at the
/// bunker; the two wraps are asked together, so the answer costs two
/// round trips, not four (they were asked one after the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_answer_asks_the_bunker_for_its_two_gift_wraps_at_once() {
    let (stage, signer) = far_signing_stage().await;
    let scene = stage.start().await;
    let watch = signer.watch().await;

    let asked = std::time::Instant::now();
    let dm_text = "both wraps at once, please";
    scene.owner.dm(&scene.bot, dm_text).await;
    scene.owner.dm_containing(&scene.bot, dm_text).await;
    let took = asked.elapsed();
    // The DM's unwrap and its seal's, then the answer's two wraps.
    let seen = watch.settled(6).await;
    println!(
        "DM through a bunker {} ms away: answered in {} ms; {} requests, at most {} out at once, at most {} encryptions (gift wraps) out at once",
        FAR.as_millis(),
        took.as_millis(),
        seen.sent,
        seen.most_out,
        seen.most_encrypting
    );
    assert!(
        seen.most_encrypting >= 2,
        "the two gift wraps were asked one after the other: {seen:?}"
    );
}

/// Issue 39: at most four requests are out to the bunker at once, however
/// many answers are due together (a phone's signer app is not flooded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_answers_keeps_at_most_four_requests_out_at_the_bunker() {
    const MENTIONS: usize = 8;
    const DMS: usize = 4;
    let (stage, signer) = far_signing_stage().await;
    let scene = stage.start().await;
    let watch = signer.watch().await;

    let (scene, bot) = (&scene, scene.bot);
    let mentions = (0..MENTIONS)
        .map(|at| async move { scene.mention(&format!("burst-{at}"), "answer in the burst").await });
    let dms = (0..DMS).map(|at| async move { scene.owner.dm(&bot, &format!("burst DM {at}")).await });
    let (mentions, _) = tokio::join!(
        futures_util::future::join_all(mentions),
        futures_util::future::join_all(dms)
    );
    let tally = scene.tally("burst through a far bunker", &mentions).await;
    for at in 0..DMS {
        scene
            .owner
            .dm_containing(&scene.bot, &format!("burst DM {at}"))
            .await;
    }
    // A signature per mention's answer; per DM its two unwraps, and two
    // wraps for its answer (DMs said together may get one answer).
    let seen = watch.settled(MENTIONS + 2 * DMS + 4).await;
    println!(
        "burst of {MENTIONS} mentions and {DMS} DMs through a far bunker: {tally}; {} requests, at most {} out at once",
        seen.sent, seen.most_out
    );
    assert_exactly_once(tally);
    assert!(seen.most_out <= 4, "{seen:?}");
    assert!(seen.most_out >= 2, "the burst's requests went together: {seen:?}");
}
