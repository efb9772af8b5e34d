//! Bounds the log records of the nostr crates.
//!
//! The SDK logs every relay message it cannot handle at error level with
//! the message in full: a relay that does not verify signatures, or that
//! passes on events with thousands of tags, can make each of those records
//! megabytes long, and a hostile one can send them in a loop. Records from
//! the `nostr*` targets are therefore cut to [`MAX_SDK_RECORD_BYTES`]: every
//! string in a JSON record is kept to [`KEPT_FIELD_BYTES`] and the record
//! says how long it was (`truncated_from_bytes`); a pretty record is cut and
//! ends with the same note. Our own records are left whole: they carry no
//! relay's bytes unbounded.

use std::io::{self, Write};

use serde_json::{Map, Value};
use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

/// A record of the nostr crates is at most this long, its newline included.
pub(super) const MAX_SDK_RECORD_BYTES: usize = 2048;
/// Each string of a cut JSON record keeps at most this many bytes.
const KEPT_FIELD_BYTES: usize = 256;
/// Fields a cut JSON record keeps when keeping every field is still too long.
const ESSENTIAL_FIELDS: [&str; 4] = ["timestamp", "level", "target", "message"];
/// Targets whose records are bounded.
const SDK_TARGET_PREFIX: &str = "nostr";

/// Makes writers of `M` that bound the records of the nostr crates.
#[derive(Debug, Clone)]
pub(super) struct BoundSdkRecords<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for BoundSdkRecords<M> {
    type Writer = RecordWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RecordWriter::Whole(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        let inner = self.0.make_writer_for(meta);
        if meta.target().starts_with(SDK_TARGET_PREFIX) {
            RecordWriter::Bounded {
                inner,
                record: Vec::new(),
            }
        } else {
            RecordWriter::Whole(inner)
        }
    }
}

/// Writes one record: as it is, or collected and bounded when dropped.
#[derive(Debug)]
pub(super) enum RecordWriter<W: Write> {
    Whole(W),
    Bounded { inner: W, record: Vec<u8> },
}

impl<W: Write> Write for RecordWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            RecordWriter::Whole(inner) => inner.write(bytes),
            RecordWriter::Bounded { record, .. } => {
                record.extend_from_slice(bytes);
                Ok(bytes.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            RecordWriter::Whole(inner) | RecordWriter::Bounded { inner, .. } => inner.flush(),
        }
    }
}

impl<W: Write> Drop for RecordWriter<W> {
    fn drop(&mut self) {
        if let RecordWriter::Bounded { inner, record } = self
            && !record.is_empty()
        {
            // Nowhere to report a failed log write.
            let _ = inner.write_all(&bound(record));
        }
    }
}

/// `record` (one line), cut to [`MAX_SDK_RECORD_BYTES`] when longer.
fn bound(record: &[u8]) -> Vec<u8> {
    if record.len() <= MAX_SDK_RECORD_BYTES {
        return record.to_vec();
    }
    let note = format!("truncated from {} bytes", record.len());
    if let Ok(mut fields) = serde_json::from_slice::<Map<String, Value>>(record) {
        fields.values_mut().for_each(cut_strings);
        fields.insert("truncated_from_bytes".into(), record.len().into());
        if let Some(line) = json_line(&fields) {
            return line;
        }
        fields.retain(|name, _| ESSENTIAL_FIELDS.contains(&name.as_str()) || name == "truncated_from_bytes");
        if let Some(line) = json_line(&fields) {
            return line;
        }
    }
    let text = String::from_utf8_lossy(record);
    let kept = cut(text.trim_end(), MAX_SDK_RECORD_BYTES - note.len() - " … \n".len());
    format!("{kept} … {note}\n").into_bytes()
}

/// The record as a JSON line, when it fits.
fn json_line(fields: &Map<String, Value>) -> Option<Vec<u8>> {
    let mut line = serde_json::to_vec(fields).ok()?;
    line.push(b'\n');
    (line.len() <= MAX_SDK_RECORD_BYTES).then_some(line)
}

fn cut_strings(value: &mut Value) {
    match value {
        Value::String(text) if text.len() > KEPT_FIELD_BYTES => {
            *text = format!("{}…", cut(text, KEPT_FIELD_BYTES));
        }
        Value::Array(items) => items.iter_mut().for_each(cut_strings),
        Value::Object(fields) => fields.values_mut().for_each(cut_strings),
        _ => {}
    }
}

/// The longest prefix of `text` of at most `bytes` bytes.
fn cut(text: &str, bytes: usize) -> &str {
    &text[..text.floor_char_boundary(bytes)]
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::telemetry::{LogFormat, subscriber};

    /// A log sink the test reads back.
    #[derive(Debug, Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn lines(&self) -> Vec<String> {
            let bytes = self.0.lock().expect("sink").clone();
            String::from_utf8(bytes)
                .expect("utf-8")
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    /// What the SDK logs for a relay message it cannot handle, in full.
    fn huge_relay_message() -> String {
        let tags: Vec<String> = (0..5000).map(|n| format!("[\"t\",\"tag{n}\"]")).collect();
        format!(
            "[\"EVENT\",\"sub\",{{\"tags\":[{}],\"sig\":\"bad\"}}]",
            tags.join(",")
        )
    }

    fn log_both(format: LogFormat) -> Vec<String> {
        let sink = Sink::default();
        let writer = {
            let sink = sink.clone();
            move || sink.clone()
        };
        let info = "info".parse().expect("a level");
        let subscriber = subscriber(format, &info, BoundSdkRecords(writer));
        let message = huge_relay_message();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(
                target: "nostr_relay_pool::relay::inner",
                url = "ws://relay.example", msg = %message, error = "bad signature",
                "Impossible to handle relay message."
            );
            tracing::info!(target: "acp_bridge::daemon", text = %message, "ours");
        });
        sink.lines()
    }

    #[test]
    fn sdk_records_are_bounded_and_say_so_ours_are_whole() {
        let lines = log_both(LogFormat::Json);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let sdk: Value = serde_json::from_str(&lines[0]).expect("still one JSON object");
        println!(
            "SDK record: {} bytes → {} bytes",
            sdk["truncated_from_bytes"],
            lines[0].len() + 1
        );
        assert!(lines[0].len() < MAX_SDK_RECORD_BYTES, "{} bytes", lines[0].len());
        assert_eq!(sdk["message"], "Impossible to handle relay message.");
        assert_eq!(sdk["error"], "bad signature");
        assert!(sdk["truncated_from_bytes"].as_u64().expect("the original length") > 50_000);
        assert!(
            sdk["msg"]
                .as_str()
                .expect("msg")
                .starts_with("[\"EVENT\",\"sub\"")
        );
        assert!(lines[1].len() > 50_000, "our own record is whole");

        let pretty = log_both(LogFormat::Pretty);
        assert!(
            pretty[0].len() < MAX_SDK_RECORD_BYTES,
            "{} bytes",
            pretty[0].len()
        );
        assert!(pretty[0].contains("truncated from"), "{}", pretty[0]);
    }
}
