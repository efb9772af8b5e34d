//! The `scripted-agent` binary: an ACP agent on stdin/stdout.

use std::process::ExitCode;

use clap::Parser;
use scripted_agent::Options;

/// A real ACP agent whose turns follow a script, for tests and the demo.
#[derive(Debug, Parser)]
#[command(name = "scripted-agent", version, about)]
struct Cli {
    #[command(flatten)]
    options: Options,
}

fn main() -> ExitCode {
    scripted_agent::run_stdio(Cli::parse().options)
}
