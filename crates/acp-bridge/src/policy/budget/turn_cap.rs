//! The per-turn cap (`--budget-turn-cap`): what one turn may spend before
//! it is cancelled. The budgets' limits are checked before a turn starts;
//! this one is the only check in the middle of a turn, so a runaway turn
//! (an agent that keeps calling tools, a prompt that keeps growing) stops
//! at a known cost instead of at the day's limit.
//!
//! A turn's spend is what it added: the tokens of each prompt answered (the
//! answer's `usage`) and the cost its session's `usage_update`s grew by
//! since the turn started, read live as the updates arrive (the agent
//! reports the session's total, so the session's cost before the turn is
//! the baseline). A turn's delegated tasks spend on its account: their
//! sessions are fresh, so what each reports is what it added, and the cap
//! covers the turn and its tasks together ([`SharedSpend`]). Pure: the
//! driver and the tasks feed it reports and ask it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use acp_bridge_core::budget::amount::{Amount, Unit};
use acp_bridge_core::budget::limit::{Spent, reached};

/// Why a cap of turns is refused: every turn is one turn.
pub(crate) const TURNS_REFUSED: &str =
    "a per-turn cap counts tokens or a currency (\"200k tokens\", \"1 USD\"), not turns";

/// `--budget-turn-cap`'s parser: an amount, not of turns.
pub(crate) fn per_turn_amount(text: &str) -> Result<Amount, String> {
    let amount: Amount = text.parse().map_err(|error| format!("{error}"))?;
    match amount.unit {
        Unit::Turns => Err(TURNS_REFUSED.to_owned()),
        _ => Ok(amount),
    }
}

/// One turn's spend so far, against the cap.
#[derive(Debug, Clone)]
pub(crate) struct TurnSpend {
    cap: Vec<Amount>,
    /// Tokens of the prompts answered so far.
    tokens: u64,
    /// The cost of the prompts answered so far, per currency.
    cost_done: BTreeMap<String, f64>,
    /// What the live prompt added so far (its session's total minus
    /// `baseline`), per currency.
    cost_live: BTreeMap<String, f64>,
    /// The session's total when the live prompt began, per currency
    /// (`None`: not read yet; the driver gives it with the first update).
    baseline: Option<BTreeMap<String, f64>>,
    /// What each running task's session cost so far, by task id: the
    /// currency and the amount (its session is fresh: no baseline).
    tasks_live: BTreeMap<String, (String, f64)>,
    /// The cap once reached, told once: the driver or task that reached
    /// it cancels, once.
    reached: Option<CapReached>,
}

/// One turn's spend, shared by the turn's driver and the tasks it
/// delegated; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct SharedSpend(Arc<Mutex<TurnSpend>>);

impl SharedSpend {
    pub(crate) fn new(spend: TurnSpend) -> Self {
        SharedSpend(Arc::new(Mutex::new(spend)))
    }

    /// The spend, to feed or ask (held for one call, never across an await).
    pub(crate) fn lock(&self) -> MutexGuard<'_, TurnSpend> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The cap a turn reached: what it spent of which amount.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CapReached {
    pub cap: Amount,
    pub spent: f64,
}

impl CapReached {
    /// The notice the turn's people are given.
    pub(crate) fn notice(&self) -> String {
        format!(
            "I stopped this turn at the per-turn spending cap: it spent {} of {}. Its work so far is not answered; asking in smaller steps may fit.",
            self.cap.show(self.spent),
            self.cap,
        )
    }
}

impl TurnSpend {
    pub(crate) fn new(cap: Vec<Amount>) -> Self {
        TurnSpend {
            cap,
            tokens: 0,
            cost_done: BTreeMap::new(),
            cost_live: BTreeMap::new(),
            baseline: None,
            tasks_live: BTreeMap::new(),
            reached: None,
        }
    }

    /// The cap, if the turn or one of its tasks reached it.
    pub(crate) fn reached(&self) -> Option<&CapReached> {
        self.reached.as_ref()
    }

    /// Whether the live prompt's baseline is still to be given.
    pub(crate) fn needs_baseline(&self) -> bool {
        self.baseline.is_none()
    }

    /// The session's total cost (`amount` in `currency`) before the live
    /// prompt, as kept from its last report.
    pub(crate) fn set_baseline(&mut self, before: Option<(f64, String)>) {
        self.baseline = Some(
            before
                .map(|(amount, currency)| (currency, amount))
                .into_iter()
                .collect(),
        );
    }

    /// A live `usage_update`: the session's total cost so far.
    pub(crate) fn session_cost(&mut self, total: f64, currency: &str) -> Option<CapReached> {
        let before = self
            .baseline
            .as_ref()
            .and_then(|baseline| baseline.get(currency))
            .copied()
            .unwrap_or(0.0);
        self.cost_live
            .insert(currency.to_owned(), (total - before).max(0.0));
        self.check()
    }

