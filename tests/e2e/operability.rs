//! Operability: the demo, JSON logs with turn fields, /metrics and /healthz,
//! `check` and `keygen`, and what systemd hears (`Type=notify`).

use std::process::Command;

use nostr_sdk::prelude::{Alphabet, Filter, SingleLetterTag};

use crate::support::*;

#[test]
fn demo_runs_to_completion_and_shows_the_steer_a_follow_up_without_a_mention_progress_and_a_delegated_task() {
    let output = Command::new(bridge_binary())
        .arg("demo")
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("it echoes its whole prompt as its answer"),
        "the demo says the scripted agent echoes its prompt: {stdout}"
    );
    assert!(
        stdout.contains("steered into the live turn (native steer"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stop reason end_turn, steer path native"),
        "{stdout}"
    );
    assert!(
        stdout.contains("│ steer: "),
        "the reply shows the folded steer: {stdout}"
    );
    assert_eq!(
        stdout.matches("bridge → prompting the agent").count(),
        4,
        "one turn for both mentions, one for the follow-up, one for the agent's hands, one for the task it delegates (a task is a turn): {stdout}"
    );
    let (_, follow_up) = stdout
        .split_once("owner  → (a reply in the bot's thread, no mention)")
        .expect("the demo follows up without a mention");
    assert!(
        follow_up.contains("bridge ✓ mention accepted")
            && follow_up.contains("│ > Thanks! Keep them under ten lines, please.")
            && follow_up.contains("the reply in the bot's thread, without a mention, was answered there"),
        "the follow-up is heard and answered: {follow_up}"
    );
    let (_, hands) = follow_up
        .split_once("[mcp-delegate=")
        .expect("the demo asks for work with the bridge's tools");
    for step in [
        "posted progress in the thread (the bridge's post_message tool)",
        "│ On it: checking the build first.",
        "delegated task t1 to a fresh session",
        "task t1 ended: done",
        "task t1's result steered into the delegating agent's live turn",
        "│ [acp-bridge] Result of task t1, which you delegated",
        "│ > > Count the open issues.",
        "the task it delegated ran on a",
    ] {
        assert!(hands.contains(step), "{step:?} missing from: {hands}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_turn_fields_and_metrics_count_the_turn() {
    let scene = Scene::builder().metrics().start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene.mention("room", "measure me").await;
    scene.reply_to(&mention).await;
    let finished = log
        .wait(mark, Line::new("turn finished").in_turn(&mention.id))
        .await;

    assert!(!log.lines(log.start()).is_empty());
    for line in log.text().lines().filter(|line| !line.trim().is_empty()) {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
    }
    let span = &finished["span"];
    let group_on_this_relay = format!("group:{}'room", scene.relay.url());
    assert_eq!(span["conversation"], group_on_this_relay.as_str());
    assert_eq!(span["event_id"], mention.id.to_hex());
    assert!(
        span["author"]
            .as_str()
            .is_some_and(|author| author.starts_with("npub1")),
        "{finished}"
    );
    assert!(
        span["session"]
            .as_str()
            .is_some_and(|session| !session.is_empty()),
        "{finished}"
    );
    assert!(
        span["run_id"].as_str().is_some_and(|run| run.starts_with("run_")),
        "{finished}"
    );
    assert!(span["turn_id"].as_u64().is_some(), "{finished}");
    for field in [
        "outcome",
        "stop_reason",
        "steer_path",
        "queue_wait_ms",
        "agent_ms",
    ] {
        assert!(!finished[field].is_null(), "`{field}` missing: {finished}");
    }
    let secret = scene.bridge.spec.bot.secret_key().to_secret_hex();
    assert!(!log.text().contains(&secret), "the key never appears in logs");

    let port = scene.metrics_port();
    let metrics = http_get(port, "/metrics").await;
    assert!(
        metrics.contains("acp_bridge_events_accepted_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("acp_bridge_turns_total{outcome=\"answered\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("acp_bridge_mention_to_reply_seconds_bucket"),
        "{metrics}"
    );
    assert!(
        metrics.contains("acp_bridge_agents_alive{profile=\"default\"} 1"),
        "{metrics}"
    );
    let health = http_get(port, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
}

#[test]
fn check_fails_clearly_on_a_missing_agent_binary() {
    let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let output = Command::new(bridge_binary())
        .args([
            "check",
            "--relay",
            "embedded",
            "--owner",
            &owner,
            "--agent-command",
            "/nonexistent/agent-binary",
        ])
        .env_clear()
        .env("ACP_BRIDGE_SECRET_KEY", &secret)
        .output()
        .expect("run check");
    // The daemon's own rules refuse it before any check runs: one line.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let refusal: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("/nonexistent/agent-binary"))
        .collect();
    assert_eq!(refusal.len(), 1, "{stderr}");
    assert!(
        refusal[0].contains("--agent-command: `/nonexistent/agent-binary` does not exist"),
        "{stderr}"
    );
    assert!(!stderr.contains(&secret));
}

#[test]
fn check_passes_with_the_built_in_agent() {
    let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let output = check_with_scripted_agent("embedded", &owner, Some(&secret), &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("agent: ok"), "{stdout}");
    assert!(stdout.contains("auth: the agent offers no method"), "{stdout}");
    assert!(stdout.contains("agent: ok, a session opens"), "{stdout}");
    assert!(stdout.contains("verdict: ready"), "{stdout}");
}

/// `check` on a relay that refuses the connection says so, and says that
/// what the relays hold of the bot's identity is not known: before, it
/// waited out a subscription on no relay (a library's warning on stderr)
/// and reported "the relays hold nothing", which sends an operator looking
/// for a missing profile.
#[test]
fn check_on_an_unreachable_relay_says_so_and_does_not_guess_what_it_holds() {
    let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("ws://{}", closed.local_addr().expect("address"));
    drop(closed);
    let output = check_with_scripted_agent(&url, &owner, Some(&secret), &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("relay {url}: FAILED to connect")),
        "{stdout}"
    );
    let identity: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("identity "))
        .collect();
    assert_eq!(identity.len(), 3, "{stdout}");
    for line in identity {
        assert!(line.contains("not read, no relay could be reached"), "{line}");
        assert!(!line.contains("hold nothing"), "{line}");
    }
    assert!(
        !stderr.contains("nostr_relay_pool"),
        "no library's log line:\n{stderr}"
    );
    assert!(stdout.contains("verdict: NOT ready"), "{stdout}");
}

/// An agent that fails to start says why on its stderr (here clap's
/// refusal of a flag the scripted agent does not know): `check` shows it.
#[test]
fn check_shows_the_agents_own_error_when_it_fails_to_start() {
    let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let output = check_with_agent_args("embedded", &owner, Some(&secret), "scripted-agent --bogus", &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("agent: FAILED"), "{stdout}");
    assert!(
        stdout.contains("  | error: unexpected argument '--bogus' found"),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: NOT ready"), "{stdout}");
}

/// `check` on a real relay: values in the flags' own spelling, and the
/// verdict is its last word: the agent it started is stopped before, with
/// no warning about a kill it asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_speaks_the_flags_language_and_ends_with_its_verdict() {
    let relay = TestRelay::start().await;
    let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let url = relay.url();
    let run = move || check_with_scripted_agent(&url, &owner, Some(&secret), &[]);
    // The relay runs on this test's runtime: the check blocks elsewhere.
    let output = tokio::task::spawn_blocking(run).await.expect("check ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("respond-to owner-only, multiple-event-handling steer, dedup queue"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("OwnerOnly") && !stdout.contains("Steer"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("verdict: ready to run"), "{stdout}");
    assert!(!stderr.contains("killed by the client"), "{stderr}");
}

/// A key file other users can read makes `check` say not ready, with the
/// remedy; the daemon itself only warns (docs/operations.md).
#[test]
fn check_is_not_ready_with_a_key_file_others_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let keys = nostr_sdk::prelude::Keys::generate();
    let key_file = temp_dir("open-key").join("bot.nsec");
    std::fs::write(&key_file, keys.secret_key().to_secret_hex()).expect("key file");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
    let path = key_file.to_str().expect("utf-8 path");
    let output = check_with_scripted_agent("embedded", &owner, None, &["--secret-key-file", path]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("hint: chmod 600 {path}")), "{stdout}");
    assert!(stdout.contains("verdict: NOT ready"), "{stdout}");
}

#[test]
fn keygen_writes_a_0600_key_file_and_prints_the_npub() {
    use std::os::unix::fs::PermissionsExt;
    let path = temp_dir("keygen").join("bot.nsec");
    let output = Command::new(bridge_binary())
        .args(["keygen", "--out"])
        .arg(&path)
        .output()
        .expect("keygen");
    assert!(output.status.success());
    let npub = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(npub.starts_with("npub1"), "{npub}");
    let mode = std::fs::metadata(&path).expect("written").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let nsec = std::fs::read_to_string(&path).expect("read");
    assert!(nsec.starts_with("nsec1"));
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains(nsec.trim()),
        "the secret is not printed"
    );
}

/// `--worker-threads 3`: the daemon's runtime has three worker threads
/// (tokio names them `tokio-rt-worker`), and it
/// answers. Three is not the default (one per CPU) on the machines here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_sets_the_runtime_size() {
    let scene = Scene::builder().flags(&["--worker-threads", "3"]).start().await;
    let mention = scene.mention("room", "three threads").await;
    scene.reply_to(&mention).await;
    assert_eq!(runtime_workers(scene.bridge.pid()), 3);
}

