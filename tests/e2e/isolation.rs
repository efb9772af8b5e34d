//! Agents kept apart from the daemon: run as another user (`--agent-user`),
//! their tools cannot read the bot's key file, the state dir or the
//! daemon's environment; and they die with the daemon, even by SIGKILL,
//! with every helper they started, even one that left their process group
//! and session.

use std::time::Instant;

use crate::support::*;

/// The user agents run as in these tests: present on every Linux system.
const AGENT_USER: &str = "nobody";
/// A variable of the daemon's environment, to recognise it when read.
const DAEMON_ENV_MARKER: (&str, &str) = ("ISOLATION_TEST_MARKER", "daemon-environment-was-read");

fn running_as_root() -> bool {
    effective_uid() == Some(0)
}

/// The effective uid, from `/proc/self/status` (`Uid: real effective …`).
fn effective_uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What the tests read of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    pgrp: u32,
    session: u32,
}

/// `/proc/<pid>/stat`, for a process that exists.
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat { state, pgrp, session })
}

/// Runs: exists and is not a zombie waiting to be reaped.
fn running(pid: u32) -> bool {
    stat(pid).is_some_and(|stat| !matches!(stat.state, 'Z' | 'X'))
}

/// The running processes whose stat passes `pick`, in pid order.
fn processes_where(pick: impl Fn(u32, Stat) -> bool) -> Vec<u32> {
    let mut found: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|pid| running(*pid) && stat(*pid).is_some_and(|stat| pick(*pid, stat)))
        .collect();
    found.sort_unstable();
    found
}

/// The running processes of process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    processes_where(|_, stat| stat.pgrp == pgid)
}

/// The running processes whose command line ends with the argument `mark`.
fn marked(mark: &str) -> Vec<u32> {
    processes_where(|pid, _| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            cmdline.split(|byte| *byte == 0).rev().find(|arg| !arg.is_empty()) == Some(mark.as_bytes())
        })
    })
}

/// The running processes of the sessions of `leaders`.
fn sessions_of(leaders: &[u32]) -> Vec<u32> {
    let sessions: Vec<u32> = leaders
        .iter()
        .filter_map(|pid| stat(*pid))
        .map(|stat| stat.session)
        .collect();
    processes_where(|_, stat| sessions.contains(&stat.session))
}

/// How many of `paths` the agent's answer shows as read, not refused.
fn reads_succeeded(answer: &str, paths: &[String]) -> usize {
    paths
        .iter()
        .filter(|path| {
            let (read, refused) = (format!("cat {path}: "), format!("cat {path}: error: "));
            answer
                .lines()
                .any(|line| line.starts_with(&read) && !line.starts_with(&refused))
        })
        .count()
}

/// The agent's answer to a mention that asks it to read `paths`.
async fn agent_reads(scene: &Scene, channel: &str, paths: &[String]) -> String {
    let directives: Vec<String> = paths.iter().map(|path| format!("[cat={path}]")).collect();
    let mention = scene
        .mention(channel, &format!("read these {}", directives.join(" ")))
        .await;
    scene.reply_to(&mention).await.content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_user_cannot_read_the_key_file_the_state_dir_or_the_daemon_environ() {
    if !running_as_root() {
        println!("skipped: starting agents as another user needs root (CI runs as root)");
        return;
    }
    let mut stage = Scene::builder().env(&[DAEMON_ENV_MARKER]).stage().await;
    stage.spec.key_file = Some(temp_dir("key").join("bot.key"));
    let mut scene = stage.start().await;
    let spec = scene.spec();
    let key_file = spec.key_file.clone().expect("a key file");
    let secrets = |daemon: u32| {
        vec![
            key_file.display().to_string(),
            spec.state_dir.join("acp-bridge.sqlite3").display().to_string(),
            format!("/proc/{daemon}/environ"),
        ]
    };

    // The daemon is not in the agent's PID namespace (a root daemon gives
    // each agent one, with its own /proc): its environ is not there to read,
    // whoever the agent runs as.
    let invisible = |path: &str| format!("cat {path}: error: No such file or directory");

    // As the daemon's user (today's only way), the key and the state read.
    let shared = secrets(scene.bridge.pid());
    let answer = agent_reads(&scene, "shared-user", &shared).await;
    let key_hex = spec.bot.secret_key().to_secret_hex();
    assert!(
        answer.contains(&format!("{}: {key_hex}", key_file.display())),
        "{answer}"
    );
    assert!(answer.contains("SQLite format 3"), "{answer}");
    assert!(answer.contains(&invisible(&shared[2])), "{answer}");
    let read_as_daemon_user = reads_succeeded(&answer, &shared);
    assert_eq!(read_as_daemon_user, 2, "{answer}");

    // As the agent user, the key and the state are refused by the kernel.
    scene.bridge.terminate(PATIENCE).await;
    scene
        .restart(spec.clone().flags(&["--agent-user", AGENT_USER]))
        .await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("agents run as another user").with("user", AGENT_USER),
    )
    .await;
    let paths = secrets(scene.bridge.pid());
    let answer = agent_reads(&scene, "own-user", &paths).await;
    for path in &paths[..2] {
        assert!(
            answer.contains(&format!("cat {path}: error: Permission denied")),
            "{path} must be out of reach: {answer}"
        );
    }
    assert!(answer.contains(&invisible(&paths[2])), "{answer}");
    assert!(
        !answer.contains(&key_hex) && !answer.contains(DAEMON_ENV_MARKER.1),
        "{answer}"
    );
    println!(
        "agent tools reading the key file, the state dir and /proc/<daemon>/environ: as the daemon's user {read_as_daemon_user} of {} read (the daemon is not in the agent's PID namespace); as --agent-user {AGENT_USER} {} of {} read",
        shared.len(),
        reads_succeeded(&answer, &paths),
        paths.len()
    );
}

