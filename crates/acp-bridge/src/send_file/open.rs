//! Opening the file an agent names, beneath its workspace and nowhere else.
//!
//! The daemon may run as root (with `--agent-user`), so a path the model
//! wrote must not reach the key file, the state dir or `/etc/shadow`.
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from the workspace's
//! directory has the kernel refuse, during resolution, any `..`, absolute
//! symlink or symlink chain that would leave it, and `/proc` magic links:
//! there is no check-then-open window for a swapped symlink. The file is
//! opened non-blocking (a FIFO does not hang the open), then `fstat`ed on
//! the same descriptor: regular files only, at most the size bound.

use std::fs::File;
use std::io::Read;
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
/// root-only file planted in the workspace gives them nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reader {
    pub uid: u32,
    /// Its primary and supplementary groups.
    pub gids: Vec<u32>,
}

impl Reader {
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

/// How every path is resolved: never above the directory it starts from,
/// never through a `/proc` magic link.
fn beneath(flags: OFlag) -> OpenHow {
    OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK)
        .mode(Mode::empty())
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS)
}

/// The bytes of the regular file `path` beneath the workspace `workspace`
/// (relative to `root`, `--cwd`; empty: `root` itself), if it has at most
/// `max_bytes`. The workspace itself is opened beneath `root` too, so a
/// workspace replaced by a symlink leads nowhere. Blocking: run it off the
/// async threads.
pub(crate) fn read_beneath(
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
    let mut dir = File::open(root).map_err(io)?;
    if !workspace.as_os_str().is_empty() {
        let fd =
            openat2(&dir, workspace, beneath(OFlag::O_RDONLY | OFlag::O_DIRECTORY)).map_err(|errno| {
                match errno {
                    Errno::ENOENT => OpenError::NotFound(path.to_owned()),
                    Errno::EXDEV | Errno::ELOOP | Errno::ENOTDIR => OpenError::Outside(path.to_owned()),
                    other => io(other.into()),
                }
            })?;
        dir = File::from(fd);
    }
    let fd = openat2(&dir, relative.as_path(), beneath(OFlag::O_RDONLY)).map_err(|errno| match errno {
        Errno::EXDEV | Errno::ELOOP => OpenError::Outside(path.to_owned()),
        Errno::ENOENT | Errno::ENOTDIR => OpenError::NotFound(path.to_owned()),
        other => io(other.into()),
    })?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(io)?;
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

    #[test]
    fn with_an_agent_user_only_what_it_could_read_is_read() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let (base, ws) = workspace();
        let file = ws.join("sub/a.txt");
        let meta = std::fs::metadata(&file).unwrap();
        let owner = Reader {
            uid: meta.uid(),
            gids: vec![],
        };
        let stranger = Reader {
            uid: meta.uid() + 1,
            gids: vec![],
        };
        let in_group = Reader {
            uid: meta.uid() + 1,
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
        std::fs::remove_dir_all(base).unwrap();
    }
}
