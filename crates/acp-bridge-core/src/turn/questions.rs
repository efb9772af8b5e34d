//! A live turn's questions to the owner under `--permission-policy
//! ask-owner` (permission requests and form elicitations alike), as state:
//! which question is open, which wait behind it, and what the owner's
//! reply means.
//!
//! Owns no I/O: the driver posts the question and answers the agent; the
//! heart routes the owner's replies here through the turn that asked. One
//! question is open at a time; while it is open (also while it is being
//! posted) the turn is blocked on the owner. Only the owner's replies reach
//! this module: the heart refuses anyone else's first.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use acp_protocol::{FormField, PermissionKind, PermissionOption};
use nostr::prelude::EventId;
use serde_json::{Map, Value};

use super::form;

/// Names one question of the agent within its turn.
pub type QuestionTicket = u64;

/// The most of a tool call's title or a form's message a question quotes:
/// the agent writes it, and the question (one event) must still fit its
/// options below it. What is left out is said, so that the owner knows they
/// do not see all of what they are asked about.
pub(crate) const MAX_SUMMARY_BYTES: usize = 8 * 1024;

/// `text` (what the agent says a question is about) cut at
/// `MAX_SUMMARY_BYTES` on a character boundary, saying so when it is.
pub fn summary(text: &str) -> String {
    if text.len() <= MAX_SUMMARY_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_SUMMARY_BYTES);
    format!("{}… [{} more bytes not shown]", &text[..end], text.len() - end)
}

/// A question the agent asked, as the turn keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub ticket: QuestionTicket,
    /// The tool call a permission is for, or the form's message.
    pub summary: String,
    /// What the question shows below the summary of what is asked (a
    /// permission's command or diff, see [`crate::approvals::shown`]);
    /// empty for none. `!status` and notices name the summary only.
    pub shows: String,
    pub ask: Ask,
}

/// What the agent asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Permission for a tool call: one of these options.
    Permission(Vec<PermissionOption>),
    /// A form to fill in (ACP elicitation).
    Form(Vec<FormField>),
}

/// The owner's answer, as the agent gets it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Option(PermissionOption),
    Form(Map<String, Value>),
}

impl Answer {
    /// What the owner is told was sent.
    pub fn describe(&self) -> String {
        match self {
            Answer::Option(option) => option.name.clone(),
            Answer::Form(content) => form::summarize(content),
        }
    }
}

impl Asked {
    /// The question, as `!status` and notices name it.
    fn described(&self) -> String {
        match self.ask {
            Ask::Permission(_) => format!("a permission question ({})", self.summary),
            Ask::Form(_) => format!("a question ({})", self.summary),
        }
    }
}

#[derive(Debug)]
struct Open {
    asked: Asked,
    /// Set once the question is posted: its event (what answers reply to)
    /// and when it times out.
    posted: Option<(EventId, Instant)>,
}

/// What became of an owner's reply to the open question.
#[derive(Debug, Clone, PartialEq)]
pub enum Routed {
    /// The agent gets this answer.
    Answered(Answer),
    /// A reply to the open question that does not fit it; the correction
    /// notice (the question stays open).
    Unrecognized { correction: String },
}

#[derive(Debug)]
pub(super) struct Questions {
    /// `--permission-timeout`: how long a posted question waits for the owner.
    timeout: Duration,
    open: Option<Open>,
    queued: VecDeque<Asked>,
    /// Questions the agent asked in this turn, refused ones included.
    asked_in_turn: usize,
}

/// Questions one turn may put to the owner; past it the agent's further
/// questions are refused at once (permission rejected, form declined). An
/// agent that asks without end would otherwise fill the owner's thread or
/// DM, one question after another, for as long as the owner answers.
pub(super) const MAX_QUESTIONS_PER_TURN: usize = 32;

/// What becomes of a question the agent just asked.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Asking {
    /// Post it now: no other question is open.
    Post(Asked, String),
    /// It waits behind the open one.
    Wait,
    /// Past [`MAX_QUESTIONS_PER_TURN`]: refuse it; `first` for the first
    /// refused in the turn (the owner is told once).
    Refuse { first: bool },
}