/// A daemon that does not run as root (so its agents share its user and
/// get no PID namespace of their own) keeps its start-up environment,
/// which holds the bot's key, from them: `/proc/<daemon>/environ` keeps
/// what the process started with whatever it removed since, so the
/// process is marked not dumpable (its `/proc` files become root's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_of_an_ordinary_user_keeps_its_environ_from_agents_of_that_user() {
    if !running_as_root() {
        println!("skipped: running the daemon as another user needs root (CI runs as root)");
        return;
    }
    let user = nix::unistd::User::from_name(AGENT_USER)
        .expect("user lookup")
        .expect("the user exists");
    let mut stage = Scene::builder().env(&[DAEMON_ENV_MARKER]).stage().await;
    stage.spec.run_as = Some((user.uid.as_raw(), user.gid.as_raw()));
    let scene = stage.start().await;
    let environ = format!("/proc/{}/environ", scene.bridge.pid());
    let answer = agent_reads(&scene, "same-user", std::slice::from_ref(&environ)).await;
    let key_hex = scene.spec().bot.secret_key().to_secret_hex();
    assert!(
        !answer.contains(&key_hex) && !answer.contains(DAEMON_ENV_MARKER.1),
        "the agent read the daemon's environment: {answer}"
    );
    assert!(
        answer.contains(&format!("cat {environ}: error: Permission denied")),
        "{answer}"
    );
    println!(
        "an agent of the daemon's own (non-root) user reading /proc/<daemon>/environ: refused ({} of 1 read)",
        reads_succeeded(&answer, &[environ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_sigkill_ends_the_agent_and_every_helper_even_one_that_left_its_group() {
    if !running_as_root() {
        println!("skipped: a PID namespace per agent needs CAP_SYS_ADMIN (CI runs as root)");
        return;
    }
    // An agent that outlives its client, as one stuck in a tool does, with
    // a helper in its process group and one that left group and session
    // (setsid in a background job of a shell that exited: orphaned).
    let mut scene = Scene::builder()
        .agent(&["--linger", "--rounds", "2", "--round-delay-ms", "20"])
        .start()
        .await;
    let mark = format!("detached-helper-{}", std::process::id());
    let mention = scene
        .mention_mid_turn(
            "room",
            &format!("long work with helpers [child] [detached-child={mark}] [rounds=300] [delay=100]"),
        )
        .await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("agent process started").with("pid_namespace", true),
    )
    .await;
    let agents = scene.bridge.wait_for_agents().await;
    let leader = agents[0];
    let runs_sleep = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| cmdline.split(|byte| *byte == 0).next() == Some(b"sleep".as_slice()))
    };
    let with_helper = async || Some(group_members(leader)).filter(|members| members.iter().any(runs_sleep));
    let in_group = eventually(PATIENCE, with_helper, || format!("the helper in group {leader}")).await;
    let detached_found = async || Some(marked(&mark)).filter(|found| !found.is_empty());
    let detached_leaders =
        eventually(PATIENCE, detached_found, || format!("the detached helper {mark}")).await;
    let detached = sessions_of(&detached_leaders);
    assert!(
        detached
            .iter()
            .all(|pid| stat(*pid).is_some_and(|stat| stat.pgrp != leader)),
        "the detached helper left the agent's group: {detached:?}"
    );
    let descendants: Vec<u32> = in_group.iter().chain(&detached).copied().collect();

    let killed = Instant::now();
    scene.bridge.kill_hard();
    let all_gone = async || descendants.iter().all(|pid| !running(*pid)).then_some(());
    let waited = tokio::time::timeout(PATIENCE, async {
        eventually(PATIENCE, all_gone, String::new).await;
    })
    .await;
    let left: Vec<u32> = descendants.iter().copied().filter(|pid| running(*pid)).collect();
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        waited.is_ok() && left.is_empty(),
        "helpers outlived the SIGKILLed daemon: {left:?} of {descendants:?}"
    );
    println!(
        "daemon SIGKILL mid-turn: {} process(es) of the agent's group and {} detached helper process(es) gone after {:?}, without a restart; left: {}",
        in_group.len(),
        detached.len(),
        killed.elapsed(),
        left.len()
    );

    // The restart answers the mention that was in flight, once.
    let restarted = scene
        .spec()
        .agent(&["--ignore-directives", "--rounds", "1", "--round-delay-ms", "10"]);
    scene.restart(restarted).await;
    assert_exactly_once(
        scene
            .tally(
                "daemon SIGKILL mid-turn, lingering agent with an in-group and a detached helper, restarted",
                &[mention],
            )
            .await,
    );
}

