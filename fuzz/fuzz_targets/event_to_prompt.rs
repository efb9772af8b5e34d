//! `event_to_prompt`: mentions as people can shape them (content, group
//! channel, tags) from a signed event, through the threading
//! (`mention::public_thread`, `mention::direct_thread`) into every text the
//! agent reads (`prompt::fresh_prompt`, `steer_text`, `merged_prompt`).
//!
//! Must hold for every input:
//! - the framing invariant: the only line break in a prompt is the `\n`
//!   the bridge writes (a person's `\r`, vertical tab, form feed, NEL,
//!   U+2028 or U+2029 starts a quoted line of its own), and every line of a
//!   prompt is either the bridge's
//!   (it starts with `BRIDGE_MARK`) or quoted (it starts with `>`), and the
//!   bridge's lines are exactly the ones the bridge means to write, in order:
//!   the context line, one header per message ("Message from …, event
//!   <id>:"), the framing lines. A person can never produce a bridge line;
//! - each message arrives whole: its quoted lines under its own header are
//!   its content's lines, split at every Unicode line break (with the mark
//!   defused when it holds one: no quoted line spells `acp` `bridge`, case
//!   and everything but letters and digits aside, unless `(quoted)`
//!   follows);
//! - the fallback's steer framing ends with exactly the native steer text;
//! - two mentions share a conversation key exactly when they belong to the
//!   same conversation (same channel, note thread or DM peer).

#![no_main]

use acp_bridge::SessionPolicy;
use acp_bridge::{
    BRIDGE_MARK, Framing, OPENING_BRACKETS, STEER_CLOSING, STEER_HEADER, fresh_prompt, merged_prompt, steer_text,
};
use acp_bridge::{Intent, Mention, Thread, direct_thread, public_thread};
use acp_bridge_fuzz::{MentionInput, Place, PromptInput};
use libfuzzer_sys::fuzz_target;
use nostr_sdk::{EventBuilder, Kind, Tag, TagKind, Timestamp};

fuzz_target!(|input: PromptInput| {
    let policy = if input.thread_sessions {
        SessionPolicy::Thread
    } else {
        SessionPolicy::Conversation
    };
    let framing = if input.interrupt {
        Framing::Interrupt
    } else {
        Framing::Steer
    };
    // Mentions the intake would drop (a group message without a plausible
    // `h` group id) never reach the framing.
    let working_on: Vec<Mention> = input.working_on.0.iter().filter_map(|m| mention(m, policy)).collect();
    let new: Vec<Mention> = input.new.0.iter().filter_map(|m| mention(m, policy)).collect();
    let all: Vec<Mention> = working_on.iter().chain(&new).cloned().collect();
    check_conversations(&all, policy);

    let mut fresh = Vec::new();
    if !all.is_empty() {
        fresh.push(Slot::Context);
    }
    fresh.extend(all.iter().map(Slot::Message));
    check_framing("fresh_prompt", &fresh_prompt(&all), &fresh);

    let steer = steer_text(&new);
    let mut slots = vec![Slot::Fixed(STEER_HEADER)];
    slots.extend(new.iter().map(Slot::Message));
    slots.push(Slot::Fixed(STEER_CLOSING));
    check_framing("steer_text", &steer, &slots);

    // The framing lines of a merged prompt, from the function itself: with
    // no messages it is exactly preamble, header and closing.
    let bare = merged_prompt(&[], &[], framing);
    let fixed: Vec<&str> = bare
        .lines()
        .map(|line| bridge_text(line).unwrap_or_else(|| panic!("a framing line is the bridge's: {bare:?}")))
        .collect();
    let [preamble, header, closing] = fixed[..] else {
        panic!("a bare merged prompt is preamble, header and closing: {bare:?}");
    };
    let merged = merged_prompt(&working_on, &new, framing);
    let mut slots = Vec::new();
    if !all.is_empty() {
        slots.push(Slot::Context);
    }
    slots.push(Slot::Fixed(preamble));
    slots.extend(working_on.iter().map(Slot::Message));
    slots.push(Slot::Fixed(header));
    slots.extend(new.iter().map(Slot::Message));
    slots.push(Slot::Fixed(closing));
    check_framing("merged_prompt", &merged, &slots);
    if framing == Framing::Steer {
        assert_eq!((header, closing), (STEER_HEADER, STEER_CLOSING));
        assert!(
            merged.ends_with(&steer),
            "the fallback's steer framing ends with the native steer text:\n{merged}"
        );
    }
});

