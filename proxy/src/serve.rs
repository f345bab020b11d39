//! The proxy's life: connect the store, listen, serve, and on SIGTERM stop accepting, let
//! running executions finish and record, then exit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_idempotency::store::Store;
use tower_idempotency::{ATTEMPT_BUCKETS, DURATION_BUCKETS};

use crate::admin::{self, Admin};
use crate::body::Inbound;
use crate::config::{Config, LogFormat, Mode};
use crate::forward::{drop_forwarding, is_trusted, strip_hop_by_hop, ClientAddr};
use crate::stack;
use crate::traced::{drop_unusable_request_id, MintV7, Traced};

/// The Prometheus exporter, its histograms with the layer's buckets.
fn recorder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_attempts".into()), &ATTEMPT_BUCKETS)
}

/// The prefix of the Redis keys of a proxy that names none: `idempotency:`, then its upstream
/// (`127.0.0.1:8000/api`), so that proxies in front of different services, sharing one
/// Redis, never replay each other's results for the same route and body. Characters other
/// than letters, digits and `.:/_-` become `_` (a `{` would take the keys' cluster hash tag).
fn default_prefix(upstream: &http::Uri) -> String {
    let place = format!(
        "{}{}",
        upstream.authority().map_or("", |a| a.as_str()),
        upstream.path().trim_end_matches('/')
    );
    let place: String = place
        .chars()
        .map(|c| {
            let kept = c.is_ascii_alphanumeric() || ".:/_-".contains(c);
            if kept {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("idempotency:{place}:")
}

/// Runs until a shutdown signal; `Err` says why it could not start.
pub async fn run(config: Config) -> Result<(), String> {
    // Metrics are recorded only where they are served.
    let prometheus = config
        .metrics_listen
        .map(|_| recorder().and_then(PrometheusBuilder::install_recorder))
        .transpose()
        .map_err(|error| format!("cannot install the metrics recorder: {error}"))?;
    // The crate's store for what the settings name: one program whatever they name.
    let prefix = || default_prefix(&config.upstream.url);
    let built = match config.store.builder(prefix) {
        Ok(builder) => builder.build().await,
        Err(error) => Err(error),
    };
    // The store error's own words ("cannot connect to Redis at …"), without the wrapper's.
    let store = built.map_err(|error| {
        std::error::Error::source(&error).map_or_else(|| error.to_string(), ToString::to_string)
    })?;
    serve(&config, store, prometheus).await
}

async fn serve<St: Store>(
    config: &Config,
    store: St,
    prometheus: Option<PrometheusHandle>,
) -> Result<(), String> {
    let built = stack::build(config, store);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let accepting = Arc::new(AtomicBool::new(true));
    if let (Some(metrics), Some(prometheus)) =
        (admin::bind(config.metrics_listen).await?, prometheus)
    {
        let addr = metrics.local_addr().map_err(|e| e.to_string())?;
        // Histograms are drained on each scrape; between scrapes, upkeep keeps them bounded.
        let upkeep = prometheus.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                upkeep.run_upkeep();
            }
        });
        let admin = Admin {
            layer: built.layer.clone(),
            api: (config.admin_token.as_ref()).map(|token| built.admin.service(token.trim())),
            prometheus,
            accepting: Arc::clone(&accepting),
        };
        tokio::spawn(admin::serve(metrics, admin));
        println!("metrics on http://{addr}");
    }
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%addr, upstream = %config.upstream.url, store = %config.store.kind_name(), "started");
    let serves_mcp = std::iter::once(&config.default_route)
        .chain(&config.routes)
        .any(|route| route.mode == Mode::Mcp);
    if serves_mcp && config.scope.principal_header.is_none() && !config.scope.mcp_shared {
        tracing::warn!(
            "MCP routes have no principal (--principal-header): protocol 2026-07-28 callers, \
             which have no session, are told apart by their Authorization header, and calls \
             without one are refused; for a server with one user, pass --mcp-shared-scope"
        );
    }
    // Listened for before the address is announced: a SIGTERM right after it stops the
    // proxy gracefully, rather than by the signal's default action.
    let mut signal = std::pin::pin!(shutdown_signal());
    println!("listening on http://{addr}");

    // The headers that name the caller's scope are the configuration's to trust, whatever
    // their names: they are never taken for a client's forwarding headers.
    let scope_headers: Arc<[http::HeaderName]> =
        [&config.scope.header, &config.scope.principal_header]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
    // Each call's id, read or minted, and given back; its trace continued.
    let request_id = config.telemetry.request_id_header.clone();
    let traced = tower::ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(request_id.clone(), MintV7))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .service(Traced::new(built.routes.clone(), request_id.clone()));
    let request_id = Arc::new(request_id);
    let graceful = GracefulShutdown::new();
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, say: wait a moment rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        let _ = stream.set_nodelay(true);
        let traced = traced.clone();
        let request_id = Arc::clone(&request_id);
        let trusted = is_trusted(&config.trusted_proxies, peer.ip());
        let scope_headers = Arc::clone(&scope_headers);
        let service = tower::service_fn(move |request: Request<Incoming>| {
            let mut request = request.map(Inbound::new);
            // Hop-by-hop headers end here, before the layer reads any: it keys and scopes a
            // call on what the upstream is sent. So do the forwarding headers of a client
            // that is no trusted proxy: the upstream hears this proxy's own.
            strip_hop_by_hop(request.headers_mut());
            if !trusted {
                drop_forwarding(request.headers_mut(), &scope_headers);
            }
            drop_unusable_request_id(request.headers_mut(), &request_id);
            request.extensions_mut().insert(ClientAddr(peer));
            traced.clone().oneshot(request)
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }

    // Stop accepting; answer what is in flight; let detached executions finish and record.
    accepting.store(false, Ordering::SeqCst);
    drop(listener);
    let grace = config.shutdown_grace;
    tracing::info!(grace_s = grace.as_secs(), "shutting down");
    // The executions are waited for once the connections are done: a request still in flight
    // (its body still arriving) may start one after the signal. Both within the one grace;
    // the executions run on meanwhile, so an open stream takes none of their time.
    let ends = tokio::time::Instant::now() + grace;
    let connections = tokio::time::timeout_at(ends, graceful.shutdown()).await;
    let left = ends.saturating_duration_since(tokio::time::Instant::now());
    let unfinished = built.detached.wait_for(left).await;
    if connections.is_err() {
        tracing::warn!("connections still open at the end of the grace period");
    }
    match config.log_format {
        LogFormat::Json => tracing::info!(
            unfinished,
            "shutdown: {unfinished} execution(s) left unfinished"
        ),
        LogFormat::Text => eprintln!("shutdown: {unfinished} execution(s) left unfinished"),
    }
    Ok(())
}

/// SIGTERM, or Ctrl-C: listened for from this call on, not from the future's first poll, so
/// that a signal sent in between is not lost.
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate()).ok();
    let interrupt = signal(SignalKind::interrupt()).ok();
    async move {
        let received = |listener: Option<tokio::signal::unix::Signal>| async move {
            match listener {
                Some(mut listener) => {
                    listener.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = received(terminate) => {}
            () = received(interrupt) => {}
        }
    }
}

/// Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
