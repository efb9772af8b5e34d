//! Newline-delimited framing of the agent's stdout.
//!
//! Owns turning bytes into lines and nothing else; what a line means is the
//! router's business. The edges:
//! - a line longer than the limit is reported once as [`Frame::Oversized`] and
//!   its bytes are discarded up to the next newline, so one runaway line
//!   costs at most `max_line_bytes` of memory and never ends the stream;
//! - a line that is not UTF-8 is reported as [`Frame::NotUtf8`] and skipped;
//! - a final line without a newline at EOF is still delivered;
//! - EOF ends the stream (`None`); only a real read error is an `Err`.
//!
//! tokio-util's `LinesCodec` reports the first two as decoder errors, and a
//! `FramedRead` treats a decoder error as the end of the stream. Wrapping the
//! codec turns them into ordinary items so a bad line stays a per-line fault.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

/// Default cap on one line from the agent: large enough for any real
/// `session/update` (file contents in tool call updates), small enough that a
/// broken agent cannot make us buffer without bound.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One framed item from the agent's stdout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete line, without its terminator.
    Line(String),
    /// A line longer than the limit; its bytes were discarded.
    Oversized,
    /// A line that was not valid UTF-8; it was discarded.
    NotUtf8,
}

/// [`LinesCodec`] with bad lines turned into items instead of errors.
#[derive(Debug)]
pub(crate) struct FrameCodec {
    lines: LinesCodec,
}

impl FrameCodec {
    pub(crate) fn new(max_line_bytes: usize) -> Self {
        FrameCodec {
            lines: LinesCodec::new_with_max_length(max_line_bytes),
        }
    }

    pub(crate) fn max_line_bytes(&self) -> usize {
        self.lines.max_length()
    }

    fn map(result: Result<Option<String>, LinesCodecError>) -> std::io::Result<Option<Frame>> {
        match result {
            Ok(line) => Ok(line.map(Frame::Line)),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Frame::Oversized)),
            // Decoding does no I/O: the only `Io` error it produces is the
            // UTF-8 check on a line it has already consumed from the buffer.
            Err(LinesCodecError::Io(_)) => Ok(Some(Frame::NotUtf8)),
        }
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        Self::map(self.lines.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        Self::map(self.lines.decode_eof(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(codec: &mut FrameCodec, input: &[u8]) -> Vec<Frame> {
        let mut buf = BytesMut::from(input);
        let mut frames = Vec::new();
        while let Some(frame) = codec.decode(&mut buf).expect("decode never fails") {
            frames.push(frame);
        }
        while let Some(frame) = codec.decode_eof(&mut buf).expect("decode never fails") {
            frames.push(frame);
        }
        frames
    }

    #[test]
    fn oversized_line_is_reported_once_and_the_next_line_survives() {
        let mut codec = FrameCodec::new(8);
        let frames = decode_all(&mut codec, b"short\nthis line is far too long\nok\n");
        assert_eq!(
            frames,
            vec![
                Frame::Line("short".into()),
                Frame::Oversized,
                Frame::Line("ok".into())
            ]
        );
    }

    #[test]
    fn invalid_utf8_line_is_skipped_not_fatal() {
        let mut codec = FrameCodec::new(64);
        let frames = decode_all(&mut codec, b"a\n\xff\xfe\nb\n");
        assert_eq!(
            frames,
            vec![Frame::Line("a".into()), Frame::NotUtf8, Frame::Line("b".into())]
        );
    }

    #[test]
    fn last_line_without_newline_is_delivered_at_eof() {
        let mut codec = FrameCodec::new(64);
        let frames = decode_all(&mut codec, b"a\nb");
        assert_eq!(frames, vec![Frame::Line("a".into()), Frame::Line("b".into())]);
    }
}
