//! Bringing one agent up: spawn it and negotiate `initialize`.
//!
//! Owns how an agent comes to be (the configured command; in tests, the
//! scripted agent on in-process pipes) and the start step, which runs on a
//! task of its own so that the pool's actor never waits for an agent that
//! is slow to start. Deciding when to start one, and what a failure means
//! for the breaker, is the actor's.

use acp_client::{AcpError, AgentClient, AgentCommand, AgentInfo, AgentUser, ClientConfig, ProgramError};
use tokio_util::sync::CancellationToken;

use super::AgentSettings;
use super::auth::{AuthChoice, AuthPolicy};
use super::{PoolError, reaper};
use crate::state::store::AgentGroups;

/// How the pool makes an agent.
#[derive(Debug, Clone)]
pub(super) enum Launcher {
    /// The operator's `--agent-command`, as a process of its own, its
    /// process group recorded in the store while it runs.
    Command(Box<AgentSettings>, AgentGroups),
    /// The scripted agent served on in-process pipes, with one script per
    /// slot: unit tests of the pool without processes.
    #[cfg(test)]
    InProcess(Vec<scripted_agent::Options>),
}

/// Why an agent did not come up: what its waiting leases are told, and
/// what the breaker remembers.
#[derive(Debug)]
pub(super) struct StartFailure {
    pub(super) error: PoolError,
    pub(super) note: String,
}

impl Launcher {
    /// Spawns and initializes generation `generation` of the agent of
    /// `slot`, as `user` when given (a conversation's own identity, with
    /// `--agent-uids`). Runs on its own task; when `stop` fires first
    /// (shutdown), the half-started agent is killed.
    pub(super) async fn start(
        self,
        slot: usize,
        generation: u64,
        (config, user): (ClientConfig, Option<AgentUser>),
        stop: CancellationToken,
    ) -> Result<AgentClient, StartFailure> {
        let name = format!("{}#{}.{generation}", self.program(), slot + 1);
        let auth = self.auth();
        let client = match self {
            Launcher::Command(mut settings, groups) => {
                if let Some(user) = user {
                    as_conversation(&mut settings, user);
                }
                let client = spawn(&settings, &name, config)?;
                reaper::track(&groups, &client);
                client
            }
            #[cfg(test)]
            Launcher::InProcess(scripts) => in_process(scripts[slot].clone(), &name, config),
        };
        let initialized = tokio::select! {
            () = stop.cancelled() => {
                client.kill();
                return Err(StartFailure {
                    error: PoolError::ShutDown,
                    note: format!("{name}: stopped while starting"),
                });
            }
            initialized = client.initialize() => initialized,
        };
        let info = match initialized {
            Ok(info) => info,
            Err(error) => {
                client.kill();
                // An answer that rules the agent out is a misconfiguration;
                // an agent that died or stayed silent may do better next time.
                let refused = matches!(
                    error,
                    AcpError::Rpc { .. }
                        | AcpError::UnsupportedProtocolVersion { .. }
                        | AcpError::MalformedResult { .. }
                );
                return Err(StartFailure {
                    note: format!("initialize failed: {error}"),
                    error: if refused {
                        PoolError::Refused(error.to_string())
                    } else {
                        PoolError::Initialize(error.to_string())
                    },
                });
            }
        };
        log_started(&name, &info);
        if let AuthChoice::Method(method) = auth.choose(&info) {
            if let Err(error) = client.authenticate(&method).await {
                client.kill();
                let failure = format!("authentication with `{method}` failed: {error}");
                return Err(StartFailure {
                    note: failure.clone(),
                    error: PoolError::Auth(failure),
                });
            }
            tracing::info!(agent = %name, method = %method, "authenticated");
        }
        Ok(client)
    }

    /// How this launcher's agents authenticate.
    fn auth(&self) -> AuthPolicy {
        match self {
            Launcher::Command(settings, _) => AuthPolicy::new(settings),
            #[cfg(test)]
            Launcher::InProcess(_) => AuthPolicy::default(),
        }
    }

    /// What agents are called in logs (`<program>#<slot>.<generation>`).
    fn program(&self) -> &str {
        match self {
            Launcher::Command(settings, _) => std::path::Path::new(&settings.command)
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("agent"),
            #[cfg(test)]
            Launcher::InProcess(_) => scripted_agent::DEFAULT_AGENT_NAME,
        }
    }
}

