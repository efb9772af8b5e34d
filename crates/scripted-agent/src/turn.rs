//! One turn: from the live run the dispatcher started to the answer of its
//! `session/prompt`.
//!
//! The turn plays its rounds; each round waits its delay, then at the round
//! boundary folds the queued steers into the turn (as goose does), then
//! streams its message chunk; round 1 may report a tool call behind a
//! permission request, and may ask the client a form question
//! (`[elicit=KIND]`). At the end it streams the final message, clears the
//! run and only then answers, so the run-cleared update is on the wire
//! before the response. A cancel (or the end-of-run race) interrupts any
//! wait. A turn whose client is gone just stops.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::acp::{self, update};
use crate::directives::TurnScript;
use crate::elicit::{self, ElicitKind};
use crate::misbehaviour;
use crate::permission::{self, Verdict};
use crate::rpc::RpcError;
use crate::session::{Interrupt, RunHandle};
use crate::shared::Agent;
use crate::wire::ClientGone;
use crate::work;

/// The size of the chunks `[say-bytes=N]` streams its filler in.
const FILLER_CHUNK_BYTES: usize = 8 * 1024;

/// A prompt accepted with a live run, ready to play.
#[derive(Debug)]
pub(crate) struct Turn {
    /// The prompt to answer; `None` for a turn the agent started by itself.
    pub(crate) request_id: Option<Value>,
    pub(crate) run: RunHandle,
    pub(crate) prompt_text: String,
    pub(crate) script: TurnScript,
}

/// What happened during the turn that the final message reports.
#[derive(Debug, Default)]
struct Transcript {
    /// Texts of the steers folded into this turn, in order.
    folded_steers: Vec<String>,
    /// The tool's line of the final message, once the tool ran.
    tool_line: Option<String>,
    /// What became of the form question, once asked.
    elicit_line: Option<String>,
    /// One line per `[cat=PATH]`: what the file held, or the error.
    reads: Vec<String>,
    /// `--controls`: the session's model and mode.
    controls: Option<String>,
    /// What became of the `[mcp-post=…]` and `[mcp-react=…]` tool calls.
    mcp_lines: Vec<String>,
    /// `[say-cwd]`: `cwd: <the session's cwd>`.
    cwd_line: Option<String>,
}

/// Why the rounds stopped before their end.
#[derive(Debug)]
enum Halt {
    Cancelled,
    /// The run ends now but the turn ends normally (`--end-run-after-steer`).
    EndedEarly,
    ClientGone,
}

impl From<ClientGone> for Halt {
    fn from(_: ClientGone) -> Self {
        Halt::ClientGone
    }
}

impl From<Interrupt> for Halt {
    fn from(interrupt: Interrupt) -> Self {
        match interrupt {
            Interrupt::Cancel => Halt::Cancelled,
            Interrupt::EndNow => Halt::EndedEarly,
        }
    }
}

/// Plays `turn` to its answer. Spawned once per prompt.
pub(crate) async fn play(agent: Arc<Agent>, turn: Turn) {
    let session_id = turn.run.session_id().to_owned();
    if play_turn(&agent, turn).await.is_err() {
        log!("session {session_id}: client gone mid-turn, turn dropped");
    }
}

async fn play_turn(agent: &Agent, mut turn: Turn) -> Result<(), ClientGone> {
    if let Some(bytes) = agent.options.huge_line_bytes {
        agent.outbox.send_line(misbehaviour::huge_line(bytes)).await?;
    }
    work::send_plan(agent, turn.run.session_id(), turn.script.plan.as_deref(), 0).await?;
    if turn.script.hang {
        log!(
            "session {}: run {} hangs as scripted",
            turn.run.session_id(),
            turn.run.run_id()
        );
        return std::future::pending().await;
    }
    if turn.script.child {
        start_child(turn.run.session_id());
    }
    misbehaviour::foreign_updates(&agent.outbox, turn.script.foreign_updates).await?;
    if let Some(mark) = &turn.script.detached_child {
        start_detached_child(turn.run.session_id(), mark);
    }
    let mut transcript = Transcript::default();
    let halt = if turn.script.chatter {
        chatter(agent, &mut turn).await
    } else {
        play_rounds(agent, &mut turn, &mut transcript).await
    };
    let cancelled = match halt {
        Ok(()) | Err(Halt::EndedEarly) => false,
        Err(Halt::Cancelled) => true,
        Err(Halt::ClientGone) => return Err(ClientGone),
    };
    finish(agent, turn, transcript, cancelled).await
}

