//! `--workspace` (issue 24 §4), end to end: in `per-conversation` mode each
//! conversation's sessions run in a directory of their own under `--cwd`
//! (the scripted agent says the `cwd` its session was opened with), stable
//! across the conversation's turns; `send_file` reads from it; `shared`
//! mode keeps every session in `--cwd`.

use std::path::{Path, PathBuf};

use crate::support::*;
use test_support::blossom::BlossomServer;

/// The `cwd: …` line of an answer of the scripted agent (`[say-cwd]`).
pub(crate) fn said_cwd(answer: &str) -> PathBuf {
    let line = answer
        .lines()
        .find_map(|line| line.strip_prefix("cwd: "))
        .unwrap_or_else(|| panic!("no cwd line: {answer}"));
    PathBuf::from(line)
}

fn flags(cwd: &Path, mode: &str) -> Vec<String> {
    vec![
        "--cwd".into(),
        cwd.to_str().expect("utf-8 path").into(),
        "--workspace".into(),
        mode.into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_conversation_works_in_a_directory_of_its_own() {
    let cwd = std::fs::canonicalize(temp_dir("workspaces-each")).expect("cwd");
    let flags = flags(&cwd, "per-conversation");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder().flags(&flags).start().await;

    let first = scene.mention("room", "[say-cwd]").await;
    let room = said_cwd(&scene.reply_to(&first).await.content);
    let other = scene.mention("other-room", "[say-cwd]").await;
    let other_room = said_cwd(&scene.reply_to(&other).await.content);
    assert_ne!(room, other_room, "two conversations, two directories");
    for dir in [&room, &other_room] {
        assert_eq!(dir.parent(), Some(cwd.join("conversations").as_path()));
        assert!(dir.is_dir(), "{} exists", dir.display());
    }
    let again = scene.mention("room", "[say-cwd]").await;
    assert_eq!(
        said_cwd(&scene.reply_to(&again).await.content),
        room,
        "the conversation keeps its directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_mode_keeps_every_session_in_the_cwd() {
    let cwd = std::fs::canonicalize(temp_dir("workspaces-shared")).expect("cwd");
    let flags = flags(&cwd, "shared");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder().flags(&flags).start().await;

    for room in ["room", "other-room"] {
        let mention = scene.mention(room, "[say-cwd]").await;
        assert_eq!(said_cwd(&scene.reply_to(&mention).await.content), cwd);
    }
    assert!(!cwd.join("conversations").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_reads_from_the_conversations_own_directory() {
    let blossom = BlossomServer::start().expect("blossom server");
    let cwd = std::fs::canonicalize(temp_dir("workspaces-send")).expect("cwd");
    std::fs::write(cwd.join("shared.txt"), "in the root").expect("file");
    let base = blossom.base_url();
    let mut flags = flags(&cwd, "per-conversation");
    flags.extend(["--blossom".into(), base, "--fetch-private-addresses".into()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder().flags(&flags).start().await;

    let first = scene.mention("room", "[say-cwd]").await;
    let room = said_cwd(&scene.reply_to(&first).await.content);
    std::fs::write(room.join("notes.txt"), "the room's notes").expect("file");
    let send = scene.mention("room", "[mcp-send-file=notes.txt|notes]").await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let answer = owner.reply_containing(&bot, &send.id, "done: ").await.content;
    assert!(answer.contains("mcp send_file: ok: sent: "), "{answer}");
    let root_file = scene
        .mention("room", "[mcp-send-file=../../shared.txt|root]")
        .await;
    let answer = owner
        .reply_containing(&bot, &root_file.id, "done: ")
        .await
        .content;
    assert!(
        answer.contains("mcp send_file: error: `../../shared.txt` is outside your working directory"),
        "another directory than the conversation's is out of reach: {answer}"
    );
    assert_eq!(blossom.blob_count(), 1);
}

/// Stops the daemon, makes `workspace` last used eight days ago (past the
/// default retention of seven) and starts it again; returns the log line
/// of housekeeping's first pass, which runs at start-up.
async fn restart_with_idle(scene: &mut Scene, workspace: &Path) -> serde_json::Value {
    assert!(
        scene
            .bridge
            .terminate(std::time::Duration::from_secs(30))
            .await
            .success()
    );
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
    std::fs::File::open(workspace)
        .and_then(|dir| dir.set_modified(long_ago))
        .expect("backdate the workspace");
    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new("idle workspaces removed")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_idle_past_the_retention_is_removed_at_the_next_pass() {
    let cwd = std::fs::canonicalize(temp_dir("workspaces-prune")).expect("cwd");
    let flags = flags(&cwd, "per-conversation");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut scene = Scene::builder().flags(&flags).start().await;

    let old = scene.mention("room", "[say-cwd]").await;
    let old_dir = said_cwd(&scene.reply_to(&old).await.content);
    std::fs::write(old_dir.join("work.txt"), "done long ago").expect("file");
    let recent = scene.mention("other-room", "[say-cwd]").await;
    let recent_dir = said_cwd(&scene.reply_to(&recent).await.content);
    let removed = restart_with_idle(&mut scene, &old_dir).await;
    assert_eq!(removed["count"], 1, "{removed}");
    assert!(!old_dir.exists(), "the idle workspace is gone");
    assert!(recent_dir.is_dir(), "the recent one stays");

    // The conversation starts afresh in a new, empty directory of the same name.
    let back = scene.mention("room", "[say-cwd]").await;
    assert_eq!(said_cwd(&scene.reply_to(&back).await.content), old_dir);
    assert!(!old_dir.join("work.txt").exists());
}

/// Runs `git` in `dir` with `args`; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .expect("run git");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_repo_each_workspace_is_a_worktree_of_it_until_pruned() {
    let base = std::fs::canonicalize(temp_dir("workspaces-repo")).expect("base");
    let (cwd, repo) = (base.join("work"), base.join("repo"));
    std::fs::create_dir_all(&cwd).expect("cwd");
    std::fs::create_dir_all(&repo).expect("repo");
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README.md"), "the project\n").expect("file");
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let mut flags = flags(&cwd, "per-conversation");
    flags.extend([
        "--workspace-repo".into(),
        repo.to_str().expect("utf-8 path").into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut scene = Scene::builder().flags(&flags).start().await;

    let mention = scene.mention("room", "[say-cwd]").await;
    let dir = said_cwd(&scene.reply_to(&mention).await.content);
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).expect("checked out"),
        "the project\n"
    );
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(
        listed.contains(&format!("worktree {}", dir.display())),
        "a worktree of the repo: {listed}"
    );

    restart_with_idle(&mut scene, &dir).await;
    assert!(!dir.exists(), "the worktree is gone");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(
        !listed.contains(&dir.display().to_string()),
        "and the repo no longer lists it: {listed}"
    );
}

/// Writes an executable `#!/bin/sh` script.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The variables of an `env` dump.
fn variables(dump: &str) -> Vec<&str> {
    dump.lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect()
}

/// A repository the agents own is armed as an agent would arm it: a
/// `post-checkout` hook, an fsmonitor program and a smudge filter, each
/// leaving the environment it ran in (with the daemon's secret key in it,
/// before the fix); and a `git` first on the daemon's `PATH` records the
/// environment git itself is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_git_runs_nothing_the_repository_names_and_gets_no_secret() {
    let base = std::fs::canonicalize(temp_dir("workspaces-armed-repo")).expect("base");
    let (cwd, repo, trap, bin) = (
        base.join("work"),
        base.join("repo"),
        base.join("trap"),
        base.join("bin"),
    );
    for dir in [&cwd, &repo, &trap, &bin] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join(".gitattributes"), "* filter=evil\n").expect("attributes");
    std::fs::write(repo.join("README.md"), "the project\n").expect("file");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let left = |name: &str| trap.join(format!("{name}.env"));
    script(
        &repo.join(".git/hooks/post-checkout"),
        &format!("env > {}", left("hook").display()),
    );
    let fsmonitor = trap.join("fsmonitor");
    script(&fsmonitor, &format!("env > {}", left("fsmonitor").display()));
    let smudge = trap.join("smudge");
    script(&smudge, &format!("env > {}; cat", left("smudge").display()));
    git(
        &repo,
        &["config", "core.fsmonitor", fsmonitor.to_str().expect("utf-8")],
    );
    git(
        &repo,
        &["config", "filter.evil.smudge", smudge.to_str().expect("utf-8")],
    );
    git(&repo, &["config", "filter.evil.required", "true"]);
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .expect("which git")
            .stdout,
    )
    .expect("utf-8");
    script(
        &bin.join("git"),
        &format!("env > {}\nexec {} \"$@\"", left("git").display(), real_git.trim()),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    const PROVIDER_KEY: (&str, &str) = ("SOME_PROVIDER_API_KEY", "not-for-git");

    let mut flags = flags(&cwd, "per-conversation");
    flags.extend([
        "--workspace-repo".into(),
        repo.to_str().expect("utf-8 path").into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder()
        .flags(&flags)
        .env(&[("PATH", path.as_str()), PROVIDER_KEY])
        .start()
        .await;
    let mention = scene.mention("room", "[say-cwd]").await;
    let dir = said_cwd(&scene.reply_to(&mention).await.content);
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).expect("checked out"),
        "the project\n",
        "the worktree is made all the same"
    );
    let ran: Vec<&str> = ["hook", "fsmonitor", "smudge"]
        .into_iter()
        .filter(|name| left(name).exists())
        .collect();
    assert!(ran.is_empty(), "programs the repository names ran: {ran:?}");
    let dump = std::fs::read_to_string(left("git")).expect("git ran through the wrapper");
    let seen = variables(&dump);
    for secret in ["ACP_BRIDGE_SECRET_KEY", PROVIDER_KEY.0, "RUST_LOG"] {
        assert!(!seen.contains(&secret), "git was given {secret}: {seen:?}");
    }
    println!("the daemon's git: 0 of 3 planted programs ran; its environment holds {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_dirs_reach_agents_that_take_additional_directories() {
    let base = std::fs::canonicalize(temp_dir("workspaces-extra")).expect("base");
    let (cwd, shared) = (base.join("work"), base.join("docs"));
    std::fs::create_dir_all(&cwd).expect("cwd");
    std::fs::create_dir_all(&shared).expect("extra dir");
    let mut flags = flags(&cwd, "per-conversation");
    flags.extend([
        "--workspace-extra-dir".into(),
        shared.to_str().expect("utf-8 path").into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let taking = Scene::builder()
        .agent(&[
            "--round-delay-ms",
            "20",
            "--rounds",
            "1",
            "--additional-directories",
        ])
        .flags(&flags)
        .start()
        .await;
    let mention = taking.mention("room", "[say-cwd]").await;
    let answer = taking.reply_to(&mention).await.content;
    assert!(
        answer.contains(&format!("(additional: {})", shared.display())),
        "{answer}"
    );

    // An agent that does not advertise them gets none, and the log says so.
    let plain = Scene::builder().flags(&flags).start().await;
    let mention = plain.mention("room", "[say-cwd]").await;
    let answer = plain.reply_to(&mention).await.content;
    assert!(!answer.contains("additional"), "{answer}");
    let log = &plain.bridge.log;
    log.wait(
        log.start(),
        Line::new("the agent does not take additionalDirectories; its sessions get only their cwd"),
    )
    .await;
}

/// `id -u [user]`.
fn uid_of(user: Option<&str>) -> Option<u32> {
    let output = std::process::Command::new("id")
        .arg("-u")
        .args(user)
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_agent_user_the_workspace_is_that_users_alone() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    const AGENT_USER: &str = "nobody";
    if uid_of(None) != Some(0) {
        println!("skipped: --agent-user needs a daemon running as root (CI runs as root)");
        return;
    }
    let cwd = std::fs::canonicalize(temp_dir("workspaces-user")).expect("cwd");
    std::fs::set_permissions(&cwd, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let blossom = BlossomServer::start().expect("blossom server");
    let mut flags = flags(&cwd, "per-conversation");
    flags.extend([
        "--agent-user".into(),
        AGENT_USER.into(),
        "--blossom".into(),
        blossom.base_url(),
        "--fetch-private-addresses".into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let scene = Scene::builder().flags(&flags).start().await;

    let mention = scene.mention("room", "[say-cwd]").await;
    let dir = said_cwd(&scene.reply_to(&mention).await.content);
    let meta = std::fs::metadata(&dir).expect("the workspace");
    assert_eq!(
        Some(meta.uid()),
        uid_of(Some(AGENT_USER)),
        "owned by the agent user"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let parent = std::fs::metadata(cwd.join("conversations")).expect("conversations/");
    assert_eq!((parent.uid(), parent.permissions().mode() & 0o777), (0, 0o711));

    // The agent, as that user, reads what is in its workspace.
    let file = dir.join("notes.txt");
    std::fs::write(&file, "in the workspace").expect("file");
    let read = scene.mention("room", &format!("[cat={}]", file.display())).await;
    let answer = scene.reply_to(&read).await.content;
    assert!(
        answer.contains(&format!("{}: in the workspace", file.display())),
        "{answer}"
    );

    // send_file reads as root, but only what the agent user could read: a
    // root-only file (say, a hard link planted to one) is refused.
    std::fs::write(dir.join("root-only.txt"), "not for the agent").expect("file");
    std::fs::set_permissions(dir.join("root-only.txt"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    let (owner, bot) = (&scene.owner, scene.bot);
    let refused = scene.mention("room", "[mcp-send-file=root-only.txt|x]").await;
    let answer = owner.reply_containing(&bot, &refused.id, "done: ").await.content;
    assert!(
        answer.contains("mcp send_file: error: `root-only.txt` is not readable by the user you run as"),
        "{answer}"
    );
    let sent = scene.mention("room", "[mcp-send-file=notes.txt|x]").await;
    let answer = owner.reply_containing(&bot, &sent.id, "done: ").await.content;
    assert!(answer.contains("mcp send_file: ok: sent: "), "{answer}");
    assert_eq!(blossom.blob_count(), 1);
}
