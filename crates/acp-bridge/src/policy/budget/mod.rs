//! Budgets: what the agents' turns may spend per UTC day and month, for
//! the whole bot, for each author and for each conversation, checked before a turn starts and
//! never in the middle of one (docs/architecture.md, docs/several-agents.md).
//!
//! Spend is measured, not estimated: each turn counts one turn when it
//! starts, and each prompt answered adds its tokens (the answer's
//! `usage`: input + output) and the cost the session's `usage_update`
//! added since the last report. It is kept in the store (`SpendBook`), so
//! a restart forgets nothing; the sums per scope and period are SQL over
//! it. The whole bot's and a conversation's limits bind everyone, the
//! owner too (the owner is told which flag raises them); an author's
//! limits bind each author but the owner, each separately, and a
//! stranger's (an author heard only because of `--respond-to anyone`)
//! bind each stranger on top of them. A spend is counted against the
//! author of the batch's newest mention.
//!
//! Owns the limits and the check; the heart asks it before starting a
//! turn and gives up a refused mention with the notice it writes.

pub(crate) mod args;
mod command;
mod report;
pub(crate) mod turn_cap;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use acp_bridge_core::budget::amount::Amount;
use acp_bridge_core::budget::limit::reached;
use acp_bridge_core::budget::period::{self, Period};
use acp_bridge_core::mention::ConversationKey;
use acp_bridge_core::standing::Standing;
use nostr_sdk::prelude::PublicKey;

use crate::state::store::{SpendBook, SpendRow, Whose};
use crate::telemetry::metrics;
pub(crate) use args::BudgetArgs;

/// Where the spend still needed at `now` begins (unix seconds): the
/// longest period's, the month's; housekeeping forgets what is older.
pub(crate) fn spend_needed_since(now: i64) -> i64 {
    Period::Month.start(now)
}

/// Whose spend a limit sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Everyone's.
    Bot,
    /// One author's (never the owner's).
    Author,
    /// One stranger's: an author heard only because of `--respond-to
    /// anyone` (not the owner, not allowlisted, not a sibling).
    Stranger,
    /// One conversation's, whoever asked.
    Conversation,
}

impl Scope {
    pub(crate) const ALL: [Scope; 4] = [Scope::Bot, Scope::Author, Scope::Stranger, Scope::Conversation];

    /// The metric label, and the word of flags and `!budget`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Scope::Bot => "bot",
            Scope::Author => "author",
            Scope::Stranger => "stranger",
            Scope::Conversation => "conversation",
        }
    }

    /// Whose budget of `period`, in a notice.
    fn budget_of(self, period: Period) -> String {
        let adjective = period.adjective();
        match self {
            Scope::Bot => format!("the bot's {adjective} budget"),
            Scope::Author => format!("your {adjective} budget"),
            Scope::Stranger => format!("your {adjective} budget as a stranger to this bot"),
            Scope::Conversation => format!("this conversation's {adjective} budget"),
        }
    }
}

/// The limits, per scope and period.
#[derive(Debug, Clone, Default)]
struct Limits {
    bot_day: Vec<Amount>,
    bot_month: Vec<Amount>,
    author_day: Vec<Amount>,
    author_month: Vec<Amount>,
    stranger_day: Vec<Amount>,
    stranger_month: Vec<Amount>,
    conversation_day: Vec<Amount>,
    conversation_month: Vec<Amount>,
}

impl Limits {
    fn of(&self, scope: Scope, period: Period) -> &[Amount] {
        match (scope, period) {
            (Scope::Bot, Period::Day) => &self.bot_day,
            (Scope::Bot, Period::Month) => &self.bot_month,
            (Scope::Author, Period::Day) => &self.author_day,
            (Scope::Author, Period::Month) => &self.author_month,
            (Scope::Stranger, Period::Day) => &self.stranger_day,
            (Scope::Stranger, Period::Month) => &self.stranger_month,
            (Scope::Conversation, Period::Day) => &self.conversation_day,
            (Scope::Conversation, Period::Month) => &self.conversation_month,
        }
    }
}

