//! An order service in transactional mode: each `POST /orders` inserts its order in the
//! call's own database transaction, and the layer commits the call's record in the same
//! transaction, so an order exists exactly when its call is recorded.
//!
//! ```text
//! DATABASE_URL=postgres://app@127.0.0.1/app cargo run --features postgres --example orders
//! curl -s localhost:3000/orders -H 'x-session-id: s1' \
//!      -H 'content-type: application/json' -d '{"item":"tea","delay_ms":0}'
//! curl -s localhost:3000/stats
//! ```
//!
//! `POST /orders {"item": …, "delay_ms": …}` inserts the order, then waits `delay_ms` with the
//! transaction still open (a slow tool, or one killed mid-call); `"fail": true` answers 500
//! after the insert, which rolls it back. `GET /stats` answers `{"orders": n}`, the committed
//! orders. The scope is the `x-session-id` header.
//!
//! Environment: `DATABASE_URL` (required), `ADDR` (default `127.0.0.1:3000`), `DEADLINE_MS`
//! (default 25000), `LEASE_MS` (default 30000), `SHUTDOWN_GRACE_MS` (default 25000).

#[path = "support/shutdown.rs"]
mod shutdown;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tower_idempotency::store::{PostgresStore, Transaction};
use tower_idempotency::IdempotencyLayer;

#[derive(Deserialize)]
struct Order {
    item: String,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    fail: bool,
}

type Failed = (StatusCode, Json<Value>);

fn failed(error: impl std::fmt::Display) -> Failed {
    let body = json!({"error": error.to_string()});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body))
}

/// Inserts the order in the call's transaction; the layer commits it with the call's record.
async fn create(
    Extension(transaction): Extension<Transaction>,
    Json(order): Json<Order>,
) -> Result<(StatusCode, Json<Value>), Failed> {
    let client = transaction.client().await.map_err(failed)?;
    let row = client
        .query_one(
            "INSERT INTO orders (item) VALUES ($1) RETURNING id",
            &[&order.item],
        )
        .await
        .map_err(failed)?;
    let id: i64 = row.get(0);
    if order.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(order.delay_ms)).await;
    }
    if order.fail {
        return Err(failed("the order was refused after its insert"));
    }
    let body = json!({"order": id, "item": order.item});
    Ok((StatusCode::CREATED, Json(body)))
}

/// The committed orders.
async fn stats(State(db): State<Arc<tokio_postgres::Client>>) -> Result<Json<Value>, Failed> {
    let row = db
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .map_err(failed)?;
    let orders: i64 = row.get(0);
    Ok(Json(json!({ "orders": orders })))
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL: the database of the orders");
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let deadline = Duration::from_millis(env_or("DEADLINE_MS", 25_000));
    let lease = Duration::from_millis(env_or("LEASE_MS", 30_000));

    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to DATABASE_URL");
    tokio::spawn(connection);
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS orders (
           id bigserial PRIMARY KEY, item text NOT NULL,
           created_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .expect("create the orders table");

    let store = PostgresStore::connect(&url).await.expect("the store");
    let layer = IdempotencyLayer::with_store(store.tiered())
        .transactional()
        .deadline(deadline)
        .lease(lease);
    let executions = layer.detached();
    let app = Router::new()
        .route("/orders", post(create))
        .layer(layer)
        .route("/stats", get(stats))
        .with_state(Arc::new(db));

    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .expect("bind ADDR");
    println!(
        "listening on http://{}",
        listener.local_addr().expect("bound")
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown::signal())
        .await
        .expect("serve");
    executions.wait_for(shutdown::grace()).await;
}
