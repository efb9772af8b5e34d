//! Configuration: the daemon's command line (every flag also an
//! `ACP_BRIDGE_…` environment variable, and a key of the config file: see
//! `config_file`) and its validation into [`Settings`].
//!
//! Each stage owns its flags, as a clap `Args` group next to it
//! (`routes::args`, `signer::args`, `gate::args`, `intake::args`,
//! `pool::args`, `heart::args`, `reply::args`, …) that validates them into
//! that stage's settings, and whose `Default` is the flags' defaults;
//! [`RunArgs`] flattens the groups, holds the daemon's own flags (state
//! dir, retention, shard, shutdown grace, worker threads), and checks
//! what spans groups (an owner for `ask-owner`, an owner that is not the
//! bot, a state dir the agents' user cannot reach). Validation happens before any
//! connection is made, and every refusal is one line that names the flag,
//! so an operator reading `journalctl` sees at once what to fix.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_bridge_core::choice::Choice;
use acp_bridge_core::mention::npub;
use clap::Args;
use nostr_sdk::prelude::{Keys, Kind, PublicKey, RelayUrl};

use crate::agents::pool::args::AgentArgs;
use crate::agents::pool::{AgentSettings, PermissionPolicyArg};
use crate::base::flags::{
    ConfigError, flag_defaults, flag_spelling, longer_than_zero, parse_duration, refuse,
};
use crate::edge::embedded_relay::RelaySpec;
use crate::edge::metrics_endpoint::MetricsArgs;
use crate::edge::signer::args::{SECRET_KEY_ENV, SIGNER_ENV, SignerArgs, SignerSettings};
use crate::heart::args::{TurnArgs, TurnSettings};
use crate::heart::profiles::Profiles;
use crate::intake::IntakeLimits;
use crate::intake::args::IntakeArgs;
use crate::intake::media::{MediaArgs, MediaFetcher};
use crate::intake::thread_context::{ContextArgs, ContextSettings};
use crate::outbound::groups::INVITE_CODE_ENV;
use crate::outbound::identity::{ProfileArgs, ProfileFields};
use crate::outbound::reply::ReplySettings;
use crate::outbound::reply::args::ReplyArgs;
use crate::outbound::routes::args::{RelayArgs, RelaySettings};
use crate::policy::gate::args::{GateArgs, GateSettings};
use crate::policy::shard::{Shard, ShardSpec};

/// Set by systemd's `StateDirectory=`; our default state dir when present.
const SYSTEMD_STATE_ENV: &str = "STATE_DIRECTORY";
const DEFAULT_STATE_DIR: &str = "acp-bridge-state";
/// Set by container runtimes to the pod's name; `--shard auto/N` reads it.
const HOSTNAME_ENV: &str = "HOSTNAME";

