//! A small tool server behind the layer, served over real HTTP on loopback or an in-memory
//! pipe, and a client for it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Notify;

#[allow(unused_imports)] // not every test reads answers by name
pub use answer::Answer;
pub use client::Client;

/// Executions started per tool.
#[derive(Clone, Default)]
pub struct Counts {
    started: Arc<Mutex<HashMap<String, usize>>>,
    bumped: Arc<Notify>,
    /// Whether `/tools/flaky` answers 200 rather than 503.
    recovered: Arc<std::sync::atomic::AtomicBool>,
}

impl Counts {
    /// Counts one execution of `tool` and returns its number.
    pub fn bump(&self, tool: &str) -> usize {
        let n = {
            let mut counts = self.started.lock().unwrap();
            let n = counts.entry(tool.to_owned()).or_default();
            *n += 1;
            *n
        };
        self.bumped.notify_waiters();
        n
    }

    /// Every counter, for checks across many intents.
    pub fn all(&self) -> HashMap<String, usize> {
        self.started.lock().unwrap().clone()
    }

    /// Whether `/tools/flaky` fails (503, the default) or answers 200.
    #[allow(dead_code, reason = "not every test binary calls it")]
    pub fn set_flaky(&self, failing: bool) {
        self.recovered
            .store(!failing, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn get(&self, tool: &str) -> usize {
        self.started.lock().unwrap().get(tool).copied().unwrap_or(0)
    }

    /// Returns once `tool` has started `n` times (within 10 s, or the test fails): a call sent
    /// after it finds that execution running, with no guess at how long it takes to start.
    pub async fn reached(&self, tool: &str, n: usize) {
        loop {
            let bumped = self.bumped.notified();
            if self.get(tool) >= n {
                return;
            }
            tokio::time::timeout(Duration::from_secs(10), bumped)
                .await
                .unwrap_or_else(|_| panic!("{tool} did not start {n} time(s)"));
        }
    }
}

/// The work a call asks the tool to take: `delay_ms` in its body, on Tokio's clock (virtual
/// time in the tests that pause it).
async fn work(body: &Value) {
    let delay = Duration::from_millis(body.get("delay_ms").and_then(Value::as_u64).unwrap_or(0));
    tokio::time::sleep(delay).await;
}

/// Tools that cover every outcome the layer distinguishes.
pub fn tools(counts: Counts) -> Router {
    Router::new()
        .route("/tools/echo", post(echo))
        .route("/tools/status/{code}", post(with_status))
        .route("/tools/flaky", post(flaky))
        .route("/tools/no_store", post(no_store))
        .route("/tools/busy", post(busy))
        .route("/tools/panic", post(panics))
        .route("/tools/broken_body", post(broken_body))
        .route("/tools/interrupted", post(interrupted))
        .route("/tools/interrupted_body", post(interrupted_body))
        .route("/tools/big", post(big))
        .route("/tools/raw", post(raw))
        .route("/tools/search", get(search))
        .route("/tools/intent", post(per_intent))
        .route("/internal/echo", post(echo))
        .with_state(counts)
}

async fn echo(State(counts): State<Counts>, Json(body): Json<Value>) -> impl IntoResponse {
    let n = counts.bump("echo");
    work(&body).await;
    (StatusCode::CREATED, Json(json!({ "n": n, "echo": body })))
}

/// Counts executions per `id` in the body (`intent:<id>`), sleeping `delay_ms` first.
async fn per_intent(State(counts): State<Counts>, Json(body): Json<Value>) -> impl IntoResponse {
    let id = body["id"].as_u64().unwrap_or_default();
    let n = counts.bump(&format!("intent:{id}"));
    counts.bump("intent");
    work(&body).await;
    Json(json!({ "id": id, "n": n }))
}

async fn raw(State(counts): State<Counts>, body: Bytes) -> impl IntoResponse {
    let n = counts.bump("raw");
    format!("raw {n}: {} bytes", body.len())
}

async fn with_status(
    State(counts): State<Counts>,
    Path(code): Path<u16>,
    Json(body): Json<Value>,
) -> Response {
    let n = counts.bump("status");
    work(&body).await;
    let status = StatusCode::from_u16(code).unwrap();
    (status, Json(json!({ "n": n, "status": code }))).into_response()
}

async fn flaky(State(counts): State<Counts>) -> Response {
    let n = counts.bump("flaky");
    if counts.recovered.load(std::sync::atomic::Ordering::SeqCst) {
        (StatusCode::OK, Json(json!({ "n": n }))).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "n": n }))).into_response()
    }
}

