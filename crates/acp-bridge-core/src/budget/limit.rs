//! The limit check: what was spent over a scope and period, and the first
//! limit it reached. Pure sums; the store sums its rows into a [`Spent`],
//! and the daemon's budget asks this before a turn starts and inside one
//! (the per-turn cap).

use std::collections::BTreeMap;

use super::amount::{Amount, Unit};

/// Sums of spend over a scope and period.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    pub turns: u64,
    pub tokens: u64,
    /// Cost per currency.
    pub cost: BTreeMap<String, f64>,
}

impl Spent {
    /// Adds one group of rows' sums (a negative count, which no row should
    /// hold, adds nothing).
    pub fn add(&mut self, currency: Option<String>, turns: i64, tokens: i64, cost: f64) {
        self.turns += turns.max(0) as u64;
        self.tokens += tokens.max(0) as u64;
        if let Some(currency) = currency {
            *self.cost.entry(currency).or_default() += cost;
        }
    }

    /// What it holds of `limit`'s unit.
    pub fn of(&self, limit: &Amount) -> f64 {
        match &limit.unit {
            Unit::Turns => self.turns as f64,
            Unit::Tokens => self.tokens as f64,
            Unit::Currency(code) => self.cost.get(code).copied().unwrap_or(0.0),
        }
    }
}

/// The first of `limits` that `spent` reached, with what was spent of
/// its unit.
pub fn reached<'a>(limits: &'a [Amount], spent: &Spent) -> Option<(&'a Amount, f64)> {
    limits.iter().find_map(|limit| {
        let used = spent.of(limit);
        (used >= limit.quantity).then_some((limit, used))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(text: &str) -> Vec<Amount> {
        text.split(',')
            .map(|amount| amount.trim().parse().expect(amount))
            .collect()
    }

    #[test]
    fn the_first_limit_reached_is_named_with_what_was_spent_of_its_unit() {
        let mut spent = Spent::default();
        spent.add(Some("USD".into()), 3, 1_500, 0.75);
        spent.add(None, 1, 500, 0.0);
        spent.add(Some("USD".into()), -1, -5, 0.25);
        assert_eq!(
            (spent.turns, spent.tokens),
            (4, 2_000),
            "negative sums add nothing"
        );
        let limits = amounts("5 turns, 2k tokens, 1 USD");
        let (limit, used) = reached(&limits, &spent).expect("2k tokens reached");
        assert_eq!((limit.to_string(), used), ("2000 tokens".to_owned(), 2_000.0));
        assert_eq!(
            reached(&amounts("5 turns, 1 EUR"), &spent),
            None,
            "no EUR was spent"
        );
        let cost = amounts("5 turns, 1 USD");
        let (limit, used) = reached(&cost, &spent).expect("1 USD reached");
        assert_eq!((limit.to_string(), used), ("1.00 USD".to_owned(), 1.0));
    }
}
