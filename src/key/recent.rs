//! Fingerprints of the bodies seen lately, so that a byte-identical repeat skips
//! canonicalisation.
//!
//! An HTTP client's own retry resends the very same bytes, and canonicalising them again gives
//! the same fingerprint at several times the cost of comparing them. Written by hand rather
//! than with a cache crate because a miss must cost next to nothing (every first execution is
//! one): a direct-mapped table of slots, each holding the last body that hashed to it (bodies
//! up to [`MAX_REMEMBERED`] bytes, copied), its scope and content type, and its fingerprint. A
//! fast non-cryptographic hash picks the slot; a hit is confirmed by comparing the bytes, so
//! two bodies that merely collide on that hash are never confused. A slot keeps its buffer
//! from body to body: after warm-up a miss allocates nothing.

use std::sync::{Mutex, PoisonError};

use http::HeaderValue;
use rapidhash::v3::{rapidhash_v3_seeded, RapidSecrets};

use super::fingerprint::{is_json, BodyFingerprint};
use super::ScopeHash;

/// Slots in the table.
const SLOTS: usize = 1024;
/// Largest body remembered: the table holds at most `SLOTS` times this, 4 MiB.
pub(crate) const MAX_REMEMBERED: usize = 4096;

struct Remembered {
    quick: u64,
    rules: u64,
    scope: ScopeHash,
    content_type: Option<HeaderValue>,
    body: Vec<u8>,
    printed: BodyFingerprint,
}

/// The table of recent bodies of one layer.
pub(crate) struct RecentBodies {
    slots: Box<[Mutex<Option<Remembered>>]>,
    secrets: RapidSecrets,
}

impl Default for RecentBodies {
    fn default() -> Self {
        let mut seed = [0u8; 8];
        // A fixed seed would do: a collision only costs a comparison. A random one keeps a
        // client from aiming its bodies at one slot.
        let _ = getrandom::fill(&mut seed);
        Self {
            slots: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
            secrets: RapidSecrets::seed(u64::from_le_bytes(seed)),
        }
    }
}

impl RecentBodies {
    /// The fingerprint of `body`: remembered if the same bytes came lately in the same scope
    /// with the same content type under the same fingerprint rules (`rules` names them: a
    /// table may serve layers built with other rules), else computed by `compute` and
    /// remembered.
    pub(crate) fn fingerprint(
        &self,
        rules: u64,
        scope: &ScopeHash,
        content_type: Option<&HeaderValue>,
        body: &[u8],
        compute: impl FnOnce() -> BodyFingerprint,
    ) -> BodyFingerprint {
        // Only canonicalisation is worth skipping: other bodies are hashed as they are.
        if body.len() > MAX_REMEMBERED || !content_type.is_some_and(is_json) {
            return compute();
        }
        let quick = rapidhash_v3_seeded(body, &self.secrets) ^ scope.quick();
        let slot = &self.slots[(quick % SLOTS as u64) as usize];
        {
            let remembered = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(seen) = remembered.as_ref() {
                let same = seen.quick == quick
                    && seen.rules == rules
                    && seen.scope == *scope
                    && seen.content_type.as_ref() == content_type
                    && seen.body == body;
                if same {
                    return seen.printed.clone();
                }
            }
        }
        let printed = compute();
        let mut remembered = slot.lock().unwrap_or_else(PoisonError::into_inner);
        match remembered.as_mut() {
            Some(seen) => {
                seen.quick = quick;
                seen.rules = rules;
                seen.scope = *scope;
                seen.content_type = content_type.cloned();
                seen.body.clear();
                seen.body.extend_from_slice(body);
                seen.printed = printed.clone();
            }
            None => {
                *remembered = Some(Remembered {
                    quick,
                    rules,
                    scope: *scope,
                    content_type: content_type.cloned(),
                    body: body.to_vec(),
                    printed: printed.clone(),
                });
            }
        }
        printed
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::key::Fingerprint;

    fn printed(body: &[u8]) -> BodyFingerprint {
        BodyFingerprint {
            fingerprint: Fingerprint::raw(None, body),
            key_field: None,
            unkeyable: None,
        }
    }

    #[test]
    fn the_same_bytes_in_the_same_scope_are_fingerprinted_once() {
        let recent = RecentBodies::default();
        let scope = ScopeHash::of(b"s1");
        let computed = Cell::new(0);
        let body = br#"{"to":"a@example.com"}"#;
        let compute = || {
            computed.set(computed.get() + 1);
            printed(body)
        };
        let json = HeaderValue::from_static("application/json");
        let first = recent.fingerprint(0, &scope, Some(&json), body, compute);
        let again = recent.fingerprint(0, &scope, Some(&json), body, compute);
        assert_eq!(first.fingerprint, again.fingerprint);
        assert_eq!(computed.get(), 1);
    }

    #[test]
    fn another_scope_content_type_or_body_is_fingerprinted_anew() {
        let recent = RecentBodies::default();
        let computed = Cell::new(0);
        let compute = |body: &'static [u8]| {
            let computed = &computed;
            move || {
                computed.set(computed.get() + 1);
                printed(body)
            }
        };
        let json = Some(HeaderValue::from_static("application/json"));
        let json_ld = Some(HeaderValue::from_static("application/ld+json"));
        let body: &[u8] = br#"{"a":1}"#;
        let (s1, s2) = (ScopeHash::of(b"s1"), ScopeHash::of(b"s2"));
        recent.fingerprint(0, &s1, json.as_ref(), body, compute(body));
        recent.fingerprint(0, &s2, json.as_ref(), body, compute(body));
        recent.fingerprint(0, &s1, json_ld.as_ref(), body, compute(body));
        let other: &[u8] = br#"{"a":2}"#;
        recent.fingerprint(0, &s1, json.as_ref(), other, compute(other));
        recent.fingerprint(0, &s1, None, body, compute(body));
        recent.fingerprint(0, &s1, None, body, compute(body));
        assert_eq!(
            computed.get(),
            6,
            "and bodies that are not JSON are not remembered"
        );
    }

    #[test]
    fn bodies_over_the_limit_are_not_remembered() {
        let recent = RecentBodies::default();
        let scope = ScopeHash::of(b"s1");
        let body = vec![b' '; MAX_REMEMBERED + 1];
        let json = HeaderValue::from_static("application/json");
        let computed = Cell::new(0);
        for _ in 0..2 {
            recent.fingerprint(0, &scope, Some(&json), &body, || {
                computed.set(computed.get() + 1);
                printed(&body)
            });
        }
        assert_eq!(computed.get(), 2);
    }

    #[test]
    fn other_rules_fingerprint_the_same_bytes_anew() {
        let recent = RecentBodies::default();
        let scope = ScopeHash::of(b"s1");
        let json = HeaderValue::from_static("application/json");
        let computed = Cell::new(0);
        for rules in [1, 2, 1] {
            recent.fingerprint(rules, &scope, Some(&json), b"{}", || {
                computed.set(computed.get() + 1);
                printed(b"{}")
            });
        }
        assert_eq!(
            computed.get(),
            3,
            "each change of rules evicts the other's entry"
        );
    }
}
