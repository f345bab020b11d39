//! Client cancellations (`notifications/cancelled`): which ones reach the server.
//!
//! A client cancels a request when its own timeout fires, and then often retries it. Passed
//! on, the cancellation would stop a protected execution halfway (for every caller coalesced
//! on it) and its retry would run the action again, so the layer answers it itself. Only a
//! request that this instance forwarded unprotected in the same session (a read-only tool, a
//! `ping`, a `resources/read`) is the server's to cancel: cancellation is advisory in MCP,
//! and a protected call named by an unknown id may be running through another instance.

use std::time::Duration;

use http::HeaderMap;
use moka::sync::Cache;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::MCP_SESSION_HEADER;
use crate::key::put_framed;

/// How many forwarded request ids are remembered, and for how long after the last use.
const REMEMBERED: u64 = 65_536;
const REMEMBERED_FOR: Duration = Duration::from_secs(15 * 60);

/// The requests this instance forwarded unprotected, by session, credential and JSON-RPC id.
#[derive(Clone)]
pub(crate) struct ForwardedRequests {
    ids: Cache<u128, ()>,
}

impl Default for ForwardedRequests {
    fn default() -> Self {
        Self {
            ids: Cache::builder()
                .max_capacity(REMEMBERED)
                .time_to_idle(REMEMBERED_FOR)
                .build(),
        }
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
    /// Remembers that the request `id` of this session went to the server unprotected.
    pub(crate) fn forwarded(&self, headers: &HeaderMap, id: &Value) {
        self.ids.insert(slot(headers, id), ());
    }

    /// Forgets `id` in this session: it now names a protected call, which no cancellation
    /// may reach.
    pub(crate) fn protected(&self, headers: &HeaderMap, id: &Value) {
        self.ids.invalidate(&slot(headers, id));
    }

    /// Whether a cancellation of the request `id` in this session is the server's to act on.
    pub(crate) fn passes_on(&self, headers: &HeaderMap, id: &Value) -> bool {
        self.ids.contains_key(&slot(headers, id))
    }
}

/// The session, the credential and the id, hashed: a remembered id costs 16 bytes, whatever
/// the client sent.
fn slot(headers: &HeaderMap, id: &Value) -> u128 {
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
        forwarded.forwarded(&session("a"), &Value::from(1));
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
        forwarded.forwarded(&token("Bearer a"), &Value::from(1));
        assert!(forwarded.passes_on(&token("Bearer a"), &Value::from(1)));
        assert!(!forwarded.passes_on(&token("Bearer b"), &Value::from(1)));
        assert!(!forwarded.passes_on(&HeaderMap::new(), &Value::from(1)));
    }
}
