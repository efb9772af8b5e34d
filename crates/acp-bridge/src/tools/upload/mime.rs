//! Which files `send_file` sends, and as what type.
//!
//! The type comes from the file's first bytes (its magic number), not from
//! what the model or the file name claims; text, which has no magic
//! number, is taken by its extension when the bytes are UTF-8 with no NUL.
//! Anything else (executables, disk images, unknown binary formats) is
//! refused: a Blossom server publishes what it is given to anyone.

use std::path::Path;

/// The types sent, as docs/tools.md lists them: images, audio, video, PDF, archives, text.
pub(crate) const SENT_TYPES: &str = "PNG, JPEG, GIF, WebP images; MP3, Ogg, WAV, FLAC audio; MP4, WebM video; PDF; zip, gzip, tar archives; UTF-8 text (.txt, .md, .csv, .json, .log)";

/// Magic numbers at offset 0 and their MIME types.
const MAGIC: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
];

/// Text types by extension (lowercase).
const TEXT_EXTENSIONS: &[(&str, &str)] = &[
    ("txt", "text/plain"),
    ("log", "text/plain"),
    ("md", "text/markdown"),
    ("csv", "text/csv"),
    ("json", "application/json"),
];

/// The MIME type of `bytes` named `name`, if it is one that is sent.
pub(crate) fn sniff(name: &str, bytes: &[u8]) -> Option<&'static str> {
    if let Some(&(_, mime)) = MAGIC.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Some(mime);
    }
    match (bytes.get(0..4), bytes.get(8..12)) {
        (Some(b"RIFF"), Some(b"WEBP")) => return Some("image/webp"),
        (Some(b"RIFF"), Some(b"WAVE")) => return Some("audio/wav"),
        (_, _) => {}
    }
    if bytes.get(4..8) == Some(b"ftyp") {
        return Some("video/mp4");
    }
    // An MPEG audio frame without an ID3 header: 11 sync bits.
    if let [0xff, second, ..] = bytes
        && second & 0xe0 == 0xe0
    {
        return Some("audio/mpeg");
    }
    if bytes.get(257..262) == Some(b"ustar") {
        return Some("application/x-tar");
    }
    let extension = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    let &(_, mime) = TEXT_EXTENSIONS.iter().find(|(listed, _)| *listed == extension)?;
    (!bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()).then_some(mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes_and_text_from_its_extension() {
        assert_eq!(sniff("x.bin", b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff("photo.txt", b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff("a", b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff("a", b"\0\0\0\x18ftypmp42"), Some("video/mp4"));
        assert_eq!(sniff("a", b"%PDF-1.7"), Some("application/pdf"));
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(sniff("a.tar", &tar), Some("application/x-tar"));
        assert_eq!(sniff("notes.MD", "# héllo".as_bytes()), Some("text/markdown"));
        assert_eq!(sniff("notes.txt", b"hi\0there"), None, "NUL: not text");
        assert_eq!(sniff("notes.txt", b"\xc3\x28"), None, "not UTF-8");
        assert_eq!(sniff("script.sh", b"#!/bin/sh\n"), None, "not a listed type");
        assert_eq!(
            sniff("a.out", b"\x7fELF\x02\x01"),
            None,
            "executables are not sent"
        );
    }
}
