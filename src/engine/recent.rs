//! What the requests seen lately derived to, so that a byte-identical repeat skips
//! canonicalisation and hashing.
//!
//! An HTTP client's own retry resends the very same bytes, and deriving its intent again (the
//! canonical form, three SHA-256 digests) gives the same answer at several times the cost of
//! comparing the bytes. Written by hand rather than with a cache crate because a miss must cost
//! next to nothing (every first execution is one): a direct-mapped table of slots, which a
//! fast non-cryptographic hash of the request picks. Each slot holds the last request that
//! missed there, every part its derivation reads (the rules, the scope, the method and target,
//! the explicit key, the content type and the body, copied into buffers the slot keeps from
//! request to request, so that after warm-up a miss allocates nothing) beside what it derived
//! to. A hit is confirmed by comparing every part, so two requests that merely collide on that
//! hash are never confused. A client's retries, and a model's repeats of its call, find their
//! derivation there.
//!
//! A request is remembered from its second sighting on: the first is only noted, as its quick
//! hash in a small array of tags that stays in cache. Almost every request is a first
//! execution, and copying each into a slot (a kilobyte written to memory the cache had let go)
//! cost more than the rest of the table; a repeat is derived once more when it first comes
//! back, and found from then on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use http::HeaderValue;
use rapidhash::v3::{rapidhash_v3_seeded, RapidSecrets};

use super::outcome::Refusal;
use crate::key::{is_json, BodyFingerprint, IntentKey, ScopeHash};

/// Slots in the table: few enough that the table stays in a core's cache, where copying a
/// request into its slot costs little (four times as many made every first execution pay for
/// writing to memory the cache had let go), and enough for the repeats and retries that
/// follow a call soon.
const SLOTS: usize = 256;
/// Quick hashes of requests seen once lately: 32 KiB, which stays in a core's cache.
const SIGHTINGS: usize = 4096;
/// Largest body remembered.
pub(crate) const MAX_REMEMBERED: usize = 4096;
/// Largest scope, method, target, explicit key and content type remembered, together: with
/// the body's bound, the table holds at most `SLOTS` times 5 KiB, whatever headers a caller
/// sends.
const MAX_REMEMBERED_HEAD: usize = 1024;

/// Every part of a request that its intent is derived from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyInputs<'a> {
    /// The fingerprint rules' name: a table may serve layers built with other rules.
    pub(crate) rules: u64,
    pub(crate) scope: &'a [u8],
    pub(crate) method: &'a str,
    /// The path and query, as sent.
    pub(crate) target: &'a str,
    /// The explicit key header's value, if one is configured and sent.
    pub(crate) explicit: Option<&'a [u8]>,
    pub(crate) content_type: Option<&'a HeaderValue>,
    pub(crate) body: &'a [u8],
}

/// What a request's derivation gave.
#[derive(Debug, Clone)]
pub(crate) struct Derivation {
    pub(crate) printed: BodyFingerprint,
    pub(crate) scope: ScopeHash,
    /// Its key, or why it is refused.
    pub(crate) key: Result<IntentKey, Refusal>,
}

/// A remembered request: its parts, one after another in `parts`, and what it derived to.
struct Memo {
    quick: u64,
    rules: u64,
    /// Where each part ends in `parts`: scope, method, target, explicit key, content type.
    ends: [usize; 5],
    has_explicit: bool,
    has_content_type: bool,
    parts: Vec<u8>,
    body: Vec<u8>,
    derived: Derivation,
}

impl Memo {
    /// A slot's first request: its buffers are made here and kept from then on.
    fn new(quick: u64, seen: &KeyInputs<'_>, derived: Derivation) -> Self {
        let mut remembered = Self {
            quick,
            rules: seen.rules,
            ends: [0; 5],
            has_explicit: false,
            has_content_type: false,
            parts: Vec::new(),
            body: Vec::new(),
            derived,
        };
        remembered.copy(quick, seen);
        remembered
    }

    fn is(&self, quick: u64, seen: &KeyInputs<'_>) -> bool {
        let part = |n: usize| &self.parts[if n == 0 { 0 } else { self.ends[n - 1] }..self.ends[n]];
        self.quick == quick
            && self.rules == seen.rules
            && self.has_explicit == seen.explicit.is_some()
            && self.has_content_type == seen.content_type.is_some()
            && part(0) == seen.scope
            && part(1) == seen.method.as_bytes()
            && part(2) == seen.target.as_bytes()
            && part(3) == seen.explicit.unwrap_or_default()
            && part(4) == seen.content_type.map_or(&b""[..], HeaderValue::as_bytes)
            && self.body == seen.body
    }

