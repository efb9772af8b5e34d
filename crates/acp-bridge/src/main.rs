//! The `acp-bridge` binary: parses the command line, sets up logging, and
//! runs the daemon or one of its tools.

use std::process::ExitCode;

use acp_bridge::config::RunArgs;
use acp_bridge::shutdown::Shutdown;
use acp_bridge::telemetry::{self, LogFormat};
use clap::{Parser, Subcommand};

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
    /// Run the scripted ACP agent (tests and the demo use it).
    #[command(hide = true)]
    ScriptedAgent(scripted_agent::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Run(Box::new(cli.run)));
    match command {
        Command::ScriptedAgent(options) => scripted_agent::run_stdio(options),
        Command::Run(args) => {
            telemetry::init_logging(cli.log_format, &cli.log_level);
            run_daemon(&args)
        }
    }
}

fn run_daemon(args: &RunArgs) -> ExitCode {
    let settings = match args.validate(&|name| std::env::var(name).ok()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("acp-bridge: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("acp-bridge: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let shutdown = Shutdown::listen();
        match acp_bridge::daemon::run(settings, shutdown.token(), |_| {}).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(%error, "acp-bridge failed");
                eprintln!("acp-bridge: {error}");
                ExitCode::FAILURE
            }
        }
    })
}