/// The mention the intake would build from this input's event.
fn mention(input: &MentionInput, policy: SessionPolicy) -> Option<Mention> {
    let keys = input.author.keys();
    let created_at = Timestamp::from_secs(u64::from(input.created_at));
    let content = input.content.as_str();
    let mut tags = Vec::new();
    if let Place::Group { channel } = &input.place {
        tags.push(Tag::custom(TagKind::h(), [channel.as_str()]));
    }
    tags.extend(
        input
            .tags
            .0
            .iter()
            .filter_map(|fields| Tag::parse(fields.0.iter().map(|field| field.as_str())).ok()),
    );
    let (event_id, kind, (thread, replies_to)) = match &input.place {
        Place::Group { .. } | Place::Note => {
            let kind = match input.place {
                Place::Group { .. } => Kind::Custom(9),
                _ => Kind::TextNote,
            };
            let event = EventBuilder::new(kind, content)
                .tags(tags)
                .custom_created_at(created_at)
                .sign_with_keys(keys)
                .expect("signing with a fixed key");
            let threading = public_thread(&event)?;
            (event.id, kind, threading)
        }
        Place::Direct => {
            let mut rumor = EventBuilder::new(Kind::PrivateDirectMessage, content)
                .tags(tags)
                .custom_created_at(created_at)
                .build(keys.public_key());
            let rumor_id = rumor.id();
            let threading = direct_thread(keys.public_key(), &rumor, rumor_id);
            (rumor_id, Kind::PrivateDirectMessage, threading)
        }
    };
    match (&input.place, &thread) {
        (
            Place::Group { channel },
            Thread::Group {
                channel: read,
                mention,
                ..
            },
        ) => {
            assert_eq!(read, channel.as_str(), "the channel is the first h tag");
            assert_eq!(*mention, event_id);
        }
        (Place::Note, Thread::Note { mention, .. }) => assert_eq!(*mention, event_id),
        (Place::Direct, Thread::Direct { peer, message }) => {
            assert_eq!(*peer, keys.public_key());
            assert_eq!(*message, event_id);
        }
        (place, thread) => panic!("a {place:?} mention threaded as {thread:?}"),
    }
    Some(Mention {
        event_id,
        author: keys.public_key(),
        kind,
        created_at,
        content: content.to_owned(),
        conversation: thread.conversation(policy, None),
        thread,
        replies_to,
        from_owner: input.from_owner,
        from_sibling: input.from_sibling,
        from_allowlist: false,
        chain_depth: 0,
        accepted_at: 0,
        origin: None,
        intent: Intent::Turn,
        media: Vec::new(),
    })
}

/// Conversation keys are equal exactly when the conversations are.
fn check_conversations(mentions: &[Mention], policy: SessionPolicy) {
    for (index, a) in mentions.iter().enumerate() {
        for b in &mentions[index + 1..] {
            let same = match (&a.thread, &b.thread) {
                (
                    Thread::Group {
                        channel: a_channel,
                        root: a_root,
                        ..
                    },
                    Thread::Group {
                        channel: b_channel,
                        root: b_root,
                        ..
                    },
                ) => a_channel == b_channel && (policy == SessionPolicy::Conversation || a_root == b_root),
                (Thread::Note { root: a_root, .. }, Thread::Note { root: b_root, .. }) => a_root == b_root,
                (Thread::Direct { peer: a_peer, .. }, Thread::Direct { peer: b_peer, .. }) => {
                    a_peer == b_peer
                }
                _ => false,
            };
            assert_eq!(
                a.conversation == b.conversation,
                same,
                "conversation keys {:?} and {:?} for {:?} and {:?}",
                a.conversation,
                b.conversation,
                a.thread,
                b.thread
            );
        }
    }
}

