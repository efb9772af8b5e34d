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
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_client::AgentUser;
use clap::{Args, ValueEnum};
use nostr_sdk::prelude::{Keys, Kind, PublicKey, RelayUrl, Url};

use crate::embedded_relay::RelaySpec;
use crate::gate::RespondTo;
use crate::identity::ProfileFields;
use crate::intake::FollowThreads;
use crate::loop_guard::ChainBounds;
use crate::mention::{SessionPolicy, npub};
use crate::mode_gate::{Dedup, MultipleEventHandling};
use crate::pool::{AgentSettings, PermissionPolicyArg};
use crate::reply::{ReplyContent, ReplyMode};
use crate::shard::{Shard, ShardSpec};
use crate::signer::{BunkerUri, SignerSource, secret_file_unreadable};
use crate::thread_context::{ContextFrom, DEFAULT_CONTEXT_BYTES, MIN_CONTEXT_BYTES};

/// Environment variable that may hold the bot's secret key (nsec or hex).
pub(crate) const SECRET_KEY_ENV: &str = "ACP_BRIDGE_SECRET_KEY";
/// Set by systemd's `StateDirectory=`; our default state dir when present.
const SYSTEMD_STATE_ENV: &str = "STATE_DIRECTORY";
const DEFAULT_STATE_DIR: &str = "acp-bridge-state";
/// The longest `--permission-timeout` taken: a question to the owner holds
/// its turn and its agent while it waits (24 h, as the flag's help says).
const MAX_PERMISSION_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// `--permission-timeout`'s default (the flag's `15m`), for settings built
/// without flags.
const DEFAULT_PERMISSION_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Set by container runtimes to the pod's name; `--shard auto/N` reads it.
const HOSTNAME_ENV: &str = "HOSTNAME";
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

    /// Event kinds to listen to: 9 (NIP-29 group chat), 1 (notes), 1059 (NIP-17 DMs).
    #[arg(
        long,
        env = "ACP_BRIDGE_KINDS",
        value_delimiter = ',',
        default_value = "9,1,1059"
    )]
    pub kinds: Vec<u16>,

    /// Durable state (SQLite). Default: $STATE_DIRECTORY under systemd, else ./acp-bridge-state.
    #[arg(long, env = "ACP_BRIDGE_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Who publishes answers.
    #[arg(long, env = "ACP_BRIDGE_REPLY_MODE", value_enum, default_value = "daemon")]
    pub reply_mode: ReplyMode,

    /// What a reply carries: the agent's answer, or everything it wrote
    /// (its narration between tool calls too).
    #[arg(long, env = "ACP_BRIDGE_REPLY_CONTENT", value_enum, default_value = "answer")]
    pub reply_content: ReplyContent,

    /// Do not react (NIP-25) to accepted mentions.
    #[arg(long, env = "ACP_BRIDGE_NO_REACTIONS")]
    pub no_reactions: bool,

    /// Replies in a thread the bot has answered in count as mentions
    /// (`involved`), without the bot's `p` tag; `off`: only tagged events.
    #[arg(
        long,
        env = "ACP_BRIDGE_FOLLOW_THREADS",
        value_enum,
        default_value = "involved"
    )]
    pub follow_threads: FollowThreads,

    /// Largest mention content accepted for a turn; bigger ones get a notice.
    #[arg(long, env = "ACP_BRIDGE_MAX_CONTENT_BYTES", default_value_t = 64 * 1024)]
    pub max_content_bytes: usize,

    /// Most of the agent's text kept for one reply; past it the text is
    /// dropped and the reply says it was truncated. Long replies go out as
    /// a numbered series of events.
    #[arg(long, env = "ACP_BRIDGE_MAX_REPLY_BYTES", default_value_t = acp_client::DEFAULT_MAX_TEXT_BYTES)]
    pub max_reply_bytes: usize,

    /// Mentions an author may send in a burst before being rate-limited (the owner is exempt).
    #[arg(long, env = "ACP_BRIDGE_RATE_LIMIT_BURST", default_value_t = 10)]
    pub rate_limit_burst: u32,

    /// One more mention is allowed per this interval once the burst is spent.
    #[arg(long, env = "ACP_BRIDGE_RATE_LIMIT_REFILL", default_value = "6s", value_parser = parse_duration)]
    pub rate_limit_refill: Duration,

    /// Sibling bots may chain replies to our replies at most this deep.
    #[arg(long, env = "ACP_BRIDGE_MAX_BOT_HOPS", default_value_t = 3)]
    pub max_bot_hops: u32,

    /// Mentions waiting for a turn, in all conversations, at most; past it
    /// new mentions get a (rate-limited) notice instead (the owner's are
    /// still taken).
    #[arg(long, env = "ACP_BRIDGE_MAX_QUEUED", default_value_t = 10_000)]
    pub max_queued: usize,

    /// Bytes held at most by events that wait for their author's profile
    /// lookup (one author: a sixteenth of it); past it an event is left to
    /// the relay and fetched again later.
    #[arg(long, env = "ACP_BRIDGE_MAX_PARKED_BYTES", default_value_t = crate::intake::DEFAULT_MAX_PARKED_BYTES)]
    pub max_parked_bytes: usize,

    /// Relay messages buffered per relay, and events queued for the intake,
    /// at most; past it the daemon is behind and fetches again from its
    /// watermark.
    #[arg(long, env = "ACP_BRIDGE_RELAY_BUFFER", default_value_t = 4096)]
    pub relay_buffer: usize,

    /// Anyone else but the owner may chain replies to our replies this deep:
    /// at this depth they are told to start afresh, past it they are not answered.
    #[arg(long, env = "ACP_BRIDGE_MAX_REPLY_CHAIN", default_value_t = 20)]
    pub max_reply_chain: u32,

    /// The ACP agent to run.
    #[arg(long, env = "ACP_BRIDGE_AGENT_COMMAND", default_value = "goose")]
    pub agent_command: String,

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

    /// Names of environment variables passed through to agents (comma-separated),
    /// beside a small baseline (PATH, HOME, locale, XDG dirs). Provider keys go here.
    #[arg(
        long,
        env = "ACP_BRIDGE_AGENT_ENV",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub agent_env: Vec<String>,

    /// The agent's authentication method (one of the `authMethods` its
    /// `initialize` lists). Without it, the one `env_var` method whose
    /// variables are all passed to the agent is used when the agent asks.
    #[arg(long, env = "ACP_BRIDGE_AGENT_AUTH_METHOD", value_name = "ID")]
    pub agent_auth_method: Option<String>,

    /// Run agents as this user (its uid, gid, groups and HOME), so the
    /// tools they run cannot read the key file, the state dir or the
    /// daemon's environment. The daemon must run as root, and refuses a
    /// state dir inside --cwd or one this user could change.
    #[arg(long, env = "ACP_BRIDGE_AGENT_USER", value_name = "USER")]
    pub agent_user: Option<String>,

    /// Agent processes (each hosts many sessions).
    #[arg(long, env = "ACP_BRIDGE_AGENTS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub agents: u32,

    /// Turns one agent process may run at once (each on its own session).
    #[arg(long, env = "ACP_BRIDGE_TURNS_PER_AGENT", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub turns_per_agent: u32,

    /// Working directory of the agents.
    #[arg(long, env = "ACP_BRIDGE_CWD", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// A turn with no sign of life from the agent for this long fails.
    #[arg(long, env = "ACP_BRIDGE_IDLE_TIMEOUT", default_value = "900s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Hard limit of one turn.
    #[arg(long, env = "ACP_BRIDGE_MAX_TURN_DURATION", default_value = "7200s", value_parser = parse_duration)]
    pub max_turn_duration: Duration,

    /// An agent that has not ended a cancelled turn after this long is
    /// killed and replaced (its turn is retried).
    #[arg(long, env = "ACP_BRIDGE_CANCEL_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub cancel_timeout: Duration,

    /// What a mention arriving mid-turn does.
    #[arg(
        long,
        env = "ACP_BRIDGE_MULTIPLE_EVENT_HANDLING",
        value_enum,
        default_value = "steer"
    )]
    pub multiple_event_handling: MultipleEventHandling,

    /// What happens to mid-turn mentions the mode gate does not take.
    #[arg(long, env = "ACP_BRIDGE_DEDUP", value_enum, default_value = "queue")]
    pub dedup: Dedup,

    /// Which conversations share an agent session.
    #[arg(
        long,
        env = "ACP_BRIDGE_SESSION_POLICY",
        value_enum,
        default_value = "conversation"
    )]
    pub session_policy: SessionPolicy,

    /// How agents' permission questions are answered. `allow` runs every tool
    /// the agent asks for; `ask-owner` asks you in the thread.
    #[arg(
        long,
        env = "ACP_BRIDGE_PERMISSION_POLICY",
        value_enum,
        default_value = "allow"
    )]
    pub permission_policy: PermissionPolicyArg,

    /// A question to the owner unanswered this long is refused: a
    /// permission rejected, a form declined. Between 1s and 24h; 0 (wait
    /// forever) is refused, as an unanswered question holds its turn and
    /// its agent.
    #[arg(long, env = "ACP_BRIDGE_PERMISSION_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    pub permission_timeout: Duration,

    /// A mention still waiting for its turn after this long gets one
    /// notice saying why (queued behind others, its conversation's turn in
    /// flight, its agent still starting, a retry's backoff) and for how
    /// long (0 = never).
    #[arg(long, env = "ACP_BRIDGE_WAIT_NOTICE_AFTER", default_value = "5s", value_parser = parse_duration)]
    pub wait_notice_after: Duration,

    /// A turn's first prompt carries up to this many of its thread's
    /// earlier messages that the session has not seen, fetched from the
    /// relay, each with its author's standing (0 = none).
    #[arg(long, env = "ACP_BRIDGE_THREAD_CONTEXT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub thread_context: u32,

    /// Whose earlier messages the thread context quotes: `heard` (only
    /// authors the author gate hears in the conversation) or `anyone`
    /// (every reader of the thread can then write into the agent's prompt:
    /// a prompt-injection risk, see the README).
    #[arg(
        long,
        env = "ACP_BRIDGE_THREAD_CONTEXT_FROM",
        value_enum,
        default_value = "heard"
    )]
    pub thread_context_from: ContextFrom,

    /// Most bytes of thread context one prompt carries, framing included
    /// (each message is also cut at --max-content-bytes); the newest
    /// messages are kept first.
    #[arg(long, env = "ACP_BRIDGE_THREAD_CONTEXT_BYTES", default_value_t = DEFAULT_CONTEXT_BYTES)]
    pub thread_context_bytes: usize,

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

    /// How long an agent may take to start and answer `initialize` (an
    /// agent in a pod that is still being scheduled takes tens of seconds).
    #[arg(long, env = "ACP_BRIDGE_AGENT_START_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub agent_start_timeout: Duration,

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

