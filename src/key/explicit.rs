//! Keys a client chooses itself: the `Idempotency-Key` header or a JSON field.

use std::fmt;
use std::str::FromStr;

/// Where a client sent its explicit key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// A header (`Idempotency-Key`).
    Header,
    /// A JSON field of the body (`/request_id`).
    Field,
}

/// A client-chosen key: 1 to 255 visible ASCII characters.
///
/// ```
/// use tower_idempotency::key::ExplicitKey;
///
/// assert!("order-2024-001".parse::<ExplicitKey>().is_ok());
/// assert!("has space".parse::<ExplicitKey>().is_err());
/// assert!("".parse::<ExplicitKey>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ExplicitKey(String);

/// The explicit key is empty, longer than 255 bytes, or not visible ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidExplicitKey(());

/// Longest explicit key accepted, in bytes.
pub(crate) const MAX_EXPLICIT_KEY_LEN: usize = 255;

impl ExplicitKey {
    /// Validates raw bytes as an explicit key.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, InvalidExplicitKey> {
        let valid = !bytes.is_empty()
            && bytes.len() <= MAX_EXPLICIT_KEY_LEN
            && bytes.iter().all(|b| (0x21..=0x7e).contains(b));
        if !valid {
            return Err(InvalidExplicitKey(()));
        }
        // Visible ASCII is UTF-8.
        String::from_utf8(bytes.to_vec())
            .map(Self)
            .map_err(|_| InvalidExplicitKey(()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ExplicitKey {
    type Err = InvalidExplicitKey;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::from_bytes(text.as_bytes())
    }
}

/// Never shows the key itself: a client's key is as good as a credential to its result.
impl fmt::Debug for ExplicitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExplicitKey({} bytes)", self.0.len())
    }
}

impl fmt::Display for InvalidExplicitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an explicit idempotency key must be 1 to 255 visible ASCII characters")
    }
}

impl std::error::Error for InvalidExplicitKey {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_alphabet_are_enforced() {
        assert!(ExplicitKey::from_bytes(&[b'a'; 255]).is_ok());
        assert!(ExplicitKey::from_bytes(&[b'a'; 256]).is_err());
        assert!(ExplicitKey::from_bytes(b"tab\there").is_err());
        assert!(ExplicitKey::from_bytes("caf\u{e9}".as_bytes()).is_err());
        assert!(ExplicitKey::from_bytes(&[b'x'; 10_000]).is_err());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key: ExplicitKey = "secret-value".parse().unwrap();
        assert!(!format!("{key:?}").contains("secret"));
    }
}
