//! `--workspace-repo`: a conversation's workspace as a detached worktree of
//! the operator's git repository (`git worktree add --detach`); once a
//! pruned workspace is deleted, `git worktree prune` drops its entry.
//!
//! `git` runs as a child process, bounded by [`GIT_TIMEOUT`], as the agents'
//! user when `--agent-user` is set: the worktree's files and its metadata in
//! the repository's `.git/worktrees/` must be the agent's to change, so
//! that user must own the repository (git also refuses a repository owned
//! by someone else).

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

    async fn git(&self, args: &[&OsStr]) -> Result<(), GitError> {
        let mut command = tokio::process::Command::new("git");
        command
            .arg("-C")
            .arg(&self.path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
            .await
            .map_err(|_| GitError::Timeout(GIT_TIMEOUT))??;
        if output.status.success() {
            return Ok(());
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
