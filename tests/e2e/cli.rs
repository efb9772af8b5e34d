//! The command line: bad values stop start-up with one clear line naming
//! the flag, before any connection is made, and never echo a secret.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;
use nostr_sdk::prelude::*;

use crate::support::{bridge_binary, check_with_agent_args, temp_dir};

/// How long a refusal may take: flags are checked before any connection.
const REFUSAL_PATIENCE: Duration = Duration::from_secs(20);

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
    // The exit is waited for on a thread of its own, so the test wakes
    // when it comes (or at the patience's end), not on a poll.
    let pid = child.id();
    let (exited_tx, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || exited_tx.send(child.wait()));
    let status = match exited.recv_timeout(REFUSAL_PATIENCE) {
        Ok(status) => status.expect("wait for acp-bridge"),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("{args:?}: still running after {REFUSAL_PATIENCE:?} instead of refusing: {stderr}");
        }
    };
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    (status.code().unwrap_or(-1), stderr)
}

/// [`start_with`] a daemon that would run (a fresh key and owner, the
/// scripted agent, a relay it never reaches) but for `flags`.
fn start_scripted(flags: &[&str]) -> (i32, String) {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let owner = Keys::generate().public_key().to_hex();
    let daemon = [
        "--relay",
        "ws://127.0.0.1:1",
        "--owner",
        &owner,
        "--agent-command",
        bridge_binary(),
        "--agent-args",
        "scripted-agent",
    ];
    start_with(
        &[&daemon[..], flags].concat(),
        &[("ACP_BRIDGE_SECRET_KEY", &secret)],
    )
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
    use crate::support::{Line, Scene};
    let scene = Scene::builder()
        .flags(&["--shard", "auto/3"])
        .env(&[("HOSTNAME", "bot-2")])
        .start()
        .await;
    let log = &scene.bridge.log;
    let sharded = Line::new("a shard of the bot: answering only the conversations that hash to this index");
    log.wait(log.start(), sharded.with("shard", "2/3")).await;
}

/// A bad value of every flag of `acp-bridge run` (passed as `--flag=value`).
/// A new flag fails `every_flag_refuses_a_bad_value_in_one_line_naming_it`
/// until it has a case here or is listed in [`FREE_FORM`].
const BAD_VALUES: &[(&str, &str)] = &[
    ("--config", "/nonexistent/acp-bridge.toml"),
    ("--relay", "notaurl"),
    ("--secret-key-file", "/nonexistent/bot.nsec"),
    ("--signer", "bunker://nope"),
    ("--signer-file", "/nonexistent/bunker.uri"),
    ("--signer-timeout", "30"),
    ("--owner", "npub1broken"),
    ("--respond-to", "everybody"),
    ("--allowlist", "npub1broken"),
    ("--budget-bot-per-day", "5 dollars"),
    ("--budget-bot-per-month", "5"),
    ("--budget-author-per-day", "1.5 turns"),
    ("--budget-author-per-month", "1 usd"),
    ("--budget-stranger-per-day", "2 turn"),
    ("--budget-stranger-per-month", "-1 USD"),
    ("--budget-conversation-per-day", "5 EURO"),
    ("--budget-conversation-per-month", "k tokens"),
    ("--budget-turn-cap", "3 turns"),
    ("--budget-warn-at", "150"),
    ("--kinds", "4"),
    ("--state-dir", "/dev/null"),
    ("--reply-mode", "sometimes"),
    ("--reply-content", "most"),
    ("--no-reactions", "maybe"),
    ("--marmot", "maybe"),
    ("--marmot-key-file", "/nonexistent/marmot.key"),
    ("--follow-threads", "always"),
    ("--max-content-bytes", "0"),
    ("--max-reply-bytes", "0"),
    ("--progress-after", "20"),
    ("--progress-every", "0"),
    ("--activity-every", "5x"),
    ("--work-summary", "long"),
    ("--rate-limit-burst", "0"),
    ("--rate-limit-refill", "6"),
    ("--max-bot-hops", "-1"),
    ("--max-queued", "0"),
    ("--max-parked-bytes", "0"),
    ("--relay-buffer", "0"),
    ("--max-reply-chain", "many"),
    ("--agent-command", "/nonexistent/agent"),
    ("--agent-args", "scripted-agent 'unbalanced"),
    ("--agent-user", "no-such-user-acp"),
    ("--agent-uids", "61009-61000"),
    ("--agents", "0"),
    ("--turns-per-agent", "0"),
    ("--cwd", "/nonexistent/work"),
    ("--workspace", "per-user"),
    ("--workspace-repo", "/nonexistent/repo"),
    ("--workspace-extra-dir", "/nonexistent/docs"),
    ("--idle-timeout", "5"),
    ("--max-turn-duration", "5x"),
    ("--cancel-timeout", "0s"),
    ("--multiple-event-handling", "sometimes"),
    ("--dedup", "maybe"),
    ("--session-policy", "global"),
    ("--permission-policy", "deny-some"),
    ("--permission-timeout", "25h"),
    ("--mcp", "sometimes"),
    ("--mcp-servers", "/nonexistent/mcp-servers.json"),
    ("--wait-notice-after", "5"),
    ("--thread-context", "101"),
    ("--thread-context-from", "everyone"),
    ("--thread-context-bytes", "1"),
    ("--max-image-bytes", "0"),
    ("--max-audio-bytes", "0"),
    ("--media-fetch-timeout", "121s"),
    ("--fetch-private-addresses", "maybe"),
    ("--allow-insecure-relays", "maybe"),
    ("--allow-private-relays", "maybe"),
    ("--blossom", "ftp://blossom.example.com"),
    ("--max-file-bytes", "0"),
    ("--shutdown-grace", "30"),
    ("--retention", "7"),
    ("--metrics-addr", "localhost"),
    ("--shard", "3/2"),
    ("--agent-start-timeout", "120"),
    ("--session-idle", "soon"),
    ("--max-live-sessions", "-1"),
    ("--profile-picture", "helper.png"),
    ("--dm-relays", "http://relay.example.com"),
    ("--directory-relays", "notaurl"),
    ("--group", "pizza"),
    ("--other-groups", "some"),
    ("--worker-threads", "0"),
    ("--log-format", "xml"),
    ("--log-level", "loud"),
];