impl Questions {
    pub(super) fn new(timeout: Duration) -> Self {
        Questions {
            timeout,
            open: None,
            queued: VecDeque::new(),
            asked_in_turn: 0,
        }
    }

    /// The agent asked: returns the question to post now, or `None` when
    /// it waits behind the open one.
    pub(super) fn asked(&mut self, asked: Asked) -> Asking {
        self.asked_in_turn += 1;
        if self.asked_in_turn > MAX_QUESTIONS_PER_TURN {
            return Asking::Refuse {
                first: self.asked_in_turn == MAX_QUESTIONS_PER_TURN + 1,
            };
        }
        if self.open.is_some() {
            self.queued.push_back(asked);
            return Asking::Wait;
        }
        let (asked, text) = self.open_next(asked);
        Asking::Post(asked, text)
    }

    /// The question is posted as `event` at `now`: its clock starts.
    pub(super) fn posted(&mut self, ticket: QuestionTicket, event: EventId, now: Instant) {
        let timeout = self.timeout;
        if let Some(open) = self.open.as_mut().filter(|open| open.asked.ticket == ticket) {
            open.posted = Some((event, now + timeout));
        }
    }

    /// Closes the open question (answered, timed out, or not postable) and
    /// returns the next one to post, if any.
    pub(super) fn close(&mut self, ticket: QuestionTicket) -> Option<(Asked, String)> {
        if self.open.as_ref().is_some_and(|open| open.asked.ticket == ticket) {
            self.open = None;
        }
        if self.open.is_some() {
            return None;
        }
        let next = self.queued.pop_front()?;
        Some(self.open_next(next))
    }

    /// The agent withdrew question `ticket`: a queued one is dropped
    /// quietly; the open one is returned, for the owner to be told (the
    /// caller closes it).
    pub(super) fn withdraw(&mut self, ticket: QuestionTicket) -> Option<Asked> {
        self.queued.retain(|asked| asked.ticket != ticket);
        self.open
            .as_ref()
            .filter(|open| open.asked.ticket == ticket)
            .map(|open| open.asked.clone())
    }

    /// What the turn waits for, while a question is open.
    pub(super) fn waiting_on(&self) -> Option<String> {
        self.open.as_ref().map(|open| open.asked.described())
    }

    /// The posted question's event, for routing replies.
    pub(super) fn open_event(&self) -> Option<EventId> {
        self.open.as_ref()?.posted.map(|(event, _)| event)
    }

    /// When the open question times out.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.open.as_ref()?.posted.map(|(_, deadline)| deadline)
    }

    /// The open question, when it has timed out by `now`.
    pub(super) fn expired(&self, now: Instant) -> Option<&Asked> {
        let open = self.open.as_ref()?;
        let (_, deadline) = open.posted?;
        (now >= deadline).then_some(&open.asked)
    }

    /// Maps the owner's `text` onto the open question; `None` when no
    /// question is posted.
    pub(super) fn route(&self, text: &str) -> Option<(QuestionTicket, Routed)> {
        let open = self.open.as_ref().filter(|open| open.posted.is_some())?;
        let routed = match &open.asked.ask {
            Ask::Permission(options) => match choose(options, text) {
                Some(option) => Routed::Answered(Answer::Option(option)),
                None => Routed::Unrecognized {
                    correction: format!(
                        "I did not understand that answer. Reply with the number or the name of one of:\n{}",
                        numbered_options(options)
                    ),
                },
            },
            Ask::Form(fields) => match form::fill(fields, text) {
                Ok(content) => Routed::Answered(Answer::Form(content)),
                Err(problem) => Routed::Unrecognized {
                    correction: format!(
                        "That does not fit the question ({problem}). The question is still open. {}.",
                        form::describe(fields).1
                    ),
                },
            },
        };
        Some((open.asked.ticket, routed))
    }

    /// Forgets every question (the prompt ended or is being cancelled);
    /// true when there was any.
    pub(super) fn clear(&mut self) -> bool {
        let had_any = self.open.is_some() || !self.queued.is_empty();
        self.open = None;
        self.queued.clear();
        had_any
    }

    /// What the thread is told when `asked` timed out.
    pub(super) fn timeout_text(&self, asked: &Asked) -> String {
        let (what, verdict) = match asked.ask {
            Ask::Permission(_) => ("request", "rejected"),
            Ask::Form(_) => ("question", "declined"),
        };
        format!(
            "No answer within {}: the agent's {what} ({}) was {verdict}.",
            describe(self.timeout),
            asked.summary
        )
    }

    fn open_next(&mut self, asked: Asked) -> (Asked, String) {
        let within =
            |verdict: &str| format!(" (no answer within {} means {verdict})", describe(self.timeout));
        let shows = if asked.shows.is_empty() {
            String::new()
        } else {
            format!("{}\n", asked.shows)
        };
        let text = match &asked.ask {
            Ask::Permission(options) => format!(
                "The agent asks for permission: {}\n{shows}{}\nReply to this message with the number or the name of an option{}.",
                asked.summary,
                numbered_options(options),
                within("reject")
            ),
            Ask::Form(fields) => {
                let (listing, how) = form::describe(fields);
                let listing = if listing.is_empty() {
                    String::new()
                } else {
                    format!("{listing}\n")
                };
                format!(
                    "The agent asks: {}\n{listing}{how}{}.",
                    asked.summary,
                    within("decline")
                )
            }
        };
        self.open = Some(Open {
            asked: asked.clone(),
            posted: None,
        });
        (asked, text)
    }
}

