//! The daemon's metrics, named in one place.
//!
//! Recorded through the `metrics` facade: with no exporter installed every
//! call is a no-op, so the pipeline records unconditionally and
//! `--metrics-addr` decides whether anyone reads them.
//!
//! Every counter, with each label value it can take, is registered at 0
//! when the exporter starts ([`register_counters_at_zero`]): a series that
//! appears only at its first event makes an alert on its rate see "no
//! data" rather than 0. A labelled counter recorded with a value its list
//! lacks trips a debug assertion (the tests run debug builds): list it.

use metrics::{counter, gauge, histogram};

const PARKED_EVENTS: &str = "acp_bridge_parked_events";
const PARKED_EVENT_BYTES: &str = "acp_bridge_parked_event_bytes";
const QUEUE_DEPTH: &str = "acp_bridge_queue_depth";
const AGENTS_ALIVE: &str = "acp_bridge_agents_alive";
const SESSIONS_LIVE: &str = "acp_bridge_sessions_live";
const SESSIONS_CLOSED: &str = "acp_bridge_sessions_closed_total";
const EVENTS_RECEIVED: &str = "acp_bridge_events_received_total";
const EVENTS_ACCEPTED: &str = "acp_bridge_events_accepted_total";
const EVENTS_DROPPED: &str = "acp_bridge_events_dropped_total";
const TURNS: &str = "acp_bridge_turns_total";
const STEERS: &str = "acp_bridge_steers_total";
const AGENT_RESPAWNS: &str = "acp_bridge_agent_respawns_total";
const REPLIES_TRUNCATED: &str = "acp_bridge_replies_truncated_total";
const REPLIES_FAILED: &str = "acp_bridge_replies_failed_total";
const READER_RELAY_DELIVERIES: &str = "acp_bridge_reader_relay_deliveries_total";
const RELAY_LIST_LOOKUPS: &str = "acp_bridge_relay_list_lookups_total";
const REACTIONS_DROPPED: &str = "acp_bridge_reactions_dropped_total";
const WAIT_NOTICES: &str = "acp_bridge_wait_notices_total";
const WAIT_NOTICES_WITHHELD: &str = "acp_bridge_wait_notices_withheld_total";
const THREAD_CONTEXT: &str = "acp_bridge_thread_context_total";
const AGENT_TOKENS: &str = "acp_bridge_agent_tokens_total";
const METRICS_CONNECTIONS_REFUSED: &str = "acp_bridge_metrics_connections_refused_total";
const AGENT_UPDATES_DROPPED: &str = "acp_bridge_agent_updates_dropped_total";
const GROUP_REQUESTS: &str = "acp_bridge_group_requests_total";
const SIGNER_REQUESTS_FAILED: &str = "acp_bridge_signer_requests_failed_total";
const MCP_TOOL_CALLS: &str = "acp_bridge_mcp_tool_calls_total";
const MCP_UNAUTHORIZED: &str = "acp_bridge_mcp_unauthorized_total";
const PROMPT_IMAGES: &str = "acp_bridge_prompt_images_total";
const BLOSSOM_UPLOADS: &str = "acp_bridge_blossom_uploads_total";
const BLOSSOM_UPLOAD_BYTES: &str = "acp_bridge_blossom_upload_bytes_total";
const DELEGATED_TASKS: &str = "acp_bridge_delegated_tasks_total";
const SCHEDULE_RUNS: &str = "acp_bridge_schedule_runs_total";
const PROMPT_AUDIO: &str = "acp_bridge_prompt_audio_total";
const BUDGET_REFUSALS: &str = "acp_bridge_budget_refusals_total";
const BUDGET_WARNINGS: &str = "acp_bridge_budget_warnings_total";
const BUDGET_TURNS_CAPPED: &str = "acp_bridge_budget_turns_capped_total";
const BUDGET_SPEND: &str = "acp_bridge_budget_spend_total";
const BUDGET_BOT_SPENT: &str = "acp_bridge_budget_bot_spent";
const BUDGET_BOT_LIMIT: &str = "acp_bridge_budget_bot_limit";