/// Flags whose every value is taken as it is: free text, or names checked
/// only when used (an agent's auth method against its `initialize`).
const FREE_FORM: &[&str] = &[
    "--agent-env",
    "--agent-auth-method",
    "--profile-name",
    "--profile-about",
    "--group-invite-code",
];

/// A configuration that starts, written to `dir`: every flag but the one
/// under test (and, for a remote signer, but the key file it replaces).
fn valid_flags_except(dir: &Path, tested: &str) -> Vec<String> {
    let key_file = dir.join("bot.nsec");
    std::fs::write(&key_file, Keys::generate().secret_key().to_secret_hex()).expect("key file");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (cwd, state_dir) = (dir.join("work"), dir.join("state"));
    std::fs::create_dir_all(&cwd).expect("cwd");
    let owner = Keys::generate().public_key().to_hex();
    let remote_signer = tested == "--signer" || tested == "--signer-file";
    let flags: [(&str, String); 6] = [
        ("--relay", "ws://127.0.0.1:1".to_owned()),
        ("--owner", owner),
        ("--secret-key-file", path(&key_file)),
        ("--cwd", path(&cwd)),
        ("--state-dir", path(&state_dir)),
        ("--agent-command", bridge_binary().to_owned()),
    ];
    flags
        .into_iter()
        .filter(|(flag, _)| *flag != tested && !(remote_signer && *flag == "--secret-key-file"))
        .map(|(flag, value)| format!("{flag}={value}"))
        .collect()
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

/// Runs `acp-bridge run` with `args` and only `env` (and PATH); returns
/// its exit code and its non-empty stderr lines.
fn refused(args: &[String], env: &[(&str, &str)]) -> (i32, Vec<String>) {
    let output = Command::new(bridge_binary())
        .arg("run")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("ACP_BRIDGE_AGENT_ARGS", "scripted-agent")
        .envs(env.iter().copied())
        .output()
        .expect("run acp-bridge");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines = stderr
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect();
    (output.status.code().unwrap_or(-1), lines)
}

/// Every flag of `acp-bridge run`, as clap declares them (the daemon's
/// groups and the logging flags), long names with their `ACP_BRIDGE_*`.
fn declared_flags() -> Vec<(String, Option<String>)> {
    declared_args()
        .iter()
        .filter_map(|arg| {
            let long = format!("--{}", arg.get_long()?);
            let env = arg.get_env().map(|env| env.to_string_lossy().into_owned());
            Some((long, env))
        })
        .collect()
}

fn declared_args() -> Vec<clap::Arg> {
    let command =
        acp_bridge::LogArgs::augment_args(acp_bridge::RunArgs::augment_args(clap::Command::new("run")));
    command.get_arguments().cloned().collect()
}

/// The tuning flags: declared `hide_short_help`, left off the page and
/// listed by `--help-long` only (see `cli::help`).
fn tuning_flags() -> BTreeSet<String> {
    declared_args()
        .iter()
        .filter(|arg| arg.is_hide_short_help_set())
        .filter_map(|arg| Some(format!("--{}", arg.get_long()?)))
        .collect()
}

/// The flags `acp-bridge run --help` lists: what an operator sees.
fn listed_flags() -> BTreeSet<String> {
    let output = Command::new(bridge_binary())
        .args(["run", "--help"])
        .output()
        .expect("run acp-bridge");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let option = line.trim_start();
            let option = option
                .strip_prefix("-h, ")
                .or(option.strip_prefix("-V, "))
                .unwrap_or(option);
            option.starts_with("--").then(|| {
                option
                    .split(|c: char| c.is_whitespace() || c == '=' || c == '<')
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        })
        .filter(|flag| flag != "--help" && flag != "--help-long" && flag != "--version")
        .collect()
}

#[test]
fn every_flag_refuses_a_bad_value_in_one_line_naming_it() {
    let declared = declared_flags();
    let names: BTreeSet<String> = declared.iter().map(|(flag, _)| flag.clone()).collect();
    let tuning = tuning_flags();
    assert_eq!(
        names.difference(&tuning).cloned().collect::<BTreeSet<_>>(),
        listed_flags(),
        "`run --help` lists the flags clap declares in RunArgs and LogArgs, tuning flags aside"
    );
    let covered: BTreeSet<&str> = BAD_VALUES
        .iter()
        .map(|(flag, _)| *flag)
        .chain(FREE_FORM.iter().copied())
        .collect();
    let uncovered: Vec<&String> = names
        .iter()
        .filter(|flag| !covered.contains(flag.as_str()))
        .collect();
    assert!(
        uncovered.is_empty(),
        "flags without a bad-value case: give each one in BAD_VALUES, or list it in FREE_FORM: {uncovered:?}"
    );
    let unknown: Vec<&&str> = covered.iter().filter(|flag| !names.contains(**flag)).collect();
    assert!(
        unknown.is_empty(),
        "cases of flags that no longer exist: {unknown:?}"
    );

    let dir = temp_dir("every-flag");
    let mut problems = Vec::new();
    for (flag, value) in BAD_VALUES {
        let mut args = valid_flags_except(&dir, flag);
        args.push(format!("{flag}={value}"));
        let (code, lines) = refused(&args, &[]);
        let one_naming_it = lines.len() == 1 && lines[0].contains(flag);
        if code != 2 || !one_naming_it {
            problems.push(format!("{flag}={value}: exit {code}, stderr {lines:#?}"));
        }
        println!("{flag}={value}: {}", lines.join(" | "));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_bad_value_in_the_environment_is_refused_in_one_line_naming_flag_and_variable() {
    let dir = temp_dir("bad-env");
    let args = valid_flags_except(&dir, "");
    for (variable, value, flag) in [
        ("ACP_BRIDGE_IDLE_TIMEOUT", "5", "--idle-timeout"),
        ("ACP_BRIDGE_LOG_LEVEL", "acp_bridge=loud", "--log-level"),
        ("ACP_BRIDGE_RESPOND_TO", "everybody", "--respond-to"),
        ("ACP_BRIDGE_NO_REACTIONS", "maybe", "--no-reactions"),
        ("ACP_BRIDGE_WORKER_THREADS", "0", "--worker-threads"),
    ] {
        let (code, lines) = refused(&args, &[(variable, value)]);
        assert_eq!(code, 2, "{variable}={value}: {lines:?}");
        assert_eq!(lines.len(), 1, "{variable}={value}: one line: {lines:#?}");
        assert!(lines[0].contains(flag), "{variable}={value}: {}", lines[0]);
        assert!(lines[0].contains(variable), "{variable}={value}: {}", lines[0]);
    }
    // Values of flags the daemon checks itself (not clap) name the flag.
    let (code, lines) = refused(&args, &[("ACP_BRIDGE_KINDS", "4")]);
    assert_eq!((code, lines.len()), (2, 1), "{lines:?}");
    assert!(lines[0].contains("--kinds"), "{}", lines[0]);
}

#[test]
fn a_bad_rust_log_is_refused_not_taken_for_a_target() {
    let dir = temp_dir("bad-rust-log");
    let args = valid_flags_except(&dir, "");
    let (code, lines) = refused(&args, &[("RUST_LOG", "loud")]);
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines,
        [
            "acp-bridge: RUST_LOG `loud` is not a level: use off, error, warn, info, debug or trace, or target=level (e.g. acp_bridge=debug); fix it, or unset it to use --log-level"
        ]
    );
}

#[test]
fn refusals_say_what_to_do() {
    let dir = temp_dir("remedies");
    let with = |flag: &str, value: &str| {
        let mut args = valid_flags_except(&dir, flag);
        args.push(format!("{flag}={value}"));
        let (code, lines) = refused(&args, &[]);
        assert_eq!((code, lines.len()), (2, 1), "{flag}={value}: {lines:?}");
        lines[0].clone()
    };
    assert_eq!(
        with("--secret-key-file", "nope.nsec"),
        "acp-bridge: --secret-key-file: `nope.nsec` does not exist: create a key there with `acp-bridge keygen --out nope.nsec`, or fix the path"
    );
    assert_eq!(
        with("--relay", "notaurl"),
        "acp-bridge: --relay: `notaurl` is not a relay URL (relative url without a base): use a ws:// or wss:// URL, e.g. wss://relay.example.com"
    );
    assert!(
        with("--relay", "https://relay.example.com")
            .ends_with("(unsupported scheme): use a ws:// or wss:// URL, e.g. wss://relay.example.com"),
    );
    assert_eq!(
        with("--idle-timeout", "5"),
        "error: invalid value '5' for '--idle-timeout <IDLE_TIMEOUT>': `5` has no unit: add one, e.g. 5s (ms, s, m, h or d)"
    );
    assert_eq!(
        with("--owner", "npub1broken"),
        "acp-bridge: --owner: `npub1broken` is not a valid public key: give an npub1… or 64 hex characters"
    );
    assert!(
        with("--cwd", "/nonexistent/work").ends_with("name an existing directory for the agents to work in")
    );
    let garbage = dir.join("garbage.nsec");
    std::fs::write(&garbage, "nsec1garbage").expect("write");
    let refusal = with("--secret-key-file", &path(&garbage));
    assert!(
        refusal.contains("or make a new key file with `acp-bridge keygen --out PATH`"),
        "{refusal}"
    );
    assert!(
        !refusal.contains("nsec1garbage"),
        "the file's content never shows: {refusal}"
    );
    assert_eq!(
        with("--respond-to", "everybody"),
        "error: invalid value 'everybody' for '--respond-to <RESPOND_TO>' [possible values: owner-only, allowlist, anyone, nobody]"
    );
}

/// The warnings of where a secret came from (the environment, a file
/// others can read) belong to a configuration that runs: a refusal is the
/// only line.
#[test]
fn a_refusal_is_never_preceded_by_a_warning() {
    let dir = temp_dir("no-warning-first");
    let open_key = dir.join("open.nsec");
    std::fs::write(&open_key, Keys::generate().secret_key().to_secret_hex()).expect("key file");
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let secret = Keys::generate().secret_key().to_secret_hex();
    let mut from_env = valid_flags_except(&dir, "--secret-key-file");
    from_env.push("--kinds=4".to_owned());
    let mut open_file = valid_flags_except(&dir, "--secret-key-file");
    open_file.push(format!("--secret-key-file={}", path(&open_key)));
    open_file.push("--kinds=4".to_owned());
    for (args, env) in [
        (from_env, vec![("ACP_BRIDGE_SECRET_KEY", secret.as_str())]),
        (open_file, vec![]),
    ] {
        let (code, lines) = refused(&args, &env);
        assert_eq!(code, 2, "{lines:?}");
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].starts_with("acp-bridge: --kinds:"), "{}", lines[0]);
    }
}