    fn set(&mut self, quick: u64, seen: &KeyInputs<'_>, derived: &Derivation) {
        self.copy(quick, seen);
        self.derived = derived.clone();
    }

    /// Copies `seen` into the slot's buffers.
    fn copy(&mut self, quick: u64, seen: &KeyInputs<'_>) {
        self.quick = quick;
        self.rules = seen.rules;
        self.has_explicit = seen.explicit.is_some();
        self.has_content_type = seen.content_type.is_some();
        self.parts.clear();
        let content_type = seen.content_type.map_or(&b""[..], HeaderValue::as_bytes);
        let parts = [
            seen.scope,
            seen.method.as_bytes(),
            seen.target.as_bytes(),
            seen.explicit.unwrap_or_default(),
            content_type,
        ];
        for (n, part) in parts.into_iter().enumerate() {
            self.parts.extend_from_slice(part);
            self.ends[n] = self.parts.len();
        }
        self.body.clear();
        self.body.extend_from_slice(seen.body);
    }
}

/// The table of recent requests of one layer.
pub(crate) struct RecentRequests {
    /// The quick hash of the last request seen at each place: a request whose hash is not
    /// there is seen for the first time lately, and is not looked for in the slots.
    sightings: Box<[AtomicU64]>,
    slots: Box<[Mutex<Option<Memo>>]>,
    secrets: RapidSecrets,
}

impl Default for RecentRequests {
    fn default() -> Self {
        let mut seed = [0u8; 8];
        // A fixed seed would do: a collision only costs a comparison. A random one keeps a
        // client from aiming its requests at one slot.
        let _ = getrandom::fill(&mut seed);
        Self {
            sightings: (0..SIGHTINGS).map(|_| AtomicU64::new(0)).collect(),
            slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
            secrets: RapidSecrets::seed(u64::from_le_bytes(seed)),
        }
    }
}

