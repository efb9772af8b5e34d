//! The `acp-bridge` binary: parses the command line, sets up logging, and
//! runs the daemon or one of its tools.

use std::path::PathBuf;
use std::process::ExitCode;

use acp_bridge::Shutdown;
use acp_bridge::{ConfigFile, RunArgs, Settings};
use acp_bridge::{LogArgs, LogFilter, LogFormat, RUST_LOG_ENV, init_logging};
use clap::error::{ContextKind, ContextValue};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Exit code after a second SIGTERM/SIGINT (128 + SIGINT, as shells do).
const FORCED_EXIT: u8 = 130;
/// Exit code of a refused command line or configuration (clap's own).
const USAGE_EXIT: u8 = 2;
/// The log filter of `check`, whose own report is its output.
const CHECK_LOG_FILTER: &str = "warn";

/// Turns Nostr @mentions of a bot key into turns of supervised ACP agents.
#[derive(Debug, Parser)]
#[command(name = "acp-bridge", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: RunArgs,

    #[command(flatten)]
    log: LogArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon (the default when no subcommand is given).
    Run(Box<RunArgs>),
    /// Show the whole path on embedded defaults (no network, no API key).
    ///
    /// Show the whole path on embedded defaults: relay, bridge, scripted
    /// agent, and an owner who steers a live turn. No network, no API key.
    Demo,
    /// Write a fresh bot key: the nsec to a new 0600 file, the npub to stdout.
    Keygen {
        /// Where to write the secret key (must not exist).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
    },
    /// Validate the configuration, try the agent and every relay.
    ///
    /// Validate the configuration, try the agent's `initialize` and every
    /// relay, and print a verdict (exit 0 when ready).
    Check(Box<RunArgs>),
    /// Print the configuration in effect, each value with its source.
    ///
    /// Print the configuration in effect as TOML, each value with where it
    /// came from (default, file, env, flag); secrets redacted.
    Config(Box<RunArgs>),
    /// Carry an agent's MCP client over stdio to the daemon (agents run it).
    ///
    /// Carry an agent's MCP client over stdio to the daemon's MCP server:
    /// agents without MCP over HTTP run it from the entry the bridge
    /// offered, whose environment names the session's token and the
    /// daemon's socket (set by the daemon, not an operator's setting).
    Mcp,
    /// Run the scripted ACP agent (tests and the demo use it).
    #[command(hide = true)]
    ScriptedAgent(scripted_agent::Options),
}

/// The command line's `Command`: clap's, with `--help` a page and
/// `--help-long` the reference (`cli::help`).
fn command() -> clap::Command {
    acp_bridge::cli::help::arranged(Cli::command())
}

/// Where the settings came from: the parsed command line's matches and the
/// config file, if any.
struct Sources {
    /// The matches of the command that took the daemon's flags (`run`,
    /// `check`, `config`, or none).
    matches: ArgMatches,
    file: Option<ConfigFile>,
}

impl Sources {
    /// Parses the command line, and again with the config file's values as
    /// the flags' defaults when it names one: one parser, so that a value
    /// from the file is checked as a flag's is. `Err` after printing the
    /// one-line refusal (or the help).
    fn parse() -> Result<(Cli, Sources), ExitCode> {
        let (plain, sources) = parsed(command().try_get_matches(), None)?;
        let Some(path) = config_path(&plain) else {
            return Ok((plain, sources));
        };
        let file = ConfigFile::read(&path).map_err(|error| {
            eprintln!("acp-bridge: {error}");
            ExitCode::from(USAGE_EXIT)
        })?;
        let matches = file.as_defaults(command()).try_get_matches();
        let (layered, mut sources) = parsed(matches, Some(&file))?;
        sources.file = Some(file);
        Ok((layered, sources))
    }

    /// Where flag `--long` got its value, when not from the command line:
    /// ` (set by ACP_BRIDGE_X)` or ` (set by `section.key` in FILE)`.
    fn origin(&self, long: &str) -> String {
        let Some(arg) = Cli::command()
            .get_arguments()
            .find(|arg| arg.get_long() == Some(long))
            .cloned()
        else {
            return String::new();
        };
        match self.matches.value_source(arg.get_id().as_str()) {
            Some(ValueSource::EnvVariable) => arg
                .get_env()
                .map(|name| format!(" (set by {})", name.to_string_lossy()))
                .unwrap_or_default(),
            Some(ValueSource::DefaultValue) => file_origin(self.file.as_ref(), long),
            _ => String::new(),
        }
    }
}

