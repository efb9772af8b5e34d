//! Command-line options: the default script of every turn and the
//! misbehaviours that fault tests ask for.
//!
//! `Options` derives `clap::Args` rather than `Parser` so that another binary
//! (the bridge's demo) can embed the agent as a subcommand with
//! `#[command(flatten)]`. Per-turn directives in the prompt text override the
//! script flags for one turn; they live in `directives`.

use std::path::PathBuf;

/// The agent's name in `initialize`'s `agentInfo`.
pub const DEFAULT_AGENT_NAME: &str = "scripted-agent";
/// The ACP protocol version answered to `initialize`.
pub const DEFAULT_PROTOCOL_VERSION: u64 = 1;
/// Rounds played by a turn that does not say otherwise.
pub const DEFAULT_ROUNDS: u32 = 3;
/// Pause before each round: long enough for a client to steer mid-turn.
pub const DEFAULT_ROUND_DELAY_MS: u64 = 200;
/// Pause between two thought chunks of a chattering turn.
pub const DEFAULT_CHATTER_INTERVAL_MS: u64 = 1;

/// How sessions of earlier processes are reopened (`--reopen-sessions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Reopen {
    /// `session/resume`: no replay (also serves `session/close`).
    Resume,
    /// `session/load`: the history is replayed before the answer.
    Load,
}

/// How sessions offer a model and a mode (`--controls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Controls {
    /// `configOptions` (categories `model` and `mode`), set with
    /// `session/set_config_option`.
    Config,
    /// Only the older `modes`, set with `session/set_mode`.
    Modes,
}

