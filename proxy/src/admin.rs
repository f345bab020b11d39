//! The metrics listener: liveness, readiness (the store answers, and no shutdown has begun),
//! Prometheus metrics, observe mode's duplicate report and, with a token, the admin API, apart
//! from the traffic.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{header, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tower::Service;
use tower_idempotency::admin::AdminService;
use tower_idempotency::store::Store;
use tower_idempotency::{IdempotencyLayer, IntentKey};

use crate::body::{full, Outbound};

/// How long the store has to answer a readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the metrics listener reads.
pub struct Admin<St> {
    pub layer: IdempotencyLayer<St>,
    pub prometheus: PrometheusHandle,
    /// Cleared when a shutdown begins.
    pub accepting: Arc<AtomicBool>,
    /// The admin API, where a token is configured.
    pub api: Option<AdminService<St>>,
}

/// Serves the metrics listener until the process ends.
pub async fn serve<St: Store>(listener: TcpListener, admin: Admin<St>) {
    let admin = Arc::new(admin);
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let admin = Arc::clone(&admin);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let admin = Arc::clone(&admin);
            async move {
                let path = request.uri().path();
                if path == "/admin" || path.starts_with("/admin/") {
                    return Ok::<_, std::convert::Infallible>(api(&admin, request, peer).await);
                }
                Ok(answer(&admin, &request).await)
            }
        });
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The admin API's answer, or 404 where no token turned it on.
async fn api<St: Store>(
    admin: &Admin<St>,
    mut request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Outbound> {
    let Some(api) = &admin.api else {
        let off = "the admin API is off: start the proxy with --admin-token\n";
        return text(StatusCode::NOT_FOUND, off.to_owned());
    };
    // The client's address, for the API's log of each action.
    request.extensions_mut().insert(peer);
    let answered = api.clone().call(request).await;
    match answered {
        Ok(response) => response.map(crate::body::boxed),
        Err(never) => match never {},
    }
}

async fn answer<St: Store, B>(admin: &Admin<St>, request: &Request<B>) -> Response<Outbound> {
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".to_owned());
    }
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" => match ready(admin).await {
            Ok(()) => text(StatusCode::OK, "ready\n".to_owned()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        "/metrics" => {
            let mut response = text(StatusCode::OK, admin.prometheus.render());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        "/duplicates" => {
            // The report's types serialize as they are: no map keys a writer could fail on.
            let report = serde_json::to_string_pretty(&admin.layer.duplicates().report())
                .unwrap_or_else(|_| "{}".to_owned());
            let mut response = text(StatusCode::OK, report + "\n");
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "/healthz, /readyz, /metrics or /duplicates\n".to_owned(),
        ),
    }
}

/// Ready while no shutdown has begun and the store answers a lookup.
async fn ready<St: Store>(admin: &Admin<St>) -> Result<(), String> {
    if !admin.accepting.load(Ordering::SeqCst) {
        return Err("shutting down".to_owned());
    }
    let probe = IntentKey::from_bytes([0; 32]);
    match tokio::time::timeout(PROBE_TIMEOUT, admin.layer.store_ref().get(&probe)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            // The database's own words stay in the log: a probe's answer may be seen by more
            // than the operator.
            let error = tower_idempotency::store::redacted(&error.to_string());
            tracing::warn!(%error, "not ready: the store cannot answer a readiness probe");
            Err("the store cannot answer (the proxy's log says why)".to_owned())
        }
        Err(_) => Err(format!(
            "the store did not answer within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

fn text(status: StatusCode, body: String) -> Response<Outbound> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Binds the metrics listener, where one is configured.
pub async fn bind(addr: Option<SocketAddr>) -> Result<Option<TcpListener>, String> {
    match addr {
        None => Ok(None),
        Some(addr) => TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|error| format!("cannot listen on {addr} for metrics: {error}")),
    }
}