#[test]
fn clap_s_own_refusals_are_one_line_too() {
    for (args, line) in [
        (
            &["keygen"][..],
            "error: the following required arguments were not provided: --out <PATH>",
        ),
        (
            &["--relya", "x"][..],
            "error: unexpected argument '--relya' found; tip: a similar argument exists: '--relay'",
        ),
        (
            &["--agents", "1", "--agents", "2"][..],
            "error: the argument '--agents <AGENTS>' cannot be used multiple times",
        ),
    ] {
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        let output = Command::new(bridge_binary())
            .args(&args)
            .env_clear()
            .output()
            .expect("run acp-bridge");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("{line}\n"),
            "{args:?}"
        );
    }
}

#[test]
fn help_and_version_are_clap_s_own() {
    let output = Command::new(bridge_binary())
        .arg("--version")
        .output()
        .expect("run");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("acp-bridge "));
    let output = Command::new(bridge_binary())
        .args(["run", "--help"])
        .output()
        .expect("run");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains("Usage:") && help.contains("--idle-timeout"),
        "{help}"
    );
}

/// The most lines `acp-bridge run --help` and `acp-bridge --help` may take:
/// a page an operator reads (issue 36), not the reference.
const HELP_MAX_LINES: usize = 120;
/// The headings of `run --help`: the config file's tables.
const HELP_HEADINGS: [&str; 13] = [
    "Relays",
    "Signer",
    "Identity",
    "Gate",
    "Groups",
    "Agent",
    "Turns",
    "MCP",
    "Replies",
    "Budget",
    "State",
    "Telemetry",
    "Daemon",
];

