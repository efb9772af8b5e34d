//! Sessions and their live runs: which run is live, its steer queue, and the
//! signal that stops it early (a cancel, or the end-of-run race).
//!
//! One lock guards every session, held only for short synchronous steps and
//! never across an await, so "check the live run, then queue the steer" is
//! atomic against the turn draining or clearing it. No I/O happens here:
//! callers send the frames that tell the client what changed.

use crate::mcp_client::McpServer;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// Why a live run must stop before its script ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// The client sent `session/cancel`: the turn answers `cancelled`.
    Cancel,
    /// An accepted steer ends the run at once (`--end-run-after-steer`): the
    /// turn ends normally and the queued steer is discarded.
    EndNow,
}

/// A steer accepted into a run and not yet folded into its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedSteer {
    pub(crate) message_id: String,
    pub(crate) text: String,
    /// Taken through `_session/steering`: the turn must answer it before it
    /// ends (goose's steers are discarded when the run ends first).
    pub(crate) injected: bool,
}

/// Why `session/prompt` cannot start a run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StartRunError {
    UnknownSession,
    /// The session already has this live run.
    AlreadyLive(String),
}

/// Why a steer cannot be queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SteerRefusal {
    UnknownSession,
    NoLiveRun,
    /// The client's `expectedRunId` is not the live run, which is `actual`.
    RunMismatch {
        actual: String,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
    /// Every session opened, closed ones too (an agent keeps them on disk),
    /// as `session/list` shows them (`--list-sessions`).
    listed: Mutex<BTreeMap<String, Listed>>,
}

/// A session as `session/list` shows it.
#[derive(Debug, Default, Clone)]
struct Listed {
    /// The plain `cwd` it was last opened in.
    cwd: String,
    title: Option<String>,
}

#[derive(Debug, Default)]
struct Session {
    live: Option<LiveRun>,
    /// The `cwd` the client gave when it last opened the session.
    cwd: Option<String>,
    /// The MCP server the client offered when it opened the session.
    mcp: Option<McpServer>,
    /// What it offered, in one line (`[say-mcp-servers]`).
    mcp_offered: String,
}

#[derive(Debug)]
struct LiveRun {
    run_id: String,
    steers: Vec<QueuedSteer>,
    /// Set when the run is about to end early: steers stay queued (and are
    /// discarded) even if the turn reaches a round boundary first.
    folding_closed: bool,
    /// Set when the turn composes its answer: nothing more is injected.
    closing: bool,
    interrupt: watch::Sender<Option<Interrupt>>,
}

/// The turn's hold on its live run.
#[derive(Debug)]
pub(crate) struct RunHandle {
    session_id: String,
    run_id: String,
    interrupt: watch::Receiver<Option<Interrupt>>,
}

impl RunHandle {
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Runs `work` unless the run is interrupted first (or already was).
    pub(crate) async fn interruptible<F: Future>(&mut self, work: F) -> Result<F::Output, Interrupt> {
        tokio::select! {
            biased;
            interrupt = self.interrupt.wait_for(Option::is_some) => {
                // The sender lives in the registry until this turn clears
                // the run, so it cannot be gone; if it were, stopping is safe.
                Err(interrupt.ok().and_then(|signal| *signal).unwrap_or(Interrupt::Cancel))
            }
            output = work => Ok(output),
        }
    }
}

impl Sessions {
    /// Registers a session; one already known keeps its live run.
    pub(crate) fn insert(&self, session_id: String) {
        self.lock().entry(session_id).or_default();
    }

    /// Keeps the HTTP MCP server offered for the session (or none), as
    /// the client's last `session/new`, `load` or `resume` gave it.
    pub(crate) fn offer_mcp(&self, session_id: &str, params: &serde_json::Value) {
        if let Some(session) = self.lock().get_mut(session_id) {
            session.mcp = McpServer::offered(params);
            session.mcp_offered = crate::mcp_offered::summary(params);
        }
    }