/// The daemon's flags. Shared by `run`, `check` and `config`.
///
/// Each group names its help heading (`#[command(next_help_heading)]`),
/// which is also its table in the config file (`config_file::keys`); the
/// groups are listed here in the order of the tables, the path of a
/// mention from the relays to the reply, then the daemon's own.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A TOML file of settings, a table per help heading.
    ///
    /// Every flag is a key, in the table of its heading (`[relays]`,
    /// `[agent]`, …; see deploy/config/acp-bridge.toml.example).
    /// ACP_BRIDGE_* variables and flags win over it.
    #[arg(long, env = "ACP_BRIDGE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub relays: RelayArgs,

    #[command(flatten)]
    pub signer: SignerArgs,

    #[command(flatten)]
    pub profile: ProfileArgs,

    #[command(flatten)]
    pub gate: GateArgs,

    #[command(flatten)]
    pub groups: crate::outbound::groups::GroupArgs,

    #[command(flatten)]
    pub agent: AgentArgs,

    #[command(flatten)]
    pub mcp: crate::tools::mcp::args::McpArgs,

    #[command(flatten)]
    pub files: crate::tools::upload::FileArgs,

    #[command(flatten)]
    pub turns: TurnArgs,

    #[command(flatten)]
    pub intake: IntakeArgs,

    #[command(flatten)]
    pub context: ContextArgs,

    #[command(flatten)]
    pub media: MediaArgs,

    #[command(flatten)]
    pub replies: ReplyArgs,

    #[command(flatten)]
    pub budget: crate::policy::budget::BudgetArgs,

    #[command(flatten)]
    pub marmot: crate::outbound::marmot::args::MarmotArgs,

    /// Durable state (SQLite); one daemon per directory
    ///
    /// Durable state (SQLite). Default: $STATE_DIRECTORY under systemd, else ./acp-bridge-state.
    #[arg(
        long,
        env = "ACP_BRIDGE_STATE_DIR",
        value_name = "DIR",
        help_heading = "State"
    )]
    pub state_dir: Option<PathBuf>,

    /// How long sent replies and finished mentions are kept
    ///
    /// Sent replies and finished mentions are kept this long in the state
    /// dir, then pruned (hourly); a finished mention also stays while a
    /// relay could replay it. Pending work is never pruned.
    #[arg(long, env = "ACP_BRIDGE_RETENTION", default_value = "7d", value_parser = parse_duration, help_heading = "State")]
    pub retention: Duration,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// This replica's share of the bot: INDEX/COUNT or auto/COUNT
    ///
    /// This replica's share of the bot: `INDEX/COUNT`, or `auto/COUNT` to
    /// take the index from the hostname's trailing `-N` (a StatefulSet
    /// pod's ordinal). Every replica runs with the same key, relays and
    /// COUNT; each answers only the conversations that hash to its index.
    #[arg(
        long,
        env = "ACP_BRIDGE_SHARD",
        value_name = "INDEX/COUNT",
        help_heading = "Daemon"
    )]
    pub shard: Option<String>,

    /// On SIGTERM, in-flight turns get this long to finish
    ///
    /// On SIGTERM, in-flight turns get this long to finish before they are cancelled.
    #[arg(long, env = "ACP_BRIDGE_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration, help_heading = "Daemon")]
    pub shutdown_grace: Duration,

    /// Threads of the async runtime (default: one per CPU)
    ///
    /// Threads of the daemon's async runtime (default: one per CPU).
    #[arg(long, env = "ACP_BRIDGE_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=256), help_heading = "Daemon", hide_short_help = true)]
    pub worker_threads: Option<u16>,
}

/// Validated configuration: each stage's settings as its group of flags
/// validated them, and the daemon's own. `Debug` shows no secret: `Keys`
/// prints only the public key, a bunker URI no connection secret.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The relays' flags: where the bot listens and publishes.
    pub relays: RelaySettings,
    /// The signer's flags: who signs for the bot.
    pub signer: SignerSettings,
    /// The author gate's flags: who is heard.
    pub gate: GateSettings,
    pub state_dir: PathBuf,
    /// The intake's flags: what is heard, and its bounds.
    pub intake: IntakeLimits,
    /// The agents' flags: how the pool runs them. Their cwd, workspace,
    /// user and timeouts hold for every profile.
    pub agent: AgentSettings,
    /// The agent profiles (`[agents.NAME]`, or the flags' one profile
    /// `default`).
    pub agent_profiles: Profiles,
    /// The replies' flags.
    pub replies: ReplySettings,
    /// The turns' flags: mid-turn mentions, agents' questions, waiting.
    pub turns: TurnSettings,
    /// The thread context's flags.
    pub context: ContextSettings,
    /// The flags of images in prompts.
    pub media: MediaFetcher,
    /// `send_file`'s flags (`--blossom`, `--max-file-bytes`).
    pub files: crate::tools::upload::FileSettings,
    /// Serve Prometheus metrics and /healthz here
    ///
    /// `--mcp`, `--mcp-servers`: the MCP servers sessions are offered.
    pub mcp: crate::tools::mcp::args::McpSettings,
    pub shutdown_grace: Duration,
    pub retention: Duration,
    pub metrics_addr: Option<SocketAddr>,
    /// `--shard`: the conversations this replica answers.
    pub shard: Shard,
    /// `--profile-*`: the profile fields the daemon manages.
    pub profile: ProfileFields,
    /// `--group`, `--other-groups`: the NIP-29 groups the bot serves.
    pub groups: crate::outbound::groups::GroupSettings,
    /// The config file's `[[schedule]]` entries (set by `main` from the
    /// file; none without one).
    pub schedules: Vec<crate::heart::schedule::Schedule>,
    /// `--budget-*`: what the turns may spend.
    pub budget: crate::policy::budget::BudgetArgs,
    /// `--marmot`, `--marmot-key-file`: Marmot encrypted groups.
    pub marmot: crate::outbound::marmot::args::MarmotSettings,
}

