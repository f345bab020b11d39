//! DESIGN's table of responses the layer writes, row by row, through real HTTP.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::start;
use tower_idempotency::key::IntentKey;
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Store, StoreError, Tombstone,
};
use tower_idempotency::IdempotencyLayer;

fn detail(body: &Value) -> &str {
    body["detail"].as_str().expect("a detail sentence")
}

fn assert_not_executed(body: &Value, status: u16, retryable: bool) {
    assert_eq!(body["outcome"], "not_executed");
    assert_eq!(body["retryable"], retryable);
    assert_eq!(body["status"], status);
    assert!(body["type"]
        .as_str()
        .unwrap()
        .starts_with("urn:tower-idempotency:"));
    assert!(body["title"].is_string());
    assert!(
        detail(body).starts_with("The action was not executed"),
        "{}",
        detail(body)
    );
}

#[tokio::test]
async fn past_the_deadline_the_caller_gets_202_and_the_action_goes_on() {
    let layer = IdempotencyLayer::new().deadline(Duration::from_millis(200));
    let executions = layer.detached();
    let (client, counts) = start(layer).await;
    let slow = r#"{"delay_ms":700}"#;
    let first = client.post("/tools/echo", "s", slow).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    assert_eq!(first.header("content-type"), Some("application/json"));
    let body = first.json();
    assert_eq!(body["outcome"], "in_progress");
    assert_eq!(body["retryable"], true);
    let status_url = format!("/_idempotency/{}", first.intent());
    assert_eq!(body["status_url"], status_url.as_str());
    assert_eq!(first.header("location"), Some(status_url.as_str()));
    assert!(first.header("retry-after").is_some());
    assert!(body["retry_after_s"].as_u64().unwrap() >= 1);
    assert!(body["started_s_ago"].is_u64());
    assert!(detail(&body).starts_with("This call started the action"));

    // A duplicate while it runs: also 202, and still one execution.
    let duplicate = client.post("/tools/echo", "s", slow).await;
    assert_eq!(duplicate.status, StatusCode::ACCEPTED);
    assert_eq!(duplicate.intent(), first.intent());

    // The status path says it runs, then gives the result once it is done.
    let running = client.get(&status_url, Some("s")).await;
    assert_eq!(running.status, StatusCode::ACCEPTED);
    executions.wait().await;
    let done = client.get(&status_url, Some("s")).await;
    assert_eq!(done.status, StatusCode::CREATED);
    assert!(done.replayed());
    assert_eq!(done.json()["n"], 1);
    let later = client.post("/tools/echo", "s", slow).await;
    assert_eq!(later.status, StatusCode::CREATED);
    assert_eq!(later.body, done.body);
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_zero_deadline_answers_202_at_once() {
    let layer = IdempotencyLayer::new().deadline_for("/tools/echo", Duration::ZERO);
    let executions = layer.detached();
    let (client, counts) = start(layer).await;
    let first = client.post("/tools/echo", "s", "{}").await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    executions.wait().await;
    let done = client
        .get(&format!("/_idempotency/{}", first.intent()), Some("s"))
        .await;
    assert_eq!(done.status, StatusCode::CREATED);
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn strict_ietf_mode_answers_duplicates_409() {
    let layer = IdempotencyLayer::new()
        .strict_ietf()
        .deadline(Duration::from_millis(100));
    let (client, counts) = start(layer).await;
    let slow = r#"{"delay_ms":500}"#;
    let (first, duplicate) = tokio::join!(client.post("/tools/echo", "s", slow), async {
        counts.reached("echo", 1).await;
        client.post("/tools/echo", "s", slow).await
    });
    assert_eq!(
        first.status,
        StatusCode::ACCEPTED,
        "the first caller is not a duplicate"
    );
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    let body = duplicate.json();
    assert_eq!(body["outcome"], "in_progress");
    assert_eq!(
        duplicate.header("content-type"),
        Some("application/problem+json")
    );
}

#[tokio::test]
async fn the_status_path_answers_not_found_and_hides_other_scopes() {
    let (client, _) = start(IdempotencyLayer::new()).await;
    let done = client.post("/tools/echo", "owner", "{}").await;
    let url = format!("/_idempotency/{}", done.intent());
    let mine = client.get(&url, Some("owner")).await;
    assert_eq!(mine.status, StatusCode::CREATED);
    assert_eq!(mine.body, done.body);
    let theirs = client.get(&url, Some("intruder")).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    assert_eq!(theirs.json()["outcome"], "not_found");
    let unknown = client
        .get(&format!("/_idempotency/{}", "0".repeat(64)), Some("owner"))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json()["outcome"], "not_found");
    let malformed = client.get("/_idempotency/not-a-key", Some("owner")).await;
    assert_eq!(malformed.status, StatusCode::NOT_FOUND);
    let no_scope = client.get(&url, None).await;
    assert_eq!(no_scope.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_request_without_a_scope_is_refused_naming_the_header() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let answer = client
        .post_with("/tools/echo", &[("content-type", "application/json")], "{}")
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    let body = answer.json();
    assert_not_executed(&body, 400, false);
    assert!(detail(&body).contains("x-session-id"));
    assert_eq!(counts.get("echo"), 0);
}

#[tokio::test]
async fn without_a_scope_requests_can_pass_through_unprotected() {
    let (client, counts) = start(IdempotencyLayer::new().pass_through_without_scope()).await;
    for _ in 0..2 {
        let answer = client
            .post_with("/tools/echo", &[("content-type", "application/json")], "{}")
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert!(answer.header("idempotency-intent").is_none());
    }
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_with_or_without_content_length() {
    let (client, counts) = start(IdempotencyLayer::new().body_limit(64)).await;
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(100));
    let declared = client.post("/tools/echo", "s", &big).await;
    assert_eq!(declared.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_not_executed(&declared.json(), 413, false);
    assert_eq!(declared.json()["limit_bytes"], 64);

    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
        Ok(big.as_bytes()[..50].to_vec()),
        Ok(big.as_bytes()[50..].to_vec()),
    ];
    let streamed = client
        .post_with(
            "/tools/echo",
            &[("x-session-id", "s"), ("content-type", "application/json")],
            reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
        )
        .await;
    assert_eq!(streamed.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(counts.get("echo"), 0);
}

#[tokio::test]
async fn an_explicit_key_reused_with_another_payload_gets_422() {
    let (client, counts) = start(IdempotencyLayer::new().idempotency_key_header()).await;
    let post = |body: &'static str| {
        client.post_with(
            "/tools/echo",
            &[
                ("x-session-id", "s"),
                ("idempotency-key", "order-1"),
                ("content-type", "application/json"),
            ],
            body,
        )
    };
    let first = post(r#"{"amount":10}"#).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let same = post(r#"{ "amount" : 10 }"#).await;
    assert!(same.replayed());
    let other = post(r#"{"amount":99}"#).await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    let body = other.json();
    assert_eq!(
        (&body["outcome"], &body["retryable"]),
        (&json!("not_executed"), &json!(false))
    );
    assert!(detail(&body).starts_with("This call was not executed"));
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn an_explicit_key_in_a_json_field_names_the_intent() {
    let (client, counts) = start(IdempotencyLayer::new().key_field("/request_id")).await;
    let first = client
        .post("/tools/echo", "s", r#"{"request_id":"r1","n":1}"#)
        .await;
    let again = client
        .post("/tools/echo", "s", r#"{"n":1,"request_id":"r1"}"#)
        .await;
    assert!(again.replayed());
    assert_eq!(again.intent(), first.intent());
    let mismatch = client
        .post("/tools/echo", "s", r#"{"request_id":"r1","n":2}"#)
        .await;
    assert_eq!(mismatch.status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad = client
        .post("/tools/echo", "s", r#"{"request_id":"has space"}"#)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_malformed_explicit_key_gets_400() {
    let (client, counts) = start(IdempotencyLayer::new().idempotency_key_header()).await;
    for key in ["has space".to_owned(), "k".repeat(256), "k".repeat(10_000)] {
        let answer = client
            .post_with(
                "/tools/echo",
                &[("x-session-id", "s"), ("idempotency-key", &key)],
                "{}",
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_not_executed(&answer.json(), 400, false);
    }
    assert_eq!(counts.get("echo"), 0);
}

/// A store whose server is down: every call fails, as a network store's would.
struct DownStore;

fn down() -> StoreError {
    StoreError::new("connection refused")
}

impl Store for DownStore {
    async fn claim(&self, _: &IntentKey, _: &ClaimRequest) -> Result<Claim, StoreError> {
        Err(down())
    }
    async fn complete(
        &self,
        _: &IntentKey,
        _: &OwnerToken,
        _: Arc<Record>,
        _: Duration,
    ) -> Result<Fence, StoreError> {
        Err(down())
    }
    async fn release(
        &self,
        _: &IntentKey,
        _: &OwnerToken,
        _: Arc<Tombstone>,
        _: Duration,
    ) -> Result<Fence, StoreError> {
        Err(down())
    }
    async fn extend(
        &self,
        _: &IntentKey,
        _: &OwnerToken,
        _: Duration,
    ) -> Result<Fence, StoreError> {
        Err(down())
    }
    async fn get(&self, _: &IntentKey) -> Result<Option<Entry>, StoreError> {
        Err(down())
    }
}

#[tokio::test]
async fn an_unreachable_store_fails_closed_with_503() {
    let (client, counts) = start(IdempotencyLayer::with_store(DownStore)).await;
    let answer = client.post("/tools/echo", "s", "{}").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_not_executed(&answer.json(), 503, true);
    assert_eq!(counts.get("echo"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_still_coalesces_concurrent_duplicates_in_process() {
    // Coalescing in one process needs no store: five identical calls while the store is down
    // run once, and every caller gets that one answer.
    let (client, counts) = start(IdempotencyLayer::with_store(DownStore).fail_open()).await;
    let calls = (0..5).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.post("/tools/echo", "s", r#"{"delay_ms":400}"#).await })
    });
    let answers = futures_util::future::join_all(calls).await;
    assert_eq!(counts.get("echo"), 1, "coalesced, though unprotected");
    let bodies: std::collections::HashSet<_> = answers
        .into_iter()
        .map(|answer| answer.unwrap().body)
        .collect();
    assert_eq!(bodies.len(), 1, "every caller got the one answer");
}

#[tokio::test]
async fn fail_open_runs_the_action_unprotected_when_the_store_is_down() {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (client, counts) = start(IdempotencyLayer::with_store(DownStore).fail_open()).await;
    let answer = client.post("/tools/echo", "s", "{}").await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert_eq!(counts.get("echo"), 1);
    let unprotected = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(key, .., value)| {
            key.key().name() == "idempotency_unprotected_total"
                && value == metrics_util::debugging::DebugValue::Counter(1)
        });
    assert!(unprotected, "fail-open runs are counted");
}

#[tokio::test]
async fn too_many_detached_executions_get_503() {
    let layer = IdempotencyLayer::new()
        .max_detached(1)
        .deadline(Duration::from_millis(50));
    let (client, counts) = start(layer).await;
    let busy = client.post("/tools/echo", "s", r#"{"delay_ms":500}"#).await;
    assert_eq!(busy.status, StatusCode::ACCEPTED);
    let refused = client.post("/tools/echo", "s", r#"{"other":1}"#).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_not_executed(&refused.json(), 503, true);
    assert!(refused.header("retry-after").is_some());
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn replays_are_answered_even_when_no_execution_slot_is_free() {
    let layer = IdempotencyLayer::new()
        .max_detached(1)
        .deadline(Duration::from_millis(50));
    let (client, counts) = start(layer).await;
    let done = client.post("/tools/echo", "s", r#"{"done":1}"#).await;
    assert_eq!(done.status, StatusCode::CREATED);
    let busy = client.post("/tools/echo", "s", r#"{"delay_ms":500}"#).await;
    assert_eq!(busy.status, StatusCode::ACCEPTED);
    let replay = client.post("/tools/echo", "s", r#"{"done":1}"#).await;
    assert!(replay.replayed(), "a replay needs no execution slot");
    assert_eq!(replay.body, done.body);
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn replays_can_carry_an_annotation_for_models_that_never_see_headers() {
    let (client, _) = start(IdempotencyLayer::new().annotate_replays()).await;
    let first = client.post("/tools/echo", "s", "{}").await;
    assert!(first.json().get("_idempotency").is_none());
    let again = client.post("/tools/echo", "s", "{}").await.json();
    assert_eq!(again["_idempotency"]["replayed"], true);
    assert_eq!(again["n"], 1);
}
