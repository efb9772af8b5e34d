//! Keeps agents of `--agent-user` away from the state dir.
//!
//! With `--agent-user`, agents and the tools they run are another user
//! than the daemon, which runs as root. The key file is the operator's to
//! protect (config warns when it is open to others); the state dir is the
//! daemon's, and it holds every conversation and reply, and the agent
//! process groups that the root daemon ends at its next start. So:
//! - the daemon refuses to start ([`check_state_dir`], at validation) when
//!   the agents could change the state dir: when it lies inside their
//!   working directory (where their tools create, move and delete files),
//!   or when their user may write it, a file in it, or a directory above it
//!   (which lets it put a directory of its own in its place). An agent that
//!   could plant a row could make the root daemon kill a process of its
//!   choosing, or answer as the bot on its behalf. Only the mode bits and
//!   owners are read; ACLs are not.
//! - once the store opened (and so created) it, a state dir still readable
//!   by others is closed to 0700 ([`prepare`]): the store creates a new one
//!   0700, but one that already exists keeps its mode.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use acp_client::AgentUser;

/// Why the state dir is unsafe with agents of `--agent-user`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum StateDirError {
    #[error(
        "`{state_dir}` lies inside the agents' working directory `{cwd}` (--cwd), where their tools change files; put the state dir elsewhere"
    )]
    InsideAgentCwd { state_dir: PathBuf, cwd: PathBuf },
    #[error(
        "`{state_dir}` can be changed by the agents' user `{user}` (--agent-user): {reason}; the daemon acts on the state dir as root, so only it may write there"
    )]
    WritableByAgents {
        state_dir: PathBuf,
        user: String,
        reason: String,
    },
    #[error("cannot resolve `{state_dir}`: {reason}")]
    Unresolved { state_dir: PathBuf, reason: String },
}