/// `--config` (or `ACP_BRIDGE_CONFIG`), of whichever command took it.
fn config_path(cli: &Cli) -> Option<PathBuf> {
    match &cli.command {
        None => cli.run.config.clone(),
        Some(Command::Run(args) | Command::Check(args) | Command::Config(args)) => args.config.clone(),
        Some(_) => None,
    }
}

/// The command line from clap's `matches`; `Err` after printing clap's
/// refusal in one line (or the help or version, as clap prints them).
fn parsed(
    matches: Result<ArgMatches, clap::Error>,
    file: Option<&ConfigFile>,
) -> Result<(Cli, Sources), ExitCode> {
    let refuse = |error: clap::Error| {
        if !error.use_stderr() {
            error.exit();
        }
        eprintln!("{}", one_line(&error, file));
        ExitCode::from(USAGE_EXIT)
    };
    let matches = matches.map_err(refuse)?;
    let cli = Cli::from_arg_matches(&matches).map_err(refuse)?;
    let matches = match matches.subcommand() {
        Some((_, sub)) => sub.clone(),
        None => matches,
    };
    Ok((cli, Sources { matches, file: None }))
}

/// ` (set by `section.key` in FILE)` when `file` sets flag `--long`.
fn file_origin(file: Option<&ConfigFile>, long: &str) -> String {
    file.and_then(|file| {
        let key = file.key_of(long)?;
        Some(format!(" (set by `{key}` in {})", file.path().display()))
    })
    .unwrap_or_default()
}

fn main() -> ExitCode {
    let (cli, sources) = match Sources::parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let command = cli.command.unwrap_or(Command::Run(Box::new(cli.run)));
    match command {
        Command::ScriptedAgent(options) => scripted_agent::run_stdio(options),
        Command::Mcp => match acp_bridge::cli::mcp::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => fail(&error.to_string()),
        },
        Command::Keygen { out } => match acp_bridge::cli::keygen::write_new_key(&out) {
            Ok(npub) => {
                println!("{npub}");
                ExitCode::SUCCESS
            }
            Err(error) => fail(&error),
        },
        Command::Demo => block_on(None, async {
            match acp_bridge::cli::demo::run().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => fail(&format!("demo failed: {error}")),
            }
        }),
        Command::Check(args) => {
            let quiet = CHECK_LOG_FILTER.parse().expect("a level");
            if !start_logging(cli.log.log_format, &quiet) {
                return ExitCode::from(USAGE_EXIT);
            }
            let Some(settings) = settings(&args, &sources) else {
                return ExitCode::from(USAGE_EXIT);
            };
            // Every secret is read: out of the environment with them.
            acp_bridge::seal_own_process(&RunArgs::SECRET_VARIABLES);
            block_on(args.worker_threads, async move {
                if acp_bridge::cli::check::run(&settings).await {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            })
        }
        Command::Config(_) => {
            let env = |name: &str| std::env::var(name).ok();
            print!(
                "{}",
                acp_bridge::effective_configuration(&sources.matches, sources.file.as_ref(), &env)
            );
            ExitCode::SUCCESS
        }
        Command::Run(args) => {
            if !start_logging(cli.log.log_format, &cli.log.log_level) {
                return ExitCode::from(USAGE_EXIT);
            }
            let Some(settings) = settings(&args, &sources) else {
                return ExitCode::from(USAGE_EXIT);
            };
            // Every secret is read: out of the environment with them.
            acp_bridge::seal_own_process(&RunArgs::SECRET_VARIABLES);
            block_on(args.worker_threads, async move {
                let shutdown = Shutdown::listen();
                let (reload, reloads) = tokio::sync::mpsc::unbounded_channel();
                // SIGHUP reloads the config file, when there is one (else
                // it ends the daemon, as it always did).
                if let Some(file) = sources.file {
                    tokio::spawn(acp_bridge::reload_on_hangup(file, sources.matches, reload));
                }
                tokio::select! {
                    ran = acp_bridge::run_reloading(settings, shutdown.token(), reloads) => match ran {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(error) => failed_while_running(&error),
                    },
                    () = shutdown.forced() => ExitCode::from(FORCED_EXIT),
                }
            })
        }
    }
}

/// Installs logging with `flag`'s filter, or `RUST_LOG`'s when set; false
/// after printing the one-line refusal of a bad `RUST_LOG`.
fn start_logging(format: Option<LogFormat>, flag: &LogFilter) -> bool {
    match LogFilter::in_force(flag, std::env::var(RUST_LOG_ENV).ok()) {
        Ok(filter) => {
            init_logging(format, &filter);
            true
        }
        Err(error) => {
            eprintln!("acp-bridge: {error}");
            false
        }
    }
}