    /// Keeps where the client's last `session/new`, `load` or `resume`
    /// put the session: its `cwd`, then its `additionalDirectories`.
    pub(crate) fn set_cwd(&self, session_id: &str, params: &serde_json::Value) {
        if let Some(session) = self.lock().get_mut(session_id) {
            let mut place = params["cwd"].as_str().unwrap_or_default().to_owned();
            if let Some(extra) = params["additionalDirectories"].as_array() {
                let extra: Vec<&str> = extra.iter().filter_map(serde_json::Value::as_str).collect();
                place.push_str(&format!(" (additional: {})", extra.join(", ")));
            }
            session.cwd = Some(place);
        }
        let cwd = params["cwd"].as_str().unwrap_or_default().to_owned();
        self.listing().entry(session_id.to_owned()).or_default().cwd = cwd;
    }

    /// The session's title the first time it is asked for (`Title of <id>`),
    /// `None` once it has one.
    pub(crate) fn title_once(&self, session_id: &str) -> Option<String> {
        let mut listed = self.listing();
        let listed = listed.entry(session_id.to_owned()).or_default();
        if listed.title.is_some() {
            return None;
        }
        let title = format!("Title of {session_id}");
        listed.title = Some(title.clone());
        Some(title)
    }

    /// `session/list`'s sessions: every one opened in `cwd` (all without one).
    pub(crate) fn list(&self, cwd: Option<&str>) -> Vec<serde_json::Value> {
        self.listing()
            .iter()
            .filter(|(_, listed)| cwd.is_none_or(|cwd| listed.cwd == cwd))
            .map(|(id, listed)| {
                let mut entry = serde_json::json!({ "sessionId": id, "cwd": listed.cwd });
                if let Some(title) = &listed.title {
                    entry["title"] = serde_json::json!(title);
                }
                entry
            })
            .collect()
    }

    /// Whether the session was ever opened here.
    pub(crate) fn was_opened(&self, session_id: &str) -> bool {
        self.listing().contains_key(session_id)
    }

    fn listing(&self) -> MutexGuard<'_, BTreeMap<String, Listed>> {
        self.listed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's `cwd`, as the client last gave it.
    pub(crate) fn cwd(&self, session_id: &str) -> Option<String> {
        self.lock()
            .get(session_id)
            .and_then(|session| session.cwd.clone())
    }

    /// The MCP servers offered for the session, in one line.
    pub(crate) fn mcp_offered(&self, session_id: &str) -> String {
        self.lock()
            .get(session_id)
            .map(|session| session.mcp_offered.clone())
            .unwrap_or_default()
    }

    /// The MCP server offered for the session, if any.
    pub(crate) fn mcp_server(&self, session_id: &str) -> Option<McpServer> {
        self.lock()
            .get(session_id)
            .and_then(|session| session.mcp.clone())
    }

    pub(crate) fn remove(&self, session_id: &str) {
        self.lock().remove(session_id);
    }

    /// Makes `run_id` the session's live run.
    pub(crate) fn start_run(&self, session_id: &str, run_id: String) -> Result<RunHandle, StartRunError> {
        let mut sessions = self.lock();
        let session = sessions
            .get_mut(session_id)
            .ok_or(StartRunError::UnknownSession)?;
        if let Some(live) = &session.live {
            return Err(StartRunError::AlreadyLive(live.run_id.clone()));
        }
        let (interrupt, watcher) = watch::channel(None);
        session.live = Some(LiveRun {
            run_id: run_id.clone(),
            steers: Vec::new(),
            folding_closed: false,
            closing: false,
            interrupt,
        });
        Ok(RunHandle {
            session_id: session_id.to_owned(),
            run_id,
            interrupt: watcher,
        })
    }

    /// Cancels the session's live run, if any; says whether there was one.
    pub(crate) fn cancel(&self, session_id: &str) -> bool {
        let sessions = self.lock();
        let Some(live) = sessions.get(session_id).and_then(|s| s.live.as_ref()) else {
            return false;
        };
        live.interrupt.send_replace(Some(Interrupt::Cancel));
        true
    }