fn help_of(args: &[&str]) -> String {
    let output = Command::new(bridge_binary()).args(args).output().expect("run");
    assert!(output.status.success(), "{args:?}");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// `run --help` is a page: each flag on one line with its short help,
/// under the heading of its table, the page at most [`HELP_MAX_LINES`];
/// `--help-long` is the reference, with each flag's variable and default.
#[test]
fn run_help_is_a_page_of_one_line_flags_under_headings() {
    let page = help_of(&["run", "--help"]);
    let lines: Vec<&str> = page.lines().collect();
    println!("run --help: {} lines", lines.len());
    assert!(lines.len() <= HELP_MAX_LINES, "{} lines:\n{page}", lines.len());
    for heading in HELP_HEADINGS {
        assert!(
            lines.contains(&format!("{heading}:").as_str()),
            "no heading {heading}:\n{page}"
        );
    }
    let tuning = tuning_flags();
    let reference = help_of(&["run", "--help-long"]);
    for (flag, _) in declared_flags() {
        if tuning.contains(&flag) {
            assert!(
                !page.contains(&format!("{flag} ")),
                "{flag} is a tuning flag:\n{page}"
            );
            assert!(
                reference.contains(&format!("  {flag} ")),
                "--help-long lists {flag}"
            );
            continue;
        }
        let line = lines
            .iter()
            .find(|line| line.trim_start().split([' ', '=']).next() == Some(flag.as_str()))
            .unwrap_or_else(|| panic!("{flag} is not listed:\n{page}"));
        let help = line.trim_start().split_once("  ").map(|(_, help)| help.trim());
        assert!(
            help.is_some_and(|help| !help.is_empty() && help.len() <= 70),
            "{flag}: one short line of help: {line:?}"
        );
    }
    assert!(!page.contains("[env: "), "variables are on --help-long:\n{page}");
    assert!(page.contains("--help-long"), "the page says where the detail is");
    assert!(
        reference.contains("[env: ACP_BRIDGE_IDLE_TIMEOUT=]") && reference.contains("[default: 900s]"),
        "{reference}"
    );
    let top = help_of(&["--help"]);
    println!("--help: {} lines", top.lines().count());
    assert!(top.lines().count() <= HELP_MAX_LINES, "{top}");
    assert!(top.contains("acp-bridge run --help"), "{top}");
}

/// `--agent-args` takes one value: the daemon's own flags after it stay
/// the daemon's, so a bad one is refused at start (not handed to the agent,
/// which then failed every turn of a daemon that said it was ready).
#[test]
fn agent_args_cannot_swallow_the_daemons_flags() {
    let (code, stderr) = start_scripted(&["--idle-timeout", "5x"]);
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

/// A failure after the settings were accepted (here the metrics port is
/// taken) is said once, in the log, not once there and again as a plain
/// line.
#[test]
fn a_failure_after_start_up_is_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let (code, stderr) = start_scripted(&["--metrics-addr", &address]);
    assert_eq!(code, 1, "{stderr}");
    let failures = lines_naming(&stderr, "acp-bridge failed");
    assert_eq!(failures.len(), 1, "{stderr}");
    assert!(failures[0].contains(&address), "{stderr}");
    assert!(
        !stderr.lines().any(|line| line.starts_with("acp-bridge: ")),
        "{stderr}"
    );
}

/// Writes `text` as a config file in a directory of its own; its path.
fn config_file(text: &str) -> String {
    let file = temp_dir("config-file").join("acp-bridge.toml");
    std::fs::write(&file, text).expect("config file");
    path(&file)
}

/// `acp-bridge config` with `args` and only `env`: exit code, stdout, stderr.
fn printed_config(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let output = Command::new(bridge_binary())
        .arg("config")
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run acp-bridge config");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The line of `printout` that sets `key` (commented or not).
fn setting<'a>(printout: &'a str, key: &str) -> &'a str {
    printout
        .lines()
        .find(|line| {
            let line = line.trim_start_matches("# ");
            line.starts_with(&format!("{key} ="))
        })
        .unwrap_or_else(|| panic!("no line for {key}: {printout}"))
}

