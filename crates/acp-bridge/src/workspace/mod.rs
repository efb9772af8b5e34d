//! Which directory each conversation's agent works in (`--workspace`).
//!
//! `shared` (the default): every session runs in `--cwd`, as before.
//! `per-conversation`: each conversation's sessions run in a directory of
//! its own, `<cwd>/conversations/<16 hex of sha256(conversation key)>`,
//! created on first use (0700, owned by `--agent-user` when set) under a
//! `conversations/` dir the daemon owns (0711: agents can enter their own
//! directory but neither list nor rename the others'). The name is a pure
//! function of the key, so a restarted daemon finds the same directory
//! and a reopened session keeps its files.
//!
//! With `--workspace-repo`, a new workspace is made a detached worktree of
//! that repository ([`git`]). When git fails (not a repository, not the
//! agents' to write, a timeout), the conversation works in the plain
//! directory and the log says why: a broken repository must not make the
//! bot unable to answer at all, and the agent can still clone or fetch.
//!
//! A directory's modification time says when its conversation last had a
//! turn (each lease touches it); [`Workspaces::prune`] removes those idle
//! longer than `--retention`, except the conversations with a live
//! session. It first renames one aside under the lock a lease takes to use
//! a workspace, then deletes it and lets `git worktree prune` drop a
//! worktree's entry: `git worktree remove` on the live path would race a
//! turn that starts meanwhile and delete its files under it. `send_file`
//! reads beneath the same directory (see `send_file`).

mod git;

use std::collections::BTreeSet;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::ValueEnum;
use nostr_sdk::hashes::{Hash as _, sha256};

use crate::mention::ConversationKey;

/// Where conversations' workspaces live, under `--cwd`.
pub(crate) const CONVERSATIONS_DIR: &str = "conversations";
/// Hex digits of the key's hash in a workspace's name: 64 bits, no
/// collision among any plausible number of conversations.
const DIR_NAME_HEX: usize = 16;
/// `conversations/`: the daemon's, enterable by the agents' user.
const CONVERSATIONS_DIR_MODE: u32 = 0o711;
/// A conversation's workspace: its agent's only.
const WORKSPACE_MODE: u32 = 0o700;
/// The name a pruned workspace is moved to before it is deleted.
const TOMBSTONE_PREFIX: &str = ".pruned-";

/// `--workspace`: which directory a conversation's sessions run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum WorkspaceMode {
    /// Every session in `--cwd`.
    #[default]
    Shared,
    /// Each conversation in a directory of its own under `--cwd`.
    PerConversation,
}

/// Why a conversation's workspace could not be made ready.
#[derive(Debug, thiserror::Error)]
#[error("cannot prepare the workspace `{path}`: {error}")]
pub(crate) struct WorkspaceError {
    path: PathBuf,
    error: std::io::Error,
}

/// The conversations' working directories. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Workspaces {
    root: Arc<Path>,
    mode: WorkspaceMode,
    /// `--agent-user`'s uid and gid: the owner of each workspace.
    owner: Option<(u32, u32)>,
    /// `--workspace-repo`: new workspaces are worktrees of it.
    repo: Option<git::Repo>,
    /// See [`Workspaces::lock_use`].
    in_use: Arc<std::sync::Mutex<()>>,
}

impl Workspaces {
    /// Workspaces under `root` (`--cwd`, canonical), owned by `owner`.
    pub(crate) fn new(root: &Path, mode: WorkspaceMode, owner: Option<(u32, u32)>) -> Self {
        Workspaces {
            root: root.into(),
            mode,
            owner,
            repo: None,
            in_use: Arc::default(),
        }
    }

    /// New workspaces become worktrees of the repository at `repo`.
    pub(crate) fn with_repo(mut self, repo: Option<PathBuf>) -> Self {
        self.repo = repo.map(|path| git::Repo::new(path, self.owner));
        self
    }

    /// `--cwd`, which holds every workspace.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace of `conversation` relative to [`root`](Self::root)
    /// (empty when shared).
    pub(crate) fn relative_dir_of(&self, conversation: &ConversationKey) -> PathBuf {
        match self.mode {
            WorkspaceMode::Shared => PathBuf::new(),
            WorkspaceMode::PerConversation => Path::new(CONVERSATIONS_DIR).join(dir_name(conversation)),
        }
    }

