//! The `production` example, run as a user runs it: authentication outside the layer, the
//! scope from the principal and the conversation, the tools alone protected, metrics, and a
//! shutdown on SIGTERM within its grace period; on the memory store, on a real Redis, and on a
//! Redis reached over TLS.

mod support;

#[cfg(feature = "redis")]
use std::time::Duration;

use axum::http::StatusCode;
#[cfg(feature = "redis")]
use support::gateway::start_example_keeping_stderr;
use support::gateway::{start_example, Gateway};
use support::{Answer, Client};

const TOKENS: &str = "t-ann=ann,t-bob=bob";

async fn send(client: &Client, token: Option<&str>, conversation: &str, body: &str) -> Answer {
    let mut headers = vec![
        ("content-type", "application/json"),
        ("x-conversation-id", conversation),
    ];
    let bearer = token.map(|token| format!("Bearer {token}"));
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer));
    }
    client
        .post_with("/tools/send_email", &headers, body.to_owned())
        .await
}

/// An authenticated call whose action takes 800 ms.
#[cfg(feature = "redis")]
const SLOW: &str = r#"{"to":"a@example.com","delay_ms":800}"#;

/// [`SLOW`], sent in a task of its own.
#[cfg(feature = "redis")]
fn slow_call(gateway: &Gateway) -> tokio::task::JoinHandle<Answer> {
    let client = gateway.client.clone();
    tokio::spawn(async move { send(&client, Some("t-ann"), "c1", SLOW).await })
}

/// Waits until the example runs the action it was sent: its metrics count the execution,
/// which starts once the call is claimed.
#[cfg(feature = "redis")]
async fn executing(gateway: &Gateway) {
    let executed = r#"idempotency_executions_total{operation="POST /tools/send_email"} 1"#;
    support::process::eventually("the action started", Duration::from_secs(10), || async {
        let metrics = gateway.client.get("/metrics", None).await;
        let metrics = String::from_utf8_lossy(&metrics.body).into_owned();
        metrics.lines().any(|line| line == executed).then_some(())
    })
    .await;
}

async fn sent(gateway: &Gateway) -> u64 {
    let stats = gateway.client.get("/stats", None).await;
    stats.json()["sent"].as_u64().unwrap()
}

/// What every deployment of the example must hold, whatever its store.
async fn holds_its_promises(gateway: &Gateway) {
    let email = r#"{"to":"a@example.com","subject":"invoice"}"#;
    let refused = send(&gateway.client, None, "c1", email).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(sent(gateway).await, 0, "nothing unauthenticated ran");

    let first = send(&gateway.client, Some("t-ann"), "c1", email).await;
    assert_eq!(first.status, StatusCode::OK);
    let respelled = r#"{ "subject": "invoice", "to": "a@example.com" }"#;
    let again = send(&gateway.client, Some("t-ann"), "c1", respelled).await;
    assert!(again.replayed(), "the retry is replayed");
    assert_eq!(again.json()["message_id"], first.json()["message_id"]);
    assert_eq!(sent(gateway).await, 1);

    let other_conversation = send(&gateway.client, Some("t-ann"), "c2", email).await;
    assert!(!other_conversation.replayed());
    let other_principal = send(&gateway.client, Some("t-bob"), "c1", email).await;
    assert!(
        !other_principal.replayed(),
        "another principal's conversation id reaches none of ann's records"
    );
    assert_eq!(sent(gateway).await, 3);

    let health = gateway.client.get("/healthz", None).await;
    assert_eq!(health.status, StatusCode::OK, "open paths need no token");
    let metrics = gateway.client.get("/metrics", None).await;
    let metrics = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        metrics.contains("idempotency_replays_total"),
        "the layer's metrics are served: {metrics}"
    );
    // Histograms come with buckets, as the README's panels read them.
    for series in [
        "idempotency_request_duration_seconds_bucket{",
        "idempotency_intent_attempts_bucket{",
        "idempotency_store_duration_seconds_bucket{",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_production_example_holds_its_promises_on_the_memory_store() {
    let gateway = start_example("production", &[("TOKENS", TOKENS)]);
    holds_its_promises(&gateway).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_production_example_holds_its_promises_on_redis() {
    let server = support::redis_server::RedisServer::start();
    let gateway = start_example(
        "production",
        &[("TOKENS", TOKENS), ("REDIS_URL", &server.url())],
    );
    holds_its_promises(&gateway).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_action_lets_it_finish_and_record_within_the_grace() {
    let server = support::redis_server::RedisServer::start();
    let env = [
        ("TOKENS", TOKENS),
        ("REDIS_URL", &server.url()),
        ("SHUTDOWN_GRACE_MS", "5000"),
    ];
    let mut gateway = start_example("production", &env);
    let call = slow_call(&gateway);
    executing(&gateway).await;
    gateway.terminate();
    let answer = call.await.unwrap();
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "the action in flight finished"
    );
    assert!(
        gateway.exited_within(Duration::from_secs(5)),
        "the process exits within its grace period"
    );
    // Recorded before the exit: the next instance on the same store replays it.
    let next = start_example("production", &env);
    let again = send(&next.client, Some("t-ann"), "c1", SLOW).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, answer.body);
}

#[cfg(feature = "redis-tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_production_example_holds_its_promises_on_redis_over_tls() {
    // Sets SSL_CERT_FILE in this process, which the example inherits: its client trusts the
    // test's authority as it would a system certificate.
    let certificates = support::certificates::certificates();
    let server = support::redis_tls::TlsServer::start(certificates);
    let gateway = start_example(
        "production",
        &[("TOKENS", TOKENS), ("REDIS_URL", &server.url())],
    );
    holds_its_promises(&gateway).await;
}

/// Redis goes away while an action runs, then SIGTERM: the action's outcome cannot be
/// recorded, the write is retried in the background, and the shutdown ends at its grace and
/// says what it left.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_redis_outage_exits_within_the_grace_and_says_what_it_left() {
    let mut server = support::redis_server::RedisServer::start();
    let mut gateway = start_example_keeping_stderr(
        "production",
        &[
            ("TOKENS", TOKENS),
            ("REDIS_URL", &server.url()),
            ("SHUTDOWN_GRACE_MS", "2000"),
        ],
    );
    let call = slow_call(&gateway);
    executing(&gateway).await;
    server.kill();
    gateway.terminate();
    let answer = call.await.unwrap();
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "the caller has its answer although the store cannot record it"
    );
    assert!(
        gateway.exited_within(Duration::from_secs(8)),
        "the process exits at the end of its grace period, not after the ten minutes a \
         refused write is retried for"
    );
    let said = gateway.stderr();
    assert!(
        said.contains("shutdown: 1 execution(s) left unfinished"),
        "it says what it left: {said}"
    );
}
