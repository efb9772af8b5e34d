//! The `acp-bridge` binary: parses the command line, sets up logging, and
//! runs the daemon or one of its tools.

use std::path::PathBuf;
use std::process::ExitCode;

use acp_bridge::Shutdown;
use acp_bridge::{LogArgs, LogFilter, LogFormat, RUST_LOG_ENV, init_logging};
use acp_bridge::{RunArgs, Settings};
use clap::error::{ContextKind, ContextValue};
use clap::{CommandFactory, Parser, Subcommand};

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
    /// Show the whole path on embedded defaults: relay, bridge, scripted
    /// agent, and an owner who steers a live turn. No network, no API key.
    Demo,
    /// Write a fresh bot key: the nsec to a new 0600 file, the npub to stdout.
    Keygen {
        /// Where to write the secret key (must not exist).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
    },
    /// Validate the configuration, try the agent's `initialize` and every
    /// relay, and print a verdict (exit 0 when ready).
    Check(Box<RunArgs>),
    /// Run the scripted ACP agent (tests and the demo use it).
    #[command(hide = true)]
    ScriptedAgent(scripted_agent::Options),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version, as clap prints them.
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            eprintln!("{}", one_line(&error));
            return ExitCode::from(USAGE_EXIT);
        }
    };
    let command = cli.command.unwrap_or(Command::Run(Box::new(cli.run)));
    match command {
        Command::ScriptedAgent(options) => scripted_agent::run_stdio(options),
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
            let Some(settings) = settings(&args) else {
                return ExitCode::from(USAGE_EXIT);
            };
            block_on(args.worker_threads, async move {
                if acp_bridge::cli::check::run(&settings).await {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            })
        }
        Command::Run(args) => {
            if !start_logging(cli.log.log_format, &cli.log.log_level) {
                return ExitCode::from(USAGE_EXIT);
            }
            let Some(settings) = settings(&args) else {
                return ExitCode::from(USAGE_EXIT);
            };
            block_on(args.worker_threads, async move {
                let shutdown = Shutdown::listen();
                tokio::select! {
                    ran = acp_bridge::run(settings, shutdown.token()) => match ran {
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
fn one_line(error: &clap::Error) -> String {
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
    if let Some(variable) = from_environment(error) {
        line.push_str(&format!(" (set by {variable})"));
    }
    line
}

/// The `ACP_BRIDGE_*` variable the refused value came from, when the flag
/// itself was not on the command line.
fn from_environment(error: &clap::Error) -> Option<String> {
    let Some(ContextValue::String(arg)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = arg.split_whitespace().next()?.strip_prefix("--")?;
    let command = Cli::command();
    let variable = command
        .get_arguments()
        .find(|candidate| candidate.get_long() == Some(long))?
        .get_env()?
        .to_str()?
        .to_owned();
    let flag = format!("--{long}");
    let on_command_line =
        std::env::args().any(|given| given == flag || given.starts_with(&format!("{flag}=")));
    (!on_command_line && std::env::var_os(&variable).is_some()).then_some(variable)
}

/// Validated settings, or `None` after printing the one-line refusal.
fn settings(args: &RunArgs) -> Option<Settings> {
    match args.validate(&|name| std::env::var(name).ok()) {
        Ok(settings) => Some(settings),
        Err(error) => {
            eprintln!("acp-bridge: {error}");
            None
        }
    }
}

/// Runs `future` to its end on a fresh runtime of `workers` threads
/// (tokio's default, one per CPU, when `None`); tasks still running then
/// (after a forced exit) are not waited for.
fn block_on(workers: Option<u16>, future: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers {
        builder.worker_threads(usize::from(workers));
    }
    match builder.enable_all().build() {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            runtime.shutdown_background();
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
