//! Opening the file an agent names, beneath its workspace and nowhere else.
//!
//! The daemon may run as root (with `--agent-user`), so a path the model
//! wrote must not reach the key file, the state dir or `/etc/shadow`.
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from the workspace's
//! directory has the kernel refuse, during resolution, any `..`, absolute
//! symlink or symlink chain that would leave it, and `/proc` magic links:
//! there is no check-then-open window for a swapped symlink.
//!
//! The name is first resolved to an `O_PATH` descriptor, which opens
//! nothing (a device's driver never sees it, a FIFO is not touched), and
//! `fstat`ed: regular files only, at most the size bound. Only then is
//! that same file opened for reading, through `/proc/self/fd/N`, so what
//! is read is what was checked.
//!
//! With `--agent-user` all of it runs on a thread of its own whose
//! filesystem identity is that user's (`setfsuid`, `setfsgid`; the kernel
//! then also drops the thread's capabilities that bypass file
//! permissions): the kernel decides, as it would for the agent, with
//! search permission on every directory on the way, ACLs, and the file's
//! own bits. The thread keeps the daemon's supplementary groups (setting
//! them per thread needs a raw system call), so the file's mode bits are
//! also checked against the agent's own groups: a file is read only when
//! both allow it. A file the agent could read only through a
//! supplementary group of its own is refused.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

/// Why a file is not sent; each says what the model should know.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("`{0}` is outside your working directory; only files in it can be sent")]
    Outside(String),
    #[error("there is no file `{0}` in your working directory")]
    NotFound(String),
    #[error("`{0}` is not a regular file")]
    NotRegular(String),
    #[error("`{path}` is {size} bytes; at most {max} bytes are sent")]
    TooLarge { path: String, size: u64, max: u64 },
    #[error("`{0}` is not readable by the user you run as")]
    NotYours(String),
    #[error("`{path}` cannot be read: {error}")]
    Io { path: String, error: std::io::Error },
}

/// The user the agents run as (`--agent-user`): the daemon (root) reads
/// for them only what they could read themselves, so a hard link to a
/// root-only file planted in the workspace, or a file in a directory they
/// cannot enter, gives them nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reader {
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its primary and supplementary groups.
    pub gids: Vec<u32>,
}

impl Reader {
    /// Makes the calling thread's filesystem identity this user's. Only for
    /// a thread of its own, which ends after the read.
    fn become_on_this_thread(&self) -> std::io::Result<()> {
        use nix::unistd::{Gid, Uid, setfsgid, setfsuid};
        setfsgid(Gid::from_raw(self.gid));
        setfsuid(Uid::from_raw(self.uid));
        // Both calls return the previous value and report no error: asked
        // again, they say whether the change took.
        let (uid, gid) = (
            setfsuid(Uid::from_raw(self.uid)),
            setfsgid(Gid::from_raw(self.gid)),
        );
        if uid.as_raw() == self.uid && gid.as_raw() == self.gid {
            Ok(())
        } else {
            Err(std::io::Error::other(
                "cannot take the agents' user's file identity",
            ))
        }
    }

    /// Whether the permission bits of `meta` let this user read it.
    fn may_read(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        let mode = meta.mode();
        if meta.uid() == self.uid {
            mode & 0o400 != 0
        } else if self.gids.contains(&meta.gid()) {
            mode & 0o040 != 0
        } else {
            mode & 0o004 != 0
        }
    }
}

/// The path to open relative to `workspace`: `path` as given when it is
/// relative, and an absolute path inside `workspace` made relative to it
/// (models like absolute paths). An absolute path elsewhere is refused
/// here; everything else is left to the kernel's resolution.
fn relative_to(workspace: &Path, path: &str) -> Result<PathBuf, OpenError> {
    let given = Path::new(path);
    if !given.is_absolute() {
        return Ok(given.to_path_buf());
    }
    given
        .strip_prefix(workspace)
        .ok()
        .filter(|rest| rest.components().all(|part| matches!(part, Component::Normal(_))))
        .map(Path::to_path_buf)
        .ok_or_else(|| OpenError::Outside(path.to_owned()))
}

/// How every path is resolved: to an `O_PATH` descriptor (nothing is
/// opened), never above the directory it starts from, never through a
/// `/proc` magic link.
fn beneath(flags: OFlag) -> OpenHow {
    OpenHow::new()
        .flags(flags | OFlag::O_PATH | OFlag::O_CLOEXEC)
        .mode(Mode::empty())
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS)
}

