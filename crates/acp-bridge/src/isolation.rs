//! Start-up step that keeps agents of `--agent-user` away from the state
//! dir.
//!
//! With `--agent-user`, agents and the tools they run are another user
//! than the daemon. The key file is the operator's to protect (config warns
//! when it is open to others); the state dir is the daemon's, and it holds
//! every conversation and reply. The store creates a new state dir 0700,
//! but one that already exists keeps its mode, so it is closed here.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::config::Settings;

/// Logs who agents run as, and closes the state dir to other users. Call
/// once the store has opened (and so created) the state dir.
pub fn prepare(settings: &Settings) {
    let Some(user) = &settings.agent.user else {
        return;
    };
    tracing::info!(
        user = %user.name,
        uid = user.uid,
        gid = user.gid,
        cwd = %settings.agent.cwd.display(),
        "agents run as another user"
    );
    close_to_others(&settings.state_dir);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
