//! Long answers cut into a numbered series of parts that each fit one event.
//!
//! Owns where an answer is cut and how its parts are labelled; knows nothing
//! of threading, signing or storing (the replier does that).
//!
//! Why a part is bounded by its size *as JSON*: a relay bounds an event by
//! its serialized size (strfry's default is 64 KiB, nostr-rs-relay's 128 KiB;
//! most public relays sit at 64 KiB), and a DM's rumor is JSON encrypted
//! with NIP-44 (at most 65,535 bytes of plaintext) into a seal, whose JSON
//! is encrypted again into the gift wrap; each layer pads the ciphertext
//! (up to a quarter) and grows it by a third in base64. Text that JSON
//! escapes (`"`, control characters, up to six bytes for one) grows the
//! same way, so the bytes a part takes in JSON are what is counted, never
//! its raw length. [`MAX_PART_JSON_BYTES`] keeps the gift wrap of the
//! largest part under 64 KiB; the unit tests build worst-case parts as a
//! DM, a note and a group message and check it.
//!
//! Where a part ends: at the last paragraph break (`\n\n`) in its second
//! half, else the last line break, else the last space, else at the last
//! character that fits. Parts are exact slices of the answer (nothing
//! trimmed), so stripping the labels and joining them gives it back.
//! A part of a series starts with its label, `(k/n) `; an answer that fits
//! one event goes out as it is, without one.

/// The most one part's text takes in JSON (escaped, without the quotes),
/// its label included.
pub(super) const MAX_PART_JSON_BYTES: usize = 24 * 1024;

/// Room kept in every part for its label: `(k/n) ` with k and n of up to
/// ten digits each.
const LABEL_ROOM_BYTES: usize = 24;

/// `text` as the contents of the events that carry it, in order.
pub(super) fn split(text: &str) -> Vec<String> {
    let chunks = chunks(text, MAX_PART_JSON_BYTES - LABEL_ROOM_BYTES);
    let total = chunks.len();
    if total == 1 {
        return vec![text.to_owned()];
    }
    chunks
        .iter()
        .enumerate()
        .map(|(index, chunk)| format!("({}/{total}) {chunk}", index + 1))
        .collect()
}

/// What ends a text cut to fit one event.
const CUT_MARKER: &str = "\n[cut: too long for one message]";

/// `text` as the content of one event (a question must be one event, as
/// answers reply to it): as it is when it fits, else its first part, cut
/// where a part of a series would be, with a line saying so. The cut text
/// with its marker fits the budget [`split`] gives an unlabelled text, so
/// building the event never makes two of it.
pub(super) fn cut(text: &str) -> String {
    let marker: usize = CUT_MARKER.chars().map(json_len).sum();
    let budget = MAX_PART_JSON_BYTES - LABEL_ROOM_BYTES - marker;
    let first = chunks(text, budget)[0];
    if first.len() == text.len() {
        return text.to_owned();
    }
    format!("{first}{CUT_MARKER}")
}

/// Cuts `text` into slices of at most `budget` bytes of JSON each (see the
/// module doc for where). `budget` must hold the widest character (six).
fn chunks(text: &str, budget: usize) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut rest = text;
    loop {
        let fits = fitting_prefix(rest, budget);
        if fits == rest.len() {
            chunks.push(rest);
            return chunks;
        }
        let cut = break_in(&rest[..fits]).unwrap_or(fits);
        chunks.push(&rest[..cut]);
        rest = &rest[cut..];
    }
}

/// The length of the longest prefix of `text` (on a character boundary)
/// whose JSON takes at most `budget` bytes.
fn fitting_prefix(text: &str, budget: usize) -> usize {
    let mut used = 0;
    for (at, character) in text.char_indices() {
        used += json_len(character);
        if used > budget {
            return at;
        }
    }
    text.len()
}

/// Where to end a part that can hold `window`: just after its last
/// paragraph break, line break or space in the second half.
fn break_in(window: &str) -> Option<usize> {
    let half = window.len() / 2;
    ["\n\n", "\n", " "].iter().find_map(|separator| {
        window
            .rfind(separator)
            .map(|at| at + separator.len())
            .filter(|&end| end > half)
    })
}

