//! Fingerprints of request bodies: canonical JSON where it is safe, raw bytes where it is not.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use sha2::{Digest, Sha256};

use super::{put_framed, ExplicitKey, InvalidExplicitKey};
use crate::canonical::{
    self, emit, from_value, to_value, CanonicalError, HashingSink, JsonPointer, Node, NumberKinds,
    Sink, Tree,
};
use crate::user_code::{guarded, Panic};

/// Tags of canonical fingerprints, one per number rule: the two never share a fingerprint.
const CANONICAL_TAG: &[u8] = b"tower-idempotency/canonical/v2";
const CANONICAL_RFC8785_TAG: &[u8] = b"tower-idempotency/canonical-rfc8785/v2";
const RAW_TAG: &[u8] = b"tower-idempotency/raw/v1";

/// How a fingerprint was taken. The two kinds never produce the same fingerprint.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FingerprintKind {
    /// SHA-256 of the body's canonical JSON.
    Canonical,
    /// SHA-256 of the content type and the body's bytes as received.
    Raw,
}

/// A digest of what a request asks for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    kind: FingerprintKind,
    digest: [u8; 32],
}

impl Fingerprint {
    /// Fingerprints bytes as received, with the content type that tells how to read them.
    pub(crate) fn raw(content_type: Option<&[u8]>, body: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(RAW_TAG);
        put_framed(&mut hasher, content_type.unwrap_or(b""));
        put_framed(&mut hasher, body);
        Self {
            kind: FingerprintKind::Raw,
            digest: hasher.finalize().into(),
        }
    }

    /// Fingerprints a canonical tree, with the media type's essence (`application/json` and
    /// `application/merge-patch+json` with one body are two requests).
    fn canonical(tree: &Tree<'_>, essence: &str, numbers: NumberKinds) -> Self {
        let tag = match numbers {
            NumberKinds::Distinct => CANONICAL_TAG,
            NumberKinds::Merged => CANONICAL_RFC8785_TAG,
        };
        let mut sink = HashingSink::new(tag);
        sink.put(&(essence.len() as u64).to_be_bytes());
        if essence.bytes().any(|b| b.is_ascii_uppercase()) {
            sink.put(essence.to_ascii_lowercase().as_bytes());
        } else {
            sink.put(essence.as_bytes());
        }
        emit(tree, numbers, &mut sink);
        Self {
            kind: FingerprintKind::Canonical,
            digest: sink.finish(),
        }
    }

    /// How the fingerprint was taken.
    pub fn kind(&self) -> FingerprintKind {
        self.kind
    }

    /// 33 bytes: the kind, then the digest (for stores).
    pub fn to_bytes(&self) -> [u8; 33] {
        let mut bytes = [0u8; 33];
        bytes[0] = match self.kind {
            FingerprintKind::Canonical => b'J',
            FingerprintKind::Raw => b'R',
        };
        bytes[1..].copy_from_slice(&self.digest);
        bytes
    }

    /// Reads back what [`Fingerprint::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8; 33]) -> Option<Self> {
        let kind = match bytes[0] {
            b'J' => FingerprintKind::Canonical,
            b'R' => FingerprintKind::Raw,
            _ => return None,
        };
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&bytes[1..]);
        Some(Self { kind, digest })
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Fingerprint({:?}, {}…)",
            self.kind,
            hex::encode(&self.digest[..6])
        )
    }
}

/// A user hook that rewrites the parsed body before it is fingerprinted.
pub(crate) type Normalizer = Arc<dyn Fn(&mut serde_json::Value) + Send + Sync>;

/// What the layer is configured to do with a body before hashing it.
#[derive(Clone, Default)]
pub(crate) struct FingerprintRules {
    /// Fields that change on every attempt of one intent.
    pub(crate) ignored: Vec<JsonPointer>,
    /// Objects that count as absent once the ignored fields leave them empty.
    pub(crate) emptied: Vec<JsonPointer>,
    /// Fields left out of the calls of one MCP tool alone: where the string at the first
    /// pointer (`/params/name`) is the tool's name, the second.
    pub(crate) ignored_in_tool: Vec<(JsonPointer, String, JsonPointer)>,
    pub(crate) normalizer: Option<Normalizer>,
    /// A field that carries an explicit key.
    pub(crate) key_field: Option<JsonPointer>,
    /// Whether an integer and a number with a fraction or an exponent can be one intent.
    pub(crate) numbers: NumberKinds,
}

