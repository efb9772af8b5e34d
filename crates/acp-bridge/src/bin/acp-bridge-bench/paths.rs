//! Where the bench finds the daemon's binary and puts its files.

use std::path::PathBuf;

/// The `acp-bridge` binary next to this one (built by the same cargo run),
/// or the one `ACP_BRIDGE_BENCH_DAEMON` names: one bench binary can then
/// drive two daemons in turn, to compare a change with what it replaced.
pub fn bridge_binary() -> PathBuf {
    if let Some(daemon) = std::env::var_os("ACP_BRIDGE_BENCH_DAEMON") {
        return PathBuf::from(daemon);
    }
    let here = std::env::current_exe().expect("own path");
    let sibling = here.with_file_name("acp-bridge");
    assert!(
        sibling.exists(),
        "{} not found: build both binaries first: `cargo build --release -p acp-bridge --bins`",
        sibling.display()
    );
    sibling
}

/// A fresh directory of this bench run under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acp-bridge-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
