//! `--frame-log-dir`: a record of every frame received from the client, so a
//! test can count what a bridge sent (for example its `session/cancel`s)
//! without a proxy between the two.
//!
//! One file per agent process, `DIR/<pid>.jsonl`, opened for appending; each
//! frame is written as one compact JSON line before it is acted on, so the
//! record is complete by the time the client sees any effect of the frame.
//! Lines that are not JSON are not frames and are not recorded.
//!
//! Each record also carries `receivedAtUnixNs`, the wall-clock time the frame
//! was read: benchmarks compare it with the time a bridge received the
//! mention that caused the frame (same machine, same clock).

use std::io;
use std::path::Path;

use serde_json::Value;
use tokio::fs::{File, OpenOptions};
use tokio::io::AsyncWriteExt;

#[derive(Debug)]
pub(crate) struct FrameLog {
    file: File,
}

impl FrameLog {
    /// Creates `dir` if needed and opens this process's file in it. The
    /// name has the start time beside the pid: agents in PID namespaces of
    /// their own all have the same pid.
    pub(crate) async fn open(dir: &Path) -> io::Result<Self> {
        tokio::fs::create_dir_all(dir).await?;
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let path = dir.join(format!("{}-{started}.jsonl", std::process::id()));
        let file = OpenOptions::new().create(true).append(true).open(&path).await?;
        Ok(Self { file })
    }

    pub(crate) async fn record(&mut self, frame: &Value) -> io::Result<()> {
        let received_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let mut stamped = frame.clone();
        if let Some(object) = stamped.as_object_mut() {
            object.insert("receivedAtUnixNs".to_owned(), Value::from(received_at as u64));
        }
        let mut line = stamped.to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).await?;
        self.file.flush().await
    }
}
