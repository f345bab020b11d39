//! Fingerprints of the bodies seen lately, so that a byte-identical repeat skips
//! canonicalisation.
//!
//! An HTTP client's own retry resends the very same bytes, and canonicalising them again gives
//! the same fingerprint at several times the cost of comparing them. Written by hand rather
//! than with a cache crate because a miss must cost next to nothing (every first execution is
//! one): a direct-mapped table of slots. A fast non-cryptographic hash picks the slot. A body
//! seen for the first time only leaves its hash there (a sighting: no copy, no allocation);
//! one seen again whose hash the slot was sighted with is remembered in full (up to
//! [`MAX_REMEMBERED`] bytes, copied) with its scope, content type and fingerprint, and its
//! later repeats are answered from the slot. A hit is confirmed by comparing the bytes, so two
//! bodies that merely collide on that hash are never confused, and a flood of bodies each seen
//! once never displaces a remembered one. A slot keeps its buffers from body to body.

use std::sync::{Mutex, PoisonError};

use http::HeaderValue;
use rapidhash::v3::{rapidhash_v3_seeded, RapidSecrets};

use super::fingerprint::{is_json, BodyFingerprint};
use super::ScopeHash;

/// Slots in the table.
const SLOTS: usize = 1024;
/// Largest body remembered: the table holds at most `SLOTS` times this, 4 MiB.
pub(crate) const MAX_REMEMBERED: usize = 4096;

#[derive(Default)]
struct Slot {
    /// The hash of the last body that missed here, or 0.
    sighted: u64,
    remembered: Option<Remembered>,
}

struct Remembered {
    quick: u64,
    rules: u64,
    scope: ScopeHash,
    content_type: Vec<u8>,
    body: Vec<u8>,
    printed: BodyFingerprint,
}

impl Remembered {
    fn is(
        &self,
        quick: u64,
        rules: u64,
        scope: &ScopeHash,
        content_type: &[u8],
        body: &[u8],
    ) -> bool {
        self.quick == quick
            && self.rules == rules
            && self.scope == *scope
            && self.content_type == content_type
            && self.body == body
    }
}

/// The table of recent bodies of one layer.
pub(crate) struct RecentBodies {
    slots: Box<[Mutex<Slot>]>,
    secrets: RapidSecrets,
}

impl Default for RecentBodies {
    fn default() -> Self {
        let mut seed = [0u8; 8];
        // A fixed seed would do: a collision only costs a comparison. A random one keeps a
        // client from aiming its bodies at one slot.
        let _ = getrandom::fill(&mut seed);
        Self {
            slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
            secrets: RapidSecrets::seed(u64::from_le_bytes(seed)),
        }
    }
}

impl RecentBodies {
    /// The fingerprint of `body`: remembered if the same bytes came lately in the same scope
    /// with the same content type under the same fingerprint rules (`rules` names them: a
    /// table may serve layers built with other rules), else computed by `compute`, and
    /// remembered if these bytes were sighted here before.
    pub(crate) fn fingerprint(
        &self,
        rules: u64,
        scope: &ScopeHash,
        content_type: Option<&HeaderValue>,
        body: &[u8],
        compute: impl FnOnce() -> BodyFingerprint,
    ) -> BodyFingerprint {
        // Only canonicalisation is worth skipping: other bodies are hashed as they are.
        let Some(content_type) = content_type.filter(|value| is_json(value)) else {
            return compute();
        };
        if body.len() > MAX_REMEMBERED {
            return compute();
        }
        let content_type = content_type.as_bytes();
        // Never 0, the mark of a slot nothing was sighted in.
        let quick = (rapidhash_v3_seeded(body, &self.secrets) ^ scope.quick()) | 1;
        let slot = &self.slots[(quick % SLOTS as u64) as usize];
        let seen_before = {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(remembered) = &slot.remembered {
                if remembered.is(quick, rules, scope, content_type, body) {
                    return remembered.printed.clone();
                }
            }
            std::mem::replace(&mut slot.sighted, quick) == quick
        };
        let printed = compute();
        if seen_before {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            remember(
                &mut slot.remembered,
                quick,
                rules,
                scope,
                content_type,
                body,
                &printed,
            );
        }
        printed
    }
}

