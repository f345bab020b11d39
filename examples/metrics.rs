//! Metrics in one step: a Prometheus recorder with the layer's buckets, installed before the
//! layer is built, and `GET /metrics` served by the app. docs/observability.md shows this file
//! as it is, and `tests/first_scrape.rs` scrapes it.
//!
//! `cargo run --example metrics`, then `curl -s localhost:3000/metrics`. Environment: `ADDR`
//! (default `127.0.0.1:3000`).

use axum::{routing::get, routing::post, Json, Router};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use serde_json::{json, Value};
use tower_idempotency::{IdempotencyLayer, ATTEMPT_BUCKETS, DURATION_BUCKETS};

async fn send_email(Json(_email): Json<Value>) -> Json<Value> {
    Json(json!({ "status": "sent" }))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The recorder first: the layer and its store register their series as they are built.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_attempts".into()), &ATTEMPT_BUCKETS)?
        .install_recorder()?;
    let layer = IdempotencyLayer::new();
    let executions = layer.detached();
    let app = Router::new()
        .route("/tools/send_email", post(send_email))
        .layer(layer)
        // Added after the layer, so that it does not wrap the scrapes.
        .route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        );

    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async { _ = tokio::signal::ctrl_c().await })
        .await?;
    // Running actions finish and record their outcomes, for at most the grace.
    executions
        .wait_for(std::time::Duration::from_secs(25))
        .await;
    Ok(())
}
