//! A strict RFC 8259 parser into a borrowed tree.
//!
//! Hand-written because no maintained parser gives all three things the fingerprint needs at
//! once: integer literals beyond 64 bits kept as written (serde_json rounds them unless its
//! process-wide `arbitrary_precision` feature is on), duplicate member names reported rather
//! than silently resolved, and strings borrowed from the input when they hold no escape.

use std::borrow::Cow;

use super::number::{is_canonical_decimal, parse_double};
use super::scan::plain_run;
use super::tree::{Builder, TapeIndex, Tree, ROOT};
use super::{CanonicalError, Node, Text};

/// Nesting depth past which a document is not canonicalised (serde_json's default limit).
pub(crate) const MAX_DEPTH: usize = 128;

/// Parses one JSON text; members of every object come out sorted in canonical order.
pub(crate) fn parse(input: &[u8]) -> Result<Tree<'_>, CanonicalError> {
    // A JSON text is UTF-8 throughout (RFC 8259 §8.1): checking it once here lets every string
    // be sliced from it without a check of its own.
    let text = std::str::from_utf8(input).map_err(|_| CanonicalError::InvalidUtf8)?;
    let mut parser = Parser {
        input,
        text,
        pos: 0,
        tree: Builder::for_text(input.len()),
    };
    parser.skip_whitespace();
    parser.value_into(0, ROOT)?;
    parser.skip_whitespace();
    if parser.pos != input.len() {
        return Err(CanonicalError::Syntax(
            "trailing characters after the document",
        ));
    }
    Ok(parser.tree.finish())
}