/// Streams a thought chunk every interval until interrupted.
async fn chatter(agent: &Agent, turn: &mut Turn) -> Result<(), Halt> {
    let interval = std::time::Duration::from_millis(agent.options.chatter_interval_ms);
    loop {
        turn.run.interruptible(tokio::time::sleep(interval)).await?;
        let session_id = turn.run.session_id();
        acp::send_update(&agent.outbox, session_id, update::thought(".")).await?;
    }
}

async fn play_rounds(agent: &Agent, turn: &mut Turn, transcript: &mut Transcript) -> Result<(), Halt> {
    let total = turn.script.rounds;
    crash_if_due(turn, 0);
    for round in 1..=total {
        if agent.options.garbage_stdout {
            let garbage = misbehaviour::GARBAGE_LINE.to_owned();
            agent.outbox.send_line(garbage).await?;
        }
        let delay = turn.script.round_delay;
        turn.run.interruptible(tokio::time::sleep(delay)).await?;
        fold_steers(agent, turn, transcript).await?;
        let text = format!("round {round}/{total}\n");
        acp::send_update(&agent.outbox, turn.run.session_id(), update::agent_text(&text)).await?;
        if let Some(cost) = turn
            .script
            .round_cost
            .as_deref()
            .and_then(|cost| cost.parse::<f64>().ok())
        {
            let so_far = cost * f64::from(round);
            acp::send_update(&agent.outbox, turn.run.session_id(), update::usage(so_far)).await?;
        }
        if round == 1 && turn.script.tool {
            run_tool(agent, turn, transcript).await?;
        }
        if round == 1 {
            let script = &turn.script;
            work::run_tools(
                agent,
                turn.run.session_id(),
                &script.tool_edits,
                &script.tool_execs,
            )
            .await?;
        }
        if round < total {
            let plan = turn.script.plan.as_deref();
            work::send_plan(agent, turn.run.session_id(), plan, round as usize).await?;
        }
        if round == 1 {
            call_mcp_tools(agent, turn, transcript).await?;
        }
        if round == 1
            && let Some(kind) = turn.script.elicit
        {
            transcript.elicit_line = Some(ask_form(agent, turn, kind).await?);
        }
        crash_if_due(turn, round);
    }
    Ok(())
}

/// The round boundary: every queued steer joins the turn, in order.
async fn fold_steers(agent: &Agent, turn: &Turn, transcript: &mut Transcript) -> Result<(), ClientGone> {
    for steer in agent.sessions.take_steers(&turn.run) {
        if !steer.injected {
            // goose's proof of delivery; `_session/steering` needs none.
            let folded = update::steer_folded(&steer.text, &steer.message_id);
            acp::send_update(&agent.outbox, turn.run.session_id(), folded).await?;
        }
        log!(
            "session {}: folded steer {} into run {}",
            turn.run.session_id(),
            steer.message_id,
            turn.run.run_id()
        );
        transcript.folded_steers.push(steer.text);
    }
    Ok(())
}

/// Reports the tool call, asking permission first if the script says so.
async fn run_tool(agent: &Agent, turn: &mut Turn, transcript: &mut Transcript) -> Result<(), Halt> {
    let tool_call_id = agent.ids.tool_call();
    let session_id = turn.run.session_id().to_owned();
    let title = tool_title(&turn.script);
    acp::send_update(
        &agent.outbox,
        &session_id,
        update::tool_call(&tool_call_id, &title),
    )
    .await?;
    let (status, line) = if turn.script.permission {
        let (mut status, mut line) = decided(ask_permission(agent, turn, &tool_call_id).await?)?;
        if turn.script.permission_twice {
            let (again, said) = decided(ask_permission(agent, turn, &tool_call_id).await?)?;
            line = format!("{line}, then {said}");
            status = again;
        }
        (status, format!("tool: {line}"))
    } else {
        ("completed", "tool: completed".to_owned())
    };
    let done = update::tool_call_update(&tool_call_id, status);
    acp::send_update(&agent.outbox, &session_id, done).await?;
    transcript.tool_line = Some(line);
    Ok(())
}

/// The tool call's status and what the final message says of a verdict;
/// a cancelled question cancels the turn.
fn decided(verdict: Verdict) -> Result<(&'static str, String), Halt> {
    match verdict {
        Verdict::Allowed(kind) => Ok(("completed", format!("allowed ({kind})"))),
        Verdict::Rejected(kind) => Ok(("failed", format!("rejected ({kind})"))),
        Verdict::Cancelled => Err(Halt::Cancelled),
    }
}

