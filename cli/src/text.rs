//! Text that comes from a file (metadata keys and values, SQL values and column names), made
//! safe to print: a file is not allowed to move the cursor, ring the bell or rewrite the
//! terminal's title, so control characters are shown escaped, as `ls` and `cat -v` show them.

use std::borrow::Cow;

/// `text` with every control character (C0, DEL and C1) written as Rust escapes it (`\n`,
/// `\u{1b}`), except newlines when `newlines` is true (for text laid out in lines, such as a
/// table whose cells may span several). Text without one is returned as it is.
pub fn printable(text: &str, newlines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && !(newlines && c == '\n');
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain key", false), "plain key");
        assert_eq!(
            printable("a\nb\x1b[2J\x07\u{9b}\x7f", false),
            r"a\nb\u{1b}[2J\u{7}\u{9b}\u{7f}"
        );
        assert_eq!(printable("a\nb\x1b", true), "a\nb\\u{1b}");
        assert_eq!(printable("é ✓", false), "é ✓");
    }
}
