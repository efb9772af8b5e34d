//! Configuration: the command line (every flag also an `ACP_BRIDGE_…`
//! environment variable, and a key of the config file: see `config_file`)
//! and its validation into [`Settings`].
//!
//! Owns turning strings into typed, checked values; knows nothing about
//! what the values drive. Validation happens before any connection is made,
//! and every refusal is one line that names the flag, so an operator reading
//! `journalctl` sees at once what to fix. Secrets are read only from a file
//! or the environment (a command-line value would show in `ps`) and are never
//! echoed back, not even in an error.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use nostr_sdk::prelude::{Keys, Kind, PublicKey, RelayUrl, Url};

use crate::embedded_relay::RelaySpec;
use crate::flags::ConfigError;
use crate::flags::{
    at_least_one, flag_defaults, flag_spelling, longer_than_zero, parse_duration, parse_socket_addr, refuse,
};
use crate::gate::RespondTo;
use crate::heart::args::{TurnArgs, TurnSettings};
use crate::identity::ProfileFields;
use crate::intake::IntakeLimits;
use crate::intake::args::IntakeArgs;
use crate::mention::npub;
use crate::pool::args::AgentArgs;
use crate::pool::{AgentSettings, PermissionPolicyArg};
use crate::reply::ReplySettings;
use crate::reply::args::ReplyArgs;
use crate::shard::{Shard, ShardSpec};
use crate::signer::{BunkerUri, SignerSource, secret_file_unreadable};
use crate::thread_context::{ContextArgs, ContextSettings};

/// Environment variable that may hold the bot's secret key (nsec or hex).
pub(crate) const SECRET_KEY_ENV: &str = "ACP_BRIDGE_SECRET_KEY";
/// Set by systemd's `StateDirectory=`; our default state dir when present.
const SYSTEMD_STATE_ENV: &str = "STATE_DIRECTORY";
const DEFAULT_STATE_DIR: &str = "acp-bridge-state";
/// Set by container runtimes to the pod's name; `--shard auto/N` reads it.
const HOSTNAME_ENV: &str = "HOSTNAME";