/// Bytes `character` takes inside a JSON string, as serde_json writes it.
fn json_len(character: char) -> usize {
    match character {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        '\0'..='\u{1f}' => 6,
        other => other.len_utf8(),
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{EventBuilder, JsonUtil, Keys, Kind, Tag, TagKind};

    use super::*;

    /// The event size that common relays accept (strfry's default).
    const RELAY_MAX_EVENT_BYTES: usize = 64 * 1024;

    /// The label of `part`, and its text.
    fn unlabel(part: &str) -> (&str, &str) {
        let (label, text) = part.split_once(") ").expect("a label");
        (&label[1..], text)
    }

    fn json_bytes(text: &str) -> usize {
        serde_json::to_string(text).unwrap().len() - 2
    }

    fn reassembled(parts: &[String]) -> String {
        parts.iter().map(|part| unlabel(part).1).collect()
    }

    /// Every kind of character JSON escapes or widens, the worst first.
    fn worst_case(bytes: usize) -> String {
        "\u{1}\"🦀\\"
            .chars()
            .cycle()
            .scan(0, |used, c| {
                *used += c.len_utf8();
                (*used <= bytes).then_some(c)
            })
            .collect()
    }

    #[test]
    fn json_len_counts_what_serde_json_writes() {
        let sample: String = (0u32..0x80)
            .filter_map(char::from_u32)
            .chain("é€🦀\u{7f}\u{2028}".chars())
            .collect();
        for character in sample.chars() {
            assert_eq!(
                json_len(character),
                json_bytes(&character.to_string()),
                "{character:?}"
            );
        }
    }

    #[test]
    fn a_text_for_one_event_is_cut_to_fit_and_says_so() {
        assert_eq!(cut("short"), "short");
        let long = "a line of a huge tool title\n".repeat(10_000);
        let one = cut(&long);
        assert!(json_bytes(&one) <= MAX_PART_JSON_BYTES, "{}", json_bytes(&one));
        assert!(one.ends_with(CUT_MARKER));
        assert!(long.starts_with(one.trim_end_matches(CUT_MARKER)));
        assert_eq!(
            split(&one),
            std::slice::from_ref(&one),
            "a cut text goes out as one event"
        );
        let quotes = worst_case(100_000);
        let cut_quotes = cut(&quotes);
        assert!(json_bytes(&cut_quotes) <= MAX_PART_JSON_BYTES);
        assert_eq!(split(&cut_quotes).len(), 1, "one event, escapes and all");
    }

    #[test]
    fn a_short_answer_is_one_unlabelled_part() {
        assert_eq!(split("the answer is 42"), ["the answer is 42"]);
        let fits = "x".repeat(MAX_PART_JSON_BYTES - LABEL_ROOM_BYTES);
        assert_eq!(split(&fits), std::slice::from_ref(&fits));
    }

    #[test]
    fn a_long_answer_is_cut_at_paragraphs_and_numbered() {
        let paragraph = format!("{}\nsecond line.\n\n", "word ".repeat(200));
        let text = paragraph.repeat(60);
        let parts = split(&text);
        assert!(parts.len() > 2, "{} parts", parts.len());
        let total = parts.len();
        for (index, part) in parts.iter().enumerate() {
            assert_eq!(unlabel(part).0, format!("{}/{total}", index + 1));
            assert!(json_bytes(part) <= MAX_PART_JSON_BYTES);
            if index + 1 < total {
                assert!(
                    part.ends_with("second line.\n\n"),
                    "part {index} ends mid-paragraph"
                );
            }
        }
        assert_eq!(reassembled(&parts), text);
    }

    #[test]
    fn without_paragraphs_lines_then_spaces_then_characters_are_the_cuts() {
        let lines = "a line of text\n".repeat(5000);
        let parts = split(&lines);
        assert!(
            parts[..parts.len() - 1]
                .iter()
                .all(|part| part.ends_with("text\n"))
        );
        assert_eq!(reassembled(&parts), lines);

        let words = "word ".repeat(10_000);
        let parts = split(&words);
        assert!(
            parts[..parts.len() - 1]
                .iter()
                .all(|part| part.ends_with("word "))
        );
        assert_eq!(reassembled(&parts), words);

        // No break at all, and four-byte characters: cut between characters.
        let crabs = "🦀".repeat(20_000);
        let parts = split(&crabs);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|part| json_bytes(part) <= MAX_PART_JSON_BYTES));
        assert_eq!(reassembled(&parts), crabs);
    }

    #[test]
    fn escaped_text_is_measured_as_json() {
        let quotes = worst_case(100_000);
        let parts = split(&quotes);
        assert!(parts.iter().all(|part| json_bytes(part) <= MAX_PART_JSON_BYTES));
        assert_eq!(reassembled(&parts), quotes);
        // A control character takes six bytes in JSON: many more parts than
        // its raw length alone would need.
        assert!(parts.len() > quotes.len() / MAX_PART_JSON_BYTES + 1);
    }

    #[tokio::test]
    async fn the_largest_worst_case_part_fits_a_dm_a_note_and_a_group_message() {
        let (bot, peer) = (Keys::generate(), Keys::generate());
        let whole = worst_case(256 * 1024);
        assert!(
            split(&whole)
                .iter()
                .all(|part| json_bytes(part) <= MAX_PART_JSON_BYTES)
        );
        // A part as large as the bound allows, label room spent on text.
        let largest = chunks(&whole, MAX_PART_JSON_BYTES)[0];
        assert!(
            json_bytes(largest) > MAX_PART_JSON_BYTES - 6,
            "the test reaches the bound"
        );
        let reply_to = Tag::event(nostr_sdk::prelude::EventId::all_zeros());
        let tags = [reply_to.clone(), reply_to, Tag::public_key(peer.public_key())];

        let wrap = EventBuilder::private_msg(&bot, peer.public_key(), largest, tags.clone())
            .await
            .expect("the largest part builds as a DM (NIP-44 holds it)");
        assert!(
            wrap.as_json().len() <= RELAY_MAX_EVENT_BYTES,
            "gift wrap {}",
            wrap.as_json().len()
        );

        for kind in [Kind::TextNote, Kind::Custom(9)] {
            let event = EventBuilder::new(kind, largest)
                .tags(tags.clone())
                .tag(Tag::custom(TagKind::h(), ["a-channel"]))
                .sign_with_keys(&bot)
                .expect("signs");
            assert!(
                event.as_json().len() <= RELAY_MAX_EVENT_BYTES,
                "{kind} {}",
                event.as_json().len()
            );
        }

        // Without the series the same answer cannot go out as a DM at all.
        assert!(
            EventBuilder::private_msg(&bot, peer.public_key(), whole, [])
                .await
                .is_err()
        );
    }
}