/// `[mcp-post=TEXT]` (`[mcp-posts=N]` times), `[mcp-react=EMOJI]`,
/// `[mcp-send-file=PATH|CAPTION]`, `[mcp-read-thread=N]`: calls
/// `post_message`, then `react`, then `send_file`, then `read_thread`, on
/// the MCP server offered for the session; the final message gets a line
/// about each call (with what `read_thread` returned).
async fn call_mcp_tools(agent: &Agent, turn: &mut Turn, transcript: &mut Transcript) -> Result<(), Halt> {
    if turn.script.say_mcp_servers {
        let offered = agent.sessions.mcp_offered(turn.run.session_id());
        transcript.mcp_lines.push(offered);
    }
    let mut calls = Vec::new();
    if let Some(text) = &turn.script.mcp_post {
        let total = turn.script.mcp_posts;
        for k in 1..=total {
            let text = if total > 1 {
                format!("{text} ({k}/{total})")
            } else {
                text.clone()
            };
            calls.push(("post_message", json!({ "text": text })));
        }
    }
    if let Some(emoji) = &turn.script.mcp_react {
        let event_id = turn
            .script
            .mcp_event
            .clone()
            .or_else(|| first_quoted_event(&turn.prompt_text))
            .unwrap_or_default();
        calls.push(("react", json!({ "event_id": event_id, "emoji": emoji })));
    }
    if let Some((path, caption)) = &turn.script.mcp_send_file {
        calls.push(("send_file", json!({ "path": path, "caption": caption })));
    }
    if let Some(limit) = turn.script.mcp_read_thread {
        calls.push(("read_thread", json!({ "limit": limit })));
    }
    if calls.is_empty() && !turn.script.mcp_tasks.any() {
        return Ok(());
    }
    let session_id = turn.run.session_id().to_owned();
    let Some(server) = agent.sessions.mcp_server(&session_id) else {
        transcript
            .mcp_lines
            .push("mcp: no HTTP MCP server was offered".to_owned());
        return Ok(());
    };
    let server = if turn.script.mcp_wrong_token {
        server.with_wrong_token()
    } else {
        server
    };
    for (tool, arguments) in calls {
        let call = crate::mcp_client::call_tool(&server, tool, arguments);
        let line = turn.run.interruptible(call).await?;
        log!("session {session_id}: {line}");
        transcript.mcp_lines.push(line);
    }
    let tasks = turn.script.mcp_tasks.clone();
    for line in turn.run.interruptible(tasks.call(&server)).await? {
        log!("session {session_id}: {line}");
        transcript.mcp_lines.push(line);
    }
    Ok(())
}

/// The id of the first message the prompt quotes (`…, event <hex>:`).
fn first_quoted_event(prompt_text: &str) -> Option<String> {
    let (_, rest) = prompt_text.split_once(", event ")?;
    let id: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    (id.len() == 64).then_some(id)
}

/// What became of a request the agent sent the client.
enum Asked {
    Answered(Result<Value, Value>),
    /// Nobody will answer (the sender was dropped).
    Unanswered,
    /// The agent took it back (`$/cancel_request`) after a round's delay.
    Withdrawn,
}

/// Sends a request to the client and waits for the answer, or for the run
/// to be interrupted (the answer, if it comes later, is then ignored).
/// With `withdraw`, waits one round delay and then takes the request back.
async fn ask_client(
    agent: &Agent,
    turn: &mut Turn,
    method: &str,
    params: Value,
    withdraw: bool,
) -> Result<Asked, Halt> {
    let request_id = agent.ids.request();
    let answer = agent.pending.expect(request_id);
    agent.outbox.request(request_id, method, params).await?;
    let answer = if withdraw {
        let waited = tokio::time::timeout(turn.script.round_delay, answer);
        match turn.run.interruptible(waited).await? {
            Ok(answered) => Ok(answered),
            Err(_) => {
                agent
                    .outbox
                    .notify("$/cancel_request", json!({ "requestId": request_id }))
                    .await?;
                log!(
                    "session {}: {method} request {request_id} withdrawn",
                    turn.run.session_id()
                );
                agent.pending.forget(request_id);
                return Ok(Asked::Withdrawn);
            }
        }
    } else {
        turn.run.interruptible(answer).await
    };
    agent.pending.forget(request_id);
    Ok(answer?.map_or(Asked::Unanswered, Asked::Answered))
}

