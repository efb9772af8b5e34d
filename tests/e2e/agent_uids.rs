//! `--agent-uids`: the paths of a uid per conversation beyond the first
//! turn: a range that is full, a conversation that waits for an agent slot,
//! a uid freed with its pruned workspace, a conversation whose agent was
//! stopped to make room. Starting agents as other uids needs root (CI runs
//! as root); each test says it skipped otherwise.

use std::path::{Path, PathBuf};

use crate::support::*;
use crate::workspaces::said_cwd;

/// `--agent-user`: its group is every conversation uid's group.
const AGENT_USER: &str = "nobody";
/// What a conversation beyond a full range of one uid is told.
const RANGE_FULL: &str = "no agent identity is free: all 1 uids of --agent-uids are in use";

/// A fresh `--cwd` for per-conversation workspaces, or `None` (and a
/// printed line) when not root.
fn root_cwd(name: &str) -> Option<PathBuf> {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: starting agents as other uids needs root (CI runs as root)");
        return None;
    }
    Some(std::fs::canonicalize(temp_dir(name)).expect("cwd"))
}

/// The daemon's flags: `agents` agent slots, each conversation's agent as
/// a uid of `range`, its workspace under `cwd`.
fn uid_flags(cwd: &Path, agents: &str, range: &str) -> Vec<String> {
    [
        "--agents",
        agents,
        "--agent-user",
        AGENT_USER,
        "--agent-uids",
        range,
        "--workspace",
        "per-conversation",
        "--cwd",
        cwd.to_str().expect("utf-8 path"),
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn start(flags: &[String]) -> Scene {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Scene::builder().flags(&flags).start().await
}

/// The uid the agent ran as, from the `/proc/self/status` it read
/// (`[cat=/proc/self/status]`): its `Uid:` line's real uid.
fn uid_of(answer: &str) -> String {
    answer
        .split('\n')
        .find(|line| line.starts_with("Uid:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no Uid line: {answer}"))
        .to_owned()
}

/// The conversation in `channel` has a turn; its agent's uid and workspace.
async fn uid_and_workspace(scene: &Scene, channel: &str) -> (String, PathBuf) {
    let mention = scene.mention(channel, "[say-cwd] [cat=/proc/self/status]").await;
    let answer = scene.reply_to(&mention).await.content;
    (uid_of(&answer), said_cwd(&answer))
}

/// How the journal left `mention`: its state and attempts.
fn journal_row(state_dir: &Path, mention: &nostr_sdk::Event) -> (String, i64) {
    let database = rusqlite::Connection::open(state_dir.join("acp-bridge.sqlite3")).expect("database");
    database
        .query_row(
            "SELECT state, attempts FROM mention WHERE event_id = ?1",
            [mention.id.to_hex()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the mention's journal row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_beyond_a_full_range_is_told_why_once_and_the_others_are_answered() {
    let Some(cwd) = root_cwd("uids-full") else {
        return;
    };
    let mut scene = start(&uid_flags(&cwd, "2", "61000-61000")).await;
    let first = scene.mention("full-a", "[cat=/proc/self/status]").await;
    assert_eq!(uid_of(&scene.reply_to(&first).await.content), "61000");

    let mark = scene.bridge.log.cursor();
    let refused = scene.mention("full-b", "hello").await;
    let notice = scene
        .owner
        .reply_containing(&scene.bot, &refused.id, RANGE_FULL)
        .await;
    let warned = scene
        .bridge
        .log
        .wait(
            mark,
            Line::new("no agent identity for the conversation").with("level", "WARN"),
        )
        .await;
    assert_eq!(warned["error"], RANGE_FULL, "{warned}");
    let again = scene.mention("full-a", "[cat=/proc/self/status]").await;
    assert_eq!(
        uid_of(&scene.reply_to(&again).await.content),
        "61000",
        "the conversation holding the uid is answered meanwhile"
    );
    let tally = scene
        .tally(
            "two conversations on a range of one uid",
            &[first, refused.clone(), again],
        )
        .await;
    assert_exactly_once(tally);

    assert!(scene.bridge.terminate(PATIENCE).await.success());
    let (state, attempts) = journal_row(&scene.spec().state_dir, &refused);
    assert_eq!(
        (state.as_str(), attempts),
        ("notified", 1),
        "ended by its notice, not retried"
    );
    println!(
        "range of 1 uid, 2 conversations: the second told {:?} ({state} after {attempts} attempt), the operator warned",
        notice.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_waits_in_order_for_a_busy_agent_slot_and_gets_a_uid_of_its_own() {
    let Some(cwd) = root_cwd("uids-wait") else {
        return;
    };
    let mut flags = uid_flags(&cwd, "1", "61000-61009");
    flags.extend(["--wait-notice-after".to_owned(), "1s".to_owned()]);
    let scene = start(&flags).await;
    let long = scene
        .mention_mid_turn(
            "slot-a",
            "a long one [cat=/proc/self/status] [rounds=30] [delay=100]",
        )
        .await;
    let waiting = scene.mention("slot-b", "meanwhile [cat=/proc/self/status]").await;
    let told = scene
        .owner
        .reply_containing(&scene.bot, &waiting.id, "Queued: ")
        .await;
    assert!(
        told.content
            .contains("every agent slot is serving another conversation"),
        "told why it waits: {}",
        told.content
    );
    let answer_a = scene.reply_to(&long).await;
    let answer_b = scene
        .owner
        .reply_containing(&scene.bot, &waiting.id, "Uid:")
        .await;
    assert!(
        answer_b.created_at >= answer_a.created_at,
        "B is answered after A's turn ends"
    );
    let (uid_a, uid_b) = (uid_of(&answer_a.content), uid_of(&answer_b.content));
    assert_eq!((uid_a.as_str(), uid_b.as_str()), ("61000", "61001"));
    let thread_b = scene.owner.events_referencing(&scene.bot, &waiting.id).await;
    assert_eq!(thread_b.len(), 2, "B is told once, answered once: {thread_b:?}");
    let thread_a = scene.owner.events_referencing(&scene.bot, &long.id).await;
    assert_eq!(thread_a.len(), 1, "A's turn is answered, not cut: {thread_a:?}");
    println!(
        "one agent slot busy with A (uid {uid_a}): B told {:?}, then answered as uid {uid_b}",
        told.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pruned_workspace_frees_its_uid_for_a_new_conversation() {
    let Some(cwd) = root_cwd("uids-prune") else {
        return;
    };
    let mut scene = start(&uid_flags(&cwd, "1", "61000-61000")).await;
    let (uid_a, workspace_a) = uid_and_workspace(&scene, "pruned-a").await;
    assert_eq!(uid_a, "61000");

    assert!(scene.bridge.terminate(PATIENCE).await.success());
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
    std::fs::File::open(&workspace_a)
        .and_then(|dir| dir.set_modified(long_ago))
        .expect("backdate the workspace");
    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let freed = log
        .wait(
            log.start(),
            Line::new("agent uid freed with its pruned workspace"),
        )
        .await;
    assert_eq!(freed["uid"], 61000, "{freed}");
    log.wait(log.start(), Line::new("idle workspaces removed")).await;
    assert!(!workspace_a.exists(), "A's workspace is gone");

    let (uid_b, workspace_b) = uid_and_workspace(&scene, "pruned-b").await;
    assert_eq!(uid_b, "61000", "B is given the freed uid");
    assert_ne!(workspace_b, workspace_a);
    println!("range of 1 uid: A's workspace pruned, uid {uid_a} freed, B answered as uid {uid_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_whose_agent_was_stopped_for_another_is_answered_again_with_its_files() {
    use std::os::unix::fs::MetadataExt;
    let Some(cwd) = root_cwd("uids-return") else {
        return;
    };
    let scene = start(&uid_flags(&cwd, "1", "61000-61009")).await;
    let (uid_a, workspace_a) = uid_and_workspace(&scene, "back-a").await;
    let notes = workspace_a.join("notes.txt");
    std::fs::write(&notes, "A's notes").expect("notes");
    let owner = std::fs::metadata(&workspace_a).expect("stat").uid();
    std::os::unix::fs::chown(&notes, Some(owner), None).expect("chown");
    std::fs::set_permissions(&notes, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");

    let mark = scene.bridge.log.cursor();
    let (uid_b, _) = uid_and_workspace(&scene, "back-b").await;
    let stopped = scene
        .bridge
        .log
        .wait(
            mark,
            Line::new("session closed (lru)").with("how", "agent stopped"),
        )
        .await;
    assert_ne!(uid_a, uid_b);

    let back = scene
        .mention(
            "back-a",
            &format!("[cat={}] [cat=/proc/self/status]", notes.display()),
        )
        .await;
    let answer = scene.reply_to(&back).await.content;
    assert!(
        answer.contains(&format!("cat {}: A's notes", notes.display())),
        "A's agent reads its files again: {answer}"
    );
    assert_eq!(uid_of(&answer), uid_a, "as its own uid again");
    println!(
        "one agent slot: A's agent (uid {uid_a}) stopped for B's (uid {uid_b}) ({}), A answered again as uid {}, its notes read",
        stopped["conversation"],
        uid_of(&answer)
    );
}
