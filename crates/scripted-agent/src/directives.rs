//! Per-turn directives written in the prompt text, and the script of one turn
//! that results from them and the command-line options.
//!
//! A directive is a bracketed word anywhere in the prompt (`[rounds=2]`,
//! `[hang]`). Tests steer one turn without restarting the agent this way.
//! Bracketed text that is not a directive, or has a value that does not
//! parse, is just text. When a directive repeats, the last one wins, except
//! `[cat=PATH]`, which reads every path it is given, and `[tool-edit=…]`
//! and `[tool-exec=…]`, which report every call they are given.

use std::time::Duration;

use crate::elicit::ElicitKind;
use crate::options::Options;

/// Stop reason of a turn that plays to its end and says nothing else.
pub(crate) const DEFAULT_STOP_REASON: &str = "end_turn";

/// What the prompt text asked of this turn; `None`/`false` defers to the
/// options.
#[derive(Debug, Default, PartialEq, Eq)]
struct Directives {
    rounds: Option<u32>,
    delay_ms: Option<u64>,
    tool: bool,
    permission: bool,
    permission_twice: bool,
    withdraw_permission: bool,
    stop_reason: Option<String>,
    crash_after_rounds: Option<u32>,
    hang: bool,
    fail: bool,
    chatter: bool,
    no_run_id: bool,
    advertise_wrong_run: bool,
    say_bytes: Option<usize>,
    title_bytes: Option<usize>,
    cat: Vec<String>,
    child: bool,
    detached_child: Option<String>,
    elicit: Option<ElicitKind>,
    withdraw_elicit: bool,
    foreign_updates: Option<u32>,
    mcp_post: Option<String>,
    mcp_posts: Option<u32>,
    mcp_react: Option<String>,
    mcp_event: Option<String>,
    mcp_wrong_token: bool,
    mcp_send_file: Option<(String, String)>,
    say_cwd: bool,
    tasks: crate::mcp_tasks::TaskCalls,
    mcp_read_thread: Option<u32>,
    say_mcp_servers: bool,
    session_cost: Option<String>,
    round_cost: Option<String>,
    tokens: Option<(u64, u64)>,
    plan: Option<Vec<String>>,
    tool_edits: Vec<Edit>,
    tool_execs: Vec<String>,
}