/// `events_dropped{reason}`: the intake's `DropReason` labels (the gate's
/// refusals among them), and the relay tap's (`too_large`, `expired`).
const DROP_REASONS: &[&str] = &[
    "own_event",
    "too_large",
    "expired",
    "not_a_mention",
    "duplicate",
    "too_old",
    "from_the_future",
    "malformed",
    "undecryptable",
    "bad_signature",
    "nobody_heard",
    "not_heard",
    "dm_from_stranger",
    "loop_bound",
    "rate_limited",
    "overloaded",
    "awaiting_profile",
    "lookups_busy",
    "not_journaled",
    "other_shard",
    "unserved_group",
    "answered_before_start",
    "awaiting_catch_up",
];
/// `budget_refusals{scope}`: the budget's scopes (`budget::Scope`).
const BUDGET_SCOPES: &[&str] = &["bot", "author", "stranger", "conversation"];
/// `budget_spend{unit}`: the units counted without a currency (cost is
/// `agent_cost_total{currency}`).
const BUDGET_UNITS: &[&str] = &["turns", "tokens"];
const TURN_OUTCOMES: &[&str] = &[
    "answered",
    "notified",
    "failed",
    "cancelled_by_owner",
    "capped",
    "abandoned",
];
/// `sessions_closed{reason}`: why a live session was closed while its
/// conversation kept it (`--session-idle`, `--max-live-sessions`).
const SESSION_CLOSE_REASONS: &[&str] = &["idle", "lru"];
const STEER_PATHS: &[&str] = &["native", "fallback", "refused"];
const REPLY_FAILURES: &[&str] = &[
    "blocked",
    "invalid",
    "pow",
    "restricted",
    "unsupported",
    "malformed",
];
const DELIVERY_OUTCOMES: &[&str] = &["accepted", "refused", "failed"];
const LOOKUP_RESULTS: &[&str] = &["found", "none", "failed"];
/// The heart's `Holdup` labels.
const HOLDUPS: &[&str] = &[
    "capacity",
    "turn_in_flight",
    "backing_off",
    "agent_starting",
    "live_sessions_busy",
    "agent_slots_busy",
];
const CONTEXT_RESULTS: &[&str] = &["included", "nothing_new", "failed"];
/// `prompt_images{outcome}` and `prompt_audio{outcome}`: `shown`, or
/// media's `Refusal` labels.
const IMAGE_OUTCOMES: &[&str] = &[
    "shown",
    "agent_takes_none",
    "too_many",
    "too_large",
    "scheme",
    "private_address",
    "type",
    "hash",
    "failed",
];
const TOKEN_KINDS: &[&str] = &["input", "output", "thought", "cached_read", "cached_write"];
/// acp-client's `DroppedUpdate` labels.
const UPDATE_DROPS: &[&str] = &[
    "unknown_session",
    "backlog_full",
    "turn_events_full",
    "question_overflow",
];
/// `blossom_uploads{outcome}`: `ok`, or send_file's `BlossomError` labels.
const BLOSSOM_OUTCOMES: &[&str] = &["ok", "sign", "timeout", "refused", "failed", "bad_descriptor"];
/// The bridge's own MCP tools (`mcp/tools.rs`) and how a call ended.
const MCP_TOOLS: &[&str] = &[
    "post_message",
    "react",
    "send_file",
    "delegate",
    "task_status",
    "task_stop",
    "read_thread",
];
/// How delegated tasks (`heart/tasks`) ended.
const TASK_OUTCOMES: &[&str] = &["done", "failed", "stopped", "capped"];
/// A schedule's fire time: run, run late (the start-up catch-up), or
/// skipped (its previous run still waits or runs, or it could not be
/// journaled).
const SCHEDULE_OUTCOMES: &[&str] = &["fired", "caught_up", "skipped"];
const MCP_CALL_OUTCOMES: &[&str] = &["ok", "refused"];
/// `group_requests{request, outcome}`: the outcomes each request can have.
const GROUP_REQUEST_OUTCOMES: &[(&str, &[&str])] = &[
    ("join", &["accepted", "member", "pending", "refused", "unsent"]),
    ("leave", &["accepted", "refused", "unsent"]),
];

