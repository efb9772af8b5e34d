//! `--frame-log-dir`: a record of every frame received from the client, so a
//! test can count what a bridge sent (for example its `session/cancel`s)
//! without a proxy between the two.
//!
//! One file per agent process, `DIR/<pid>.jsonl`, opened for appending; each
//! frame is written as one compact JSON line before it is acted on, so the
//! record is complete by the time the client sees any effect of the frame.
//! Lines that are not JSON are not frames and are not recorded.

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
    /// Creates `dir` if needed and opens this process's file in it.
    pub(crate) async fn open(dir: &Path) -> io::Result<Self> {
        tokio::fs::create_dir_all(dir).await?;
        let path = dir.join(format!("{}.jsonl", std::process::id()));
        let file = OpenOptions::new().create(true).append(true).open(&path).await?;
        Ok(Self { file })
    }

    pub(crate) async fn record(&mut self, frame: &Value) -> io::Result<()> {
        let mut line = frame.to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).await?;
        self.file.flush().await
    }
}
