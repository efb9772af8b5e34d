//! What an agent's permission question shows the owner of the tool call it
//! is about, which tool that is, and how a remembered "always" answer
//! answers the next question about the same tool.
//!
//! Pure: the question's text is a function of the request; the daemon's
//! heart keeps the remembered choices (one per conversation and tool) and
//! performs the answers.
//!
//! The tool's key is what the agent says of the tool, in this order:
//! claude-agent-acp's `_meta.claudeCode.toolName` (`Bash`, `Edit`,
//! `mcp__server__tool`; it sets it on a permission request for an MCP
//! tool or a subagent's call), else the tool call's `name`
//! (claude-agent-acp names every tool call it asks about so, beside the
//! ACP fields), else its ACP `kind` (`execute`, `edit`, ...; `other` says
//! nothing and is skipped), else its title. A key longer than
//! [`MAX_TOOL_KEY_BYTES`] (a title that is a whole script) is no key: an
//! "always" about it is used once, never remembered, since a cut key would
//! let another call that shares its start through.

use std::fmt;

use acp_protocol::{PermissionKind, PermissionOption, ToolContent, tool_command, tool_content};
use serde_json::Value;
use similar::TextDiff;

/// The most lines a question shows of a tool call's command and diffs.
pub const MAX_SHOWN_LINES: usize = 40;
/// The most bytes it shows of them: the question (one event) must still
/// hold its options below.
pub const MAX_SHOWN_BYTES: usize = 2000;
/// The longest tool key that is remembered.
pub const MAX_TOOL_KEY_BYTES: usize = 128;
/// Lines of context around each change of a diff.
const DIFF_CONTEXT: usize = 2;

/// A remembered answer to every question about one tool in one
/// conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Reject,
}

impl Verdict {
    /// The verdict an answer of `kind` asks to remember: only the
    /// "always" kinds do.
    pub fn remembered_from(kind: &PermissionKind) -> Option<Verdict> {
        match kind {
            PermissionKind::AllowAlways => Some(Verdict::Allow),
            PermissionKind::RejectAlways => Some(Verdict::Reject),
            _ => None,
        }
    }

    /// The option of the agent's that carries this verdict: its "always"
    /// one, else its "once" one; `None` when it offers neither.
    pub fn option(self, options: &[PermissionOption]) -> Option<&PermissionOption> {
        let preference = match self {
            Verdict::Allow => [PermissionKind::AllowAlways, PermissionKind::AllowOnce],
            Verdict::Reject => [PermissionKind::RejectAlways, PermissionKind::RejectOnce],
        };
        preference
            .iter()
            .find_map(|kind| options.iter().find(|option| &option.kind == kind))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Reject => "reject",
        }
    }

    /// The verdict `word` names (`allow`, `reject`).
    pub fn parse(word: &str) -> Option<Verdict> {
        match word {
            "allow" => Some(Verdict::Allow),
            "reject" => Some(Verdict::Reject),
            _ => None,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The key remembered choices about `tool_call` (an ACP `ToolCallUpdate`)
/// are kept under (see the module doc); `None` when the agent names it by
/// nothing short enough.
pub fn tool_key(tool_call: &Value) -> Option<String> {
    fn text(value: &Value) -> Option<&str> {
        value.as_str().map(str::trim).filter(|text| !text.is_empty())
    }
    let named = text(&tool_call["_meta"]["claudeCode"]["toolName"])
        .or_else(|| text(&tool_call["name"]))
        .or_else(|| text(&tool_call["kind"]).filter(|kind| *kind != "other"))
        .or_else(|| text(&tool_call["title"]))?;
    (named.len() <= MAX_TOOL_KEY_BYTES).then(|| named.to_owned())
}

/// What the question shows of what `tool_call` would do: its command
/// (`rawInput.command`, a string or an argv), its diffs as unified diffs,
/// its text content, its terminals named; at most [`MAX_SHOWN_LINES`] lines
/// and [`MAX_SHOWN_BYTES`] bytes, the cut said (`… 120 more lines not
/// shown`). Empty when the tool call carries none of these.
pub fn shown(tool_call: &Value) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(command) = tool_command(tool_call) {
        lines.extend(command.lines().map(|line| format!("$ {line}")));
    }
    for item in tool_content(tool_call).into_iter().flatten() {
        match item {
            ToolContent::Diff {
                path,
                old_text,
                new_text,
            } => lines.extend(diff_lines(&path, old_text.as_deref(), &new_text)),
            ToolContent::Terminal { terminal_id } => lines.push(format!("(terminal {terminal_id})")),
            ToolContent::Other(item) => {
                if item["type"] == "content"
                    && let Some(text) = item["content"]["text"].as_str()
                {
                    lines.extend(text.lines().map(str::to_owned));
                }
            }
        }
    }
    bounded(&lines)
}

/// One ACP diff of `path` (`old`: `None` for a new file) as unified diff
/// lines.
fn diff_lines(path: &str, old: Option<&str>, new: &str) -> Vec<String> {
    let diff = TextDiff::from_lines(old.unwrap_or_default(), new);
    let before = if old.is_some() { path } else { "/dev/null" };
    let unified = diff
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(before, path)
        .to_string();
    let mut lines: Vec<String> = unified.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        lines.push(format!("(no change to {path})"));
    }
    lines
}

