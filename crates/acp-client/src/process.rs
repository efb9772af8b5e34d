//! The agent as an operating-system process.
//!
//! Owns spawning (own process group, explicit environment, piped stdio,
//! optionally another user), forwarding stderr into `tracing`, observing the
//! exit status, and killing the whole group. Agents start helpers (MCP
//! servers, shells, language servers); killing only the direct child would
//! orphan them, so every kill here targets the process group.
//!
//! An agent also dies with the daemon: its parent-death signal is SIGKILL
//! ([`crate::isolation`]), armed in the child and kept valid by forking
//! every agent from one thread that lives as long as the process
//! ([`crate::forker`]). Where the daemon may create PID namespaces, the
//! agent and everything it starts live in one of their own, which the
//! kernel ends with the process the daemon forked
//! ([`crate::pid_namespace`]): nothing the agent started outlives the
//! daemon, whatever group or session it moved to. Where it may not, the
//! signal reaches the group leader only, and the daemon says so once.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;
use tokio_util::codec::FramedRead;

use crate::error::AcpError;
use crate::forker;
use crate::framing::{Frame, FrameCodec};
use crate::isolation::{self, AgentUser};
use crate::stderr_tail::StderrTail;

/// Longest stderr line forwarded whole; longer ones are cut (agents dump
/// stack traces and JSON blobs on stderr).
const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;

/// How to start an agent.
#[derive(Debug, Clone)]
pub struct AgentCommand {
    /// Name used in logs and errors (for example `goose#1`).
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Working directory of the agent process; inherited when `None`.
    pub cwd: Option<PathBuf>,
    /// The agent's COMPLETE environment: nothing is inherited, so the
    /// daemon's own secrets never reach the agent or the tools it runs.
    pub env: Vec<(OsString, OsString)>,
    /// The account the agent runs as; the daemon's own when `None`.
    pub user: Option<AgentUser>,
}

impl AgentCommand {
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>) -> Self {
        AgentCommand {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            user: None,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

/// A running agent process. Dropping it kills the process group.
#[derive(Debug)]
pub(crate) struct AgentProcess {
    probe: ProcessProbe,
    /// The last lines of its stderr.
    stderr: StderrTail,
}

/// Observes and kills the process without owning it: the reader task holds
/// one, so that only the client handles keep the agent alive.
#[derive(Debug, Clone)]
pub(crate) struct ProcessProbe {
    name: String,
    pid: u32,
    exit_status: watch::Receiver<Option<ExitStatus>>,
}

pub(crate) struct SpawnedAgent {
    pub process: AgentProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

impl AgentProcess {
    pub(crate) fn spawn(command: &AgentCommand) -> Result<SpawnedAgent, AcpError> {
        let mut child = Command::new(&command.program);
        child
            .args(&command.args)
            .env_clear()
            .envs(command.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so a kill reaches everything it started and a
            // Ctrl-C in the daemon's terminal does not hit the agent first.
            .process_group(0)
            .kill_on_drop(true);
        let spawn_failed = |source| AcpError::Spawn {
            program: command.program.display().to_string(),
            source,
        };
        isolation::prepare(&mut child, command.user.as_ref(), command.cwd.as_deref())
            .map_err(spawn_failed)?;
        let mut child = forker::spawn(child).map_err(spawn_failed)?;
        let pid = child.id().ok_or_else(|| AcpError::Spawn {
            program: command.program.display().to_string(),
            source: std::io::Error::other("the process exited before it could be observed"),
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(AcpError::Spawn {
                program: command.program.display().to_string(),
                source: std::io::Error::other("stdio was not piped"),
            });
        };
        let stderr_tail = StderrTail::default();
        tokio::spawn(forward_stderr(command.name.clone(), stderr, stderr_tail.clone()));
        let (status_tx, status_rx) = watch::channel(None);
        tokio::spawn(watch_exit(child, status_tx));
        let pid_namespace = has_own_pid_namespace(pid);
        tracing::info!(agent = %command.name, pid, pid_namespace, program = %command.program.display(), "agent process started");
        if !pid_namespace {
            warn_uncontained_once();
        }
        Ok(SpawnedAgent {
            process: AgentProcess {
                probe: ProcessProbe {
                    name: command.name.clone(),
                    pid,
                    exit_status: status_rx,
                },
                stderr: stderr_tail,
            },
            stdin,
            stdout,
        })
    }

    pub(crate) fn probe(&self) -> &ProcessProbe {
        &self.probe
    }

    pub(crate) fn stderr(&self) -> &StderrTail {
        &self.stderr
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.probe.kill();
    }
}

impl ProcessProbe {
    /// The process id, which is also the id of the agent's process group.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGKILL to the whole process group. Harmless when it already exited.
    pub(crate) fn kill(&self) {
        let Ok(pid) = i32::try_from(self.pid) else {
            return;
        };
        match killpg(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) => tracing::debug!(agent = %self.name, pid, "killed agent process group"),
            Err(nix::errno::Errno::ESRCH) => {}
            Err(error) => {
                tracing::warn!(agent = %self.name, pid, %error, "could not kill agent process group")
            }
        }
    }

    /// The exit status, waiting up to `grace` for it: stdout can close a
    /// moment before the kernel reports the exit.
    pub(crate) async fn exit_status(&self, grace: Duration) -> Option<ExitStatus> {
        let mut status = self.exit_status.clone();
        let waited = tokio::time::timeout(grace, status.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(status)) => *status,
            _ => None,
        }
    }
}

/// Whether the process the daemon forked made a PID namespace for what it
/// starts (`pid_for_children` differs from the daemon's own).
fn has_own_pid_namespace(pid: u32) -> bool {
    let link = |path: String| std::fs::read_link(path).ok();
    match (
        link(format!("/proc/{pid}/ns/pid_for_children")),
        link("/proc/self/ns/pid_for_children".to_owned()),
    ) {
        (Some(agent), Some(daemon)) => agent != daemon,
        _ => false,
    }
}

/// Says once per process that the agents' helpers depend on something
/// outside the daemon to end with it.
fn warn_uncontained_once() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "agents run without a PID namespace of their own (creating one needs CAP_SYS_ADMIN): a helper that leaves an agent's process group outlives a daemon killed by SIGKILL unless the service manager's cgroup or the container ends it"
        );
    }
}