/// Why a mention may not have a turn: a limit reached.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub scope: Scope,
    period: Period,
    limit: Amount,
    spent: f64,
    /// Unix seconds.
    resets_at: i64,
}

impl Refusal {
    /// Which limit is spent, how far, and when it resets (a delegated
    /// task's refusal says this to the agent).
    pub(crate) fn reason(&self) -> String {
        format!(
            "{} is spent ({} of {}). It resets at {}.",
            self.scope.budget_of(self.period),
            self.limit.show(self.spent),
            self.limit,
            period::utc_minute(self.resets_at),
        )
    }

    /// The notice its author is given; the owner is also told how to
    /// raise the limit.
    pub(crate) fn notice(&self, to_owner: bool) -> String {
        let mut text = format!("Sorry, I cannot take this on: {}", self.reason());
        if to_owner {
            let (scope, period) = (self.scope.label(), self.period.word());
            let flag = format!("budget-{scope}-per-{period}");
            text += &format!(
                " To raise it, send !budget {scope} {period} AMOUNT (or off), or change --{flag} (ACP_BRIDGE_{}).",
                flag.to_uppercase().replace('-', "_")
            );
        }
        text
    }
}

/// The limits and the spend they are checked against.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    limits: Arc<Limits>,
    /// The owner's `!budget` overrides, shared by every clone.
    overrides: Overrides,
    /// `--budget-warn-at`: the share of a limit (percent) that is warned of.
    warn_at_percent: u8,
    owner: Option<PublicKey>,
    book: SpendBook,
    /// `--budget-turn-cap` (empty: none).
    turn_cap: Arc<[Amount]>,
}

impl Budget {
    pub(crate) fn new(args: &BudgetArgs, owner: Option<PublicKey>, book: SpendBook) -> Self {
        let limits = Limits {
            bot_day: args.budget_bot_per_day.clone(),
            bot_month: args.budget_bot_per_month.clone(),
            author_day: args.budget_author_per_day.clone(),
            author_month: args.budget_author_per_month.clone(),
            stranger_day: args.budget_stranger_per_day.clone(),
            stranger_month: args.budget_stranger_per_month.clone(),
            conversation_day: args.budget_conversation_per_day.clone(),
            conversation_month: args.budget_conversation_per_month.clone(),
        };
        let overrides = Overrides::default();
        for scope in Scope::ALL {
            for period in Period::ALL {
                if let Some(limits) = read_override(&book, scope, period) {
                    overrides.lock().insert((scope.label(), period.word()), limits);
                }
            }
        }
        Budget {
            limits: Arc::new(limits),
            overrides,
            warn_at_percent: args.budget_warn_at,
            owner,
            book,
            turn_cap: args.budget_turn_cap.clone().into(),
        }
    }

    /// A new turn's spend against `--budget-turn-cap`; `None` without a cap.
    pub(crate) fn turn_spend(&self) -> Option<turn_cap::TurnSpend> {
        (!self.turn_cap.is_empty()).then(|| turn_cap::TurnSpend::new(self.turn_cap.to_vec()))
    }

    /// Whether `author` is the owner (told how to raise a limit, and
    /// bound by the bot's limits only).
    pub(crate) fn is_owner(&self, author: &PublicKey) -> bool {
        self.owner.as_ref() == Some(author)
    }

