//! Instructions the daemon executes per answered mention, counted by
//! valgrind's callgrind: a figure that does not swing with the machine's
//! load, as wall-clock time on a shared two-core machine does.
//!
//! The daemon runs under callgrind (its agents and the relay do not) for
//! two runs of one conversation, `SHORT` and `LONG` sequential mentions after
//! the same warm-up; start-up, warm-up and shutdown cost the same in both,
//! so the difference divided by the extra mentions is the cost of one.

use std::path::Path;

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;

use crate::harness::{DaemonProcess, Owner, temp_dir};

const ZERO_THINK_TIME: &str = "--rounds 1 --round-delay-ms 0";
const WARM_UP: usize = 5;
const SHORT: usize = 10;
const LONG: usize = 60;

/// Instructions per answered mention, or why they could not be counted.
pub async fn per_mention() -> Result<u64, String> {
    let short = run(SHORT).await?;
    let long = run(LONG).await?;
    Ok(long.saturating_sub(short) / (LONG - SHORT) as u64)
}

/// Total instructions of a daemon that answered `mentions` (after the warm-up).
async fn run(mentions: usize) -> Result<u64, String> {
    let out = temp_dir(&format!("callgrind-{mentions}")).join("callgrind.out");
    let out_flag = format!("--callgrind-out-file={}", out.display());
    let wrapper = [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=no",
        out_flag.as_str(),
    ];
    let relay = EmbeddedRelay::start(None)
        .await
        .map_err(|error| error.to_string())?;
    let owner_keys = Keys::generate();
    let mut daemon = DaemonProcess::spawn_under(
        Keys::generate(),
        &wrapper,
        &relay,
        &owner_keys,
        ZERO_THINK_TIME,
        &[],
    );
    daemon.ready().await;
    let bot = daemon.bot.public_key();
    let owner = Owner::connect(&relay, owner_keys, bot).await;
    for turn in 0..WARM_UP + mentions {
        owner.round_trip(&bot, "bench", &format!("turn {turn}")).await;
    }
    // SIGTERM: callgrind writes its counts when the daemon exits.
    let terminated = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(daemon.child.id().to_string())
        .status()
        .map_err(|error| error.to_string())?;
    if !terminated.success() {
        return Err("cannot signal the daemon".into());
    }
    daemon.child.wait().map_err(|error| error.to_string())?;
    relay.shutdown();
    total_instructions(&out)
}

/// The `summary:` (or `totals:`) line of a callgrind output file.
fn total_instructions(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("summary:")
                .or_else(|| line.strip_prefix("totals:"))
        })
        .and_then(|counts| counts.split_whitespace().next())
        .and_then(|ir| ir.parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", path.display()))
}
