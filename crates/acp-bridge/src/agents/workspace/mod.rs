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
//! turn that starts meanwhile and delete its files under it. Every one of
//! these steps goes through a descriptor of `conversations/` and follows
//! no link ([`root_dir`]): the daemon may be root, and the agents change
//! what lies beneath. `send_file` reads beneath the same directory (see
//! `send_file`).

mod git;
mod owners;
mod root_dir;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use acp_client::AgentUser;
use clap::ValueEnum;
use nostr_sdk::hashes::{Hash as _, sha256};

use acp_bridge_core::mention::ConversationKey;
use owners::Owners;
pub(crate) use owners::{ConversationUids, OwnerError};
pub(crate) use root_dir::CONVERSATIONS_DIR;
use root_dir::ConversationsDir;

/// Hex digits of the key's hash in a workspace's name: 64 bits, no
/// collision among any plausible number of conversations.
const DIR_NAME_HEX: usize = 16;
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
pub(crate) enum WorkspaceError {
    #[error("cannot prepare the workspace `{path}`: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// No uid of `--agent-uids` for it, or the store could not say.
    #[error(transparent)]
    NoOwner(#[from] OwnerError),
}

/// The conversations' working directories. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Workspaces {
    root: Arc<Path>,
    mode: WorkspaceMode,
    /// Who owns each workspace (`--agent-user`, `--agent-uids`), none of
    /// whom may change `--cwd`.
    owners: Owners,
    /// `--workspace-repo`: new workspaces are worktrees of it.
    repo: Option<git::Repo>,
    /// See [`Workspaces::lock_use`].
    in_use: Arc<std::sync::Mutex<()>>,
}

impl Workspaces {
    /// Workspaces under `root` (`--cwd`, canonical), owned by `owner`.
    pub(crate) fn new(root: &Path, mode: WorkspaceMode, owner: Option<AgentUser>) -> Self {
        Workspaces {
            root: root.into(),
            mode,
            owners: owner.map_or(Owners::Daemon, Owners::One),
            repo: None,
            in_use: Arc::default(),
        }
    }

    /// New workspaces become worktrees of the repository at `repo` (never
    /// with `--agent-uids`: the repository belongs to one user).
    pub(crate) fn with_repo(mut self, repo: Option<PathBuf>) -> Self {
        let user = self.owners.checked().map(|user| (user.uid, user.gid));
        self.repo = repo.map(|path| git::Repo::new(path, user));
        self
    }

    /// `--agent-uids`: each workspace is owned by its conversation's uid.
    pub(crate) fn with_conversation_uids(mut self, uids: Option<ConversationUids>) -> Self {
        if let Some(uids) = uids {
            self.owners = Owners::PerConversation(uids);
        }
        self
    }

    /// Whether each conversation's agent runs as a uid of its own (`--agent-uids`).
    pub(crate) fn per_conversation_owners(&self) -> bool {
        matches!(self.owners, Owners::PerConversation(_))
    }

    /// Who `conversation`'s workspace and agent belong to (`None`: the
    /// daemon's user); with `--agent-uids`, its uid, assigned on first use
    /// and with its workspace as `HOME`.
    pub(crate) fn owner_of(&self, conversation: &ConversationKey) -> Result<Option<AgentUser>, OwnerError> {
        self.owners.of(conversation, self.dir_of(conversation))
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
        self.prepare_owned(conversation).await.map(|(dir, _)| dir)
    }