/// Validated configuration. `Debug` shows no secret: `Keys` prints only the
/// public key, a bunker URI no connection secret.
#[derive(Debug, Clone)]
pub struct Settings {
    pub relays: Vec<RelaySpec>,
    pub signer: SignerSource,
    pub signer_timeout: Duration,
    pub owner: Option<PublicKey>,
    pub respond_to: RespondTo,
    pub allowlist: BTreeSet<PublicKey>,
    pub kinds: Vec<Kind>,
    pub state_dir: PathBuf,
    pub reply_mode: ReplyMode,
    pub reactions: bool,
    pub follow_threads: FollowThreads,
    pub max_content_bytes: usize,
    pub max_reply_bytes: usize,
    pub rate_limit_burst: u32,
    pub rate_limit_refill: Duration,
    pub chain_bounds: ChainBounds,
    pub max_queued: usize,
    pub max_parked_bytes: usize,
    pub relay_buffer: usize,
    pub agent: AgentSettings,
    pub reply_content: ReplyContent,
    pub multiple_event_handling: MultipleEventHandling,
    pub dedup: Dedup,
    pub session_policy: SessionPolicy,
    pub permission_policy: PermissionPolicyArg,
    pub permission_timeout: Duration,
    pub wait_notice_after: Option<Duration>,
    pub thread_context: usize,
    pub thread_context_from: ContextFrom,
    pub thread_context_bytes: usize,
    pub shutdown_grace: Duration,
    pub retention: Duration,
    pub metrics_addr: Option<SocketAddr>,
    /// `--shard`: the conversations this replica answers.
    pub shard: Shard,
    /// `--agent-start-timeout`: the bound on an agent's `initialize`.
    pub agent_start_timeout: Duration,
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

/// A refusal of the configuration: one line, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub flag: &'static str,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.problem)
    }
}

