//! A tool API behind `IdempotencyLayer`, for trying the layer with curl and for load tests.
//!
//! ```text
//! cargo run --example tool_gateway
//! curl -s localhost:3000/tools/send_email -H 'x-session-id: s1' \
//!      -H 'content-type: application/json' -d '{"to":"a@example.com","subject":"hi","body":"..."}'
//! curl -s localhost:3000/stats
//! ```
//!
//! `GET /metrics` serves the layer's metrics in Prometheus text format; logs go to stderr,
//! filtered by `RUST_LOG` (default `warn`). Built with the `contract` feature, `send_email`'s
//! arguments are checked against a JSON Schema first (`to` must be an e-mail address).
//!
//! Environment: `ADDR` (default `127.0.0.1:3000`), `DEADLINE_MS` (default 25000),
//! `IDEMPOTENCY` (`on` by default; `observe` keys and counts every call and passes it on;
//! `off` serves the same routes with no layer), `LEASE_MS`
//! (default 30000), `SHUTDOWN_GRACE_MS` (default 25000: on SIGTERM or Ctrl-C the gateway stops
//! accepting and lets running actions finish and record for up to this long), `PRINCIPAL_HEADER` (the header that an authenticating proxy in front sets,
//! such as `x-user`: the scope is then that principal, narrowed by `x-session-id` where a
//! request sends one; without it, the client-chosen `x-session-id` alone is the scope). With the `redis` feature, `REDIS_URL` (one node) or `REDIS_CLUSTER_URLS`
//! (comma-separated node URLs) put the tiered Redis store behind the layer; with the `postgres`
//! feature, `POSTGRES_URL` the tiered Postgres store; without any, the in-process memory store
//! is used.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --features redis --example tool_gateway
//! ```

#[path = "support/shutdown.rs"]
mod shutdown;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{MatchedPath, Query, State};
use axum::http::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tower_idempotency::store::Store;
use tower_idempotency::IdempotencyLayer;
use tracing_subscriber::EnvFilter;

/// Executions started per tool in this process.
#[derive(Default)]
struct Stats {
    send_email: AtomicU64,
    create_record: AtomicU64,
    generate_report: AtomicU64,
    flaky: AtomicU64,
    reject: AtomicU64,
    search: AtomicU64,
}

type Shared = Arc<Stats>;

fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::SeqCst) + 1
}

/// Sleeps, unless there is nothing to wait for: a zero sleep still waits for the timer's next
/// tick (about 1 ms), which would be measured as the tool's own latency.
async fn pause(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

#[derive(Deserialize)]
struct Email {
    #[allow(dead_code)]
    to: String,
    #[allow(dead_code)]
    subject: String,
    #[allow(dead_code)]
    body: String,
    #[serde(default)]
    delay_ms: u64,
}

async fn send_email(State(stats): State<Shared>, Json(email): Json<Email>) -> Json<Value> {
    let n = bump(&stats.send_email);
    pause(Duration::from_millis(email.delay_ms)).await;
    Json(json!({ "status": "sent", "message_id": format!("msg_{n}") }))
}

async fn create_record(
    State(stats): State<Shared>,
    Json(record): Json<Map<String, Value>>,
) -> impl IntoResponse {
    let n = bump(&stats.create_record);
    (
        StatusCode::CREATED,
        Json(json!({ "id": format!("rec_{n}"), "echo": record })),
    )
}

#[derive(Deserialize)]
struct Report {
    #[allow(dead_code)]
    topic: String,
    seconds: f64,
}

async fn generate_report(State(stats): State<Shared>, Json(report): Json<Report>) -> Json<Value> {
    let n = bump(&stats.generate_report);
    let seconds = if report.seconds.is_finite() {
        report.seconds.clamp(0.0, 3600.0)
    } else {
        0.0
    };
    pause(Duration::from_secs_f64(seconds)).await;
    Json(json!({ "status": "done", "report_id": format!("rep_{n}") }))
}

#[derive(Deserialize)]
struct Flaky {
    fail_times: u64,
}

async fn flaky(State(stats): State<Shared>, Json(flaky): Json<Flaky>) -> impl IntoResponse {
    let n = bump(&stats.flaky);
    if n <= flaky.fail_times {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": "temporarily unavailable", "attempt": n })),
        )
    } else {
        (
            StatusCode::OK,
            Json(json!({ "status": "ok", "attempt": n })),
        )
    }
}

async fn reject(State(stats): State<Shared>, Json(_): Json<Value>) -> impl IntoResponse {
    bump(&stats.reject);
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": "invalid input" })),
    )
}

#[derive(Deserialize)]
struct Search {
    #[serde(default)]
    q: String,
}

async fn search(State(stats): State<Shared>, Query(search): Query<Search>) -> Json<Value> {
    bump(&stats.search);
    Json(json!({ "q": search.q, "results": [] }))
}

async fn stats(State(stats): State<Shared>) -> Json<Value> {
    let read = |c: &AtomicU64| c.load(Ordering::SeqCst);
    Json(json!({
        "send_email": read(&stats.send_email),
        "create_record": read(&stats.create_record),
        "generate_report": read(&stats.generate_report),
        "flaky": read(&stats.flaky),
        "reject": read(&stats.reject),
        "search": read(&stats.search),
    }))
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not valid")),
        Err(_) => default,
    }
}

