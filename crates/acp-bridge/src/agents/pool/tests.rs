//! The pool against real ACP agents: the scripted agent on in-process pipes
//! (under a paused clock, so a 10 s start costs no real time), and for the
//! kill at shutdown a real process.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use acp_client::{ClientConfig, SessionId};
use futures_util::FutureExt;
use scripted_agent::Options;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::actor::{IDLE_AGENT_REAP, REAP_INTERVAL, Request};
use super::breaker::{BREAKER_COOL_DOWN, CRASHES_TO_OPEN};
use super::*;
use crate::state::store::Store;
use crate::state::store::scratch::ScratchDir;

/// The profile name the pools of these tests run under (its metrics label).
const TEST_PROFILE: &str = "test";

/// How long the slow agent of these tests takes to answer `initialize`.
const SLOW_INIT: Duration = Duration::from_secs(10);
/// How long a test waits for a real process.
const PATIENCE: Duration = Duration::from_secs(10);

fn key(conversation: &str) -> ConversationKey {
    ConversationKey::from_journal(conversation)
}

fn fast() -> Options {
    Options::default()
}

fn slow() -> Options {
    Options {
        init_delay_ms: Some(SLOW_INIT.as_millis() as u64),
        ..Options::default()
    }
}

/// Answers `initialize` after a second with a protocol version we refuse.
fn refusing() -> Options {
    Options {
        protocol_version: 2,
        init_delay_ms: Some(1000),
        ..Options::default()
    }
}

/// A pool under test, with the state dir its sessions are kept in.
struct TestPool {
    pool: Pool,
    _dir: ScratchDir,
}

impl std::ops::Deref for TestPool {
    type Target = Pool;

    fn deref(&self) -> &Pool {
        &self.pool
    }
}

fn store() -> (Arc<Store>, ScratchDir) {
    let dir = ScratchDir::new("pool");
    let store = Arc::new(Store::open(dir.path()).expect("store"));
    (store, dir)
}

/// A pool of in-process scripted agents, one script per slot.
fn pool(scripts: &[Options]) -> TestPool {
    pool_with(scripts, ClientConfig::default())
}

fn pool_with(scripts: &[Options], config: ClientConfig) -> TestPool {
    let (store, dir) = store();
    let sessions = SessionBook::new(
        Sessions::new(store),
        "scripted".into(),
        crate::agents::workspace::Workspaces::new(
            &std::env::temp_dir(),
            crate::agents::workspace::WorkspaceMode::Shared,
            None,
        ),
        AuthPolicy::default(),
        None,
    );
    let pool = Pool::with_launcher(
        TEST_PROFILE,
        Launcher::InProcess(scripts.to_vec()),
        scripts.len(),
        (sessions, LiveBounds::default()),
        config,
    );
    TestPool { pool, _dir: dir }
}

/// A pool of the configured command, as the daemon starts it.
fn command_pool(settings: AgentSettings) -> TestPool {
    let (store, dir) = store();
    let pool = Pool::start(
        TEST_PROFILE,
        settings,
        ClientConfig::default(),
        (
            Sessions::new(Arc::clone(&store)),
            &crate::state::store::AgentUids::new(Arc::clone(&store)),
        ),
        AgentGroups::new(store),
        None,
    );
    TestPool { pool, _dir: dir }
}

fn command(program: &str, args: &[&str]) -> AgentSettings {
    AgentSettings {
        command: program.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())],
        processes: 1,
        turns_per_agent: 1,
        cwd: std::env::temp_dir(),
        workspace: crate::agents::workspace::WorkspaceMode::Shared,
        workspace_repo: None,
        extra_dirs: Vec::new(),
        cancel_timeout: Duration::from_secs(1),
        start_timeout: acp_client::DEFAULT_INITIALIZE_TIMEOUT,
        auth_method: None,
        user: None,
        uids: None,
        live: LiveBounds::default(),
    }
}

/// Asks for a lease now (the actor hears it before any later request) and
/// leaves the waiting to a task.
fn lease_in_background(pool: &Pool, conversation: &str) -> JoinHandle<Result<Lease, PoolError>> {
    let (pool, conversation) = (pool.clone(), key(conversation));
    let mut lease = Box::pin(async move { pool.lease(&conversation).await });
    assert!(
        (&mut lease).now_or_never().is_none(),
        "a lease waits for the actor"
    );
    tokio::spawn(lease)
}

async fn leased(pool: &Pool, conversation: &str) -> Lease {
    pool.lease(&key(conversation)).await.expect("leased")
}