/// The option an answer names: its number (1-based), its name, or its kind
/// (`allow once`, `reject_always`), case and punctuation aside.
pub(crate) fn choose(options: &[PermissionOption], answer: &str) -> Option<PermissionOption> {
    let words: Vec<&str> = answer
        .split_whitespace()
        .filter(|word| !word.starts_with("nostr:") && !word.starts_with('@'))
        .collect();
    let answer = form::normalize(&words.join(" "));
    if let Ok(number) = answer.parse::<usize>() {
        return number
            .checked_sub(1)
            .and_then(|index| options.get(index))
            .cloned();
    }
    options
        .iter()
        .find(|option| {
            form::normalize(&option.name) == answer || form::normalize(option.kind.as_str()) == answer
        })
        .cloned()
}

/// Options as the question lists them: `1. Allow once (allow once)`.
pub(crate) fn numbered_options(options: &[PermissionOption]) -> String {
    options
        .iter()
        .enumerate()
        .map(|(index, option)| format!("{}. {} ({})", index + 1, option.name, kind_label(&option.kind)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn kind_label(kind: &PermissionKind) -> String {
    kind.as_str().replace('_', " ")
}

fn describe(timeout: Duration) -> String {
    let secs = timeout.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{} s", secs.max(1))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn options() -> Vec<PermissionOption> {
        [
            ("a", "Allow once", PermissionKind::AllowOnce),
            ("b", "Always allow", PermissionKind::AllowAlways),
            ("c", "Reject once", PermissionKind::RejectOnce),
        ]
        .into_iter()
        .map(|(id, name, kind)| PermissionOption {
            id: id.into(),
            name: name.into(),
            kind,
        })
        .collect()
    }

    fn asked(ticket: QuestionTicket, summary: &str) -> Asked {
        Asked {
            ticket,
            summary: summary.into(),
            shows: String::new(),
            ask: Ask::Permission(options()),
        }
    }

    #[test]
    fn a_huge_summary_is_cut_and_says_how_much_is_not_shown() {
        assert_eq!(summary("rm -rf build"), "rm -rf build");
        let title = "é".repeat(MAX_SUMMARY_BYTES);
        let cut = summary(&title);
        assert!(cut.len() < MAX_SUMMARY_BYTES + 40, "{}", cut.len());
        assert!(cut.ends_with(&format!(
            "… [{} more bytes not shown]",
            title.len() - MAX_SUMMARY_BYTES
        )));
    }

    #[test]
    fn answers_by_number_name_or_kind() {
        let options = options();
        assert_eq!(choose(&options, "2").map(|o| o.id), Some("b".into()));
        assert_eq!(
            choose(&options, "nostr:npub1bot  1.").map(|o| o.id),
            Some("a".into())
        );
        assert_eq!(choose(&options, "reject ONCE").map(|o| o.id), Some("c".into()));
        assert_eq!(choose(&options, "allow_always").map(|o| o.id), Some("b".into()));
        assert_eq!(choose(&options, "4"), None);
        assert_eq!(choose(&options, "sure, go ahead"), None);
    }

    #[test]
    fn one_question_is_open_at_a_time_and_the_next_opens_when_it_closes() {
        let mut questions = Questions::new(Duration::from_secs(60));
        let Asking::Post(first, text) = questions.asked(asked(1, "rm -rf")) else {
            panic!("posted at once");
        };
        assert!(text.contains("rm -rf") && text.contains("1. Allow once (allow once)"));
        assert!(text.contains("no answer within 1 min means reject"), "{text}");
        assert_eq!(
            questions.asked(asked(2, "curl")),
            Asking::Wait,
            "waits behind the first"
        );
        assert_eq!(
            questions.waiting_on().as_deref(),
            Some("a permission question (rm -rf)"),
            "blocked while posting"
        );
        assert_eq!(
            questions.route("1"),
            None,
            "nothing to answer before it is posted"
        );

        let now = Instant::now();
        let event = EventId::from_slice(&[7; 32]).expect("id");
        questions.posted(first.ticket, event, now);
        assert_eq!(questions.open_event(), Some(event));
        assert_eq!(questions.deadline(), Some(now + Duration::from_secs(60)));
        assert!(questions.expired(now).is_none());
        assert_eq!(
            questions.expired(now + Duration::from_secs(60)).map(|q| q.ticket),
            Some(1)
        );
        assert!(matches!(
            questions.route("hmm"),
            Some((1, Routed::Unrecognized { .. }))
        ));
        assert!(
            matches!(questions.route("3"), Some((1, Routed::Answered(Answer::Option(option)))) if option.id == "c")
        );

        let (next, _) = questions.close(1).expect("the queued one opens");
        assert_eq!(next.summary, "curl");
        assert!(questions.close(2).is_none());
        assert_eq!(questions.waiting_on(), None);
    }

    #[test]
    fn a_permission_question_shows_what_is_approved_between_its_summary_and_options() {
        let mut questions = Questions::new(Duration::from_secs(60));
        let mut asked = asked(1, "Run");
        asked.shows = "$ rm -rf build".into();
        let Asking::Post(_, text) = questions.asked(asked) else {
            panic!("posted at once");
        };
        assert!(
            text.starts_with("The agent asks for permission: Run\n$ rm -rf build\n1. Allow once"),
            "{text}"
        );
        assert_eq!(
            questions.waiting_on().as_deref(),
            Some("a permission question (Run)"),
            "notices name the summary only"
        );
    }

    #[test]
    fn a_form_question_lists_its_fields_and_takes_a_filled_reply() {
        let mut questions = Questions::new(Duration::from_secs(30));
        let form = Asked {
            ticket: 1,
            summary: "Which colour?".into(),
            shows: String::new(),
            ask: Ask::Form(vec![form::tests::colours()]),
        };
        let Asking::Post(_, text) = questions.asked(form.clone()) else {
            panic!("posted at once");
        };
        assert_eq!(
            text,
            "The agent asks: Which colour?\n1. Red\n2. Deep blue\nReply to this message with the number or the name of a choice (no answer within 30 s means decline)."
        );
        assert_eq!(
            questions.waiting_on().as_deref(),
            Some("a question (Which colour?)")
        );
        questions.posted(1, EventId::from_slice(&[7; 32]).expect("id"), Instant::now());
        assert!(matches!(
            questions.route("purple"),
            Some((1, Routed::Unrecognized { correction })) if correction.contains("still open")
        ));
        let Some((1, Routed::Answered(answer))) = questions.route("2") else {
            panic!("a choice by number fills the form");
        };
        assert_eq!(answer.describe(), "colour: b");
        assert!(
            questions
                .timeout_text(&form)
                .ends_with("(Which colour?) was declined.")
        );
    }
}
