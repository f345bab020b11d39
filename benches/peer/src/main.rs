//! One minimal axum app, the same `send_email` handler and nothing else, served in one of these
//! modes: `idempotency-peer-bench <mode> <addr>`.
//!
//! - `bare`: the handler alone.
//! - `ours`: behind this crate's `IdempotencyLayer::new()`.
//! - `ours-1mib`: this crate's layer over a memory store of 1 MiB rather than the default 64, to
//!   tell what the byte budget costs.
//! - `peer`: behind the `idempotent` crate's layer over its memory store.
//! - `digest`: behind a layer that only reads, canonicalises and hashes the body, the least a
//!   layer that keys by content does, over the same HTTP.
//! - `keep`: behind a plain layer that keeps outcomes (`keep.rs`).
//!
//! Three commands run in process instead:
//!
//! - `idempotency-peer-bench floor` prints the microseconds that canonicalising and hashing one
//!   of the load's bodies takes: the least a layer that keys by content must spend on it.
//! - `idempotency-peer-bench flood` sends 300 000 new intents over 1 000 scopes through this
//!   crate's layer and prints what its memory store keeps and the process's resident memory.
//! - `idempotency-peer-bench calls <mode> N` sends N first executions of the load's kind through
//!   the app, one after another, so that an instruction counter or a heap profiler sees one
//!   request's work N times without a network in between.

mod keep;

use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// Reads the e-mail and says it was sent: the work a real tool does is left out, so that what
/// is measured is the layer.
async fn send_email(Json(email): Json<Value>) -> Json<Value> {
    let to = email.get("to").cloned().unwrap_or(Value::Null);
    Json(json!({ "status": "sent", "to": to, "message_id": "msg_1" }))
}

/// The `n`th ~1 KiB body of the first-execution load, as `first_execution.lua` writes it.
fn load_body(n: u32) -> String {
    // The body's text: 900 x's, padded in place.
    format!(
        r#"{{"to":"ann@example.com","subject":"report 1764000000-1-{n}","body":"{:x<900}"}}"#,
        ""
    )
}

/// Microseconds to canonicalise and hash one ~1 KiB body of the first-execution load, the median
/// of 15 batches.
fn floor() -> f64 {
    let bodies: Vec<String> = (0..1000).map(load_body).collect();
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let started = std::time::Instant::now();
            for body in &bodies {
                let digest = tower_idempotency::canonical::canonical_sha256(body.as_bytes());
                std::hint::black_box(digest.expect("canonical JSON"));
            }
            started.elapsed().as_secs_f64() * 1e6 / bodies.len() as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

/// Floods the layer with new intents from many scopes; prints the bytes kept against the
/// budget, the evictions, and the resident memory.
async fn flood() {
    use tower::ServiceExt;

    // Every record may go for room at once: the flood measures eviction at the budget, where
    // the default minimum retention would refuse the flood's new callers instead.
    let store = tower_idempotency::store::MemoryStore::builder()
        .min_retention(std::time::Duration::ZERO)
        .build();
    let app = Router::new()
        .route("/tools/send_email", post(send_email))
        .layer(tower_idempotency::IdempotencyLayer::with_store(
            store.clone(),
        ));
    let pad = "x".repeat(900);
    for n in 0..300_000u32 {
        let body = format!(r#"{{"to":"ann@example.com","subject":"report {n}","body":"{pad}"}}"#);
        let request = axum::http::Request::post("/tools/send_email")
            .header("content-type", "application/json")
            .header("x-session-id", format!("session-{}", n % 1000))
            .body(axum::body::Body::from(body))
            .expect("a request");
        let response = app.clone().oneshot(request).await.expect("an answer");
        assert!(response.status().is_success(), "{}", response.status());
    }
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))?
                .to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .unwrap_or(0);
    println!(
        "kept {} of {} bytes, {} evictions, resident {} MiB",
        store.weighted_size(),
        64 * 1024 * 1024,
        store.evictions(),
        rss_kib / 1024
    );
}

/// Reads the body, canonicalises and hashes it, and passes the request on: what a layer that
/// keys by content must do at least, with nothing kept.
async fn digest_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("a body");
    let digest = tower_idempotency::canonical::canonical_sha256(&bytes);
    std::hint::black_box(digest.ok());
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// The app of one mode.
fn app(mode: &str) -> Router {
    let app = Router::new().route("/tools/send_email", post(send_email));
    match mode {
        "bare" => app,
        "ours" => app.layer(tower_idempotency::IdempotencyLayer::new()),
        // Observe mode: every call keyed, counted and passed on.
        "observe" => app.layer(tower_idempotency::IdempotencyLayer::new().observe()),
        "ours-1mib" => app.layer(tower_idempotency::IdempotencyLayer::with_store(
            tower_idempotency::store::MemoryStore::builder()
                .max_bytes(1 << 20)
                .build(),
        )),
        "digest" => app.layer(axum::middleware::from_fn(digest_only)),
        "keep" => app.layer(axum::middleware::from_fn_with_state(
            keep::Shared::default(),
            keep::keep,
        )),
        "peer" => {
            let store = idempotent::memory::MemoryStore::builder()
                .try_build()
                .expect("the peer's memory store");
            app.layer(idempotent::middleware::IdempotencyLayer::new(store))
        }
        other => {
            panic!("mode {other:?}: bare, ours, observe, ours-1mib, peer, digest or keep")
        }
    }
}

/// Sends `count` first executions through `app` in process, as the load sends them.
async fn calls(app: Router, count: u32) {
    use tower::ServiceExt;

    for n in 0..count {
        let body = load_body(n);
        let request = axum::http::Request::post("/tools/send_email")
            .header("content-type", "application/json")
            .header("x-session-id", "load")
            .header("idempotency-key", format!("k-1764000000-1-{n}"))
            .body(axum::body::Body::from(body))
            .expect("a request");
        let response = app.clone().oneshot(request).await.expect("an answer");
        assert!(response.status().is_success(), "{}", response.status());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        std::hint::black_box(body.expect("a body"));
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "bare".to_owned());
    if mode == "floor" {
        println!("{:.2}", floor());
        return;
    }
    if mode == "flood" {
        flood().await;
        return;
    }
    if mode == "calls" {
        let mode = args.next().unwrap_or_else(|| "ours".to_owned());
        let count = args.next().map_or(10_000, |n| n.parse().expect("a count"));
        // As `serve` does: endpoints become routes, and layers are applied, once.
        calls(app(&mode).with_state(()), count).await;
        return;
    }
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let app = app(&mode);
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("listening on {addr} ({mode})");
    axum::serve(listener, app).await.expect("serve");
}
