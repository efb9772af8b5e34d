//! The budget's flags: limits per UTC day and month, for the whole bot,
//! for each author, for each stranger and for each conversation. Each is a comma-separated list of amounts
//! (`"5 USD, 200k tokens, 50 turns"`, see [`super::amount`]); empty, the
//! default, is no limit.

use acp_bridge_core::budget::amount::Amount;
use clap::Args;

use crate::base::flags::flag_defaults;

/// The budget's flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Budget")]
pub struct BudgetArgs {
    /// What one turn may spend before it is cancelled
    ///
    /// What one turn may spend before it is cancelled (its people are
    /// told it was stopped at this cap): amounts of tokens or a currency,
    /// such as "1 USD, 500k tokens". Empty: no cap.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_TURN_CAP",
        value_delimiter = ',',
        value_name = "AMOUNT",
        value_parser = super::turn_cap::per_turn_amount
    )]
    pub budget_turn_cap: Vec<Amount>,

    /// Percent of a limit at which its scope is warned
    ///
    /// Percent of a limit at which its scope is warned, once per period:
    /// the author whose turn starts past it is told in the thread.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_WARN_AT",
        default_value = "80",
        value_name = "PERCENT",
        value_parser = clap::value_parser!(u8).range(1..=100)
    )]
    pub budget_warn_at: u8,

    /// The whole bot's spend per UTC day
    ///
    /// What the whole bot may spend per UTC day (from midnight), for
    /// everyone, the owner included: amounts such as "5 USD, 200k tokens,
    /// 50 turns". Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_BOT_PER_DAY",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_bot_per_day: Vec<Amount>,

    /// The whole bot's spend per UTC month
    ///
    /// What the whole bot may spend per UTC month (from the 1st). Empty:
    /// no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_BOT_PER_MONTH",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_bot_per_month: Vec<Amount>,

    /// Each author's spend per UTC day
    ///
    /// What each author other than the owner may spend per UTC day, each
    /// separately. Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_AUTHOR_PER_DAY",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_author_per_day: Vec<Amount>,

    /// Each author's spend per UTC month
    ///
    /// What each author other than the owner may spend per UTC month.
    /// Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_AUTHOR_PER_MONTH",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_author_per_month: Vec<Amount>,

    /// Each stranger's spend per UTC day
    ///
    /// What each stranger (an author heard only because of `--respond-to
    /// anyone`: not the owner, allowlisted or a sibling) may spend per UTC
    /// day, each separately, on top of the author limits. Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_STRANGER_PER_DAY",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_stranger_per_day: Vec<Amount>,

    /// Each stranger's spend per UTC month
    ///
    /// What each stranger may spend per UTC month. Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_STRANGER_PER_MONTH",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_stranger_per_month: Vec<Amount>,

    /// Each conversation's spend per UTC day
    ///
    /// What each conversation (channel, thread, DM) may spend per UTC
    /// day, whoever asks, the owner included. Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_CONVERSATION_PER_DAY",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_conversation_per_day: Vec<Amount>,

    /// Each conversation's spend per UTC month
    ///
    /// What each conversation may spend per UTC month. Empty: no limit.
    #[arg(
        long,
        env = "ACP_BRIDGE_BUDGET_CONVERSATION_PER_MONTH",
        value_delimiter = ',',
        value_name = "AMOUNT"
    )]
    pub budget_conversation_per_month: Vec<Amount>,
}

impl Default for BudgetArgs {
    fn default() -> Self {
        flag_defaults()
    }
}