/// Refuses a state dir that agents running as `user` in `cwd` could
/// change (see the module's doc). `cwd` is canonical; `state_dir` need not
/// exist yet.
pub(crate) fn check_state_dir(state_dir: &Path, cwd: &Path, user: &AgentUser) -> Result<(), StateDirError> {
    let resolved = resolve(state_dir).map_err(|error| StateDirError::Unresolved {
        state_dir: state_dir.to_owned(),
        reason: error.to_string(),
    })?;
    if resolved.starts_with(cwd) {
        return Err(StateDirError::InsideAgentCwd {
            state_dir: resolved,
            cwd: cwd.to_owned(),
        });
    }
    let writable = |reason: String| StateDirError::WritableByAgents {
        state_dir: resolved.clone(),
        user: user.name.clone(),
        reason,
    };
    if let Ok(metadata) = std::fs::metadata(&resolved) {
        if let Some(how) = access(&metadata, user) {
            return Err(writable(format!("it {how}")));
        }
        for entry in std::fs::read_dir(&resolved).into_iter().flatten().flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if let Some(how) = access(&metadata, user) {
                return Err(writable(format!("`{}` in it {how}", entry.path().display())));
            }
        }
    }
    for ancestor in resolved.ancestors().skip(1) {
        let Ok(metadata) = std::fs::metadata(ancestor) else {
            continue; // not created yet: the store creates it as the daemon's user
        };
        let sticky = metadata.mode() & 0o1000 != 0;
        match access(&metadata, user) {
            Some(how) if !sticky || metadata.uid() == user.uid => {
                return Err(writable(format!(
                    "`{}` above it {how}, so the agents can put a directory of their own in its place",
                    ancestor.display()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Refuses per-conversation workspaces under a `cwd` that agents running
/// as `user` could change: the daemon creates, renames and deletes
/// directories beneath `cwd/conversations/`, and an agent that could
/// replace `conversations/` with a link would point those acts elsewhere.
pub(crate) fn check_workspace_root(cwd: &Path, user: &AgentUser) -> Result<(), String> {
    let metadata =
        std::fs::metadata(cwd).map_err(|error| format!("cannot read `{}`: {error}", cwd.display()))?;
    match access(&metadata, user) {
        Some(how) => Err(format!(
            "`{}` can be changed by the agents' user `{}` (--agent-user): it {how}; with --workspace per-conversation the daemon creates and deletes workspaces beneath it as root, so only the daemon may write there (give the agents a directory of their own inside it, or use --workspace shared)",
            cwd.display(),
            user.name
        )),
        None => Ok(()),
    }
}

/// With `--agent-uids`, `cwd` must be the daemon's and writable by no one
/// else: the conversations' uids are many, so no group or other bit is safe.
pub(crate) fn check_daemons_only(cwd: &Path) -> Result<(), String> {
    let metadata =
        std::fs::metadata(cwd).map_err(|error| format!("cannot read `{}`: {error}", cwd.display()))?;
    let daemon = nix::unistd::geteuid().as_raw();
    let mode = metadata.mode() & 0o7777;
    if metadata.uid() != daemon || mode & 0o022 != 0 {
        return Err(format!(
            "`{}` is owned by uid {} with mode {mode:o}; with --agent-uids it must be the daemon's (uid {daemon}) and writable by no one else",
            cwd.display(),
            metadata.uid()
        ));
    }
    Ok(())
}

/// How `user` may change a file or directory with `metadata`, if it may:
/// as its owner (who can always change the mode), through its group, or as
/// anyone.
pub(crate) fn access(metadata: &std::fs::Metadata, user: &AgentUser) -> Option<String> {
    let mode = metadata.mode() & 0o7777;
    if metadata.uid() == user.uid {
        return Some(format!("is owned by it (mode {mode:o})"));
    }
    let in_group = metadata.gid() == user.gid || user.groups.contains(&metadata.gid());
    if in_group && mode & 0o020 != 0 {
        return Some(format!(
            "is writable by its group {} (mode {mode:o})",
            metadata.gid()
        ));
    }
    if mode & 0o002 != 0 {
        return Some(format!("is writable by anyone (mode {mode:o})"));
    }
    None
}

/// `path` made absolute with `..` and symlinks resolved as far as it
/// exists; the rest, not created yet, appended as given.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::env::current_dir()?.join(path);
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(canonical) => {
                return Ok(rest
                    .iter()
                    .rev()
                    .fold(canonical, |path: PathBuf, part| match part {
                        Component::ParentDir => path.parent().map(Path::to_path_buf).unwrap_or(path),
                        Component::Normal(name) => path.join(name),
                        _ => path,
                    }));
            }
            Err(error) => {
                let (Some(parent), Some(last)) = (existing.parent(), existing.components().next_back())
                else {
                    return Err(error);
                };
                rest.push(last);
                existing = parent;
            }
        }
    }
}

/// Logs who agents run as, and closes the state dir to other users. Call
/// once the store has opened (and so created) the state dir. Takes the
/// agents' user and working dir rather than the whole configuration, so
/// that `config` (which calls [`check_state_dir`]) is not imported back.
pub(crate) fn prepare(agent_user: Option<&AgentUser>, agent_cwd: &Path, state_dir: &Path) {
    let Some(user) = agent_user else {
        return;
    };
    tracing::info!(
        user = %user.name,
        uid = user.uid,
        gid = user.gid,
        cwd = %agent_cwd.display(),
        "agents run as another user"
    );
    close_to_others(state_dir);
}

fn close_to_others(dir: &Path) {
    let Ok(metadata) = std::fs::metadata(dir) else {
        return;
    };
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return;
    }
    match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700)) {
        Ok(()) => tracing::warn!(
            path = %dir.display(),
            was = format!("{mode:o}"),
            "the state dir was open to other users (the agents' among them); it is now 0700"
        ),
        Err(error) => tracing::error!(
            path = %dir.display(),
            %error,
            "the state dir is open to other users and cannot be closed; agents may read it"
        ),
    }
}