/// A mark that is safe to put on a shell's command line as is.
fn is_mark(mark: &str) -> bool {
    !mark.is_empty() && mark.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl Directives {
    fn parse(text: &str) -> Self {
        let mut directives = Self::default();
        // Splitting at `[` means a candidate never holds a `[` itself, so
        // `[[tool]` still finds `[tool]`.
        for candidate in text.split('[').skip(1) {
            if let Some((inner, _)) = candidate.split_once(']') {
                directives.apply(inner);
            }
        }
        directives
    }

    fn apply(&mut self, inner: &str) {
        if self.tasks.apply(inner) {
            return;
        }
        match inner.split_once('=') {
            None => match inner {
                "tool" => self.tool = true,
                "permission" => self.permission = true,
                "permission-twice" => self.permission_twice = true,
                "withdraw-permission" => self.withdraw_permission = true,
                "hang" => self.hang = true,
                "fail" => self.fail = true,
                "chatter" => self.chatter = true,
                "no-run-id" => self.no_run_id = true,
                "advertise-wrong-run" => self.advertise_wrong_run = true,
                "child" => self.child = true,
                "withdraw-elicit" => self.withdraw_elicit = true,
                "mcp-wrong-token" => self.mcp_wrong_token = true,
                "say-cwd" => self.say_cwd = true,
                "say-mcp-servers" => self.say_mcp_servers = true,
                _ => {}
            },
            Some(("rounds", value)) => self.rounds = value.parse().ok().or(self.rounds),
            Some(("delay", value)) => self.delay_ms = value.parse().ok().or(self.delay_ms),
            Some(("crash-after", value)) => {
                self.crash_after_rounds = value.parse().ok().or(self.crash_after_rounds);
            }
            Some(("say-bytes", value)) => self.say_bytes = value.parse().ok().or(self.say_bytes),
            Some(("title-bytes", value)) => self.title_bytes = value.parse().ok().or(self.title_bytes),
            Some(("stop", value)) if !value.is_empty() => {
                self.stop_reason = Some(value.to_owned());
            }
            Some(("cat", path)) if !path.is_empty() => self.cat.push(path.to_owned()),
            Some(("mcp-post", text)) if !text.is_empty() => self.mcp_post = Some(text.to_owned()),
            Some(("mcp-posts", count)) => self.mcp_posts = count.parse().ok().or(self.mcp_posts),
            Some(("mcp-react", emoji)) if !emoji.is_empty() => self.mcp_react = Some(emoji.to_owned()),
            Some(("mcp-read-thread", limit)) => {
                self.mcp_read_thread = limit.parse().ok().or(self.mcp_read_thread);
            }
            Some(("mcp-event", id)) if !id.is_empty() => self.mcp_event = Some(id.to_owned()),
            Some(("mcp-send-file", spec)) if !spec.is_empty() => {
                let (path, caption) = spec.split_once('|').unwrap_or((spec, ""));
                self.mcp_send_file = Some((path.to_owned(), caption.to_owned()));
            }
            Some(("detached-child", mark)) if is_mark(mark) => {
                self.detached_child = Some(mark.to_owned());
            }
            Some(("elicit", kind)) => self.elicit = ElicitKind::parse(kind).or(self.elicit),
            Some(("session-cost", value)) if value.parse::<f64>().is_ok_and(|cost| cost >= 0.0) => {
                self.session_cost = Some(value.to_owned());
            }
            Some(("round-cost", value)) if value.parse::<f64>().is_ok_and(|cost| cost >= 0.0) => {
                self.round_cost = Some(value.to_owned());
            }
            Some(("tokens", value)) => {
                let counts = value
                    .split_once('/')
                    .and_then(|(input, output)| Some((input.parse().ok()?, output.parse().ok()?)));
                self.tokens = counts.or(self.tokens);
            }
            Some(("plan", steps)) if !steps.is_empty() => {
                self.plan = Some(steps.split('|').map(str::to_owned).collect());
            }
            Some(("tool-edit", spec)) => self.tool_edits.extend(Edit::parse(spec)),
            Some(("tool-exec", command)) if !command.is_empty() => self.tool_execs.push(command.to_owned()),
            Some(("foreign-updates", value)) => {
                self.foreign_updates = value.parse().ok().or(self.foreign_updates);
            }
            Some(_) => {}
        }
    }
}

/// An edit the turn reports (`[tool-edit=PATH|OLD|NEW]`; an empty OLD is a
/// new file; `\n` in OLD or NEW is a line break).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edit {
    pub(crate) path: String,
    pub(crate) old_text: Option<String>,
    pub(crate) new_text: String,
}

impl Edit {
    /// `PATH|OLD|NEW`; without two `|`, not an edit.
    pub(crate) fn parse(spec: &str) -> Option<Self> {
        let mut parts = spec.splitn(3, '|');
        let (path, old, new) = (parts.next()?, parts.next()?, parts.next()?);
        let lines = |text: &str| text.replace("\\n", "\n");
        (!path.is_empty()).then(|| Edit {
            path: path.to_owned(),
            old_text: (!old.is_empty()).then(|| lines(old)),
            new_text: lines(new),
        })
    }
}

