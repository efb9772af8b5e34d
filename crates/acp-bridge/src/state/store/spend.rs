//! What each turn spent, as the agent reported it: one row per turn start
//! (a turn) and per prompt answered (its tokens and the cost it added),
//! with when, the conversation and the author it is counted against.
//!
//! Beside them, the warnings given (a scope near its limit is told once
//! per period, and a restart must not tell it again), and the owner's
//! `!budget` overrides of a limit (as written, the budget reads them).
//!
//! Owns the rows and their sums; what a limit is and whether a sum passes
//! it is `budget`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use acp_bridge_core::budget::limit::Spent;
use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store};

/// One spend, as it is recorded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpendRow {
    /// Unix seconds.
    pub at: i64,
    /// The author (hex public key) it is counted against.
    pub author: String,
    pub turns: u64,
    pub tokens: u64,
    /// The cost it added, in `currency` (0 when none was reported).
    pub cost: f64,
    pub currency: Option<String>,
}

/// Whose spend a sum counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Whose<'a> {
    Everyone,
    /// One author's (hex public key).
    Author(&'a str),
    Conversation(&'a ConversationKey),
}

/// The door to the spend rows: the heart records, the budget sums.
#[derive(Debug, Clone)]
pub(crate) struct SpendBook {
    store: Arc<Store>,
}

impl SpendBook {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        SpendBook { store }
    }

    /// Keeps one spend of `conversation`.
    pub(crate) fn record(&self, conversation: &ConversationKey, row: &SpendRow) -> Result<()> {
        self.store.spend_record(conversation.as_str(), row)
    }

    /// The owner's override of the `scope` limit per `period`, as written.
    pub(crate) fn override_of(&self, scope: &str, period: &str) -> Result<Option<String>> {
        self.store.budget_override(scope, period)
    }

    /// Keeps the owner's override (`Some`), or forgets it (`None`).
    pub(crate) fn set_override(&self, scope: &str, period: &str, amounts: Option<&str>) -> Result<()> {
        self.store.budget_set_override(scope, period, amounts)
    }

    /// Marks the warning of `scope` for `whom` in the period starting at
    /// `period_start` as given; `false` when it was given already.
    pub(crate) fn warn_once(&self, scope: &str, whom: &str, period_start: i64) -> Result<bool> {
        self.store.budget_warn_once(scope, whom, period_start)
    }

    /// Forgets the spend recorded before `before` (unix seconds), and
    /// the warnings of periods begun before it; says how many rows of
    /// spend went.
    pub(crate) fn prune(&self, before: i64) -> Result<usize> {
        self.store.spend_prune(before)
    }

    /// What each author spent since `since` (unix seconds), the most
    /// turns first, at most `count` of them.
    pub(crate) fn top_authors(&self, since: i64, count: usize) -> Result<Vec<(String, Spent)>> {
        let mut authors = self.store.spend_by_author(since)?;
        authors.sort_by(|(a, spent_a), (b, spent_b)| {
            (spent_b.turns, spent_b.tokens, a).cmp(&(spent_a.turns, spent_a.tokens, b))
        });
        authors.truncate(count);
        Ok(authors)
    }

    /// What `whose` spent since `since` (unix seconds).
    pub(crate) fn spent(&self, whose: Whose<'_>, since: i64) -> Result<Spent> {
        let (author, conversation) = match whose {
            Whose::Everyone => (None, None),
            Whose::Author(author) => (Some(author), None),
            Whose::Conversation(key) => (None, Some(key.as_str())),
        };
        self.store.spend_sum(author, conversation, since)
    }
}

