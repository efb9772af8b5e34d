//! The daemon under test: its options, and the running child process.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nostr_sdk::prelude::*;

use super::log::{Line, LogFile};
use super::{PATIENCE, bridge_binary, eventually, owned, shell_words, temp_dir};

/// What `RUST_LOG` is unless a test says otherwise: the waits need the
/// daemon's debug lines ("agent run started", "event dropped").
const DEFAULT_LOG_FILTER: &str = "info,acp_bridge=debug";

/// Options of a bridge under test. A restart reuses them (the same bot key
/// and state dir), changing what the test changes.
#[derive(Debug, Clone)]
pub struct BridgeSpec {
    /// Comma-separated, as `--relay` takes them.
    pub relay_url: String,
    pub bot: Keys,
    pub owner: PublicKey,
    pub state_dir: PathBuf,
    /// Flags of the scripted agent.
    pub agent_flags: Vec<String>,
    /// Further daemon flags.
    pub flags: Vec<String>,
    /// Another agent than the built-in scripted one.
    pub agent_command: Option<String>,
    /// Where the scripted agent logs the frames it receives.
    pub frame_log_dir: Option<PathBuf>,
    /// Extra variables in the daemon's environment.
    pub env: Vec<(String, String)>,
    /// The daemon's `RUST_LOG`.
    pub log_filter: String,
    /// Where the bot's key is written (0600) for `--secret-key-file`;
    /// `None` passes it in `ACP_BRIDGE_SECRET_KEY`.
    pub key_file: Option<PathBuf>,
    /// A file holding a remote signer's bunker URI for `--signer-file`:
    /// the daemon then gets no key at all.
    pub signer_file: Option<PathBuf>,
    /// The uid and gid the daemon runs as (the test must be root); `None`
    /// runs it as the test's user.
    pub run_as: Option<(u32, u32)>,
}

impl BridgeSpec {
    pub fn new(relay_url: &str, owner: PublicKey) -> Self {
        BridgeSpec {
            relay_url: relay_url.to_owned(),
            bot: Keys::generate(),
            owner,
            state_dir: temp_dir("state"),
            agent_flags: owned(&["--round-delay-ms", "20", "--rounds", "2"]),
            flags: Vec::new(),
            agent_command: None,
            frame_log_dir: None,
            env: Vec::new(),
            log_filter: DEFAULT_LOG_FILTER.to_owned(),
            key_file: None,
            signer_file: None,
            run_as: None,
        }
    }

    /// Replaces the scripted agent's flags.
    pub fn agent(mut self, flags: &[&str]) -> Self {
        self.agent_flags = owned(flags);
        self
    }

    /// Adds daemon flags.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(owned(flags));
        self
    }

    /// Another daemon of the same bot (key, owner, relays, agent) with a
    /// state dir of its own and `flags` instead of these flags: a replica.
    pub fn replica(&self, flags: &[&str]) -> Self {
        BridgeSpec {
            flags: owned(flags),
            ..self.clone()
        }
        .with_fresh_state_dir()
    }

    /// The same daemon with a new, empty state dir: a lost volume, an
    /// operator's second try.
    pub fn with_fresh_state_dir(self) -> Self {
        BridgeSpec {
            state_dir: temp_dir("state"),
            ..self
        }
    }
}

/// The daemon as a child process, killed when dropped.
#[derive(Debug)]
pub struct Bridge {
    child: Child,
    pub log: LogFile,
    pub spec: BridgeSpec,
}