/// How one turn plays: options overridden by the prompt's directives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnScript {
    pub(crate) rounds: u32,
    pub(crate) round_delay: Duration,
    /// Report a tool call in round 1 (always true when `permission` is).
    pub(crate) tool: bool,
    /// Ask the client's permission before the round-1 tool call.
    pub(crate) permission: bool,
    /// Having had the first answer, ask the same question again (the same
    /// title, as an agent retrying a tool would).
    pub(crate) permission_twice: bool,
    /// Having asked, withdraw the question (`$/cancel_request`) after one
    /// round delay and go on as if rejected.
    pub(crate) withdraw_permission: bool,
    pub(crate) stop_reason: String,
    pub(crate) crash_after_rounds: Option<u32>,
    pub(crate) hang: bool,
    pub(crate) fail: bool,
    pub(crate) chatter: bool,
    /// Never advertise the run (neither its start nor its end), like an agent
    /// without run ids: a client cannot steer it.
    pub(crate) no_run_id: bool,
    /// After advertising the real run, advertise a run id that is not live,
    /// so a client's steer names the wrong run.
    pub(crate) advertise_wrong_run: bool,
    /// The final message goes on with this many bytes of filler text.
    pub(crate) say_bytes: Option<usize>,
    /// The tool call's title goes on with this many bytes of filler text
    /// (a permission question quotes it).
    pub(crate) title_bytes: Option<usize>,
    /// Files the agent reads as its own user, as a shell tool would; the
    /// final message says what each held, or why it could not be read.
    pub(crate) cat: Vec<String>,
    /// Start a helper process (`sleep`) that outlives the turn, as a tool's
    /// shell would.
    pub(crate) child: bool,
    /// Start a helper that leaves the agent's session and process group
    /// and is orphaned (`setsid` in a background job of a shell that then
    /// exits), as a daemonizing tool does; its command line ends with this
    /// mark, so a test can find it.
    pub(crate) detached_child: Option<String>,
    /// Ask the client this form question in round 1 (after the tool call).
    pub(crate) elicit: Option<ElicitKind>,
    /// Having asked, withdraw the question (`$/cancel_request`) after one
    /// round delay.
    pub(crate) withdraw_elicit: bool,
    /// Before the rounds, stream this many updates, each for a session of
    /// its own that the client never opened.
    pub(crate) foreign_updates: u32,
    /// In round 1, call the offered MCP server's `post_message` with this
    /// text (see `mcp_client`).
    pub(crate) mcp_post: Option<String>,
    /// How many times to post it (`[mcp-posts=N]`, default once), each
    /// numbered `(k/N)` when more than one.
    pub(crate) mcp_posts: u32,
    /// Then call its `react` with this emoji, on `mcp_event`, else on the
    /// first `event <id>` the prompt quotes (the mention itself).
    pub(crate) mcp_react: Option<String>,
    pub(crate) mcp_event: Option<String>,
    /// Call the tools with a token that was never minted.
    pub(crate) mcp_wrong_token: bool,
    /// Then call its `send_file` with this path and caption
    /// (`[mcp-send-file=PATH|CAPTION]`).
    pub(crate) mcp_send_file: Option<(String, String)>,
    /// End the final message with `cwd: <the session's cwd>` (`[say-cwd]`).
    pub(crate) say_cwd: bool,
    /// Then `delegate`, `task_status`, `task_stop` (see `mcp_tasks`).
    pub(crate) mcp_tasks: crate::mcp_tasks::TaskCalls,
    /// Then call its `read_thread` with this limit.
    pub(crate) mcp_read_thread: Option<u32>,
    /// Say which MCP servers the session was offered (see `mcp_offered`).
    pub(crate) say_mcp_servers: bool,
    /// The session's cost so far (USD), reported in a `usage_update`
    /// before the answer (`[session-cost=0.25]`).
    pub(crate) session_cost: Option<String>,
    /// After each round N, a `usage_update` giving the session's cost so
    /// far as N times this (USD), as a session that started at zero
    /// (`[round-cost=0.4]`): a turn that keeps spending while it runs.
    pub(crate) round_cost: Option<String>,
    /// The prompt's input and output tokens, in the answer's `usage`
    /// (`[tokens=400/700]`).
    pub(crate) tokens: Option<(u64, u64)>,
    /// The plan's entries (`[plan=read|edit|test]`): sent before round 1
    /// with the first in progress, advanced one entry per round, all
    /// completed before the answer.
    pub(crate) plan: Option<Vec<String>>,
    /// Edits reported in round 1, each a tool call with its diff
    /// (`[tool-edit=PATH|OLD|NEW]`).
    pub(crate) tool_edits: Vec<Edit>,
    /// Commands reported in round 1, each an execute call with its
    /// terminal (`[tool-exec=COMMAND]`).
    pub(crate) tool_execs: Vec<String>,
}