/// The fingerprint of a body and the explicit key found in it, if one was configured.
#[derive(Debug, Clone)]
pub(crate) struct BodyFingerprint {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) key_field: Option<Result<ExplicitKey, InvalidExplicitKey>>,
    /// Why the body cannot be keyed at all, so that it must be refused.
    pub(crate) unkeyable: Option<Unkeyable>,
}

/// Why a body cannot be keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unkeyable {
    /// It has fields to leave out of its key (ignored fields, a key field) but no canonical
    /// form to find them in. Keyed by its raw bytes, each retry with a new `tool_call_id` would
    /// run again.
    Uncanonical(CanonicalError),
    /// The user's normalisation hook panicked on it.
    Panicked(Panic),
}

impl FingerprintRules {
    /// Fingerprints a body. JSON by content type is canonicalised; anything else, or JSON whose
    /// canonical form could merge requests an upstream would tell apart, is hashed raw.
    pub(crate) fn fingerprint(
        &self,
        content_type: Option<&HeaderValue>,
        body: &[u8],
    ) -> BodyFingerprint {
        let raw = || BodyFingerprint {
            fingerprint: Fingerprint::raw(content_type.map(HeaderValue::as_bytes), body),
            key_field: None,
            unkeyable: None,
        };
        let Some(essence) = content_type.and_then(json_essence) else {
            return raw();
        };
        let mut tree = match canonical::parse(body) {
            Ok(tree) => tree,
            // Keyed by its raw bytes, the fields to leave out would count: refused instead.
            Err(error) if self.leaves_fields_out() => {
                return BodyFingerprint {
                    unkeyable: Some(Unkeyable::Uncanonical(error)),
                    ..raw()
                };
            }
            Err(_) => return raw(),
        };
        let key_field = self.key_field.as_ref().and_then(|pointer| {
            let value = pointer.remove(&mut tree)?;
            Some(explicit_key_from(&value))
        });
        let fingerprint = match &self.normalizer {
            None => self.canonical_without_ignored(tree, essence),
            Some(normalize) => {
                // An integer past 64 bits (or `-0`) has no exact `serde_json::Value`: such a
                // body is keyed without the hook, its fields to leave out still left out.
                let mut value = to_value(&tree).ok();
                if let Some(value) = &mut value {
                    if let Err(panicked) = guarded("normalize", || normalize(value)) {
                        return BodyFingerprint {
                            unkeyable: Some(Unkeyable::Panicked(panicked)),
                            ..raw()
                        };
                    }
                }
                let normalized = value.as_ref().map(from_value);
                match normalized {
                    Some(Ok(normalized)) => self.canonical_without_ignored(normalized, essence),
                    _ => self.canonical_without_ignored(tree, essence),
                }
            }
        };
        BodyFingerprint {
            fingerprint,
            key_field,
            unkeyable: None,
        }
    }

    /// Whether some fields of a body are to be left out of its key.
    fn leaves_fields_out(&self) -> bool {
        !self.ignored.is_empty() || !self.ignored_in_tool.is_empty() || self.key_field.is_some()
    }

    fn canonical_without_ignored(&self, mut tree: Tree<'_>, essence: &str) -> Fingerprint {
        // Read before anything is left out: a tool's fields go with the name it was called by.
        let of_tool: Vec<JsonPointer> = (self.ignored_in_tool.iter())
            .filter(|(name_at, name, _)| name_at.names_string(&tree, name))
            .map(|(_, _, pointer)| pointer.clone())
            .collect();
        canonical::leave_out(&mut tree, &self.ignored, &self.emptied);
        if !of_tool.is_empty() {
            canonical::leave_out(&mut tree, &of_tool, &self.emptied);
        }
        Fingerprint::canonical(&tree, essence, self.numbers)
    }
}

fn explicit_key_from(value: &Node<'_>) -> Result<ExplicitKey, InvalidExplicitKey> {
    match value {
        Node::String(text) => text.as_str().parse(),
        Node::Integer(digits) => digits.parse(),
        _ => "".parse(),
    }
}

/// `application/json` or any `+json` media type, parameters ignored.
pub(crate) fn is_json(content_type: &HeaderValue) -> bool {
    json_essence(content_type).is_some()
}

/// The essence of a JSON media type (`application/json`, `application/merge-patch+json`),
/// without its parameters; `None` for any other type.
fn json_essence(content_type: &HeaderValue) -> Option<&str> {
    let text = content_type.to_str().ok()?;
    let essence = text.split(';').next().unwrap_or("").trim();
    let json = essence.eq_ignore_ascii_case("application/json")
        || essence
            .rsplit_once('+')
            .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
            && essence.contains('/');
    json.then_some(essence)
}

#[cfg(test)]
mod tests;