async fn watch_exit(mut child: Child, status_tx: watch::Sender<Option<ExitStatus>>) {
    match child.wait().await {
        Ok(status) => {
            status_tx.send_replace(Some(status));
        }
        Err(error) => tracing::warn!(%error, "could not wait for the agent process"),
    }
}

/// Forwards the agent's stderr line by line into `tracing`, keeping the
/// last lines in `tail`. tracing targets
/// are static, so the agent is named in the `agent` field of target
/// `agent_stderr` (filter it with `RUST_LOG=agent_stderr=warn`). Bad lines are
/// noted and skipped like on stdout.
async fn forward_stderr(agent: String, stderr: ChildStderr, tail: StderrTail) {
    let mut lines = FramedRead::new(stderr, FrameCodec::new(MAX_STDERR_LINE_BYTES));
    while let Some(Ok(frame)) = lines.next().await {
        match frame {
            Frame::Line(line) => {
                tail.push(&line);
                tracing::info!(target: "agent_stderr", agent = %agent, "{line}")
            }
            Frame::Oversized => {
                tracing::info!(target: "agent_stderr", agent = %agent, "(stderr line over {MAX_STDERR_LINE_BYTES} bytes skipped)")
            }
            Frame::NotUtf8 => {
                tracing::info!(target: "agent_stderr", agent = %agent, "(non-UTF-8 stderr line skipped)")
            }
        }
    }
    tail.end();
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// How long the test waits for the kernel to finish a thread's exit.
    const THREAD_EXIT_PATIENCE: Duration = Duration::from_secs(10);

    /// As root (CI), an agent runs as pid 2 of a PID namespace of its own,
    /// and its /proc is that namespace's: the daemon is not in it.
    #[tokio::test]
    async fn an_agent_of_a_root_daemon_has_its_own_pids_and_proc() {
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: a PID namespace needs CAP_SYS_ADMIN (CI runs as root)");
            return;
        }
        let daemon = std::process::id();
        let script =
            format!("echo $$; test -e /proc/{daemon} && echo daemon-visible; ls /proc | grep -c '^[0-9]'");
        let command = AgentCommand::new("sh", "sh")
            .args(["-c", script.as_str()])
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let spawned = AgentProcess::spawn(&command).expect("spawn sh");
        assert!(has_own_pid_namespace(spawned.process.probe().pid()));
        let mut lines = BufReader::new(spawned.stdout).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            seen.push(line);
        }
        let processes: usize = seen.last().and_then(|count| count.parse().ok()).expect("a count");
        assert_eq!(seen[0], "2", "the agent is pid 2 (init is 1): {seen:?}");
        assert!(!seen.contains(&"daemon-visible".to_owned()), "{seen:?}");
        assert!(processes <= 4, "init, sh, ls, grep at most: {seen:?}");
    }

    /// The parent-death signal follows the thread that forked: an agent
    /// started from a thread that then ends must live on (it is forked by
    /// the forking thread, which does not end).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn an_agent_outlives_the_thread_that_started_it() {
        let runtime = tokio::runtime::Handle::current();
        let command =
            AgentCommand::new("cat", "cat").env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let (spawned, thread) = std::thread::spawn(move || {
            let _entered = runtime.enter();
            (AgentProcess::spawn(&command), nix::unistd::gettid())
        })
        .join()
        .expect("the spawning thread");
        let mut spawned = spawned.expect("spawn cat");
        // The kernel sends the parent-death signal before it removes the
        // ended thread from /proc.
        let task = format!("/proc/self/task/{thread}");
        let deadline = tokio::time::Instant::now() + THREAD_EXIT_PATIENCE;
        while Path::new(&task).exists() {
            assert!(tokio::time::Instant::now() < deadline, "{task} still exists");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        spawned
            .stdin
            .write_all(b"still here\n")
            .await
            .expect("write to cat");
        let mut echoed = String::new();
        BufReader::new(spawned.stdout)
            .read_line(&mut echoed)
            .await
            .expect("read from cat");
        assert_eq!(
            echoed, "still here\n",
            "cat was killed with the thread that started it"
        );
    }
}