impl TurnScript {
    pub(crate) fn new(options: &Options, prompt_text: &str) -> Self {
        let directives = if options.ignore_directives {
            Directives::default()
        } else {
            Directives::parse(prompt_text)
        };
        let permission = directives.permission
            || directives.permission_twice
            || directives.withdraw_permission
            || options.ask_permission;
        Self {
            rounds: directives.rounds.unwrap_or(options.rounds),
            round_delay: Duration::from_millis(directives.delay_ms.unwrap_or(options.round_delay_ms)),
            tool: permission || directives.tool || options.tool_calls,
            permission,
            permission_twice: directives.permission_twice,
            withdraw_permission: directives.withdraw_permission,
            stop_reason: directives
                .stop_reason
                .unwrap_or_else(|| DEFAULT_STOP_REASON.to_owned()),
            crash_after_rounds: directives.crash_after_rounds.or(options.crash_after_rounds),
            hang: directives.hang || options.hang,
            fail: directives.fail,
            chatter: directives.chatter || options.chatter,
            no_run_id: directives.no_run_id,
            advertise_wrong_run: directives.advertise_wrong_run,
            say_bytes: directives.say_bytes,
            title_bytes: directives.title_bytes,
            cat: directives.cat,
            child: directives.child,
            detached_child: directives.detached_child,
            elicit: directives
                .elicit
                .or(directives.withdraw_elicit.then_some(ElicitKind::Choice)),
            withdraw_elicit: directives.withdraw_elicit,
            foreign_updates: directives.foreign_updates.unwrap_or(0),
            mcp_post: directives.mcp_post,
            mcp_posts: directives.mcp_posts.unwrap_or(1),
            mcp_react: directives.mcp_react,
            mcp_event: directives.mcp_event,
            mcp_wrong_token: directives.mcp_wrong_token,
            mcp_send_file: directives.mcp_send_file,
            say_cwd: directives.say_cwd,
            mcp_tasks: directives.tasks,
            mcp_read_thread: directives.mcp_read_thread,
            say_mcp_servers: directives.say_mcp_servers,
            session_cost: directives.session_cost,
            round_cost: directives.round_cost,
            tokens: directives.tokens,
            plan: directives.plan,
            tool_edits: directives.tool_edits,
            tool_execs: directives.tool_execs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_leaves_the_options_in_charge() {
        let script = TurnScript::new(&Options::default(), "hello [world] [rounds=] [x=1]");
        assert_eq!(script.rounds, Options::default().rounds);
        assert_eq!(
            script.round_delay,
            Duration::from_millis(Options::default().round_delay_ms)
        );
        assert_eq!(script.stop_reason, DEFAULT_STOP_REASON);
        assert!(!script.tool && !script.permission && !script.hang && !script.fail);
        assert_eq!(script.crash_after_rounds, None);
    }

    #[test]
    fn directives_anywhere_override_the_options() {
        let script = TurnScript::new(
            &Options::default(),
            "do [rounds=7] this [delay=15][stop=max_tokens] now [crash-after=2] [chatter]",
        );
        assert_eq!(script.rounds, 7);
        assert_eq!(script.round_delay, Duration::from_millis(15));
        assert_eq!(script.stop_reason, "max_tokens");
        assert_eq!(script.crash_after_rounds, Some(2));
        assert!(script.chatter);
    }

    #[test]
    fn permission_implies_a_tool_call() {
        let script = TurnScript::new(&Options::default(), "[permission]");
        assert!(script.permission && script.tool && !script.permission_twice);
        let script = TurnScript::new(&Options::default(), "[permission-twice]");
        assert!(script.permission && script.tool && script.permission_twice);
    }

    #[test]
    fn last_directive_wins_and_bad_values_are_text() {
        let directives = Directives::parse("[rounds=2] [rounds=x] [rounds=4] [[fail] [hang");
        assert_eq!(directives.rounds, Some(4));
        assert!(directives.fail);
        assert!(!directives.hang);
        let directives = Directives::parse("[no-run-id] [advertise-wrong-run]");
        assert!(directives.no_run_id && directives.advertise_wrong_run);
        assert_eq!(Directives::parse("[say-bytes=200000]").say_bytes, Some(200_000));
        assert_eq!(Directives::parse("[title-bytes=9000]").title_bytes, Some(9000));
        let usage = Directives::parse(
            "[session-cost=0.25] [session-cost=x] [tokens=4/7] [tokens=4] [round-cost=0.4] [round-cost=-1]",
        );
        assert_eq!(usage.session_cost.as_deref(), Some("0.25"));
        assert_eq!(usage.round_cost.as_deref(), Some("0.4"));
        assert_eq!(usage.tokens, Some((4, 7)));
        let directives = Directives::parse(
            "[cat=/a] [cat=] [child] [cat=/b c] [detached-child=m-1] [detached-child=$(x)]",
        );
        assert_eq!(directives.cat, vec!["/a", "/b c"], "every path is read");
        assert!(directives.child);
        assert_eq!(
            directives.detached_child.as_deref(),
            Some("m-1"),
            "a mark with shell syntax is ignored"
        );
        let directives = Directives::parse("[elicit=form] [elicit=nonsense]");
        assert_eq!(directives.elicit, Some(ElicitKind::Form), "a bad kind is text");
        let script = TurnScript::new(&Options::default(), "[withdraw-elicit]");
        assert_eq!(
            (script.elicit, script.withdraw_elicit),
            (Some(ElicitKind::Choice), true)
        );
        let script = TurnScript::new(&Options::default(), "[foreign-updates=1000]");
        assert_eq!(script.foreign_updates, 1000);
        let script = TurnScript::new(&Options::default(), "[mcp-post=working on it] [mcp-wrong-token]");
        assert_eq!(script.mcp_post.as_deref(), Some("working on it"));
        assert_eq!(script.mcp_posts, 1);
        assert_eq!(TurnScript::new(&Options::default(), "[mcp-posts=6]").mcp_posts, 6);
        assert!(script.mcp_wrong_token);
        let script = TurnScript::new(&Options::default(), "[mcp-react=👍] [mcp-event=abc]");
        assert_eq!(script.mcp_react.as_deref(), Some("👍"));
        assert_eq!(script.mcp_event.as_deref(), Some("abc"));
        assert!(TurnScript::new(&Options::default(), "[say-cwd]").say_cwd);
        let script = TurnScript::new(&Options::default(), "[mcp-send-file=out/chart.png|the chart]");
        assert_eq!(
            script.mcp_send_file,
            Some(("out/chart.png".to_owned(), "the chart".to_owned()))
        );
        let script = TurnScript::new(&Options::default(), "[mcp-read-thread=3]");
        assert_eq!(script.mcp_read_thread, Some(3));
        let script = TurnScript::new(
            &Options::default(),
            "[plan=read|edit] [plan=] [tool-edit=a.rs|x|y] [tool-edit=bad] [tool-exec=ls -la] [tool-exec=pwd]",
        );
        assert_eq!(script.plan, Some(vec!["read".to_owned(), "edit".to_owned()]));
        assert_eq!(script.tool_edits.len(), 1, "an edit without its texts is text");
        assert_eq!(script.tool_execs, ["ls -la", "pwd"]);
    }

    #[test]
    fn an_edit_is_path_old_new() {
        assert_eq!(
            Edit::parse("src/a.rs|one\\ntwo|one\\n2|x"),
            Some(Edit {
                path: "src/a.rs".into(),
                old_text: Some("one\ntwo".into()),
                new_text: "one\n2|x".into()
            })
        );
        assert_eq!(Edit::parse("new.md||hi").and_then(|edit| edit.old_text), None);
        assert_eq!(Edit::parse("a|b"), None);
        assert_eq!(Edit::parse("|b|c"), None);
    }

    #[test]
    fn flags_apply_when_the_prompt_is_silent() {
        let options = Options {
            tool_calls: true,
            crash_after_rounds: Some(1),
            hang: true,
            ..Options::default()
        };
        let script = TurnScript::new(&options, "hi");
        assert!(script.tool && !script.permission && script.hang);
        assert_eq!(script.crash_after_rounds, Some(1));
    }
}
