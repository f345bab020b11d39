//! Intent keys: what makes two requests "the same call".
//!
//! `key = SHA-256(domain tag, scope, operation, fingerprint or explicit key)`, every part
//! length-prefixed, so no two different triples can encode to the same bytes.

mod explicit;
mod fingerprint;
mod operation;
mod prefix;

use std::fmt;
use std::str::FromStr;

use http::{Method, Uri};
use sha2::{Digest, Sha256};

pub(crate) use explicit::KeySource;
pub use explicit::{ExplicitKey, InvalidExplicitKey};
pub use fingerprint::{Fingerprint, FingerprintKind};
pub use operation::Operation;

pub(crate) use fingerprint::{is_json, BodyFingerprint};
pub(crate) use fingerprint::{FingerprintRules, Unkeyable};

const INTENT_TAG: &[u8] = b"tower-idempotency/intent/v1";
const SCOPE_TAG: &[u8] = b"tower-idempotency/scope/v1";

/// Feeds `part` to `hasher` behind its length, so that concatenations stay unambiguous.
pub(crate) fn put_framed(hasher: &mut Sha256, part: &[u8]) {
    put_framed_joined(hasher, &[part]);
}

/// Feeds `pieces`, joined, to `hasher` as one framed part, without joining them first.
pub(crate) fn put_framed_joined(hasher: &mut Sha256, pieces: &[&[u8]]) {
    let length: usize = pieces.iter().map(|piece| piece.len()).sum();
    hasher.update((length as u64).to_be_bytes());
    for piece in pieces {
        hasher.update(piece);
    }
}

/// The identity of one intended action: 32 bytes, shown as 64 lower-case hex digits.
///
/// It travels in the `idempotency-intent` response header and names the action on the status
/// path. It is derived by the layer and is not an `Idempotency-Key`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct IntentKey([u8; 32]);

/// The hasher of maps keyed by intent: a multiply or two over the 8 bytes a key feeds it, with a
/// per-process random seed so that no one can aim keys at one bucket. The standard SipHash cost
/// several per cent of a first execution's time, most of it in the store's table re-hashing
/// its keys as it grows and sheds entries.
pub(crate) type KeyHasher = rapidhash::fast::RandomState;

/// Feeds maps 8 of the key's bytes: a SHA-256 output is uniform already, so the rest would
/// only cost hashing time (the map's own keyed hasher still guards against chosen keys).
impl std::hash::Hash for IntentKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(first_u64(&self.0));
    }
}

/// The first 8 bytes of a digest, as a number: a SHA-256 output is uniform already.
fn first_u64(digest: &[u8; 32]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// What besides scope and operation identifies an intent.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyMaterial<'a> {
    /// The request's own content.
    Fingerprint(&'a Fingerprint),
    /// A key the client chose.
    Explicit(&'a ExplicitKey),
}

impl IntentKey {
    /// Derives the key of an intent.
    pub(crate) fn derive(
        scope: &[u8],
        method: &Method,
        uri: &Uri,
        material: KeyMaterial<'_>,
    ) -> Self {
        let mut hasher = prefix::leading(scope, method, uri);
        match material {
            KeyMaterial::Fingerprint(fingerprint) => {
                hasher.update(b"F");
                put_framed(&mut hasher, &fingerprint.to_bytes());
            }
            KeyMaterial::Explicit(key) => {
                hasher.update(b"E");
                put_framed(&mut hasher, key.as_str().as_bytes());
            }
        }
        Self(hasher.finalize().into())
    }

    /// Builds a key from its 32 bytes (for stores that read keys back).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key as 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        String::from_utf8_lossy(&self.hex_digits()).into_owned()
    }

    /// The 64 hex digits as bytes: written into a buffer in one go, which a header value is
    /// then copied from, rather than character by character into a string on every response.
    pub(crate) fn hex_digits(&self) -> [u8; 64] {
        let mut digits = [0u8; 64];
        // The buffer is exactly twice the key's length, so this cannot fail.
        let _ = hex::encode_to_slice(self.0, &mut digits);
        digits
    }

    /// The first 12 hex digits: enough to tell intents apart in logs, too short to replay one.
    pub fn short(&self) -> String {
        String::from_utf8_lossy(&self.hex_digits()[..12]).into_owned()
    }
}

impl fmt::Display for IntentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for IntentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IntentKey({}…)", self.short())
    }
}