impl RunArgs {
    /// The environment variables whose values are credentials, each named
    /// by the stage that reads it: `process_seal` removes them from the
    /// daemon's environment once the settings are read.
    pub const SECRET_VARIABLES: [&'static str; 3] = [SECRET_KEY_ENV, SIGNER_ENV, INVITE_CODE_ENV];

    /// Validates every value. `env` reads the process environment (a
    /// parameter so tests need not mutate the real one).
    pub fn validate(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, ConfigError> {
        self.validate_with_profiles(env, &[])
    }

    /// [`RunArgs::validate`], with the config file's `[agents.NAME]`
    /// profiles (none: the flags make the one profile `default`).
    pub fn validate_with_profiles(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        profiles: &[crate::heart::profiles::ProfileTable],
    ) -> Result<Settings, ConfigError> {
        let relays = self.relays.validate()?;
        let signer = self.signer.validate(env)?;
        let gate = self.gate.validate()?;
        if gate.owner.is_none() && self.turns.permission_policy == PermissionPolicyArg::AskOwner {
            return Err(refuse(
                "--owner",
                "required with --permission-policy ask-owner (the owner answers the questions)",
            ));
        }
        let turns = self.turns.validate()?;
        if gate.owner.is_some() && gate.owner == signer.source.known_public_key() {
            return Err(refuse(
                "--owner",
                "is the bot's own key; the owner must be a different key",
            ));
        }
        let intake = self.intake.validate()?;
        let profile = self.profile.validate()?;
        let groups = self
            .groups
            .validate(&relays.bot)
            .map_err(|error| refuse("--group", error.to_string()))?;
        let replies = self.replies.validate()?;
        let context = self.context.validate()?;
        let media = self.media.validate()?;
        let files = self.files.validate()?;
        let marmot = self.marmot.validate()?;
        let retention = longer_than_zero("--retention", self.retention)?;
        let shard = match self.shard.as_deref().filter(|spec| !spec.trim().is_empty()) {
            Some(spec) => spec
                .parse::<ShardSpec>()
                .and_then(|spec| spec.resolve(env(HOSTNAME_ENV)))
                .map_err(|error| refuse("--shard", error.to_string()))?,
            None => Shard::WHOLE,
        };
        let agent = self.agent.validate(env)?;
        let state_dir = self
            .state_dir
            .clone()
            .or_else(|| env(SYSTEMD_STATE_ENV).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        if let Some(problem) = state_dir_problem(&state_dir) {
            return Err(refuse("--state-dir", problem));
        }
        if let Some(user) = &agent.user {
            crate::base::isolation::check_state_dir(&state_dir, &agent.cwd, user)
                .map_err(|error| refuse("--state-dir", error.to_string()))?;
            if agent.workspace == crate::agents::workspace::WorkspaceMode::PerConversation {
                crate::base::isolation::check_workspace_root(&agent.cwd, user)
                    .map_err(|problem| refuse("--cwd", problem))?;
            }
            if agent.uids.is_some() {
                crate::base::isolation::check_daemons_only(&agent.cwd)
                    .map_err(|problem| refuse("--cwd", problem))?;
            }
        }
        // With profiles, each names (and checks) its own program: the
        // flags' command is only their default.
        if profiles.is_empty() {
            agent.ensure_program_found()?;
        }
        let mcp = self.mcp.validate(env)?;
        let agent_profiles = if profiles.is_empty() {
            Profiles::single(agent.clone(), mcp.clone())
        } else {
            Profiles::from_tables(profiles, &self.agent, &self.mcp, env)?
        };
        // Warnings last: they belong to a configuration that runs, never
        // before another flag's refusal.
        self.signer.warn_of_secret_sources(&signer);
        if agent.user.is_none() {
            tracing::warn!(
                "agents run as the daemon's user: the tools they run can read the key file, the state dir and the daemon's environment; run the daemon as root with --agent-user"
            );
        }
        Ok(Settings {
            relays,
            signer,
            gate,
            state_dir,
            intake,
            agent,
            agent_profiles,
            replies,
            turns,
            context,
            media,
            files,
            mcp,
            shutdown_grace: self.shutdown_grace,
            retention,
            metrics_addr: self.metrics.metrics_addr,
            shard,
            profile,
            groups,
            schedules: Vec::new(),
            budget: self.budget.clone(),
            marmot,
        })
    }
}

impl Settings {
    /// Takes the config file's `[[schedule]]` entries, refusing one whose
    /// `agent` names no configured profile (a typo would otherwise run
    /// every fire on the default agent).
    pub fn take_schedules(&mut self, schedules: Vec<crate::heart::schedule::Schedule>) -> Result<(), String> {
        for schedule in &schedules {
            if let Some(agent) = schedule.agent()
                && self.agent_profiles.named(agent).is_none()
            {
                let known: Vec<&str> = self
                    .agent_profiles
                    .all()
                    .iter()
                    .map(|profile| profile.name.as_str())
                    .collect();
                return Err(format!(
                    "schedule `{}`: `agent = \"{agent}\"` names no agent profile (the profiles: {})",
                    schedule.id(),
                    known.join(", ")
                ));
            }
        }
        self.schedules = schedules;
        Ok(())
    }

    /// Settings for a bridge run on one machine by a program rather than an
    /// operator (the demo, the benchmarks): one relay, the given keys and
    /// agent, owner-only, and every stage's flags at their defaults but
    /// what a local run changes (below). Nothing is read from the
    /// environment but `PATH`, so an operator's `ACP_BRIDGE_*` cannot
    /// change it.
    pub fn local(
        relay: RelayUrl,
        bot: Keys,
        owner: PublicKey,
        state_dir: PathBuf,
        agent: (String, Vec<String>),
    ) -> Self {
        let (command, args) = agent;
        let defaults: RunArgs = flag_defaults();
        Settings {
            relays: RelaySettings::local(relay),
            signer: SignerSettings::local(bot),
            gate: GateSettings::owner_only(owner),
            state_dir,
            // Group chat only: the demo and the benchmarks speak in a group.
            intake: IntakeLimits {
                kinds: vec![Kind::Custom(9)],
                ..IntakeLimits::default()
            },
            agent: AgentSettings::local(command.clone(), args.clone()),
            agent_profiles: Profiles::single(
                AgentSettings::local(command, args),
                crate::tools::mcp::args::McpSettings::without_operator_servers(defaults.mcp.mcp),
            ),
            replies: ReplySettings::default(),
            // No notice of waiting: a program waits without being told.
            turns: TurnSettings {
                wait_notice_after: None,
                ..TurnSettings::default()
            },
            // No thread context: a local run's threads are its own.
            context: ContextSettings {
                limit: 0,
                ..ContextSettings::default()
            },
            media: MediaFetcher::default(),
            files: crate::tools::upload::FileSettings::default(),
            mcp: crate::tools::mcp::args::McpSettings::without_operator_servers(defaults.mcp.mcp),
            // A local run is stopped by its program, which waits for less.
            shutdown_grace: Duration::from_secs(5),
            retention: defaults.retention,
            metrics_addr: None,
            shard: Shard::WHOLE,
            profile: ProfileFields::default(),
            groups: crate::outbound::groups::GroupSettings::default(),
            schedules: Vec::new(),
            budget: crate::policy::budget::BudgetArgs::default(),
            marmot: crate::outbound::marmot::args::MarmotSettings::default(),
        }
    }

    /// One line describing the effective configuration, for the start-up
    /// log. Public keys only; no secret, no agent environment values.
    pub fn summary(&self) -> String {
        let relays: Vec<String> = self
            .relays
            .bot
            .iter()
            .map(|relay| match relay {
                RelaySpec::Embedded => "embedded".to_owned(),
                RelaySpec::Url(url) => url.to_string(),
            })
            .collect();
        let kinds: Vec<String> = self
            .intake
            .kinds
            .iter()
            .map(|kind| kind.as_u16().to_string())
            .collect();
        let env_names: Vec<&str> = self.agent.env.iter().map(|(name, _)| name.as_str()).collect();
        let profile_names: Vec<&str> = self
            .agent_profiles
            .all()
            .iter()
            .map(|profile| profile.name.as_str())
            .collect();
        format!(
            "bot={} owner={} respond_to={} allowlist={} relays=[{}] kinds=[{}] state_dir={} agent=`{} {}` agents={} agent_env=[{}] profiles=[{}] mode={} dedup={} session_policy={} permission={} reply_mode={} reactions={} retention={}s",
            self.signer
                .source
                .known_public_key()
                .map_or_else(|| "(from the remote signer)".to_owned(), |bot| npub(&bot)),
            self.gate.owner.as_ref().map_or_else(|| "none".to_owned(), npub),
            flag_spelling(&self.gate.respond_to),
            self.gate.allowlist.len(),
            relays.join(","),
            kinds.join(","),
            self.state_dir.display(),
            self.agent.command,
            self.agent.args.join(" "),
            self.agent.processes,
            env_names.join(","),
            profile_names.join(","),
            self.turns.multiple_event_handling.word(),
            self.turns.dedup.word(),
            self.intake.session_policy.word(),
            flag_spelling(&self.turns.permission_policy),
            flag_spelling(&self.replies.mode),
            self.replies.reactions,
            self.retention.as_secs(),
        )
    }
}

/// Why `state_dir` can be neither used nor created (it is created at
/// start when missing), checked before anything else starts.
fn state_dir_problem(state_dir: &Path) -> Option<String> {
    let existing = state_dir.ancestors().find(|path| path.exists())?;
    if existing.is_dir() {
        return None;
    }
    Some(if existing == state_dir {
        format!(
            "`{}` is not a directory: name a directory, or a path where one can be created",
            state_dir.display()
        )
    } else {
        format!(
            "`{}` cannot be created: `{}` is not a directory",
            state_dir.display(),
            existing.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::edge::signer::SignerSource;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// Validates `args` in `env`, whose PATH (unless `env` sets one) is a
    /// directory with a `goose` in it: the default agent must be found.
    fn validate(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("acp-bridge").chain(args.iter().copied()))
            .expect("flags parse");
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        if !env.iter().any(|(name, _)| name == "PATH") {
            env.push(("PATH".to_owned(), agents_dir().to_owned()));
        }
        cli.run
            .validate(&|name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    /// A secret flag (its variable's value hidden from `--help`) names a
    /// variable the process seal removes: a stage adding one cannot leave
    /// it in the daemon's environment for its children.
    #[test]
    fn every_secret_variable_is_sealed() {
        use clap::CommandFactory;
        let hidden: Vec<String> = Cli::command()
            .get_arguments()
            .filter(|arg| arg.is_hide_env_values_set())
            .filter_map(|arg| arg.get_env().map(|env| env.to_string_lossy().into_owned()))
            .collect();
        assert!(
            !hidden.is_empty(),
            "the signer's and the groups' variables are secret"
        );
        for name in hidden.iter().map(String::as_str).chain([SECRET_KEY_ENV]) {
            assert!(
                RunArgs::SECRET_VARIABLES.contains(&name),
                "{name} holds a secret and is not sealed"
            );
        }
    }

    /// With `[agents.NAME]` profiles, the flags' agent command is only
    /// their default: a missing one is no refusal, a profile's is.
    #[test]
    fn profiles_check_their_own_programs_not_the_flags_one() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let cli = Cli::try_parse_from([
            "acp-bridge",
            "--relay",
            "embedded",
            "--owner",
            &owner,
            "--agent-command",
            "/nonexistent/agent",
        ])
        .expect("flags parse");
        let env = |wanted: &str| match wanted {
            "PATH" => Some(agents_dir().to_owned()),
            _ if wanted == name => Some(secret.clone()),
            _ => None,
        };
        let table = |command: &str| crate::heart::profiles::ProfileTable {
            name: "only".to_owned(),
            flags: vec![format!("--agent-command={command}")],
            default: false,
            channels: Vec::new(),
            authors: Vec::new(),
        };
        let settings = cli
            .run
            .validate_with_profiles(&env, &[table("goose")])
            .expect("the profile's program is found");
        assert_eq!(settings.agent_profiles.default_profile().agent.command, "goose");
        let missing = cli
            .run
            .validate_with_profiles(&env, &[table("/nonexistent/codex")])
            .expect_err("the profile's program is missing");
        assert!(
            missing.problem.starts_with("[agents.only]: --agent-command: "),
            "{missing}"
        );
    }

    /// A directory holding an executable `goose`, made once per test run.
    fn agents_dir() -> &'static str {
        static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        DIR.get_or_init(|| {
            use std::os::unix::fs::PermissionsExt;
            let dir = std::env::temp_dir().join(format!("acp-bridge-config-agents-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("agents dir");
            let goose = dir.join("goose");
            std::fs::write(&goose, "#!/bin/sh\n").expect("goose");
            std::fs::set_permissions(&goose, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            dir.to_str().expect("utf-8 temp dir").to_owned()
        })
    }

    fn key_env() -> (String, String) {
        (
            SECRET_KEY_ENV.to_owned(),
            Keys::generate().secret_key().to_secret_hex(),
        )
    }

    #[test]
    fn a_minimal_valid_configuration() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let settings = validate(
            &["--relay", "embedded", "--owner", &owner],
            &[(&name, &secret), ("PATH", agents_dir())],
        )
        .expect("valid");
        assert_eq!(settings.relays.bot, vec![RelaySpec::Embedded]);
        assert_eq!(settings.agent.args, vec!["acp"], "goose needs `acp`");
        assert_eq!(
            settings.agent.env,
            vec![("PATH".to_owned(), agents_dir().to_owned())]
        );
        assert!(
            !settings.summary().contains(&secret),
            "the summary never shows the key"
        );
        assert!(
            settings.summary().contains("respond_to=owner-only allowlist=0"),
            "flags' own spelling: {}",
            settings.summary()
        );
        assert!(
            settings.summary().contains("mode=steer dedup=queue"),
            "{}",
            settings.summary()
        );
    }

    /// A stage's settings built without flags (`Default`, as the demo, the
    /// benchmarks and the test rigs build them) are what the daemon runs
    /// with when no flag is given: the defaults are written once.
    #[test]
    fn each_stage_s_default_settings_are_the_daemon_s_without_flags() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let settings =
            validate(&["--relay", "embedded", "--owner", &owner], &[(&name, &secret)]).expect("valid");
        assert_eq!(
            format!("{:?}", settings.intake),
            format!("{:?}", IntakeLimits::default())
        );
        assert_eq!(settings.replies, ReplySettings::default());
        assert_eq!(settings.turns, TurnSettings::default());
        assert_eq!(settings.context, ContextSettings::default());
        let local = AgentSettings::local(settings.agent.command.clone(), settings.agent.args.clone());
        let bounds = |agent: &AgentSettings| {
            (
                agent.processes,
                agent.turns_per_agent,
                agent.cancel_timeout,
                agent.start_timeout,
            )
        };
        assert_eq!(bounds(&local), bounds(&settings.agent));
    }

    #[test]
    fn a_permission_timeout_of_never_or_beyond_a_day_is_refused() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let with = |timeout: &str| {
            validate(
                &[
                    "--relay",
                    "embedded",
                    "--owner",
                    &owner,
                    "--permission-policy",
                    "ask-owner",
                    "--permission-timeout",
                    timeout,
                ],
                &[(&name, &secret)],
            )
        };
        for refused in ["0", "0s", "25h", "2d"] {
            let error = with(refused).expect_err(refused);
            assert_eq!(error.flag, "--permission-timeout", "{refused}");
            assert!(error.to_string().contains("between 1s and 24h"), "{error}");
        }
        assert_eq!(
            with("24h").expect("a day").turns.question_timeout,
            Duration::from_secs(24 * 3600)
        );
        assert_eq!(
            with("90s").expect("taken").turns.question_timeout,
            Duration::from_secs(90)
        );
    }

    #[test]
    fn bad_values_name_their_flag_and_never_echo_the_key() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        /// Flags, environment, and the flag the refusal must name.
        type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
        let cases: Vec<Case> = vec![
            (
                vec!["--relay", "embedded", "--owner", "npub1nope"],
                vec![(&name, &secret)],
                "--owner",
            ),
            (
                vec!["--relay", "embedded", "--owner", &owner],
                vec![(&name, "nsec1garbage")],
                "--secret-key-file",
            ),
            (
                vec!["--relay", "embedded", "--owner", &owner],
                vec![],
                "--secret-key-file",
            ),
            (
                vec!["--relay", "not a url", "--owner", &owner],
                vec![(&name, &secret)],
                "--relay",
            ),
            (vec!["--owner", &owner], vec![(&name, &secret)], "--relay"),
            (
                vec![
                    "--relay",
                    "embedded",
                    "--owner",
                    &owner,
                    "--respond-to",
                    "allowlist",
                ],
                vec![(&name, &secret)],
                "--allowlist",
            ),
            (
                vec!["--relay", "embedded", "--owner", &owner, "--dedup", "drop"],
                vec![(&name, &secret)],
                "--dedup",
            ),
            (
                vec!["--relay", "embedded", "--owner", &owner, "--kinds", "4"],
                vec![(&name, &secret)],
                "--kinds",
            ),
            (vec!["--relay", "embedded"], vec![(&name, &secret)], "--owner"),
        ];
        for (args, env, flag) in cases {
            let error = validate(&args, &env).expect_err("must be refused");
            assert_eq!(error.flag, flag, "{args:?}: {error}");
            assert!(!error.to_string().contains(&secret));
            assert!(!error.to_string().contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn unreadable_key_file_is_refused_with_the_flag() {
        let owner = Keys::generate().public_key().to_hex();
        let error = validate(
            &[
                "--relay",
                "embedded",
                "--owner",
                &owner,
                "--secret-key-file",
                "/nonexistent/key",
            ],
            &[],
        )
        .expect_err("unreadable");
        assert_eq!(error.flag, "--secret-key-file");
        assert!(error.problem.contains("/nonexistent/key"));
    }

    #[test]
    fn a_remote_signer_replaces_the_key_and_its_secret_is_never_shown() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let signer = Keys::generate().public_key().to_hex();
        let uri = format!("bunker://{signer}?relay=wss%3A%2F%2Frelay.example&secret=hunter2");
        let args = ["--relay", "embedded", "--owner", &owner, "--signer", &uri];
        let settings = validate(&args, &[]).expect("a remote signer needs no key");
        assert!(matches!(settings.signer.source, SignerSource::Bunker(_)));
        assert!(!format!("{settings:?}").contains("hunter2"));
        assert!(!settings.summary().contains("hunter2"));

        let error = validate(&args, &[(&name, &secret)]).expect_err("a key as well");
        assert_eq!(error.flag, "--signer");
        let bad = [
            "--relay",
            "embedded",
            "--owner",
            &owner,
            "--signer",
            "bunker://nope?secret=hunter2",
        ];
        let error = validate(&bad, &[]).expect_err("not a URI");
        assert!(!error.to_string().contains("hunter2"), "{error}");
        let both = [&args[..], &["--signer-file", "/nonexistent"]].concat();
        assert_eq!(validate(&both, &[]).expect_err("both").flag, "--signer");
    }

    #[test]
    fn agent_args_are_split_as_a_shell_splits_words() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        for (words, split) in [
            ("acp", vec!["acp"]),
            (
                "--name 'my bot' a\\ b \"c d\"",
                vec!["--name", "my bot", "a b", "c d"],
            ),
            ("", vec![]),
        ] {
            let args = ["--relay", "embedded", "--owner", &owner, "--agent-args", words];
            let settings = validate(&args, &[(&name, &secret)]).expect("valid");
            assert_eq!(settings.agent.args, split, "{words}");
        }
    }

    #[test]
    fn an_agent_that_cannot_be_run_is_refused_at_start_with_the_remedy() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        let base = ["--relay", "embedded", "--owner", &owner];
        let missing = validate(
            &[&base[..], &["--agent-command", "/nonexistent/agent"]].concat(),
            &[(&name, &secret)],
        );
        let error = missing.expect_err("no such agent");
        assert_eq!(error.flag, "--agent-command");
        assert_eq!(
            error.problem,
            "`/nonexistent/agent` does not exist: install the agent, or point --agent-command at it"
        );
        let not_in_path = validate(&base, &[(&name, &secret), ("PATH", "/nonexistent")]);
        assert!(
            not_in_path
                .expect_err("no goose")
                .problem
                .starts_with("`goose` is not in the agent's PATH (/nonexistent)"),
        );
    }

    #[test]
    fn an_agent_user_must_exist_and_must_not_be_root() {
        let (name, secret) = key_env();
        let owner = Keys::generate().public_key().to_hex();
        for (user, problem) in [
            ("no-such-user-acp", "no user `no-such-user-acp` on this system"),
            ("root", "`root` is root; name an unprivileged user for the agents"),
        ] {
            let args = ["--relay", "embedded", "--owner", &owner, "--agent-user", user];
            let error = validate(&args, &[(&name, &secret)]).expect_err("refused");
            assert_eq!((error.flag, error.problem.as_str()), ("--agent-user", problem));
        }
    }
}
