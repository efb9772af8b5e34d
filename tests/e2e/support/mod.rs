//! The end-to-end harness: a real relay in the test process, the real
//! `acp-bridge` binary as a child process, the scripted agent (run through
//! the binary's hidden `scripted-agent` subcommand), and people with keys of
//! their own who mention the bot and read its replies.
//!
//! Tests set up through [`Scene`] and synchronise on events: the daemon's
//! JSON log lines after a [`Cursor`], and answers on the relay, each looked
//! for with bounded patience. No test sleeps to synchronise.

mod answered;
mod auth_relay;
mod bridge;
mod log;
mod notify_socket;
mod people;
mod picky_relay;
mod processes;
mod relay;
mod remote_signer;
mod scene;
mod threads;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use auth_relay::{AuthFor, AuthRelay};
pub use bridge::{Bridge, BridgeSpec};
pub use log::{Cursor, Line, LogFile};
pub use notify_socket::NotifySocket;
pub use people::{Person, attest_profile, channel_of, e_tags, group_message, p_tags};
pub use picky_relay::{Answer, PickyRelay};
pub use processes::{descendants, scripted_agents_below};
pub use relay::{RelayServer, TestRelay};
pub use remote_signer::{BUNKER_SECRET, RemoteSigner};
pub use scene::{Scene, SceneBuilder, Stage, Tally, assert_exactly_once};
pub use threads::{ask_in_thread, note_in_thread, scene_with_an_allowlisted_friend};

/// How long a test waits for something the daemon should do.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

/// Looks with `probe` until it finds something, and returns it. After
/// `patience` it panics with `describe()`: what was awaited, and what was
/// seen instead.
pub async fn eventually<T>(
    patience: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
    describe: impl FnOnce() -> String,
) -> T {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("waited {patience:?} in vain: {}", describe());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The daemon binary under test.
pub fn bridge_binary() -> &'static str {
    env!("CARGO_BIN_EXE_acp-bridge")
}

/// `acp-bridge check` on `relay` for `owner` (hex), the bot's key
/// `secret` (hex) in its environment (`None`: `flags` name its signer),
/// the built-in scripted agent, and `flags` besides: what it printed and
/// how it exited.
pub fn check_with_scripted_agent(
    relay: &str,
    owner: &str,
    secret: Option<&str>,
    flags: &[&str],
) -> std::process::Output {
    check_with_agent_args(relay, owner, secret, "scripted-agent", flags)
}

/// `acp-bridge check` as [`check_with_scripted_agent`], the binary's
/// subcommands as the agent with `agent_args` (`--agent-args`'s one string).
pub fn check_with_agent_args(
    relay: &str,
    owner: &str,
    secret: Option<&str>,
    agent_args: &str,
    flags: &[&str],
) -> std::process::Output {
    let mut command = std::process::Command::new(bridge_binary());
    command
        .args(["check", "--relay", relay, "--owner", owner])
        .args(flags)
        .args(["--agent-command", bridge_binary(), "--agent-args", agent_args])
        .env_clear();
    if let Some(secret) = secret {
        command.env("ACP_BRIDGE_SECRET_KEY", secret);
    }
    command.output().expect("run check")
}

/// `words` as one `--agent-args` value: quoted as a shell would need them,
/// since the daemon splits the value as a shell splits words.
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    shlex::try_join(words.iter().map(AsRef::as_ref)).expect("no NUL in the agent's arguments")
}

/// The name every directory of [`temp_dir`] starts with.
const TEMP_DIR_PREFIX: &str = "acp-bridge-e2e-";

/// A fresh directory under the system temp dir. The first call of a test
/// process removes the directories of test processes that have ended.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended_processes_temp_dirs);
    let dir = std::env::temp_dir().join(format!(
        "{TEMP_DIR_PREFIX}{name}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Removes the [`temp_dir`]s (and the daemon logs written beside them)
/// whose process, the pid in their name, no longer runs: a test keeps its
/// directories while it runs, as a restarted daemon reuses its state dir,
/// and nothing else would remove them. A pid reused since only keeps its
/// old ones for a later sweep.
fn remove_ended_processes_temp_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|name| name.strip_prefix(TEMP_DIR_PREFIX)) else {
            continue;
        };
        // `<name>-<pid>-<n>`, or a daemon's log beside its state dir:
        // `<name>-<pid>-<n>.log-<start>`.
        let stem = rest.split('.').next().unwrap_or(rest);
        let pid = stem.rsplit('-').nth(1).and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let path = entry.path();
            let _ = match path.is_dir() {
                true => std::fs::remove_dir_all(path),
                false => std::fs::remove_file(path),
            };
        }
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A plain HTTP/1.1 GET, returning the whole response.
pub async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .expect("response in time")
        .expect("read");
    response
}

/// One sample of the daemon's /metrics: the value of `name` (with its
/// labels, as Prometheus prints them), 0 when absent.
pub async fn metric(port: u16, name: &str) -> f64 {
    let body = http_get(port, "/metrics").await;
    let prefix = format!("{name} ");
    body.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}