/// Writes a body and its fingerprint into a slot, reusing the slot's buffers.
fn remember(
    remembered: &mut Option<Remembered>,
    quick: u64,
    rules: u64,
    scope: &ScopeHash,
    content_type: &[u8],
    body: &[u8],
    printed: &BodyFingerprint,
) {
    let entry = remembered.get_or_insert_with(|| Remembered {
        quick,
        rules,
        scope: *scope,
        content_type: Vec::new(),
        body: Vec::new(),
        printed: printed.clone(),
    });
    entry.quick = quick;
    entry.rules = rules;
    entry.scope = *scope;
    entry.content_type.clear();
    entry.content_type.extend_from_slice(content_type);
    entry.body.clear();
    entry.body.extend_from_slice(body);
    entry.printed = printed.clone();
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
    fn bytes_seen_twice_in_the_same_scope_are_not_fingerprinted_again() {
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
        let third = recent.fingerprint(0, &scope, Some(&json), body, compute);
        let fourth = recent.fingerprint(0, &scope, Some(&json), body, compute);
        assert_eq!(first.fingerprint, again.fingerprint);
        assert_eq!(first.fingerprint, third.fingerprint);
        assert_eq!(first.fingerprint, fourth.fingerprint);
        assert_eq!(
            computed.get(),
            2,
            "the first sighting leaves a hash, the second remembers the body"
        );
    }

    #[test]
    fn a_flood_of_bodies_seen_once_keeps_a_remembered_one() {
        let recent = RecentBodies::default();
        let scope = ScopeHash::of(b"s1");
        let json = HeaderValue::from_static("application/json");
        let body: &[u8] = br#"{"to":"a@example.com"}"#;
        for _ in 0..2 {
            recent.fingerprint(0, &scope, Some(&json), body, || printed(body));
        }
        for n in 0..(SLOTS * 8) {
            let other = format!(r#"{{"n":{n}}}"#);
            recent.fingerprint(0, &scope, Some(&json), other.as_bytes(), || {
                printed(other.as_bytes())
            });
        }
        let computed = Cell::new(0);
        recent.fingerprint(0, &scope, Some(&json), body, || {
            computed.set(computed.get() + 1);
            printed(body)
        });
        assert_eq!(computed.get(), 0);
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
        // Seen twice: remembered.
        recent.fingerprint(0, &s1, json.as_ref(), body, compute(body));
        recent.fingerprint(0, &s1, json.as_ref(), body, compute(body));
        recent.fingerprint(0, &s2, json.as_ref(), body, compute(body));
        recent.fingerprint(0, &s1, json_ld.as_ref(), body, compute(body));
        let other: &[u8] = br#"{"a":2}"#;
        recent.fingerprint(0, &s1, json.as_ref(), other, compute(other));
        recent.fingerprint(0, &s1, None, body, compute(body));
        recent.fingerprint(0, &s1, None, body, compute(body));
        assert_eq!(
            computed.get(),
            7,
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
        for _ in 0..3 {
            recent.fingerprint(0, &scope, Some(&json), &body, || {
                computed.set(computed.get() + 1);
                printed(&body)
            });
        }
        assert_eq!(computed.get(), 3);
    }

    #[test]
    fn other_rules_fingerprint_the_same_bytes_anew() {
        let recent = RecentBodies::default();
        let scope = ScopeHash::of(b"s1");
        let json = HeaderValue::from_static("application/json");
        let computed = Cell::new(0);
        for rules in [1, 1, 2, 1] {
            recent.fingerprint(rules, &scope, Some(&json), b"{}", || {
                computed.set(computed.get() + 1);
                printed(b"{}")
            });
        }
        assert_eq!(
            computed.get(),
            4,
            "each change of rules evicts the other's entry"
        );
    }
}
