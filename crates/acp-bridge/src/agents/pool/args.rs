//! The agents' flags (`--agent-*`, `--agents`, `--turns-per-agent`,
//! `--cwd`, the start and cancel bounds) and their validation into [`AgentSettings`]:
//! how the pool runs agents.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_bridge_core::live_sessions::LiveBounds;
use acp_client::{AgentUser, ClientConfig, DropObserver};
use clap::Args;

use super::{AgentSettings, check_program};
use crate::agents::workspace::{WorkspaceMode, Workspaces};
use crate::base::flags::{ConfigError, flag_defaults, longer_than_zero, parse_duration, refuse};
use crate::telemetry::metrics;

/// Environment variables every agent gets (when set), beside `--agent-env`.
/// Nothing else of the daemon's environment reaches an agent.
pub const AGENT_ENV_BASELINE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];
/// Baseline variables that describe the daemon's own user. With
/// `--agent-user` the agent gets that user's `HOME`, `USER` and `LOGNAME`
/// instead, and the daemon's XDG dirs not at all (unless `--agent-env`
/// lists them).
const AGENT_USER_ENV: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];

/// The agents' flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Agent")]
pub struct AgentArgs {
    /// The ACP agent to run.
    #[arg(long, env = "ACP_BRIDGE_AGENT_COMMAND", default_value = "goose")]
    pub agent_command: String,

    /// The agent's arguments, one string split as a shell does
    ///
    /// The agent's arguments: one string, split into words as a POSIX
    /// shell splits them (quotes and backslashes honoured), the same in
    /// ACP_BRIDGE_AGENT_ARGS: `--agent-args "acp --with-builtin developer"`.
    /// Default: `acp` for goose, none for other agents.
    #[arg(
        long,
        env = "ACP_BRIDGE_AGENT_ARGS",
        value_name = "ARGS",
        allow_hyphen_values = true
    )]
    pub agent_args: Option<String>,

    /// Environment variables passed through to agents
    ///
    /// Names of environment variables passed through to agents (comma-separated),
    /// beside a small baseline (PATH, HOME, locale, XDG dirs). Provider keys go here.
    #[arg(
        long,
        env = "ACP_BRIDGE_AGENT_ENV",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub agent_env: Vec<String>,

    /// The agent's authentication method
    ///
    /// The agent's authentication method (one of the `authMethods` its
    /// `initialize` lists). Without it, the one `env_var` method whose
    /// variables are all passed to the agent is used when the agent asks.
    #[arg(long, env = "ACP_BRIDGE_AGENT_AUTH_METHOD", value_name = "ID")]
    pub agent_auth_method: Option<String>,

    /// Run agents as this user (the daemon runs as root)
    ///
    /// Run agents as this user (its uid, gid, groups and HOME), so the
    /// tools they run cannot read the key file, the state dir or the
    /// daemon's environment. The daemon must run as root, and refuses a
    /// state dir inside --cwd or one this user could change.
    #[arg(long, env = "ACP_BRIDGE_AGENT_USER", value_name = "USER")]
    pub agent_user: Option<String>,

    /// Run each conversation's agent as a uid of this range
    ///
    /// Run each conversation's agent as a uid of its own from this range
    /// (e.g. `61000-61999`, no account needed; --agent-user's group, HOME =
    /// its workspace), so one conversation's tools cannot read another's
    /// workspace or MCP token. Needs --agent-user and --workspace
    /// per-conversation; an agent process then serves one conversation.
    #[arg(long, env = "ACP_BRIDGE_AGENT_UIDS", value_name = "FIRST-LAST", value_parser = parse_uid_range)]
    pub agent_uids: Option<std::ops::RangeInclusive<u32>>,

    /// Agent processes
    ///
    /// Agent processes (each hosts many sessions; with --agent-uids, each
    /// serves one conversation, so this many conversations at once).
    #[arg(long, env = "ACP_BRIDGE_AGENTS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub agents: u32,

    /// Turns one agent process runs at once
    ///
    /// Turns one agent process may run at once (each on its own session).
    #[arg(long, env = "ACP_BRIDGE_TURNS_PER_AGENT", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub turns_per_agent: u32,

    /// Working directory of the agents.
    #[arg(long, env = "ACP_BRIDGE_CWD", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Sessions' directory: shared or per-conversation
    ///
    /// Which directory each conversation's sessions run in: `shared` (all
    /// in --cwd) or `per-conversation` (each in a directory of its own
    /// under --cwd/conversations/, removed once idle past --retention).
    #[arg(long, env = "ACP_BRIDGE_WORKSPACE", value_enum, default_value = "shared")]
    pub workspace: WorkspaceMode,

    /// Per-conversation workspaces are worktrees of this repo
    ///
    /// With --workspace per-conversation: each new workspace is a detached
    /// `git worktree` of this repository (owned by --agent-user when set).
    /// When git fails, the conversation works in a plain directory.
    #[arg(long, env = "ACP_BRIDGE_WORKSPACE_REPO", value_name = "DIR")]
    pub workspace_repo: Option<PathBuf>,

    /// A directory every session may use beside its workspace
    ///
    /// A directory every session may use beside its workspace (repeatable,
    /// or comma-separated), passed as ACP `additionalDirectories` to agents
    /// that advertise it; other agents get only their workspace (logged).
    #[arg(
        long,
        env = "ACP_BRIDGE_WORKSPACE_EXTRA_DIR",
        value_delimiter = ',',
        value_name = "DIR"
    )]
    pub workspace_extra_dir: Vec<PathBuf>,

    /// An agent that has not ended a cancelled turn is replaced
    ///
    /// An agent that has not ended a cancelled turn after this long is
    /// killed and replaced (its turn is retried).
    #[arg(long, env = "ACP_BRIDGE_CANCEL_TIMEOUT", help_heading = "Turns", default_value = "30s", value_parser = parse_duration)]
    pub cancel_timeout: Duration,

    /// How long an agent may take to start
    ///
    /// How long an agent may take to start and answer `initialize` (an
    /// agent in a pod that is still being scheduled takes tens of seconds).
    #[arg(long, env = "ACP_BRIDGE_AGENT_START_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub agent_start_timeout: Duration,

    /// A session with no turn this long is closed
    ///
    /// A conversation whose session has had no turn for this long has it
    /// closed (`session/close`, or its agent stopped once all its sessions
    /// are quiet); its next mention reopens it. `0` or `off`: never.
    #[arg(long, env = "ACP_BRIDGE_SESSION_IDLE", default_value = "30m", value_parser = duration_or_off)]
    pub session_idle: Duration,

    /// Sessions live at once per agent profile (0: unbounded)
    ///
    /// Sessions live at once per agent profile: a new one closes the least
    /// recently used idle one first. `0`: unbounded.
    #[arg(long, env = "ACP_BRIDGE_MAX_LIVE_SESSIONS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub max_live_sessions: u32,
}

