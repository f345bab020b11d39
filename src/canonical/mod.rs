//! RFC 8785 (JCS) canonical JSON, written straight into a hasher.
//!
//! Two JSON texts that mean the same document, whatever their member order, whitespace,
//! escapes or number spelling, produce the same canonical bytes. Two departures from the RFC
//! keep two requests an upstream could tell apart from ever sharing a form: integer literals
//! keep their exact digits instead of being rounded through an f64 (`9007199254740993` stays
//! itself), and by default an integer literal and a number written with a fraction or an
//! exponent stay different kinds (`1` and `1.0`, `100` and `1e2`, `0` and `-0`), as typed
//! parsers read them; see [`NumberKinds`].
//!
//! ```
//! use tower_idempotency::canonical::to_canonical_vec;
//!
//! let a = to_canonical_vec(br#"{ "b": 1.50, "a": "\u0041", "c": 1E2 }"#).unwrap();
//! let b = to_canonical_vec(br#"{"a":"A","c":100.0,"b":15e-1}"#).unwrap();
//! assert_eq!(a, b);
//! assert_eq!(a, br#"{"a":"A","b":1.5,"c":100.0}"#);
//! ```

mod digest;
mod emit;
mod number;
mod order;
mod parse;
pub(crate) mod pointer;
mod scan;
mod tree;
mod value;

use std::borrow::Cow;
use std::fmt;

pub use number::NumberKinds;
pub(crate) use pointer::leave_out;
pub use pointer::JsonPointer;

pub(crate) use digest::HashingSink;
pub(crate) use emit::emit;
pub(crate) use parse::parse;
pub(crate) use tree::{TapeIndex, Tree, ROOT};
pub(crate) use value::{from_value, to_value};

use tree::Members;

/// The value of one entry of a parsed document's tape: a container's contents follow it there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<'a> {
    Null,
    Bool(bool),
    /// An integer literal, exactly as written.
    Integer(Cow<'a, str>),
    Double(f64),
    /// A number with a fraction whose literal is already what RFC 8785 prints for it (see
    /// [`number::is_canonical_decimal`]), kept as written.
    Decimal(&'a str),
    String(Text<'a>),
    /// Its items follow it on the tape, up to `end`.
    Array {
        end: TapeIndex,
    },
    /// Its members follow it on the tape in document order; [`Tree::children`] gives them
    /// sorted by UTF-16 code units, names unique.
    Object(Members),
    /// A value left out of the document, and where its former contents end.
    Removed {
        end: TapeIndex,
    },
}

/// A string of a parsed document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Text<'a> {
    /// Taken from the input with its quotes: it held no escape, so it is already canonical.
    Quoted(&'a str),
    /// Decoded text, escaped when it is written.
    Decoded(Cow<'a, str>),
}

impl Text<'_> {
    /// The string's value.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Quoted(quoted) => &quoted[1..quoted.len() - 1],
            Self::Decoded(text) => text,
        }
    }
}

/// Where canonical bytes go: a buffer, or a hasher that never sees them as one string.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Why a text has no canonical form; the fingerprint then falls back to the raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CanonicalError {
    /// The text is not JSON.
    Syntax(&'static str),
    /// A string holds bytes that are not UTF-8.
    InvalidUtf8,
    /// A `\u` escape names half of a surrogate pair.
    LoneSurrogate,
    /// An object names the same member twice: parsers disagree on which one wins.
    DuplicateMember,
    /// Nesting goes deeper than the parser's limit.
    TooDeep,
    /// A number beyond the range of an IEEE 754 double.
    NumberOutOfRange,
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(what) => write!(f, "not JSON: {what}"),
            Self::InvalidUtf8 => f.write_str("a string is not valid UTF-8"),
            Self::LoneSurrogate => f.write_str("a string holds a lone surrogate escape"),
            Self::DuplicateMember => f.write_str("an object has a duplicate member name"),
            Self::TooDeep => f.write_str("the document is nested too deeply"),
            Self::NumberOutOfRange => f.write_str("a number is out of the range of a double"),
        }
    }
}

impl std::error::Error for CanonicalError {}

/// Writes the canonical form of a JSON text into `sink`, number kinds apart.
///
/// Nothing is written when the text has no canonical form.
pub fn write_canonical(json: &[u8], sink: &mut impl Sink) -> Result<(), CanonicalError> {
    write_canonical_with(json, NumberKinds::Distinct, sink)
}

/// Writes the canonical form of a JSON text into `sink`, numbers as `kinds` says.
pub fn write_canonical_with(
    json: &[u8],
    kinds: NumberKinds,
    sink: &mut impl Sink,
) -> Result<(), CanonicalError> {
    let tree = parse(json)?;
    emit(&tree, kinds, sink);
    Ok(())
}

/// Returns the SHA-256 of the canonical form of a JSON text, streamed into the hasher.
///
/// ```
/// use tower_idempotency::canonical::canonical_sha256;
///
/// assert_eq!(
///     canonical_sha256(br#"{"b":2,"a":1.5}"#).unwrap(),
///     canonical_sha256(br#"{ "a": 15e-1, "b": 2 }"#).unwrap(),
/// );
/// // An integer and a number with a fraction are two kinds.
/// assert_ne!(
///     canonical_sha256(br#"{"n":1}"#).unwrap(),
///     canonical_sha256(br#"{"n":1.0}"#).unwrap(),
/// );
/// ```
pub fn canonical_sha256(json: &[u8]) -> Result<[u8; 32], CanonicalError> {
    let tree = parse(json)?;
    let mut sink = HashingSink::new(b"");
    emit(&tree, NumberKinds::Distinct, &mut sink);
    Ok(sink.finish())
}

/// Returns the canonical form of a JSON text as bytes, number kinds apart.
pub fn to_canonical_vec(json: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    to_canonical_vec_with(json, NumberKinds::Distinct)
}

/// Returns the canonical form of a JSON text as bytes, numbers as `kinds` says.
///
/// ```
/// use tower_idempotency::canonical::{to_canonical_vec_with, NumberKinds};
///
/// let merged = to_canonical_vec_with(br#"[1.0, -0, 1e2]"#, NumberKinds::Merged).unwrap();
/// assert_eq!(merged, b"[1,0,100]"); // RFC 8785 exactly
/// ```
pub fn to_canonical_vec_with(json: &[u8], kinds: NumberKinds) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(json.len());
    write_canonical_with(json, kinds, &mut out)?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests;
