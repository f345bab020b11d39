//! Every answer the layer writes tells the truth: its first sentence says what is known of
//! the action ("ran", "may have run", "not executed", "cannot tell right now"), and
//! `retryable` agrees with it.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use support::faulty::{Call, Fault, FaultyStore, Plan};
use support::{start, Answer, Client};
use tower_idempotency::store::MemoryStore;
use tower_idempotency::IdempotencyLayer;

fn detail(answer: &Answer) -> String {
    answer.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Asserts the outcome, `retryable` and the first words of the detail.
fn says(answer: &Answer, outcome: &str, retryable: bool, first_words: &str) {
    let body = answer.json();
    assert_eq!(body["outcome"], outcome, "{body}");
    assert_eq!(body["retryable"], retryable, "{body}");
    assert!(detail(answer).starts_with(first_words), "{body}");
}

async fn status_of(client: &Client, answer: &Answer) -> Answer {
    let url = format!("/_idempotency/{}", answer.intent());
    client.get(&url, Some("s")).await
}

#[tokio::test]
async fn a_no_store_success_is_recorded_as_ran_and_never_called_failed() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/no_store", "s", "{}").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.json()["n"], 1);
    let again = client.post("/tools/no_store", "s", "{}").await;
    assert_eq!(again.status, StatusCode::OK);
    says(&again, "already_executed", false, "This action already ran");
    assert!(detail(&again).contains("no-store"), "{}", detail(&again));
    let status = status_of(&client, &first).await;
    says(
        &status,
        "already_executed",
        false,
        "This action already ran",
    );
    assert_eq!(counts.get("no_store"), 1, "it never runs again");
}

#[tokio::test]
async fn a_crash_in_the_tool_is_reported_as_may_have_run() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let crashed = client.post("/tools/panic", "s", "{}").await;
    assert_eq!(crashed.status, StatusCode::INTERNAL_SERVER_ERROR);
    says(&crashed, "unknown", false, "This action may have run");
    assert!(!detail(&crashed).contains("will run it again"));
    let status = status_of(&client, &crashed).await;
    says(
        &status,
        "unknown",
        false,
        "The last attempt of this action may have run",
    );
    assert_eq!(counts.get("panic"), 1);
}

#[tokio::test]
async fn a_response_that_broke_off_is_reported_as_may_have_run() {
    let (client, _) = start(IdempotencyLayer::new()).await;
    let broken = client.post("/tools/broken_body", "s", "{}").await;
    says(&broken, "unknown", false, "This action may have run");
    let status = status_of(&client, &broken).await;
    says(
        &status,
        "unknown",
        false,
        "The last attempt of this action may have run",
    );
}

