//! A limit's amount, as the operator writes it: a number and a unit,
//! `5 USD`, `0.50 EUR`, `200k tokens`, `1M tokens`, `50 turns`.
//!
//! The grammar: a non-negative number (decimals only for a currency; `k`
//! and `M` multiply by a thousand and a million), one space, and a unit:
//! `turns`, `tokens`, or a currency as three capital letters (the
//! currency the agent reports its cost in). Anything else is refused with
//! a one-line error.

use std::fmt;
use std::str::FromStr;

/// What an amount counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    Turns,
    Tokens,
    /// A currency code (`USD`).
    Currency(String),
}

/// A limit: how much of a unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Amount {
    pub quantity: f64,
    pub unit: Unit,
}

/// Why a written amount was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not an amount: write a number and a unit, as in \"5 USD\", \"200k tokens\" or \"50 turns\""
)]
pub struct BadAmount(String);

impl FromStr for Amount {
    type Err = BadAmount;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadAmount(text.to_owned());
        let (number, unit) = text.trim().split_once(' ').ok_or_else(bad)?;
        let unit = match unit {
            "turns" => Unit::Turns,
            "tokens" => Unit::Tokens,
            code if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) => {
                Unit::Currency(code.to_owned())
            }
            _ => return Err(bad()),
        };
        let (digits, multiplier) = match number.as_bytes().last() {
            Some(b'k') => (&number[..number.len() - 1], 1e3),
            Some(b'M') => (&number[..number.len() - 1], 1e6),
            _ => (number, 1.0),
        };
        let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let decimal = digits.split_once('.').is_some_and(|(whole, fraction)| {
            !whole.is_empty()
                && !fraction.is_empty()
                && whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
        });
        let counted = !matches!(unit, Unit::Currency(_));
        if !(plain || decimal && !counted && multiplier == 1.0) {
            return Err(bad());
        }
        let quantity = digits.parse::<f64>().map_err(|_| bad())? * multiplier;
        Ok(Amount { quantity, unit })
    }
}

impl Unit {
    /// The word a metric's `unit` label and an amount use.
    pub fn word(&self) -> &str {
        match self {
            Unit::Turns => "turns",
            Unit::Tokens => "tokens",
            Unit::Currency(code) => code,
        }
    }
}

impl Amount {
    /// `quantity` of this amount's unit, written as an amount is.
    pub fn show(&self, quantity: f64) -> String {
        match &self.unit {
            Unit::Turns => format!("{quantity:.0} turns"),
            Unit::Tokens => format!("{quantity:.0} tokens"),
            Unit::Currency(code) => format!("{quantity:.2} {code}"),
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.show(self.quantity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(text: &str) -> Amount {
        text.parse().unwrap()
    }

    #[test]
    fn reads_each_unit_and_multiplier() {
        assert_eq!(
            amount("5 USD"),
            Amount {
                quantity: 5.0,
                unit: Unit::Currency("USD".into())
            }
        );
        assert_eq!(amount("0.50 EUR").quantity, 0.5);
        assert_eq!(
            amount("200k tokens"),
            Amount {
                quantity: 200_000.0,
                unit: Unit::Tokens
            }
        );
        assert_eq!(amount("1M tokens").quantity, 1_000_000.0);
        assert_eq!(
            amount("50 turns"),
            Amount {
                quantity: 50.0,
                unit: Unit::Turns
            }
        );
        assert_eq!(amount("0 turns").quantity, 0.0);
    }

    #[test]
    fn refuses_anything_else_in_one_line() {
        for text in [
            "",
            "5",
            "USD",
            "5USD",
            "5 usd",
            "5 dollars",
            "-5 USD",
            "1.5 turns",
            "1.5k tokens",
            "5  USD",
            "k tokens",
            "5 USDT",
            ".5 USD",
            "5. USD",
            "2 turn",
            "1e3 tokens",
        ] {
            let error = text.parse::<Amount>().unwrap_err().to_string();
            assert!(!error.contains('\n'), "{error}");
            assert!(error.contains("\"5 USD\""), "{text}: {error}");
        }
    }

    #[test]
    fn shows_as_written() {
        assert_eq!(amount("200k tokens").to_string(), "200000 tokens");
        assert_eq!(amount("5 USD").to_string(), "5.00 USD");
        assert_eq!(amount("50 turns").show(3.0), "3 turns");
    }
}
