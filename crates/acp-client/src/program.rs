//! Where an agent's program is, found the way the spawn will find it.
//!
//! Owns only the lookup: a caller asks before spawning (at start-up, or to
//! say why a spawn failed) and gets the program's path or a typed reason.
//! The spawn itself ([`crate::process`]) execs with the agent's complete
//! environment after changing to the agent's working directory, so:
//! - a program with a `/` is a path, a relative one relative to that
//!   working directory;
//! - a bare name is looked up in the PATH of the agent's environment (not
//!   the caller's), each relative entry relative to that directory, and in
//!   [`DEFAULT_SEARCH_PATH`] when the agent's environment has no PATH (as
//!   `execvp` does);
//! - the program must be a file with an execute bit. Whether the agent's
//!   user (`--agent-user`) may run it is the kernel's to say at the spawn.
//!
//! A wrapper that carries stdio elsewhere (ssh, kubectl) is a local program
//! like any other: the same lookup holds for it.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::process::AgentCommand;

/// The search path of `execvp` (glibc's) for an environment without PATH.
pub const DEFAULT_SEARCH_PATH: &str = "/bin:/usr/bin";

/// Why an agent's program cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("`{0}` does not exist")]
    Missing(PathBuf),
    #[error("`{program}` is not in the agent's PATH ({search_path})")]
    NotInPath { program: String, search_path: String },
    #[error("`{0}` is not a file")]
    NotAFile(PathBuf),
    #[error("`{0}` is not executable")]
    NotExecutable(PathBuf),
    #[error("`{path}` cannot be looked at: {reason}")]
    Inaccessible { path: PathBuf, reason: String },
}

impl AgentCommand {
    /// The program this command runs, as its spawn will find it (see the
    /// module's doc), or why it cannot be run.
    pub fn locate_program(&self) -> Result<PathBuf, ProgramError> {
        let cwd = self.cwd.clone().unwrap_or_default();
        if self.program.as_os_str().as_encoded_bytes().contains(&b'/') {
            let path = cwd.join(&self.program);
            return runnable(&path).map(|()| path);
        }
        let search_path = self
            .env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map_or(OsStr::new(DEFAULT_SEARCH_PATH), |(_, value)| value.as_os_str());
        let mut not_executable = None;
        for dir in std::env::split_paths(search_path) {
            let candidate = cwd.join(dir).join(&self.program);
            match runnable(&candidate) {
                Ok(()) => return Ok(candidate),
                // `execvp` goes on past a file it may not run, and reports
                // it only when nothing later in the PATH runs.
                Err(ProgramError::NotExecutable(path)) => {
                    not_executable.get_or_insert(ProgramError::NotExecutable(path));
                }
                Err(_) => {}
            }
        }
        Err(not_executable.unwrap_or_else(|| ProgramError::NotInPath {
            program: self.program.display().to_string(),
            search_path: search_path.to_string_lossy().into_owned(),
        }))
    }
}

/// A file with an execute bit at `path`, or why not.
fn runnable(path: &Path) -> Result<(), ProgramError> {
    let metadata = std::fs::metadata(path).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => ProgramError::Missing(path.to_owned()),
        _ => ProgramError::Inaccessible {
            path: path.to_owned(),
            reason: error.to_string(),
        },
    })?;
    if !metadata.is_file() {
        return Err(ProgramError::NotAFile(path.to_owned()));
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(ProgramError::NotExecutable(path.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("acp-client-program-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn file(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_bare_name_is_looked_up_in_the_agents_path_past_files_it_may_not_run() {
        let dir = temp_dir("path");
        let (first, second) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir_all(&first).expect("mkdir");
        std::fs::create_dir_all(&second).expect("mkdir");
        file(&first.join("agent"), 0o644);
        file(&second.join("agent"), 0o755);
        let search = std::env::join_paths([&first, &second]).expect("join");
        let command = AgentCommand::new("a", "agent").env("PATH", &search);
        assert_eq!(command.locate_program(), Ok(second.join("agent")));
        let only_first = AgentCommand::new("a", "agent").env("PATH", &first);
        assert_eq!(
            only_first.locate_program(),
            Err(ProgramError::NotExecutable(first.join("agent")))
        );
        let elsewhere = AgentCommand::new("a", "nowhere").env("PATH", &search);
        assert!(matches!(
            elsewhere.locate_program(),
            Err(ProgramError::NotInPath { .. })
        ));
    }

    #[test]
    fn a_path_is_relative_to_the_agents_working_directory() {
        let dir = temp_dir("relative");
        file(&dir.join("agent"), 0o755);
        let command = AgentCommand::new("a", "./agent").cwd(&dir);
        assert_eq!(command.locate_program(), Ok(dir.join("./agent")));
        let missing = AgentCommand::new("a", "/nonexistent/agent");
        assert_eq!(
            missing.locate_program(),
            Err(ProgramError::Missing(PathBuf::from("/nonexistent/agent")))
        );
        let directory = AgentCommand::new("a", dir.to_str().expect("utf-8"));
        assert_eq!(
            directory.locate_program(),
            Err(ProgramError::NotAFile(dir.clone()))
        );
    }
}