/// The bytes of the regular file `path` beneath the workspace `workspace`
/// (relative to `root`, `--cwd`; empty: `root` itself), if it has at most
/// `max_bytes`, read as `reader` when given (see the module's doc). The
/// workspace itself is opened beneath `root` too, so a workspace replaced
/// by a symlink leads nowhere. Blocking: run it off the async threads.
pub(crate) fn read_beneath(
    root: &Path,
    workspace: &Path,
    path: &str,
    max_bytes: u64,
    reader: Option<&Reader>,
) -> Result<Vec<u8>, OpenError> {
    let Some(reader) = reader else {
        return read_here(root, workspace, path, max_bytes, None);
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                reader.become_on_this_thread().map_err(|error| OpenError::Io {
                    path: path.to_owned(),
                    error,
                })?;
                read_here(root, workspace, path, max_bytes, Some(reader))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(OpenError::Io {
                    path: path.to_owned(),
                    error: std::io::Error::other("the reading thread panicked"),
                })
            })
    })
}

/// [`read_beneath`] on the calling thread, as whoever it is.
fn read_here(
    root: &Path,
    workspace: &Path,
    path: &str,
    max_bytes: u64,
    reader: Option<&Reader>,
) -> Result<Vec<u8>, OpenError> {
    let io = |error: std::io::Error| OpenError::Io {
        path: path.to_owned(),
        error,
    };
    let relative = relative_to(&root.join(workspace), path)?;
    if relative.as_os_str().is_empty() {
        return Err(OpenError::NotRegular(path.to_owned()));
    }
    let refused = |errno: Errno| match errno {
        Errno::EXDEV | Errno::ELOOP => OpenError::Outside(path.to_owned()),
        Errno::ENOENT | Errno::ENOTDIR => OpenError::NotFound(path.to_owned()),
        Errno::EACCES | Errno::EPERM => OpenError::NotYours(path.to_owned()),
        other => io(other.into()),
    };
    let mut dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(refused)?;
    if !workspace.as_os_str().is_empty() {
        dir = openat2(&dir, workspace, beneath(OFlag::O_DIRECTORY)).map_err(|errno| match errno {
            Errno::ENOTDIR => OpenError::Outside(path.to_owned()),
            other => refused(other),
        })?;
    }
    let found = openat2(&dir, relative.as_path(), beneath(OFlag::empty())).map_err(refused)?;
    let meta = File::from(found.try_clone().map_err(io)?)
        .metadata()
        .map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular(path.to_owned()));
    }
    if reader.is_some_and(|reader| !reader.may_read(&meta)) {
        return Err(OpenError::NotYours(path.to_owned()));
    }
    let too_large = |size| OpenError::TooLarge {
        path: path.to_owned(),
        size,
        max: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    // The file checked above, opened for reading now (as the thread's
    // file identity); never blocking, never a controlling terminal.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(format!("/proc/self/fd/{}", found.as_raw_fd()))
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::PermissionDenied => OpenError::NotYours(path.to_owned()),
            _ => io(error),
        })?;
    // The file may grow after the fstat: read one byte past the bound.
    let mut bytes = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "acp-bridge-open-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let workspace = base.join("ws");
        std::fs::create_dir_all(workspace.join("sub")).unwrap();
        std::fs::write(base.join("secret"), b"secret").unwrap();
        std::fs::write(workspace.join("sub/a.txt"), b"hello").unwrap();
        (base, workspace)
    }

    /// `read_beneath` with `ws` as the root (shared mode).
    fn read(ws: &Path, path: &str, max: u64) -> Result<Vec<u8>, OpenError> {
        read_beneath(ws, Path::new(""), path, max, None)
    }

    #[test]
    fn a_file_beneath_is_read_by_relative_or_absolute_path() {
        let (base, ws) = workspace();
        assert_eq!(read(&ws, "sub/a.txt", 100).unwrap(), b"hello");
        assert_eq!(read(&ws, "./sub/../sub/a.txt", 100).unwrap(), b"hello");
        let absolute = ws.join("sub/a.txt");
        assert_eq!(read(&ws, absolute.to_str().unwrap(), 100).unwrap(), b"hello");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn escapes_directories_fifos_and_large_files_are_refused() {
        let (base, ws) = workspace();
        let secret = base.join("secret");
        std::os::unix::fs::symlink(&secret, ws.join("link")).unwrap();
        std::os::unix::fs::symlink("../secret", ws.join("relative-link")).unwrap();
        nix::unistd::mkfifo(&ws.join("fifo"), Mode::S_IRWXU).unwrap();
        let outside = |path: &str| matches!(read(&ws, path, 100), Err(OpenError::Outside(_)));
        assert!(outside("../secret"));
        assert!(outside("sub/../../secret"));
        assert!(outside(secret.to_str().unwrap()));
        assert!(outside("/etc/passwd"));
        assert!(outside("link"));
        assert!(outside("relative-link"));
        assert!(outside("/proc/self/root/etc/passwd"));
        assert!(matches!(read(&ws, "sub", 100), Err(OpenError::NotRegular(_))));
        assert!(matches!(read(&ws, "fifo", 100), Err(OpenError::NotRegular(_))));
        assert!(matches!(read(&ws, "", 100), Err(OpenError::NotRegular(_))));
        assert!(matches!(read(&ws, "nope", 100), Err(OpenError::NotFound(_))));
        assert!(matches!(
            read(&ws, "sub/a.txt", 4),
            Err(OpenError::TooLarge { size: 5, max: 4, .. })
        ));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_conversations_workspace_is_its_own_root_and_cannot_be_a_symlink_out() {
        let (base, root) = workspace();
        std::fs::create_dir_all(root.join("conversations/a")).unwrap();
        std::fs::write(root.join("conversations/a/mine.txt"), b"mine").unwrap();
        std::os::unix::fs::symlink(&base, root.join("conversations/b")).unwrap();
        let a = Path::new("conversations/a");
        assert_eq!(read_beneath(&root, a, "mine.txt", 100, None).unwrap(), b"mine");
        let absolute = root.join("conversations/a/mine.txt");
        assert_eq!(
            read_beneath(&root, a, absolute.to_str().unwrap(), 100, None).unwrap(),
            b"mine"
        );
        assert!(matches!(
            read_beneath(&root, a, "../../sub/a.txt", 100, None),
            Err(OpenError::Outside(_))
        ));
        assert!(matches!(
            read_beneath(&root, Path::new("conversations/b"), "secret", 100, None),
            Err(OpenError::Outside(_))
        ));
        std::fs::remove_dir_all(base).unwrap();
    }

    fn running_as_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn with_an_agent_user_only_what_it_could_read_is_read() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if !running_as_root() {
            println!("skipped: taking another user's file identity needs root (CI runs as root)");
            return;
        }
        let (base, ws) = workspace();
        let file = ws.join("sub/a.txt");
        let meta = std::fs::metadata(&file).unwrap();
        let owner = Reader {
            uid: meta.uid(),
            gid: meta.gid(),
            gids: vec![],
        };
        let stranger = Reader {
            uid: meta.uid() + 4_000_000,
            gid: meta.gid() + 4_000_000,
            gids: vec![],
        };
        let in_group = Reader {
            uid: meta.uid() + 4_000_000,
            gid: meta.gid(),
            gids: vec![meta.gid()],
        };
        let read_as = |reader: &Reader| read_beneath(&ws, Path::new(""), "sub/a.txt", 100, Some(reader));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(read_as(&owner).is_ok());
        assert!(read_as(&in_group).is_ok());
        assert!(matches!(read_as(&stranger), Err(OpenError::NotYours(_))));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(read_as(&in_group), Err(OpenError::NotYours(_))));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_as(&stranger).is_ok());

        // A file anyone may read, in a directory the agent cannot enter:
        // the kernel, resolving as the agent, refuses at the directory.
        std::fs::set_permissions(ws.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            matches!(read_as(&stranger), Err(OpenError::NotYours(_))),
            "read through a directory the agent cannot search"
        );
        assert!(read_as(&owner).is_ok());
        std::fs::remove_dir_all(base).unwrap();
    }

    /// A FIFO (or a device) named by the agent is never opened: resolving
    /// it to a path descriptor and `fstat` tell it is no regular file
    /// before any open reaches it. inotify sees every open of the files in
    /// the directory; the open of a marker afterwards bounds the wait.
    #[test]
    fn a_fifo_is_refused_without_being_opened() {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let (base, ws) = workspace();
        nix::unistd::mkfifo(&ws.join("fifo"), Mode::S_IRWXU).unwrap();
        std::fs::write(ws.join("marker"), b"").unwrap();
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).unwrap();
        inotify.add_watch(&ws, AddWatchFlags::IN_OPEN).unwrap();

        assert!(matches!(read(&ws, "fifo", 100), Err(OpenError::NotRegular(_))));
        File::open(ws.join("marker")).unwrap();
        let mut opened = Vec::new();
        while !opened.iter().any(|name| name == "marker") {
            for event in inotify.read_events().unwrap() {
                opened.extend(event.name.map(|name| name.to_string_lossy().into_owned()));
            }
        }
        assert_eq!(opened, ["marker"], "only the marker was opened");
        std::fs::remove_dir_all(base).unwrap();
    }
}