    /// The first limit a turn for `author` (heard as `standing`) in
    /// `conversation` would pass at `now` (unix seconds): the bot's, the
    /// conversation's, a stranger's, then the author's; `None` when it may
    /// start. A store that cannot be read refuses nothing (logged).
    pub(crate) fn refusal(
        &self,
        author: &PublicKey,
        standing: Standing,
        conversation: &ConversationKey,
        now: i64,
    ) -> Option<Refusal> {
        let author_hex = author.to_hex();
        for (scope, whose) in self.scopes(author, standing, &author_hex, conversation) {
            for period in Period::ALL {
                let limits = self.limits_of(scope, period);
                if limits.is_empty() {
                    continue;
                }
                let spent = match self.book.spent(whose, period.start(now)) {
                    Ok(spent) => spent,
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the spend; the budget is not checked");
                        return None;
                    }
                };
                if scope == Scope::Bot {
                    for limit in &limits {
                        metrics::budget_bot(
                            period.word(),
                            limit.unit.word(),
                            spent.of(limit),
                            limit.quantity,
                        );
                    }
                }
                if let Some((limit, spent)) = reached(&limits, &spent) {
                    return Some(Refusal {
                        scope,
                        period,
                        limit: limit.clone(),
                        spent,
                        resets_at: period.next_start(now),
                    });
                }
            }
        }
        None
    }

    /// The limits of `scope` per `period`: the owner's `!budget` override
    /// if there is one (`off`: none), else the flag's.
    fn limits_of(&self, scope: Scope, period: Period) -> Vec<Amount> {
        match self.overridden(scope, period) {
            Some(limits) => limits,
            None => self.limits.of(scope, period).to_vec(),
        }
    }

    /// The owner's override of `scope` per `period`, if any.
    fn overridden(&self, scope: Scope, period: Period) -> Option<Vec<Amount>> {
        self.overrides
            .lock()
            .get(&(scope.label(), period.word()))
            .cloned()
    }

    /// The scopes a turn for `author` (heard as `standing`) in
    /// `conversation` counts in, in the order they are checked: a stranger
    /// is held to the stranger's limits and the author's both.
    fn scopes<'a>(
        &self,
        author: &PublicKey,
        standing: Standing,
        author_hex: &'a str,
        conversation: &'a ConversationKey,
    ) -> Vec<(Scope, Whose<'a>)> {
        let mut scopes = vec![
            (Scope::Bot, Whose::Everyone),
            (Scope::Conversation, Whose::Conversation(conversation)),
        ];
        if self.is_owner(author) {
            return scopes;
        }
        if standing == Standing::Stranger {
            scopes.push((Scope::Stranger, Whose::Author(author_hex)));
        }
        scopes.push((Scope::Author, Whose::Author(author_hex)));
        scopes
    }

    /// The warnings due at `now` as a turn for `author` (heard as
    /// `standing`) in `conversation` starts: each scope whose spend of a
    /// limit reached `--budget-warn-at`, told once per scope and period
    /// (kept in the store, so a restart does not tell it again).
    pub(crate) fn warnings(
        &self,
        author: &PublicKey,
        standing: Standing,
        conversation: &ConversationKey,
        now: i64,
    ) -> Vec<String> {
        let author_hex = author.to_hex();
        let share = f64::from(self.warn_at_percent) / 100.0;
        let mut warnings = Vec::new();
        for (scope, whose) in self.scopes(author, standing, &author_hex, conversation) {
            for period in Period::ALL {
                let limits = self.limits_of(scope, period);
                if limits.is_empty() {
                    continue;
                }
                let since = period.start(now);
                let Ok(spent) = self.book.spent(whose, since) else {
                    continue;
                };
                let near = limits.iter().find_map(|limit| {
                    let used = spent.of(limit);
                    (used >= limit.quantity * share).then_some((limit, used))
                });
                let Some((limit, used)) = near else { continue };
                let whom = match whose {
                    Whose::Everyone => "",
                    Whose::Author(author) => author,
                    Whose::Conversation(key) => key.as_str(),
                };
                if self.book.warn_once(scope.label(), whom, since).unwrap_or(false) {
                    metrics::budget_warned(scope.label());
                    warnings.push(format!(
                        "Note: {} is {:.0}% spent ({} of {}). It resets at {}.",
                        scope.budget_of(period),
                        if limit.quantity > 0.0 {
                            used / limit.quantity * 100.0
                        } else {
                            100.0
                        },
                        limit.show(used),
                        limit,
                        period::utc_minute(period.next_start(now)),
                    ));
                }
            }
        }
        warnings
    }

    /// Counts one turn started for `author` at `now`.
    pub(crate) fn turn_started(&self, conversation: &ConversationKey, author: &PublicKey, now: i64) {
        metrics::budget_spend("turns", 1);
        self.record(
            conversation,
            SpendRow {
                at: now,
                author: author.to_hex(),
                turns: 1,
                tokens: 0,
                cost: 0.0,
                currency: None,
            },
        );
    }

    /// Counts what one prompt of a turn for `author` spent: its tokens and
    /// the cost it added.
    pub(crate) fn prompt_spent(
        &self,
        conversation: &ConversationKey,
        author: &PublicKey,
        tokens: u64,
        cost: Option<(f64, String)>,
        now: i64,
    ) {
        metrics::budget_spend("tokens", tokens);
        let (cost, currency) = match cost {
            Some((amount, currency)) => (amount, Some(currency)),
            None => (0.0, None),
        };
        self.record(
            conversation,
            SpendRow {
                at: now,
                author: author.to_hex(),
                turns: 0,
                tokens,
                cost,
                currency,
            },
        );
    }

    fn record(&self, conversation: &ConversationKey, row: SpendRow) {
        if let Err(error) = self.book.record(conversation, &row) {
            tracing::warn!(%conversation, %error, "cannot keep a turn's spend");
        }
    }
}

