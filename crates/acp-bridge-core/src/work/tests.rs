use std::time::{Duration, Instant};

use acp_protocol::{ToolCall, TurnEvent, turn_event};
use serde_json::{Value, json};

use super::*;

fn call(update: Value) -> ToolCall {
    match turn_event::<(), ()>(update) {
        TurnEvent::ToolCall(call) | TurnEvent::ToolCallUpdate(call) => call,
        other => panic!("not a tool call: {other:?}"),
    }
}

fn plan(steps: &[(&str, &str)]) -> Value {
    Value::Array(
        steps
            .iter()
            .map(|(content, status)| json!({"content": content, "status": status, "priority": "medium"}))
            .collect(),
    )
}

/// A turn that edits two files and runs two commands, one of which fails.
fn busy_turn() -> (WorkLog, Instant) {
    let start = Instant::now();
    let mut work = WorkLog::default();
    let updates = [
        json!({"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit a.rs", "kind": "edit",
            "status": "pending"}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed",
            "content": [{"type": "diff", "path": "/home/me/proj/src/a.rs",
                "oldText": "fn a() {}\nfn b() {}\n", "newText": "fn a() {}\nfn b() { 1 }\nfn c() {}\n"}]}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "e2", "title": "Write notes.md", "kind": "edit",
            "status": "completed", "content": [{"type": "diff", "path": "/home/me/proj/notes.md",
                "oldText": null, "newText": "one\ntwo\n"}]}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "x1", "title": "Run ls", "kind": "execute",
            "status": "in_progress", "rawInput": {"command": "ls -la"},
            "content": [{"type": "terminal", "terminalId": "t1"}]}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "x1", "status": "completed"}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "x2", "title": "cargo test", "kind": "execute",
            "rawInput": {"command": "cargo test"}}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "x2", "status": "failed"}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "r1", "title": "Read a.rs", "kind": "read",
            "status": "completed"}),
    ];
    for update in updates {
        work.observe_tool(&call(update), start);
    }
    (work, start)
}

#[test]
fn a_call_starts_once_and_ends_once_with_its_duration() {
    let start = Instant::now();
    let mut work = WorkLog::default();
    let later = start + Duration::from_millis(1250);
    let steps: Vec<Option<ToolStep>> = [
        (
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run ls", "kind": "execute",
            "status": "pending"}),
            start,
        ),
        (
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            start,
        ),
        (
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}),
            later,
        ),
        (
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed"}),
            later,
        ),
        // First seen already over: it ends at once, in no time.
        (
            json!({"sessionUpdate": "tool_call", "toolCallId": "c2", "status": "failed"}),
            later,
        ),
    ]
    .into_iter()
    .map(|(update, now)| work.observe_tool(&call(update), now))
    .collect();
    let view = |id: &str, title: &str, kind, status| ToolView {
        id: id.into(),
        title: title.into(),
        kind,
        status,
    };
    use acp_protocol::ToolKind::{Execute, Other};
    assert_eq!(
        steps,
        [
            Some(ToolStep::Started(view(
                "c1",
                "Run ls",
                Execute,
                ToolStatus::Pending
            ))),
            None,
            Some(ToolStep::Ended {
                call: view("c1", "Run ls", Execute, ToolStatus::Completed),
                duration: Duration::from_millis(1250)
            }),
            None,
            Some(ToolStep::Ended {
                call: view("c2", "other", Other, ToolStatus::Failed),
                duration: Duration::ZERO
            }),
        ]
    );
}