/// How the agent plays its turns and how it misbehaves.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// Name announced in `initialize` (`agentInfo.name`).
    #[arg(long, env = "SCRIPTED_AGENT_NAME", default_value = DEFAULT_AGENT_NAME)]
    pub name: String,

    /// Protocol version answered to `initialize`, whatever the client asked.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PROTOCOL_VERSION)]
    pub protocol_version: u64,

    /// Rounds per turn (directive `[rounds=N]`).
    #[arg(long, value_name = "N", env = "SCRIPTED_AGENT_ROUNDS", default_value_t = DEFAULT_ROUNDS)]
    pub rounds: u32,

    /// Pause before each round, in milliseconds (directive `[delay=MS]`).
    #[arg(
        long,
        value_name = "MS",
        env = "SCRIPTED_AGENT_ROUND_DELAY_MS",
        default_value_t = DEFAULT_ROUND_DELAY_MS
    )]
    pub round_delay_ms: u64,

    /// Report a tool call in round 1 of every turn (directive `[tool]`).
    #[arg(long)]
    pub tool_calls: bool,

    /// Ask `session/request_permission` before the round-1 tool call of every
    /// turn (directive `[permission]`; implies a tool call).
    #[arg(long)]
    pub ask_permission: bool,

    /// Every turn streams thought chunks forever and never answers
    /// (directive `[chatter]`); a cancel stops it.
    #[arg(long)]
    pub chatter: bool,

    /// Pause between two thought chunks of a chattering turn, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_CHATTER_INTERVAL_MS)]
    pub chatter_interval_ms: u64,

    /// Sleep this long before answering `initialize` (a slow starter).
    #[arg(long, value_name = "MS")]
    pub init_delay_ms: Option<u64>,

    /// Sleep this long before answering `session/resume` or `session/load`
    /// (a slow reopen, as claude-agent-acp's half a second).
    #[arg(long, value_name = "MS")]
    pub reopen_delay_ms: Option<u64>,

    /// Lack goose's steer extension: its method answers -32601.
    #[arg(long)]
    pub no_steer: bool,

    /// Take the cross-vendor `_session/steering` (and advertise
    /// `_meta.steering.supported`): a steer mid-turn is injected into the
    /// live run and folded in at its next round boundary, at the latest
    /// before the turn answers; with no live run it answers `promptRequired`.
    #[arg(long)]
    pub session_steering: bool,

    /// Advertise `sessionCapabilities.additionalDirectories`; `[say-cwd]`
    /// then also says the directories a session was given.
    #[arg(long)]
    pub additional_directories: bool,

    /// Advertise `promptCapabilities.image`, and end every final message
    /// with what each image block of its prompt held (`[image image/png,
    /// N bytes]`).
    #[arg(long)]
    pub images: bool,

    /// Advertise `promptCapabilities.audio`, and end every final message
    /// with what each audio block held (`[audio audio/ogg, N bytes]`).
    #[arg(long)]
    pub audio: bool,

    /// Do not advertise `mcpCapabilities.http`: the client then offers its
    /// MCP server as a stdio entry, which `[mcp-post=…]` runs.
    #[arg(long)]
    pub no_mcp_http: bool,

    /// Reopen sessions of earlier processes: advertise and serve
    /// `session/resume` (with `session/close`), or `session/load` (which
    /// replays a line of history first). Any `sess_` id is taken as known.
    #[arg(long, value_enum, value_name = "HOW")]
    pub reopen_sessions: Option<Reopen>,

    /// Advertise and serve `session/list` (every session this process
    /// opened, closed ones too, of the `cwd` asked for, with their titles)
    /// and `session/fork`; and title each session on its first prompt
    /// (`session_info_update`, `Title of <session id>`).
    #[arg(long)]
    pub list_sessions: bool,

    /// Offer a model and a mode per session, and end every final message
    /// with the session's `model: …, mode: …`.
    #[arg(long, value_enum, value_name = "HOW")]
    pub controls: Option<Controls>,

    /// Advertise these slash commands after every `session/new` and
    /// `session/resume` (`name:description|…`), and answer a prompt that
    /// starts with `/` as a command: `ran /NAME with args: …`.
    #[arg(long, value_name = "SPEC")]
    pub commands: Option<String>,

    /// Under `--session-steering`, ignore `idleBehavior`: a steer with no
    /// live run starts a turn of its own (answered `startedNewTurn`), whose
    /// output has no prompt answer.
    #[arg(long)]
    pub steering_starts_turns: bool,

    /// An accepted steer ends its run at once, before the next round boundary,
    /// so the steer is discarded unfolded (goose's end-of-run race).
    #[arg(long)]
    pub end_run_after_steer: bool,

    /// Exit abruptly with code 3 after this many rounds of any turn
    /// (directive `[crash-after=N]`).
    #[arg(long, value_name = "N")]
    pub crash_after_rounds: Option<u32>,

    /// Never answer any `session/prompt` (directive `[hang]`).
    #[arg(long)]
    pub hang: bool,

    /// Ignore `session/cancel` entirely: turns run to their normal end.
    #[arg(long)]
    pub ignore_cancel: bool,

    /// Print a non-JSON line to stdout before every round.
    #[arg(long)]
    pub garbage_stdout: bool,

    /// Print one stdout line of this many bytes at the start of every turn.
    #[arg(long, value_name = "N")]
    pub huge_line_bytes: Option<usize>,

    /// Answer the first N prompts of this process with an error, as an
    /// agent whose model call failed would (directive `[fail]` for one);
    /// later prompts play normally.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub fail_first_prompts: u32,

    /// Exit with code 2 at start-up, before reading anything.
    #[arg(long)]
    pub exit_immediately: bool,

    /// Once the client is gone (input closed, output broken), keep running
    /// until killed, like an agent stuck in a tool.
    #[arg(long)]
    pub linger: bool,

    /// Treat bracketed directives in prompts as plain text: the flags alone
    /// script every turn (a restarted test agent must not obey a `[hang]`
    /// it was given before the restart).
    #[arg(long)]
    pub ignore_directives: bool,

    /// Append every frame received from the client, one JSON line each, to
    /// `DIR/<pid>.jsonl`.
    #[arg(long, value_name = "DIR", env = "SCRIPTED_AGENT_FRAME_LOG_DIR")]
    pub frame_log_dir: Option<PathBuf>,
}