/// The daemon's flags. Shared by `run` and `check`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A TOML file of settings: every flag below is a key, in a table per
    /// stage (`[relays]`, `[agent]`, …; see
    /// deploy/config/acp-bridge.toml.example). ACP_BRIDGE_* variables and
    /// flags win over it.
    #[arg(long, env = "ACP_BRIDGE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Relay URL (repeatable or comma-separated). `embedded` starts an
    /// in-process relay on loopback and uses it.
    #[arg(
        long = "relay",
        env = "ACP_BRIDGE_RELAY",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub relays: Vec<String>,

    /// File holding the bot's secret key (nsec or hex). Alternatively set
    /// ACP_BRIDGE_SECRET_KEY. Never pass a key as a plain flag value.
    #[arg(long, env = "ACP_BRIDGE_SECRET_KEY_FILE", value_name = "PATH")]
    pub secret_key_file: Option<PathBuf>,

    /// Sign through a remote signer (NIP-46) instead of a key file: its
    /// `bunker://<signer-pubkey>?relay=wss://…&secret=…` URI. The URI's
    /// secret is a credential: prefer --signer-file.
    #[arg(long, env = "ACP_BRIDGE_SIGNER", value_name = "BUNKER_URI")]
    pub signer: Option<String>,

    /// File holding the remote signer's bunker:// URI (see --signer).
    #[arg(long, env = "ACP_BRIDGE_SIGNER_FILE", value_name = "PATH")]
    pub signer_file: Option<PathBuf>,

    /// How long one request to the remote signer may take before it counts
    /// as unanswered (it is then tried again, with backoff).
    #[arg(long, env = "ACP_BRIDGE_SIGNER_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub signer_timeout: Duration,

    /// The owner's public key (npub or hex).
    #[arg(long, env = "ACP_BRIDGE_OWNER", value_name = "NPUB")]
    pub owner: Option<String>,

    /// Who is heard.
    #[arg(long, env = "ACP_BRIDGE_RESPOND_TO", value_enum, default_value = "owner-only")]
    pub respond_to: RespondTo,

    /// Public keys heard in allowlist mode (npub or hex; repeatable or comma-separated).
    #[arg(
        long,
        env = "ACP_BRIDGE_ALLOWLIST",
        value_delimiter = ',',
        value_name = "NPUB"
    )]
    pub allowlist: Vec<String>,

    /// Durable state (SQLite). Default: $STATE_DIRECTORY under systemd, else ./acp-bridge-state.
    #[arg(long, env = "ACP_BRIDGE_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Relay messages buffered per relay, and events queued for the intake,
    /// at most; past it the daemon is behind and fetches again from its
    /// watermark.
    #[arg(long, env = "ACP_BRIDGE_RELAY_BUFFER", default_value_t = 4096)]
    pub relay_buffer: usize,

    #[command(flatten)]
    pub agent: AgentArgs,

    #[command(flatten)]
    pub replies: ReplyArgs,

    #[command(flatten)]
    pub intake: IntakeArgs,

    #[command(flatten)]
    pub turns: TurnArgs,

    #[command(flatten)]
    pub context: ContextArgs,

    /// On SIGTERM, in-flight turns get this long to finish before they are cancelled.
    #[arg(long, env = "ACP_BRIDGE_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Sent replies and finished mentions are kept this long in the state
    /// dir, then pruned (hourly); a finished mention also stays while a
    /// relay could replay it. Pending work is never pruned.
    #[arg(long, env = "ACP_BRIDGE_RETENTION", default_value = "7d", value_parser = parse_duration)]
    pub retention: Duration,

    /// Serve Prometheus metrics and /healthz here (off by default).
    #[arg(long, env = "ACP_BRIDGE_METRICS_ADDR", value_name = "ADDR", value_parser = parse_socket_addr)]
    pub metrics_addr: Option<SocketAddr>,

    /// This replica's share of the bot: `INDEX/COUNT`, or `auto/COUNT` to
    /// take the index from the hostname's trailing `-N` (a StatefulSet
    /// pod's ordinal). Every replica runs with the same key, relays and
    /// COUNT; each answers only the conversations that hash to its index.
    #[arg(long, env = "ACP_BRIDGE_SHARD", value_name = "INDEX/COUNT")]
    pub shard: Option<String>,

    /// The bot's display name in its profile (kind 0). Unset: the name the
    /// relays hold, or "acp-bridge bot" for a bot that has none.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_NAME", value_name = "NAME")]
    pub profile_name: Option<String>,

    /// The "about" text of the bot's profile. Unset: whatever the relays hold.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_ABOUT", value_name = "TEXT")]
    pub profile_about: Option<String>,

    /// The picture URL of the bot's profile. Unset: whatever the relays hold.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_PICTURE", value_name = "URL")]
    pub profile_picture: Option<String>,

    /// The bot's DM inbox relays (NIP-17, kind 10050; repeatable or
    /// comma-separated). Unset: the relays it listens on.
    #[arg(long, env = "ACP_BRIDGE_DM_RELAYS", value_delimiter = ',', value_name = "URL")]
    pub dm_relays: Vec<String>,

    /// Directory relays (indexers such as wss://purplepag.es; repeatable or
    /// comma-separated): the bot's profile and relay lists are published
    /// there too, and people's relay lists are looked up there too, since
    /// that is where clients look for them. Unset: the bot's relays only.
    #[arg(
        long,
        env = "ACP_BRIDGE_DIRECTORY_RELAYS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub directory_relays: Vec<String>,
    #[command(flatten)]
    pub groups: crate::groups::GroupArgs,

    /// Threads of the daemon's async runtime (default: one per CPU).
    #[arg(long, env = "ACP_BRIDGE_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: Option<u16>,
}

/// Validated configuration: each stage's settings as its group of flags
/// validated them, and the daemon's own. `Debug` shows no secret: `Keys`
/// prints only the public key, a bunker URI no connection secret.
#[derive(Debug, Clone)]
pub struct Settings {
    pub relays: Vec<RelaySpec>,
    pub signer: SignerSource,
    pub signer_timeout: Duration,
    pub owner: Option<PublicKey>,
    pub respond_to: RespondTo,
    pub allowlist: BTreeSet<PublicKey>,
    pub state_dir: PathBuf,
    /// `--relay-buffer`: relay messages buffered per relay, and events
    /// queued for the intake, at most.
    pub relay_buffer: usize,
    /// The intake's flags: what is heard, and its bounds.
    pub intake: IntakeLimits,
    /// The agents' flags: how the pool runs them.
    pub agent: AgentSettings,
    /// The replies' flags.
    pub replies: ReplySettings,
    /// The turns' flags: mid-turn mentions, agents' questions, waiting.
    pub turns: TurnSettings,
    /// The thread context's flags.
    pub context: ContextSettings,
    pub shutdown_grace: Duration,
    pub retention: Duration,
    pub metrics_addr: Option<SocketAddr>,
    /// `--shard`: the conversations this replica answers.
    pub shard: Shard,
    /// `--profile-*`: the profile fields the daemon manages.
    pub profile: ProfileFields,
    /// `--dm-relays`: the DM inbox relays (empty: the bot's own relays).
    pub dm_relays: Vec<RelayUrl>,
    /// `--directory-relays`: where identities are published and looked up
    /// besides the bot's relays.
    pub directory_relays: Vec<RelayUrl>,
    /// `--group`, `--other-groups`: the NIP-29 groups the bot serves.
    pub groups: crate::groups::GroupSettings,
    /// Of `--secret-key-file` and `--signer-file`, those other users may
    /// access: `run` warns (a deployment that ran with one keeps running
    /// after an upgrade), `check` says not ready until they are `chmod 600`.
    pub exposed_secret_files: Vec<PathBuf>,
}

