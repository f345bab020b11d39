//! The retry budget: an intent whose attempts keep failing runs again only after a growing
//! wait, and every attempt inside it is answered at once, run by nobody, saying when calling
//! again will run it.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use support::start_in_memory;
use tokio::time::{sleep_until, Instant};
use tower_idempotency::{IdempotencyLayer, RetryBudget};

/// When each of 50 calls is sent, in milliseconds from the first: a client that retries at
/// once after the first failure, then every 250 ms for ten seconds, then every 5 s.
fn fifty_calls_in_a_minute() -> Vec<u64> {
    let mut at = vec![0, 0];
    at.extend((1..40).map(|n| n * 250));
    at.extend((3..12).map(|n| n * 5_000));
    at
}

/// When the run after `at` (in ms from the first call) may happen under the default budget:
/// runs at 0, 0, 1, 3 and 7 s, then 10 min after the fifth.
fn next_run_after(at: u64) -> u64 {
    [1_000, 3_000, 7_000]
        .into_iter()
        .find(|run| at < *run)
        .unwrap_or(7_000 + 600_000)
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_always_fails_runs_five_times_in_a_minute_then_not_for_ten_minutes() {
    let (client, counts) = start_in_memory(IdempotencyLayer::new());
    let start = Instant::now();
    let schedule = fifty_calls_in_a_minute();
    assert_eq!(schedule.len(), 50);
    assert!(*schedule.last().unwrap() < 60_000);
    let mut ran_at = Vec::new();
    for at in schedule {
        sleep_until(start + Duration::from_millis(at)).await;
        let before = counts.get("status");
        let answer = client.post("/tools/status/500", "s", "{}").await;
        if counts.get("status") > before {
            assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
            ran_at.push(at);
            continue;
        }
        let wait_s = (next_run_after(at) - at).div_ceil(1000);
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "at {at} ms");
        assert_eq!(
            answer.header("retry-after"),
            Some(wait_s.to_string().as_str()),
            "at {at} ms"
        );
        let told = answer.json();
        assert_eq!(told["outcome"], "not_executed");
        assert_eq!(told["retryable"], true);
        assert_eq!(told["retry_after_s"], wait_s);
        let detail = told["detail"].as_str().unwrap();
        let first = detail.split(". ").next().unwrap();
        assert!(first.starts_with("This call was not run"), "{detail}");
        assert!(first.contains(&format!("in {wait_s} s")), "{detail}");
        assert!(first.contains("answered status 500"), "{detail}");
        let failures = told["failures"].as_u64().unwrap();
        assert!(
            first.contains(&format!("last {failures} attempts")),
            "{detail}"
        );
    }
    assert_eq!(
        ran_at,
        [0, 0, 1_000, 3_000, 7_000],
        "runs, in ms from the first call"
    );
    // Not again for ten minutes after the fifth failure, then once.
    sleep_until(start + Duration::from_millis(7_000 + 600_000 - 1_000)).await;
    let held = client.post("/tools/status/500", "s", "{}").await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(held.json()["failures"], 5);
    assert_eq!(counts.get("status"), 5);
    sleep_until(start + Duration::from_millis(7_000 + 600_000)).await;
    let again = client.post("/tools/status/500", "s", "{}").await;
    assert_eq!(again.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(counts.get("status"), 6);
}

#[tokio::test(start_paused = true)]
async fn a_success_ends_the_run_of_failures() {
    let layer = IdempotencyLayer::new().retention(Duration::from_secs(1));
    let (client, counts) = start_in_memory(layer);
    let call = || client.post("/tools/flaky", "s", "{}");
    // Three failures: the next attempt waits 2 s.
    for _ in 0..2 {
        assert_eq!(call().await.status, StatusCode::SERVICE_UNAVAILABLE);
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(call().await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call().await.status, StatusCode::TOO_MANY_REQUESTS);
    tokio::time::advance(Duration::from_secs(2)).await;
    counts.set_flaky(false);
    assert_eq!(call().await.status, StatusCode::OK, "past the wait it runs");
    assert_eq!(counts.get("flaky"), 4);
    // Its record lapses; the tool fails again, and the count starts over: two failures in a
    // row run at once.
    tokio::time::advance(Duration::from_secs(2)).await;
    counts.set_flaky(true);
    assert_eq!(call().await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call().await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(counts.get("flaky"), 6);
    assert_eq!(call().await.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(start_paused = true)]
async fn a_budget_turned_off_runs_every_attempt_and_a_route_may_set_its_own() {
    let layer = IdempotencyLayer::new()
        .retry_budget(RetryBudget::off())
        .retry_budget_for(
            "/tools/panic",
            RetryBudget::default()
                .max_failures(2)
                .cooldown(Duration::from_secs(30)),
        );
    let (client, counts) = start_in_memory(layer);
    for _ in 0..8 {
        client.post("/tools/status/500", "s", "{}").await;
    }
    assert_eq!(counts.get("status"), 8, "off: every attempt runs");
    client.post("/tools/panic", "s", "{}").await;
    client.post("/tools/panic", "s", "{}").await;
    let held = client.post("/tools/panic", "s", "{}").await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(held.header("retry-after"), Some("30"));
    let detail = held.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("crashed or stopped before it answered"),
        "{detail}"
    );
    assert!(detail.contains("may have run: check whether"), "{detail}");
    assert_eq!(counts.get("panic"), 2);
}

#[tokio::test(start_paused = true)]
async fn an_answer_of_the_credentials_never_counts_against_the_budget() {
    let (client, counts) = start_in_memory(IdempotencyLayer::new());
    for _ in 0..8 {
        let answer = client.post("/tools/status/401", "s", "{}").await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(counts.get("status"), 8);
}