impl Default for AgentArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

impl AgentArgs {
    /// The flags an `[agents.NAME]` profile may set, each a key of its
    /// table named without `agent-` (`command`, `args`, `agents`): what
    /// makes one agent differ from another. The rest (`--cwd`, workspaces,
    /// `--agent-user`, the timeouts) is the same for every profile.
    pub(crate) const PROFILE_FLAGS: &[&str] = &[
        "agent-command",
        "agent-args",
        "agent-env",
        "agent-auth-method",
        "agents",
        "turns-per-agent",
    ];

    /// `--workspace-repo`, canonical: an existing directory, and only with
    /// per-conversation workspaces (a shared one has no worktree to make).
    fn workspace_repo(&self) -> Result<Option<PathBuf>, ConfigError> {
        let Some(repo) = self
            .workspace_repo
            .as_ref()
            .filter(|repo| !repo.as_os_str().is_empty())
        else {
            return Ok(None);
        };
        if self.workspace != WorkspaceMode::PerConversation {
            return Err(refuse("--workspace-repo", "needs --workspace per-conversation"));
        }
        existing_dir("--workspace-repo", repo).map(Some)
    }

    /// `--workspace-extra-dir`, canonical (ACP wants absolute paths):
    /// existing directories.
    fn extra_dirs(&self) -> Result<Vec<PathBuf>, ConfigError> {
        self.workspace_extra_dir
            .iter()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| existing_dir("--workspace-extra-dir", dir))
            .collect()
    }

    /// How agents run, checked: the bounds, `--cwd` (default: the current
    /// directory) and `--agent-user`. The program is looked up as the pool
    /// will run it by [`AgentSettings::ensure_program_found`], so that a
    /// missing or non-executable agent stops start-up instead of failing
    /// the first mention. `env` reads the daemon's environment, which the
    /// agents' is made of.
    pub(crate) fn validate(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AgentSettings, ConfigError> {
        for (flag, value) in [
            ("--cancel-timeout", self.cancel_timeout),
            ("--agent-start-timeout", self.agent_start_timeout),
        ] {
            longer_than_zero(flag, value)?;
        }
        let cwd = match &self.cwd {
            Some(cwd) => cwd.clone(),
            None => std::env::current_dir()
                .map_err(|error| refuse("--cwd", format!("cannot read the current directory: {error}")))?,
        };
        if !cwd.is_dir() {
            return Err(refuse(
                "--cwd",
                format!(
                    "`{}` is not a directory: name an existing directory for the agents to work in",
                    cwd.display()
                ),
            ));
        }
        let cwd = std::fs::canonicalize(&cwd)
            .map_err(|error| refuse("--cwd", format!("`{}`: {error}", cwd.display())))?;
        let user = self
            .agent_user
            .as_deref()
            .filter(|name| !name.is_empty())
            .map(agent_user)
            .transpose()?;
        let args = match &self.agent_args {
            Some(words) => split_agent_args(words)?,
            None => default_agent_args(&self.agent_command),
        };
        let workspace_repo = self.workspace_repo()?;
        let uids = self
            .agent_uids
            .as_ref()
            .map(|range| self.checked_uids(range, user.as_ref(), workspace_repo.is_some()))
            .transpose()?;
        let extra_dirs = self.extra_dirs()?;
        let mut agent_env = agent_environment(&self.agent_env, env);
        if let Some(user) = &user {
            agent_env = as_agent_user(agent_env, user, &self.agent_env);
        }
        Ok(AgentSettings {
            workspace_repo,
            extra_dirs,
            uids,
            ..self.settings(args, agent_env, cwd, user)
        })
    }

    /// `--agent-uids`, checked: with `--agent-user` (so a daemon running
    /// as root, and the conversations' group) and per-conversation
    /// workspaces without `--workspace-repo`; a range of unprivileged uids
    /// (from 1000) holding neither `--agent-user`'s, the daemon's nor any
    /// account of /etc/passwd, whose files the agents would be handed.
    fn checked_uids(
        &self,
        range: &std::ops::RangeInclusive<u32>,
        user: Option<&AgentUser>,
        repo: bool,
    ) -> Result<std::ops::RangeInclusive<u32>, ConfigError> {
        let flag = "--agent-uids";
        let Some(user) = user else {
            return Err(refuse(
                flag,
                "needs --agent-user (its group is the conversations' agents' group)",
            ));
        };
        if self.workspace != WorkspaceMode::PerConversation {
            return Err(refuse(
                flag,
                "needs --workspace per-conversation (a shared --cwd cannot belong to many uids)",
            ));
        }
        if repo {
            return Err(refuse(
                flag,
                "cannot be used with --workspace-repo yet (the repository belongs to one user)",
            ));
        }
        if *range.start() < MIN_AGENT_UID {
            return Err(refuse(
                flag,
                format!("starts below {MIN_AGENT_UID}, where system accounts live"),
            ));
        }
        let daemon = nix::unistd::geteuid().as_raw();
        for (uid, whose) in [(user.uid, "--agent-user's"), (daemon, "the daemon's")] {
            if range.contains(&uid) {
                return Err(refuse(flag, format!("holds {whose} uid {uid}")));
            }
        }
        let passwd = std::fs::read_to_string(PASSWD).unwrap_or_default();
        if let Some((name, uid)) = accounts(&passwd).find(|(_, uid)| range.contains(uid)) {
            return Err(refuse(
                flag,
                format!("holds uid {uid} of the account `{name}` ({PASSWD}); choose a range no account uses"),
            ));
        }
        Ok(range.clone())
    }

    /// These flags' settings for an agent run with `args` and `env` in
    /// `cwd` as `user`, unchecked.
    fn settings(
        &self,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        user: Option<AgentUser>,
    ) -> AgentSettings {
        AgentSettings {
            command: self.agent_command.clone(),
            args,
            env,
            processes: self.agents,
            turns_per_agent: self.turns_per_agent,
            cwd,
            workspace: self.workspace,
            workspace_repo: None,
            extra_dirs: Vec::new(),
            cancel_timeout: self.cancel_timeout,
            start_timeout: self.agent_start_timeout,
            auth_method: self.agent_auth_method.clone().filter(|method| !method.is_empty()),
            user,
            uids: None,
            live: LiveBounds {
                session_idle: Some(self.session_idle).filter(|idle| !idle.is_zero()),
                max_live_sessions: Some(self.max_live_sessions as usize).filter(|max| *max > 0),
            },
        }
    }
}