impl std::error::Error for ConfigError {}

fn refuse(flag: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        problem: problem.into(),
    }
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
        if owner.is_none() && self.permission_policy == PermissionPolicyArg::AskOwner {
            return Err(refuse(
                "--owner",
                "required with --permission-policy ask-owner (the owner answers the questions)",
            ));
        }
        if self.permission_timeout.is_zero() || self.permission_timeout > MAX_PERMISSION_TIMEOUT {
            return Err(refuse(
                "--permission-timeout",
                "must be between 1s and 24h: a question nobody answers holds its turn and its agent until then (0, once \"wait forever\", is no longer allowed)",
            ));
        }
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
        let kinds = parse_kinds(&self.kinds)?;
        let profile = profile_fields(&self.profile_name, &self.profile_about, &self.profile_picture)?;
        let dm_relays = parse_relay_urls("--dm-relays", &self.dm_relays)?;
        let directory_relays = parse_relay_urls("--directory-relays", &self.directory_relays)?;
        let groups = self
            .groups
            .validate(&relays)
            .map_err(|error| refuse("--group", error.to_string()))?;
        if self.multiple_event_handling != MultipleEventHandling::Queue && self.dedup != Dedup::Queue {
            return Err(refuse(
                "--dedup",
                "must be `queue` unless --multiple-event-handling is `queue`: steering and interrupting merge mid-turn mentions into a turn, which needs them kept",
            ));
        }
        if self.rate_limit_burst == 0 {
            return Err(refuse("--rate-limit-burst", "must be at least 1"));
        }
        if self.max_content_bytes == 0 {
            return Err(refuse("--max-content-bytes", "must be at least 1"));
        }
        if self.thread_context_bytes < MIN_CONTEXT_BYTES {
            return Err(refuse(
                "--thread-context-bytes",
                format!(
                    "must be at least {MIN_CONTEXT_BYTES} (to turn thread context off, use --thread-context 0)"
                ),
            ));
        }
        if self.max_queued == 0 {
            return Err(refuse("--max-queued", "must be at least 1"));
        }
        if self.max_parked_bytes == 0 {
            return Err(refuse("--max-parked-bytes", "must be at least 1"));
        }
        if self.relay_buffer == 0 {
            return Err(refuse("--relay-buffer", "must be at least 1"));
        }
        if self.max_reply_bytes == 0 {
            return Err(refuse("--max-reply-bytes", "must be at least 1"));
        }
        for (flag, value) in [
            ("--idle-timeout", self.idle_timeout),
            ("--max-turn-duration", self.max_turn_duration),
            ("--cancel-timeout", self.cancel_timeout),
            ("--rate-limit-refill", self.rate_limit_refill),
            ("--retention", self.retention),
            ("--agent-start-timeout", self.agent_start_timeout),
        ] {
            if value.is_zero() {
                return Err(refuse(flag, "must be longer than zero"));
            }
        }
        let shard = match self.shard.as_deref().filter(|spec| !spec.trim().is_empty()) {
            Some(spec) => spec
                .parse::<ShardSpec>()
                .and_then(|spec| spec.resolve(env(HOSTNAME_ENV)))
                .map_err(|error| refuse("--shard", error.to_string()))?,
            None => Shard::WHOLE,
        };
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
        let agent_user = self
            .agent_user
            .as_deref()
            .filter(|name| !name.is_empty())
            .map(agent_user)
            .transpose()?;
        let state_dir = self
            .state_dir
            .clone()
            .or_else(|| env(SYSTEMD_STATE_ENV).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        if let Some(problem) = state_dir_problem(&state_dir) {
            return Err(refuse("--state-dir", problem));
        }
        if let Some(user) = &agent_user {
            crate::isolation::check_state_dir(&state_dir, &cwd, user)
                .map_err(|error| refuse("--state-dir", error.to_string()))?;
        }
        let agent = self.agent_settings(cwd, agent_user, env)?;
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
            kinds,
            state_dir,
            reply_mode: self.reply_mode,
            reactions: !self.no_reactions,
            follow_threads: self.follow_threads,
            max_content_bytes: self.max_content_bytes,
            max_reply_bytes: self.max_reply_bytes,
            rate_limit_burst: self.rate_limit_burst,
            rate_limit_refill: self.rate_limit_refill,
            chain_bounds: ChainBounds {
                max_bot_hops: self.max_bot_hops,
                max_reply_chain: self.max_reply_chain,
            },
            max_queued: self.max_queued,
            max_parked_bytes: self.max_parked_bytes,
            relay_buffer: self.relay_buffer,
            agent,
            reply_content: self.reply_content,
            multiple_event_handling: self.multiple_event_handling,
            dedup: self.dedup,
            session_policy: self.session_policy,
            permission_policy: self.permission_policy,
            permission_timeout: self.permission_timeout,
            wait_notice_after: (!self.wait_notice_after.is_zero()).then_some(self.wait_notice_after),
            thread_context: self.thread_context as usize,
            thread_context_from: self.thread_context_from,
            thread_context_bytes: self.thread_context_bytes,
            shutdown_grace: self.shutdown_grace,
            retention: self.retention,
            metrics_addr: self.metrics_addr,
            shard,
            agent_start_timeout: self.agent_start_timeout,
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

    /// How agents run (`--agent-*`, `--agents`, `--turns-per-agent`, the
    /// turn bounds) in `cwd` as `user`. The program is looked up as the
    /// pool will run it, so that a missing or non-executable agent stops
    /// start-up instead of failing the first mention.
    fn agent_settings(
        &self,
        cwd: PathBuf,
        user: Option<AgentUser>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AgentSettings, ConfigError> {
        let args = match &self.agent_args {
            Some(words) => split_agent_args(words)?,
            None => default_agent_args(&self.agent_command),
        };
        let mut agent_env = agent_environment(&self.agent_env, env);
        if let Some(user) = &user {
            agent_env = as_agent_user(agent_env, user, &self.agent_env);
        }
        let agent = AgentSettings {
            args,
            command: self.agent_command.clone(),
            env: agent_env,
            processes: self.agents,
            turns_per_agent: self.turns_per_agent,
            cwd,
            idle_timeout: self.idle_timeout,
            max_turn_duration: self.max_turn_duration,
            cancel_timeout: self.cancel_timeout,
            auth_method: self.agent_auth_method.clone().filter(|method| !method.is_empty()),
            user,
        };
        crate::pool::check_program(&agent).map_err(|problem| refuse("--agent-command", problem))?;
        Ok(agent)
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
    /// Defaults for a bridge run on one machine by a program rather than an
    /// operator (the demo, the benchmarks): one relay, the given keys and
    /// agent, owner-only, steer mode. Nothing is read from the environment
    /// but `PATH`, so an operator's `ACP_BRIDGE_*` cannot change it.
    pub fn local(
        relay: RelayUrl,
        bot: Keys,
        owner: PublicKey,
        state_dir: PathBuf,
        agent: (String, Vec<String>),
    ) -> Self {
        let (command, args) = agent;
        Settings {
            relays: vec![RelaySpec::Url(relay)],
            signer: SignerSource::Keys(bot),
            signer_timeout: crate::signer::DEFAULT_SIGNER_TIMEOUT,
            owner: Some(owner),
            respond_to: RespondTo::OwnerOnly,
            allowlist: BTreeSet::new(),
            kinds: vec![Kind::Custom(9)],
            state_dir,
            reply_mode: ReplyMode::Daemon,
            reactions: true,
            follow_threads: FollowThreads::Involved,
            max_content_bytes: 64 * 1024,
            max_reply_bytes: acp_client::DEFAULT_MAX_TEXT_BYTES,
            rate_limit_burst: 10,
            rate_limit_refill: Duration::from_secs(6),
            chain_bounds: ChainBounds {
                max_bot_hops: 3,
                max_reply_chain: 20,
            },
            max_queued: 10_000,
            max_parked_bytes: crate::intake::DEFAULT_MAX_PARKED_BYTES,
            relay_buffer: 4096,
            agent: AgentSettings {
                command,
                args,
                env: std::env::var("PATH")
                    .map(|path| vec![("PATH".to_owned(), path)])
                    .unwrap_or_default(),
                processes: 1,
                turns_per_agent: 4,
                cwd: std::env::temp_dir(),
                idle_timeout: Duration::from_secs(900),
                max_turn_duration: Duration::from_secs(7200),
                cancel_timeout: acp_client::DEFAULT_CANCEL_TIMEOUT,
                auth_method: None,
                user: None,
            },
            reply_content: ReplyContent::Answer,
            multiple_event_handling: MultipleEventHandling::Steer,
            dedup: Dedup::Queue,
            session_policy: SessionPolicy::Conversation,
            permission_policy: PermissionPolicyArg::Allow,
            permission_timeout: DEFAULT_PERMISSION_TIMEOUT,
            wait_notice_after: None,
            thread_context: 0,
            thread_context_from: ContextFrom::Heard,
            thread_context_bytes: DEFAULT_CONTEXT_BYTES,
            shutdown_grace: Duration::from_secs(5),
            retention: Duration::from_secs(7 * 24 * 3600),
            metrics_addr: None,
            shard: Shard::WHOLE,
            agent_start_timeout: acp_client::DEFAULT_INITIALIZE_TIMEOUT,
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
        let kinds: Vec<String> = self.kinds.iter().map(|kind| kind.as_u16().to_string()).collect();
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
            flag_spelling(&self.multiple_event_handling),
            flag_spelling(&self.dedup),
            flag_spelling(&self.session_policy),
            flag_spelling(&self.permission_policy),
            flag_spelling(&self.reply_mode),
            self.reactions,
            self.retention.as_secs(),
        )
    }
}

/// `value` as its flag spells it (`owner-only`, not `OwnerOnly`): clap's
/// own spelling, the one source of it, so that the log and `check` speak
/// the flags' language.
pub(crate) fn flag_spelling<T: ValueEnum>(value: &T) -> String {
    value.to_possible_value().map_or_else(
        || "(unnamed)".to_owned(),
        |possible| possible.get_name().to_owned(),
    )
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

fn parse_kinds(values: &[u16]) -> Result<Vec<Kind>, ConfigError> {
    const SUPPORTED: [u16; 3] = [9, 1, 1059];
    let mut kinds = Vec::new();
    for &value in values {
        if !SUPPORTED.contains(&value) {
            return Err(refuse(
                "--kinds",
                format!("kind {value} is not supported (supported: 9 group chat, 1 notes, 1059 DMs)"),
            ));
        }
        if !kinds.contains(&Kind::from(value)) {
            kinds.push(Kind::from(value));
        }
    }
    if kinds.is_empty() {
        return Err(refuse("--kinds", "at least one kind is required"));
    }
    Ok(kinds)
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

/// Parses an `IP:PORT` listening address.
fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "`{text}` is not an IP address and port: write e.g. 127.0.0.1:9464 (a host name is not taken)"
        )
    })
}

/// Parses `90s`, `15m`, `2h`, `7d` or `500ms`; `0` alone needs no unit.
/// A unit is required otherwise: `5` could mean seconds or minutes, and a
/// guess is how a timeout ends up sixty times too short.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (examples: 90s, 15m, 2h)"))?;
    let seconds_per_unit = match unit {
        "" if number == 0 => return Ok(Duration::ZERO),
        "" => {
            return Err(format!(
                "`{text}` has no unit: add one, e.g. {text}s (ms, s, m, h or d)"
            ));
        }
        "ms" => return Ok(Duration::from_millis(number)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 24 * 3600,
        _ => return Err(format!("`{text}` has an unknown unit (use ms, s, m, h or d)")),
    };
    number
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long a duration"))
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
            with("24h").expect("a day").permission_timeout,
            MAX_PERMISSION_TIMEOUT
        );
        assert_eq!(
            with("90s").expect("taken").permission_timeout,
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

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO), "zero needs no unit");
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 24 * 3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5w").is_err());
        assert_eq!(
            parse_duration("5"),
            Err("`5` has no unit: add one, e.g. 5s (ms, s, m, h or d)".to_owned())
        );
    }
}