/// `lines`, as many as fit the bounds, then how many were left out.
fn bounded(lines: &[String]) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for line in lines {
        let room = MAX_SHOWN_BYTES.saturating_sub(out.len());
        if shown == MAX_SHOWN_LINES || room == 0 {
            break;
        }
        if line.len() + 1 > room {
            // A line too long for what room is left: its start, and it
            // counts among those not shown.
            let end = line.floor_char_boundary(room.saturating_sub(1));
            if end > 0 {
                out.push_str(&line[..end]);
                out.push('\n');
            }
            break;
        }
        out.push_str(line);
        out.push('\n');
        shown += 1;
    }
    let left = lines.len() - shown;
    if left > 0 {
        let noun = if left == 1 { "line" } else { "lines" };
        out.push_str(&format!("… {left} more {noun} not shown\n"));
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn option(id: &str, kind: PermissionKind) -> PermissionOption {
        PermissionOption {
            id: id.into(),
            name: id.into(),
            kind,
        }
    }

    #[test]
    fn the_key_is_claudes_tool_name_then_the_name_then_the_kind_then_the_title() {
        let claude = json!({"title": "rm -rf build", "kind": "execute", "name": "Bash",
            "_meta": {"claudeCode": {"toolName": "mcp__fs__delete"}}});
        assert_eq!(tool_key(&claude).as_deref(), Some("mcp__fs__delete"));
        let named = json!({"title": "rm -rf build", "kind": "execute", "name": "Bash"});
        assert_eq!(tool_key(&named).as_deref(), Some("Bash"));
        let kind = json!({"title": "rm -rf build", "kind": "execute"});
        assert_eq!(tool_key(&kind).as_deref(), Some("execute"));
        let other = json!({"title": "fetch the page", "kind": "other"});
        assert_eq!(tool_key(&other).as_deref(), Some("fetch the page"));
        assert_eq!(tool_key(&json!({"title": "  "})), None);
        let script = json!({"title": "x".repeat(MAX_TOOL_KEY_BYTES + 1)});
        assert_eq!(tool_key(&script), None, "a cut key would match another call");
    }

    #[test]
    fn a_remembered_verdict_picks_the_always_option_then_the_once_one() {
        let all = [
            option("a1", PermissionKind::AllowOnce),
            option("aa", PermissionKind::AllowAlways),
            option("r1", PermissionKind::RejectOnce),
        ];
        assert_eq!(Verdict::Allow.option(&all).map(|o| o.id.as_str()), Some("aa"));
        assert_eq!(Verdict::Reject.option(&all).map(|o| o.id.as_str()), Some("r1"));
        assert_eq!(Verdict::Reject.option(&all[..2]), None);
        assert_eq!(
            Verdict::remembered_from(&PermissionKind::RejectAlways),
            Some(Verdict::Reject)
        );
        assert_eq!(Verdict::remembered_from(&PermissionKind::AllowOnce), None);
        assert_eq!(Verdict::parse("allow"), Some(Verdict::Allow));
        assert_eq!(Verdict::parse("yes"), None);
    }

    #[test]
    fn a_command_and_a_diff_are_shown() {
        let call = json!({
            "title": "Run", "kind": "execute",
            "rawInput": {"command": "rm -rf build"},
            "content": [{"type": "diff", "path": "src/a.rs", "oldText": "one\ntwo\nthree\n", "newText": "one\n2\nthree\n"}],
        });
        assert_eq!(
            shown(&call),
            "$ rm -rf build\n--- src/a.rs\n+++ src/a.rs\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three"
        );
        let argv = json!({"rawInput": {"command": ["bash", "-lc", "ls"]}});
        assert_eq!(shown(&argv), "$ bash -lc ls");
        let new_file = json!({"content": [{"type": "diff", "path": "n.txt", "newText": "hi\n"}]});
        assert!(shown(&new_file).starts_with("--- /dev/null\n+++ n.txt\n"));
        assert_eq!(shown(&json!({"title": "x"})), "");
    }

    #[test]
    fn a_long_diff_is_cut_at_the_line_bound_saying_how_many_lines_are_not_shown() {
        let old: String = (0..100).map(|n| format!("old {n}\n")).collect();
        let new: String = (0..100).map(|n| format!("new {n}\n")).collect();
        let call = json!({"content": [{"type": "diff", "path": "big.rs", "oldText": old, "newText": new}]});
        let text = shown(&call);
        // Headers (3) and 200 changed lines: 40 shown.
        assert!(text.ends_with("… 163 more lines not shown"), "{text}");
        assert_eq!(text.lines().count(), MAX_SHOWN_LINES + 1);
    }

    #[test]
    fn a_huge_line_is_cut_at_the_byte_bound() {
        let call = json!({"rawInput": {"command": "é".repeat(MAX_SHOWN_BYTES)}});
        let text = shown(&call);
        assert!(text.len() <= MAX_SHOWN_BYTES + 40, "{}", text.len());
        assert!(text.ends_with("… 1 more line not shown"), "{text}");
    }
}
