//! Each agent in a PID namespace of its own, so that everything it starts
//! ends with the daemon, even when the daemon is killed by SIGKILL.
//!
//! Owns the part of the child-side hook (see [`crate::isolation`]) that
//! builds the namespace. Nothing else: the agent's identity, working
//! directory and the daemon's own parent-death signal are the hook's.
//!
//! # Why a PID namespace
//! The agent leads a process group and gets SIGKILL when the daemon dies
//! (its parent-death signal). Its helpers (shells, MCP servers, language
//! servers) do not: that signal reaches one process, and a helper that
//! calls `setsid` or double-forks leaves the group, so no group kill finds
//! it either. The alternatives fall short where the daemon runs without
//! systemd:
//! - a child subreaper (`PR_SET_CHILD_SUBREAPER`) gathers orphans under the
//!   daemon while the daemon lives, but a SIGKILLed daemon can act on
//!   nothing: its adopted orphans move on to init, and the parent-death
//!   signal, cleared by every `fork`, does not reach them;
//! - a cgroup per agent keeps every descendant in reach, but needs a
//!   delegated, writable cgroup v2 tree, and still a living process to
//!   kill it (`cgroup.kill`): nothing ends a cgroup when its owner dies,
//!   except a service manager that watches it (systemd's `KillMode=`).
//!
//! A PID namespace is ended by the kernel itself: when its first process
//! (its "init") exits, every other process in it gets SIGKILL, whatever
//! session or group it moved to, and no process can leave a PID namespace.
//! The init here gets SIGKILL when the process outside, which the daemon
//! started, dies; and that one dies with the daemon. So:
//!
//! ```text
//! daemon ── keeper (outside, leads the agent's process group; SIGKILL when the daemon dies)
//!             └── init (pid 1 inside; SIGKILL when the keeper dies; reaps orphans)
//!                   └── agent (pid 2 inside) ── its helpers, wherever they go
//! ```
//!
//! The keeper is the process the daemon sees: its exit status is the
//! agent's (a signal that ended the agent shows as 128 + the signal
//! number, as in a shell), and a kill of its process group reaches keeper,
//! init and agent at once. Keeper and init run no code but this module's
//! (they never `exec`), close every descriptor they inherited (other
//! agents' pipes, the relay sockets, the state dir's lock), and block every
//! signal that can be blocked: a SIGTERM to the group reaches the agent,
//! whose exit then ends the namespace.
//!
//! Inside, the agent sees its own PIDs, also in `/proc`: init mounts a
//! procfs of the new namespace over `/proc` in a mount namespace of the
//! agent's own (mounts of the host still reach it, its own do not leave).
//! Without that, `ps`, `pgrep` and `lsof` would list the host's PIDs, and a
//! `kill` of one of them would miss (or hit another process), since inside
//! the same numbers name other processes. It also hides the daemon and
//! every other process from the agent's tools. File system (but for
//! `/proc`), network and users are the same as before.
//!
//! Creating a PID namespace needs `CAP_SYS_ADMIN` (a daemon run as root has
//! it; the hardened systemd unit and an unprivileged container do not).
//! Without it the agent runs as before, the keeper's process being the
//! agent itself, and the service manager's cgroup or the container's own
//! PID namespace is what ends the helpers of a SIGKILLed daemon; the daemon
//! logs which of the two it got ([`crate::process`]).
//!
//! Everything here runs in the forked child of a multi-threaded process:
//! system calls on memory prepared before the fork, no allocation, no
//! locks.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::prctl;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

/// Where the hook goes on after [`enter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In the agent's process, pid 2 of a new PID namespace.
    Inside,
    /// No namespace could be made: this process becomes the agent, as
    /// without one.
    Outside,
}

/// Exit code of a keeper or init whose child vanished without a status
/// (cannot happen short of a kernel fault; 128 + SIGKILL says "killed").
const STATUS_LOST: i32 = 128 + Signal::SIGKILL as i32;

