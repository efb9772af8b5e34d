//! What the daemon does to its own process once its settings are read, so
//! that neither its children nor another process of its user can read the
//! secrets it holds.
//!
//! - The variables that carried a secret leave the daemon's environment: a
//!   child started without an explicit environment would inherit them, and
//!   every child the daemon starts should not depend on remembering to
//!   clear it. The caller names them (`RunArgs::SECRET_VARIABLES`: each
//!   stage keeps the name of its own), so that this module, below every
//!   stage, knows none of them.
//! - The process is marked not dumpable. An agent, or anything else, run
//!   as the daemon's user (no `--agent-user`) could otherwise read
//!   `/proc/<daemon>/environ`, which keeps the environment the process was
//!   started with whatever was removed since, and `/proc/<daemon>/mem`.
//!   A process that is not dumpable has its `/proc` files owned by root and
//!   cannot be attached to or core-dumped by its own user (`prctl(2)`,
//!   `PR_SET_DUMPABLE`); root keeps both. Children are dumpable again after
//!   their `exec`.

/// Seals the daemon's process (see the module's doc), removing the
/// variables `secrets` names; the ones it removed. Call before any other
/// thread is started: before the async runtime, while `main` is the only
/// thread.
pub fn seal_own_process(secrets: &[&'static str]) -> Vec<&'static str> {
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        // Not fatal: the environment is still cleared, and root's own
        // processes are out of other users' reach anyway.
        eprintln!("acp-bridge: cannot mark the process not dumpable: {error}");
    }
    let removed: Vec<&'static str> = secrets
        .iter()
        .copied()
        .filter(|name| std::env::var_os(name).is_some())
        .collect();
    for name in &removed {
        remove_variable(name);
    }
    removed
}

/// `remove_var` is unsafe since the 2024 edition because another thread
/// reading the environment at the same time races it. [`seal_own_process`]
/// runs while `main` is the process's only thread.
#[allow(unsafe_code)]
fn remove_variable(name: &str) {
    // SAFETY: single-threaded here (see above).
    unsafe { std::env::remove_var(name) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables the test names secret; the last is not set.
    const SECRETS: [&str; 3] = [
        "ACP_BRIDGE_SEAL_TEST_KEY",
        "ACP_BRIDGE_SEAL_TEST_URI",
        "ACP_BRIDGE_SEAL_TEST_UNSET",
    ];

    /// Runs in a child process of its own (the test binary re-run with a
    /// filter), so that it is single-threaded and changes no other test's
    /// process.
    #[test]
    fn sealing_removes_the_secret_variables_and_makes_the_process_undumpable() {
        const CHILD: &str = "ACP_BRIDGE_SEAL_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let removed = seal_own_process(&SECRETS);
            assert_eq!(removed, SECRETS[..2]);
            for name in SECRETS {
                assert!(std::env::var_os(name).is_none(), "{name} still set");
            }
            assert!(!nix::sys::prctl::get_dumpable().expect("prctl"));
            assert_eq!(std::env::var("KEPT").as_deref(), Ok("yes"));
            return;
        }
        // This test's own name, as libtest knows it (the module path without
        // the crate's name), so a move of the module cannot orphan it.
        let (_crate, module) = module_path!().split_once("::").expect("a module path");
        let name = format!("{module}::sealing_removes_the_secret_variables_and_makes_the_process_undumpable");
        let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", &name, "--test-threads", "1"])
            .env(CHILD, "1")
            .env(SECRETS[0], "nsec-in-the-environment")
            .env(SECRETS[1], "bunker://x?secret=y")
            .env_remove(SECRETS[2])
            .env("KEPT", "yes")
            .output()
            .expect("run the test in a child");
        let stdout = String::from_utf8_lossy(&child.stdout);
        assert!(
            child.status.success() && stdout.contains("1 passed"),
            "the child's checks failed or did not run: {stdout}"
        );
    }
}
