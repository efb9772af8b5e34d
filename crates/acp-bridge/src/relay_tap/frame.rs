//! The head of a relay frame, read in place: its label and, for the frames
//! the tap may route, the subscription id and the event's JSON text.
//!
//! The SDK reads every relay message into a `serde_json::Value` tree and
//! then into its types, a tree built and dropped per message. Here a frame
//! is scanned once, borrowing from the text: the event stays a slice of
//! the frame until it is known to be wanted, and is then read straight into
//! nostr's `Event` (its own `Deserialize`, no tree). A frame this module
//! does not route (`OK`, `AUTH`, `NOTICE`, another subscription's) costs
//! one scan and goes on to the SDK untouched.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A relay frame's head: what the tap needs to decide where it goes.
#[derive(Debug)]
pub(super) enum Head<'a> {
    /// `["EVENT", <subscription id>, <event>]`, the event left unread.
    Event {
        subscription: Cow<'a, str>,
        event: &'a RawValue,
    },
    /// `["EOSE", <subscription id>]`.
    EndOfStored { subscription: Cow<'a, str> },
    /// `["CLOSED", <subscription id>, <message>]`.
    Closed {
        subscription: Cow<'a, str>,
        message: Cow<'a, str>,
    },
    /// Any other frame, or one of the above that is malformed: the SDK's.
    Other,
}

impl<'a> Head<'a> {
    /// Reads a frame's head; a frame that is not a JSON array is `Other`
    /// (the SDK reports it as it always did).
    pub(super) fn read(frame: &'a str) -> Self {
        serde_json::from_str(frame).unwrap_or(Head::Other)
    }

    /// The subscription the frame belongs to, when it is one the tap routes.
    pub(super) fn subscription(&self) -> Option<&str> {
        match self {
            Head::Event { subscription, .. }
            | Head::EndOfStored { subscription }
            | Head::Closed { subscription, .. } => Some(subscription),
            Head::Other => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Head<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(HeadVisitor)
    }
}

struct HeadVisitor;

impl<'de> Visitor<'de> for HeadVisitor {
    type Value = Head<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a relay message (a JSON array)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let label: Cow<'de, str> = next(&mut seq)?;
        let head = match label.as_ref() {
            "EVENT" => Head::Event {
                subscription: next(&mut seq)?,
                event: next(&mut seq)?,
            },
            "EOSE" => Head::EndOfStored {
                subscription: next(&mut seq)?,
            },
            "CLOSED" => Head::Closed {
                subscription: next(&mut seq)?,
                // A CLOSED without a message is the SDK's to refuse too.
                message: next(&mut seq)?,
            },
            _ => Head::Other,
        };
        // serde_json insists the whole array is read.
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(head)
    }
}

fn next<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(seq: &mut A) -> Result<T, A::Error> {
    seq.next_element()?
        .ok_or_else(|| de::Error::custom("the relay message ends early"))
}

/// An event's id and author, read without reading the rest of it into
/// memory: the bot's own events are dropped on this alone.
#[derive(Debug, Deserialize)]
pub(super) struct Author<'a> {
    #[serde(borrow)]
    pub(super) id: Cow<'a, str>,
    #[serde(borrow)]
    pubkey: Cow<'a, str>,
}

impl<'a> Author<'a> {
    /// The event's id and author's key as hex, as written (lowercase per
    /// NIP-01), or `None` when the event lacks either.
    pub(super) fn of(event: &'a RawValue) -> Option<Self> {
        serde_json::from_str(event.get()).ok()
    }

    pub(super) fn is(&self, hex: &str) -> bool {
        self.pubkey.eq_ignore_ascii_case(hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_frame_keeps_its_event_as_text() {
        let frame = r#"["EVENT","acp-bridge-mentions",{"id":"ab","kind":1, "tags":[["p","x"]]}]"#;
        let Head::Event { subscription, event } = Head::read(frame) else {
            panic!("an EVENT frame");
        };
        assert_eq!(subscription, "acp-bridge-mentions");
        assert_eq!(event.get(), r#"{"id":"ab","kind":1, "tags":[["p","x"]]}"#);
    }

    #[test]
    fn end_of_stored_and_closed_name_their_subscription() {
        assert!(matches!(
            Head::read(r#"["EOSE","s1"]"#),
            Head::EndOfStored { subscription } if subscription == "s1"
        ));
        let closed = Head::read(r#" [ "CLOSED" , "s\"2" , "auth-required: sign in" ] "#);
        assert!(matches!(
            closed,
            Head::Closed { subscription, message } if subscription == "s\"2" && message == "auth-required: sign in"
        ));
    }

    #[test]
    fn other_frames_and_malformed_ones_are_left_to_the_sdk() {
        for frame in [
            r#"["OK","ab",true,""]"#,
            r#"["AUTH","challenge"]"#,
            r#"["NOTICE","hello"]"#,
            r#"["EVENT","only-an-id"]"#,
            r#"["EOSE"]"#,
            r#"["CLOSED","s1"]"#,
            r#"{"not":"an array"}"#,
            "not json",
            r#"["EVENT","s1",{"unterminated":"#,
        ] {
            assert!(matches!(Head::read(frame), Head::Other), "{frame}");
        }
    }

    #[test]
    fn a_label_written_with_escapes_is_still_read() {
        let frame = r#"["\u0045OSE","s1"]"#;
        assert_eq!(Head::read(frame).subscription(), Some("s1"));
    }

    #[test]
    fn the_author_is_read_without_the_rest() {
        let event =
            RawValue::from_string(r#"{"content":"hi","pubkey":"ABcd","id":"12","tags":[]}"#.to_owned())
                .unwrap();
        let author = Author::of(&event).expect("a pubkey");
        assert_eq!(author.id, "12");
        assert!(author.is("abcd"));
        assert!(!author.is("abce"));
        let nameless = RawValue::from_string(r#"{"content":"hi","id":"12"}"#.to_owned()).unwrap();
        assert!(Author::of(&nameless).is_none());
    }
}