impl AgentSettings {
    /// Refuses an agent command that is not in the agent's PATH. Apart from
    /// [`AgentArgs::validate`] so that the checks of the state dir against
    /// the agents' user and cwd come first: a state dir the agents could
    /// change is refused before a missing agent is.
    pub(crate) fn ensure_program_found(&self) -> Result<(), ConfigError> {
        check_program(self).map_err(|problem| refuse("--agent-command", problem))
    }

    /// The conversations' working directories under `--cwd`, owned by the
    /// agents' user, or with `--agent-uids` by each conversation's uid,
    /// which `uids` keeps.
    pub(crate) fn workspaces(&self, uids: &crate::state::store::AgentUids) -> Workspaces {
        let each = self.uids.clone().zip(self.user.clone()).map(|(range, group_of)| {
            crate::agents::workspace::ConversationUids {
                range,
                uids: uids.clone(),
                group_of,
            }
        });
        Workspaces::new(&self.cwd, self.workspace, self.user.clone())
            .with_repo(self.workspace_repo.clone())
            .with_conversation_uids(each)
    }
}

impl AgentSettings {
    /// The agent `command` `args`, for a bridge run by a program rather
    /// than an operator: the flags' defaults, in the temp dir, with only
    /// the daemon's `PATH` (an operator's `ACP_BRIDGE_*` cannot change it).
    pub fn local(command: String, args: Vec<String>) -> AgentSettings {
        let env = std::env::var("PATH")
            .map(|path| vec![("PATH".to_owned(), path)])
            .unwrap_or_default();
        AgentArgs {
            agent_command: command,
            ..AgentArgs::default()
        }
        .settings(args, env, std::env::temp_dir(), None)
    }

