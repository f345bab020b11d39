//! Client cancellations (`notifications/cancelled`): which ones reach the server.
//!
//! A client cancels a request when its own timeout fires, and then often retries it. Passed
//! on, the cancellation would stop a protected execution halfway (for every caller coalesced
//! on it) and its retry would run the action again, so the layer answers it itself. Only a
//! request that this instance forwarded unprotected in the same session (a read-only tool, a
//! `ping`, a `resources/read`) and whose answer is still on its way is the server's to
//! cancel: cancellation is advisory in MCP, a protected call named by an unknown id may be
//! running through another instance, and an id already answered may name a protected call
//! next.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use moka::ops::compute::Op;
use moka::sync::Cache;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::MCP_SESSION_HEADER;
use crate::key::put_framed;

/// How many open request ids are remembered, and for how long after the last use: a bound,
/// for requests whose end is never seen; forgetting one only keeps its cancellation here.
const REMEMBERED: u64 = 65_536;
const REMEMBERED_FOR: Duration = Duration::from_secs(15 * 60);

/// The requests this instance forwarded unprotected and has not yet seen answered, by
/// session, credential and JSON-RPC id; each with the number of its forwarding, so that the
/// end of an earlier request under the same id forgets only itself.
#[derive(Clone)]
pub(crate) struct ForwardedRequests {
    ids: Cache<u128, u64>,
    forwardings: Arc<AtomicU64>,
}

impl Default for ForwardedRequests {
    fn default() -> Self {
        Self {
            ids: Cache::builder()
                .max_capacity(REMEMBERED)
                .time_to_idle(REMEMBERED_FOR)
                .build(),
            forwardings: Arc::default(),
        }
    }
}

/// One forwarded request, open until this is dropped: with the response that answers it.
pub(crate) struct OpenRequest {
    requests: ForwardedRequests,
    slot: u128,
    forwarding: u64,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        let forwarding = self.forwarding;
        self.requests
            .ids
            .entry(self.slot)
            .and_compute_with(|open| match open {
                Some(open) if *open.value() == forwarding => Op::Remove,
                _ => Op::Nop,
            });
    }
}

impl std::fmt::Debug for ForwardedRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardedRequests")
            .field("remembered", &self.ids.entry_count())
            .finish()
    }
}

impl ForwardedRequests {
    /// Remembers that the request `id` of this session went to the server unprotected, until
    /// the returned [`OpenRequest`] is dropped.
    #[must_use = "the request is open only while this is kept"]
    pub(crate) fn open(&self, headers: &HeaderMap, id: &Value) -> OpenRequest {
        let slot = slot(headers, id);
        let forwarding = self.forwardings.fetch_add(1, Ordering::Relaxed);
        self.ids.insert(slot, forwarding);
        OpenRequest {
            requests: self.clone(),
            slot,
            forwarding,
        }
    }

    /// Forgets `id` in this session: it now names a protected call, which no cancellation
    /// may reach.
    pub(crate) fn protected(&self, headers: &HeaderMap, id: &Value) {
        self.ids.invalidate(&slot(headers, id));
    }

    /// Whether a cancellation of the request `id` in this session is the server's to act on:
    /// it is open through this instance.
    pub(crate) fn passes_on(&self, headers: &HeaderMap, id: &Value) -> bool {
        self.ids.contains_key(&slot(headers, id))
    }
}

/// The session, the credential and the id, hashed: a remembered id costs 16 bytes, whatever
/// the client sent.
pub(crate) fn slot(headers: &HeaderMap, id: &Value) -> u128 {
    let part = |name| headers.get(name).map_or(&b""[..], |value| value.as_bytes());
    let mut hasher = Sha256::new();
    put_framed(&mut hasher, part(MCP_SESSION_HEADER));
    put_framed(&mut hasher, part(http::header::AUTHORIZATION.as_str()));
    put_framed(&mut hasher, id.to_string().as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn session(id: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(MCP_SESSION_HEADER, HeaderValue::from_static(id));
        headers
    }

    #[test]
    fn only_requests_forwarded_in_the_same_session_are_passed_on() {
        let forwarded = ForwardedRequests::default();
        let _open = forwarded.open(&session("a"), &Value::from(1));
        assert!(forwarded.passes_on(&session("a"), &Value::from(1)));
        assert!(!forwarded.passes_on(&session("b"), &Value::from(1)));
        assert!(!forwarded.passes_on(&session("a"), &Value::from("1")));
        assert!(!forwarded.passes_on(&session("a"), &Value::from(2)));
        forwarded.protected(&session("a"), &Value::from(1));
        assert!(!forwarded.passes_on(&session("a"), &Value::from(1)));
    }

    #[test]
    fn without_sessions_the_credential_tells_requests_apart() {
        let token = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::AUTHORIZATION, HeaderValue::from_static(value));
            headers
        };
        let forwarded = ForwardedRequests::default();
        let _open = forwarded.open(&token("Bearer a"), &Value::from(1));
        assert!(forwarded.passes_on(&token("Bearer a"), &Value::from(1)));
        assert!(!forwarded.passes_on(&token("Bearer b"), &Value::from(1)));
        assert!(!forwarded.passes_on(&HeaderMap::new(), &Value::from(1)));
    }

    #[test]
    fn a_request_is_passed_on_only_until_it_is_answered() {
        let forwarded = ForwardedRequests::default();
        let first = forwarded.open(&session("a"), &Value::from(1));
        assert!(forwarded.passes_on(&session("a"), &Value::from(1)));
        drop(first);
        assert!(!forwarded.passes_on(&session("a"), &Value::from(1)));
        // An earlier request under the same id ends without closing the later one.
        let earlier = forwarded.open(&session("a"), &Value::from(2));
        let later = forwarded.open(&session("a"), &Value::from(2));
        drop(earlier);
        assert!(forwarded.passes_on(&session("a"), &Value::from(2)));
        drop(later);
        assert!(!forwarded.passes_on(&session("a"), &Value::from(2)));
    }
}