/// A real daemon started with `--config`: a value only in the file is in
/// force, the environment wins over the file, a flag over both, and a
/// flag's list replaces the file's list (it is not added to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_file_sits_under_the_environment_and_the_flags() {
    use crate::support::{Line, Scene};
    let file = config_file(
        "[relays]\nrelay = [\"ws://127.0.0.1:1\"]\n\
         [gate]\nrespond-to = \"anyone\"\n\
         [turns]\nmultiple-event-handling = \"queue\"\nsession-policy = \"thread\"\n\
         [replies]\nno-reactions = true\n\
         [state]\nretention = \"2d\"\n",
    );
    let scene = Scene::builder()
        .flags(&["--config", &file, "--session-policy", "conversation"])
        .env(&[
            ("ACP_BRIDGE_MULTIPLE_EVENT_HANDLING", "interrupt"),
            ("ACP_BRIDGE_SESSION_POLICY", "thread"),
        ])
        .start()
        .await;
    let log = &scene.bridge.log;
    let starting = log.wait(log.start(), Line::new("starting acp-bridge")).await;
    let config = starting["config"].as_str().expect("the config field");
    for (setting, why) in [
        ("respond_to=anyone", "the file's value"),
        ("reactions=false", "the file's switch"),
        ("retention=172800s", "the file's duration"),
        ("mode=interrupt", "the environment over the file"),
        (
            "session_policy=conversation",
            "the flag over the environment and the file",
        ),
    ] {
        assert!(config.contains(setting), "{why}: {setting} in {config}");
    }
    let relays = format!("relays=[{}]", scene.bridge.spec.relay_url);
    assert!(config.contains(&relays), "the flag's relays only: {config}");
}

