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
use crate::user_code::{guarded, Panicked};

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
    Panicked(Panicked),
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
        !self.ignored.is_empty() || self.key_field.is_some()
    }

    fn canonical_without_ignored(&self, mut tree: Tree<'_>, essence: &str) -> Fingerprint {
        canonical::leave_out(&mut tree, &self.ignored, &self.emptied);
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
mod tests {
    use super::*;
    use crate::canonical::tests::{json_value, respell};
    use proptest::prelude::*;

    /// Values an upstream reads exactly: integers, strings, literals; no doubles to round.
    fn exact_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            "\\PC{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]{0,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn equal_meaning_gives_an_equal_fingerprint(value in json_value(), seed in any::<u64>()) {
            let rules = FingerprintRules::default();
            let plain = serde_json::to_vec(&value).unwrap();
            let mut spelled = String::new();
            let mut state = seed;
            respell(&value, &mut state, &mut spelled);
            prop_assert_eq!(
                rules.fingerprint(Some(&JSON), &plain).fingerprint,
                rules.fingerprint(Some(&JSON), spelled.as_bytes()).fingerprint
            );
        }

        #[test]
        fn payloads_an_upstream_tells_apart_give_different_fingerprints(a in exact_value(), b in exact_value()) {
            let rules = FingerprintRules::default();
            let fa = rules.fingerprint(Some(&JSON), &serde_json::to_vec(&a).unwrap()).fingerprint;
            let fb = rules.fingerprint(Some(&JSON), &serde_json::to_vec(&b).unwrap()).fingerprint;
            prop_assert_eq!(a == b, fa == fb);
        }

        #[test]
        fn any_bytes_under_any_content_type_are_fingerprinted_without_panicking(
            body in prop::collection::vec(any::<u8>(), 0..512),
            json in any::<bool>(),
        ) {
            let rules = FingerprintRules {
                ignored: vec!["/a".parse().unwrap()],
                key_field: Some("/k".parse().unwrap()),
                ..Default::default()
            };
            let json_type = JSON;
            let _ = rules.fingerprint(json.then_some(&json_type), &body);
        }
    }

    const JSON: HeaderValue = HeaderValue::from_static("application/json");

    fn print(rules: &FingerprintRules, body: &str) -> Fingerprint {
        rules.fingerprint(Some(&JSON), body.as_bytes()).fingerprint
    }

    #[test]
    fn spelling_does_not_change_a_json_fingerprint() {
        let rules = FingerprintRules::default();
        assert_eq!(
            print(&rules, r#"{"to":"a@b.c","n":1.0}"#),
            print(&rules, "{ \"n\" : 10e-1, \"to\" : \"a\\u0040b.c\" }")
        );
    }

    #[test]
    fn number_kinds_and_media_types_change_a_json_fingerprint_unless_merged() {
        let rules = FingerprintRules::default();
        assert_ne!(print(&rules, r#"{"n":1}"#), print(&rules, r#"{"n":1.0}"#));
        let merged = FingerprintRules {
            numbers: NumberKinds::Merged,
            ..Default::default()
        };
        assert_eq!(print(&merged, r#"{"n":1}"#), print(&merged, r#"{"n":1.0}"#));
        assert_ne!(print(&merged, r#"{"n":1}"#), print(&rules, r#"{"n":1}"#));
        let patch = HeaderValue::from_static("application/merge-patch+json");
        let charset = HeaderValue::from_static("Application/JSON; charset=utf-8");
        let with = |content_type: &HeaderValue| rules.fingerprint(Some(content_type), b"{}");
        assert_ne!(with(&patch).fingerprint, print(&rules, "{}"));
        assert_eq!(with(&charset).fingerprint, print(&rules, "{}"));
    }

    #[test]
    fn a_body_without_canonical_form_is_unkeyable_only_when_fields_are_left_out() {
        let plain = FingerprintRules::default();
        let ignoring = FingerprintRules {
            ignored: vec!["/id".parse().unwrap()],
            ..Default::default()
        };
        let twice = br#"{"a":1,"a":2}"#;
        assert!(plain.fingerprint(Some(&JSON), twice).unkeyable.is_none());
        assert_eq!(
            ignoring.fingerprint(Some(&JSON), twice).unkeyable,
            Some(Unkeyable::Uncanonical(CanonicalError::DuplicateMember))
        );
        // JSON by its type that does not parse cannot have the fields left out either...
        assert!(ignoring.fingerprint(Some(&JSON), b"{").unkeyable.is_some());
        // ...while a body of another type is keyed by its bytes, as any other.
        let text = HeaderValue::from_static("text/plain");
        assert!(ignoring.fingerprint(Some(&text), b"{").unkeyable.is_none());
    }

    #[test]
    fn ignored_fields_do_not_count() {
        let rules = FingerprintRules {
            ignored: vec!["/tool_call_id".parse().unwrap()],
            ..Default::default()
        };
        assert_eq!(
            print(&rules, r#"{"q":1,"tool_call_id":"call_1"}"#),
            print(&rules, r#"{"q":1,"tool_call_id":"call_2"}"#)
        );
        assert_ne!(print(&rules, r#"{"q":1}"#), print(&rules, r#"{"q":2}"#));
    }

    #[test]
    fn unsafe_documents_fall_back_to_raw_bytes() {
        let rules = FingerprintRules::default();
        for body in [r#"{"a":1,"a":2}"#, r#""\ud800""#, "not json", "1e999"] {
            assert_eq!(print(&rules, body).kind(), FingerprintKind::Raw, "{body}");
        }
        // Duplicates resolved differently by different parsers must stay apart.
        assert_ne!(
            print(&rules, r#"{"a":1,"a":2}"#),
            print(&rules, r#"{"a":2,"a":1}"#)
        );
    }

    #[test]
    fn non_json_content_types_are_raw_and_kept_apart() {
        let rules = FingerprintRules::default();
        let text = HeaderValue::from_static("text/plain");
        let a = rules.fingerprint(Some(&text), b"{}").fingerprint;
        let b = rules.fingerprint(Some(&JSON), b"{}").fingerprint;
        let c = rules.fingerprint(None, b"{}").fingerprint;
        assert_eq!(a.kind(), FingerprintKind::Raw);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn json_media_types_are_recognised() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/problem+json",
        ] {
            assert!(is_json(&HeaderValue::from_str(ok).unwrap()), "{ok}");
        }
        for no in ["text/plain", "application/jsonx", "json", "+json"] {
            assert!(!is_json(&HeaderValue::from_str(no).unwrap()), "{no}");
        }
    }

    #[test]
    fn the_normalizer_rewrites_before_hashing() {
        let rules = FingerprintRules {
            normalizer: Some(Arc::new(|v: &mut serde_json::Value| {
                if let Some(to) = v
                    .get_mut("to")
                    .and_then(|t| t.as_str().map(str::to_lowercase))
                {
                    v["to"] = to.into();
                }
            })),
            ..Default::default()
        };
        assert_eq!(
            print(&rules, r#"{"to":"A@B.C"}"#),
            print(&rules, r#"{"to":"a@b.c"}"#)
        );
        // An integer no 64-bit type holds cannot cross into serde_json: keyed without the hook.
        let big = print(&rules, r#"{"n":123456789012345678901234567890}"#);
        assert_eq!(big.kind(), FingerprintKind::Canonical);
        assert_eq!(
            big,
            print(&rules, r#"{ "n": 123456789012345678901234567890 }"#)
        );
    }

    #[test]
    fn the_key_field_is_read_and_left_out() {
        let rules = FingerprintRules {
            key_field: Some("/request_id".parse().unwrap()),
            ..Default::default()
        };
        let a = rules.fingerprint(Some(&JSON), br#"{"request_id":"r-1","x":1}"#);
        let b = rules.fingerprint(Some(&JSON), br#"{"x":1}"#);
        assert_eq!(a.key_field.unwrap().unwrap().as_str(), "r-1");
        assert!(b.key_field.is_none());
        assert_eq!(a.fingerprint, b.fingerprint);
        let bad = rules.fingerprint(Some(&JSON), br#"{"request_id":{"x":1}}"#);
        assert!(bad.key_field.unwrap().is_err());
    }
}
