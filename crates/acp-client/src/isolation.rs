//! What a forked agent does between `fork` and `exec`: ask for a signal
//! when the daemon dies, move into a PID namespace of its own
//! ([`crate::pid_namespace`]), take the agent user's identity and enter its
//! working directory.
//!
//! Owns [`AgentUser`] (who agents run as, looked up once at start-up) and
//! the child-side hook. The hook runs in the forked child of a
//! multi-threaded process, where only async-signal-safe calls are allowed:
//! it makes system calls on memory prepared before the fork, and allocates
//! nothing, locks nothing.
//!
//! The order matters. The parent-death signal comes first, then the parent
//! is checked, because a daemon that died before the signal was asked for
//! would never send it. The namespace is made while the process still has
//! the daemon's privileges. Then, in the agent's process, the credentials
//! change (supplementary groups, group, then user: after `setuid` the
//! others are no longer allowed). The working directory is entered as the
//! agent user, so a directory that user cannot enter fails the spawn
//! instead of handing the agent a directory it cannot use. Without a
//! namespace the agent's process is the one the daemon forked: the
//! credential change cleared its death signal, so it is armed and the
//! parent checked once more.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Pid, Uid, User};
use tokio::process::Command;

use crate::pid_namespace::{self, Placement};

/// The account agents run as (`--agent-user`), so that the tools an agent
/// runs cannot read what only the daemon's user may (its key file, its
/// state, `/proc/<daemon>/environ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, from the group database.
    pub groups: Vec<u32>,
    /// The user's home directory (the agent's `HOME`).
    pub home: PathBuf,
}

/// Why `--agent-user` names no usable account.
#[derive(Debug, thiserror::Error)]
pub enum AgentUserError {
    #[error("no user `{0}` on this system")]
    Unknown(String),
    #[error("cannot look up user `{name}`: {source}")]
    Lookup { name: String, source: Errno },
}

impl AgentUser {
    /// Looks `name` up in the user and group databases.
    pub fn lookup(name: &str) -> Result<AgentUser, AgentUserError> {
        let lookup_failed = |source| AgentUserError::Lookup {
            name: name.to_owned(),
            source,
        };
        let unknown = || AgentUserError::Unknown(name.to_owned());
        let c_name = CString::new(name).map_err(|_| unknown())?;
        let user = User::from_name(name)
            .map_err(lookup_failed)?
            .ok_or_else(unknown)?;
        let groups = nix::unistd::getgrouplist(&c_name, user.gid).map_err(lookup_failed)?;
        Ok(AgentUser {
            name: user.name,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: groups.into_iter().map(Gid::as_raw).collect(),
            home: user.dir,
        })
    }
}

/// Everything the child-side hook needs, prepared before the fork.
#[derive(Debug)]
struct ChildSetup {
    credentials: Option<Credentials>,
    cwd: Option<CString>,
    /// The daemon, which the child must still have as its parent once the
    /// death signal is armed.
    parent: Pid,
}

#[derive(Debug)]
struct Credentials {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
}

/// Sets the child-side hook on `command`: SIGKILL when the daemon dies, a
/// PID namespace of its own where the daemon may make one, run as `user`
/// (when given), in `cwd` (when given).
pub(crate) fn prepare(command: &mut Command, user: Option<&AgentUser>, cwd: Option<&Path>) -> io::Result<()> {
    let cwd = cwd
        .map(|cwd| CString::new(cwd.as_os_str().as_bytes()))
        .transpose()
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the working directory holds a NUL byte",
            )
        })?;
    let setup = ChildSetup {
        credentials: user.map(|user| Credentials {
            uid: Uid::from_raw(user.uid),
            gid: Gid::from_raw(user.gid),
            groups: user.groups.iter().copied().map(Gid::from_raw).collect(),
        }),
        cwd,
        parent: nix::unistd::getpid(),
    };
    install(command, setup);
    Ok(())
}

/// `pre_exec` is unsafe (like the system calls of [`pid_namespace`], the
/// workspace's only other `unsafe`) because its closure runs in the forked
/// child, where another thread of the parent may have held a lock (of the
/// allocator, say) at the moment of the fork.
/// [`ChildSetup::run`] only makes system calls (`prctl`, `getppid`, those
/// of [`pid_namespace::enter`], `setgroups`, `setgid`, `setuid`, `chdir`)
/// on data owned by the closure, allocated before the fork; errors are
/// plain errno values. That is the async-signal-safe subset `fork(2)`
/// allows.
#[allow(unsafe_code)]
fn install(command: &mut Command, setup: ChildSetup) {
    // SAFETY: see above; the closure neither allocates nor locks.
    unsafe {
        command.pre_exec(move || setup.run());
    }
}

impl ChildSetup {
    fn run(&self) -> io::Result<()> {
        self.die_with_the_daemon()?;
        let placement = pid_namespace::enter()?;
        if let Some(credentials) = &self.credentials {
            nix::unistd::setgroups(&credentials.groups)?;
            nix::unistd::setgid(credentials.gid)?;
            nix::unistd::setuid(credentials.uid)?;
        }
        if let Some(cwd) = &self.cwd {
            nix::unistd::chdir(cwd.as_c_str())?;
        }
        if placement == Placement::Outside {
            self.die_with_the_daemon()?;
        }
        Ok(())
    }

    fn die_with_the_daemon(&self) -> io::Result<()> {
        prctl::set_pdeathsig(Signal::SIGKILL)?;
        if nix::unistd::getppid() != self.parent {
            // The daemon died before the signal was armed.
            return Err(Errno::ESRCH.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_user_is_found_with_its_home_and_an_unknown_one_is_named() {
        let root = AgentUser::lookup("root").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(root.home, Path::new("/root"));
        let error = AgentUser::lookup("no-such-user-acp").expect_err("unknown");
        assert_eq!(error.to_string(), "no user `no-such-user-acp` on this system");
    }
}
