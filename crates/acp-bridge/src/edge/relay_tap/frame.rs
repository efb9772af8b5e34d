//! The head of a relay frame, read in place: its label and, for the frames
//! the tap may route, the subscription id and the event's JSON text.
//!
//! The SDK reads every relay message into a `serde_json::Value` tree and
//! then into its types, a tree built and dropped per message. Here a frame
//! is scanned once, borrowing from the text: an event's fields stay slices
//! of the frame ([`EventView`]) until it is known to be wanted, and only
//! then are its key, id, signature and tags decoded into nostr's `Event`.
//! The bot's own events, dropped on their `pubkey`, cost that one scan. A
//! frame this module does not route (`OK`, `AUTH`, `NOTICE`, another
//! subscription's) costs one scan and goes on to the SDK untouched.

use std::borrow::Cow;
use std::fmt;

use nostr_sdk::prelude::{Event, EventId, Kind, PublicKey, Signature, Tags, Timestamp};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A relay frame's head: what the tap needs to decide where it goes.
#[derive(Debug)]
pub(super) enum Head<'a> {
    /// `["EVENT", <subscription id>, <event>]`, the event's fields as
    /// written.
    Event {
        subscription: Cow<'a, str>,
        event: EventView<'a>,
    },
    /// `["EOSE", <subscription id>]`.
    EndOfStored { subscription: Cow<'a, str> },
    /// `["CLOSED", <subscription id>, <message>]`.
    Closed {
        subscription: Cow<'a, str>,
        message: Cow<'a, str>,
    },
    /// `["EVENT", <subscription id>, <not a NIP-01 event>]`.
    Unreadable { subscription: Cow<'a, str> },
    /// Any other frame, or one of the above that is malformed: the SDK's.
    Other,
}

impl<'a> Head<'a> {
    /// Reads a frame's head; a frame that is not a JSON array is `Other`
    /// (the SDK reports it as it always did).
    pub(super) fn read(frame: &'a str) -> Self {
        serde_json::from_str(frame).unwrap_or_else(|_| match serde_json::from_str(frame) {
            Ok(EventEnvelope("EVENT", subscription, _)) => Head::Unreadable { subscription },
            _ => Head::Other,
        })
    }

    /// The subscription the frame belongs to, when it is one the tap routes.
    pub(super) fn subscription(&self) -> Option<&str> {
        match self {
            Head::Event { subscription, .. }
            | Head::EndOfStored { subscription }
            | Head::Closed { subscription, .. }
            | Head::Unreadable { subscription } => Some(subscription),
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

/// An `EVENT` frame read no further than its subscription id: what is
/// left of one whose event does not read.
#[derive(Deserialize)]
struct EventEnvelope<'a>(&'a str, #[serde(borrow)] Cow<'a, str>, IgnoredAny);

fn next<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(seq: &mut A) -> Result<T, A::Error> {
    seq.next_element()?
        .ok_or_else(|| de::Error::custom("the relay message ends early"))
}

/// An event's fields as the frame writes them, undecoded: what NIP-01
/// puts in an event, each a slice of the frame (a string with escapes is
/// copied), the tags unread.
#[derive(Debug, Deserialize)]
pub(super) struct EventView<'a> {
    #[serde(borrow)]
    pub(super) id: Cow<'a, str>,
    #[serde(borrow)]
    pubkey: Cow<'a, str>,
    created_at: u64,
    kind: u16,
    #[serde(borrow)]
    tags: &'a RawValue,
    #[serde(borrow)]
    content: Cow<'a, str>,
    #[serde(borrow)]
    sig: Cow<'a, str>,
}

/// An event whose fields do not decode (a bad key, id, signature or tag).
#[derive(Debug)]
pub(super) struct Undecodable;

impl EventView<'_> {
    /// Whether `hex` wrote it (the key as written: lowercase per NIP-01,
    /// compared without case).
    pub(super) fn is_by(&self, hex: &str) -> bool {
        self.pubkey.eq_ignore_ascii_case(hex)
    }

    /// The event, decoded as nostr's own `Deserialize` would (the key
    /// checked to be a curve point); its signature is not verified.
    pub(super) fn decode(self) -> Result<Event, Undecodable> {
        let id = EventId::from_hex(self.id.as_ref()).map_err(|_| Undecodable)?;
        let author = PublicKey::from_hex(self.pubkey.as_ref()).map_err(|_| Undecodable)?;
        let sig: Signature = self.sig.parse().map_err(|_| Undecodable)?;
        let tags: Tags = serde_json::from_str(self.tags.get()).map_err(|_| Undecodable)?;
        Ok(Event::new(
            id,
            author,
            Timestamp::from_secs(self.created_at),
            Kind::from(self.kind),
            tags,
            self.content.into_owned(),
            sig,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use nostr_sdk::prelude::{EventBuilder, JsonUtil, Keys, Tag};

    fn signed() -> Event {
        EventBuilder::text_note("say \"hi\"\n")
            .tag(Tag::hashtag("x"))
            .sign_with_keys(&Keys::generate())
            .expect("sign")
    }

    #[test]
    fn an_event_frame_decodes_to_the_event_it_carries() {
        let event = signed();
        let frame = format!(r#"["EVENT","acp-bridge-mentions",{}]"#, event.as_json());
        let Head::Event {
            subscription,
            event: view,
        } = Head::read(&frame)
        else {
            panic!("an EVENT frame");
        };
        assert_eq!(subscription, "acp-bridge-mentions");
        assert!(view.is_by(&event.pubkey.to_hex()));
        assert!(view.is_by(&event.pubkey.to_hex().to_uppercase()));
        assert!(!view.is_by(&Keys::generate().public_key().to_hex()));
        let decoded = view.decode().expect("decodes");
        assert_eq!(decoded, event);
        assert!(decoded.verify().is_ok(), "the same bytes as signed");
    }

    #[test]
    fn an_event_with_a_field_that_does_not_decode_is_undecodable() {
        let json = signed().as_json();
        let bad_key = json.replacen(r#""pubkey":""#, r#""pubkey":"zz"#, 1);
        let no_sig = json.replacen(r#""sig":""#, r#""sig_":""#, 1);
        let frame = format!(r#"["EVENT","s",{bad_key}]"#);
        let Head::Event { event: view, .. } = Head::read(&frame) else {
            panic!("an EVENT frame");
        };
        assert!(view.decode().is_err(), "a key that is no hex");
        let frame = format!(r#"["EVENT","s",{no_sig}]"#);
        assert!(
            matches!(Head::read(&frame), Head::Unreadable { subscription } if subscription == "s"),
            "a missing field is no event, but still the subscription's"
        );
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
}
