//! The `acp-bridge` binary: parses the command line, sets up logging, and
//! runs the daemon or one of its tools.

use std::path::PathBuf;
use std::process::ExitCode;

use acp_bridge::Shutdown;
use acp_bridge::{LogFormat, init_logging};
use acp_bridge::{RunArgs, Settings};
use clap::{Parser, Subcommand};

/// Exit code after a second SIGTERM/SIGINT (128 + SIGINT, as shells do).
const FORCED_EXIT: u8 = 130;

/// Turns Nostr @mentions of a bot key into turns of supervised ACP agents.
#[derive(Debug, Parser)]
#[command(name = "acp-bridge", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: RunArgs,

    /// Log format: pretty (default on a terminal) or json (default otherwise).
    #[arg(long, env = "ACP_BRIDGE_LOG_FORMAT", value_enum, global = true)]
    log_format: Option<LogFormat>,

    /// Log filter, RUST_LOG syntax (`info`, `acp_bridge=debug,agent_stderr=warn`).
    /// RUST_LOG itself wins when set.
    #[arg(long, env = "ACP_BRIDGE_LOG_LEVEL", default_value = "info", global = true)]
    log_level: String,
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
    let cli = Cli::parse();
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
            init_logging(cli.log_format, "warn");
            let Some(settings) = settings(&args) else {
                return ExitCode::from(2);
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
            init_logging(cli.log_format, &cli.log_level);
            let Some(settings) = settings(&args) else {
                return ExitCode::from(2);
            };
            block_on(args.worker_threads, async move {
                let shutdown = Shutdown::listen();
                tokio::select! {
                    ran = acp_bridge::run(settings, shutdown.token()) => match ran {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(error) => {
                            tracing::error!(%error, "acp-bridge failed");
                            fail(&error.to_string())
                        }
                    },
                    () = shutdown.forced() => ExitCode::from(FORCED_EXIT),
                }
            })
        }
    }
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

fn fail(message: &str) -> ExitCode {
    eprintln!("acp-bridge: {message}");
    ExitCode::FAILURE
}