impl RunArgs {
    /// Validates every value. `env` reads the process environment (a
    /// parameter so tests need not mutate the real one).
    pub fn validate(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, ConfigError> {
        let relays = parse_relays(&self.relays)?;
        let signer = self.signer_source(env)?;
        let owner = self
            .owner
            .as_deref()
            .map(|owner| parse_public_key(owner).map_err(|problem| refuse("--owner", problem)))
            .transpose()?;
        if owner.is_none() && matches!(self.respond_to, RespondTo::OwnerOnly | RespondTo::Allowlist) {
            return Err(refuse(
                "--owner",
                "required with --respond-to owner-only or allowlist (set ACP_BRIDGE_OWNER)",
            ));
        }
        if owner.is_none() && self.turns.permission_policy == PermissionPolicyArg::AskOwner {
            return Err(refuse(
                "--owner",
                "required with --permission-policy ask-owner (the owner answers the questions)",
            ));
        }
        let turns = self.turns.validate()?;
        if owner.is_some() && owner == signer.known_public_key() {
            return Err(refuse(
                "--owner",
                "is the bot's own key; the owner must be a different key",
            ));
        }
        let allowlist = parse_allowlist(&self.allowlist)?;
        if self.respond_to == RespondTo::Allowlist && allowlist.is_empty() {
            return Err(refuse(
                "--allowlist",
                "is empty, but --respond-to allowlist needs at least one key",
            ));
        }
        let intake = self.intake.validate()?;
        let profile = profile_fields(&self.profile_name, &self.profile_about, &self.profile_picture)?;
        let dm_relays = parse_relay_urls("--dm-relays", &self.dm_relays)?;
        let directory_relays = parse_relay_urls("--directory-relays", &self.directory_relays)?;
        let groups = self
            .groups
            .validate(&relays)
            .map_err(|error| refuse("--group", error.to_string()))?;
        let replies = self.replies.validate()?;
        let context = self.context.validate()?;
        let relay_buffer = at_least_one("--relay-buffer", self.relay_buffer)?;
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
            crate::isolation::check_state_dir(&state_dir, &agent.cwd, user)
                .map_err(|error| refuse("--state-dir", error.to_string()))?;
        }
        let exposed_secret_files: Vec<PathBuf> = [&self.secret_key_file, &self.signer_file]
            .into_iter()
            .flatten()
            .filter(|path| open_to_others(path))
            .cloned()
            .collect();
        // Warnings last: they belong to a configuration that runs, never
        // before another flag's refusal.
        self.warn_of_secret_sources(&signer, &exposed_secret_files);
        if agent.user.is_none() {
            tracing::warn!(
                "agents run as the daemon's user: the tools they run can read the key file, the state dir and the daemon's environment; run the daemon as root with --agent-user"
            );
        }
        Ok(Settings {
            relays,
            owner,
            respond_to: self.respond_to,
            allowlist,
            state_dir,
            relay_buffer,
            intake,
            agent,
            replies,
            turns,
            context,
            shutdown_grace: self.shutdown_grace,
            retention,
            metrics_addr: self.metrics_addr,
            shard,
            profile,
            dm_relays,
            directory_relays,
            groups,
            signer,
            signer_timeout: self.signer_timeout,
            exposed_secret_files,
        })
    }

    /// Warns of secrets kept where others can read them: a key in the
    /// environment, a bunker URI on the command line, a secret file open
    /// to other users.
    fn warn_of_secret_sources(&self, signer: &SignerSource, exposed_files: &[PathBuf]) {
        match signer {
            SignerSource::Keys(_) if self.secret_key_file.is_none() => tracing::warn!(
                "the secret key came from {SECRET_KEY_ENV}: it stays readable in /proc/<pid>/environ to every process of the daemon's user for the daemon's life; prefer --secret-key-file"
            ),
            SignerSource::Bunker(_) if self.signer.is_some() => tracing::warn!(
                "the bunker URI came from --signer or ACP_BRIDGE_SIGNER: its secret stays readable in the process's command line or environment; prefer --signer-file"
            ),
            _ => {}
        }
        for path in exposed_files {
            tracing::warn!(path = %path.display(), "the secret key file is accessible to other users; chmod 600 it");
        }
    }

