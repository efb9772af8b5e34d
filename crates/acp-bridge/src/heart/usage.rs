//! What a turn cost, as the agent reported it: tokens per prompt (the
//! prompt answer's `usage`), and the session's context use and cost so far
//! (`usage_update`). Recorded in the turn's closing log line, in metrics,
//! and per conversation in the state dir for `!status`.

use acp_bridge_core::mention::ConversationKey;
use acp_bridge_core::turn::TurnUsage;
use acp_client::TurnOutcome;
use serde_json::Value;

use crate::state::store::{SessionUsage, Sessions};
use crate::telemetry::metrics;

/// The token kinds of ACP's prompt `usage`, and their metric labels.
const TOKEN_KINDS: [(&str, &str); 5] = [
    ("inputTokens", "input"),
    ("outputTokens", "output"),
    ("thoughtTokens", "thought"),
    ("cachedReadTokens", "cached_read"),
    ("cachedWriteTokens", "cached_write"),
];

/// Reads a prompt's usage, records it (metrics, the conversation's row) and
/// returns it for the turn's log line.
pub(crate) fn record(
    sessions: &Sessions,
    conversation: &ConversationKey,
    outcome: &TurnOutcome,
) -> TurnUsage {
    let answered = outcome.result.get("usage");
    let tokens = |key: &str| answered.and_then(|usage| usage.get(key)).and_then(Value::as_u64);
    for (key, kind) in TOKEN_KINDS {
        if let Some(count) = tokens(key) {
            metrics::agent_tokens(kind, count);
        }
    }
    let reported = outcome.usage.clone().unwrap_or_default();
    let mut usage = TurnUsage {
        input_tokens: tokens("inputTokens"),
        output_tokens: tokens("outputTokens"),
        context_used: reported.used,
        context_size: reported.size,
        cost: reported.cost.as_ref().map(|cost| cost.amount),
        currency: reported.cost.map(|cost| cost.currency),
        cost_added: None,
    };
    if outcome.usage.is_some() {
        usage.cost_added = keep(sessions, conversation, &usage);
    }
    usage
}

/// Keeps the session's usage, and returns the cost it added since the
/// last report (the agent reports the session's total).
fn keep(sessions: &Sessions, conversation: &ConversationKey, usage: &TurnUsage) -> Option<f64> {
    let before = sessions.usage(conversation).ok().flatten();
    let mut added = None;
    if let (Some(cost), Some(currency)) = (usage.cost, &usage.currency) {
        let earlier = before
            .as_ref()
            .filter(|before| before.currency.as_ref() == Some(currency))
            .and_then(|before| before.cost)
            .unwrap_or(0.0);
        if cost > earlier {
            metrics::agent_cost(currency, cost - earlier);
            added = Some(cost - earlier);
        }
    }
    let row = SessionUsage {
        used_tokens: usage.context_used,
        size_tokens: usage.context_size,
        cost: usage.cost,
        currency: usage.currency.clone(),
    };
    if let Err(error) = sessions.record_usage(conversation, &row) {
        tracing::debug!(%conversation, %error, "cannot keep the session's usage");
    }
    added
}

/// `!status`'s words for a conversation's session usage.
pub(crate) fn describe(usage: &SessionUsage) -> Option<String> {
    let context = match (usage.used_tokens, usage.size_tokens) {
        (Some(used), Some(size)) => Some(format!("context {used}/{size} tokens")),
        (Some(used), None) => Some(format!("context {used} tokens")),
        _ => None,
    };
    let cost = usage
        .cost
        .map(|cost| format!("cost {cost:.4} {}", usage.currency.as_deref().unwrap_or("USD")));
    let parts: Vec<String> = context.into_iter().chain(cost).collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}
