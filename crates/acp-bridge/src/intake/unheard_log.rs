//! The operator's line for a mention the gate does not hear.
//!
//! A swapped npub in `--owner` or `--allow` looks like "nothing happens":
//! the mention arrives, the gate refuses it, and the only trace used to be
//! a debug line among dozens. So a refused mention is said at info level,
//! naming the author's npub and the rule that refused it, once per author
//! per [`INTERVAL`]. Strangers choose how many keys they mention the bot
//! with, so the memory and the lines are bounded too: at most
//! [`MAX_AUTHORS`] authors remembered, at most [`MAX_LINES`] lines per
//! interval, and one line saying the rest are left out.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{PublicKey, RelayUrl, ToBech32};

use crate::policy::gate::{Refusal, RespondTo};

/// How long an author's refusal is not said again.
pub(super) const INTERVAL: Duration = Duration::from_secs(600);
/// Authors remembered at most; past it, the longest-remembered are
/// forgotten first (their next refusal is said again, a line early).
const MAX_AUTHORS: usize = 4096;
/// Lines at most per interval, whatever the number of authors.
const MAX_LINES: u32 = 50;

/// What the log does with one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    /// Said now.
    Line,
    /// Said within the interval already.
    Quiet,
    /// The interval's lines are spent: say that once.
    Spent,
    /// Spent, and said so.
    Silent,
}

/// Remembers whose refusals were said lately.
#[derive(Debug)]
pub(super) struct UnheardLog {
    said: HashMap<PublicKey, Instant>,
    window_start: Instant,
    lines: u32,
    spent_told: bool,
}

impl UnheardLog {
    pub(super) fn new(now: Instant) -> Self {
        UnheardLog {
            said: HashMap::new(),
            window_start: now,
            lines: 0,
            spent_told: false,
        }
    }

    /// Logs `author`'s refused mention at info, unless said lately.
    pub(super) fn refused(
        &mut self,
        now: Instant,
        relay: &RelayUrl,
        author: &PublicKey,
        refusal: Refusal,
        respond_to: RespondTo,
    ) {
        let npub = author.to_bech32().unwrap_or_else(|_| author.to_hex());
        match self.decide(now, author) {
            Said::Line => tracing::info!(
                author = %npub,
                %relay,
                rule = %rule_word(refusal, respond_to),
                reason = refusal.as_str(),
                why = why(refusal, respond_to),
                said_again_after_s = INTERVAL.as_secs(),
                "mention from an author the gate does not hear"
            ),
            Said::Spent => tracing::info!(
                max_lines = MAX_LINES,
                "more mentions from authors the gate does not hear: not said again this interval"
            ),
            Said::Quiet | Said::Silent => {}
        }
    }

    fn decide(&mut self, now: Instant, author: &PublicKey) -> Said {
        if now.duration_since(self.window_start) >= INTERVAL {
            self.window_start = now;
            self.lines = 0;
            self.spent_told = false;
            self.said.retain(|_, at| now.duration_since(*at) < INTERVAL);
        }
        if self
            .said
            .get(author)
            .is_some_and(|at| now.duration_since(*at) < INTERVAL)
        {
            return Said::Quiet;
        }
        if self.lines >= MAX_LINES {
            return match std::mem::replace(&mut self.spent_told, true) {
                false => Said::Spent,
                true => Said::Silent,
            };
        }
        if self.said.len() >= MAX_AUTHORS
            && let Some(oldest) = self.said.iter().min_by_key(|(_, at)| **at).map(|(key, _)| *key)
        {
            self.said.remove(&oldest);
        }
        self.said.insert(*author, now);
        self.lines += 1;
        Said::Line
    }
}

/// The rule, as the operator wrote it.
fn rule_word(refusal: Refusal, respond_to: RespondTo) -> String {
    match refusal {
        Refusal::DirectMessageFromStranger => "direct-messages".to_owned(),
        Refusal::NobodyHeard | Refusal::NotHeard => respond_to.flag_word(),
    }
}

/// Why, in the words an operator checks their flags with.
fn why(refusal: Refusal, respond_to: RespondTo) -> &'static str {
    match (refusal, respond_to) {
        (Refusal::DirectMessageFromStranger, _) => {
            "direct messages are heard from the owner and its sibling bots only"
        }
        (Refusal::NobodyHeard, _) | (_, RespondTo::Nobody) => "--respond-to nobody hears no one",
        (Refusal::NotHeard, RespondTo::Allowlist) => {
            "--respond-to allowlist hears the owner (--owner), its sibling bots and --allowlist only"
        }
        (Refusal::NotHeard, _) => {
            "--respond-to owner-only hears the owner (--owner) and its sibling bots only"
        }
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::Keys;

    use super::*;

    fn author() -> PublicKey {
        Keys::generate().public_key()
    }

    #[test]
    fn an_author_is_said_once_per_interval() {
        let start = Instant::now();
        let mut log = UnheardLog::new(start);
        let (one, two) = (author(), author());
        assert_eq!(log.decide(start, &one), Said::Line);
        assert_eq!(log.decide(start + Duration::from_secs(1), &one), Said::Quiet);
        assert_eq!(log.decide(start + Duration::from_secs(2), &two), Said::Line);
        assert_eq!(
            log.decide(start + INTERVAL - Duration::from_secs(1), &one),
            Said::Quiet
        );
        assert_eq!(log.decide(start + INTERVAL, &one), Said::Line);
    }

    #[test]
    fn many_authors_spend_the_intervals_lines_and_are_told_once() {
        let start = Instant::now();
        let mut log = UnheardLog::new(start);
        for _ in 0..MAX_LINES {
            assert_eq!(log.decide(start, &author()), Said::Line);
        }
        assert_eq!(log.decide(start, &author()), Said::Spent);
        assert_eq!(log.decide(start, &author()), Said::Silent);
        assert_eq!(log.decide(start + INTERVAL, &author()), Said::Line);
    }

    #[test]
    fn the_memory_of_authors_is_bounded() {
        let start = Instant::now();
        let mut log = UnheardLog::new(start);
        let first = author();
        log.decide(start, &first);
        for step in 1..=MAX_AUTHORS as u64 {
            // One line each, windows apart from the line budget's view.
            log.lines = 0;
            log.decide(start + Duration::from_millis(step), &author());
        }
        assert_eq!(log.said.len(), MAX_AUTHORS);
        assert!(!log.said.contains_key(&first), "the oldest is forgotten first");
    }

    #[test]
    fn the_rule_is_named_as_the_flag_says_it() {
        assert_eq!(rule_word(Refusal::NotHeard, RespondTo::OwnerOnly), "owner-only");
        assert_eq!(rule_word(Refusal::NotHeard, RespondTo::Allowlist), "allowlist");
        assert_eq!(
            rule_word(Refusal::DirectMessageFromStranger, RespondTo::Anyone),
            "direct-messages"
        );
        assert!(why(Refusal::NotHeard, RespondTo::Allowlist).contains("--allowlist"));
    }
}
