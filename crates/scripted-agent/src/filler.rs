//! The long answer of `[say-bytes=N]`: text of exactly the size asked for,
//! the same every time, so a test can rebuild what the agent said.
//!
//! Its lines mix what a reply's transport has to handle: characters JSON
//! escapes (`"`, tab), multi-byte ones (up to four bytes), line breaks and
//! a paragraph break every few lines.

/// Lines between two paragraph breaks.
const LINES_PER_PARAGRAPH: usize = 8;

/// The first `bytes` bytes of the filler (fewer by up to three when the
/// cut falls inside a character: it is cut before it).
pub fn filler_text(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 64);
    let mut line = 0;
    while text.len() < bytes {
        line += 1;
        text.push_str(&format!("{line:06} “quoted” \"text\"\twith a tab, é and 🦀\n"));
        if line % LINES_PER_PARAGRAPH == 0 {
            text.push('\n');
        }
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_has_the_size_asked_for_and_never_splits_a_character() {
        assert_eq!(filler_text(0), "");
        assert_eq!(filler_text(100_000).len(), 100_000);
        for bytes in 1..200 {
            let text = filler_text(bytes);
            assert!(bytes - text.len() < 4);
            assert!(filler_text(bytes + 50).starts_with(&text));
        }
    }
}