#[tokio::test]
async fn a_reused_key_says_the_earlier_action_ran_and_what_to_resend() {
    let (client, counts) = start(IdempotencyLayer::new().idempotency_key_header()).await;
    let with_key = |body: &'static str| {
        client.post_with(
            "/tools/echo",
            &[
                ("x-session-id", "s"),
                ("content-type", "application/json"),
                ("idempotency-key", "order-7"),
            ],
            body,
        )
    };
    with_key(r#"{"amount":1}"#).await;
    let reused = with_key(r#"{"amount":2}"#).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    says(
        &reused,
        "not_executed",
        false,
        "This call was not executed: an action under this idempotency key already ran",
    );
    assert!(detail(&reused).contains("original arguments"));
    assert!(!detail(&reused).contains("new key"), "{}", detail(&reused));
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn the_status_path_says_it_cannot_tell_when_the_store_cannot_answer() {
    let plan = Plan {
        call: Call::Get,
        ordinal: 0,
        fault: Fault::Fail,
        every: true,
    };
    let store = FaultyStore::new(MemoryStore::new(), Some(plan));
    let (client, _) = start(IdempotencyLayer::with_store(store)).await;
    let done = client.post("/tools/echo", "s", "{}").await;
    let status = status_of(&client, &done).await;
    assert_eq!(status.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status.header("retry-after"), Some("1"));
    says(&status, "unavailable", true, "Cannot tell right now");
    assert!(detail(&status).contains("Do not repeat the action yet"));
}

#[tokio::test]
async fn the_status_path_says_not_found_for_an_unknown_intent_without_claiming_nothing_ran() {
    let (client, _) = start(IdempotencyLayer::new()).await;
    let url = format!("/_idempotency/{}", "0".repeat(64));
    let unknown = client.get(&url, Some("s")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let body = unknown.json();
    assert_eq!(
        (&body["outcome"], &body["retryable"]),
        (&Value::from("not_found"), &Value::from(false))
    );
    for untrue in ["never ran", "Nothing was executed", "nothing was run"] {
        assert!(!detail(&unknown).contains(untrue), "{body}");
    }
}

#[tokio::test]
async fn in_progress_names_what_a_repeat_must_keep() {
    let layer = IdempotencyLayer::new()
        .idempotency_key_header()
        .deadline(Duration::from_millis(100));
    let (client, _) = start(layer).await;
    let running = client
        .post_with(
            "/tools/echo",
            &[
                ("x-session-id", "s"),
                ("content-type", "application/json"),
                ("idempotency-key", "k-1"),
            ],
            r#"{"delay_ms":600}"#,
        )
        .await;
    assert_eq!(running.status, StatusCode::ACCEPTED);
    // This caller's own call started the action: it is never told someone else did.
    says(
        &running,
        "in_progress",
        true,
        "This call started the action, which is still running",
    );
    let told = detail(&running);
    assert!(told.contains("x-session-id"), "{told}");
    assert!(told.contains("idempotency-key"), "{told}");
    // The status path cannot tell whether the call sent a key: it names it, if one was sent.
    let status = status_of(&client, &running).await;
    says(&status, "in_progress", true, "This action is still running");
    let told = detail(&status);
    assert!(told.contains("x-session-id"), "{told}");
    assert!(
        told.contains("`idempotency-key` header if the call sent one"),
        "{told}"
    );
}

#[tokio::test]
async fn a_duplicate_of_a_running_action_is_told_it_was_not_started_again() {
    let (client, counts) =
        start(IdempotencyLayer::new().deadline(Duration::from_millis(100))).await;
    let slow = r#"{"delay_ms":600}"#;
    let first = client.post("/tools/echo", "s", slow).await;
    says(&first, "in_progress", true, "This call started the action");
    let duplicate = client.post("/tools/echo", "s", slow).await;
    says(
        &duplicate,
        "in_progress",
        true,
        "This action is already running",
    );
    assert!(detail(&duplicate).contains("was not started again"));
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_release_for_too_many_requests_gives_the_wait() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let busy = client.post("/tools/busy", "s", "{}").await;
    assert_eq!(busy.status, StatusCode::TOO_MANY_REQUESTS);
    let status = status_of(&client, &busy).await;
    says(
        &status,
        "failed",
        true,
        "The last attempt of this action was refused",
    );
    assert_eq!(status.json()["retry_after_s"], 7);
    assert_eq!(status.header("retry-after"), Some("7"));
    assert_eq!(counts.get("busy"), 1);
}

#[tokio::test]
async fn past_max_execution_the_action_is_recorded_as_may_have_run_and_never_run_again() {
    let layer = IdempotencyLayer::new()
        .deadline(Duration::from_secs(3))
        .max_execution_for("/tools/echo", Duration::from_millis(300));
    let (client, counts) = start(layer).await;
    let slow = r#"{"delay_ms":2000}"#;
    let abandoned = client.post("/tools/echo", "s", slow).await;
    says(&abandoned, "unknown", false, "This action may have run");
    assert!(
        detail(&abandoned).contains("check"),
        "{}",
        detail(&abandoned)
    );
    let again = client.post("/tools/echo", "s", slow).await;
    says(&again, "unknown", false, "This action may have run");
    let status = status_of(&client, &abandoned).await;
    says(&status, "unknown", false, "This action may have run");
    assert_eq!(counts.get("echo"), 1, "it never runs again by itself");
    // Other paths keep no bound.
    let fast = client
        .post("/tools/status/200", "s", r#"{"delay_ms":500}"#)
        .await;
    assert_eq!(fast.status, StatusCode::OK);
}

#[tokio::test]
async fn an_answer_of_a_layer_behind_this_one_is_never_called_a_failure() {
    // Behind this layer, another that tells its caller "in progress" after 100 ms: an answer
    // this layer does not keep, and one that says nothing failed.
    let counts = support::Counts::default();
    let behind = IdempotencyLayer::new().deadline(Duration::from_millis(100));
    let app = support::tools(counts.clone())
        .layer(behind)
        .layer(IdempotencyLayer::new());
    let client = Client::new(support::serve(app).await);
    let first = client.post("/tools/echo", "s", r#"{"delay_ms":400}"#).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let status = status_of(&client, &first).await;
    says(
        &status,
        "unknown",
        false,
        "The last attempt of this action was answered with status 202",
    );
    assert!(!detail(&status).contains("failed"), "{}", detail(&status));
}

#[tokio::test]
async fn a_gateways_502_or_504_is_told_as_may_have_run_to_repeats_and_on_the_status_path() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/status/504", "s", "{}").await;
    assert_eq!(
        first.status.as_u16(),
        504,
        "the first caller gets the gateway's answer"
    );
    let repeat = client.post("/tools/status/504", "s", "{}").await;
    says(
        &repeat,
        "unknown",
        false,
        "This action may have run: a gateway",
    );
    let status = status_of(&client, &first).await;
    says(
        &status,
        "unknown",
        false,
        "This action may have run: a gateway",
    );
    assert_eq!(counts.get("status"), 1);
}

#[tokio::test]
async fn a_credentials_refusal_is_told_as_refused_and_that_a_repeat_runs() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client.post("/tools/status/401", "s", "{}").await;
    assert_eq!(first.status.as_u16(), 401);
    let status = status_of(&client, &first).await;
    says(
        &status,
        "failed",
        true,
        "The last attempt of this action was refused with status 401",
    );
    assert!(
        detail(&status).contains("will run it again"),
        "{}",
        detail(&status)
    );
    client.post("/tools/status/401", "s", "{}").await;
    assert_eq!(counts.get("status"), 2, "the repeat ran");
}

#[tokio::test(start_paused = true)]
async fn an_error_of_the_service_in_front_of_the_tool_is_told_as_may_have_run() {
    use std::sync::Arc;

    use http_body_util::{BodyExt, Full};
    use tower::{service_fn, Service, ServiceBuilder, ServiceExt};

    // A client service that sent the request and then failed (a timeout, a lost connection).
    let sent = Arc::new(tokio::sync::Notify::new());
    let service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new().deadline(Duration::from_secs(3)))
        .service(service_fn({
            let sent = Arc::clone(&sent);
            move |_: axum::http::Request<Full<bytes::Bytes>>| {
                sent.notify_one();
                async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Err::<axum::http::Response<Full<bytes::Bytes>>, _>(std::io::Error::other(
                        "timed out",
                    ))
                }
            }
        }));
    let request = |path: &str| {
        axum::http::Request::post(path)
            .header("x-session-id", "s")
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from_static(b"{\"to\":\"a\"}")))
            .unwrap()
    };
    let first = service.clone().oneshot(request("/send"));
    let duplicate = async {
        sent.notified().await;
        service.clone().oneshot(request("/send")).await
    };
    let (first, duplicate) = tokio::join!(first, duplicate);
    assert!(first.is_err(), "the first caller gets the error itself");
    let body = duplicate.unwrap().into_body().collect().await.unwrap();
    let told: Value = serde_json::from_slice(&body.to_bytes()).unwrap();
    assert_eq!(told["outcome"], "unknown", "{told}");
    assert_eq!(told["retryable"], false, "{told}");
    let words = told["detail"].as_str().unwrap_or_default();
    assert!(words.starts_with("This action may have run"), "{told}");
    // The status path says it of the last attempt.
    let intent = told["intent"].as_str().unwrap();
    let mut service = service;
    let asked = axum::http::Request::get(format!("/_idempotency/{intent}"))
        .header("x-session-id", "s")
        .body(Full::default())
        .unwrap();
    let status = service.ready().await.unwrap().call(asked).await.unwrap();
    let body = status.into_body().collect().await.unwrap();
    let told: Value = serde_json::from_slice(&body.to_bytes()).unwrap();
    assert_eq!(told["retryable"], false, "{told}");
    let words = told["detail"].as_str().unwrap_or_default();
    assert!(
        words.starts_with("The last attempt of this action may have run"),
        "{told}"
    );
}

