//! DESIGN's outcome table, row by row, through real HTTP: what is kept, what is released.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use support::{start, start_in_memory};
use tower_idempotency::store::{Entry, MemoryStore, Store};
use tower_idempotency::{IdempotencyLayer, IntentKey};

#[tokio::test]
async fn a_success_is_kept_and_replayed_byte_for_byte() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client
        .post("/tools/echo", "s1", r#"{"to":"a@example.com"}"#)
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    assert_eq!(first.intent().len(), 64);
    let again = client
        .post("/tools/echo", "s1", r#"{"to":"a@example.com"}"#)
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(again.intent(), first.intent());
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_client_error_is_kept_because_the_tool_decided_it() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/status/400", "s", "{}").await;
    let again = client.post("/tools/status/400", "s", "{}").await;
    assert_eq!(first.status, StatusCode::BAD_REQUEST);
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(counts.get("status"), 1);
}

#[tokio::test]
async fn server_errors_and_retry_statuses_release_the_key() {
    for code in [500u16, 503, 408, 425, 429] {
        let (client, counts) = start(IdempotencyLayer::new()).await;
        let path = format!("/tools/status/{code}");
        let first = client.post(&path, "s", "{}").await;
        assert_eq!(first.status.as_u16(), code);
        let retry = client.post(&path, "s", "{}").await;
        assert_eq!(retry.status.as_u16(), code);
        assert!(!retry.replayed(), "status {code} must not be replayed");
        assert_eq!(counts.get("status"), 2, "status {code} must run again");
    }
}

#[tokio::test]
async fn a_refusal_of_the_credentials_or_preconditions_is_not_kept_so_the_call_runs_again() {
    // None of these is the tool's answer to its arguments, and none of the headers they answer
    // (a token, `If-Match`) is in the key: a refreshed token must be able to run the call.
    for code in [401u16, 403, 407, 412, 428] {
        let (client, counts) = start(IdempotencyLayer::new()).await;
        let path = format!("/tools/status/{code}");
        let first = client.post(&path, "s", "{}").await;
        assert_eq!(first.status.as_u16(), code);
        let retry = client.post(&path, "s", "{}").await;
        assert!(!retry.replayed(), "status {code} must not be replayed");
        assert_eq!(counts.get("status"), 2, "status {code} must run again");
    }
}

#[tokio::test]
async fn a_gateway_that_lost_the_tool_leaves_it_may_have_run_and_never_run_again() {
    // A 502 or 504 from a gateway in front of the tool: the tool may have run, or still run.
    for code in [502u16, 504] {
        let (client, counts) = start(IdempotencyLayer::new()).await;
        let path = format!("/tools/status/{code}");
        let first = client.post(&path, "s", "{}").await;
        assert_eq!(
            first.status.as_u16(),
            code,
            "the first caller gets the gateway's answer"
        );
        let retry = client.post(&path, "s", "{}").await;
        let told = retry.json();
        assert_eq!(told["outcome"], "unknown", "{code}: {told}");
        assert_eq!(told["retryable"], false, "{code}: {told}");
        assert!(
            told["detail"]
                .as_str()
                .unwrap()
                .starts_with("This action may have run"),
            "{code}: {told}"
        );
        assert_eq!(counts.get("status"), 1, "status {code} must not run again");
    }
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_blocks_the_action_only_for_its_own_shorter_retention() {
    let layer = IdempotencyLayer::new().unknown_retention(Duration::from_millis(300));
    let (client, counts) = start_in_memory(layer);
    client.post("/tools/status/504", "s", "{}").await;
    let blocked = client.post("/tools/status/504", "s", "{}").await;
    assert_eq!(blocked.json()["outcome"], "unknown");
    assert_eq!(counts.get("status"), 1);
    tokio::time::advance(Duration::from_millis(600)).await;
    client.post("/tools/status/504", "s", "{}").await;
    assert_eq!(
        counts.get("status"),
        2,
        "past its retention, the call runs again"
    );
}

#[tokio::test]
async fn cache_control_no_store_records_that_it_ran_without_its_response() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    client.post("/tools/no_store", "s", "{}").await;
    let again = client.post("/tools/no_store", "s", "{}").await;
    assert_eq!(again.json()["outcome"], "already_executed");
    assert_eq!(counts.get("no_store"), 1);
}

#[tokio::test]
async fn a_panic_answers_500_and_releases_the_key() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/panic", "s", "{}").await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    let problem = first.json();
    assert_eq!(problem["outcome"], "unknown");
    assert_eq!(problem["retryable"], false);
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .starts_with("This action may have run"));
    client.post("/tools/panic", "s", "{}").await;
    assert_eq!(counts.get("panic"), 2);
    // The process lives on.
    assert_eq!(
        client.post("/tools/echo", "s", "{}").await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn a_response_body_that_fails_releases_the_key() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/broken_body", "s", "{}").await;
    assert_eq!(first.status, StatusCode::BAD_GATEWAY);
    assert_eq!(first.json()["outcome"], "unknown");
    client.post("/tools/broken_body", "s", "{}").await;
    assert_eq!(counts.get("broken_body"), 2);
}

#[tokio::test]
async fn a_response_over_the_cap_is_executed_once_but_not_kept() {
    let (client, counts) = start(IdempotencyLayer::new().response_limit(1024)).await;
    let first = client.post("/tools/big", "s", r#"{"bytes":5000}"#).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.body.len(),
        "1:".len() + 5000,
        "the first caller gets all of it"
    );
    let again = client.post("/tools/big", "s", r#"{"bytes":5000}"#).await;
    assert_eq!(again.status, StatusCode::OK);
    let body = again.json();
    assert_eq!(body["outcome"], "already_executed");
    assert_eq!(body["retryable"], false);
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .starts_with("This action already ran"));
    assert_eq!(counts.get("big"), 1);
}

