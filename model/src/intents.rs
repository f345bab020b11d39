//! The intents the model's callers ask for, derived by the crate's own layer: the same body
//! sent under two scopes. The key, scope hash and fingerprint of each are what the layer
//! wrote, read back from the record it kept, so that the model claims what a real request
//! would claim.

use std::convert::Infallible;
use std::str::FromStr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tower::{service_fn, Layer, ServiceExt};
use tower_idempotency::key::{Fingerprint, ScopeHash};
use tower_idempotency::store::{Entry, MemoryStore, Store};
use tower_idempotency::{IdempotencyLayer, IntentKey, DEFAULT_SCOPE_HEADER, INTENT_HEADER};

/// The body every caller sends: one tool call, the same for both scopes.
const BODY: &str = r#"{"to":"ada@example.com","subject":"hello"}"#;

/// The scopes (session values) of the callers, one intent each.
pub const SCOPES: [&str; 2] = ["alice", "bob"];

/// One intent as the layer keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent {
    pub key: IntentKey,
    pub scope: ScopeHash,
    pub fingerprint: Fingerprint,
}

/// The intent of the body under each of [`SCOPES`], in that order.
pub fn derive() -> Vec<Intent> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime to derive the intents in");
    runtime.block_on(async {
        let store = MemoryStore::new();
        let layer = IdempotencyLayer::new().store(store.clone());
        let tool = service_fn(|_: Request<Full<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"sent"))))
        });
        let service = layer.layer(tool);
        let mut intents = Vec::new();
        for scope in SCOPES {
            let request = Request::post("/tools/send_email")
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(DEFAULT_SCOPE_HEADER, scope)
                .body(Full::new(Bytes::from_static(BODY.as_bytes())))
                .expect("a valid request");
            let response = service.clone().oneshot(request).await.expect("infallible");
            let key = response
                .headers()
                .get(INTENT_HEADER)
                .and_then(|value| value.to_str().ok())
                .and_then(|hex| IntentKey::from_str(hex).ok())
                .expect("the layer names the intent it protected");
            let Ok(Some(Entry::Completed(record))) = store.get(&key).await else {
                panic!("the layer kept the record of the call it ran");
            };
            intents.push(Intent {
                key,
                scope: record.scope,
                fingerprint: record.fingerprint,
            });
        }
        intents
    })
}
