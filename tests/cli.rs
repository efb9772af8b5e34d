//! The command line: bad values stop start-up with one clear line naming
//! the flag, before any connection is made, and never echo a secret.

mod support;

use std::process::Command;

use nostr_sdk::prelude::*;
use support::bridge_binary;

fn start_with(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let output = Command::new(bridge_binary())
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run acp-bridge");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
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