#[tokio::test]
async fn a_custom_predicate_decides_what_is_kept() {
    let layer =
        IdempotencyLayer::new().classify(|status: StatusCode, _: &axum::http::HeaderMap| {
            if status == StatusCode::CONFLICT {
                tower_idempotency::Verdict::Release(tower_idempotency::ReleaseCause::Predicate)
            } else {
                tower_idempotency::Verdict::Keep
            }
        });
    let (client, counts) = start(layer).await;
    client.post("/tools/status/409", "s", "{}").await;
    client.post("/tools/status/409", "s", "{}").await;
    assert_eq!(counts.get("status"), 2);
    client.post("/tools/status/500", "s", "{}").await;
    let kept = client.post("/tools/status/500", "s", "{}").await;
    assert!(kept.replayed(), "this predicate keeps 500s");
    assert_eq!(counts.get("status"), 3);
}

#[tokio::test]
async fn a_released_key_records_a_failure_for_the_status_path() {
    let (client, _) = start(IdempotencyLayer::new()).await;
    let failed = client.post("/tools/status/503", "s", "{}").await;
    let status = client
        .get(&format!("/_idempotency/{}", failed.intent()), Some("s"))
        .await;
    assert_eq!(status.status, StatusCode::OK);
    let body = status.json();
    assert_eq!(body["outcome"], "failed");
    assert_eq!(body["last_status"], 503);
    assert_eq!(body["retryable"], true);
}

#[tokio::test(start_paused = true)]
async fn records_expire_after_the_retention() {
    let layer = IdempotencyLayer::new().retention_for("/tools/echo", Duration::from_millis(100));
    let (client, counts) = start_in_memory(layer);
    client.post("/tools/echo", "s", "{}").await;
    assert!(client.post("/tools/echo", "s", "{}").await.replayed());
    tokio::time::advance(Duration::from_millis(300)).await;
    assert!(!client.post("/tools/echo", "s", "{}").await.replayed());
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn times_past_the_clocks_reach_keep_records_and_failures_as_long_as_the_store_can() {
    let layer = IdempotencyLayer::new()
        .retention(Duration::MAX)
        .lease(Duration::MAX)
        .failure_ttl(Duration::MAX);
    let (client, counts) = start(layer).await;
    support::assert_replayed_and_failure_shown(&client, &client, &counts).await;
}

#[tokio::test]
async fn a_deadline_and_bounds_past_the_clocks_reach_wait_for_a_slow_tool() {
    // "Always wait": the caller and a duplicate sent beside it wait for the one execution, whose
    // lease is renewed while it runs.
    let layer = IdempotencyLayer::new()
        .deadline(Duration::MAX)
        .max_execution(Duration::MAX)
        .lease(Duration::MAX);
    let (client, counts) = start(layer).await;
    let body = r#"{"delay_ms":300}"#;
    let (first, duplicate) = tokio::join!(client.post("/tools/echo", "s", body), async {
        counts.reached("echo", 1).await;
        client.post("/tools/echo", "s", body).await
    });
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(duplicate.status, StatusCode::CREATED);
    assert!(duplicate.replayed());
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_retention_too_long_to_count_in_milliseconds_keeps_the_record_to_the_end_of_time() {
    // 2^64 + 384 milliseconds: one that wrapped around would keep it for 384.
    let retention = Duration::from_millis(u64::MAX) + Duration::from_millis(385);
    let store = MemoryStore::new();
    let layer = IdempotencyLayer::with_store(store.clone()).retention(retention);
    let (client, _) = start(layer).await;
    let answer = client.post("/tools/echo", "s", "{}").await;
    let key: IntentKey = answer.intent().parse().unwrap();
    let Ok(Some(Entry::Completed(record))) = store.get(&key).await else {
        panic!("the record is kept");
    };
    assert_eq!(record.expires_at_ms, u64::MAX);
}

/// An answer that says the action may have run, that it will not run again, and that a
/// retry is not safe.
fn assert_may_have_run(answer: &support::Answer) {
    let told = answer.json();
    assert_eq!(told["outcome"], "unknown", "{told}");
    assert_eq!(told["retryable"], false);
    let detail = told["detail"].as_str().unwrap();
    assert!(detail.starts_with("This action may have run"), "{detail}");
    assert!(detail.contains("will not run it"), "{detail}");
}

#[tokio::test]
async fn an_answer_marked_interrupted_is_kept_as_may_have_run_and_never_run_again() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client
        .post("/tools/interrupted", "s", r#"{"cents":500}"#)
        .await;
    assert_eq!(first.status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        first.body, "connection reset",
        "its first caller gets it as it is"
    );
    let again = client
        .post("/tools/interrupted", "s", r#"{"cents":500}"#)
        .await;
    assert_eq!(again.status, StatusCode::BAD_GATEWAY);
    assert_may_have_run(&again);
    assert_eq!(counts.get("interrupted"), 1);
}

#[tokio::test]
async fn a_response_body_that_breaks_off_with_interrupted_is_kept_as_may_have_run() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client
        .post("/tools/interrupted_body", "s", r#"{"cents":500}"#)
        .await;
    assert_eq!(first.status, StatusCode::BAD_GATEWAY);
    assert_may_have_run(&first);
    let again = client
        .post("/tools/interrupted_body", "s", r#"{"cents":500}"#)
        .await;
    assert_may_have_run(&again);
    assert_eq!(counts.get("interrupted_body"), 1);
}