#[test]
fn running_is_the_newest_call_not_yet_over() {
    let now = Instant::now();
    let mut work = WorkLog::default();
    assert!(work.running().is_none());
    for update in [
        json!({"sessionUpdate": "tool_call", "toolCallId": "a", "title": "A", "kind": "read", "status": "in_progress"}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "b", "title": "B", "kind": "search"}),
    ] {
        work.observe_tool(&call(update), now);
    }
    assert_eq!(work.running().map(|call| call.title.as_str()), Some("B"));
    work.observe_tool(
        &call(json!({"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "completed"})),
        now,
    );
    assert_eq!(work.running().map(|call| call.title.as_str()), Some("A"));
}

#[test]
fn the_milestone_moves_only_when_the_plan_advances() {
    let mut work = WorkLog::default();
    let now = Instant::now();
    // (plan update, milestone after it)
    let table: [(Value, u64); 9] = [
        (plan(&[("read", "pending"), ("edit", "pending")]), 1),
        // Restated: no.
        (plan(&[("read", "pending"), ("edit", "pending")]), 1),
        (plan(&[("read", "in_progress"), ("edit", "pending")]), 2),
        (plan(&[("read", "completed"), ("edit", "in_progress")]), 3),
        // An entry added.
        (
            plan(&[
                ("read", "completed"),
                ("edit", "in_progress"),
                ("test", "pending"),
            ]),
            4,
        ),
        // Back to pending is not progress.
        (
            plan(&[("read", "completed"), ("edit", "pending"), ("test", "pending")]),
            4,
        ),
        // An entry removed.
        (plan(&[("read", "completed"), ("edit", "pending")]), 5),
        // Not an array: ignored.
        (json!({"entries": "nope"}), 5),
        (plan(&[("read", "completed"), ("edit", "completed")]), 6),
    ];
    for (index, (entries, milestone)) in table.into_iter().enumerate() {
        work.observe_plan(&entries);
        // Tool calls never move it.
        work.observe_tool(
            &call(json!({"sessionUpdate": "tool_call", "toolCallId": format!("t{index}"), "status": "completed"})),
            now,
        );
        assert_eq!(work.milestone(), milestone, "after update {index}: {entries}");
    }
    assert_eq!(
        work.plan(),
        [
            PlanEntry {
                content: "read".into(),
                status: PlanStatus::Completed
            },
            PlanEntry {
                content: "edit".into(),
                status: PlanStatus::Completed
            }
        ]
    );
}

#[test]
fn progress_text_says_how_long_the_plan_and_the_call_running() {
    let mut work = WorkLog::default();
    assert_eq!(work.progress_text(Duration::from_secs(17)), "Working for 17 s");
    assert_eq!(work.status_text(), None);
    work.observe_plan(&plan(&[
        ("read", "completed"),
        ("edit", "in_progress"),
        ("test", "pending"),
    ]));
    work.observe_tool(
        &call(json!({"sessionUpdate": "tool_call", "toolCallId": "e", "title": "Edit a.rs", "kind": "edit"})),
        Instant::now(),
    );
    assert_eq!(
        work.progress_text(Duration::from_secs(65)),
        "Working for 1 min 5 s\n☑ read\n▶ edit\n☐ test\nNow: Edit a.rs (edit)"
    );
    assert_eq!(
        work.status_text().as_deref(),
        Some("Plan:\n☑ read\n▶ edit\n☐ test\nNow: Edit a.rs (edit) · 1 tool call so far")
    );
    assert_eq!(
        WorkLog::default().progress_text(Duration::from_secs(2 * 3600 + 180)),
        "Working for 2 h 3 min"
    );
}

#[test]
fn texts_stay_bounded_and_say_what_they_left_out() {
    let mut work = WorkLog::default();
    let long = "x".repeat(5000);
    let steps: Vec<(&str, &str)> = (0..150).map(|_| (long.as_str(), "pending")).collect();
    work.observe_plan(&plan(&steps));
    assert_eq!(work.plan().len(), 100, "plan entries kept");
    assert!(work.plan()[0].content.len() <= 200 && work.plan()[0].content.ends_with('…'));
    work.observe_tool(
        &call(json!({"sessionUpdate": "tool_call", "toolCallId": "t", "title": long, "kind": "think"})),
        Instant::now(),
    );
    let progress = work.progress_text(Duration::from_secs(30));
    assert!(progress.len() <= 1500, "{} bytes", progress.len());
    assert!(progress.contains("more\nNow: xxx"), "{progress}");
    let status = work.status_text().unwrap();
    assert!(
        status.len() <= 1500 && status.ends_with("(think) · 1 tool call so far"),
        "{status}"
    );
    println!("progress text of a 150-step plan: {} bytes", progress.len());
}

#[test]
fn tool_calls_kept_are_bounded_and_the_folded_still_count() {
    let now = Instant::now();
    let mut work = WorkLog::default();
    for index in 0..1200 {
        work.observe_tool(
            &call(json!({"sessionUpdate": "tool_call", "toolCallId": format!("c{index}"),
                "kind": "edit", "status": "completed",
                "content": [{"type": "diff", "path": format!("/p/f{}.rs", index % 300), "oldText": "a\n", "newText": "b\n"}]})),
            now,
        );
    }
    assert_eq!(work.calls.kept.len(), 500);
    let full = work.summary(WorkSummary::Full).unwrap();
    assert!(full.len() <= 1500, "{} bytes", full.len());
    assert!(full.starts_with("Files changed (+1200 −1200):"), "{full}");
    assert!(full.ends_with("more\nTools: edit ×1200"), "{full}");
    println!("full account of 1200 calls: {} bytes", full.len());
    let short = work.summary(WorkSummary::Short).unwrap();
    // The 700 folded calls name 200 files; the 200 edits to f200..f299 are
    // counted, not named (the 500 calls kept name every file again).
    assert!(
        short.starts_with(
            "Changed 300 files (+1200 −1200): f0.rs, f1.rs, f10.rs and 297 more, \
             and 200 edits to files not named (+200 −200)"
        ),
        "{short}"
    );
}

#[test]
fn the_summary_names_files_with_their_lines_commands_and_tools() {
    let (work, _) = busy_turn();
    let table = [
        (WorkSummary::None, None),
        (
            WorkSummary::Short,
            Some(
                "Changed 2 files (+4 −1): notes.md, src/a.rs\n\
                 Ran 2 commands: ls -la, cargo test · Tools: edit ×2, execute ×2, read ×1",
            ),
        ),
        (
            WorkSummary::Full,
            Some(
                "Files changed (+4 −1):\n  notes.md +2 −0\n  src/a.rs +2 −1\n\
                 Commands run:\n  ls -la\n  cargo test (failed)\n\
                 Tools: edit ×2, execute ×2, read ×1",
            ),
        ),
    ];
    for (detail, expected) in table {
        assert_eq!(work.summary(detail).as_deref(), expected, "{detail:?}");
    }
    assert_eq!(
        WorkLog::default().summary(WorkSummary::Full),
        None,
        "nothing done"
    );
}

#[test]
fn a_failed_edit_changes_no_file_and_a_single_file_shows_its_name() {
    let now = Instant::now();
    let mut work = WorkLog::default();
    for update in [
        json!({"sessionUpdate": "tool_call", "toolCallId": "a", "kind": "edit", "status": "failed",
            "content": [{"type": "diff", "path": "/x/y/gone.rs", "newText": "1\n"}]}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "b", "kind": "edit", "status": "completed",
            "content": [{"type": "diff", "path": "/x/y/kept.rs", "oldText": "1\n", "newText": "2\n"}]}),
        // A later update replaces the content: counted once.
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "b",
            "content": [{"type": "diff", "path": "/x/y/kept.rs", "oldText": "1\n", "newText": "2\n3\n"}]}),
    ] {
        work.observe_tool(&call(update), now);
    }
    assert_eq!(
        work.summary(WorkSummary::Short).as_deref(),
        Some("Changed 1 file (+2 −1): kept.rs\nTools: edit ×2")
    );
}

#[test]
fn work_summary_names_parse() {
    for name in WorkSummary::NAMES {
        assert_eq!(name.parse::<WorkSummary>().map(WorkSummary::as_str), Ok(name));
    }
    assert!(
        "long"
            .parse::<WorkSummary>()
            .unwrap_err()
            .contains("none, short, full")
    );
}