    /// [`prepare`](Self::prepare), and who owns the workspace (`None`: the
    /// daemon's user). With `--agent-uids` the conversation's uid is taken
    /// (or assigned) under the same lock as pruning's check, move and
    /// freeing of a uid: an agent started as the uid returned here never
    /// shares it with another conversation.
    pub(crate) async fn prepare_owned(
        &self,
        conversation: &ConversationKey,
    ) -> Result<(PathBuf, Option<AgentUser>), WorkspaceError> {
        let dir = self.dir_of(conversation);
        if self.mode == WorkspaceMode::Shared {
            return Ok((dir, self.owners.checked().cloned()));
        }
        let failed = |error| WorkspaceError::Io {
            path: dir.clone(),
            error,
        };
        let (owner, created) = {
            let _using = self.lock_use();
            let owner = self.owner_of(conversation)?;
            let conversations = self.conversations().map_err(failed)?;
            let name = dir_name(conversation);
            let created = conversations
                .create_workspace(&name, owner.as_ref())
                .map_err(failed)?;
            conversations.touch(&name).map_err(failed)?;
            (owner, created)
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
        self.mark_used(conversation);
        Ok((dir, owner))
    }

    /// The conversation's live session takes a turn: its workspace is in
    /// use (so not pruned as idle).
    pub(crate) fn mark_used(&self, conversation: &ConversationKey) {
        if self.mode == WorkspaceMode::Shared {
            return;
        }
        let _using = self.lock_use();
        let touched = self
            .conversations()
            .and_then(|conversations| conversations.touch(&dir_name(conversation)));
        if let Err(error) = touched {
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
        let keep: BTreeSet<String> = live.iter().map(dir_name).collect();
        let conversations = match self.conversations().and_then(|dir| Ok((dir.names()?, dir))) {
            Ok(opened) => opened,
            Err(error) => {
                tracing::error!(%error, "cannot prune idle workspaces");
                return Vec::new();
            }
        };
        let (names, conversations) = conversations;
        let mut removed = Vec::new();
        for name in names {
            // One a pass before could not finish removing.
            if name.starts_with(TOMBSTONE_PREFIX) {
                remove(&conversations, &name);
                continue;
            }
            if keep.contains(&name) {
                continue;
            }
            // Checked and moved aside under the lock a turn takes to use a
            // workspace: a turn starting now gets a fresh directory, never
            // one being deleted.
            let tombstone = format!("{TOMBSTONE_PREFIX}{name}");
            let moved = {
                let _using = self.lock_use();
                // Not followed: a symlink planted here is not a workspace.
                let moved =
                    conversations.idle(&name, idle_since) && conversations.rename(&name, &tombstone).is_ok();
                // Freed with the move, under the lock a turn takes its uid
                // under: a turn that starts now is given a uid afresh.
                if moved {
                    self.free_uid_of(&name);
                }
                moved
            };
            if moved {
                remove(&conversations, &tombstone);
                removed.push(self.root.join(CONVERSATIONS_DIR).join(name));
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

    /// With `--agent-uids`, the uid of the conversation whose workspace
    /// `name` was moved aside is free again: the next conversation given it
    /// starts in a fresh workspace.
    fn free_uid_of(&self, name: &str) {
        let Owners::PerConversation(each) = &self.owners else {
            return;
        };
        let held = match each.uids.held() {
            Ok(held) => held,
            Err(error) => {
                tracing::error!(%error, "cannot free the agent uid of a pruned workspace");
                return;
            }
        };
        for (conversation, uid) in held.into_iter().filter(|(key, _)| dir_name(key) == name) {
            match each.uids.free(&conversation) {
                Ok(()) => tracing::info!(%conversation, uid, "agent uid freed with its pruned workspace"),
                Err(error) => tracing::error!(%conversation, uid, %error, "cannot free the agent uid"),
            }
        }
    }

    /// `conversations/`, opened and checked (see [`root_dir`]).
    fn conversations(&self) -> std::io::Result<ConversationsDir> {
        ConversationsDir::open(&self.root, self.owners.checked())
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

/// Deletes the moved-aside workspace `name`, saying so if it cannot.
fn remove(conversations: &ConversationsDir, name: &str) {
    if let Err(error) = conversations.remove_tree(name, TOMBSTONE_PREFIX) {
        tracing::warn!(name, %error, "cannot remove an idle workspace");
    }
}

/// How long ago `retention` is from now, for [`Workspaces::prune`].
pub(crate) fn idle_since(retention: Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(retention)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::root_dir::{CONVERSATIONS_DIR_MODE, WORKSPACE_MODE};
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

    /// An old directory outside the workspace root, in `outside/`.
    fn outside_victim(root: &Path) -> PathBuf {
        let victim = root.with_extension("outside").join("victim");
        let _ = std::fs::remove_dir_all(victim.parent().unwrap());
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("precious"), "not the agents'").unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::open(&victim)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        victim
    }

    #[tokio::test]
    async fn pruning_never_follows_a_conversations_dir_swapped_for_a_link() {
        let root = root("swapped");
        let each = Workspaces::new(&root, WorkspaceMode::PerConversation, None);
        each.prepare(&key("a")).await.unwrap();
        let victim = outside_victim(&root);
        // The swap an agent that could write --cwd would make.
        let conversations = root.join(CONVERSATIONS_DIR);
        std::fs::rename(&conversations, root.join("moved")).unwrap();
        std::os::unix::fs::symlink(victim.parent().unwrap(), &conversations).unwrap();

        let removed = each
            .prune(idle_since(Duration::from_secs(60)), &BTreeSet::new())
            .await;
        assert!(removed.is_empty(), "{removed:?}");
        assert!(victim.join("precious").exists(), "root deleted outside --cwd");
        let refused = each
            .prepare(&key("b"))
            .await
            .expect_err("a link is no conversations dir");
        assert!(refused.to_string().contains("is not a directory"), "{refused}");
        std::fs::remove_dir_all(victim.parent().unwrap()).unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[tokio::test]
    async fn a_deep_tree_with_links_out_is_removed_without_following_them() {
        let root = root("deep");
        let each = Workspaces::new(&root, WorkspaceMode::PerConversation, None);
        let dir = each.prepare(&key("deep")).await.unwrap();
        let victim = outside_victim(&root);
        // Deeper than the descriptors one removal keeps open, several times.
        let mut deepest = dir.clone();
        for level in 0..300 {
            deepest = deepest.join(format!("d{level}"));
        }
        std::fs::create_dir_all(&deepest).unwrap();
        std::fs::write(deepest.join("file"), "deep").unwrap();
        std::os::unix::fs::symlink(&victim, deepest.join("out")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("out")).unwrap();
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();

        let removed = each
            .prune(idle_since(Duration::from_secs(60)), &BTreeSet::new())
            .await;
        assert_eq!(removed, std::slice::from_ref(&dir));
        assert!(!dir.exists());
        let left = std::fs::read_dir(root.join(CONVERSATIONS_DIR)).unwrap().count();
        assert_eq!(left, 0, "nothing spilled stays behind");
        assert!(victim.join("precious").exists(), "a link was followed");
        std::fs::remove_dir_all(victim.parent().unwrap()).unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[tokio::test]
    async fn a_root_the_agents_could_change_or_a_conversations_dir_not_the_daemons_is_refused() {
        let root = root("open-root");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let agents = Some(crate::base::isolation::stranger());
        let each = Workspaces::new(&root, WorkspaceMode::PerConversation, agents);
        let refused = each.prepare(&key("a")).await.expect_err("--cwd open to anyone");
        assert!(refused.to_string().contains("is writable by anyone"), "{refused}");

        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let conversations = root.join(CONVERSATIONS_DIR);
        std::fs::create_dir(&conversations).unwrap();
        std::fs::set_permissions(&conversations, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = each
            .prepare(&key("a"))
            .await
            .expect_err("conversations/ open to anyone");
        assert!(
            refused.to_string().contains("writable by no one else"),
            "{refused}"
        );
        std::fs::remove_dir_all(root).unwrap();
    }
}