/// `settings` for an agent running as a conversation's own `user`
/// (`--agent-uids`): its identity, and its workspace (`user.home`) as both
/// its working directory and its `HOME`.
fn as_conversation(settings: &mut AgentSettings, user: AgentUser) {
    let home = user.home.to_string_lossy().into_owned();
    settings
        .env
        .retain(|(name, _)| !matches!(name.as_str(), "HOME" | "USER" | "LOGNAME"));
    settings.env.extend([
        ("HOME".to_owned(), home),
        ("USER".to_owned(), user.name.clone()),
        ("LOGNAME".to_owned(), user.name.clone()),
    ]);
    settings.cwd = user.home.clone();
    settings.user = Some(user);
}

/// The configured command as a process of its own; a failure says what an
/// operator can do about it.
fn spawn(settings: &AgentSettings, name: &str, config: ClientConfig) -> Result<AgentClient, StartFailure> {
    let command = agent_command(settings, name);
    AgentClient::spawn(&command, config).map_err(|error| {
        let reason = spawn_hint(&error, &command, settings);
        StartFailure {
            error: PoolError::CannotStart(reason.clone()),
            note: reason,
        }
    })
}

/// The process the pool starts for `settings`, named `name` in logs.
pub(crate) fn agent_command(settings: &AgentSettings, name: &str) -> AgentCommand {
    AgentCommand {
        name: name.to_owned(),
        program: settings.command.clone().into(),
        args: settings.args.iter().map(Into::into).collect(),
        cwd: Some(settings.cwd.clone()),
        env: settings
            .env
            .iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect(),
        user: settings.user.clone(),
    }
}

/// Whether the agent's program can be run as the pool will run it: `Err`
/// says why not and what to do, in one line.
pub(crate) fn check_program(settings: &AgentSettings) -> Result<(), String> {
    agent_command(settings, "check")
        .locate_program()
        .map(drop)
        .map_err(|problem| program_remedy(&problem))
}

/// `problem`, and what an operator does about it.
fn program_remedy(problem: &ProgramError) -> String {
    let remedy = match problem {
        ProgramError::Missing(_) | ProgramError::NotInPath { .. } => {
            "install the agent, or point --agent-command at it"
        }
        ProgramError::NotAFile(_) => "point --agent-command at the agent's program",
        ProgramError::NotExecutable(_) => {
            "make it executable (chmod +x), or point --agent-command at the agent"
        }
        ProgramError::Inaccessible { .. } => "let the daemon's user read the directories on its way",
    };
    format!("{problem}: {remedy}")
}

/// The scripted agent served on in-process pipes.
#[cfg(test)]
fn in_process(script: scripted_agent::Options, name: &str, config: ClientConfig) -> AgentClient {
    /// Bytes buffered in each direction of the pipes.
    const PIPE_BYTES: usize = 64 * 1024;
    let (to_agent, agent_input) = tokio::io::duplex(PIPE_BYTES);
    let (agent_output, from_agent) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(scripted_agent::serve(script, agent_input, agent_output));
    AgentClient::connect(name, from_agent, to_agent, config)
}

fn log_started(name: &str, info: &AgentInfo) {
    tracing::info!(
        agent = name,
        agent_name = info.name.as_deref().unwrap_or("?"),
        agent_version = info.version.as_deref().unwrap_or("?"),
        session_steering = info.session_steering,
        load_session = info.load_session,
        resume_session = info.resume_session,
        auth_methods = info.auth_methods.len(),
        "agent initialized"
    );
}

/// Why the spawn of `agent` failed, in an operator's words: a program that
/// is gone or not executable (found as the spawn finds it), a working
/// directory that is gone, or what the system said.
fn spawn_hint(error: &AcpError, agent: &AgentCommand, settings: &AgentSettings) -> String {
    let command = &settings.command;
    let program_missing = matches!(
        error,
        AcpError::Spawn { source, .. }
            if matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied)
    );
    if program_missing && let Err(problem) = agent.locate_program() {
        return program_remedy(&problem);
    }
    match (error, &settings.user) {
        (AcpError::Spawn { source, .. }, _) if source.kind() == std::io::ErrorKind::NotFound => {
            if !settings.cwd.is_dir() {
                return format!("its --cwd `{}` does not exist", settings.cwd.display());
            }
            format!("`{command}` or the interpreter its `#!` line names was not found: {source}")
        }
        (AcpError::Spawn { source, .. }, Some(user))
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            format!(
                "user `{}` (--agent-user) may not enter --cwd `{}` or run `{command}`: {source}",
                user.name,
                settings.cwd.display()
            )
        }
        (other, _) => other.to_string(),
    }
}
