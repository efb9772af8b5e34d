//! `--workspace-repo`: a conversation's workspace as a detached worktree of
//! the operator's git repository (`git worktree add --detach`); once a
//! pruned workspace is deleted, `git worktree prune` drops its entry.
//!
//! `git` runs as a child process, bounded by [`GIT_TIMEOUT`], as the agents'
//! user when `--agent-user` is set: the worktree's files and its metadata in
//! the repository's `.git/worktrees/` must be the agent's to change, so
//! that user must own the repository (git also refuses a repository owned
//! by someone else).
//!
//! That user owning the repository means an agent can write its
//! `.git/config` and `.git/hooks/`: every way git would run a program the
//! repository names is switched off for the daemon's git ([`hardened`]).
//! Hooks point at an empty path, fsmonitor is off, every filter driver the
//! repository's config defines is emptied (a checkout would run its
//! `smudge` or `process` program), submodules are not recursed into, and
//! the system's and the user's config files are not read. git starts from
//! an empty environment with only `PATH`, so even a program this misses
//! would find none of the daemon's secrets (`ACP_BRIDGE_SECRET_KEY`, the
//! bunker URI, provider keys).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// One `git` command takes at most this (a checkout of a large tree).
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most of git's stderr kept for the log.
const MAX_STDERR_CHARS: usize = 500;

/// Why a git command did not do its work.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("git took longer than {0:?}")]
    Timeout(Duration),
    #[error("git failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
}

/// The operator's repository.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    path: PathBuf,
    /// The agents' uid and gid, which git runs as.
    user: Option<(u32, u32)>,
}

impl Repo {
    pub(crate) fn new(path: PathBuf, user: Option<(u32, u32)>) -> Self {
        Repo { path, user }
    }

    /// Makes the empty directory `dir` a detached worktree of the
    /// repository's `HEAD`.
    pub(crate) async fn add_worktree(&self, dir: &Path) -> Result<(), GitError> {
        self.git(&[
            OsStr::new("worktree"),
            OsStr::new("add"),
            OsStr::new("--detach"),
            dir.as_os_str(),
        ])
        .await
    }

    /// Forgets the worktrees whose directories are gone.
    pub(crate) async fn prune_worktrees(&self) -> Result<(), GitError> {
        self.git(&[OsStr::new("worktree"), OsStr::new("prune")]).await
    }

    /// Runs `git <args>` on the repository with every program it could
    /// name switched off (see the module's doc).
    async fn git(&self, args: &[&OsStr]) -> Result<(), GitError> {
        let drivers = self.filter_drivers().await?;
        let mut command = self.command();
        command.args(hardened(&drivers)).args(args);
        self.run(command).await.map(drop)
    }

    /// The names of the filter drivers the repository's config (its
    /// worktrees' too, with what they include) defines: `filter.<name>.<key>` entries.
    async fn filter_drivers(&self) -> Result<BTreeSet<String>, GitError> {
        let mut command = self.command();
        // `git config` reads config and runs nothing it names.
        command.args([
            "config",
            "--includes",
            "--null",
            "--name-only",
            "--get-regexp",
            r"^filter\.",
        ]);
        let listed = match self.run(command).await {
            Ok(stdout) => stdout,
            // Exit 1: no entry matches.
            Err(GitError::Failed { status, .. }) if status.ends_with("exit status: 1") => Vec::new(),
            Err(error) => return Err(error),
        };
        Ok(driver_names(&listed))
    }

    /// `git -C <repo>` as the agents' user, from an empty environment.
    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("git");
        command
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
            )
            .envs(CONFIG_ENV)
            .arg("-C")
            .arg(&self.path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Runs `command` within [`GIT_TIMEOUT`]; its stdout.
    async fn run(&self, mut command: tokio::process::Command) -> Result<Vec<u8>, GitError> {
        let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
            .await
            .map_err(|_| GitError::Timeout(GIT_TIMEOUT))??;
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(GitError::Failed {
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr)
                .trim()
                .chars()
                .take(MAX_STDERR_CHARS)
                .collect(),
        })
    }
}

/// `PATH` for git when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The environment git gets besides `PATH`: no system or user config
/// (they are not the repository's, but a `HOME` the agents' user owns
/// would be theirs), no prompt for credentials, a fixed locale.
const CONFIG_ENV: [(&str, &str); 5] = [
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("HOME", "/nonexistent"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("LC_ALL", "C"),
];

/// `-c` options that switch off every program the repository's config can
/// make git run while it adds or prunes a worktree. A `-c` given on the
/// command line wins over the repository's config. A filter driver with an
/// empty `smudge`, `clean` and `process` is no filter at all (git skips
/// an empty command), and not `required`, so the checkout goes on.
fn hardened(filter_drivers: &BTreeSet<String>) -> Vec<String> {
    let mut options: Vec<String> = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "submodule.recurse=false",
        "core.attributesFile=/dev/null",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    for driver in filter_drivers {
        for key in ["smudge=", "clean=", "process=", "required=false"] {
            options.push(format!("filter.{driver}.{key}"));
        }
    }
    options
        .into_iter()
        .flat_map(|option| ["-c".to_owned(), option])
        .collect()
}

/// The driver names of `git config --null --name-only` output listing
/// `filter.<name>.<key>` entries (a name may hold dots; the key is last).
fn driver_names(listed: &[u8]) -> BTreeSet<String> {
    listed
        .split(|byte| *byte == 0)
        .filter_map(|entry| {
            let entry = std::str::from_utf8(entry).ok()?;
            let rest = entry.strip_prefix("filter.")?;
            let (driver, _key) = rest.rsplit_once('.')?;
            Some(driver.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_keep_dots_in_names_and_drop_the_key() {
        let listed = b"filter.lfs.smudge\0filter.lfs.process\0filter.a.b.clean\0\0";
        let names: Vec<String> = driver_names(listed).into_iter().collect();
        assert_eq!(names, ["a.b", "lfs"]);
    }

    #[test]
    fn every_listed_driver_is_emptied_and_not_required() {
        let options = hardened(&["evil".to_owned()].into());
        let set: Vec<&str> = options.chunks(2).map(|pair| pair[1].as_str()).collect();
        for wanted in [
            "core.hooksPath=/dev/null",
            "core.fsmonitor=false",
            "filter.evil.smudge=",
            "filter.evil.process=",
            "filter.evil.required=false",
        ] {
            assert!(set.contains(&wanted), "{wanted} in {set:?}");
        }
        assert!(options.chunks(2).all(|pair| pair[0] == "-c"));
    }
}