    /// The directory `conversation`'s sessions run in.
    pub(crate) fn dir_of(&self, conversation: &ConversationKey) -> PathBuf {
        self.root.join(self.relative_dir_of(conversation))
    }

    /// The directory of `conversation`, created if it is not yet (a
    /// worktree of `--workspace-repo` if set), and marked used now.
    pub(crate) async fn prepare(&self, conversation: &ConversationKey) -> Result<PathBuf, WorkspaceError> {
        let dir = self.dir_of(conversation);
        if self.mode == WorkspaceMode::Shared {
            return Ok(dir);
        }
        let failed = |path: &Path| {
            let path = path.to_owned();
            move |error| WorkspaceError { path, error }
        };
        let parent = self.root.join(CONVERSATIONS_DIR);
        let created = {
            let _using = self.lock_use();
            create(&parent, CONVERSATIONS_DIR_MODE, None).map_err(failed(&parent))?;
            let created = create(&dir, WORKSPACE_MODE, self.owner).map_err(failed(&dir))?;
            touch(&dir).map_err(failed(&dir))?;
            created
        };
        if created {
            let worktree = match &self.repo {
                None => false,
                Some(repo) => match repo.add_worktree(&dir).await {
                    Ok(()) => true,
                    Err(error) => {
                        tracing::error!(%conversation, path = %dir.display(), %error, "cannot make the workspace a worktree of --workspace-repo; the conversation works in a plain directory");
                        false
                    }
                },
            };
            tracing::info!(%conversation, path = %dir.display(), worktree, "workspace created");
        }
        touch(&dir).map_err(failed(&dir))?;
        Ok(dir)
    }

    /// The conversation's live session takes a turn: its workspace is in
    /// use (so not pruned as idle).
    pub(crate) fn mark_used(&self, conversation: &ConversationKey) {
        if self.mode == WorkspaceMode::Shared {
            return;
        }
        let _using = self.lock_use();
        if let Err(error) = touch(&self.dir_of(conversation)) {
            tracing::warn!(%conversation, %error, "cannot mark the workspace used");
        }
    }

    /// Removes the workspaces not used since `idle_since`, except those of
    /// the conversations `live` (sessions alive now); the paths removed.
    /// Shared mode removes nothing.
    pub(crate) async fn prune(
        &self,
        idle_since: SystemTime,
        live: &BTreeSet<ConversationKey>,
    ) -> Vec<PathBuf> {
        if self.mode == WorkspaceMode::Shared {
            return Vec::new();
        }
        let keep: BTreeSet<PathBuf> = live.iter().map(|key| self.dir_of(key)).collect();
        let conversations = self.root.join(CONVERSATIONS_DIR);
        let Ok(entries) = std::fs::read_dir(&conversations) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            // One a pass before could not finish removing.
            if name.starts_with(TOMBSTONE_PREFIX) {
                remove(&path);
                continue;
            }
            if keep.contains(&path) {
                continue;
            }
            // Checked and moved aside under the lock a turn takes to use a
            // workspace: a turn starting now gets a fresh directory, never
            // one being deleted.
            let tombstone = conversations.join(format!("{TOMBSTONE_PREFIX}{name}"));
            let moved = {
                let _using = self.lock_use();
                // Not followed: a symlink planted here is not a workspace.
                let idle = std::fs::symlink_metadata(&path)
                    .is_ok_and(|meta| meta.is_dir() && meta.modified().is_ok_and(|used| used < idle_since));
                idle && std::fs::rename(&path, &tombstone).is_ok()
            };
            if moved {
                remove(&tombstone);
                removed.push(path);
            }
        }
        if let Some(repo) = &self.repo
            && !removed.is_empty()
            && let Err(error) = repo.prune_worktrees().await
        {
            tracing::warn!(%error, "cannot prune the worktrees of --workspace-repo");
        }
        removed
    }

    /// Held while a workspace is created or marked used, and while pruning
    /// decides on one and moves it aside.
    fn lock_use(&self) -> std::sync::MutexGuard<'_, ()> {
        self.in_use
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The workspace name of `conversation`: stable across restarts, safe as
/// a file name whatever the key holds.
fn dir_name(conversation: &ConversationKey) -> String {
    let hash = sha256::Hash::hash(conversation.as_str().as_bytes()).to_string();
    hash[..DIR_NAME_HEX].to_owned()
}