/// Asks the form question `[elicit=KIND]` names, if the client advertised
/// form elicitation; returns the final message's line about it.
async fn ask_form(agent: &Agent, turn: &mut Turn, kind: ElicitKind) -> Result<String, Halt> {
    if !agent.client_elicits.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok("elicitation: not advertised by the client, not asked".to_owned());
    }
    let params = elicit::request_params(turn.run.session_id(), kind);
    let withdraw = turn.script.withdraw_elicit;
    let line = match ask_client(agent, turn, elicit::METHOD, params, withdraw).await? {
        Asked::Answered(answer) => elicit::answer_line(answer),
        Asked::Unanswered => "elicitation: unanswered".to_owned(),
        Asked::Withdrawn => "elicitation: withdrawn".to_owned(),
    };
    log!("session {}: {line}", turn.run.session_id());
    Ok(line)
}

/// The tool call's title: [`acp::TOOL_TITLE`], and `[title-bytes=N]` of
/// filler after it.
fn tool_title(script: &TurnScript) -> String {
    match script.title_bytes {
        Some(bytes) => format!("{} {}", acp::TOOL_TITLE, crate::filler_text(bytes)),
        None => acp::TOOL_TITLE.to_owned(),
    }
}

/// Asks `session/request_permission` for the tool call.
async fn ask_permission(agent: &Agent, turn: &mut Turn, tool_call_id: &str) -> Result<Verdict, Halt> {
    let tool_call = acp::tool_call(tool_call_id, &tool_title(&turn.script));
    let params = permission::request_params(turn.run.session_id(), tool_call);
    let withdraw = turn.script.withdraw_permission;
    let verdict = match ask_client(agent, turn, permission::METHOD, params, withdraw).await? {
        Asked::Answered(answer) => permission::verdict(answer),
        // Nobody will answer: treat it as cancelled.
        Asked::Unanswered => Verdict::Cancelled,
        Asked::Withdrawn => Verdict::Rejected("withdrawn".to_owned()),
    };
    log!(
        "session {}: permission for {tool_call_id}: {verdict:?}",
        turn.run.session_id()
    );
    Ok(verdict)
}

fn crash_if_due(turn: &Turn, rounds_played: u32) {
    if turn.script.crash_after_rounds == Some(rounds_played) {
        misbehaviour::crash(turn.run.session_id(), rounds_played);
    }
}

/// Final message, run cleared, then the answer: in that order on the wire.
async fn finish(
    agent: &Agent,
    turn: Turn,
    transcript: Transcript,
    cancelled: bool,
) -> Result<(), ClientGone> {
    let session_id = turn.run.session_id();
    let fail = turn.script.fail && !cancelled;
    // Injected steers are answered by this turn, however late they came.
    let mut transcript = transcript;
    for steer in agent.sessions.close_injection(&turn.run) {
        log!(
            "session {session_id}: folded injected steer {} before answering",
            steer.message_id
        );
        transcript.folded_steers.push(steer.text);
    }
    if !cancelled && !fail {
        transcript.reads = turn.script.cat.iter().map(|path| read_file(path)).collect();
        transcript.controls = agent.controls.status_line(session_id);
        if turn.script.say_cwd {
            let cwd = agent.sessions.cwd(session_id).unwrap_or_default();
            transcript.cwd_line = Some(format!("cwd: {cwd}"));
        }
        if let Some(plan) = &turn.script.plan {
            work::send_plan(agent, session_id, Some(plan), plan.len()).await?;
        }
        let message = final_message(&turn.prompt_text, &transcript);
        acp::send_update(&agent.outbox, session_id, update::agent_text(&message)).await?;
        if let Some(bytes) = turn.script.say_bytes {
            say_filler(agent, session_id, bytes).await?;
        }
        if let Some(cost) = turn
            .script
            .session_cost
            .as_deref()
            .and_then(|cost| cost.parse::<f64>().ok())
        {
            acp::send_update(&agent.outbox, session_id, update::usage(cost)).await?;
        }
    }
    let discarded = agent.sessions.clear_run(&turn.run);
    if !turn.script.no_run_id {
        acp::send_update(&agent.outbox, session_id, update::active_run(None)).await?;
    }
    if !discarded.is_empty() {
        log!(
            "session {session_id}: run {} ended with {} queued steer(s) discarded",
            turn.run.run_id(),
            discarded.len()
        );
    }
    let answer = if fail {
        Err(RpcError::internal_error("scripted failure ([fail] directive)"))
    } else {
        let stop_reason = if cancelled {
            "cancelled"
        } else {
            turn.script.stop_reason.as_str()
        };
        let mut answer = json!({ "stopReason": stop_reason });
        if let Some((input, output)) = turn.script.tokens.filter(|_| !cancelled) {
            answer["usage"] = json!({ "inputTokens": input, "outputTokens": output });
        }
        Ok(answer)
    };
    log!(
        "session {session_id}: run {} answered {}",
        turn.run.run_id(),
        match &answer {
            Ok(result) => result["stopReason"].to_string(),
            Err(error) => error.to_string(),
        }
    );
    match turn.request_id {
        Some(request_id) => agent.outbox.reply(request_id, answer).await,
        None => Ok(()),
    }
}

