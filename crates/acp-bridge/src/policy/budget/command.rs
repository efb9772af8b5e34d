//! `!budget`: the owner reads the limits, or overrides one. `!budget
//! SCOPE PERIOD AMOUNTS` (SCOPE `bot`, `author`, `stranger` or `conversation`; PERIOD
//! `day` or `month`; AMOUNTS comma-separated, or `off`) is kept in the
//! store and wins over the flag until `!budget SCOPE PERIOD default`.

use acp_bridge_core::budget::amount::{Amount, BadAmount};
use acp_bridge_core::budget::period::Period;

use super::{Budget, Scope};

impl Budget {
    /// What `!budget` answers with the rest of its message (`None`: read).
    pub(crate) fn command(&self, setting: Option<&str>) -> String {
        match setting {
            None => self.limits_text(),
            Some(setting) => match self.change(setting) {
                Ok(answer) => answer,
                Err(refusal) => format!(
                    "{refusal} Write !budget SCOPE PERIOD AMOUNTS: SCOPE bot, author, stranger or conversation; PERIOD day or month; AMOUNTS such as \"5 USD, 50 turns\", or off, or default (the flag's)."
                ),
            },
        }
    }

    /// Every limit, where it comes from.
    fn limits_text(&self) -> String {
        let mut lines = vec!["Budgets (UTC days from midnight, months from the 1st):".to_owned()];
        for scope in Scope::ALL {
            for period in Period::ALL {
                let (limits, source) = match self.overridden(scope, period) {
                    Some(limits) => (limits, "set by !budget"),
                    None => (self.limits.of(scope, period).to_vec(), "flag"),
                };
                let limits = match limits.is_empty() {
                    true => "off".to_owned(),
                    false => written(&limits),
                };
                lines.push(format!(
                    "{} per {}: {limits} ({source})",
                    scope.label(),
                    period.word()
                ));
            }
        }
        lines.join("\n")
    }

    /// Applies `SCOPE PERIOD AMOUNTS|off|default`, or says what is wrong.
    fn change(&self, setting: &str) -> Result<String, String> {
        let mut words = setting.trim().splitn(3, ' ');
        let scope_word = words.next().unwrap_or_default();
        let scope = Scope::ALL
            .into_iter()
            .find(|scope| scope.label() == scope_word)
            .ok_or_else(|| format!("{scope_word:?} is not a scope."))?;
        let period_word = words.next().unwrap_or_default();
        let period = Period::ALL
            .into_iter()
            .find(|period| period.word() == period_word)
            .ok_or_else(|| format!("{period_word:?} is not a period."))?;
        let value = words.next().unwrap_or_default().trim();
        let (kept, now) = match value {
            "default" => (None, "back to the flag's".to_owned()),
            "off" => (Some(Vec::new()), "off".to_owned()),
            amounts => {
                let limits = read_amounts(amounts).map_err(|error| format!("{error}."))?;
                let written = written(&limits);
                (Some(limits), written)
            }
        };
        let stored = kept.as_ref().map(|limits| match limits.is_empty() {
            true => "off".to_owned(),
            false => written(limits),
        });
        self.book
            .set_override(scope.label(), period.word(), stored.as_deref())
            .map_err(|error| format!("Cannot keep it: {error}."))?;
        let key = (scope.label(), period.word());
        match kept {
            Some(limits) => self.overrides.lock().insert(key, limits),
            None => self.overrides.lock().remove(&key),
        };
        tracing::info!(scope = scope.label(), period = period.word(), limit = %now, "budget overridden");
        Ok(format!(
            "The {} per {} limit is now {now}.",
            scope.label(),
            period.word()
        ))
    }
}

/// Amounts as `!budget` and the store write them: `off` is none.
pub(super) fn read_amounts(text: &str) -> Result<Vec<Amount>, BadAmount> {
    if text.trim() == "off" {
        return Ok(Vec::new());
    }
    text.split(',').map(str::parse).collect()
}

/// Amounts as they read back: `5.00 USD, 50 turns`.
fn written(limits: &[Amount]) -> String {
    limits
        .iter()
        .map(Amount::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_a_list_or_off_and_back() {
        let limits = read_amounts("5 USD, 200k tokens").unwrap();
        assert_eq!(written(&limits), "5.00 USD, 200000 tokens");
        assert_eq!(read_amounts(&written(&limits)).unwrap(), limits);
        assert!(read_amounts("off").unwrap().is_empty());
        assert!(read_amounts("5 dollars").is_err());
    }
}