/// Creates `dir` with `mode` (not following a symlink put in its place),
/// owned by `owner` when given; whether it was created now.
fn create(dir: &Path, mode: u32, owner: Option<(u32, u32)>) -> std::io::Result<bool> {
    match DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {
            // The umask may have taken bits off: set exactly.
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
            }
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            if std::fs::symlink_metadata(dir)?.is_dir() {
                Ok(false)
            } else {
                Err(std::io::Error::other("it exists and is not a directory"))
            }
        }
        Err(error) => Err(error),
    }
}

/// Deletes the moved-aside workspace `path`, saying so if it cannot.
fn remove(path: &Path) {
    if let Err(error) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), %error, "cannot remove an idle workspace");
    }
}

/// Marks `dir` used now (its modification time).
fn touch(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.set_modified(SystemTime::now())
}

/// How long ago `retention` is from now, for [`Workspaces::prune`].
pub(crate) fn idle_since(retention: Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(retention)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("acp-bridge-ws-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn key(text: &str) -> ConversationKey {
        ConversationKey::from_journal(text)
    }

    #[tokio::test]
    async fn shared_is_the_root_and_per_conversation_a_stable_dir_of_each() {
        let root = root("names");
        let shared = Workspaces::new(&root, WorkspaceMode::Shared, None);
        assert_eq!(shared.prepare(&key("a")).await.unwrap(), root);
        assert!(!root.join(CONVERSATIONS_DIR).exists(), "shared creates nothing");

        let each = Workspaces::new(&root, WorkspaceMode::PerConversation, None);
        let a = each.prepare(&key("group:a")).await.unwrap();
        let b = each.prepare(&key("group:b")).await.unwrap();
        assert_ne!(a, b);
        assert_eq!(a, each.dir_of(&key("group:a")), "the same dir each time");
        assert_eq!(a.parent().unwrap(), root.join(CONVERSATIONS_DIR));
        assert_eq!(a.file_name().unwrap().len(), DIR_NAME_HEX);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a), WORKSPACE_MODE);
        assert_eq!(mode(&root.join(CONVERSATIONS_DIR)), CONVERSATIONS_DIR_MODE);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[tokio::test]
    async fn idle_workspaces_go_but_live_and_recent_ones_stay() {
        let root = root("prune");
        let each = Workspaces::new(&root, WorkspaceMode::PerConversation, None);
        let (old, live, recent) = (key("old"), key("live"), key("recent"));
        for conversation in [&old, &live, &recent] {
            let dir = each.prepare(conversation).await.unwrap();
            std::fs::write(dir.join("file"), "x").unwrap();
        }
        let leftover = root
            .join(CONVERSATIONS_DIR)
            .join(format!("{TOMBSTONE_PREFIX}gone"));
        std::fs::create_dir_all(leftover.join("deep")).unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        for conversation in [&old, &live] {
            std::fs::File::open(each.dir_of(conversation))
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
        }
        let removed = each
            .prune(idle_since(Duration::from_secs(60)), &[live.clone()].into())
            .await;
        assert_eq!(removed, [each.dir_of(&old)]);
        assert!(each.dir_of(&live).exists() && each.dir_of(&recent).exists());
        assert!(!leftover.exists(), "what a pass before left is removed");
        let entries = std::fs::read_dir(root.join(CONVERSATIONS_DIR)).unwrap().count();
        assert_eq!(entries, 2, "no tombstone stays");
        let fresh = each.prepare(&old).await.unwrap();
        assert!(!fresh.join("file").exists(), "the conversation starts afresh");
        std::fs::remove_dir_all(root).unwrap();
    }
}