impl Store {
    pub(super) fn spend_record(&self, conversation: &str, row: &SpendRow) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO turn_spend (at, conversation, author, turns, tokens, cost, currency)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                row.at,
                conversation,
                row.author,
                row.turns as i64,
                row.tokens as i64,
                row.cost,
                row.currency
            ])?;
        Ok(())
    }

    pub(super) fn budget_override(&self, scope: &str, period: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached("SELECT amounts FROM budget_override WHERE scope = ?1 AND period = ?2")?
            .query_row(params![scope, period], |row| row.get(0))
            .optional()?;
        Ok(found)
    }

    pub(super) fn budget_set_override(&self, scope: &str, period: &str, amounts: Option<&str>) -> Result<()> {
        let conn = self.conn();
        match amounts {
            Some(amounts) => conn
                .prepare_cached(
                    "INSERT INTO budget_override (scope, period, amounts) VALUES (?1, ?2, ?3)
                     ON CONFLICT (scope, period) DO UPDATE SET amounts = excluded.amounts",
                )?
                .execute(params![scope, period, amounts])?,
            None => conn
                .prepare_cached("DELETE FROM budget_override WHERE scope = ?1 AND period = ?2")?
                .execute(params![scope, period])?,
        };
        Ok(())
    }

    pub(super) fn budget_warn_once(&self, scope: &str, whom: &str, period_start: i64) -> Result<bool> {
        let added = self
            .conn()
            .prepare_cached(
                "INSERT OR IGNORE INTO budget_warning (scope, whom, period_start) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![scope, whom, period_start])?;
        Ok(added == 1)
    }

    pub(super) fn spend_prune(&self, before: i64) -> Result<usize> {
        let conn = self.conn();
        conn.prepare_cached("DELETE FROM budget_warning WHERE period_start < ?1")?
            .execute(params![before])?;
        let pruned = conn
            .prepare_cached("DELETE FROM turn_spend WHERE at < ?1")?
            .execute(params![before])?;
        Ok(pruned)
    }

    pub(super) fn spend_by_author(&self, since: i64) -> Result<Vec<(String, Spent)>> {
        let conn = self.conn();
        let mut statement = conn.prepare_cached(
            "SELECT author, currency, SUM(turns), SUM(tokens), SUM(cost) FROM turn_spend
             WHERE at >= ?1 GROUP BY author, currency",
        )?;
        let rows = statement.query_map(params![since], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, f64>(4)?,
            ))
        })?;
        let mut by_author: BTreeMap<String, Spent> = BTreeMap::new();
        for row in rows {
            let (author, currency, turns, tokens, cost) = row?;
            by_author
                .entry(author)
                .or_default()
                .add(currency, turns, tokens, cost);
        }
        Ok(by_author.into_iter().collect())
    }

    pub(super) fn spend_sum(
        &self,
        author: Option<&str>,
        conversation: Option<&str>,
        since: i64,
    ) -> Result<Spent> {
        let conn = self.conn();
        let mut statement = conn.prepare_cached(
            "SELECT currency, SUM(turns), SUM(tokens), SUM(cost) FROM turn_spend
             WHERE at >= ?1 AND (?2 IS NULL OR author = ?2) AND (?3 IS NULL OR conversation = ?3)
             GROUP BY currency",
        )?;
        let rows = statement.query_map(params![since, author, conversation], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, f64>(3)?,
            ))
        })?;
        let mut spent = Spent::default();
        for row in rows {
            let (currency, turns, tokens, cost) = row?;
            spent.add(currency, turns, tokens, cost);
        }
        Ok(spent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;

    fn row(at: i64, author: &str, turns: u64, cost: f64) -> SpendRow {
        SpendRow {
            at,
            author: author.to_owned(),
            turns,
            tokens: 10,
            cost,
            currency: (cost > 0.0).then(|| "USD".to_owned()),
        }
    }

    #[test]
    fn sums_per_author_and_since() {
        let dir = ScratchDir::new("spend");
        let book = SpendBook::new(Arc::new(Store::open(dir.path()).unwrap()));
        let (key, other) = (
            ConversationKey::from_journal("c"),
            ConversationKey::from_journal("d"),
        );
        book.record(&key, &row(100, "a", 1, 0.0)).unwrap();
        book.record(&key, &row(200, "a", 0, 0.5)).unwrap();
        book.record(&other, &row(300, "b", 1, 0.25)).unwrap();
        let all = book.spent(Whose::Everyone, 150).unwrap();
        assert_eq!(all.turns, 1);
        assert_eq!(all.tokens, 20);
        assert_eq!(all.cost.get("USD"), Some(&0.75));
        let by_a = book.spent(Whose::Author("a"), 0).unwrap();
        assert_eq!((by_a.turns, by_a.tokens), (1, 20));
        assert_eq!(by_a.cost.get("USD"), Some(&0.5));
        let in_d = book.spent(Whose::Conversation(&other), 0).unwrap();
        assert_eq!((in_d.turns, in_d.tokens), (1, 10));
        book.record(&other, &row(400, "b", 1, 0.0)).unwrap();
        let top = book.top_authors(0, 1).unwrap();
        assert_eq!(top.len(), 1);
        assert_eq!(
            (top[0].0.as_str(), top[0].1.turns),
            ("b", 2),
            "the most turns first"
        );
        assert_eq!(book.prune(300).unwrap(), 2, "rows before 300");
        assert_eq!(book.spent(Whose::Everyone, 0).unwrap().turns, 2);
    }

    #[test]
    fn a_warning_is_given_once_per_period_and_overrides_are_kept() {
        let dir = ScratchDir::new("spend-marks");
        let book = SpendBook::new(Arc::new(Store::open(dir.path()).unwrap()));
        assert!(book.warn_once("bot", "", 0).unwrap());
        assert!(!book.warn_once("bot", "", 0).unwrap(), "once");
        assert!(book.warn_once("bot", "", 86_400).unwrap(), "once per period");
        assert!(book.warn_once("author", "a", 0).unwrap(), "per scope and whom");
        book.set_override("bot", "day", Some("5.00 USD")).unwrap();
        book.set_override("bot", "day", Some("off")).unwrap();
        assert_eq!(book.override_of("bot", "day").unwrap().as_deref(), Some("off"));
        assert_eq!(book.override_of("bot", "month").unwrap(), None);
        book.set_override("bot", "day", None).unwrap();
        assert_eq!(book.override_of("bot", "day").unwrap(), None);
    }
}