/// One line the bridge writes, in the order it writes them.
#[derive(Debug)]
enum Slot<'a> {
    /// Where the conversation takes place (its wording is not checked).
    Context,
    /// A framing line, exactly this text after the mark.
    Fixed(&'a str),
    /// A message's header, then its quoted content.
    Message(&'a Mention),
}

/// The text after `BRIDGE_MARK` and one space, when `line` is the bridge's.
fn bridge_text(line: &str) -> Option<&str> {
    line.strip_prefix(BRIDGE_MARK)?.strip_prefix(' ')
}

/// Every Unicode mandatory line break (UAX #14: BK, CR, LF, NL).
const LINE_BREAKS: [char; 7] = ['\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{2028}', '\u{2029}'];

/// `text` split at every Unicode line break (`\r\n` is one), a final
/// break ending the last line.
fn unicode_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if LINE_BREAKS.contains(&c) {
            lines.push(&text[start..at]);
            start = at + c.len_utf8();
            if c == '\r' && chars.next_if(|(_, next)| *next == '\n').is_some() {
                start += 1;
            }
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// The letters and digits of `line`, lowercase, everything else left out.
fn letters(line: &str) -> String {
    line.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// True when `line` spells the mark, an opening bracket then the mark's
/// name (with anything but letters and digits between), without
/// `(quoted)` after it.
fn holds_a_live_mark(line: &str) -> bool {
    line.char_indices()
        .filter(|(_, c)| OPENING_BRACKETS.contains(c))
        .any(|(at, bracket)| {
            let letters = letters(&line[at + bracket.len_utf8()..]);
            letters.starts_with("acpbridge") && !letters["acpbridge".len()..].starts_with("quoted")
        })
}

fn check_framing(what: &str, prompt: &str, slots: &[Slot<'_>]) {
    assert!(
        !prompt.contains(|c: char| c != '\n' && LINE_BREAKS.contains(&c)),
        "{what}: a line break the bridge did not write\n--- prompt ---\n{prompt:?}"
    );
    let lines: Vec<&str> = prompt.lines().collect();
    for line in &lines {
        assert!(
            line.starts_with(BRIDGE_MARK) || line.starts_with('>'),
            "{what}: a line that is neither the bridge's nor quoted: {line:?}\n--- prompt ---\n{prompt}"
        );
    }
    let mut next = lines.iter().copied().peekable();
    for slot in slots {
        let line = next.next().unwrap_or_else(|| {
            panic!("{what}: missing the bridge line for {slot:?}\n--- prompt ---\n{prompt}")
        });
        let said = bridge_text(line).unwrap_or_else(|| {
            panic!(
                "{what}: {line:?} stands where the bridge line for {slot:?} belongs\n--- prompt ---\n{prompt}"
            )
        });
        match slot {
            Slot::Context => {}
            Slot::Fixed(text) => assert_eq!(said, *text, "{what}: a framing line\n--- prompt ---\n{prompt}"),
            Slot::Message(mention) => {
                assert!(
                    said.contains("Message from") && said.contains(&mention.event_id.to_hex()),
                    "{what}: {line:?} stands where the header of {} belongs\n--- prompt ---\n{prompt}",
                    mention.event_id
                );
                let mut quoted = Vec::new();
                while let Some(line) = next.next_if(|line| line.starts_with('>')) {
                    quoted.push(line.strip_prefix("> ").unwrap_or(&line[1..]));
                }
                check_quoted(what, prompt, &mention.content, &quoted);
            }
        }
    }
    if let Some(extra) = next.next() {
        panic!("{what}: {extra:?} follows the bridge's last line\n--- prompt ---\n{prompt}");
    }
}

/// A message's quoted lines carry its content, line for line.
fn check_quoted(what: &str, prompt: &str, content: &str, quoted: &[&str]) {
    for line in quoted {
        assert!(
            !line.contains(BRIDGE_MARK) && !holds_a_live_mark(line),
            "{what}: the mark is not defused in {line:?}\n--- prompt ---\n{prompt}"
        );
    }
    let expected: Vec<&str> = if content.is_empty() {
        vec![""]
    } else {
        unicode_lines(content)
    };
    assert_eq!(
        quoted.len(),
        expected.len(),
        "{what}: a message arrives whole, line for line\n--- prompt ---\n{prompt}"
    );
    for (line, original) in quoted.iter().zip(&expected) {
        assert!(
            line == original || only_defused(line, original),
            "{what}: {original:?} arrived as {line:?}\n--- prompt ---\n{prompt}"
        );
    }
}

/// What a look-alike of the mark's name becomes in quoted text.
const DEFUSED_NAME: &str = "acp-bridge (quoted)";

/// True when `line` is `original` with only some runs replaced by
/// [`DEFUSED_NAME`]: everything else in it is `original`'s text, in order.
fn only_defused(line: &str, original: &str) -> bool {
    if !line.contains(DEFUSED_NAME) {
        return false;
    }
    let mut rest = original;
    let mut pieces = line.split(DEFUSED_NAME).peekable();
    let first = pieces.next().unwrap_or_default();
    let Some(after_first) = rest.strip_prefix(first) else {
        return false;
    };
    rest = after_first;
    while let Some(piece) = pieces.next() {
        if pieces.peek().is_none() {
            return rest.ends_with(piece);
        }
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}
