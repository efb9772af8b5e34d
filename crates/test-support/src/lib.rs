//! Helpers shared by the workspace's tests.
//!
//! The Python peers (an ACP agent on the official SDK, a Nostr relay written
//! elsewhere) live in one virtualenv under `target/`, built from
//! `tests/python-requirements.txt` on first use. `.ci/run` builds it up
//! front; a plain `cargo test` builds it itself, so the suite needs nothing
//! installed by hand beyond `python3`.
//!
//! The third-party ACP agents from npm (claude-agent-acp, codex-acp,
//! qwen-code, gemini-cli) are pinned by `tests/agents/package-lock.json` and
//! installed the same way, by `tests/agents/install.sh`, into
//! `target/npm-agents`: see [`npm_agent`]. They talk to [`fake_provider`], a
//! loopback stand-in for the model APIs, so they run with no key and no
//! network.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod blossom;
pub mod claude_agent;
pub mod fake_provider;
mod loopback_http;
pub mod slow_link;

/// The workspace root (where `Cargo.toml` and `tests/` live).
pub fn workspace_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .expect("crates/test-support sits two levels below the workspace root")
            .to_path_buf()
    })
}

/// A file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests").join("fixtures").join(name)
}

/// The Python interpreter of the test virtualenv, created on first use.
/// Override the location with `ACP_BRIDGE_TEST_VENV`.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = std::env::var_os("ACP_BRIDGE_TEST_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target").join("test-venv"));
        ensure_venv(&venv);
        venv.join("bin").join("python")
    })
}

/// A console script installed in the test virtualenv (e.g. `nostr-relay`).
pub fn venv_script(name: &str) -> PathBuf {
    python()
        .parent()
        .expect("the interpreter lives in bin/")
        .join(name)
}

/// An executable of the pinned npm agents, by its name in
/// `node_modules/.bin` (`claude-agent-acp`, `codex-acp`, `qwen`, `gemini`),
/// installed on first use. Override the install location with
/// `ACP_BRIDGE_TEST_NPM_AGENTS`. Needs `node` and `npm` on `PATH`.
pub fn npm_agent(bin_name: &str) -> PathBuf {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let prefix = std::env::var_os("ACP_BRIDGE_TEST_NPM_AGENTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target").join("npm-agents"));
        ensure_npm_agents(&prefix);
        prefix
    });
    let path = prefix.join("node_modules").join(".bin").join(bin_name);
    assert!(
        path.exists(),
        "no executable {bin_name} among the npm agents in {}",
        prefix.display()
    );
    path
}

/// Runs `tests/agents/install.sh`, which installs unless `prefix` holds an
/// install of the same lockfile. Test processes may race here; a file lock
/// makes one install while the others wait and then reuse it.
fn ensure_npm_agents(prefix: &Path) {
    let parent = prefix.parent().expect("the npm prefix has a parent directory");
    std::fs::create_dir_all(parent).expect("create the npm prefix's parent directory");
    let lock = std::fs::File::create(prefix.with_extension("lock")).expect("create the npm lock file");
    lock.lock().expect("lock the npm prefix");
    run(Command::new("bash")
        .arg(workspace_root().join("tests").join("agents").join("install.sh"))
        .arg(prefix));
}

/// Builds the virtualenv unless one built from the same requirements
/// exists. Test processes may race here; a file lock makes one build while
/// the others wait and then reuse it.
fn ensure_venv(venv: &Path) {
    let requirements_path = workspace_root().join("tests").join("python-requirements.txt");
    let requirements = std::fs::read_to_string(&requirements_path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", requirements_path.display()));
    let stamp = venv.join("requirements.stamp");
    let parent = venv.parent().expect("the venv has a parent directory");
    std::fs::create_dir_all(parent).expect("create the venv's parent directory");
    let lock = std::fs::File::create(venv.with_extension("lock")).expect("create the venv lock file");
    lock.lock().expect("lock the venv");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(requirements.as_str()) {
        return;
    }
    let _ = std::fs::remove_dir_all(venv);
    run(Command::new("python3").arg("-m").arg("venv").arg(venv));
    run(Command::new(venv.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements_path));
    std::fs::write(&stamp, &requirements).expect("write the venv stamp");
}

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(status.success(), "{command:?} failed with {status}");
}