/// Moves what this process starts into a new PID namespace, and splits it
/// into keeper, init and agent. Returns in the agent (`Inside`), or in this
/// very process when no namespace can be made (`Outside`); keeper and init
/// never return.
pub(crate) fn enter() -> io::Result<Placement> {
    if nix::sched::unshare(CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS).is_err() {
        return Ok(Placement::Outside);
    }
    // Inherited by init and agent; the agent clears it again.
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), None)?;
    // The keeper holds the write end for as long as it lives: init reads
    // EOF from the other end once the keeper is gone.
    let (keeper_alive, keeper_holds) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    match fork()? {
        ForkResult::Parent { child: init } => {
            drop(keeper_alive);
            keep(init, &keeper_holds)
        }
        ForkResult::Child => {
            drop(keeper_holds);
            start_init(&keeper_alive)?;
            drop(keeper_alive);
            mount_own_proc();
            match fork()? {
                ForkResult::Parent { child: agent } => init(agent),
                ForkResult::Child => {
                    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
                    Ok(Placement::Inside)
                }
            }
        }
    }
}

/// Arms init's death signal, then makes sure the keeper it is tied to did
/// not die before that (it would never send it).
fn start_init(keeper_alive: &OwnedFd) -> io::Result<()> {
    prctl::set_pdeathsig(Signal::SIGKILL)?;
    let mut byte = [0u8; 1];
    match nix::unistd::read(keeper_alive.as_fd(), &mut byte) {
        Err(Errno::EAGAIN) => Ok(()),
        _ => Err(Errno::ESRCH.into()), // EOF: the keeper is gone
    }
}

/// Mounts the procfs of init's PID namespace over `/proc`, after making
/// every mount of this mount namespace a one-way copy of the host's. On
/// failure (a `/proc` that may not be covered) the agent keeps the host's.
fn mount_own_proc() {
    use nix::mount::{MsFlags, mount};
    let none: Option<&std::ffi::CStr> = None;
    let one_way = mount(none, c"/", none, MsFlags::MS_REC | MsFlags::MS_SLAVE, none);
    if one_way.is_ok() {
        let _ = mount(
            Some(c"proc"),
            c"/proc",
            Some(c"proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            none,
        );
    }
}

/// The keeper: waits for init and leaves with its status.
fn keep(init: Pid, keeper_holds: &OwnedFd) -> ! {
    let holds = keeper_holds.as_raw_fd();
    close_from(0, Some(holds));
    loop {
        match waitpid(init, None) {
            Ok(WaitStatus::Exited(_, code)) => exit(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => exit(128 + signal as i32),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => exit(STATUS_LOST),
        }
    }
}

/// Init: reaps whatever ends in the namespace, and leaves with the agent's
/// status once the agent ends (which ends everything else in it).
fn init(agent: Pid) -> ! {
    close_from(0, None);
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == agent => exit(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == agent => exit(128 + signal as i32),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => exit(STATUS_LOST),
        }
    }
}

/// The system calls that have no safe wrapper: `fork`, `_exit` and
/// `close_range`. Each is allowed between `fork` and `exec` (it is
/// async-signal-safe, `close_range` being one system call).
#[allow(unsafe_code)]
fn fork() -> io::Result<ForkResult> {
    // SAFETY: the caller is the only thread of a forked child, so no lock
    // can be held by another thread; both sides go on with system calls
    // only (see the module's doc).
    Ok(unsafe { nix::unistd::fork() }?)
}

#[allow(unsafe_code)]
fn exit(code: i32) -> ! {
    // SAFETY: `_exit` ends the process without running anything of the
    // parent's (no atexit handlers, no destructors, no flushing).
    unsafe { libc::_exit(code) }
}

/// Closes every descriptor from `first` on, except `keep`. (A kernel older
/// than 5.9 has no `close_range`: there they stay open, as they would
/// without a namespace until the agent's `exec`.)
#[allow(unsafe_code)]
fn close_from(first: RawFd, keep: Option<RawFd>) {
    let close_range = |from: RawFd, to: libc::c_uint| {
        let Ok(from) = libc::c_uint::try_from(from) else {
            return;
        };
        if from <= to {
            // SAFETY: closing descriptors that nothing in this process
            // uses any more (it only waits and exits from here on).
            unsafe { libc::syscall(libc::SYS_close_range, from, to, 0) };
        }
    };
    match keep {
        Some(keep) => {
            if keep > 0 {
                close_range(first, (keep - 1) as libc::c_uint);
            }
            close_range(keep + 1, libc::c_uint::MAX);
        }
        None => close_range(first, libc::c_uint::MAX),
    }
}