/// The layer as the contract sets it up, over `store`: its deadline, its lease, and whether it
/// only observes (keys and counts every call, and passes it on as it came).
fn layer<St: Store>(
    store: St,
    (deadline, lease, observe): (Duration, Duration, bool),
) -> IdempotencyLayer<St> {
    let layer = match std::env::var("PRINCIPAL_HEADER") {
        Ok(principal) => IdempotencyLayer::with_store(store)
            .scope_header(
                principal
                    .parse()
                    .expect("PRINCIPAL_HEADER is a header name"),
            )
            .narrow_scope_by(axum::http::HeaderName::from_static("x-session-id")),
        Err(_) => IdempotencyLayer::with_store(store),
    };
    let layer = layer
        .ignore_field("/tool_call_id")
        .idempotency_key_header()
        .status_path("/_idempotency")
        .deadline(deadline)
        .lease(lease)
        .route_label(|parts| {
            let route = parts
                .extensions
                .get::<MatchedPath>()
                .map_or("unmatched", MatchedPath::as_str);
            format!("{} {route}", parts.method)
        });
    if observe {
        layer.observe()
    } else {
        layer
    }
}

/// `send_email`'s arguments, version 1: checked before anything else sees them.
#[cfg(feature = "contract")]
fn contracts() -> tower_idempotency::contract::ContractLayer {
    let schema = json!({
        "type": "object",
        "required": ["to", "subject", "body"],
        "properties": {
            "to": { "type": "string", "format": "email" },
            "subject": { "type": "string" },
            "body": { "type": "string" },
            "delay_ms": { "type": "integer", "minimum": 0 }
        }
    });
    tower_idempotency::contract::ContractLayer::new()
        .operation(
            axum::http::Method::POST,
            "/tools/send_email",
            "send_email/v1",
            &schema,
        )
        .expect("the send_email schema compiles")
}

/// Serves `tools` behind `layer` (or bare), until SIGTERM or Ctrl-C; then lets running actions
/// finish and record their outcome, within the grace period.
/// Request ids (set and propagated as `x-request-id`) and a request span come first, either way.
async fn serve<St: Store>(addr: SocketAddr, tools: Router, layer: Option<IdempotencyLayer<St>>) {
    let executions = layer.as_ref().map(IdempotencyLayer::detached);
    let tools = match layer {
        #[cfg(feature = "contract")]
        Some(layer) => tools.layer(ServiceBuilder::new().layer(contracts()).layer(layer)),
        #[cfg(not(feature = "contract"))]
        Some(layer) => tools.layer(layer),
        None => tools,
    };
    let app = tools.layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
                    let id = request
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    tracing::info_span!("request", method = %request.method(), request_id = id)
                }),
            )
            .layer(PropagateRequestIdLayer::x_request_id()),
    );
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
    if let Some(executions) = executions {
        executions.wait_for(shutdown::grace()).await;
    }
}

#[tokio::main]
async fn main() {
    let addr: SocketAddr = env_or("ADDR", SocketAddr::from(([127, 0, 0, 1], 3000)));
    let deadline = Duration::from_millis(env_or("DEADLINE_MS", 25_000));
    let lease = Duration::from_millis(env_or("LEASE_MS", 30_000));
    let idempotency = std::env::var("IDEMPOTENCY").unwrap_or_else(|_| "on".into());

    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("seconds".into()),
            &[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 25.0,
            ],
        )
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Suffix("_attempts".into()),
                &[1.0, 2.0, 3.0, 5.0, 10.0],
            )
        })
        .expect("bucket bounds")
        .install_recorder()
        .expect("install the Prometheus recorder");

    let tools = Router::new()
        .route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        )
        .route("/tools/send_email", post(send_email))
        .route("/tools/create_record", post(create_record))
        .route("/tools/generate_report", post(generate_report))
        .route("/tools/flaky", post(flaky))
        .route("/tools/reject", post(reject))
        .route("/tools/search", get(search))
        .route("/stats", get(stats))
        .with_state(Shared::default());

    let observe = match idempotency.as_str() {
        "off" => return serve::<tower_idempotency::store::MemoryStore>(addr, tools, None).await,
        "on" => false,
        "observe" => true,
        other => panic!("IDEMPOTENCY={other:?}: use on, observe or off"),
    };
    let timing = (deadline, lease, observe);
    #[cfg(feature = "redis")]
    if let Some(store) = redis_store().await {
        return serve(addr, tools, Some(layer(store, timing))).await;
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("POSTGRES_URL") {
        let store = tower_idempotency::store::PostgresStore::connect(&url)
            .await
            .expect("connect to POSTGRES_URL");
        return serve(addr, tools, Some(layer(store.tiered(), timing))).await;
    }
    let wants_redis = ["REDIS_URL", "REDIS_CLUSTER_URLS"]
        .iter()
        .any(|name| std::env::var_os(name).is_some());
    assert!(
        cfg!(feature = "redis") || !wants_redis,
        "REDIS_URL and REDIS_CLUSTER_URLS need the redis feature: cargo run --features redis"
    );
    assert!(
        cfg!(feature = "postgres") || std::env::var_os("POSTGRES_URL").is_none(),
        "POSTGRES_URL needs the postgres feature: cargo run --features postgres"
    );
    let store = tower_idempotency::store::MemoryStore::new();
    serve(addr, tools, Some(layer(store, timing))).await
}

/// The tiered Redis store that `REDIS_URL` or `REDIS_CLUSTER_URLS` names, if either is set.
#[cfg(feature = "redis")]
async fn redis_store(
) -> Option<tower_idempotency::store::TieredStore<tower_idempotency::store::RedisStore>> {
    use tower_idempotency::store::RedisStore;
    if let Ok(urls) = std::env::var("REDIS_CLUSTER_URLS") {
        let urls: Vec<&str> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect();
        let store = RedisStore::connect_cluster(&urls)
            .await
            .expect("connect to REDIS_CLUSTER_URLS");
        return Some(store.tiered());
    }
    let url = std::env::var("REDIS_URL").ok()?;
    Some(
        RedisStore::connect(&url)
            .await
            .expect("connect to REDIS_URL")
            .tiered(),
    )
}