    /// The ACP client's configuration for these agents; `elicitation`:
    /// whether their questions reach a person (`--permission-policy
    /// ask-owner`), so they may ask for forms; `own_mcp_server`: the
    /// bridge's own MCP server's name (its tools are bounded by the
    /// bridge, not asked about).
    pub(crate) fn client_config(&self, elicitation: bool, own_mcp_server: &'static str) -> ClientConfig {
        ClientConfig {
            cancel_timeout: self.cancel_timeout,
            elicitation,
            initialize_timeout: self.start_timeout,
            drops: DropObserver::new(|why| metrics::agent_update_dropped(why.as_str())),
            own_mcp_server: Some(own_mcp_server),
            additional_directories: self.extra_dirs.clone(),
            ..ClientConfig::default()
        }
    }
}

/// The lowest uid `--agent-uids` may start at: below are system accounts.
const MIN_AGENT_UID: u32 = 1000;
/// The account database `--agent-uids` must not overlap.
const PASSWD: &str = "/etc/passwd";

/// `--agent-uids`: `FIRST-LAST`, FIRST not above LAST.
fn parse_uid_range(text: &str) -> Result<std::ops::RangeInclusive<u32>, String> {
    let usage = || format!("`{text}` is not a uid range: write FIRST-LAST, e.g. 61000-61999");
    let (first, last) = text.trim().split_once('-').ok_or_else(usage)?;
    let (first, last): (u32, u32) = (
        first.trim().parse().map_err(|_| usage())?,
        last.trim().parse().map_err(|_| usage())?,
    );
    if first > last {
        return Err(format!("`{text}`: FIRST is above LAST"));
    }
    Ok(first..=last)
}

/// The (name, uid) of each account in `passwd` (`name:x:uid:...` lines).
fn accounts(passwd: &str) -> impl Iterator<Item = (&str, u32)> {
    passwd.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let uid = fields.nth(1)?.parse().ok()?;
        Some((name, uid))
    })
}

/// `--session-idle`: a duration, or `off` (the same as `0`: never).
fn duration_or_off(text: &str) -> Result<Duration, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// goose speaks ACP only as `goose acp`; the other known agents take no
/// arguments.
fn default_agent_args(command: &str) -> Vec<String> {
    let program = Path::new(command)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(command);
    if program == "goose" {
        vec!["acp".to_owned()]
    } else {
        Vec::new()
    }
}

/// `--agent-args`: the words of one string, split as a POSIX shell splits
/// them, so that the agent's arguments can never take the daemon's flags
/// (or the daemon the agent's). The value is not echoed: it may hold a
/// credential.
fn split_agent_args(words: &str) -> Result<Vec<String>, ConfigError> {
    shlex::split(words).ok_or_else(|| {
        refuse(
            "--agent-args",
            "has an unbalanced quote or ends in a backslash (it is split into words as a shell splits them: quote an argument that holds spaces)",
        )
    })
}

fn agent_environment(pass_through: &[String], env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut names: Vec<&str> = AGENT_ENV_BASELINE.to_vec();
    names.extend(
        pass_through
            .iter()
            .map(|name| name.trim())
            .filter(|name| !name.is_empty()),
    );
    let mut seen = BTreeSet::new();
    names
        .into_iter()
        // The bot's key never reaches an agent, even if listed by mistake.
        .filter(|name| !name.starts_with("ACP_BRIDGE_"))
        .filter(|name| seen.insert(*name))
        .filter_map(|name| env(name).map(|value| (name.to_owned(), value)))
        .collect()
}