struct Parser<'a> {
    input: &'a [u8],
    /// The same input, known to be UTF-8.
    text: &'a str,
    pos: usize,
    tree: Builder<'a>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_literal(
        &mut self,
        literal: &[u8],
        node: Node<'a>,
    ) -> Result<Node<'a>, CanonicalError> {
        if self.input[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            Ok(node)
        } else {
            Err(CanonicalError::Syntax("unknown literal"))
        }
    }

    /// Parses one value into the entry at `at`, which the tape already holds, and a
    /// container's contents after it.
    fn value_into(&mut self, depth: usize, at: TapeIndex) -> Result<(), CanonicalError> {
        let node = match self.peek() {
            Some(b'{') => return self.object(depth + 1, at),
            Some(b'[') => return self.array(depth + 1, at),
            Some(b'"') => Node::String(self.string()?),
            Some(b't') => self.expect_literal(b"true", Node::Bool(true))?,
            Some(b'f') => self.expect_literal(b"false", Node::Bool(false))?,
            Some(b'n') => self.expect_literal(b"null", Node::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(CanonicalError::Syntax("unexpected character")),
            None => return Err(CanonicalError::Syntax("unexpected end of input")),
        };
        self.tree.set(at, node);
        Ok(())
    }

    fn object(&mut self, depth: usize, at: TapeIndex) -> Result<(), CanonicalError> {
        if depth > MAX_DEPTH {
            return Err(CanonicalError::TooDeep);
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return self.tree.close_object(at);
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(CanonicalError::Syntax("expected a member name"));
            }
            let name = self.string()?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(CanonicalError::Syntax("expected ':'"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let member = self.tree.push(Some(name));
            self.value_into(depth, member)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(CanonicalError::Syntax("expected ',' or '}'")),
            }
        }
        self.tree.close_object(at)
    }

    fn array(&mut self, depth: usize, at: TapeIndex) -> Result<(), CanonicalError> {
        if depth > MAX_DEPTH {
            return Err(CanonicalError::TooDeep);
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.tree.close_array(at);
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            let item = self.tree.push(None);
            self.value_into(depth, item)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(CanonicalError::Syntax("expected ',' or ']'")),
            }
        }
        self.tree.close_array(at);
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Node<'a>, CanonicalError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(CanonicalError::Syntax("malformed number")),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            if self.digits() == 0 {
                return Err(CanonicalError::Syntax("malformed number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(CanonicalError::Syntax("malformed number"));
            }
        }
        let literal = &self.text[start..self.pos];
        if integer {
            Ok(Node::Integer(Cow::Borrowed(literal)))
        } else if is_canonical_decimal(literal) {
            Ok(Node::Decimal(literal))
        } else {
            Ok(Node::Double(parse_double(literal)?))
        }
    }

    /// Reads a string starting at its opening quote.
    ///
    /// Inlined where it is read, so that a string with no escape (nearly every one) comes
    /// back in registers: returned through memory, its parts were written one way and read
    /// back another, and the reads waited on the writes.
    #[inline(always)]
    fn string(&mut self) -> Result<Text<'a>, CanonicalError> {
        let quote = self.pos;
        let start = quote + 1;
        // Fast path: no escape before the closing quote, so the quoted text is already in
        // canonical form and can be borrowed as it is.
        self.pos = start + plain_run(&self.input[start..])?;
        if self.input[self.pos] == b'"' {
            self.pos += 1;
            return Ok(Text::Quoted(&self.text[quote..self.pos]));
        }
        self.escaped_string(start)
    }

    /// The rest of a string that has an escape, decoded from its `start`.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize) -> Result<Text<'a>, CanonicalError> {
        let mut decoded = self.text[start..self.pos].to_owned();
        loop {
            let run_start = self.pos;
            self.pos = run_start + plain_run(&self.input[run_start..])?;
            decoded.push_str(&self.text[run_start..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Text::Decoded(Cow::Owned(decoded)));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut decoded)?;
                }
                _ => return Err(CanonicalError::Syntax("unterminated string")),
            }
        }
    }

    fn escape(&mut self, text: &mut String) -> Result<(), CanonicalError> {
        let byte = self
            .peek()
            .ok_or(CanonicalError::Syntax("unterminated string"))?;
        self.pos += 1;
        let decoded = match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = self.hex4()?;
                match first {
                    0xD800..=0xDBFF => {
                        if !self.input[self.pos..].starts_with(b"\\u") {
                            return Err(CanonicalError::LoneSurrogate);
                        }
                        self.pos += 2;
                        let second = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return Err(CanonicalError::LoneSurrogate);
                        }
                        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        char::from_u32(code).ok_or(CanonicalError::LoneSurrogate)?
                    }
                    0xDC00..=0xDFFF => return Err(CanonicalError::LoneSurrogate),
                    _ => char::from_u32(first).ok_or(CanonicalError::LoneSurrogate)?,
                }
            }
            _ => return Err(CanonicalError::Syntax("unknown escape")),
        };
        text.push(decoded);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, CanonicalError> {
        let digits = self
            .input
            .get(self.pos..self.pos + 4)
            .ok_or(CanonicalError::Syntax("short \\u escape"))?;
        let mut value = 0u32;
        for &digit in digits {
            let nibble = (digit as char)
                .to_digit(16)
                .ok_or(CanonicalError::Syntax("bad \\u escape"))?;
            value = value * 16 + nibble;
        }
        self.pos += 4;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_member_names_are_reported() {
        assert_eq!(
            parse(br#"{"a":1,"b":2,"a":3}"#).err(),
            Some(CanonicalError::DuplicateMember)
        );
        // Equal after unescaping is still a duplicate.
        assert_eq!(
            parse(br#"{"a":1,"\u0061":2}"#).err(),
            Some(CanonicalError::DuplicateMember)
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(parse(deep.as_bytes()).err(), Some(CanonicalError::TooDeep));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(fine.as_bytes()).is_ok());
    }

    #[test]
    fn lone_surrogates_are_refused() {
        for text in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800x""#,
        ] {
            assert_eq!(
                parse(text.as_bytes()).err(),
                Some(CanonicalError::LoneSurrogate),
                "{text}"
            );
        }
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_refused() {
        assert_eq!(
            parse(b"\"a\xffb\"").err(),
            Some(CanonicalError::InvalidUtf8)
        );
        assert_eq!(
            parse(b"\"\\n\xc3\"").err(),
            Some(CanonicalError::InvalidUtf8)
        );
    }

    #[test]
    fn grammar_violations_are_syntax_errors() {
        for text in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "01",
            "1.",
            ".5",
            "1e",
            "+1",
            "tru",
            "\"\t\"",
            "[1] x",
            "{\"a\":1,}",
            "'a'",
            "NaN",
            "\"\\x\"",
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(CanonicalError::Syntax(_))),
                "{text:?} should be a syntax error"
            );
        }
    }
}