impl Bridge {
    /// Spawns the daemon with `--log-format json`, its stderr in a log file
    /// of its own (a restart starts a new one).
    pub fn start(spec: &BridgeSpec) -> Self {
        static STARTS: AtomicU32 = AtomicU32::new(0);
        let start = STARTS.fetch_add(1, Ordering::Relaxed);
        let log_path = spec.state_dir.with_extension(format!("log-{start}"));
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut agent_args = vec!["scripted-agent".to_owned()];
        agent_args.extend(spec.agent_flags.iter().cloned());
        if let Some(dir) = &spec.frame_log_dir {
            agent_args.push("--frame-log-dir".to_owned());
            agent_args.push(dir.to_str().expect("utf-8 path").to_owned());
        }
        let mut command = Command::new(bridge_binary());
        command.env_clear();
        if let Some((uid, gid)) = spec.run_as {
            use std::os::unix::process::CommandExt;
            std::os::unix::fs::chown(&spec.state_dir, Some(uid), Some(gid)).expect("chown the state dir");
            command.uid(uid).gid(gid);
        }
        match (&spec.signer_file, &spec.key_file) {
            (Some(path), _) => {
                command.arg("--signer-file").arg(path);
            }
            (None, Some(path)) => {
                write_key_file(path, &spec.bot);
                command.arg("--secret-key-file").arg(path);
            }
            (None, None) => {
                command.env("ACP_BRIDGE_SECRET_KEY", spec.bot.secret_key().to_secret_hex());
            }
        }
        let child = command
            .arg("--relay")
            .arg(&spec.relay_url)
            .arg("--owner")
            .arg(spec.owner.to_hex())
            .arg("--state-dir")
            .arg(&spec.state_dir)
            .arg("--agent-command")
            .arg(spec.agent_command.as_deref().unwrap_or(bridge_binary()))
            .arg("--log-format")
            .arg("json")
            .args(&spec.flags)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ACP_BRIDGE_AGENT_ARGS", shell_words(&agent_args))
            .env("RUST_LOG", &spec.log_filter)
            // Waiting notices are no answers: off unless a test turns them
            // on with the flag (tests/e2e/waiting.rs), so tallies count answers.
            .env("ACP_BRIDGE_WAIT_NOTICE_AFTER", "0")
            // Thread context changes every prompt: on where a test turns it
            // on (tests/e2e/thread_context.rs).
            .env("ACP_BRIDGE_THREAD_CONTEXT", "0")
            .envs(spec.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn acp-bridge");
        Bridge {
            child,
            log: LogFile::new(log_path, start),
            spec: spec.clone(),
        }
    }

    /// Waits until the daemon is subscribed to mentions.
    pub async fn ready(&self) {
        self.log
            .wait(self.log.start(), Line::new("ready: subscribed to mentions"))
            .await;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the daemon process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then the exit status (within `within`).
    pub async fn terminate(&mut self, within: Duration) -> ExitStatus {
        self.stop_with("TERM", within).await
    }

    /// SIGINT (an operator's Ctrl-C), then the exit status (within `within`).
    pub async fn interrupt(&mut self, within: Duration) -> ExitStatus {
        self.stop_with("INT", within).await
    }

    /// The signal `name` (`TERM`, `INT`), then the exit status (within
    /// `within`).
    async fn stop_with(&mut self, name: &str, within: Duration) -> ExitStatus {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        let exited = async || self.child.try_wait().expect("wait");
        let describe = || {
            format!(
                "acp-bridge to exit within {within:?} of SIG{name}; log tail:\n{}",
                self.log.tail(40)
            )
        };
        eventually(within, exited, describe).await
    }

    /// SIGKILL, no grace.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Process ids of the agents the daemon runs right now.
    pub fn agent_pids(&self) -> Vec<u32> {
        let output = Command::new("pgrep")
            .arg("-P")
            .arg(self.pid().to_string())
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// Waits until the daemon runs at least one agent; returns their pids.
    pub async fn wait_for_agents(&self) -> Vec<u32> {
        let probe = async || Some(self.agent_pids()).filter(|pids| !pids.is_empty());
        eventually(PATIENCE, probe, || "an agent process".to_owned()).await
    }

    /// Takes the write lock of the daemon's database, as an outside writer
    /// (an operator's `sqlite3` shell, a backup) would: its journal writes
    /// fail once its busy timeout passes, until the lock is released.
    pub fn lock_journal(&self) -> JournalLock {
        let database = self.spec.state_dir.join("acp-bridge.sqlite3");
        let outsider = rusqlite::Connection::open(&database).expect("open the daemon's database");
        outsider
            .execute_batch("BEGIN IMMEDIATE")
            .expect("take the write lock");
        JournalLock(outsider)
    }
}

/// The write lock on a daemon's database, held until [`JournalLock::release`].
#[derive(Debug)]
pub struct JournalLock(rusqlite::Connection);

impl JournalLock {
    pub fn release(self) {
        self.0.execute_batch("ROLLBACK").expect("release the write lock");
    }
}

/// The bot's key as hex in a new 0600 file at `path`.
fn write_key_file(path: &std::path::Path, bot: &Keys) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("key file");
    file.write_all(bot.secret_key().to_secret_hex().as_bytes())
        .expect("write the key file");
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.kill_hard();
    }
}
