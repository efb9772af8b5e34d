//! Reading the daemon's JSON log as a stream of events: a cursor marks a
//! point in it, and waits see only the lines printed after their cursor, so
//! a wait never returns on something that happened before it started.

use std::cell::Cell;
use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use nostr_sdk::prelude::EventId;
use serde_json::Value;

use super::{PATIENCE, eventually};

/// A point in one daemon's log: the end of the last complete line when it
/// was taken. Take it *before* the action whose consequence you wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// Which log file (each start of a daemon writes its own).
    log: u32,
    offset: u64,
}

/// A structured log line to wait for or count: its `message`, and fields it
/// must carry (`fields` next to `message`, `span` in the enclosing span,
/// e.g. the turn's `event_id`).
#[derive(Debug, Clone)]
pub struct Line {
    message: String,
    fields: Vec<(String, Value)>,
    span: Vec<(String, Value)>,
}

impl Line {
    pub fn new(message: &str) -> Self {
        Line {
            message: message.to_owned(),
            fields: Vec::new(),
            span: Vec::new(),
        }
    }

    /// The line's own field `name` must equal `value`.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.fields.push((name.to_owned(), value.into()));
        self
    }

    /// The enclosing span's field `name` must equal `value`.
    pub fn in_span(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.span.push((name.to_owned(), value.into()));
        self
    }

    /// Logged inside the turn whose newest mention (when it started) is
    /// `newest`: the `turn` span names it in `event_id`.
    pub fn in_turn(self, newest: &EventId) -> Self {
        self.in_span("event_id", newest.to_hex())
    }

    /// The intake's decision not to take `event_id`, for `reason`.
    pub fn dropped(event_id: &EventId, reason: &str) -> Self {
        Line::new("event dropped")
            .with("event_id", event_id.to_hex())
            .with("reason", reason)
    }

    /// The intake took `event_id` as a mention to answer.
    pub fn accepted(event_id: &EventId) -> Self {
        Line::new("mention accepted").with("event_id", event_id.to_hex())
    }

    pub fn matches(&self, line: &Value) -> bool {
        line["message"] == self.message.as_str()
            && self.fields.iter().all(|(name, value)| line[name] == *value)
            && self.span.iter().all(|(name, value)| line["span"][name] == *value)
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.message)?;
        for (name, value) in &self.fields {
            write!(f, " {name}={value}")?;
        }
        for (name, value) in &self.span {
            write!(f, " span.{name}={value}")?;
        }
        Ok(())
    }
}

/// One daemon's log file (stderr, `--log-format json`).
#[derive(Debug)]
pub struct LogFile {
    pub path: PathBuf,
    id: u32,
}

impl LogFile {
    pub fn new(path: PathBuf, id: u32) -> Self {
        LogFile { path, id }
    }

    /// The whole log as text, for what only a text search can check (a
    /// secret that must appear nowhere, the count of raw lines).
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }

    /// The beginning of the log: everything this daemon printed is after it.
    pub fn start(&self) -> Cursor {
        Cursor {
            log: self.id,
            offset: 0,
        }
    }

    /// Now: only lines printed from here on are after it.
    pub fn cursor(&self) -> Cursor {
        self.complete_since(self.start()).1
    }

    /// The JSON lines printed after `from`, in order.
    pub fn lines(&self, from: Cursor) -> Vec<Value> {
        self.read_since(from).0
    }

    /// The lines after `from` that match `line`.
    pub fn matching(&self, from: Cursor, line: Line) -> Vec<Value> {
        self.lines(from)
            .into_iter()
            .filter(|json| line.matches(json))
            .collect()
    }

    /// Waits for the first line after `from` that matches `line` and
    /// returns it; panics with the log's tail after PATIENCE.
    pub async fn wait(&self, from: Cursor, line: Line) -> Value {
        self.wait_nth(from, 1, line).await
    }

    /// Waits for the `nth` (from 1) line after `from` that matches `line`
    /// and returns it; panics with the log's tail after PATIENCE.
    pub async fn wait_nth(&self, from: Cursor, nth: usize, line: Line) -> Value {
        assert!(nth >= 1, "lines are counted from 1");
        let (mut at, seen) = (from, Cell::new(0));
        let probe = async || {
            let (lines, next) = self.read_since(at);
            at = next;
            lines.into_iter().filter(|json| line.matches(json)).find(|_| {
                seen.set(seen.get() + 1);
                seen.get() == nth
            })
        };
        let describe = || {
            format!(
                "log line #{nth} {line} after byte {} of {} (saw {}); log tail:\n{}",
                from.offset,
                self.path.display(),
                seen.get(),
                self.tail(40)
            )
        };
        eventually(PATIENCE, probe, describe).await
    }

    /// The last `count` lines, for failure messages.
    pub fn tail(&self, count: usize) -> String {
        let text = self.text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(count)..].join("\n")
    }

    /// The complete JSON lines after `from`, and a cursor after them.
    fn read_since(&self, from: Cursor) -> (Vec<Value>, Cursor) {
        let (bytes, next) = self.complete_since(from);
        let lines = String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        (lines, next)
    }

    /// The bytes of the complete lines after `from`, and a cursor after
    /// them: a line still being written is left for the next read.
    fn complete_since(&self, from: Cursor) -> (Vec<u8>, Cursor) {
        assert_eq!(
            from.log,
            self.id,
            "a cursor of another log than {} (a cursor does not survive a restart)",
            self.path.display()
        );
        let mut bytes = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            file.seek(SeekFrom::Start(from.offset)).expect("seek the log");
            file.read_to_end(&mut bytes).expect("read the log");
        }
        let complete = bytes
            .iter()
            .rposition(|byte| *byte == b'\n')
            .map_or(0, |last| last + 1);
        bytes.truncate(complete);
        let next = Cursor {
            log: self.id,
            offset: from.offset + complete as u64,
        };
        (bytes, next)
    }
}