impl Default for Options {
    /// The options of a bare `scripted-agent` command line.
    fn default() -> Self {
        Self {
            name: DEFAULT_AGENT_NAME.to_owned(),
            protocol_version: DEFAULT_PROTOCOL_VERSION,
            rounds: DEFAULT_ROUNDS,
            round_delay_ms: DEFAULT_ROUND_DELAY_MS,
            tool_calls: false,
            ask_permission: false,
            chatter: false,
            chatter_interval_ms: DEFAULT_CHATTER_INTERVAL_MS,
            init_delay_ms: None,
            reopen_delay_ms: None,
            no_steer: false,
            session_steering: false,
            additional_directories: false,
            images: false,
            audio: false,
            no_mcp_http: false,
            reopen_sessions: None,
            list_sessions: false,
            controls: None,
            commands: None,
            steering_starts_turns: false,
            end_run_after_steer: false,
            crash_after_rounds: None,
            hang: false,
            ignore_cancel: false,
            garbage_stdout: false,
            huge_line_bytes: None,
            fail_first_prompts: 0,
            exit_immediately: false,
            linger: false,
            ignore_directives: false,
            frame_log_dir: None,
        }
    }
}

impl Options {
    /// One-line summary for the start-up log: the script, then every flag
    /// that changes behaviour, so a test log shows what the peer was told.
    pub fn summary(&self) -> String {
        let mut summary = format!(
            "name={} protocol_version={} rounds={} round_delay_ms={}",
            self.name, self.protocol_version, self.rounds, self.round_delay_ms
        );
        let switches = [
            (self.tool_calls, "--tool-calls"),
            (self.ask_permission, "--ask-permission"),
            (self.chatter, "--chatter"),
            (self.no_steer, "--no-steer"),
            (self.session_steering, "--session-steering"),
            (self.additional_directories, "--additional-directories"),
            (self.images, "--images"),
            (self.audio, "--audio"),
            (self.no_mcp_http, "--no-mcp-http"),
            (self.steering_starts_turns, "--steering-starts-turns"),
            (self.end_run_after_steer, "--end-run-after-steer"),
            (self.hang, "--hang"),
            (self.ignore_cancel, "--ignore-cancel"),
            (self.garbage_stdout, "--garbage-stdout"),
            (self.linger, "--linger"),
            (self.list_sessions, "--list-sessions"),
        ];
        for (_, flag) in switches.iter().filter(|(on, _)| *on) {
            summary.push(' ');
            summary.push_str(flag);
        }
        if let Some(reopen) = self.reopen_sessions {
            summary.push_str(&format!(" --reopen-sessions {reopen:?}"));
        }
        if let Some(controls) = self.controls {
            summary.push_str(&format!(" --controls {controls:?}"));
        }
        if let Some(ms) = self.init_delay_ms {
            summary.push_str(&format!(" --init-delay-ms {ms}"));
        }
        if let Some(ms) = self.reopen_delay_ms {
            summary.push_str(&format!(" --reopen-delay-ms {ms}"));
        }
        if let Some(rounds) = self.crash_after_rounds {
            summary.push_str(&format!(" --crash-after-rounds {rounds}"));
        }
        if let Some(bytes) = self.huge_line_bytes {
            summary.push_str(&format!(" --huge-line-bytes {bytes}"));
        }
        if self.fail_first_prompts > 0 {
            summary.push_str(&format!(" --fail-first-prompts {}", self.fail_first_prompts));
        }
        if let Some(dir) = &self.frame_log_dir {
            summary.push_str(&format!(" --frame-log-dir {}", dir.display()));
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }

    #[test]
    fn default_matches_a_bare_command_line() {
        // Environment overrides would make the comparison meaningless.
        if std::env::vars().any(|(key, _)| key.starts_with("SCRIPTED_AGENT_")) {
            return;
        }
        let parsed = Cli::try_parse_from(["scripted-agent"]).expect("empty command line parses");
        assert_eq!(parsed.options, Options::default());
    }

    #[test]
    fn flags_parse_into_options() {
        let options = Cli::try_parse_from([
            "scripted-agent",
            "--rounds",
            "5",
            "--no-steer",
            "--crash-after-rounds",
            "2",
            "--huge-line-bytes",
            "1024",
        ])
        .expect("flags parse")
        .options;
        assert_eq!(options.rounds, 5);
        assert!(options.no_steer);
        assert_eq!(options.crash_after_rounds, Some(2));
        assert_eq!(options.huge_line_bytes, Some(1024));
    }
}
