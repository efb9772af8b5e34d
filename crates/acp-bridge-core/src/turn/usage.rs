//! What a turn cost, as the agent reported it, summed over the turn's
//! prompts. Reading it off a prompt's answer, and recording it (metrics,
//! the conversation's row), is the daemon's (`heart::usage`).

/// A turn's usage: tokens summed over its prompts, context and cost as last
/// reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnUsage {
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
    pub fn spent(&self) -> (u64, Option<(f64, String)>) {
        let tokens = self.input_tokens.unwrap_or(0) + self.output_tokens.unwrap_or(0);
        (tokens, self.cost_added.zip(self.currency.clone()))
    }

    /// Adds a later prompt of the same turn.
    pub fn add(&mut self, later: TurnUsage) {
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