    /// The bot's key (`--secret-key-file`, `ACP_BRIDGE_SECRET_KEY`) or the
    /// remote signer (`--signer`, `--signer-file`): exactly one of them.
    fn signer_source(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<SignerSource, ConfigError> {
        let bunker = match (&self.signer, &self.signer_file) {
            (Some(_), Some(_)) => {
                return Err(refuse("--signer", "give --signer or --signer-file, not both"));
            }
            (Some(uri), None) => {
                let uri = BunkerUri::parse(uri)
                    .map_err(|problem| refuse("--signer", format!("the URI {problem}")))?;
                Some(uri)
            }
            (None, Some(path)) => {
                Some(BunkerUri::read(path).map_err(|problem| refuse("--signer-file", problem))?)
            }
            (None, None) => None,
        };
        match bunker {
            Some(_) if self.secret_key_file.is_some() || env(SECRET_KEY_ENV).is_some() => Err(refuse(
                "--signer",
                format!("a remote signer holds the bot's key: drop --secret-key-file and {SECRET_KEY_ENV}"),
            )),
            Some(uri) => Ok(SignerSource::Bunker(uri)),
            None => load_secret_key(self.secret_key_file.as_deref(), env).map(SignerSource::Keys),
        }
    }
}

impl Settings {
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
            relays: vec![RelaySpec::Url(relay)],
            signer: SignerSource::Keys(bot),
            signer_timeout: defaults.signer_timeout,
            owner: Some(owner),
            respond_to: RespondTo::OwnerOnly,
            allowlist: BTreeSet::new(),
            state_dir,
            relay_buffer: defaults.relay_buffer,
            // Group chat only: the demo and the benchmarks speak in a group.
            intake: IntakeLimits {
                kinds: vec![Kind::Custom(9)],
                ..IntakeLimits::default()
            },
            agent: AgentSettings::local(command, args),
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
            // A local run is stopped by its program, which waits for less.
            shutdown_grace: Duration::from_secs(5),
            retention: defaults.retention,
            metrics_addr: None,
            shard: Shard::WHOLE,
            profile: ProfileFields::default(),
            dm_relays: Vec::new(),
            directory_relays: Vec::new(),
            groups: crate::groups::GroupSettings::default(),
            exposed_secret_files: Vec::new(),
        }
    }

    /// One line describing the effective configuration, for the start-up
    /// log. Public keys only; no secret, no agent environment values.
    pub fn summary(&self) -> String {
        let relays: Vec<String> = self
            .relays
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
        format!(
            "bot={} owner={} respond_to={} allowlist={} relays=[{}] kinds=[{}] state_dir={} agent=`{} {}` agents={} agent_env=[{}] mode={} dedup={} session_policy={} permission={} reply_mode={} reactions={} retention={}s",
            self.signer
                .known_public_key()
                .map_or_else(|| "(from the remote signer)".to_owned(), |bot| npub(&bot)),
            self.owner.as_ref().map_or_else(|| "none".to_owned(), npub),
            flag_spelling(&self.respond_to),
            self.allowlist.len(),
            relays.join(","),
            kinds.join(","),
            self.state_dir.display(),
            self.agent.command,
            self.agent.args.join(" "),
            self.agent.processes,
            env_names.join(","),
            flag_spelling(&self.turns.multiple_event_handling),
            flag_spelling(&self.turns.dedup),
            flag_spelling(&self.intake.session_policy),
            flag_spelling(&self.turns.permission_policy),
            flag_spelling(&self.replies.mode),
            self.replies.reactions,
            self.retention.as_secs(),
        )
    }
}

fn parse_relays(values: &[String]) -> Result<Vec<RelaySpec>, ConfigError> {
    let mut relays = Vec::new();
    for value in values
        .iter()
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
    {
        let relay = if value == "embedded" {
            RelaySpec::Embedded
        } else {
            RelaySpec::Url(relay_url("--relay", value)?)
        };
        if !relays.contains(&relay) {
            relays.push(relay);
        }
    }
    if relays.is_empty() {
        return Err(refuse(
            "--relay",
            "at least one relay is required (a ws:// or wss:// URL, or `embedded`)",
        ));
    }
    Ok(relays)
}

