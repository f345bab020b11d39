//! The layer as a production service would set it up: authentication outside it, the scope
//! from the authenticated principal narrowed by the conversation, only the tool routes
//! protected, the tiered Redis store when `REDIS_URL` is set, Prometheus metrics, and a
//! shutdown on SIGTERM bounded by its grace period.
//!
//! ```text
//! TOKENS=t-ann=ann,t-bob=bob cargo run --example production
//! curl -s localhost:3000/tools/send_email -H 'authorization: Bearer t-ann' \
//!      -H 'x-conversation-id: c1' -H 'content-type: application/json' -d '{"to":"a@example.com"}'
//! REDIS_URL=rediss://default:secret@redis.example.com:6380 \
//!      cargo run --features redis-tls --example production
//! ```
//!
//! Environment: `ADDR` (default `127.0.0.1:3000`), `TOKENS` (`token=principal` pairs, comma
//! separated: a stand-in for the service's real authentication), `REDIS_URL` (`redis://` or,
//! with the `redis-tls` feature, `rediss://`; without it, the in-process memory store),
//! `SHUTDOWN_GRACE_MS` (default 25000).

#[path = "support/shutdown.rs"]
mod shutdown;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::{json, Value};
use tower_idempotency::store::Store;
use tower_idempotency::{IdempotencyLayer, ATTEMPT_BUCKETS, DURATION_BUCKETS};

/// Who the authentication layer says a request comes from; the idempotency layer reads it.
#[derive(Clone, Debug)]
struct Principal(String);

/// Bearer tokens and their principals.
type Tokens = Arc<HashMap<String, String>>;

/// Authenticates a request or answers 401; runs outside the idempotency layer, so that an
/// unauthenticated request never reaches a tool nor the store.
async fn authenticate(State(tokens): State<Tokens>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(principal) = token.and_then(|token| tokens.get(token)) else {
        return (StatusCode::UNAUTHORIZED, "a bearer token is needed").into_response();
    };
    request
        .extensions_mut()
        .insert(Principal(principal.clone()));
    next.run(request).await
}

/// Sends an e-mail (here: counts it), after `delay_ms` if the arguments ask for one.
async fn send_email(State(sent): State<Arc<AtomicU64>>, Json(email): Json<Value>) -> Json<Value> {
    let delay = email.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let n = sent.fetch_add(1, Ordering::SeqCst) + 1;
    Json(json!({ "status": "sent", "message_id": format!("msg_{n}"), "to": email.get("to") }))
}

/// The idempotency layer: scoped by the principal and the conversation, tool routes only.
fn idempotency<St: Store>(store: St) -> IdempotencyLayer<St> {
    IdempotencyLayer::with_store(store)
        .scope_fn(|parts| parts.extensions.get::<Principal>().map(|p| p.0.clone()))
        .narrow_scope_by(HeaderName::from_static("x-conversation-id"))
        .protect("/tools")
}

/// The Prometheus recorder, its histograms with the layer's buckets, as quantile queries
/// need. Installed before the layer is built: the layer registers its store's series once.
fn prometheus() -> PrometheusHandle {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)
        .and_then(|builder| {
            let attempts = Matcher::Suffix("_attempts".into());
            builder.set_buckets_for_metric(attempts, &ATTEMPT_BUCKETS)
        })
        .expect("the layer's buckets")
        .install_recorder()
        .expect("install the Prometheus recorder")
}

async fn serve<St: Store>(
    addr: SocketAddr,
    prometheus: PrometheusHandle,
    layer: IdempotencyLayer<St>,
    tokens: Tokens,
) {
    let executions = layer.detached();
    let sent = Arc::new(AtomicU64::new(0));
    // Every path but the open ones below goes through authentication, then the idempotency
    // layer: the tools, and the status path, which names no route and so is reached through
    // the fallback (a layer on a router wraps its fallback too).
    let authenticated = Router::new()
        .route("/tools/send_email", post(send_email))
        .with_state(Arc::clone(&sent))
        .fallback(|| async { StatusCode::NOT_FOUND })
        // Innermost first: idempotency, then authentication outside it.
        .layer(layer)
        .layer(middleware::from_fn_with_state(tokens, authenticate));
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        )
        .route(
            "/stats",
            get(move || std::future::ready(Json(json!({ "sent": sent.load(Ordering::SeqCst) })))),
        )
        .fallback_service(authenticated);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind ADDR");
    println!(
        "listening on http://{}",
        listener.local_addr().expect("bound address")
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown::signal())
        .await
        .expect("serve");
    let unfinished = executions.wait_for(shutdown::grace()).await;
    eprintln!("shutdown: {unfinished} execution(s) left unfinished");
}

#[tokio::main]
async fn main() {
    let addr: SocketAddr = std::env::var("ADDR")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 3000)));
    let tokens: Tokens = Arc::new(
        std::env::var("TOKENS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(token, principal)| (token.trim().to_owned(), principal.trim().to_owned()))
            .collect(),
    );
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let prometheus = prometheus();
    if let Ok(url) = std::env::var("REDIS_URL") {
        #[cfg(feature = "redis")]
        {
            let store = tower_idempotency::store::RedisStore::connect(&url)
                .await
                .expect("connect to REDIS_URL")
                .tiered();
            return serve(addr, prometheus, idempotency(store), tokens).await;
        }
        #[cfg(not(feature = "redis"))]
        panic!("REDIS_URL={url} needs the redis feature (redis-tls for rediss://)");
    }
    let store = tower_idempotency::store::MemoryStore::new();
    serve(addr, prometheus, idempotency(store), tokens).await
}