/// `acp-bridge config` prints every setting in its table with where it
/// came from, in the same order of precedence as the daemon.
#[test]
fn acp_bridge_config_says_where_each_value_came_from() {
    let file = config_file(
        "[gate]\nrespond-to = \"anyone\"\nmax-content-bytes = 1024\nrate-limit-burst = 5\n\
         [relays]\nkinds = [9, 1]\n",
    );
    let (code, printout, stderr) = printed_config(
        &["--respond-to", "allowlist"],
        &[
            ("ACP_BRIDGE_CONFIG", &file),
            ("ACP_BRIDGE_MAX_CONTENT_BYTES", "2048"),
            ("ACP_BRIDGE_RESPOND_TO", "nobody"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(printout.contains(&format!("# config file: {file}")), "{printout}");
    for (key, line) in [
        ("rate-limit-burst", "rate-limit-burst = 5  # file"),
        ("kinds", "kinds = [9, 1]  # file"),
        (
            "max-content-bytes",
            "max-content-bytes = 2048  # env ACP_BRIDGE_MAX_CONTENT_BYTES",
        ),
        ("respond-to", "respond-to = \"allowlist\"  # flag"),
        ("max-bot-hops", "max-bot-hops = 3  # default"),
        ("owner", "# owner =  # default: unset"),
    ] {
        assert_eq!(setting(&printout, key), line, "{printout}");
    }
    let gate = printout.find("\n[gate]\n").expect("a [gate] table");
    let groups = printout.find("\n[groups]\n").expect("a [groups] table");
    let at = printout.find("\nrate-limit-burst =").expect("rate-limit-burst");
    assert!(gate < at && at < groups, "in its table: {printout}");
    let pasted: toml::Table = printout.parse().expect("the printout is TOML");
    assert_eq!(pasted["gate"]["rate-limit-burst"].as_integer(), Some(5));
}

/// Secrets never show: not the key from the environment, not a bunker
/// URI's connection secret, not a group's invite code.
#[test]
fn acp_bridge_config_redacts_secrets() {
    let secret = Keys::generate().secret_key().to_secret_hex();
    let signer = Keys::generate().public_key().to_hex();
    let bunker = format!("bunker://{signer}?relay=wss%3A%2F%2Frelay.example&secret=hunter2");
    let (code, printout, stderr) = printed_config(
        &["--signer", &bunker],
        &[
            ("ACP_BRIDGE_SECRET_KEY", &secret),
            ("ACP_BRIDGE_GROUP_INVITE_CODE", "letmein"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    for shown in [&secret, "hunter2", "letmein", &signer] {
        assert!(!printout.contains(shown), "{shown} shown: {printout}");
    }
    assert_eq!(
        setting(&printout, "signer"),
        "# signer = \"<redacted>\"  # flag (a secret: not taken from the file)"
    );
    assert_eq!(
        setting(&printout, "group-invite-code"),
        "# group-invite-code = \"<redacted>\"  # env ACP_BRIDGE_GROUP_INVITE_CODE (a secret: not taken from the file)"
    );
    assert!(
        printout.contains("<redacted>\"  # env ACP_BRIDGE_SECRET_KEY"),
        "{printout}"
    );
}

/// A file the daemon cannot use stops start-up in one line naming the file
/// and, when one is at fault, the key: an unknown key, a key of the wrong
/// type, a secret, a missing file, a bad value (named with its flag), a
/// budget key of the flat form budgets had before they were tables.
#[test]
fn a_bad_config_file_is_refused_in_one_line_naming_file_and_key() {
    for (text, says) in [
        ("[gate]\nbogus = 1\n", "unknown key `gate.bogus`"),
        ("[relays]\nrelay = true\n", "`relays.relay` must be an array"),
        (
            "[signer]\nsigner = \"bunker://x\"\n",
            "`signer.signer` is a secret",
        ),
        ("[gate]\nmax-content-bytes = \"lots\"\n", "--max-content-bytes"),
        ("[relays]\nrelay = [\"notaurl\"]\n", "(set by `relays.relay` in"),
        (
            "[budget]\nbudget-author-per-day = [\"1 USD\"]\n",
            "unknown key `budget.budget-author-per-day` (write it as `per-day` in [budget.author])",
        ),
    ] {
        let file = config_file(text);
        for (args, env) in [
            (vec!["--config", file.as_str()], vec![]),
            (vec![], vec![("ACP_BRIDGE_CONFIG", file.as_str())]),
        ] {
            let (code, stderr) = start_with(&args, &env);
            assert_eq!(code, 2, "{text:?}: {stderr}");
            let lines: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{text:?}: one line: {stderr}");
            assert!(lines[0].contains(says), "{text:?}: {stderr}");
            assert!(lines[0].contains(&file), "{text:?} names the file: {stderr}");
        }
    }
    let (code, stderr) = start_with(&["--config", "/nonexistent/acp-bridge.toml"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        lines_naming(&stderr, "/nonexistent/acp-bridge.toml"),
        [
            "acp-bridge: --config /nonexistent/acp-bridge.toml: cannot read it (No such file or directory (os error 2)); point --config or ACP_BRIDGE_CONFIG at a readable TOML file (see deploy/config/acp-bridge.toml.example)"
        ]
    );
}

/// SIGHUP reads the config file again: a new allowlist holds from the next
/// mention, and a setting that cannot change while the daemon runs is
/// refused in a line naming its key (the daemon keeps running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_allowlist_and_refuses_the_rest_by_name() {
    use crate::support::{Line, Scene};
    let settings = |allowlisted: &PublicKey, agents: u32| {
        format!(
            "[gate]\nrespond-to = \"allowlist\"\nallowlist = [\"{}\"]\n[agent]\nagents = {agents}\n",
            allowlisted.to_hex()
        )
    };
    let file = temp_dir("sighup").join("acp-bridge.toml");
    let friend = Keys::generate().public_key();
    std::fs::write(&file, settings(&friend, 1)).expect("config file");
    let scene = Scene::builder().flags(&["--config", &path(&file)]).start().await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let before = stranger.mention_in_group(&bot, "room", "hello?").await;
    log.wait(log.start(), Line::dropped(&before.id, "not_heard"))
        .await;

    std::fs::write(&file, settings(&stranger.public_key(), 2)).expect("config file");
    let mark = log.cursor();
    hang_up(scene.bridge.pid());
    log.wait(
        mark,
        Line::new(
            "SIGHUP: this setting cannot change while the daemon runs; restart it to apply the file's value",
        )
        .with("key", "agent.agents"),
    )
    .await;
    log.wait(
        mark,
        Line::new("SIGHUP: configuration reloaded")
            .with("key", "gate.allowlist")
            .with("keys", 1),
    )
    .await;
    let after = stranger.mention_in_group(&bot, "room", "hello again").await;
    stranger.replies_from(&bot, &after.id, 1).await;
}

/// SIGHUP applies new rate limits from the config file: an author limited
/// under the old ones is taken under the new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_rate_limits() {
    use crate::support::{Line, Scene};
    let settings = |refill: &str| {
        format!("[gate]\nrespond-to = \"anyone\"\nrate-limit-burst = 1\nrate-limit-refill = \"{refill}\"\n")
    };
    let file = temp_dir("sighup-rate").join("acp-bridge.toml");
    std::fs::write(&file, settings("1h")).expect("config file");
    let scene = Scene::builder().flags(&["--config", &path(&file)]).start().await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let first = stranger.mention_in_note(&bot, "one").await;
    log.wait(log.start(), Line::accepted(&first.id)).await;
    stranger.mention_in_note(&bot, "two").await;
    let third = stranger.mention_in_note(&bot, "three").await;
    log.wait(log.start(), Line::dropped(&third.id, "rate_limited"))
        .await;

    std::fs::write(&file, settings("1ms")).expect("config file");
    let mark = log.cursor();
    hang_up(scene.bridge.pid());
    log.wait(
        mark,
        Line::new("SIGHUP: configuration reloaded")
            .with("burst", 1)
            .with("refill_ms", 1),
    )
    .await;
    let fourth = stranger.mention_in_note(&bot, "four").await;
    log.wait(mark, Line::accepted(&fourth.id)).await;
}

/// Sends SIGHUP to the daemon `pid`.
fn hang_up(pid: u32) {
    let status = Command::new("kill")
        .arg("-HUP")
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success());
}

/// SIGHUP applies new profile fields from the config file: the bot's
/// profile is published again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_profile() {
    use crate::support::{Line, Scene};
    let settings = |name: &str| format!("[identity]\nprofile-name = \"{name}\"\n");
    let file = temp_dir("sighup-profile").join("acp-bridge.toml");
    std::fs::write(&file, settings("first")).expect("config file");
    let scene = Scene::builder().flags(&["--config", &path(&file)]).start().await;
    let log = &scene.bridge.log;
    let published = Line::new("the bot's identity changed; publishing it");
    log.wait(log.start(), published.clone()).await;

    std::fs::write(&file, settings("second")).expect("config file");
    let mark = log.cursor();
    hang_up(scene.bridge.pid());
    log.wait(
        mark,
        Line::new("SIGHUP: configuration reloaded").with("key", "identity.profile"),
    )
    .await;
    log.wait(mark, published).await;
}

#[test]
fn an_mcp_servers_file_is_refused_at_start_for_an_unset_variable_or_a_reserved_name() {
    let dir = temp_dir("mcp-servers");
    let file = dir.join("mcp-servers.json");
    for (text, env, expected) in [
        (
            r#"{"mcpServers": {"github": {"command": "gh", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}}"#,
            &[][..],
            "server `github`: ${GITHUB_TOKEN} is not set in the daemon's environment",
        ),
        (
            r#"{"mcpServers": {"acp_bridge": {"command": "gh"}}}"#,
            &[("GITHUB_TOKEN", "x")][..],
            "the name `acp_bridge` is the bridge's own server's",
        ),
        (
            r#"{"mcpServers": {"docs": {"type": "sse"}}}"#,
            &[][..],
            "server `docs`: an sse server needs `url`",
        ),
    ] {
        std::fs::write(&file, text).expect("file");
        let mut args = valid_flags_except(&dir, "");
        args.push(format!("--mcp-servers={}", path(&file)));
        let (code, lines) = refused(&args, env);
        assert_eq!(code, 2, "{text}: {lines:#?}");
        assert_eq!(lines.len(), 1, "one line: {lines:#?}");
        assert!(
            lines[0].starts_with("acp-bridge: --mcp-servers: ")
                && lines[0].contains(&path(&file))
                && lines[0].contains(expected),
            "{lines:#?}"
        );
    }
}

/// `[agents.NAME]` profiles are checked at start like the flags: a table
/// that cannot be a profile (an unknown key, no command, two defaults) is
/// refused in one line naming its key, and a profile whose program is
/// missing in one line naming the profile, before any relay is contacted.
#[test]
fn agent_profiles_are_refused_in_one_line_naming_the_key() {
    for (text, says) in [
        (
            "[agents.codex]\ncommand = \"codex-acp\"\nmodel = \"o3\"\n",
            "unknown key `agents.codex.model`",
        ),
        (
            "[agents.codex]\nargs = [\"acp\"]\n",
            "`agents.codex.command` is missing",
        ),
        (
            "[agents.a]\ncommand = \"a\"\ndefault = true\n[agents.b]\ncommand = \"b\"\ndefault = true\n",
            "`agents.a.default` and `agents.b.default` are both true",
        ),
        (
            "[agents.a]\ncommand = \"a\"\n[agents.b]\ncommand = \"b\"\n",
            "no profile is the default",
        ),
        (
            "[agents.codex]\ncommand = \"/nonexistent/codex-acp\"\n",
            "--config: [agents.codex]: --agent-command: `/nonexistent/codex-acp` does not exist",
        ),
    ] {
        let file = config_file(text);
        let (code, stderr) = start_scripted(&["--config", &file]);
        assert_ne!(code, 0, "{text:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{text:?}: one line: {stderr}");
        assert!(lines[0].contains(says), "{text:?}: {stderr}");
    }
}

/// `--agent-uids` is refused in one line naming it unless its conditions
/// hold: `--agent-user`, per-conversation workspaces, no `--workspace-repo`,
/// a range from 1000 holding no account of /etc/passwd (root runs it:
/// `--agent-user` needs root, and is checked first).
#[test]
fn agent_uids_are_refused_in_one_line_unless_their_conditions_hold() {
    let dir = temp_dir("agent-uids");
    let flags = valid_flags_except(&dir, "");
    let root = nix::unistd::geteuid().is_root();
    let nobody_uid = nix::unistd::User::from_name("nobody")
        .ok()
        .flatten()
        .map(|user| user.uid.as_raw().to_string())
        .unwrap_or_default();
    let around_nobody = format!("{nobody_uid}-{nobody_uid}");
    let per_conversation = ["--agent-user", "nobody", "--workspace", "per-conversation"];
    let around_account = std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split(':').nth(2)?.parse::<u32>().ok())
        .find(|uid| (1000..65534).contains(uid))
        .map(|uid| format!("{uid}-{uid}"));
    let mut cases: Vec<(Vec<&str>, &str)> = vec![(vec!["--agent-uids", "61000-61009"], "needs --agent-user")];
    if root {
        cases.extend([
            (
                vec!["--agent-uids", "61000-61009", "--agent-user", "nobody"],
                "needs --workspace per-conversation",
            ),
            (
                [&per_conversation[..], &["--agent-uids", "500-61009"]].concat(),
                "starts below 1000",
            ),
            (
                [&per_conversation[..], &["--agent-uids", &around_nobody]].concat(),
                "holds --agent-user's uid",
            ),
        ]);
        if let Some(range) = &around_account {
            cases.push((
                [&per_conversation[..], &["--agent-uids", range]].concat(),
                "of the account",
            ));
        }
    }
    for (extra, why) in &cases {
        let args: Vec<String> = flags
            .iter()
            .cloned()
            .chain(extra.iter().map(|arg| (*arg).to_owned()))
            .collect();
        let (code, stderr) = refused(&args, &[]);
        assert_eq!(code, 2, "{extra:?}: {stderr:?}");
        let refusal = stderr.last().cloned().unwrap_or_default();
        assert!(
            refusal.starts_with("acp-bridge: --agent-uids") && refusal.contains(why),
            "{extra:?}: {stderr:?}"
        );
    }
    println!(
        "--agent-uids: {} misconfigurations refused in one line",
        cases.len()
    );
}