/// An agent user that owns nothing on the machine and is in none of its
/// groups, for tests of what such a user could change.
#[cfg(test)]
pub(crate) fn stranger() -> AgentUser {
    AgentUser {
        name: "agent".to_owned(),
        uid: 4_000_123,
        gid: 4_000_123,
        groups: vec![4_000_123],
        home: PathBuf::from("/nonexistent"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn an_open_state_dir_is_closed_to_group_and_others() {
        let dir = std::env::temp_dir().join(format!("acp-bridge-isolation-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        close_to_others(&dir);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(mode, 0o700);
    }

    /// A scratch base (under the sticky, root-owned temp dir) with an
    /// agents' working directory and a state dir of `mode` beside it.
    fn layout(label: &str, mode: u32) -> (ScratchDir, PathBuf, PathBuf) {
        let base = ScratchDir::new(label);
        let (cwd, state) = (base.path().join("workspace"), base.path().join("state"));
        for dir in [&cwd, &state] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(mode)).unwrap();
        let cwd = std::fs::canonicalize(&cwd).unwrap();
        (base, cwd, state)
    }

    fn reason(result: Result<(), StateDirError>) -> String {
        match result {
            Err(StateDirError::WritableByAgents { reason, .. }) => reason,
            other => panic!("expected a refusal for writability, got {other:?}"),
        }
    }

    #[test]
    fn a_state_dir_only_the_daemon_can_write_is_accepted() {
        let (_base, cwd, state) = layout("state-ok", 0o700);
        std::fs::write(state.join("acp-bridge.sqlite3"), b"").unwrap();
        assert_eq!(check_state_dir(&state, &cwd, &stranger()), Ok(()));
        // Not created yet: nothing of it can be written by the agents.
        assert_eq!(
            check_state_dir(&state.join("new/deeper"), &cwd, &stranger()),
            Ok(())
        );
    }

    #[test]
    fn a_state_dir_inside_the_agents_cwd_is_refused_even_before_it_exists() {
        let (_base, cwd, _state) = layout("state-in-cwd", 0o700);
        for state_dir in [cwd.join("state"), cwd.join("sub/../state"), cwd.clone()] {
            let refused = check_state_dir(&state_dir, &cwd, &stranger()).expect_err("inside cwd");
            assert!(
                matches!(refused, StateDirError::InsideAgentCwd { .. }),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_state_dir_the_agents_user_can_write_is_refused_whichever_way() {
        let me = nix::unistd::getuid().as_raw();
        let my_group = nix::unistd::getgid().as_raw();
        // Writable by anyone.
        let (_base, cwd, state) = layout("state-open", 0o777);
        let why = reason(check_state_dir(&state, &cwd, &stranger()));
        assert_eq!(why, "it is writable by anyone (mode 777)");
        // Writable by a group the agents' user is in.
        let (_base, cwd, state) = layout("state-group", 0o770);
        let member = AgentUser {
            groups: vec![my_group],
            ..stranger()
        };
        let why = reason(check_state_dir(&state, &cwd, &member));
        assert_eq!(why, format!("it is writable by its group {my_group} (mode 770)"));
        assert_eq!(check_state_dir(&state, &cwd, &stranger()), Ok(()), "not a member");
        // Owned by the agents' user (here: the test's own uid).
        let (_base, cwd, state) = layout("state-owned", 0o700);
        let owner = AgentUser {
            uid: me,
            ..stranger()
        };
        let why = reason(check_state_dir(&state, &cwd, &owner));
        assert!(why.starts_with("it is owned by it"), "{why}");
        // A database file in it that anyone may write.
        let (_base, cwd, state) = layout("state-file", 0o700);
        let database = state.join("acp-bridge.sqlite3");
        std::fs::write(&database, b"").unwrap();
        std::fs::set_permissions(&database, std::fs::Permissions::from_mode(0o666)).unwrap();
        let why = reason(check_state_dir(&state, &cwd, &stranger()));
        assert_eq!(
            why,
            format!("`{}` in it is writable by anyone (mode 666)", database.display())
        );
    }

    #[test]
    fn a_directory_above_the_state_dir_that_the_agents_can_write_is_refused_unless_sticky() {
        let (base, cwd, state) = layout("state-parent", 0o700);
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = reason(check_state_dir(&state, &cwd, &stranger()));
        assert!(
            why.starts_with(&format!(
                "`{}` above it is writable by anyone",
                base.path().display()
            )),
            "{why}"
        );
        // Sticky (as /tmp): others cannot move or remove what is not theirs.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_state_dir(&state, &cwd, &stranger()), Ok(()));
    }
}