#[test]
fn an_agent_user_needs_a_daemon_running_as_root() {
    if !running_as_root() {
        println!("skipped: the test drops to an unprivileged user with setpriv, which needs root");
        return;
    }
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let bot = nostr_sdk::Keys::generate();
    // The daemon as `nobody` (65534), asked to start agents as `nobody`.
    let output = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bridge_binary(),
        ])
        .args([
            "--relay",
            "embedded",
            "--owner",
            &owner,
            "--agent-user",
            AGENT_USER,
        ])
        .env_clear()
        .env("ACP_BRIDGE_SECRET_KEY", bot.secret_key().to_secret_hex())
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let refusal = stderr.lines().last().unwrap_or_default();
    assert!(
        refusal.starts_with("acp-bridge: --agent-user: the daemon must run as root"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_state_dir_the_agents_could_change_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    if !running_as_root() {
        println!("skipped: --agent-user needs a daemon running as root (CI runs as root)");
        return;
    }
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let bot = nostr_sdk::Keys::generate();
    let cwd = temp_dir("agent-cwd");
    let open = temp_dir("open-state");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let cases = [
        (
            cwd.join("state"),
            format!(
                "lies inside the agents' working directory `{}` (--cwd)",
                cwd.display()
            ),
        ),
        (
            open.clone(),
            format!(
                "can be changed by the agents' user `{AGENT_USER}` (--agent-user): it is writable by anyone (mode 777)"
            ),
        ),
    ];
    let mut refused = 0;
    for (state_dir, reason) in &cases {
        let daemon = tokio::process::Command::new(bridge_binary())
            .args(["--relay", "embedded", "--owner", &owner])
            .args(["--agent-user", AGENT_USER])
            .arg("--cwd")
            .arg(&cwd)
            .arg("--state-dir")
            .arg(state_dir)
            .env_clear()
            .env("ACP_BRIDGE_SECRET_KEY", bot.secret_key().to_secret_hex())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            // A daemon that starts instead is killed when the wait gives up.
            .kill_on_drop(true)
            .spawn()
            .expect("acp-bridge");
        // Its exit is the event.
        let output = tokio::time::timeout(PATIENCE, daemon.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("the daemon started with state dir {}", state_dir.display()))
            .expect("output");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let refusal = stderr.lines().last().unwrap_or_default();
        let named = format!("acp-bridge: --state-dir: `{}` ", state_dir.display());
        assert!(
            refusal.starts_with(&named) && refusal.contains(reason.as_str()),
            "{refusal}"
        );
        assert!(
            !state_dir.join("acp-bridge.sqlite3").exists(),
            "refused before the store was opened"
        );
        refused += 1;
    }
    println!(
        "state dir the agents could change (inside their cwd; mode 777): {refused} of {} starts refused with exit code 2",
        cases.len()
    );
}

/// Per-conversation workspaces are created and deleted by the daemon, as
/// root, beneath `--cwd`: a `--cwd` the agents' user owns (it could swap
/// `conversations/` for a link) is refused in one line before anything
/// starts.
#[tokio::test]
async fn per_conversation_workspaces_under_a_cwd_the_agents_own_are_refused_at_start() {
    if !running_as_root() {
        println!("skipped: --agent-user needs a daemon running as root (CI runs as root)");
        return;
    }
    let user = nix::unistd::User::from_name(AGENT_USER)
        .expect("user lookup")
        .expect("the user exists");
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let bot = nostr_sdk::Keys::generate();
    let cwd = std::fs::canonicalize(temp_dir("agents-own-cwd")).expect("cwd");
    std::os::unix::fs::chown(&cwd, Some(user.uid.as_raw()), Some(user.gid.as_raw())).expect("chown");
    // `check` validates as `run` does, and ends either way.
    let output = std::process::Command::new(bridge_binary())
        .arg("check")
        .args(["--relay", "embedded", "--owner", &owner])
        .args(["--agent-user", AGENT_USER, "--workspace", "per-conversation"])
        .arg("--cwd")
        .arg(&cwd)
        .arg("--state-dir")
        .arg(temp_dir("state-beside"))
        .env_clear()
        .env("ACP_BRIDGE_SECRET_KEY", bot.secret_key().to_secret_hex())
        .output()
        .expect("acp-bridge");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let refusal = stderr.lines().last().unwrap_or_default();
    assert!(
        refusal.starts_with(&format!(
            "acp-bridge: --cwd: `{}` can be changed by the agents' user `{AGENT_USER}` (--agent-user): it is owned by it",
            cwd.display()
        )),
        "{refusal}"
    );
    assert!(!cwd.join("conversations").exists(), "nothing was created");
    println!("per-conversation workspaces under a --cwd owned by {AGENT_USER}: refused at start ({refusal})");
}

/// The workspaces under `cwd/conversations/` now.
fn workspaces_under(cwd: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cwd.join("conversations"))
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default()
}

