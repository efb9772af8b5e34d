//! `--cwd`'s `conversations/` directory, reached only through directory
//! descriptors.
//!
//! The daemon may run as root while the agents, as `--agent-user`, change
//! files beneath their workspaces as they please. Anything done by path
//! below `--cwd` would follow a symlink an agent swapped in between a
//! check and the act, and root would then rename or delete elsewhere. So
//! `conversations/` is opened once per operation without following a
//! link, its owner and mode are checked on the descriptor, and every
//! create, stat, rename and delete beneath it is relative to that
//! descriptor (`mkdirat`, `fstatat`, `renameat`, `unlinkat`) and never
//! follows a link either. `--cwd` itself must not be writable by the
//! agents' user (checked at start-up, with the user's groups, and again on
//! each open): otherwise they could put a `conversations/` of their own in
//! its place.
//!
//! Deleting a tree whose shape the agent chose must not cost the daemon
//! its stack or its file descriptors: [`ConversationsDir::remove_tree`]
//! keeps at most [`MAX_OPEN_DEPTH`] directories open and moves anything
//! deeper up beside the tree, where it is deleted in turn.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use acp_client::AgentUser;
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};

/// Where conversations' workspaces live, under `--cwd`.
pub(crate) const CONVERSATIONS_DIR: &str = "conversations";
/// `conversations/`: the daemon's, enterable by the agents' user, which can
/// neither list nor rename the workspaces in it.
pub(super) const CONVERSATIONS_DIR_MODE: u32 = 0o711;
/// A conversation's workspace: its agent's only.
pub(super) const WORKSPACE_MODE: u32 = 0o700;
/// How many nested directories one removal keeps open at once; what lies
/// deeper is moved up beside the tree and removed after it.
const MAX_OPEN_DEPTH: usize = 64;
/// How many names one read of a directory takes before they are deleted
/// (a directory of millions of files is read in passes, not held whole).
const NAMES_PER_PASS: usize = 1024;

/// `conversations/` under `--cwd`, open.
#[derive(Debug)]
pub(super) struct ConversationsDir {
    fd: OwnedFd,
}

/// The flags every descriptor here is opened with: a directory, never
/// through a symlink.
fn directory_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

impl ConversationsDir {
    /// Opens `<root>/conversations`, creating it (the daemon's, 0711) when
    /// missing. Refused when the agents' user could change `root`, or when
    /// `conversations/` is a symlink, not the daemon's, or writable by
    /// others.
    pub(super) fn open(root: &Path, agents: Option<&AgentUser>) -> io::Result<Self> {
        let root_dir = File::from(nix::fcntl::open(root, directory_flags(), Mode::empty())?);
        if let Some(user) = agents
            && let Some(how) = crate::base::isolation::access(&root_dir.metadata()?, user)
        {
            return Err(io::Error::other(format!(
                "`{}` (--cwd) can be changed by the agents' user `{}`: it {how}, so they could put a directory of their own in place of `{CONVERSATIONS_DIR}/`",
                root.display(),
                user.name
            )));
        }
        let created = match mkdirat(
            &root_dir,
            CONVERSATIONS_DIR,
            Mode::from_bits_truncate(CONVERSATIONS_DIR_MODE),
        ) {
            Ok(()) => true,
            Err(Errno::EEXIST) => false,
            Err(errno) => return Err(errno.into()),
        };
        let fd = openat(&root_dir, CONVERSATIONS_DIR, directory_flags(), Mode::empty())
            .map_err(|errno| not_a_directory(errno, &format!("`{CONVERSATIONS_DIR}/` under --cwd")))?;
        if created {
            // The umask may have taken bits off: set exactly.
            fchmod(&fd, Mode::from_bits_truncate(CONVERSATIONS_DIR_MODE))?;
        }
        let meta = File::from(fd.try_clone()?).metadata()?;
        let daemon = nix::unistd::geteuid().as_raw();
        if meta.uid() != daemon || meta.mode() & 0o022 != 0 {
            return Err(io::Error::other(format!(
                "`{CONVERSATIONS_DIR}/` under --cwd is owned by uid {} with mode {:o}; it must be the daemon's (uid {daemon}) and writable by no one else",
                meta.uid(),
                meta.mode() & 0o7777
            )));
        }
        Ok(ConversationsDir { fd })
    }

    /// Creates the workspace `name` (0700, owned by `owner` when given);
    /// whether it was created now. An entry of that name that is not a
    /// directory (a symlink put there) is an error.
    pub(super) fn create_workspace(&self, name: &str, owner: Option<&AgentUser>) -> io::Result<bool> {
        match mkdirat(&self.fd, name, Mode::from_bits_truncate(WORKSPACE_MODE)) {
            Ok(()) => {
                let dir = self
                    .open_dir(name)
                    .map_err(|errno| not_a_directory(errno, "it"))?;
                fchmod(&dir, Mode::from_bits_truncate(WORKSPACE_MODE))?;
                if let Some(user) = owner {
                    fchown(&dir, Some(Uid::from_raw(user.uid)), Some(Gid::from_raw(user.gid)))?;
                }
                Ok(true)
            }
            Err(Errno::EEXIST) => match self.open_dir(name) {
                Ok(_) => Ok(false),
                Err(errno) => Err(not_a_directory(errno, "it")),
            },
            Err(errno) => Err(errno.into()),
        }
    }

