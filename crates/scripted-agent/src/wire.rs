//! Newline-delimited framing over the two byte streams, and the one writer
//! task that owns the output.
//!
//! Edges, inbound: lines end at `\n` (a trailing `\r` is dropped); a final
//! line without `\n` at EOF still counts; a line longer than the limit is
//! skipped whole and reported as [`Inbound::Oversized`] instead of growing
//! the buffer without bound. Bytes are not checked here: a non-UTF-8 or
//! non-JSON line is the caller's parse error, and never ends the stream.
//!
//! Edges, outbound: every line anyone sends goes through [`Outbox`] to the
//! writer task, which writes it with its newline and flushes before taking
//! the next, so frames never interleave. A write error means the client is
//! gone: the writer stops and every later send fails with [`ClientGone`].

use std::io;

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

use crate::rpc::{self, RpcError};

/// Longest client line we buffer; longer ones are skipped unread.
pub(crate) const MAX_INBOUND_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Lines waiting for the writer. When the client stops reading, senders wait
/// here instead of piling frames up in memory.
const OUTBOX_CAPACITY_LINES: usize = 1024;

/// One line from the client.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// The line's bytes without its line ending.
    Line(BytesMut),
    /// A line longer than the limit, skipped; `bytes` counts what was skipped.
    Oversized { bytes: usize },
}

/// Splits the client's byte stream into lines (see the module doc for edges).
#[derive(Debug)]
pub(crate) struct LineDecoder {
    max_line_bytes: usize,
    /// Bytes of the buffer already searched for `\n`, so a long line arriving
    /// in pieces is scanned once.
    scanned: usize,
    /// Bytes of an oversized line dropped so far; non-zero while skipping.
    skipped: usize,
}

impl LineDecoder {
    pub(crate) fn new(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes,
            scanned: 0,
            skipped: 0,
        }
    }

    fn finish_line(&mut self, mut line: BytesMut) -> Inbound {
        self.scanned = 0;
        if self.skipped > 0 || line.len() > self.max_line_bytes {
            let bytes = std::mem::take(&mut self.skipped) + line.len();
            return Inbound::Oversized { bytes };
        }
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        Inbound::Line(line)
    }
}

impl Decoder for LineDecoder {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Inbound>> {
        match buf[self.scanned..].iter().position(|byte| *byte == b'\n') {
            Some(offset) => {
                let mut line = buf.split_to(self.scanned + offset + 1);
                line.truncate(line.len() - 1);
                Ok(Some(self.finish_line(line)))
            }
            None if buf.len() > self.max_line_bytes => {
                self.skipped += buf.len();
                buf.clear();
                self.scanned = 0;
                Ok(None)
            }
            None => {
                self.scanned = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Inbound>> {
        if let Some(inbound) = self.decode(buf)? {
            return Ok(Some(inbound));
        }
        if buf.is_empty() && self.skipped == 0 {
            return Ok(None);
        }
        let line = buf.split();
        Ok(Some(self.finish_line(line)))
    }
}

/// The writer task has stopped: the client closed our output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientGone;

/// The only way to write to the client. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    lines: mpsc::Sender<String>,
}

impl Outbox {
    /// Sends one line as is (no newline): frames and deliberate garbage alike.
    pub(crate) async fn send_line(&self, line: String) -> Result<(), ClientGone> {
        self.lines.send(line).await.map_err(|_| ClientGone)
    }

    pub(crate) async fn respond(&self, id: Value, result: Value) -> Result<(), ClientGone> {
        self.send_frame(rpc::response(id, result)).await
    }

    pub(crate) async fn respond_error(&self, id: Value, error: RpcError) -> Result<(), ClientGone> {
        self.send_frame(rpc::error_response(id, error)).await
    }

    pub(crate) async fn reply(&self, id: Value, outcome: Result<Value, RpcError>) -> Result<(), ClientGone> {
        match outcome {
            Ok(result) => self.respond(id, result).await,
            Err(error) => self.respond_error(id, error).await,
        }
    }

    pub(crate) async fn notify(&self, method: &str, params: Value) -> Result<(), ClientGone> {
        self.send_frame(rpc::notification(method, params)).await
    }

    pub(crate) async fn request(&self, id: u64, method: &str, params: Value) -> Result<(), ClientGone> {
        self.send_frame(rpc::request(id, method, params)).await
    }

    async fn send_frame(&self, frame: Value) -> Result<(), ClientGone> {
        self.send_line(frame.to_string()).await
    }
}

/// Starts the writer task over `output`. The task ends with `Ok` once every
/// [`Outbox`] clone is dropped and the last line is flushed, or with the
/// first write error.
pub(crate) fn spawn_writer<W>(output: W) -> (Outbox, JoinHandle<io::Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (lines, queue) = mpsc::channel(OUTBOX_CAPACITY_LINES);
    (Outbox { lines }, tokio::spawn(write_lines(queue, output)))
}

async fn write_lines<W>(mut queue: mpsc::Receiver<String>, output: W) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    // Small frames leave in one write with their newline; a line bigger than
    // the buffer goes straight through without a second copy.
    let mut output = BufWriter::new(output);
    while let Some(line) = queue.recv().await {
        output.write_all(line.as_bytes()).await?;
        output.write_all(b"\n").await?;
        output.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(decoder: &mut LineDecoder, input: &[u8]) -> Vec<String> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(item) = decoder.decode(&mut buf).expect("decode") {
            out.push(describe(item));
        }
        while let Some(item) = decoder.decode_eof(&mut buf).expect("decode_eof") {
            out.push(describe(item));
        }
        out
    }

    fn describe(item: Inbound) -> String {
        match item {
            Inbound::Line(line) => String::from_utf8_lossy(&line).into_owned(),
            Inbound::Oversized { bytes } => format!("<oversized {bytes}>"),
        }
    }

    #[test]
    fn splits_lines_and_keeps_a_final_unterminated_one() {
        let mut decoder = LineDecoder::new(100);
        let lines = decode_all(&mut decoder, b"a\r\n\nbc\nlast");
        assert_eq!(lines, ["a", "", "bc", "last"]);
    }

    #[test]
    fn skips_an_oversized_line_and_resumes_after_it() {
        let mut decoder = LineDecoder::new(4);
        let mut buf = BytesMut::from(&b"0123456"[..]);
        assert!(decoder.decode(&mut buf).expect("decode").is_none());
        buf.extend_from_slice(b"89\nok\n");
        let first = decoder.decode(&mut buf).expect("decode").map(describe);
        assert_eq!(first.as_deref(), Some("<oversized 9>"));
        let second = decoder.decode(&mut buf).expect("decode").map(describe);
        assert_eq!(second.as_deref(), Some("ok"));
    }
}