#[tokio::test]
async fn a_repeat_while_a_refused_release_holds_the_key_is_told_it_failed_and_when_to_call() {
    let plan = Plan {
        call: Call::Release,
        ordinal: 0,
        fault: Fault::Fail,
        every: true,
    };
    let store = FaultyStore::new(MemoryStore::new(), Some(plan));
    let layer = IdempotencyLayer::with_store(store).lease(Duration::from_secs(2));
    let (client, counts) = start(layer).await;
    client.post("/tools/status/503", "s", "{}").await;
    let again = client.post("/tools/status/503", "s", "{}").await;
    says(&again, "failed", true, "This action failed with status 503");
    assert!(detail(&again).contains("in 2 s will run it again"));
    assert_eq!(counts.get("status"), 1);
}

#[tokio::test]
async fn an_answer_that_says_a_repeat_will_not_run_says_for_how_long() {
    // Outcomes not known are kept `unknown_retention`, others `retention`: the words say which.
    let layer = IdempotencyLayer::new()
        .unknown_retention(Duration::from_secs(600))
        .retention(Duration::from_secs(3 * 3600));
    let (client, _) = start(layer).await;
    client.post("/tools/status/504", "s", "{}").await;
    let unknown = detail(&client.post("/tools/status/504", "s", "{}").await);
    // Rounded down: a repeat in the record's own millisecond still has the whole time left.
    let says = |text: &str, times: [&str; 2]| {
        (times.iter()).any(|time| text.contains(&format!("will not run it for the next {time}")))
    };
    assert!(says(&unknown, ["9 minutes", "10 minutes"]), "{unknown}");
    client.post("/tools/no_store", "s", "{}").await;
    let ran = detail(&client.post("/tools/no_store", "s", "{}").await);
    assert!(says(&ran, ["2 hours", "3 hours"]), "{ran}");
}

#[tokio::test]
async fn no_answer_says_session_where_the_scope_is_a_principal() {
    let layer = IdempotencyLayer::new().scope_header("x-user".parse().unwrap());
    let (client, _) = start(layer).await;
    let refused = client.post("/tools/echo", "s", "{}").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let status = client.get("/_idempotency/missing", None).await;
    let url = format!("/_idempotency/{}", "0".repeat(64));
    let unknown = (client.http.get(format!("{}{url}", client.base))).header("x-user", "ann");
    let unknown = client.send(unknown).await;
    for answer in [&refused, &status, &unknown] {
        let text = answer.json().to_string();
        assert!(!text.to_lowercase().contains("session"), "{text}");
    }
    assert!(detail(&refused).contains("x-user"), "{}", refused.json());
}