/// A list of relay URLs (`--dm-relays`, `--directory-relays`), in order,
/// without duplicates.
fn parse_relay_urls(flag: &'static str, values: &[String]) -> Result<Vec<RelayUrl>, ConfigError> {
    let mut relays = Vec::new();
    for value in values
        .iter()
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
    {
        let relay = relay_url(flag, value)?;
        if !relays.contains(&relay) {
            relays.push(relay);
        }
    }
    Ok(relays)
}

/// One relay URL of `flag`; a refusal says what a relay URL looks like.
fn relay_url(flag: &'static str, value: &str) -> Result<RelayUrl, ConfigError> {
    RelayUrl::parse(value).map_err(|error| {
        refuse(
            flag,
            format!(
                "`{value}` is not a relay URL ({}): use a ws:// or wss:// URL, e.g. wss://relay.example.com",
                error.to_string().to_lowercase()
            ),
        )
    })
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

/// `--profile-picture`: an http(s) URL (clients fetch it as an image), or
/// `None` when unset or blank.
/// `--profile-name`, `--profile-about` and `--profile-picture` (blank:
/// unset), as at start and on a reload of the config file.
pub(crate) fn profile_fields(
    name: &Option<String>,
    about: &Option<String>,
    picture: &Option<String>,
) -> Result<ProfileFields, ConfigError> {
    Ok(ProfileFields {
        name: non_empty(name),
        about: non_empty(about),
        picture: picture_url(picture)?,
    })
}

fn picture_url(value: &Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(text) = non_empty(value) else {
        return Ok(None);
    };
    match Url::parse(&text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(Some(text)),
        _ => Err(refuse(
            "--profile-picture",
            format!(
                "`{text}` is not an http(s) URL: give the image's address, e.g. https://example.com/bot.png"
            ),
        )),
    }
}

/// A text flag's value, `None` when unset or blank.
fn non_empty(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

/// `--allowlist`'s keys (blank entries skipped), as at start and on a
/// reload of the config file.
pub(crate) fn parse_allowlist(entries: &[String]) -> Result<BTreeSet<PublicKey>, ConfigError> {
    entries
        .iter()
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| parse_public_key(entry.trim()).map_err(|problem| refuse("--allowlist", problem)))
        .collect()
}

fn parse_public_key(value: &str) -> Result<PublicKey, String> {
    PublicKey::parse(value)
        .map_err(|_| format!("`{value}` is not a valid public key: give an npub1… or 64 hex characters"))
}

/// Reads the bot's key from `--secret-key-file` or `ACP_BRIDGE_SECRET_KEY`.
/// Errors never contain the key material.
fn load_secret_key(file: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Keys, ConfigError> {
    match (file, env(SECRET_KEY_ENV)) {
        (Some(_), Some(_)) => Err(refuse(
            "--secret-key-file",
            format!("both a key file and {SECRET_KEY_ENV} are set; set only one"),
        )),
        (Some(path), None) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                let create = format!(
                    "create a key there with `acp-bridge keygen --out {}`",
                    path.display()
                );
                refuse("--secret-key-file", secret_file_unreadable(path, &error, &create))
            })?;
            Keys::parse(text.trim()).map_err(|_| {
                refuse(
                    "--secret-key-file",
                    format!(
                        "`{}` does not hold a valid nsec or hex secret key: put an nsec1… or 64 hex characters in it, or make a new key file with `acp-bridge keygen --out PATH`",
                        path.display()
                    ),
                )
            })
        }
        (None, Some(text)) => Keys::parse(text.trim()).map_err(|_| {
            refuse(
                "--secret-key-file",
                format!(
                    "{SECRET_KEY_ENV} is not a valid nsec or hex secret key: set it to an nsec1… or 64 hex characters, or use --secret-key-file (create one with `acp-bridge keygen`)"
                ),
            )
        }),
        (None, None) => Err(refuse(
            "--secret-key-file",
            format!(
                "no secret key: pass --secret-key-file PATH or set {SECRET_KEY_ENV} (create one with `acp-bridge keygen`), or sign through a remote signer with --signer-file PATH"
            ),
        )),
    }
}

/// Whether users other than the file's owner and group may access `path`.
/// Group read is how orchestrators hand secrets to non-root users
/// (Kubernetes `fsGroup`); access for everyone else is a mistake.
fn open_to_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|metadata| metadata.permissions().mode() & 0o007 != 0)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

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
        assert_eq!(settings.relays, vec![RelaySpec::Embedded]);
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
        assert!(matches!(settings.signer, SignerSource::Bunker(_)));
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