#[tokio::test(start_paused = true)]
async fn a_slow_start_on_one_slot_does_not_delay_a_lease_on_another() {
    let pool = pool(&[slow(), fast()]);
    let began = Instant::now();
    let first = lease_in_background(&pool, "a");
    let second = leased(&pool, "b").await;
    assert!(began.elapsed() < SLOW_INIT, "b waited {:?}", began.elapsed());
    assert!(!first.is_finished(), "a waits for its slot's slow agent");

    let first = first.await.expect("task").expect("a leased");
    assert!(began.elapsed() >= SLOW_INIT);
    assert_eq!((first.slot, second.slot), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn while_a_slot_is_starting_status_release_rotate_and_discard_take_effect_at_once() {
    let pool = pool(&[slow(), fast()]);
    let began = Instant::now();
    let starting = lease_in_background(&pool, "a");
    let b = leased(&pool, "b").await;
    let expected = PoolStatus {
        alive: 1,
        starts: Starts::Allowed,
        last_failure: None,
        live_sessions: Default::default(),
        awaiting: Default::default(),
    };
    let status = PoolStatus {
        live_sessions: Default::default(),
        ..pool.status()
    };
    assert_eq!(status, expected);

    // Released, slot 1 is the least loaded again: a new conversation goes there.
    pool.release(&b);
    let c = leased(&pool, "c").await;
    assert_eq!(c.slot, 1);
    pool.release(&c);

    // Rotated, b opens a fresh session on the same agent.
    pool.rotate(&key("b"));
    let rotated = leased(&pool, "b").await;
    assert_eq!((rotated.slot, rotated.generation), (1, b.generation));
    assert_ne!(rotated.session, b.session);

    // Discarded, the slot starts a fresh agent at the next lease.
    pool.discard(&rotated);
    pool.release(&rotated);
    let fresh = leased(&pool, "b").await;
    assert_eq!(fresh.slot, 1);
    assert_ne!(fresh.generation, rotated.generation);
    assert_ne!(fresh.client.name(), rotated.client.name());

    assert!(began.elapsed() < SLOW_INIT, "took {:?}", began.elapsed());
    assert!(!starting.is_finished(), "all while slot 0 was starting");
    starting.await.expect("task").expect("a leased in the end");
}

#[tokio::test(start_paused = true)]
async fn waiters_of_a_failed_start_all_get_its_error_and_the_breaker_counts_it_once() {
    // Silent past the initialize timeout: a failure that may pass.
    let timeout = Duration::from_secs(1);
    let silent = Options {
        init_delay_ms: Some(2 * timeout.as_millis() as u64),
        ..Options::default()
    };
    let config = ClientConfig {
        initialize_timeout: timeout,
        ..ClientConfig::default()
    };
    let pool = pool_with(&[silent], config);
    for attempt in 1..=CRASHES_TO_OPEN {
        let waiters = ["a", "b", "c"].map(|conversation| lease_in_background(&pool, conversation));
        for waiter in waiters {
            let error = waiter.await.expect("task").expect_err("the start failed");
            assert!(
                matches!(&error, PoolError::Initialize(why) if why.contains("initialize")),
                "{error}"
            );
        }
        assert_eq!(
            pool.starts() == Starts::Paused,
            attempt == CRASHES_TO_OPEN,
            "one failure per start, not per waiter (start {attempt})"
        );
    }

    let opened = Instant::now();
    let refused = pool.lease(&key("d")).await.expect_err("no start while open");
    assert!(
        matches!(&refused, PoolError::CircuitOpen { last_failure, .. } if last_failure.starts_with("initialize failed")),
        "{refused}"
    );
    let status = pool.status();
    assert!(
        status
            .last_failure
            .is_some_and(|failure| failure.starts_with("initialize failed"))
    );

    let mut status = pool.status.clone();
    status
        .wait_for(|status| status.starts == Starts::Allowed)
        .await
        .expect("actor running");
    assert!(
        opened.elapsed() >= BREAKER_COOL_DOWN,
        "closed after the cool-down"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_initialize_opens_the_breaker_at_once() {
    let pool = pool(&[refusing()]);
    let error = pool.lease(&key("a")).await.expect_err("refused");
    assert!(
        matches!(&error, PoolError::Refused(why) if why.contains("protocol version 2")),
        "{error}"
    );
    assert!(error.is_configuration());
    assert_eq!(
        pool.starts(),
        Starts::Paused,
        "a misconfiguration is not tried again"
    );
    let refused = pool.lease(&key("b")).await.expect_err("no start while open");
    assert!(matches!(refused, PoolError::CircuitOpen { .. }), "{refused}");
}

#[tokio::test]
async fn a_missing_agent_binary_is_a_state_of_its_own_named_with_a_remedy() {
    let pool = command_pool(command("/nonexistent/agent", &[]));
    let error = pool.lease(&key("a")).await.expect_err("no such binary");
    let hint = "`/nonexistent/agent` does not exist: install the agent, or point --agent-command at it";
    assert_eq!(error, PoolError::CannotStart(hint.to_owned()));
    assert_eq!(pool.status().last_failure.as_deref(), Some(hint));
    assert_eq!(pool.starts(), Starts::CannotStart(hint.to_owned()));
    let again = pool.lease(&key("b")).await.expect_err("still no binary");
    assert_eq!(again, error, "told why, not that agents keep crashing");
}

#[tokio::test]
async fn a_cwd_the_agent_user_cannot_enter_is_named_with_a_hint() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: starting an agent as another user needs root (CI runs as root)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("acp-bridge-pool-closed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    let mut agent = command("/bin/true", &[]);
    agent.cwd = dir.clone();
    agent.user = Some(acp_client::AgentUser::lookup("nobody").expect("nobody"));
    let pool = command_pool(agent);
    let error = pool.lease(&key("a")).await.expect_err("cwd closed to nobody");
    let _ = std::fs::remove_dir_all(&dir);
    let hint = format!(
        "user `nobody` (--agent-user) may not enter --cwd `{}`",
        dir.display()
    );
    assert!(
        matches!(&error, PoolError::CannotStart(why) if why.starts_with(&hint)),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn conversations_keep_their_session_and_new_ones_go_to_the_least_loaded_slot() {
    let pool = pool(&[fast(), fast()]);
    let a = leased(&pool, "a").await;
    let b = leased(&pool, "b").await;
    assert_eq!((a.slot, b.slot), (0, 1));
    pool.release(&a);
    pool.release(&b);

    let x = leased(&pool, "x").await;
    assert_eq!(x.slot, 0, "ties go to the first slot");
    let a_again = leased(&pool, "a").await;
    assert_eq!(
        (a_again.slot, &a_again.session),
        (0, &a.session),
        "a keeps its session, though slot 1 is less loaded"
    );
    let y = leased(&pool, "y").await;
    assert_eq!(y.slot, 1);
}

#[tokio::test(start_paused = true)]
async fn a_session_report_for_a_dead_generation_is_ignored() {
    let pool = pool(&[fast()]);
    let dead = leased(&pool, "x").await;
    pool.discard(&dead);
    pool.release(&dead);
    let a = leased(&pool, "a").await;
    assert_ne!(a.generation, dead.generation);
    pool.release(&a);

    // A lessee of the dead agent reports late: a's live session stays.
    let stale = Request::SessionOpened {
        conversation: key("a"),
        slot: 0,
        generation: dead.generation,
        session: SessionId("sess_stale".into()),
    };
    pool.requests.send(stale).expect("actor running");
    let a_again = leased(&pool, "a").await;
    assert_eq!(a_again.session, a.session);
}

#[tokio::test(start_paused = true)]
async fn an_agent_idle_past_the_reap_time_is_stopped_and_a_busy_one_is_not() {
    let pool = pool(&[fast(), fast()]);
    let idle = leased(&pool, "a").await;
    let busy = leased(&pool, "b").await;
    pool.release(&idle);

    tokio::time::sleep(IDLE_AGENT_REAP + REAP_INTERVAL).await;
    let a = leased(&pool, "a").await;
    assert_eq!(a.slot, 0);
    assert_ne!(a.generation, idle.generation, "a fresh agent");
    pool.release(&busy);
    let b = leased(&pool, "b").await;
    assert_eq!((b.generation, &b.session), (busy.generation, &busy.session));
}

#[tokio::test(start_paused = true)]
async fn a_lease_abandoned_while_waiting_gives_its_slot_back() {
    let pool = pool(&[slow(), fast()]);
    let abandoned = lease_in_background(&pool, "a");
    abandoned.abort();
    // The start completes and its grant finds nobody.
    tokio::time::sleep(SLOW_INIT * 2).await;
    let b = leased(&pool, "b").await;
    assert_eq!(b.slot, 0, "slot 0 carries no load");
}

/// An agent that never answers `initialize`, holding the write end of a
/// FIFO in `dir` open while it lives; and that FIFO.
fn fifo_agent(dir: &Path) -> (AgentSettings, std::path::PathBuf) {
    std::fs::create_dir_all(dir).expect("temp dir");
    let fifo = dir.join("agent-alive");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|status| status.success()), "mkfifo");
    let agent = command(
        "/bin/sh",
        &[
            "-c",
            r#"exec 3>"$0"; exec sleep 600"#,
            fifo.to_str().expect("UTF-8"),
        ],
    );
    (agent, fifo)
}

#[tokio::test]
async fn shutdown_kills_an_agent_still_starting() {
    let dir = std::env::temp_dir().join(format!("acp-bridge-pool-{}", std::process::id()));
    let (agent, fifo) = fifo_agent(&dir);
    let pool = command_pool(agent);
    let parked = lease_in_background(&pool, "a");
    let (started, gone) = watch_fifo(&fifo);
    tokio::time::timeout(PATIENCE, started)
        .await
        .expect("the agent runs")
        .expect("watcher");

    pool.shutdown().await;
    tokio::time::timeout(PATIENCE, gone)
        .await
        .expect("the agent was killed")
        .expect("watcher");
    let error = parked.await.expect("task").expect_err("no agent");
    assert!(matches!(error, PoolError::ShutDown), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_agent_s_process_group_is_recorded_while_it_runs() {
    let dir = std::env::temp_dir().join(format!("acp-bridge-pool-groups-{}", std::process::id()));
    let (agent, fifo) = fifo_agent(&dir);
    let (store, _state) = store();
    let groups = AgentGroups::new(Arc::clone(&store));
    let pool = Pool::start(
        TEST_PROFILE,
        agent,
        ClientConfig::default(),
        (
            Sessions::new(Arc::clone(&store)),
            &crate::state::store::AgentUids::new(store),
        ),
        groups.clone(),
        None,
    );
    let _parked = lease_in_background(&pool, "a");
    let (started, gone) = watch_fifo(&fifo);
    tokio::time::timeout(PATIENCE, started)
        .await
        .expect("the agent runs")
        .expect("watcher");
    let recorded = || groups.all().expect("groups");
    let deadline = Instant::now() + PATIENCE;
    while recorded().is_empty() {
        assert!(Instant::now() < deadline, "the agent's group is recorded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let group = recorded().remove(0);
    let leader = std::fs::read_to_string(format!("/proc/{}/stat", group.pgid)).expect("the leader runs");
    let fields: Vec<&str> = leader
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        fields[2],
        group.pgid.to_string(),
        "the agent leads its group: {leader}"
    );

    pool.shutdown().await;
    tokio::time::timeout(PATIENCE, gone)
        .await
        .expect("the agent was killed")
        .expect("watcher");
    while !recorded().is_empty() {
        assert!(Instant::now() < deadline, "an ended agent's group is forgotten");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Resolves `started` once a writer opened the FIFO, and `gone` once no
/// process holds it open any more. A thread of its own: opening a FIFO blocks.
fn watch_fifo(fifo: &Path) -> (oneshot::Receiver<()>, oneshot::Receiver<()>) {
    let (started_tx, started) = oneshot::channel();
    let (gone_tx, gone) = oneshot::channel();
    let fifo = fifo.to_owned();
    std::thread::spawn(move || {
        let Ok(mut reader) = std::fs::File::open(&fifo) else {
            return;
        };
        let _ = started_tx.send(());
        let _ = reader.read_to_end(&mut Vec::new());
        let _ = gone_tx.send(());
    });
    (started, gone)
}

#[tokio::test(start_paused = true)]
async fn a_conversation_gets_its_session_back_from_a_fresh_agent() {
    for (reopen, kept) in [
        (Some(scripted_agent::Reopen::Resume), true),
        (Some(scripted_agent::Reopen::Load), true),
        (None, false),
    ] {
        let agent = Options {
            reopen_sessions: reopen,
            ..Options::default()
        };
        let pool = pool(&[agent]);
        let first = leased(&pool, "a").await;
        // The agent dies (a crash, a reap): its replacement is a fresh process.
        pool.discard(&first);
        pool.release(&first);
        let again = leased(&pool, "a").await;
        assert_ne!(again.generation, first.generation, "{reopen:?}: a fresh agent");
        assert_eq!(again.session == first.session, kept, "{reopen:?}");
        pool.release(&again);

        // After `!rotate` the conversation starts afresh, whatever the agent can.
        pool.rotate(&key("a"));
        let rotated = leased(&pool, "a").await;
        assert_ne!(rotated.session, first.session, "{reopen:?}: rotated");
    }
}

#[test]
fn a_failed_lease_tells_the_turn_what_may_help() {
    let cases = [
        (PoolError::Initialize("eof".into()), Remedy::Retry),
        (PoolError::Session("busy".into()), Remedy::Retry),
        (PoolError::CannotStart("gone".into()), Remedy::Operator),
        (PoolError::Refused("v2".into()), Remedy::Operator),
        (PoolError::Auth("no key".into()), Remedy::Operator),
        (
            PoolError::CircuitOpen {
                seconds: 60,
                last_failure: "crash".into(),
            },
            Remedy::Operator,
        ),
        (PoolError::ShutDown, Remedy::Nothing),
        (PoolError::NoIdentity("all held".into()), Remedy::Nothing),
    ];
    for (error, remedy) in cases {
        let words = error.to_string();
        let failure = LeaseFailure::from(error);
        assert_eq!(
            (failure.reason.as_str(), failure.remedy),
            (words.as_str(), remedy)
        );
    }
}
