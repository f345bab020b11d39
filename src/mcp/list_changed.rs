//! A server's word that its tools changed (`notifications/tools/list_changed`), taken as it
//! passes back to a client: on the `GET` stream of the handshake era, on the stream of a
//! request passed on (a `subscriptions/listen` of 2026-07-28, a call passed through), or on a
//! protected call's stream. The server's listing then ends: what it declared is forgotten
//! until it lists its tools again. Watched only where arguments are checked.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use memchr::memmem;
use serde_json::Value;

use super::listing::Server;
use super::message::is_event_stream;
use super::policy::ToolPolicy;
use crate::body::ResponseBody;

/// The notification's method.
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// The method as a JSON string, as it stands in a stream's bytes.
const QUOTED: &[u8] = b"\"notifications/tools/list_changed\"";

/// Where one server's word that its tools changed is taken.
#[derive(Clone)]
pub(crate) struct ListChanges {
    policy: Arc<ToolPolicy>,
    server: Server,
}

impl std::fmt::Debug for ListChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListChanges")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl ListChanges {
    /// The changes of `server`'s listing, where the layer checks arguments by it; none
    /// otherwise, and nothing is watched.
    pub(crate) fn of(policy: &Arc<ToolPolicy>, server: Server) -> Option<Self> {
        policy.validates_arguments.then(|| Self {
            policy: Arc::clone(policy),
            server,
        })
    }

    /// Takes note of a message of the server's, read: the listing ends where it says so.
    pub(crate) fn read(&self, message: &Value) {
        if message.get("method").and_then(Value::as_str) == Some(LIST_CHANGED) {
            self.policy.listings.changed(self.server);
        }
    }

    /// `response` passed on as it is, its body watched for the notification where it is an
    /// event stream.
    pub(crate) fn watching<B>(self, response: Response<B>) -> Response<ResponseBody<B>> {
        if !is_event_stream(response.headers()) {
            return response.map(ResponseBody::inner);
        }
        let mut watch = NotificationScan {
            changes: self,
            tail: Vec::new(),
        };
        response.map(|body| ResponseBody::watched(body, Box::new(move |chunk| watch.see(chunk))))
    }
}

/// A stream's bytes searched for the notification, across the chunks they come in.
struct NotificationScan {
    changes: ListChanges,
    /// The end of the last chunk, where the notification may begin.
    tail: Vec<u8>,
}

impl NotificationScan {
    /// Sees the next `chunk`. The method is looked for as a JSON string, not read from
    /// each event: the same string elsewhere in a message only ends the listing too early,
    /// which makes the layer check nothing until the tools are listed again.
    fn see(&mut self, chunk: &Bytes) {
        let keep = QUOTED.len() - 1;
        let mut seam = std::mem::take(&mut self.tail);
        seam.extend_from_slice(&chunk[..chunk.len().min(keep)]);
        if memmem::find(&seam, QUOTED).is_some() || memmem::find(chunk, QUOTED).is_some() {
            self.changes.policy.listings.changed(self.changes.server);
        }
        self.tail = if chunk.len() >= keep {
            chunk[chunk.len() - keep..].to_vec()
        } else {
            let from = seam.len().saturating_sub(keep);
            seam.split_off(from)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> Arc<ToolPolicy> {
        let policy = ToolPolicy {
            validates_arguments: true,
            ..ToolPolicy::default()
        };
        Arc::new(policy)
    }

    fn listed(policy: &ToolPolicy) -> bool {
        let listings = &policy.listings;
        listings.tool(Server::TEST, "send", |_| ()).is_some()
    }

    fn learnt(policy: &ToolPolicy) {
        let revision = policy.listings.revision(Server::TEST);
        let listing = json!({"tools": [{"name": "send", "inputSchema": {"type": "object"}}]});
        policy.learn(revision, listing.as_object().unwrap());
    }

    fn watch(policy: &Arc<ToolPolicy>) -> NotificationScan {
        let changes = ListChanges::of(policy, Server::TEST).unwrap();
        NotificationScan {
            changes,
            tail: Vec::new(),
        }
    }

    #[test]
    fn the_notification_ends_the_listing_even_split_across_chunks() {
        let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
        for at in [0, 20, 30, 40, 45, 60, event.len()] {
            let policy = policy();
            learnt(&policy);
            let mut watch = watch(&policy);
            let (head, rest) = event.split_at(at);
            // The head in bytes one at a time, the rest at once.
            for byte in head.bytes() {
                watch.see(&Bytes::copy_from_slice(&[byte]));
            }
            watch.see(&Bytes::copy_from_slice(rest.as_bytes()));
            assert!(!listed(&policy), "split at {at}");
        }
    }

    #[test]
    fn other_messages_leave_the_listing() {
        let policy = policy();
        learnt(&policy);
        let mut watch = watch(&policy);
        let progress = "data: {\"method\":\"notifications/progress\",\"params\":{\"message\":\"notifications/tools/list_changed is a method\"}}\n\n";
        watch.see(&Bytes::from_static(progress.as_bytes()));
        assert!(listed(&policy));
        let changes = ListChanges::of(&policy, Server::TEST).unwrap();
        changes.read(&json!({"method": "notifications/resources/list_changed"}));
        assert!(listed(&policy));
        changes.read(&json!({"jsonrpc": "2.0", "method": LIST_CHANGED}));
        assert!(!listed(&policy));
    }

    #[test]
    fn nothing_is_watched_where_arguments_are_not_checked() {
        let policy = Arc::new(ToolPolicy::default());
        assert!(ListChanges::of(&policy, Server::TEST).is_none());
    }
}