/// The text is not 64 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidIntentKey(());

impl fmt::Display for InvalidIntentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an intent key is 64 hex digits")
    }
}

impl std::error::Error for InvalidIntentKey {}

impl FromStr for IntentKey {
    type Err = InvalidIntentKey;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).map_err(|_| InvalidIntentKey(()))?;
        Ok(Self(bytes))
    }
}

/// A hash of the caller's scope, kept in records so that the status path can refuse other
/// scopes without the raw session value ever being stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ScopeHash([u8; 32]);

impl ScopeHash {
    /// Hashes a scope value.
    pub fn of(scope: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(SCOPE_TAG);
        put_framed(&mut hasher, scope);
        Self(hasher.finalize().into())
    }

    /// Builds a scope hash from its bytes (for stores that read records back).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The hash's bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scope: &str, path: &str, body: &[u8]) -> IntentKey {
        let uri = path.parse::<Uri>().unwrap();
        let fingerprint = Fingerprint::raw(None, body);
        IntentKey::derive(
            scope.as_bytes(),
            &Method::POST,
            &uri,
            KeyMaterial::Fingerprint(&fingerprint),
        )
    }

    #[test]
    fn a_request_is_hashed_as_its_framed_parts_with_its_query_in_order() {
        let hashed = |target: &str| {
            let mut hasher = Sha256::new();
            let uri = target.parse::<Uri>().unwrap();
            Operation::hash_request_into(&mut hasher, &Method::PATCH, &uri);
            hasher.finalize()
        };
        let framed = |parts: [&[u8]; 3]| {
            let mut hasher = Sha256::new();
            for part in parts {
                put_framed(&mut hasher, part);
            }
            hasher.finalize()
        };
        // No query and an empty one are told apart; the query is one part, `?` and the
        // parameters ordered by name.
        assert_eq!(hashed("/x"), framed([b"PATCH", b"/x", b"-"]));
        assert_eq!(hashed("/x?"), framed([b"PATCH", b"/x", b"?"]));
        assert_eq!(hashed("/x?b=1&a=2"), framed([b"PATCH", b"/x", b"?a=2&b=1"]));
        assert_eq!(
            hashed("/x?t=2&t=1&&a"),
            framed([b"PATCH", b"/x", b"?a&t=2&t=1"])
        );
        // More parameters than are ordered in place.
        assert_eq!(
            hashed("/x?j=9&i=8&h=7&g=6&f=5&e=4&d=3&c=2&b=1&a=0"),
            framed([b"PATCH", b"/x", b"?a=0&b=1&c=2&d=3&e=4&f=5&g=6&h=7&i=8&j=9"])
        );
    }

    #[test]
    fn separators_inside_parts_cannot_collide() {
        // A naive "scope:operation" join would give both of these the same bytes.
        assert_ne!(key("a:b", "/c", b"{}"), key("a", "/b:c", b"{}"));
        assert_ne!(key("a", "/b", b"c"), key("a", "/bc", b""));
    }

    #[test]
    fn explicit_keys_and_fingerprints_never_share_a_key() {
        let uri = "/x".parse::<Uri>().unwrap();
        let fingerprint = Fingerprint::raw(None, b"k");
        let explicit: ExplicitKey = "k".parse().unwrap();
        let derive = |material| IntentKey::derive(b"s", &Method::POST, &uri, material);
        assert_ne!(
            derive(KeyMaterial::Fingerprint(&fingerprint)),
            derive(KeyMaterial::Explicit(&explicit)),
        );
    }

    #[test]
    fn hex_round_trips() {
        let k = key("s", "/x", b"");
        assert_eq!(k.to_hex().parse::<IntentKey>().unwrap(), k);
        assert!("zz".parse::<IntentKey>().is_err());
        assert_eq!(k.short().len(), 12);
    }
}
