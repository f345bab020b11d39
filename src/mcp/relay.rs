//! What a server says on a protected call's event stream before the answer, relayed in MCP
//! terms: a notification (progress, a log message, a resource update) goes to the caller
//! attached to the call as it comes; a request of the server's own (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) goes too, with its id as the server wrote it, and
//! is asked again of a caller that takes over until the client's answer to it (a POST of a
//! JSON-RPC response, which goes on to the server as it was sent) is seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use serde_json::Value;
use sse_stream::Sse;

use super::cancellation;
use super::list_changed::ListChanges;
use super::MCP_SESSION_HEADER;
use crate::engine::relay::{Place, Relay};

/// Past this many remembered questions or callers, those whose call has ended are forgotten.
const PRUNE_PAST: usize = 1024;

/// The questions relayed and the callers attached, across the endpoint's calls: where the
/// client's answer to a question, or its cancellation of a call, is taken.
#[derive(Clone, Default)]
pub(crate) struct Relays {
    inner: Arc<Registries>,
}

#[derive(Default)]
struct Registries {
    /// Unanswered questions, by session and the server's id.
    asks: Mutex<HashMap<QuestionKey, Weak<Relay>>>,
    /// Attached callers, by session, credential and the call's id.
    callers: Mutex<HashMap<u128, Place>>,
}

/// A question, by the session it was asked in and the server's id for it.
type QuestionKey = (Option<HeaderValue>, String);

impl std::fmt::Debug for Relays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relays")
    }
}

/// Where one execution's stream is relayed: its relay, and the session its questions are
/// answered in.
pub(crate) struct Outlet {
    pub(crate) relay: Arc<Relay>,
    pub(crate) relays: Relays,
    pub(crate) session: Option<HeaderValue>,
    /// Where the server's word that its tools changed is taken, where it is watched.
    pub(crate) changes: Option<ListChanges>,
}

impl Outlet {
    /// Relays one message of the stream that is not the answer (`data`, as the server wrote
    /// it): a notification, or a question kept until it is answered. Anything else (an answer
    /// to another request) is not the caller's.
    pub(crate) fn pass(&self, message: &Value, data: &str) {
        if message.get("method").is_none() {
            return;
        }
        if let Some(changes) = &self.changes {
            changes.read(message);
        }
        let event = event_of(data);
        match message.get("id") {
            Some(id) => {
                let id = id.to_string();
                let mut asks = lock(&self.relays.inner.asks);
                if asks.len() > PRUNE_PAST {
                    asks.retain(|_, relay| relay.strong_count() > 0);
                }
                asks.insert(
                    (self.session.clone(), id.clone()),
                    Arc::downgrade(&self.relay),
                );
                drop(asks);
                self.relay.ask(id, event);
            }
            None => self.relay.send(event),
        }
    }
}

impl Relays {
    /// Takes note of a POST that may be the client's answer to a question relayed to it (a
    /// JSON-RPC response: an id, a result or an error, no method). Only read while a question
    /// waits.
    pub(crate) fn answered(&self, headers: &HeaderMap, body: &[u8]) {
        if lock(&self.inner.asks).is_empty() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        let is_response = message.get("method").is_none()
            && (message.get("result").is_some() || message.get("error").is_some());
        let Some(id) = message.get("id").filter(|_| is_response) else {
            return;
        };
        let id = id.to_string();
        let session = headers.get(MCP_SESSION_HEADER).cloned();
        let asked = lock(&self.inner.asks).remove(&(session, id.clone()));
        if let Some(relay) = asked.and_then(|relay| relay.upgrade()) {
            relay.answered(&id);
        }
    }

    /// Remembers where the caller of a call is attached, by the call's
    /// [`slot`](cancellation::slot), until `Attending` is dropped.
    pub(crate) fn attending(&self, slot: u128, place: Place) -> Attending {
        let mut callers = lock(&self.inner.callers);
        if callers.len() > PRUNE_PAST {
            callers.retain(|_, place| place.is_live());
        }
        callers.insert(slot, place);
        Attending {
            relays: self.clone(),
            slot,
        }
    }

    /// The client cancelled the call `id`: its caller gave up on it, and is handed no more
    /// of what the server says (a retry that joins takes over).
    pub(crate) fn cancelled(&self, headers: &HeaderMap, id: &Value) {
        let place = lock(&self.inner.callers).remove(&cancellation::slot(headers, id));
        if let Some(place) = place {
            place.detach();
        }
    }
}

/// A caller remembered as attached, until this is dropped.
pub(crate) struct Attending {
    relays: Relays,
    slot: u128,
}

impl Drop for Attending {
    fn drop(&mut self) {
        lock(&self.relays.inner.callers).remove(&self.slot);
    }
}

/// `data` as one `message` event: a line of data written in one allocation; data of several
/// lines, a line each.
fn event_of(data: &str) -> Bytes {
    if data.contains(['\n', '\r']) {
        return Bytes::from(Sse::default().event("message").data(data.to_owned()));
    }
    const HEAD: &[u8] = b"event: message\ndata: ";
    let mut event = bytes::BytesMut::with_capacity(HEAD.len() + data.len() + 2);
    event.extend_from_slice(HEAD);
    event.extend_from_slice(data.as_bytes());
    event.extend_from_slice(b"\n\n");
    event.freeze()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The session a call's questions are answered in.
pub(crate) fn session_of(headers: &HeaderMap) -> Option<HeaderValue> {
    headers.get(MCP_SESSION_HEADER).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_written_as_the_sse_library_writes_it() {
        for data in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
            "{\n\"a\": 1\n}",
        ] {
            let library = Bytes::from(Sse::default().event("message").data(data.to_owned()));
            assert_eq!(event_of(data), library, "{data:?}");
        }
    }
}