/// Registers every counter at 0, each labelled one with every label value
/// it can take, and the gauges of what is waiting or alive at 0, so that
/// /metrics shows them before their first event. Called once the exporter
/// is installed, before anything runs (so the zeros are true).
/// `agent_cost_total` is left out: its currency is known only when an
/// agent reports one.
pub(crate) fn register_at_zero() {
    for name in [PARKED_EVENTS, PARKED_EVENT_BYTES, QUEUE_DEPTH] {
        gauge!(name).set(0.0);
    }
    for name in [
        EVENTS_RECEIVED,
        EVENTS_ACCEPTED,
        REPLIES_TRUNCATED,
        REACTIONS_DROPPED,
        METRICS_CONNECTIONS_REFUSED,
        SIGNER_REQUESTS_FAILED,
        MCP_UNAUTHORIZED,
        BLOSSOM_UPLOAD_BYTES,
        BUDGET_TURNS_CAPPED,
    ] {
        counter!(name).increment(0);
    }
    let labelled: [(&'static str, &'static str, &[&'static str]); 20] = [
        (SESSIONS_CLOSED, "reason", SESSION_CLOSE_REASONS),
        (EVENTS_DROPPED, "reason", DROP_REASONS),
        (TURNS, "outcome", TURN_OUTCOMES),
        (STEERS, "path", STEER_PATHS),
        (REPLIES_FAILED, "reason", REPLY_FAILURES),
        (READER_RELAY_DELIVERIES, "outcome", DELIVERY_OUTCOMES),
        (RELAY_LIST_LOOKUPS, "result", LOOKUP_RESULTS),
        (WAIT_NOTICES, "reason", HOLDUPS),
        (WAIT_NOTICES_WITHHELD, "reason", HOLDUPS),
        (THREAD_CONTEXT, "result", CONTEXT_RESULTS),
        (AGENT_TOKENS, "kind", TOKEN_KINDS),
        (AGENT_UPDATES_DROPPED, "reason", UPDATE_DROPS),
        (PROMPT_IMAGES, "outcome", IMAGE_OUTCOMES),
        (BLOSSOM_UPLOADS, "outcome", BLOSSOM_OUTCOMES),
        (DELEGATED_TASKS, "outcome", TASK_OUTCOMES),
        (SCHEDULE_RUNS, "outcome", SCHEDULE_OUTCOMES),
        (PROMPT_AUDIO, "outcome", IMAGE_OUTCOMES),
        (BUDGET_REFUSALS, "scope", BUDGET_SCOPES),
        (BUDGET_WARNINGS, "scope", BUDGET_SCOPES),
        (BUDGET_SPEND, "unit", BUDGET_UNITS),
    ];
    for (name, label, values) in labelled {
        for &value in values {
            counter!(name, label => value).increment(0);
        }
    }
    for &(request, outcomes) in GROUP_REQUEST_OUTCOMES {
        for &outcome in outcomes {
            counter!(GROUP_REQUESTS, "request" => request, "outcome" => outcome).increment(0);
        }
    }
    for &tool in MCP_TOOLS {
        for &outcome in MCP_CALL_OUTCOMES {
            counter!(MCP_TOOL_CALLS, "tool" => tool, "outcome" => outcome).increment(0);
        }
    }
}

/// The agents' series of each agent profile (`profile` label: the
/// configured names, so their number is bounded) at 0.
pub(crate) fn register_profiles_at_zero<'a>(profiles: impl IntoIterator<Item = &'a str>) {
    for profile in profiles {
        gauge!(AGENTS_ALIVE, "profile" => profile.to_owned()).set(0.0);
        gauge!(SESSIONS_LIVE, "profile" => profile.to_owned()).set(0.0);
        counter!(AGENT_RESPAWNS, "profile" => profile.to_owned()).increment(0);
    }
}

/// `value`, checked (in debug builds) against the label values registered
/// at 0 for its counter.
fn listed(values: &[&str], value: &'static str) -> &'static str {
    debug_assert!(
        values.contains(&value),
        "metric label value `{value}` is not registered at 0: add it to its list in telemetry/metrics.rs"
    );
    value
}

pub(crate) fn event_received() {
    counter!(EVENTS_RECEIVED).increment(1);
}

pub(crate) fn event_accepted() {
    counter!(EVENTS_ACCEPTED).increment(1);
}

pub(crate) fn event_dropped(reason: &'static str) {
    counter!(EVENTS_DROPPED, "reason" => listed(DROP_REASONS, reason)).increment(1);
}

pub(crate) fn turn_finished(outcome: &'static str) {
    counter!(TURNS, "outcome" => listed(TURN_OUTCOMES, outcome)).increment(1);
}

/// A mention given up before its turn: a budget of `scope` was spent.
pub(crate) fn budget_refused(scope: &'static str) {
    counter!(BUDGET_REFUSALS, "scope" => listed(BUDGET_SCOPES, scope)).increment(1);
}

/// Spend counted against the budgets, in `unit` (`turns`, `tokens`).
pub(crate) fn budget_spend(unit: &'static str, amount: u64) {
    counter!(BUDGET_SPEND, "unit" => listed(BUDGET_UNITS, unit)).increment(amount);
}

/// The whole bot's spend in `period` (`day`, `month`) of a limit's
/// `unit` (`turns`, `tokens` or a currency of a configured limit: bounded
/// by the configuration), beside that limit.
pub(crate) fn budget_bot(period: &'static str, unit: &str, spent: f64, limit: f64) {
    let labels = [("period", period.to_owned()), ("unit", unit.to_owned())];
    gauge!(BUDGET_BOT_SPENT, &labels).set(spent);
    gauge!(BUDGET_BOT_LIMIT, &labels).set(limit);
}

/// A scope warned that its spend neared a limit (`--budget-warn-at`).
/// A turn cancelled at `--budget-turn-cap`.
pub(crate) fn budget_turn_capped() {
    counter!(BUDGET_TURNS_CAPPED).increment(1);
}

pub(crate) fn budget_warned(scope: &'static str) {
    counter!(BUDGET_WARNINGS, "scope" => listed(BUDGET_SCOPES, scope)).increment(1);
}

pub(crate) fn steer(path: &'static str) {
    counter!(STEERS, "path" => listed(STEER_PATHS, path)).increment(1);
}

/// Events waiting in memory for their author's profile lookup, and the
/// bytes they hold (bounded by `--max-parked-bytes`).
pub(crate) fn parked_events(events: usize, bytes: usize) {
    gauge!(PARKED_EVENTS).set(events as f64);
    gauge!(PARKED_EVENT_BYTES).set(bytes as f64);
}

pub(crate) fn queue_depth(depth: usize) {
    gauge!(QUEUE_DEPTH).set(depth as f64);
}

/// Agent processes of `profile` initialized and not yet exited.
pub(crate) fn agents_alive(profile: &str, alive: usize) {
    gauge!(AGENTS_ALIVE, "profile" => profile.to_owned()).set(alive as f64);
}

/// Sessions of `profile` live on its agents now.
pub(crate) fn sessions_live(profile: &str, live: usize) {
    gauge!(SESSIONS_LIVE, "profile" => profile.to_owned()).set(live as f64);
}

/// A live session closed while its conversation kept it, for `reason`
/// (`idle`, `lru`).
pub(crate) fn session_closed(reason: &'static str) {
    counter!(SESSIONS_CLOSED, "reason" => listed(SESSION_CLOSE_REASONS, reason)).increment(1);
}

/// An agent of `profile` found exited at a lease, and replaced.
pub(crate) fn agent_respawned(profile: &str) {
    counter!(AGENT_RESPAWNS, "profile" => profile.to_owned()).increment(1);
}

/// An answer cut at `--max-reply-bytes`.
pub(crate) fn reply_truncated() {
    counter!(REPLIES_TRUNCATED).increment(1);
}

/// An answer published as a series of `parts` events.
pub(crate) fn reply_parts(parts: usize) {
    histogram!("acp_bridge_reply_parts").record(parts as f64);
}

/// A reply or notice a relay refused for good, by NIP-01 prefix (`blocked`,
/// `invalid`, `pow`, `restricted`, `unsupported`; `malformed` for an
/// outbox entry that is not an event).
pub(crate) fn reply_failed(reason: &'static str) {
    counter!(REPLIES_FAILED, "reason" => listed(REPLY_FAILURES, reason)).increment(1);
}

/// A reply's best-effort copy to a reader's relay (NIP-65 read relays):
/// `accepted`, `refused` (for good) or `failed` (given up for this attempt).
pub(crate) fn reader_relay_delivery(outcome: &'static str) {
    counter!(READER_RELAY_DELIVERIES, "outcome" => listed(DELIVERY_OUTCOMES, outcome)).increment(1);
}

/// A lookup of someone's relay lists on the bot's relays: `found` (some
/// list), `none` (they list nothing there) or `failed`.
pub(crate) fn relay_list_lookup(result: &'static str) {
    counter!(RELAY_LIST_LOOKUPS, "result" => listed(LOOKUP_RESULTS, result)).increment(1);
}

/// A reaction dropped unsent because too many were waiting.
pub(crate) fn reaction_dropped() {
    counter!(REACTIONS_DROPPED).increment(1);
}

/// A waiting mention was told why it waits (`reason`: the holdup's label),
/// or, with `sent` false, was not because the notice budget was spent.
pub(crate) fn wait_notice(reason: &'static str, sent: bool) {
    let name = if sent { WAIT_NOTICES } else { WAIT_NOTICES_WITHHELD };
    counter!(name, "reason" => listed(HOLDUPS, reason)).increment(1);
}

/// A turn's thread context fetch ended: `included` (earlier messages went
/// into the prompt), `nothing_new`, or `failed` (the relay did not answer
/// in time; the turn went on without).
pub(crate) fn thread_context(result: &'static str) {
    counter!(THREAD_CONTEXT, "result" => listed(CONTEXT_RESULTS, result)).increment(1);
}

/// An image a prompt's mention carried: shown to the agent, or given as
/// its URL (`outcome` says why).
pub(crate) fn prompt_image(outcome: &'static str) {
    counter!(PROMPT_IMAGES, "outcome" => listed(IMAGE_OUTCOMES, outcome)).increment(1);
}

/// An audio clip a prompt's mention carried: shown to the agent, or given
/// as its URL (`outcome` says why).
pub(crate) fn prompt_audio(outcome: &'static str) {
    counter!(PROMPT_AUDIO, "outcome" => listed(IMAGE_OUTCOMES, outcome)).increment(1);
}

pub(crate) fn mention_to_reply(seconds: f64) {
    histogram!("acp_bridge_mention_to_reply_seconds").record(seconds);
}

/// Tokens the agent reported spending on a prompt, by `kind` (`input`,
/// `output`, `thought`, `cached_read`, `cached_write`).
pub(crate) fn agent_tokens(kind: &'static str, tokens: u64) {
    counter!(AGENT_TOKENS, "kind" => listed(TOKEN_KINDS, kind)).increment(tokens);
}

/// What the agent reported its sessions cost since the last report, in
/// `currency` (a gauge that only grows: costs are fractional).
pub(crate) fn agent_cost(currency: &str, amount: f64) {
    gauge!("acp_bridge_agent_cost_total", "currency" => currency.to_owned()).increment(amount);
}

/// A connection to `--metrics-addr` closed at once: the endpoint already
/// served its cap of connections.
pub(crate) fn metrics_connection_refused() {
    counter!(METRICS_CONNECTIONS_REFUSED).increment(1);
}

/// An agent's update the ACP client dropped at one of its bounds, by
/// `reason`: `unknown_session` (a session the bridge never opened),
/// `backlog_full` (outside a turn), `turn_events_full` (a turn's unread
/// events), `question_overflow` (a question answered cancelled unseen).
pub(crate) fn agent_update_dropped(reason: &'static str) {
    counter!(AGENT_UPDATES_DROPPED, "reason" => listed(UPDATE_DROPS, reason)).increment(1);
}

/// A NIP-29 membership request the bot sent at start, by `request`
/// (`join`, `leave`) and the relay's `outcome` (`accepted`, `member`,
/// `pending`, `refused`, `unsent`).
pub(crate) fn group_request(request: &'static str, outcome: &'static str) {
    let outcomes = GROUP_REQUEST_OUTCOMES
        .iter()
        .find(|(listed_request, _)| *listed_request == request)
        .map_or(&[][..], |(_, outcomes)| *outcomes);
    counter!(GROUP_REQUESTS, "request" => request, "outcome" => listed(outcomes, outcome)).increment(1);
}

/// 1 while the remote signer (NIP-46) answers, 0 while it does not.
pub(crate) fn signer_up(up: bool) {
    gauge!("acp_bridge_signer_up").set(if up { 1.0 } else { 0.0 });
}

/// A request to the remote signer that went unanswered (it is tried again).
pub(crate) fn signer_request_failed() {
    counter!(SIGNER_REQUESTS_FAILED).increment(1);
}

/// A call of one of the bridge's MCP tools, by `tool` and `outcome`
/// (`ok`, or `refused`: the model was told why).
pub(crate) fn mcp_tool_call(tool: &'static str, outcome: &'static str) {
    counter!(MCP_TOOL_CALLS, "tool" => listed(MCP_TOOLS, tool), "outcome" => listed(MCP_CALL_OUTCOMES, outcome))
        .increment(1);
}

/// One upload of a file `send_file` sends to one Blossom server, by
/// `outcome`; `bytes` is the blob's size when it was stored.
pub(crate) fn blossom_upload(outcome: &'static str, bytes: usize) {
    counter!(BLOSSOM_UPLOADS, "outcome" => listed(BLOSSOM_OUTCOMES, outcome)).increment(1);
    counter!(BLOSSOM_UPLOAD_BYTES).increment(bytes as u64);
}

/// A schedule's fire time came (`fired`, `caught_up`, `skipped`).
pub(crate) fn schedule_run(outcome: &'static str) {
    counter!(SCHEDULE_RUNS, "outcome" => listed(SCHEDULE_OUTCOMES, outcome)).increment(1);
}

/// A delegated task ended (`done`, `failed`, `stopped`).
pub(crate) fn delegated_task(outcome: &'static str) {
    counter!(DELEGATED_TASKS, "outcome" => listed(TASK_OUTCOMES, outcome)).increment(1);
}

/// A request to the MCP server without a live token, refused with 401.
pub(crate) fn mcp_unauthorized() {
    counter!(MCP_UNAUTHORIZED).increment(1);
}