/// Streams `bytes` of filler as more chunks of the final message.
async fn say_filler(agent: &Agent, session_id: &str, bytes: usize) -> Result<(), ClientGone> {
    let filler = crate::filler_text(bytes);
    let mut rest = filler.as_str();
    while !rest.is_empty() {
        let mut end = rest.len().min(FILLER_CHUNK_BYTES);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        acp::send_update(&agent.outbox, session_id, update::agent_text(&rest[..end])).await?;
        rest = &rest[end..];
    }
    Ok(())
}

fn final_message(prompt_text: &str, transcript: &Transcript) -> String {
    let mut message = format!("done: {prompt_text}");
    for steer in &transcript.folded_steers {
        message.push_str("\nsteer: ");
        message.push_str(steer);
    }
    let tool_line = transcript.tool_line.iter();
    let elicit_line = transcript.elicit_line.iter();
    for line in tool_line.chain(&transcript.mcp_lines).chain(elicit_line) {
        message.push('\n');
        message.push_str(line);
    }
    for read in &transcript.reads {
        message.push('\n');
        message.push_str(read);
    }
    for line in transcript.controls.iter().chain(&transcript.cwd_line) {
        message.push('\n');
        message.push_str(line);
    }
    message
}

/// `[cat=PATH]`: the file's text (NUL separators, as in
/// `/proc/<pid>/environ`, shown as spaces), or why it could not be read.
fn read_file(path: &str) -> String {
    match std::fs::read(path) {
        Ok(bytes) => format!(
            "cat {path}: {}",
            String::from_utf8_lossy(&bytes).replace('\0', " ")
        ),
        Err(error) => format!("cat {path}: error: {error}"),
    }
}

/// `[child]`: a helper that runs on after the turn (and after the agent,
/// unless something ends its process group). Its stdio is not the agent's,
/// so it holds no pipe of the client open.
fn start_child(session_id: &str) {
    /// How long the helper sleeps: longer than any test.
    const CHILD_SLEEP_SECONDS: &str = "3600";
    let started = std::process::Command::new("sleep")
        .arg(CHILD_SLEEP_SECONDS)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match started {
        Ok(child) => log!("session {session_id}: started child pid {}", child.id()),
        Err(error) => log!("session {session_id}: could not start a child: {error}"),
    }
}

/// `[detached-child=MARK]`: a helper in a session (and so a process group)
/// of its own, whose parent has exited: out of reach of any kill of the
/// agent's group, as a tool that daemonizes is. A shell runs `setsid` in
/// a background job and exits at once; the helper, a shell waiting on a
/// `sleep`, has MARK as its `$0` (the end of its command line).
fn start_detached_child(session_id: &str, mark: &str) {
    /// How long the helper sleeps: longer than any test.
    const CHILD_SLEEP_SECONDS: &str = "3600";
    let script = format!("setsid sh -c 'sleep {CHILD_SLEEP_SECONDS}; :' {mark} &");
    let started = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match started {
        Ok(status) => log!("session {session_id}: started a detached child {mark} ({status})"),
        Err(error) => log!("session {session_id}: could not start a detached child: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_quoted_event_is_the_mention() {
        let id = "ab".repeat(32);
        let prompt = format!("[acp-bridge] Message from npub1x (the owner), event {id}:\n> hi");
        assert_eq!(first_quoted_event(&prompt), Some(id));
        assert_eq!(first_quoted_event("no event here"), None);
        assert_eq!(first_quoted_event("x, event abc:"), None, "a short id is no id");
    }

    #[test]
    fn final_message_lists_steers_then_the_tool() {
        let transcript = Transcript {
            folded_steers: vec!["one".into(), "two".into()],
            tool_line: Some("tool: allowed (allow_once)".into()),
            mcp_lines: vec!["mcp post_message: ok: posted".into()],
            elicit_line: Some("elicitation: decline".into()),
            reads: vec!["cat /x: error: denied".into()],
            controls: Some("model: fast, mode: ask".into()),
            cwd_line: Some("cwd: /w".into()),
        };
        assert_eq!(
            final_message("hi", &transcript),
            "done: hi\nsteer: one\nsteer: two\ntool: allowed (allow_once)\nmcp post_message: ok: posted\nelicitation: decline\ncat /x: error: denied\nmodel: fast, mode: ask\ncwd: /w"
        );
        assert_eq!(final_message("hi", &Transcript::default()), "done: hi");
    }
}