    /// Ends `run_id` at once if it is still live and not already stopping.
    pub(crate) fn end_run_now(&self, session_id: &str, run_id: &str) {
        let sessions = self.lock();
        if let Some(live) = sessions.get(session_id).and_then(|s| s.live.as_ref())
            && live.run_id == run_id
        {
            live.interrupt.send_if_modified(|signal| {
                let idle = signal.is_none();
                if idle {
                    *signal = Some(Interrupt::EndNow);
                }
                idle
            });
        }
    }

    /// Queues `steer` on the live run if it is `expected_run_id`, and returns
    /// that run id. With `close_folding`, the run will fold no more steers:
    /// the caller is about to end it.
    pub(crate) fn queue_steer(
        &self,
        session_id: &str,
        expected_run_id: &str,
        steer: QueuedSteer,
        close_folding: bool,
    ) -> Result<String, SteerRefusal> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(session_id).ok_or(SteerRefusal::UnknownSession)?;
        let live = session.live.as_mut().ok_or(SteerRefusal::NoLiveRun)?;
        if live.run_id != expected_run_id {
            return Err(SteerRefusal::RunMismatch {
                actual: live.run_id.clone(),
            });
        }
        live.steers.push(steer);
        live.folding_closed |= close_folding;
        Ok(live.run_id.clone())
    }

    /// Injects `steer` into the session's live run (`_session/steering`);
    /// refused once the run composes its answer.
    pub(crate) fn inject_steer(&self, session_id: &str, steer: QueuedSteer) -> Result<(), SteerRefusal> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(session_id).ok_or(SteerRefusal::UnknownSession)?;
        match session.live.as_mut() {
            Some(live) if !live.closing => {
                live.steers.push(steer);
                Ok(())
            }
            _ => Err(SteerRefusal::NoLiveRun),
        }
    }

    /// The turn composes its answer: takes the injected steers it has not
    /// folded yet (it must answer them) and accepts no more.
    pub(crate) fn close_injection(&self, run: &RunHandle) -> Vec<QueuedSteer> {
        let mut sessions = self.lock();
        let Some(live) = Self::live_mut(&mut sessions, run) else {
            return Vec::new();
        };
        live.closing = true;
        let (injected, queued) = std::mem::take(&mut live.steers)
            .into_iter()
            .partition(|steer| steer.injected);
        live.steers = queued;
        injected
    }

    /// Takes the steers queued on the run, in order, at a round boundary.
    pub(crate) fn take_steers(&self, run: &RunHandle) -> Vec<QueuedSteer> {
        let mut sessions = self.lock();
        match Self::live_mut(&mut sessions, run) {
            Some(live) if !live.folding_closed => std::mem::take(&mut live.steers),
            _ => Vec::new(),
        }
    }

    /// Ends the run: the session has no live run any more. Returns the steers
    /// still queued, which are discarded unfolded.
    pub(crate) fn clear_run(&self, run: &RunHandle) -> Vec<QueuedSteer> {
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(&run.session_id) else {
            return Vec::new();
        };
        match session.live.take() {
            Some(live) if live.run_id == run.run_id => live.steers,
            other => {
                session.live = other;
                Vec::new()
            }
        }
    }

    fn live_mut<'a>(sessions: &'a mut HashMap<String, Session>, run: &RunHandle) -> Option<&'a mut LiveRun> {
        sessions
            .get_mut(&run.session_id)?
            .live
            .as_mut()
            .filter(|live| live.run_id == run.run_id)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        // Every step under the lock leaves the map consistent, so a panic
        // elsewhere does not make it unusable.
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steer(text: &str) -> QueuedSteer {
        QueuedSteer {
            message_id: format!("m-{text}"),
            text: text.to_owned(),
            injected: false,
        }
    }

    #[test]
    fn injected_steers_are_answered_before_the_run_closes_and_refused_after() {
        let (sessions, run) = registry_with_run();
        let injected = QueuedSteer {
            injected: true,
            ..steer("in")
        };
        sessions.inject_steer("s", injected.clone()).expect("injected");
        sessions
            .queue_steer("s", "r1", steer("goose"), false)
            .expect("queued");
        assert_eq!(sessions.close_injection(&run), [injected]);
        assert_eq!(
            sessions.inject_steer("s", steer("late")),
            Err(SteerRefusal::NoLiveRun),
            "a closing run takes no more"
        );
        assert_eq!(
            sessions.clear_run(&run),
            [steer("goose")],
            "goose's leftovers are discarded"
        );
    }

    fn registry_with_run() -> (Sessions, RunHandle) {
        let sessions = Sessions::default();
        sessions.insert("s".to_owned());
        let run = sessions.start_run("s", "r1".to_owned()).expect("run starts");
        (sessions, run)
    }

    #[test]
    fn one_live_run_per_session() {
        let (sessions, run) = registry_with_run();
        assert_eq!(
            sessions.start_run("s", "r2".to_owned()).map(|_| ()),
            Err(StartRunError::AlreadyLive("r1".to_owned()))
        );
        sessions.clear_run(&run);
        assert!(sessions.start_run("s", "r2".to_owned()).is_ok());
        assert_eq!(
            sessions.start_run("nope", "r3".to_owned()).map(|_| ()),
            Err(StartRunError::UnknownSession)
        );
    }

    #[test]
    fn steers_fold_in_order_and_leftovers_are_discarded() {
        let (sessions, run) = registry_with_run();
        for text in ["a", "b"] {
            assert_eq!(
                sessions.queue_steer("s", "r1", steer(text), false),
                Ok("r1".to_owned())
            );
        }
        assert_eq!(sessions.take_steers(&run), [steer("a"), steer("b")]);
        sessions
            .queue_steer("s", "r1", steer("c"), false)
            .expect("queued");
        assert_eq!(sessions.clear_run(&run), [steer("c")]);
        assert_eq!(
            sessions.queue_steer("s", "r1", steer("d"), false),
            Err(SteerRefusal::NoLiveRun)
        );
    }

    #[test]
    fn a_steer_for_another_run_is_refused() {
        let (sessions, _run) = registry_with_run();
        assert_eq!(
            sessions.queue_steer("s", "old", steer("x"), false),
            Err(SteerRefusal::RunMismatch {
                actual: "r1".to_owned()
            })
        );
        assert_eq!(
            sessions.queue_steer("t", "r1", steer("x"), false),
            Err(SteerRefusal::UnknownSession)
        );
    }

    #[test]
    fn closed_folding_keeps_the_steer_queued() {
        let (sessions, run) = registry_with_run();
        sessions
            .queue_steer("s", "r1", steer("late"), true)
            .expect("queued");
        assert!(sessions.take_steers(&run).is_empty());
        assert_eq!(sessions.clear_run(&run), [steer("late")]);
    }

    #[test]
    fn listed_sessions_outlive_their_close_and_keep_their_cwd_and_title() {
        let sessions = Sessions::default();
        for (id, cwd) in [("a", "/w"), ("b", "/w"), ("c", "/other")] {
            sessions.insert(id.to_owned());
            sessions.set_cwd(id, &serde_json::json!({ "cwd": cwd }));
        }
        assert_eq!(sessions.title_once("a").as_deref(), Some("Title of a"));
        assert_eq!(sessions.title_once("a"), None, "titled once");
        sessions.remove("a");
        let listed = sessions.list(Some("/w"));
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert_eq!(listed[0]["title"], "Title of a");
        assert_eq!(sessions.list(None).len(), 3);
        assert!(sessions.was_opened("c") && !sessions.was_opened("d"));
    }

    #[tokio::test]
    async fn cancel_interrupts_and_wins_over_end_now() {
        let (sessions, mut run) = registry_with_run();
        assert!(sessions.cancel("s"));
        sessions.end_run_now("s", "r1");
        let outcome = run.interruptible(std::future::pending::<()>()).await;
        assert_eq!(outcome, Err(Interrupt::Cancel));
        assert!(!sessions.cancel("unknown"));
    }
}
