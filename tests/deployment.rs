//! What a deployment needs around the layer: status URLs that resolve when the service is
//! nested under a prefix, and a shutdown bounded by its grace period even while the store
//! cannot record what ran.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use support::faulty::{Call, Fault, FaultyStore, Plan};
use support::{serve, tools, Client, Counts};
use tower::ServiceExt;
use tower_idempotency::store::MemoryStore;
use tower_idempotency::IdempotencyLayer;

/// The tool server nested at `/api`, the layer inside the nested router. The nested router
/// has a fallback of its own, so that paths under `/api` that name no route (the status path
/// among them) reach it, and the layer, rather than the outer router's fallback.
async fn nested(layer: IdempotencyLayer) -> (Client, Counts) {
    let counts = Counts::default();
    let inner = tools(counts.clone())
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(layer);
    let app = Router::new().nest("/api", inner);
    (Client::new(serve(app).await), counts)
}

#[tokio::test]
async fn under_a_nested_router_the_status_url_carries_the_public_prefix_and_resolves() {
    let layer = IdempotencyLayer::new()
        .deadline(Duration::from_millis(50))
        .status_url_prefix("/api");
    let executions = layer.detached();
    let (client, counts) = nested(layer).await;
    let slow = r#"{"to":"a@example.com","delay_ms":400}"#;
    let first = client.post("/api/tools/echo", "s1", slow).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let location = first.header("location").expect("a status URL").to_owned();
    assert_eq!(location, format!("/api/_idempotency/{}", first.intent()));
    assert_eq!(
        first.json()["status_url"],
        location,
        "the body names the same URL"
    );
    executions.wait().await;
    let status = client.get(&location, Some("s1")).await;
    assert_eq!(status.status, StatusCode::CREATED, "{:?}", status.json());
    assert_eq!(status.json()["n"], 1, "the tool's own answer, replayed");
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn without_the_prefix_a_nested_status_url_is_root_relative() {
    let layer = IdempotencyLayer::new().deadline(Duration::from_millis(50));
    let (client, _) = nested(layer).await;
    let slow = r#"{"to":"a@example.com","delay_ms":200}"#;
    let first = client.post("/api/tools/echo", "s1", slow).await;
    let location = first.header("location").expect("a status URL").to_owned();
    assert_eq!(location, format!("/_idempotency/{}", first.intent()));
    assert_eq!(
        client.get(&location, Some("s1")).await.status,
        StatusCode::NOT_FOUND,
        "outside the nested router, that path reaches nothing"
    );
}

#[tokio::test]
async fn an_absolute_base_url_is_kept_as_given() {
    let layer = IdempotencyLayer::new()
        .deadline(Duration::ZERO)
        .status_url_prefix("https://tools.example.com/api/");
    let (client, _) = nested(layer).await;
    let first = client.post("/api/tools/echo", "s1", r#"{"n":1}"#).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    assert_eq!(
        first.header("location"),
        Some(
            format!(
                "https://tools.example.com/api/_idempotency/{}",
                first.intent()
            )
            .as_str()
        )
    );
}

/// The store fails every completion, as during an outage: the outcome of an action that ran
/// cannot be recorded, and the layer keeps retrying the write in the background.
#[tokio::test(start_paused = true)]
async fn a_shutdown_during_a_store_outage_ends_at_its_grace_and_counts_what_it_left() {
    let outage = Plan {
        call: Call::Complete,
        ordinal: 0,
        fault: Fault::Fail,
        every: true,
    };
    let store = FaultyStore::new(MemoryStore::new(), Some(outage));
    let calls = store.counter();
    let layer = IdempotencyLayer::with_store(store);
    let executions = layer.detached();
    let counts = Counts::default();
    let app = tools(counts.clone()).layer(layer);
    let request = axum::http::Request::post("/tools/echo")
        .header("x-session-id", "s1")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(r#"{"to":"a@example.com"}"#))
        .unwrap();
    let answer = app.oneshot(request).await.unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::CREATED,
        "the caller has its answer"
    );
    assert_eq!(counts.get("echo"), 1);
    assert_eq!(
        executions.len(),
        1,
        "the refused write is retried in the background"
    );

    let grace = Duration::from_secs(25);
    let started = tokio::time::Instant::now();
    let unfinished = executions.wait_for(grace).await;
    assert_eq!(
        unfinished, 1,
        "the one execution still recording is reported"
    );
    assert_eq!(
        started.elapsed(),
        grace,
        "the wait ends at the grace period, not later"
    );
    assert!(
        calls.of(Call::Complete) > 2,
        "the write was retried while the wait lasted"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_with_nothing_left_running_ends_at_once() {
    let layer = IdempotencyLayer::new();
    let executions = layer.detached();
    let app = tools(Counts::default()).layer(layer);
    let request = axum::http::Request::post("/tools/echo")
        .header("x-session-id", "s1")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(r#"{"to":"a@example.com"}"#))
        .unwrap();
    app.oneshot(request).await.unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(executions.wait_for(Duration::from_secs(25)).await, 0);
    assert_eq!(started.elapsed(), Duration::ZERO);
}