/// `--agent-user`: an existing, unprivileged user, and a daemon that may
/// switch to it.
fn agent_user(name: &str) -> Result<AgentUser, ConfigError> {
    let user = AgentUser::lookup(name).map_err(|error| refuse("--agent-user", error.to_string()))?;
    if user.uid == 0 {
        return Err(refuse(
            "--agent-user",
            format!("`{name}` is root; name an unprivileged user for the agents"),
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(refuse(
            "--agent-user",
            format!(
                "the daemon must run as root to start agents as `{name}`; run it as root, or drop the flag and give the daemon a user of its own"
            ),
        ));
    }
    Ok(user)
}

/// The agent's environment as `user`: its identity in place of the
/// daemon's (see [`AGENT_USER_ENV`]); names listed in `--agent-env` stay.
fn as_agent_user(
    mut env: Vec<(String, String)>,
    user: &AgentUser,
    pass_through: &[String],
) -> Vec<(String, String)> {
    env.retain(|(name, _)| {
        !AGENT_USER_ENV.contains(&name.as_str()) || pass_through.iter().any(|listed| listed.trim() == name)
    });
    let home = user.home.to_string_lossy().into_owned();
    for (name, value) in [
        ("HOME", home),
        ("USER", user.name.clone()),
        ("LOGNAME", user.name.clone()),
    ] {
        if !env.iter().any(|(set, _)| set == name) {
            env.push((name.to_owned(), value));
        }
    }
    env
}

/// `dir`, canonical (ACP wants absolute paths), if it is an existing
/// directory; else `flag`'s refusal.
fn existing_dir(flag: &'static str, dir: &Path) -> Result<PathBuf, ConfigError> {
    std::fs::canonicalize(dir)
        .ok()
        .filter(|dir| dir.is_dir())
        .ok_or_else(|| refuse(flag, format!("`{}` is not a directory", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_idle_takes_a_duration_or_off_and_zero_means_never() {
        assert_eq!(duration_or_off("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(duration_or_off("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration_or_off("off"), Ok(Duration::ZERO));
        assert!(duration_or_off("soon").is_err());
        let never = |idle: &str| {
            let args = AgentArgs {
                session_idle: duration_or_off(idle).expect("valid"),
                ..AgentArgs::default()
            };
            args.settings(Vec::new(), Vec::new(), std::env::temp_dir(), None)
                .live
        };
        assert_eq!(never("0").session_idle, None);
        assert_eq!(never("OFF").session_idle, None);
        assert_eq!(never("30m").session_idle, Some(Duration::from_secs(1800)));
        assert_eq!(AgentArgs::default().max_live_sessions, 0);
        assert_eq!(never("30m").max_live_sessions, None, "0 is unbounded");
    }

    #[test]
    fn agent_environment_is_an_explicit_list_without_our_own_variables() {
        let env = |name: &str| match name {
            "PATH" => Some("/usr/bin".to_owned()),
            "OPENAI_API_KEY" => Some("sk-test".to_owned()),
            "ACP_BRIDGE_SECRET_KEY" => Some("secret".to_owned()),
            "UNRELATED_TOKEN" => Some("x".to_owned()),
            _ => None,
        };
        let passed = agent_environment(&["OPENAI_API_KEY".into(), "ACP_BRIDGE_SECRET_KEY".into()], &env);
        let names: Vec<&str> = passed.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, vec!["PATH", "OPENAI_API_KEY"]);
    }

    #[test]
    fn an_agent_user_gets_its_own_identity_in_the_environment() {
        let user = AgentUser {
            name: "agent".to_owned(),
            uid: 1000,
            gid: 1000,
            groups: vec![1000],
            home: PathBuf::from("/home/agent"),
        };
        let daemon_env: Vec<(String, String)> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("USER", "root"),
            ("XDG_RUNTIME_DIR", "/run/user/0"),
            ("XDG_CONFIG_HOME", "/root/.config"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
        let env = as_agent_user(daemon_env, &user, &["XDG_CONFIG_HOME".to_owned()]);
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        assert_eq!(
            env,
            vec![
                ("PATH", "/usr/bin"),
                ("XDG_CONFIG_HOME", "/root/.config"),
                ("HOME", "/home/agent"),
                ("USER", "agent"),
                ("LOGNAME", "agent"),
            ],
            "the daemon's identity is replaced; what --agent-env lists stays"
        );
    }
}
