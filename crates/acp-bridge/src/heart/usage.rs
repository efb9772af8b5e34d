//! What a turn cost, as the agent reported it: tokens per prompt (the
//! prompt answer's `usage`), and the session's context use and cost so far
//! (`usage_update`). Recorded in the turn's closing log line, in metrics,
//! and per conversation in the state dir for `!status`.

use acp_bridge_core::mention::ConversationKey;
use acp_client::TurnOutcome;
use serde_json::Value;

use crate::store::{SessionUsage, Sessions};
use crate::telemetry::metrics;

/// The token kinds of ACP's prompt `usage`, and their metric labels.
const TOKEN_KINDS: [(&str, &str); 5] = [
    ("inputTokens", "input"),
    ("outputTokens", "output"),
    ("thoughtTokens", "thought"),
    ("cachedReadTokens", "cached_read"),
    ("cachedWriteTokens", "cached_write"),
];

/// A turn's usage: tokens summed over its prompts, context and cost as last
/// reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TurnUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub context_used: Option<u64>,
    pub context_size: Option<u64>,
    pub cost: Option<f64>,
    pub currency: Option<String>,
    /// What the session's cost grew by since its last report, in
    /// `currency`: what this turn spent (the budget counts it).
    pub cost_added: Option<f64>,
}

impl TurnUsage {
    /// What the prompt spent, as budgets count it: its tokens (input plus
    /// output) and the cost it added to its session, with the currency.
    pub(crate) fn spent(&self) -> (u64, Option<(f64, String)>) {
        let tokens = self.input_tokens.unwrap_or(0) + self.output_tokens.unwrap_or(0);
        (tokens, self.cost_added.zip(self.currency.clone()))
    }

    /// Adds a later prompt of the same turn.
    pub(super) fn add(&mut self, later: TurnUsage) {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.input_tokens = sum(self.input_tokens, later.input_tokens);
        self.output_tokens = sum(self.output_tokens, later.output_tokens);
        self.context_used = later.context_used.or(self.context_used);
        self.context_size = later.context_size.or(self.context_size);
        self.cost = later.cost.or(self.cost);
        self.currency = later.currency.or(self.currency.take());
        self.cost_added = match (self.cost_added, later.cost_added) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

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