/// Conversation A has a turn; a secret is put in its workspace, owned by
/// the uid the workspace is (0600); conversation B's agent then reads it
/// and its own `/proc/self/status`. Returns (reads of A's secret that
/// succeeded, A's agent's uid line, B's).
async fn neighbour_reads_secret(scene: &Scene, cwd: &std::path::Path, tag: &str) -> (usize, String, String) {
    use std::os::unix::fs::MetadataExt;
    let before = workspaces_under(cwd);
    let status_a = agent_reads(scene, &format!("{tag}-a"), &["/proc/self/status".to_owned()]).await;
    let workspace_a = workspaces_under(cwd)
        .into_iter()
        .find(|dir| !before.contains(dir))
        .expect("A's workspace");
    let owner = std::fs::metadata(&workspace_a).expect("stat").uid();
    let secret = workspace_a.join("secret.txt");
    std::fs::write(&secret, "conversation A's secret").expect("secret");
    std::os::unix::fs::chown(&secret, Some(owner), None).expect("chown");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let paths = [secret.display().to_string(), "/proc/self/status".to_owned()];
    let answer_b = agent_reads(scene, &format!("{tag}-b"), &paths).await;
    let uid_line = |answer: &str| {
        answer
            .split('\n')
            .find(|line| line.starts_with("Uid:"))
            .unwrap_or_default()
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    (
        reads_succeeded(&answer_b, &paths[..1]),
        uid_line(&status_a),
        uid_line(&answer_b),
    )
}

/// `--agent-uids`: each conversation's agent runs as a uid of its own, so
/// conversation B's agent cannot read conversation A's workspace, even
/// with one agent process slot serving both in turn; as one
/// `--agent-user` it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversations_agent_cannot_read_another_conversations_workspace_with_agent_uids() {
    if !running_as_root() {
        println!("skipped: starting agents as other users needs root (CI runs as root)");
        return;
    }
    let cwd = std::fs::canonicalize(temp_dir("uids-cwd")).expect("cwd");
    let cwd_flag = cwd.display().to_string();
    let one_user = [
        "--agents",
        "1",
        "--agent-user",
        AGENT_USER,
        "--workspace",
        "per-conversation",
        "--cwd",
        &cwd_flag,
    ];
    let mut scene = Scene::builder().flags(&one_user).start().await;
    let (read_as_one_user, uid_a, uid_b) = neighbour_reads_secret(&scene, &cwd, "one-user").await;
    assert_eq!(read_as_one_user, 1, "as one --agent-user, B reads A's workspace");
    assert_eq!(uid_a, uid_b, "one uid for both");

    scene.bridge.terminate(PATIENCE).await;
    let spec = scene.spec().flags(&["--agent-uids", "61000-61009"]);
    scene.restart(spec).await;
    let (read_with_uids, uid_a, uid_b) = neighbour_reads_secret(&scene, &cwd, "own-uids").await;
    assert_eq!(
        read_with_uids, 0,
        "B's agent is refused A's workspace by the kernel"
    );
    assert_eq!(
        (uid_a.as_str(), uid_b.as_str()),
        ("61000", "61001"),
        "each conversation's agent ran as its own uid"
    );
    println!(
        "conversation B's agent reading A's workspace file, one agent slot serving both in turn: as one --agent-user {read_as_one_user} of 1 read (both as uid {}); with --agent-uids {read_with_uids} of 1 read (A as uid {uid_a}, B as uid {uid_b})",
        nix::unistd::User::from_name(AGENT_USER)
            .ok()
            .flatten()
            .map(|user| user.uid.as_raw())
            .unwrap_or_default()
    );
}
