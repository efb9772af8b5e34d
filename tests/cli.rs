//! The command line: bad values stop start-up with one clear line naming
//! the flag, before any connection is made, and never echo a secret.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::*;
use support::{bridge_binary, check_with_agent_args, temp_dir};

/// How long a refusal may take: flags are checked before any connection.
const REFUSAL_PATIENCE: Duration = Duration::from_secs(20);
/// How often the test looks whether the daemon exited.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// Starts the daemon with `args` and `env` (in a state dir of its own) and
/// waits for it to exit: its exit code and stderr. A daemon that is still
/// running after [`REFUSAL_PATIENCE`] took flags it should have refused:
/// it is killed and the test fails.
fn start_with(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let dir = temp_dir("cli");
    let stderr_path = dir.join("stderr");
    let mut child = Command::new(bridge_binary())
        .args(args)
        .env_clear()
        .env("ACP_BRIDGE_STATE_DIR", dir.join("state"))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("run acp-bridge");
    let deadline = Instant::now() + REFUSAL_PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for acp-bridge") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("{args:?}: still running after {REFUSAL_PATIENCE:?} instead of refusing: {stderr}");
        }
        std::thread::sleep(EXIT_POLL);
    };
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    (status.code().unwrap_or(-1), stderr)
}

/// The lines of `stderr` that mention `needle`.
fn lines_naming<'a>(stderr: &'a str, needle: &str) -> Vec<&'a str> {
    stderr.lines().filter(|line| line.contains(needle)).collect()
}

#[test]
fn bad_flags_fail_with_one_line_naming_the_flag() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let key_env = [("ACP_BRIDGE_SECRET_KEY", secret.as_str())];
    /// Flags, environment, and the flag the refusal must name.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 6] = [
        (
            &["--relay", "ws://127.0.0.1:1", "--owner", "npub1broken"],
            &key_env,
            "--owner",
        ),
        (
            &["--relay", "ws://127.0.0.1:1", "--owner", &owner],
            &[("ACP_BRIDGE_SECRET_KEY", "nsec1notakey")],
            "--secret-key-file",
        ),
        (
            &[
                "--relay",
                "ws://127.0.0.1:1",
                "--owner",
                &owner,
                "--secret-key-file",
                "/nonexistent/bot.key",
            ],
            &[],
            "--secret-key-file",
        ),
        (
            &[
                "--relay",
                "ws://127.0.0.1:1",
                "--owner",
                &owner,
                "--respond-to",
                "allowlist",
            ],
            &key_env,
            "--allowlist",
        ),
        (
            &[
                "--relay",
                "ws://127.0.0.1:1",
                "--owner",
                &owner,
                "--multiple-event-handling",
                "steer",
                "--dedup",
                "drop",
            ],
            &key_env,
            "--dedup",
        ),
        (
            &[
                "--relay",
                "ws://127.0.0.1:1",
                "--owner",
                &owner,
                "--respond-to",
                "everybody",
            ],
            &key_env,
            "--respond-to",
        ),
    ];
    for (args, env, flag) in cases {
        let (code, stderr) = start_with(args, env);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
        assert!(lines.iter().any(|line| line.contains(flag)), "{args:?}: {stderr}");
        assert!(!stderr.contains(&secret), "the key never appears");
        assert!(!stderr.contains("nsec1notakey"), "the bad key never appears");
    }
}