impl RecentRequests {
    /// What `seen` derives to: remembered if the very same request came lately, else
    /// computed by `derive`, and remembered if it comes a second time.
    pub(crate) fn derive(
        &self,
        seen: &KeyInputs<'_>,
        derive: impl FnOnce() -> Derivation,
    ) -> Derivation {
        // Only JSON bodies are worth it: their canonical form is what is skipped.
        if !seen.content_type.is_some_and(is_json)
            || seen.body.len() > MAX_REMEMBERED
            || seen.scope.len()
                + seen.method.len()
                + seen.target.len()
                + seen.explicit.map_or(0, <[u8]>::len)
                + seen.content_type.map_or(0, HeaderValue::len)
                > MAX_REMEMBERED_HEAD
        {
            return derive();
        }
        let hash = |bytes: &[u8]| rapidhash_v3_seeded(bytes, &self.secrets);
        let quick = hash(seen.body)
            ^ hash(seen.scope).rotate_left(21)
            ^ hash(seen.target.as_bytes()).rotate_left(42);
        // Read and written plainly: two threads noting one place at once only cost a
        // derivation more.
        let sighting = &self.sightings[(quick % SIGHTINGS as u64) as usize];
        if sighting.load(Ordering::Relaxed) != quick {
            sighting.store(quick, Ordering::Relaxed);
            return derive();
        }
        let slot = &self.slots[(quick % SLOTS as u64) as usize];
        if let Some(remembered) = &*slot.lock().unwrap_or_else(PoisonError::into_inner) {
            if remembered.is(quick, seen) {
                return remembered.derived.clone();
            }
        }
        let derived = derive();
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *slot {
            Some(remembered) => remembered.set(quick, seen, &derived),
            None => *slot = Some(Memo::new(quick, seen, derived.clone())),
        }
        derived
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::key::Fingerprint;

    fn json() -> HeaderValue {
        HeaderValue::from_static("application/json")
    }

    fn seen<'a>(
        scope: &'a [u8],
        content_type: Option<&'a HeaderValue>,
        body: &'a [u8],
    ) -> KeyInputs<'a> {
        KeyInputs {
            rules: 0,
            scope,
            method: "POST",
            target: "/tools/send_email",
            explicit: None,
            content_type,
            body,
        }
    }

    /// Derives `seen` through the table, counting the derivations it had to make.
    fn derive(recent: &RecentRequests, seen: &KeyInputs<'_>, made: &Cell<u32>) -> Derivation {
        recent.derive(seen, || {
            made.set(made.get() + 1);
            Derivation {
                printed: BodyFingerprint {
                    fingerprint: Fingerprint::raw(None, seen.body),
                    key_field: None,
                    unkeyable: None,
                },
                scope: ScopeHash::of(seen.scope),
                key: Ok(IntentKey::from_bytes([made.get() as u8; 32])),
            }
        })
    }

    #[test]
    fn a_request_seen_again_is_remembered_and_not_derived_a_third_time() {
        let recent = RecentRequests::default();
        let made = Cell::new(0);
        let json = json();
        let request = seen(b"s1", Some(&json), br#"{"to":"a@example.com"}"#);
        let first = derive(&recent, &request, &made);
        assert_eq!(made.get(), 1);
        let again = derive(&recent, &request, &made);
        assert_eq!(made.get(), 2, "remembered at its second sighting");
        let third = derive(&recent, &request, &made);
        let fourth = derive(&recent, &request, &made);
        assert_eq!(made.get(), 2, "found from then on");
        // The counted derivations give the `made`th key: the found ones are the second's.
        assert_eq!(first.key.unwrap(), IntentKey::from_bytes([1; 32]));
        let again = again.key.unwrap();
        assert_eq!(third.key.unwrap(), again);
        assert_eq!(fourth.key.unwrap(), again);
    }

    #[test]
    fn a_request_seen_once_is_not_copied_into_a_slot() {
        let recent = RecentRequests::default();
        let made = Cell::new(0);
        let json = json();
        for n in 0..3 * SLOTS {
            let body = format!(r#"{{"n":{n}}}"#);
            derive(&recent, &seen(b"s1", Some(&json), body.as_bytes()), &made);
        }
        let held = recent
            .slots
            .iter()
            .filter(|slot| slot.lock().unwrap().is_some())
            .count();
        assert_eq!(held, 0);
    }

    #[test]
    fn a_request_differing_in_any_part_is_derived_anew() {
        let recent = RecentRequests::default();
        let made = Cell::new(0);
        let (json, json_ld) = (json(), HeaderValue::from_static("application/ld+json"));
        let body: &[u8] = br#"{"a":1}"#;
        let base = seen(b"s1", Some(&json), body);
        // Seen twice: remembered, so that a request that differs must not be answered from it.
        derive(&recent, &base, &made);
        derive(&recent, &base, &made);
        let others = [
            KeyInputs {
                scope: b"s2",
                ..base
            },
            KeyInputs { rules: 1, ..base },
            KeyInputs {
                method: "PUT",
                ..base
            },
            KeyInputs {
                target: "/tools/send_email?x=1",
                ..base
            },
            KeyInputs {
                explicit: Some(b"k-1"),
                ..base
            },
            KeyInputs {
                content_type: Some(&json_ld),
                ..base
            },
            KeyInputs {
                body: br#"{"a":2}"#,
                ..base
            },
        ];
        for other in &others {
            made.set(0);
            derive(&recent, other, &made);
            assert_eq!(made.get(), 1, "{other:?}");
            // Back to the base request, which may share the slot: derived at most once more,
            // and remembered again.
            made.set(0);
            derive(&recent, &base, &made);
            derive(&recent, &base, &made);
            assert!(made.get() <= 1, "{other:?}");
        }
    }

    #[test]
    fn bodies_that_are_not_json_or_are_over_the_limits_are_not_remembered() {
        let recent = RecentRequests::default();
        let json = json();
        let large = vec![b' '; MAX_REMEMBERED + 1];
        let long_scope = vec![b's'; MAX_REMEMBERED_HEAD + 1];
        let requests = [
            seen(b"s1", None, b"{}"),
            seen(b"s1", Some(&json), &large),
            seen(&long_scope, Some(&json), b"{}"),
        ];
        for request in &requests {
            let made = Cell::new(0);
            for _ in 0..3 {
                derive(&recent, request, &made);
            }
            assert_eq!(made.get(), 3);
        }
    }

    #[test]
    fn a_content_type_or_method_past_the_head_limit_is_not_remembered() {
        // A caller could otherwise make every slot keep a long header, past the table's bound.
        let recent = RecentRequests::default();
        let padded = format!("application/json; x={}", "y".repeat(MAX_REMEMBERED_HEAD));
        let long_type = HeaderValue::from_str(&padded).unwrap();
        let long_method = "P".repeat(MAX_REMEMBERED_HEAD + 1);
        let json = json();
        let requests = [
            seen(b"s1", Some(&long_type), b"{}"),
            KeyInputs {
                method: &long_method,
                ..seen(b"s1", Some(&json), b"{}")
            },
        ];
        for request in &requests {
            let made = Cell::new(0);
            for _ in 0..3 {
                derive(&recent, request, &made);
            }
            assert_eq!(made.get(), 3);
        }
    }
}