/// The threads of `pid` named as tokio names its runtime's workers.
fn runtime_workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the daemon's threads")
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim() == "tokio-rt-worker")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_once_subscribed_and_stopping_at_the_stop() {
    let notify = NotifySocket::bind();
    let mut scene = Scene::builder().env(&[notify.env()]).start().await;
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "clean exit: {status}");
    assert_eq!(notify.received(), ["READY=1", "STOPPING=1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_stopped_before_a_relay_took_its_subscription_is_never_reported_ready() {
    let notify = NotifySocket::bind();
    let stage = Scene::builder()
        .env(&[notify.env()])
        .stage_on(PickyRelay::start().await)
        .await;
    // Connected, but the relay never answers the REQs for the bot's
    // mentions and DMs (no stored events, no EOSE).
    let bot = stage.bot.to_hex();
    stage.relay.hold_queries(move |filter: &Filter| {
        let p = SingleLetterTag::lowercase(Alphabet::P);
        filter
            .generic_tags
            .get(&p)
            .is_some_and(|keys| keys.contains(&bot))
    });
    let mut scene = stage.launch();
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new("subscribed to mentions")).await;

    let status = scene.bridge.interrupt(PATIENCE).await;
    assert!(status.success(), "clean exit: {status}");
    let log = &scene.bridge.log;
    let interrupted = log.matching(log.start(), Line::new("SIGINT received: shutting down"));
    assert_eq!(interrupted.len(), 1, "{}", log.tail(30));
    let ready = log.matching(log.start(), Line::new("ready: subscribed to mentions"));
    assert!(ready.is_empty(), "{}", log.tail(30));
    assert_eq!(notify.received(), ["STOPPING=1"]);
}