/// The owner's `!budget` overrides, by scope and period words: read from
/// the store at start and kept in step by `!budget`, so that a check
/// (at every dispatch, for every waiting mention) reads no override from
/// the store.
#[derive(Debug, Clone, Default)]
struct Overrides(Arc<Mutex<OverrideMap>>);

/// Overridden limits by (scope, period) words.
type OverrideMap = HashMap<(&'static str, &'static str), Vec<Amount>>;

impl Overrides {
    fn lock(&self) -> MutexGuard<'_, OverrideMap> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The override kept in the store (a store that cannot be read, or an
/// override that no longer parses, is no override; logged).
fn read_override(book: &SpendBook, scope: Scope, period: Period) -> Option<Vec<Amount>> {
    let written = book
        .override_of(scope.label(), period.word())
        .inspect_err(|error| tracing::warn!(%error, "cannot read the budget's overrides"))
        .ok()??;
    match command::read_amounts(&written) {
        Ok(limits) => Some(limits),
        Err(error) => {
            tracing::warn!(%error, "a budget override does not parse; the flag's limit holds");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::Keys;

    use super::*;
    use crate::state::store::Store;
    use crate::state::store::scratch::ScratchDir;

    /// 2026-11-26 22:53:24 UTC.
    const NOW: i64 = 1_795_733_604;
    const DAY: i64 = 86_400;

    fn budget(dir: &ScratchDir, args: BudgetArgs, owner: Option<PublicKey>) -> Budget {
        let book = SpendBook::new(Arc::new(Store::open(dir.path()).unwrap()));
        Budget::new(&args, owner, book)
    }

    fn amounts(text: &str) -> Vec<Amount> {
        text.split(',').map(|amount| amount.parse().unwrap()).collect()
    }

    #[test]
    fn an_authors_daily_limit_binds_that_author_only_until_midnight() {
        let dir = ScratchDir::new("budget-author");
        let args = BudgetArgs {
            budget_author_per_day: amounts("2 turns"),
            ..BudgetArgs::default()
        };
        let owner = Keys::generate().public_key();
        let budget = budget(&dir, args, Some(owner));
        let (stranger, other) = (Keys::generate().public_key(), Keys::generate().public_key());
        let key = ConversationKey::from_journal("c");
        budget.turn_started(&key, &stranger, NOW - DAY);
        budget.turn_started(&key, &stranger, NOW - 10);
        assert_eq!(
            budget.refusal(&stranger, Standing::Allowlisted, &key, NOW),
            None,
            "yesterday's turn is not today's"
        );
        budget.turn_started(&key, &stranger, NOW - 5);
        let refusal = budget
            .refusal(&stranger, Standing::Allowlisted, &key, NOW)
            .expect("two turns today");
        assert_eq!(refusal.scope, Scope::Author);
        assert_eq!(
            refusal.notice(false),
            "Sorry, I cannot take this on: your daily budget is spent (2 turns of 2 turns). It resets at 2026-11-27 00:00 UTC."
        );
        assert_eq!(
            budget.refusal(&other, Standing::Allowlisted, &key, NOW),
            None,
            "each author separately"
        );
        budget.turn_started(&key, &owner, NOW);
        budget.turn_started(&key, &owner, NOW);
        assert_eq!(
            budget.refusal(&owner, Standing::Allowlisted, &key, NOW),
            None,
            "the owner has no author limit"
        );
        let tomorrow = Period::Day.next_start(NOW);
        assert_eq!(
            budget.refusal(&stranger, Standing::Allowlisted, &key, tomorrow),
            None,
            "reset at midnight UTC"
        );
    }

    #[test]
    fn a_strangers_limit_binds_strangers_only_and_the_authors_limit_them_too() {
        let dir = ScratchDir::new("budget-stranger");
        let args = BudgetArgs {
            budget_stranger_per_day: amounts("1 turns"),
            budget_author_per_month: amounts("3 turns"),
            ..BudgetArgs::default()
        };
        let owner = Keys::generate().public_key();
        let budget = budget(&dir, args, Some(owner));
        let key = ConversationKey::from_journal("c");
        let (stranger, friend) = (Keys::generate().public_key(), Keys::generate().public_key());
        budget.turn_started(&key, &stranger, NOW);
        let refusal = budget
            .refusal(&stranger, Standing::Stranger, &key, NOW)
            .expect("a stranger's one turn today");
        assert_eq!(refusal.scope, Scope::Stranger);
        assert!(
            refusal
                .notice(false)
                .contains("your daily budget as a stranger to this bot is spent (1 turns of 1 turns)"),
            "{}",
            refusal.notice(false)
        );
        assert_eq!(
            budget.command(Some("stranger day 2 turns")),
            "The stranger per day limit is now 2 turns."
        );
        assert_eq!(budget.refusal(&stranger, Standing::Stranger, &key, NOW), None);
        budget.command(Some("stranger day default"));
        assert!(budget.command(None).contains("stranger per day: 1 turns (flag)"));
        for standing in [Standing::Allowlisted, Standing::Sibling] {
            budget.turn_started(&key, &friend, NOW);
            assert_eq!(budget.refusal(&friend, standing, &key, NOW), None, "{standing:?}");
        }
        budget.turn_started(&key, &friend, NOW);
        let refusal = budget.refusal(&friend, Standing::Allowlisted, &key, NOW);
        assert_eq!(refusal.map(|refusal| refusal.scope), Some(Scope::Author));
        for _ in 0..3 {
            budget.turn_started(&key, &owner, NOW);
        }
        assert_eq!(budget.refusal(&owner, Standing::Owner, &key, NOW), None);
        let tomorrow = Period::Day.next_start(NOW);
        budget.turn_started(&key, &stranger, tomorrow);
        budget.turn_started(&key, &stranger, tomorrow + 1);
        let refusal = budget.refusal(&stranger, Standing::Stranger, &key, tomorrow + 2);
        assert_eq!(
            refusal.map(|refusal| refusal.scope),
            Some(Scope::Stranger),
            "the stranger's own limit is checked before the author's"
        );
    }

    #[test]
    fn the_bots_monthly_cost_limit_binds_the_owner_too() {
        let dir = ScratchDir::new("budget-bot");
        let args = BudgetArgs {
            budget_bot_per_month: amounts("1 USD, 1M tokens"),
            ..BudgetArgs::default()
        };
        let owner = Keys::generate().public_key();
        let budget = budget(&dir, args, Some(owner));
        let key = ConversationKey::from_journal("c");
        let someone = Keys::generate().public_key();
        budget.prompt_spent(&key, &someone, 500, Some((0.6, "USD".into())), NOW - 20 * DAY);
        budget.prompt_spent(&key, &someone, 500, Some((0.3, "EUR".into())), NOW);
        assert_eq!(budget.refusal(&owner, Standing::Allowlisted, &key, NOW), None);
        budget.prompt_spent(&key, &someone, 500, Some((0.4, "USD".into())), NOW);
        let refusal = budget
            .refusal(&owner, Standing::Allowlisted, &key, NOW)
            .expect("1.00 USD this month");
        assert_eq!(refusal.scope, Scope::Bot);
        let notice = refusal.notice(true);
        assert!(
            notice.contains("the bot's monthly budget is spent (1.00 USD of 1.00 USD)"),
            "{notice}"
        );
        assert!(notice.contains("2026-12-01 00:00 UTC"), "{notice}");
        assert!(
            notice.contains("--budget-bot-per-month (ACP_BRIDGE_BUDGET_BOT_PER_MONTH)"),
            "{notice}"
        );
    }

    #[test]
    fn a_conversations_limit_binds_everyone_there_and_no_other_conversation() {
        let dir = ScratchDir::new("budget-conversation");
        let args = BudgetArgs {
            budget_conversation_per_day: amounts("100 tokens"),
            ..BudgetArgs::default()
        };
        let owner = Keys::generate().public_key();
        let budget = budget(&dir, args, Some(owner));
        let busy = ConversationKey::from_journal("busy");
        let quiet = ConversationKey::from_journal("quiet");
        budget.prompt_spent(&busy, &Keys::generate().public_key(), 100, None, NOW);
        let refusal = budget
            .refusal(&owner, Standing::Allowlisted, &busy, NOW)
            .expect("100 tokens here today");
        assert_eq!(refusal.scope, Scope::Conversation);
        let notice = refusal.notice(true);
        assert!(
            notice.contains("this conversation's daily budget is spent (100 tokens of 100 tokens)"),
            "{notice}"
        );
        assert!(notice.contains("--budget-conversation-per-day"), "{notice}");
        assert_eq!(budget.refusal(&owner, Standing::Allowlisted, &quiet, NOW), None);
    }

    #[test]
    fn a_scope_past_the_warning_share_is_warned_once_per_period() {
        let dir = ScratchDir::new("budget-warn");
        let args = BudgetArgs {
            budget_bot_per_day: amounts("10 turns"),
            budget_warn_at: 50,
            ..BudgetArgs::default()
        };
        let budget = budget(&dir, args, None);
        let key = ConversationKey::from_journal("c");
        let someone = Keys::generate().public_key();
        for _ in 0..4 {
            budget.turn_started(&key, &someone, NOW);
        }
        assert!(
            budget
                .warnings(&someone, Standing::Allowlisted, &key, NOW)
                .is_empty(),
            "40% is below 50%"
        );
        budget.turn_started(&key, &someone, NOW);
        assert_eq!(
            budget.warnings(&someone, Standing::Allowlisted, &key, NOW),
            [
                "Note: the bot's daily budget is 50% spent (5 turns of 10 turns). It resets at 2026-11-27 00:00 UTC."
            ]
        );
        budget.turn_started(&key, &someone, NOW);
        assert!(
            budget
                .warnings(&someone, Standing::Allowlisted, &key, NOW)
                .is_empty(),
            "once a day"
        );
        let tomorrow = Period::Day.next_start(NOW);
        for _ in 0..5 {
            budget.turn_started(&key, &someone, tomorrow);
        }
        assert_eq!(
            budget
                .warnings(&someone, Standing::Allowlisted, &key, tomorrow)
                .len(),
            1,
            "again the next day"
        );
    }

    #[test]
    fn an_override_wins_over_the_flag_and_outlives_a_restart() {
        let dir = ScratchDir::new("budget-override");
        let args = BudgetArgs {
            budget_bot_per_day: amounts("1 turns"),
            ..BudgetArgs::default()
        };
        let key = ConversationKey::from_journal("c");
        let someone = Keys::generate().public_key();
        {
            let budget = budget(&dir, args.clone(), None);
            budget.turn_started(&key, &someone, NOW);
            assert!(
                budget
                    .refusal(&someone, Standing::Allowlisted, &key, NOW)
                    .is_some()
            );
            assert_eq!(
                budget.command(Some("bot day off")),
                "The bot per day limit is now off."
            );
            assert_eq!(budget.refusal(&someone, Standing::Allowlisted, &key, NOW), None);
        }
        let restarted = budget(&dir, args, None);
        assert_eq!(
            restarted.refusal(&someone, Standing::Allowlisted, &key, NOW),
            None,
            "the override is kept"
        );
        assert!(
            restarted
                .command(None)
                .contains("bot per day: off (set by !budget)")
        );
        restarted.command(Some("bot day default"));
        assert!(
            restarted
                .refusal(&someone, Standing::Allowlisted, &key, NOW)
                .is_some(),
            "the flag's limit again"
        );
    }
}