#[test]
fn shard_auto_refuses_a_hostname_without_an_ordinal_in_range() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let args = [
        "--relay",
        "ws://127.0.0.1:1",
        "--owner",
        &owner,
        "--shard",
        "auto/3",
    ];
    for (hostname, problem) in [("bot", "has none"), ("bot-7", "out of range for 3 shards")] {
        let env = [("ACP_BRIDGE_SECRET_KEY", secret.as_str()), ("HOSTNAME", hostname)];
        let (code, stderr) = start_with(&args, &env);
        assert_eq!(code, 2, "{hostname}: {stderr}");
        let refusal: Vec<&str> = stderr.lines().filter(|line| line.contains("--shard")).collect();
        assert_eq!(refusal.len(), 1, "one line: {stderr}");
        assert!(refusal[0].contains(&format!("`{hostname}`")), "{stderr}");
        assert!(refusal[0].contains(problem), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_auto_takes_the_index_from_the_hostnames_ordinal() {
    use support::{Line, Scene};
    let scene = Scene::builder()
        .flags(&["--shard", "auto/3"])
        .env(&[("HOSTNAME", "bot-2")])
        .start()
        .await;
    let log = &scene.bridge.log;
    let sharded = Line::new("a shard of the bot: answering only the conversations that hash to this index");
    log.wait(log.start(), sharded.with("shard", "2/3")).await;
}

/// `--agent-args` takes one value: the daemon's own flags after it stay
/// the daemon's, so a bad one is refused at start (not handed to the agent,
/// which then failed every turn of a daemon that said it was ready).
#[test]
fn agent_args_cannot_swallow_the_daemons_flags() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let args = [
        "--relay",
        "ws://127.0.0.1:1",
        "--owner",
        &owner,
        "--agent-command",
        bridge_binary(),
        "--agent-args",
        "scripted-agent",
        "--idle-timeout",
        "5x",
    ];
    let (code, stderr) = start_with(&args, &[("ACP_BRIDGE_SECRET_KEY", &secret)]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(lines_naming(&stderr, "--idle-timeout").len(), 1, "{stderr}");
}

/// An unbalanced quote in the agent's arguments stops start-up with one
/// line naming the flag, from the command line and from the environment.
#[test]
fn agent_args_with_an_unbalanced_quote_are_refused() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let base = ["--relay", "ws://127.0.0.1:1", "--owner", &owner];
    let unbalanced = "scripted-agent --name 'my bot";
    let key_env = ("ACP_BRIDGE_SECRET_KEY", secret.as_str());
    let from_flag = start_with(&[&base[..], &["--agent-args", unbalanced]].concat(), &[key_env]);
    let from_env = start_with(&base, &[key_env, ("ACP_BRIDGE_AGENT_ARGS", unbalanced)]);
    for (code, stderr) in [from_flag, from_env] {
        assert_eq!(code, 2, "{stderr}");
        let refusal = lines_naming(&stderr, "--agent-args");
        assert_eq!(refusal.len(), 1, "{stderr}");
        assert!(refusal[0].contains("unbalanced quote"), "{stderr}");
    }
}

/// The agent's arguments as one string, split as a shell splits words: the
/// scripted agent gets `--rounds 3` and answers.
#[test]
fn agent_args_are_one_string_split_like_a_shell() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let output = check_with_agent_args(
        "embedded",
        &owner,
        Some(&secret),
        "scripted-agent --rounds 3 --name 'a bot with spaces'",
        &[],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("as a bot with spaces"), "{stdout}");
    assert!(stdout.contains("verdict: ready"), "{stdout}");
}

/// A missing agent program stops start-up with one line that names it and
/// says what to do, before any relay is contacted (it was found only at
/// the first mention, and then reported as crashing agents).
#[test]
fn a_missing_agent_program_stops_start_up_in_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let key_file = temp_dir("cli-key").join("bot.nsec");
    std::fs::write(&key_file, Keys::generate().secret_key().to_secret_hex()).expect("key file");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let owner = Keys::generate().public_key().to_hex();
    let args = [
        "--relay",
        "ws://127.0.0.1:1",
        "--owner",
        &owner,
        "--secret-key-file",
        key_file.to_str().expect("utf-8 path"),
        "--agent-command",
        "/nonexistent/agent",
    ];
    let (code, stderr) = start_with(&args, &[]);
    assert_ne!(code, 0, "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
    assert_eq!(
        lines,
        [
            "acp-bridge: --agent-command: `/nonexistent/agent` does not exist: install the agent, or point --agent-command at it"
        ],
        "{stderr}"
    );
}