async fn no_store(State(counts): State<Counts>) -> impl IntoResponse {
    let n = counts.bump("no_store");
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(json!({ "n": n })),
    )
}

/// Too many requests: come back in 7 s.
async fn busy(State(counts): State<Counts>) -> impl IntoResponse {
    let n = counts.bump("busy");
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, "7")],
        Json(json!({ "n": n })),
    )
}

async fn panics(State(counts): State<Counts>) -> &'static str {
    counts.bump("panic");
    panic!("the tool crashed");
}

async fn broken_body(State(counts): State<Counts>) -> Response {
    counts.bump("broken_body");
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from_static(b"{\"partial\":")),
        Err(std::io::Error::other("the stream broke")),
    ];
    Body::from_stream(futures_util::stream::iter(chunks)).into_response()
}

/// What a proxy writes when the upstream's connection broke after the request was sent.
async fn interrupted(State(counts): State<Counts>) -> Response {
    counts.bump("interrupted");
    let mut response = (StatusCode::BAD_GATEWAY, "connection reset").into_response();
    response
        .extensions_mut()
        .insert(tower_idempotency::Interrupted);
    response
}

/// What a proxy passes on when the upstream's connection broke in the middle of its answer.
async fn interrupted_body(State(counts): State<Counts>) -> Response {
    counts.bump("interrupted_body");
    let chunks: Vec<Result<Bytes, tower_idempotency::Interrupted>> = vec![
        Ok(Bytes::from_static(b"{\"charged\":")),
        Err(tower_idempotency::Interrupted),
    ];
    Body::from_stream(futures_util::stream::iter(chunks)).into_response()
}

async fn big(State(counts): State<Counts>, Json(body): Json<Value>) -> impl IntoResponse {
    let n = counts.bump("big");
    let size = body["bytes"].as_u64().unwrap_or(0) as usize;
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{n}:{}", "x".repeat(size)),
    )
}

async fn search(State(counts): State<Counts>) -> impl IntoResponse {
    let n = counts.bump("search");
    Json(json!({ "n": n }))
}

/// The test tools behind `layer`, served on loopback: a client for them and their counts.
pub async fn start<St: tower_idempotency::store::Store>(
    layer: tower_idempotency::IdempotencyLayer<St>,
) -> (Client, Counts) {
    let counts = Counts::default();
    let base = serve(tools(counts.clone()).layer(layer)).await;
    (Client::new(base), counts)
}

/// The test tools behind `layer`, over the in-memory pipe (for tests on the paused clock).
pub fn start_in_memory<St: tower_idempotency::store::Store>(
    layer: tower_idempotency::IdempotencyLayer<St>,
) -> (Client, Counts) {
    let counts = Counts::default();
    (
        Client::in_memory(tools(counts.clone()).layer(layer)),
        counts,
    )
}

/// Serves `app` on a free loopback port; returns its base URL.
/// The status of an MCP POST's answer and its JSON-RPC message: the last `data:` line where it
/// came as an event stream, else the body (`Null` where that is no JSON).
pub async fn json_rpc_answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    let data = body
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(&body);
    (status, serde_json::from_str(data).unwrap_or(Value::Null))
}

pub async fn serve(app: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// Runs a call through `first` and its repeat through `second` (the same instance or
/// another), then a call that fails with 503 through `first`, whose attempt `second` looks up
/// on the status path: the repeat is replayed, the tool ran once, and the failure shows.
pub async fn assert_replayed_and_failure_shown(first: &Client, second: &Client, counts: &Counts) {
    assert_eq!(
        first.post("/tools/echo", "s", "{}").await.status,
        StatusCode::CREATED
    );
    assert!(second.post("/tools/echo", "s", "{}").await.replayed());
    assert_eq!(counts.get("echo"), 1);
    let failed = first.post("/tools/status/503", "s", "{}").await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    let status = second
        .get(&format!("/_idempotency/{}", failed.intent()), Some("s"))
        .await;
    assert_eq!(status.json()["outcome"], "failed");
}

pub mod answer;
#[cfg(any(feature = "redis-tls", feature = "postgres-tls"))]
pub mod certificates;
pub mod client;
pub mod faulty;
pub mod gateway;
#[cfg(feature = "postgres")]
pub mod postgres_server;
pub mod process;
pub mod recorded;
#[cfg(feature = "redis")]
pub mod redis_server;
#[cfg(feature = "redis-tls")]
pub mod redis_tls;
#[cfg(feature = "postgres")]
pub mod relay;
pub mod sdk_clients;
pub mod soak;