    /// A prompt answered: its tokens and the cost it added (as the
    /// budget counted it); the next prompt starts from a new baseline.
    pub(crate) fn prompt_ended(&mut self, tokens: u64, cost: Option<(f64, String)>) -> Option<CapReached> {
        self.cost_live.clear();
        self.baseline = None;
        self.prompt_ended_with(tokens, cost)
    }

    /// Adds a prompt's tokens and cost, the turn's or a task's.
    fn prompt_ended_with(&mut self, tokens: u64, cost: Option<(f64, String)>) -> Option<CapReached> {
        self.tokens += tokens;
        if let Some((amount, currency)) = cost {
            *self.cost_done.entry(currency).or_default() += amount;
        }
        self.check()
    }

    /// A live `usage_update` of task `task`'s session: its total cost.
    pub(crate) fn task_cost(&mut self, task: &str, total: f64, currency: &str) -> Option<CapReached> {
        self.tasks_live
            .insert(task.to_owned(), (currency.to_owned(), total.max(0.0)));
        self.check()
    }

    /// Task `task`'s prompt answered: its tokens and the cost it added.
    pub(crate) fn task_ended(
        &mut self,
        task: &str,
        tokens: u64,
        cost: Option<(f64, String)>,
    ) -> Option<CapReached> {
        self.tasks_live.remove(task);
        self.prompt_ended_with(tokens, cost)
    }

    /// The cap reached, the first time it is.
    fn check(&mut self) -> Option<CapReached> {
        if self.reached.is_some() {
            return None;
        }
        let mut spent = Spent {
            turns: 0,
            tokens: self.tokens,
            cost: self.cost_done.clone(),
        };
        let live = self
            .cost_live
            .iter()
            .map(|(currency, amount)| (currency, *amount));
        let tasks = self
            .tasks_live
            .values()
            .map(|(currency, amount)| (currency, *amount));
        for (currency, amount) in live.chain(tasks) {
            *spent.cost.entry(currency.clone()).or_default() += amount;
        }
        let (cap, _) = reached(&self.cap, &spent)?;
        let reached = CapReached {
            cap: cap.clone(),
            spent: spent.of(cap),
        };
        self.reached = Some(reached.clone());
        Some(reached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(text: &str) -> Vec<Amount> {
        text.split(',')
            .map(|amount| per_turn_amount(amount).unwrap())
            .collect()
    }

    #[test]
    fn live_cost_counts_from_the_sessions_total_before_the_turn() {
        let mut turn = TurnSpend::new(cap("1 USD"));
        assert!(turn.needs_baseline());
        turn.set_baseline(Some((5.0, "USD".into())));
        assert_eq!(turn.session_cost(5.6, "USD"), None, "0.60 of 1.00");
        assert_eq!(turn.session_cost(3.0, "EUR"), None, "another currency");
        let reached = turn.session_cost(6.2, "USD").expect("1.20 of 1.00");
        assert!((reached.spent - 1.2).abs() < 1e-9);
        assert!(
            reached.notice().contains("it spent 1.20 USD of 1.00 USD"),
            "{}",
            reached.notice()
        );
        assert_eq!(turn.session_cost(7.0, "USD"), None, "told once");
    }

    #[test]
    fn prompts_add_up_tokens_and_cost_across_a_turn() {
        let mut turn = TurnSpend::new(cap("1000 tokens, 1 USD"));
        turn.set_baseline(None);
        assert_eq!(turn.session_cost(0.5, "USD"), None);
        assert_eq!(turn.prompt_ended(600, Some((0.5, "USD".into()))), None);
        assert!(
            turn.needs_baseline(),
            "each prompt starts from its session's total"
        );
        turn.set_baseline(Some((0.5, "USD".into())));
        assert_eq!(turn.session_cost(0.9, "USD"), None, "0.90 of 1.00");
        let reached = turn.prompt_ended(400, None).expect("1000 tokens");
        assert_eq!(reached.cap.unit, Unit::Tokens);
    }

    #[test]
    fn a_tasks_spend_counts_with_its_turns_and_leaves_its_live_cost_at_its_end() {
        let mut turn = TurnSpend::new(cap("1 USD, 1000 tokens"));
        turn.set_baseline(Some((2.0, "USD".into())));
        assert_eq!(turn.session_cost(2.25, "USD"), None, "the turn: 0.25");
        assert_eq!(turn.task_cost("t1", 0.25, "USD"), None, "and its task: 0.50");
        assert_eq!(
            turn.task_ended("t1", 900, Some((0.5, "USD".into()))),
            None,
            "0.75, 900 tokens"
        );
        assert!(turn.reached().is_none());
        let reached = turn.task_cost("t2", 0.25, "USD").expect("1.00 of 1.00");
        assert!((reached.spent - 1.0).abs() < 1e-9, "{reached:?}");
        assert_eq!(turn.reached(), Some(&reached), "kept, for the turn's other tasks");
        assert_eq!(turn.task_ended("t2", 200, None), None, "told once");
    }

    #[test]
    fn a_cap_of_turns_is_refused() {
        assert_eq!(per_turn_amount("3 turns").unwrap_err(), TURNS_REFUSED);
        assert!(per_turn_amount("5 dollars").is_err());
    }
}