/// clap's refusal as one line: its first line (which names the flag and
/// the value), then what it adds before the usage (the possible values, a
/// tip), and where the value came from when it was an `ACP_BRIDGE_*`
/// variable rather than the flag.
fn one_line(error: &clap::Error, file: Option<&ConfigFile>) -> String {
    let rendered = error.render().to_string();
    let mut line = String::new();
    for part in rendered
        .lines()
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .map(str::trim)
        .filter(|line| !line.is_empty())
    {
        if !line.is_empty() {
            // A list under a colon, or `[possible values: …]`, continues
            // the sentence; anything else (a tip) is a clause of its own.
            line.push_str(if line.ends_with(':') || part.starts_with('[') {
                " "
            } else {
                "; "
            });
        }
        line.push_str(part);
    }
    line.push_str(&refused_value_origin(error, file));
    line
}

/// Where the value clap refused came from, when the flag itself was not on
/// the command line: ` (set by ACP_BRIDGE_X)`, or ` (set by `section.key`
/// in FILE)`; else nothing.
fn refused_value_origin(error: &clap::Error, file: Option<&ConfigFile>) -> String {
    let Some(ContextValue::String(arg)) = error.get(ContextKind::InvalidArg) else {
        return String::new();
    };
    let Some(long) = arg
        .split_whitespace()
        .next()
        .and_then(|flag| flag.strip_prefix("--"))
    else {
        return String::new();
    };
    let flag = format!("--{long}");
    let on_command_line =
        std::env::args().any(|given| given == flag || given.starts_with(&format!("{flag}=")));
    if on_command_line {
        return String::new();
    }
    let command = Cli::command();
    let variable = command
        .get_arguments()
        .find(|candidate| candidate.get_long() == Some(long))
        .and_then(|arg| arg.get_env()?.to_str())
        .filter(|variable| std::env::var_os(variable).is_some());
    match variable {
        Some(variable) => format!(" (set by {variable})"),
        None => file_origin(file, long),
    }
}

/// Validated settings, or `None` after printing the one-line refusal
/// (which says where a value that was not a flag came from, when it came
/// from the config file).
fn settings(args: &RunArgs, sources: &Sources) -> Option<Settings> {
    let profiles = sources.file.as_ref().map_or(&[][..], ConfigFile::profiles);
    match args.validate_with_profiles(&|name| std::env::var(name).ok(), profiles) {
        Ok(mut settings) => {
            let schedules = sources.file.as_ref().map(|file| file.schedules().to_vec());
            if let Err(refusal) = settings.take_schedules(schedules.unwrap_or_default()) {
                eprintln!("acp-bridge: --config: {refusal}");
                return None;
            }
            Some(settings)
        }
        Err(error) => {
            let origin = match sources.file {
                Some(_) => sources.origin(error.flag.trim_start_matches("--")),
                None => String::new(),
            };
            eprintln!("acp-bridge: {error}{origin}");
            None
        }
    }
}

/// How long the exit waits for blocking calls still in flight (an MLS call
/// is a few SQLite statements: milliseconds).
const BLOCKING_CALLS_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `future` to its end on a fresh runtime of `workers` threads
/// (tokio's default, one per CPU, when `None`). Blocking calls still in
/// flight then get [`BLOCKING_CALLS_GRACE`] to return before the process
/// exits: an MLS call (mdk over SQLCipher) cut off by the exit's OpenSSL
/// teardown crashed the daemon (SIGSEGV) on a clean stop. Async tasks still
/// running (after a forced exit) are not waited for.
fn block_on(workers: Option<u16>, future: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers {
        builder.worker_threads(usize::from(workers));
    }
    match builder.enable_all().build() {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            runtime.shutdown_timeout(BLOCKING_CALLS_GRACE);
            code
        }
        Err(error) => fail(&format!("cannot start the async runtime: {error}")),
    }
}

/// A failure after the settings were accepted (a port in use, a state dir
/// that cannot be opened), said once: in the log when errors are logged,
/// so that it sits with the lines before it in the operator's log
/// pipeline, else as a plain line.
fn failed_while_running(error: &acp_bridge::DaemonError) -> ExitCode {
    if tracing::enabled!(tracing::Level::ERROR) {
        tracing::error!(%error, "acp-bridge failed");
        ExitCode::FAILURE
    } else {
        fail(&error.to_string())
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("acp-bridge: {message}");
    ExitCode::FAILURE
}