    /// Marks the workspace `name` used now (its modification time).
    pub(super) fn touch(&self, name: &str) -> io::Result<()> {
        File::from(self.open_dir(name)?).set_modified(SystemTime::now())
    }

    /// The names in `conversations/`.
    pub(super) fn names(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        let mut listing = Dir::openat(&self.fd, ".", directory_flags(), Mode::empty())?;
        for entry in listing.iter() {
            if let Some(name) = entry_name(entry?.file_name()) {
                names.push(name.to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    /// Whether `name` is a directory (not a link to one) last used before
    /// `idle_since`.
    pub(super) fn idle(&self, name: &str, idle_since: SystemTime) -> bool {
        let Ok(stat) = fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            return false;
        };
        let is_dir = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
        let used = u64::try_from(stat.st_mtime)
            .map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        is_dir && used < idle_since
    }

    /// Renames `from` to `to`, both in `conversations/`.
    pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Deletes `name` and everything beneath it, following no link. Keeps
    /// at most [`MAX_OPEN_DEPTH`] directories open: a directory deeper
    /// than that is moved into `conversations/` under `spill_prefix` and
    /// removed after.
    pub(super) fn remove_tree(&self, name: &str, spill_prefix: &str) -> io::Result<()> {
        let mut pending = vec![name.to_owned()];
        let mut spills = Spills {
            prefix: spill_prefix,
            made: 0,
        };
        while let Some(top) = pending.pop() {
            match self.open_dir(&top) {
                Ok(dir) => {
                    empty(self, dir, 1, &mut spills, &mut pending)?;
                    unlink(&self.fd, OsStr::new(&top), UnlinkatFlags::RemoveDir)?;
                }
                // Not a directory (any more): a file or a link.
                Err(Errno::ELOOP | Errno::ENOTDIR) => {
                    unlink(&self.fd, OsStr::new(&top), UnlinkatFlags::NoRemoveDir)?;
                }
                Err(Errno::ENOENT) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        Ok(())
    }

    fn open_dir(&self, name: &str) -> Result<OwnedFd, Errno> {
        openat(&self.fd, name, directory_flags(), Mode::empty())
    }
}

/// Names for the directories [`ConversationsDir::remove_tree`] moves up.
struct Spills<'a> {
    prefix: &'a str,
    made: u64,
}

impl Spills<'_> {
    fn next(&mut self) -> String {
        self.made += 1;
        format!("{}deep-{}-{}", self.prefix, std::process::id(), self.made)
    }
}

/// Deletes everything in the directory `dir` (at `depth` below the tree's
/// top), in passes of [`NAMES_PER_PASS`] names. A directory at the depth
/// bound is moved up into `conversations/` and queued in `pending`.
fn empty(
    conversations: &ConversationsDir,
    dir: OwnedFd,
    depth: usize,
    spills: &mut Spills<'_>,
    pending: &mut Vec<String>,
) -> io::Result<()> {
    loop {
        let names = names_in(&dir)?;
        if names.is_empty() {
            return Ok(());
        }
        for name in names {
            let name = OsStr::from_bytes(&name);
            match openat(&dir, name, directory_flags(), Mode::empty()) {
                Ok(child) if depth >= MAX_OPEN_DEPTH => {
                    drop(child);
                    let spill = spills.next();
                    renameat(&dir, name, &conversations.fd, spill.as_str())?;
                    pending.push(spill);
                }
                Ok(child) => {
                    empty(conversations, child, depth + 1, spills, pending)?;
                    unlink(&dir, name, UnlinkatFlags::RemoveDir)?;
                }
                Err(Errno::ELOOP | Errno::ENOTDIR) => unlink(&dir, name, UnlinkatFlags::NoRemoveDir)?,
                Err(Errno::ENOENT) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
    }
}

/// Up to [`NAMES_PER_PASS`] names in `dir`, read from its start.
fn names_in(dir: &impl AsFd) -> io::Result<Vec<Vec<u8>>> {
    let mut listing = Dir::openat(dir, ".", directory_flags(), Mode::empty())?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        if let Some(name) = entry_name(entry?.file_name()) {
            names.push(name.to_bytes().to_vec());
            if names.len() == NAMES_PER_PASS {
                break;
            }
        }
    }
    Ok(names)
}

/// An entry's name, unless it is `.` or `..`.
fn entry_name(name: &CStr) -> Option<&CStr> {
    (!matches!(name.to_bytes(), b"." | b"..")).then_some(name)
}

/// `unlinkat`, where an entry already gone is no error.
fn unlink(dir: &impl AsFd, name: &OsStr, how: UnlinkatFlags) -> io::Result<()> {
    match unlinkat(dir, name, how) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

/// `openat`'s refusal to follow a link or open a file as a directory, said
/// of `what`.
fn not_a_directory(errno: Errno, what: &str) -> io::Error {
    match errno {
        Errno::ELOOP | Errno::ENOTDIR => io::Error::other(format!("{what} exists and is not a directory")),
        other => other.into(),
    }
}
