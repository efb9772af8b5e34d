//! The daemon's metrics, named in one place.
//!
//! Recorded through the `metrics` facade: with no exporter installed every
//! call is a no-op, so the pipeline records unconditionally and
//! `--metrics-addr` decides whether anyone reads them.

use metrics::{counter, gauge, histogram};

pub(crate) fn event_received() {
    counter!("acp_bridge_events_received_total").increment(1);
}

pub(crate) fn event_accepted() {
    counter!("acp_bridge_events_accepted_total").increment(1);
}

pub(crate) fn event_dropped(reason: &'static str) {
    counter!("acp_bridge_events_dropped_total", "reason" => reason).increment(1);
}

pub(crate) fn turn_finished(outcome: &'static str) {
    counter!("acp_bridge_turns_total", "outcome" => outcome).increment(1);
}

pub(crate) fn steer(path: &'static str) {
    counter!("acp_bridge_steers_total", "path" => path).increment(1);
}

/// Events waiting in memory for their author's profile lookup, and the
/// bytes they hold (bounded by `--max-parked-bytes`).
pub(crate) fn parked_events(events: usize, bytes: usize) {
    gauge!("acp_bridge_parked_events").set(events as f64);
    gauge!("acp_bridge_parked_event_bytes").set(bytes as f64);
}

pub(crate) fn queue_depth(depth: usize) {
    gauge!("acp_bridge_queue_depth").set(depth as f64);
}

pub(crate) fn agents_alive(alive: usize) {
    gauge!("acp_bridge_agents_alive").set(alive as f64);
}

pub(crate) fn agent_respawned() {
    counter!("acp_bridge_agent_respawns_total").increment(1);
}

/// An answer cut at `--max-reply-bytes`.
pub(crate) fn reply_truncated() {
    counter!("acp_bridge_replies_truncated_total").increment(1);
}

/// An answer published as a series of `parts` events.
pub(crate) fn reply_parts(parts: usize) {
    histogram!("acp_bridge_reply_parts").record(parts as f64);
}

/// A reply or notice a relay refused for good, by NIP-01 prefix (`blocked`,
/// `invalid`, `pow`, `restricted`, `unsupported`; `malformed` for an
/// outbox entry that is not an event).
pub(crate) fn reply_failed(reason: &'static str) {
    counter!("acp_bridge_replies_failed_total", "reason" => reason).increment(1);
}

/// A reply's best-effort copy to a reader's relay (NIP-65 read relays):
/// `accepted`, `refused` (for good) or `failed` (given up for this attempt).
pub(crate) fn reader_relay_delivery(outcome: &'static str) {
    counter!("acp_bridge_reader_relay_deliveries_total", "outcome" => outcome).increment(1);
}

/// A lookup of someone's relay lists on the bot's relays: `found` (some
/// list), `none` (they list nothing there) or `failed`.
pub(crate) fn relay_list_lookup(result: &'static str) {
    counter!("acp_bridge_relay_list_lookups_total", "result" => result).increment(1);
}

/// A reaction dropped unsent because too many were waiting.
pub(crate) fn reaction_dropped() {
    counter!("acp_bridge_reactions_dropped_total").increment(1);
}

/// A waiting mention was told why it waits (`reason`: the holdup's label),
/// or, with `sent` false, was not because the notice budget was spent.
pub(crate) fn wait_notice(reason: &'static str, sent: bool) {
    let name = if sent {
        "acp_bridge_wait_notices_total"
    } else {
        "acp_bridge_wait_notices_withheld_total"
    };
    counter!(name, "reason" => reason).increment(1);
}

/// A turn's thread context fetch ended: `included` (earlier messages went
/// into the prompt), `nothing_new`, or `failed` (the relay did not answer
/// in time; the turn went on without).
pub(crate) fn thread_context(result: &'static str) {
    counter!("acp_bridge_thread_context_total", "result" => result).increment(1);
}

pub(crate) fn mention_to_reply(seconds: f64) {
    histogram!("acp_bridge_mention_to_reply_seconds").record(seconds);
}

/// Tokens the agent reported spending on a prompt, by `kind` (`input`,
/// `output`, `thought`, `cached_read`, `cached_write`).
pub(crate) fn agent_tokens(kind: &'static str, tokens: u64) {
    counter!("acp_bridge_agent_tokens_total", "kind" => kind).increment(tokens);
}

/// What the agent reported its sessions cost since the last report, in
/// `currency` (a gauge that only grows: costs are fractional).
pub(crate) fn agent_cost(currency: &str, amount: f64) {
    gauge!("acp_bridge_agent_cost_total", "currency" => currency.to_owned()).increment(amount);
}

/// A connection to `--metrics-addr` closed at once: the endpoint already
/// served its cap of connections.
pub(crate) fn metrics_connection_refused() {
    counter!("acp_bridge_metrics_connections_refused_total").increment(1);
}

/// An agent's update the ACP client dropped at one of its bounds, by
/// `reason`: `unknown_session` (a session the bridge never opened),
/// `backlog_full` (outside a turn), `turn_events_full` (a turn's unread
/// events), `question_overflow` (a question answered cancelled unseen).
pub(crate) fn agent_update_dropped(reason: &'static str) {
    counter!("acp_bridge_agent_updates_dropped_total", "reason" => reason).increment(1);
}

/// A NIP-29 membership request the bot sent at start, by `request`
/// (`join`, `leave`) and the relay's `outcome` (`accepted`, `member`,
/// `pending`, `refused`, `unsent`).
pub(crate) fn group_request(request: &'static str, outcome: &'static str) {
    counter!("acp_bridge_group_requests_total", "request" => request, "outcome" => outcome).increment(1);
}

/// 1 while the remote signer (NIP-46) answers, 0 while it does not.
pub(crate) fn signer_up(up: bool) {
    gauge!("acp_bridge_signer_up").set(if up { 1.0 } else { 0.0 });
}

/// A request to the remote signer that went unanswered (it is tried again).
pub(crate) fn signer_request_failed() {
    counter!("acp_bridge_signer_requests_failed_total").increment(1);
}
