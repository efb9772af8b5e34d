//! The one thread that forks agents.
//!
//! Linux sends an agent its parent-death signal (see [`crate::isolation`])
//! when the *thread* that forked it exits, not only when the daemon dies.
//! Async code runs on whatever thread the runtime gives it: a tokio worker
//! that enters `block_in_place` is retired into the blocking pool, whose
//! idle threads exit after seconds, and a caller may spawn from a thread of
//! its own. An agent forked there would be killed in the middle of its
//! work. So every agent is forked by one thread that starts on first use
//! and never ends: the signal then comes only when the process dies.
//!
//! Owns nothing else: what the child does before `exec` is set on the
//! command by the caller.

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc;

use tokio::process::{Child, Command};

/// Work for the forking thread: one spawn, which answers on its own channel.
type Job = Box<dyn FnOnce() + Send>;

/// The queue of the forking thread.
static FORKER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

/// Spawns `command` from the forking thread, registered with the caller's
/// tokio runtime (its pipes and its exit belong to that runtime). Blocks the
/// caller as long as the fork and `exec` take, as a direct spawn would.
pub(crate) fn spawn(mut command: Command) -> io::Result<Child> {
    let runtime = tokio::runtime::Handle::current();
    let (answer, answered) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _entered = runtime.enter();
        let _ = answer.send(command.spawn());
    });
    let gone = || io::Error::other("the thread that forks agents is gone");
    forker().send(job).map_err(|_| gone())?;
    answered.recv().map_err(|_| gone())?
}

fn forker() -> &'static mpsc::Sender<Job> {
    FORKER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        // Should the thread fail to start, `queue` is dropped with the
        // closure and every spawn fails with "gone" instead of hanging.
        let _ = std::thread::Builder::new()
            .name("acp-agent-forker".to_owned())
            .spawn(move || queue.into_iter().for_each(|job| job()));
        jobs
    })
}
