//! Duplicates in every shape an agent produces them, through real HTTP.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use axum::http::StatusCode;
use support::start;
use tower_idempotency::IdempotencyLayer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_identical_calls_execute_once() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let calls = (0..200).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.post("/tools/echo", "s", r#"{"delay_ms":300}"#).await })
    });
    let answers: Vec<_> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(counts.get("echo"), 1);
    let bodies: HashSet<_> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .map(|a| a.body.clone())
        .collect();
    assert_eq!(
        bodies.len(),
        1,
        "every caller that got the result got the same one"
    );
    for answer in &answers {
        assert!(
            answer.status == StatusCode::CREATED || answer.status == StatusCode::ACCEPTED,
            "unexpected {:?}",
            answer.status
        );
    }
    let replayed = answers.iter().filter(|a| a.replayed()).count();
    assert_eq!(replayed, 199, "all but the first are duplicates");
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_cancel_the_execution() {
    let layer = IdempotencyLayer::new();
    let executions = layer.detached();
    let (client, counts) = start(layer).await;
    let patience = Duration::from_millis(100);
    let gone = client
        .post_giving_up("/tools/echo", "s", r#"{"delay_ms":400}"#, patience)
        .await;
    assert!(gone.is_err(), "the client gave up");
    executions.wait().await;
    assert_eq!(counts.get("echo"), 1, "the action ran to its end");
    let retry = client.post("/tools/echo", "s", r#"{"delay_ms":400}"#).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed());
    assert_eq!(retry.json()["n"], 1);
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn two_sessions_with_the_same_body_never_share_a_response() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let alice = client.post("/tools/echo", "alice", r#"{"x":1}"#).await;
    let bob = client.post("/tools/echo", "bob", r#"{"x":1}"#).await;
    assert!(!bob.replayed());
    assert_ne!(alice.intent(), bob.intent());
    assert_ne!(alice.body, bob.body);
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn concurrent_calls_from_two_sessions_run_separately() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let (a, b) = tokio::join!(
        client.post("/tools/echo", "alice", r#"{"delay_ms":200}"#),
        client.post("/tools/echo", "bob", r#"{"delay_ms":200}"#)
    );
    assert!(!a.replayed() && !b.replayed());
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn the_same_intent_however_the_model_spells_it_is_one_call() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let first = client
        .post(
            "/tools/echo",
            "s",
            r#"{"to":"a@b.c","amount":1.50,"tags":["x"]}"#,
        )
        .await;
    for spelling in [
        "{ \"amount\" : 1.5 , \"tags\" : [ \"x\" ] , \"to\" : \"a@b.c\" }",
        r#"{"tags":["\u0078"],"to":"a\u0040b.c","amount":15e-1}"#,
    ] {
        let again = client.post("/tools/echo", "s", spelling).await;
        assert!(again.replayed(), "{spelling}");
        assert_eq!(again.intent(), first.intent());
    }
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn requests_an_upstream_could_tell_apart_are_never_merged() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let distinct = [
        r#"{"amount":9007199254740993}"#,
        r#"{"amount":9007199254740992}"#,
        r#"{"amount":12345678901234567890123}"#,
        r#"{"amount":12345678901234567890124}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a":2,"a":1}"#,
        r#"{"amount":"1"}"#,
        r#"{"amount":1}"#,
    ];
    let mut intents = HashSet::new();
    for body in distinct {
        let answer = client.post("/tools/raw", "s", body).await;
        assert!(!answer.replayed(), "{body}");
        intents.insert(answer.intent().to_owned());
    }
    assert_eq!(intents.len(), distinct.len());
    assert_eq!(counts.get("raw"), distinct.len());
    // Other paths and query strings are other operations.
    let a = client.post("/tools/raw?v=1", "s", "{}").await;
    let b = client.post("/tools/raw?v=2", "s", "{}").await;
    assert_ne!(a.intent(), b.intent());
}

#[tokio::test]
async fn fields_that_change_on_every_attempt_can_be_ignored() {
    let (client, counts) = start(IdempotencyLayer::new().ignore_field("/tool_call_id")).await;
    client
        .post("/tools/echo", "s", r#"{"q":1,"tool_call_id":"call_a"}"#)
        .await;
    let retry = client
        .post("/tools/echo", "s", r#"{"q":1,"tool_call_id":"call_b"}"#)
        .await;
    assert!(retry.replayed());
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_normalizer_merges_what_the_application_deems_equal() {
    let layer = IdempotencyLayer::new().normalize(|value| {
        if let Some(to) = value
            .get("to")
            .and_then(|t| t.as_str())
            .map(str::to_lowercase)
        {
            value["to"] = to.into();
        }
    });
    let (client, counts) = start(layer).await;
    client
        .post("/tools/echo", "s", r#"{"to":"Ann@Example.com"}"#)
        .await;
    let again = client
        .post("/tools/echo", "s", r#"{"to":"ann@example.com"}"#)
        .await;
    assert!(again.replayed());
    assert_eq!(again.json()["echo"]["to"], "Ann@Example.com");
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn a_body_the_normalizer_cannot_be_given_still_leaves_its_ignored_fields_out() {
    // An integer past 64 bits cannot cross into a `serde_json::Value` exactly: the hook is
    // skipped for it, and a retry with a new call id is still the same intent.
    let layer = IdempotencyLayer::new()
        .normalize(|_| {})
        .ignore_field("/tool_call_id");
    let (client, counts) = start(layer).await;
    let body = |call| format!(r#"{{"n":123456789012345678901234567890,"tool_call_id":"{call}"}}"#);
    client.post("/tools/raw", "s", &body("call_a")).await;
    let retry = client.post("/tools/raw", "s", &body("call_b")).await;
    assert!(retry.replayed());
    assert_eq!(counts.get("raw"), 1);
    // Another number is another intent.
    let other = r#"{"n":123456789012345678901234567891,"tool_call_id":"call_c"}"#;
    assert!(!client.post("/tools/raw", "s", other).await.replayed());
    assert_eq!(counts.get("raw"), 2);
}

#[tokio::test]
async fn safe_methods_and_excluded_paths_pass_through() {
    let (client, counts) = start(IdempotencyLayer::new().exclude("/internal")).await;
    for _ in 0..2 {
        let search = client.get("/tools/search?q=x", None).await;
        assert_eq!(search.status, StatusCode::OK);
        assert!(search.header("idempotency-intent").is_none());
        let internal = client.post("/internal/echo", "s", "{}").await;
        assert!(!internal.replayed());
        assert!(internal.header("idempotency-intent").is_none());
    }
    assert_eq!(counts.get("search"), 2);
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn detached_executions_can_be_awaited_at_shutdown() {
    let layer = IdempotencyLayer::new().deadline(Duration::ZERO);
    let executions = layer.detached();
    let (client, counts) = start(layer).await;
    let answer = client.post("/tools/echo", "s", r#"{"delay_ms":300}"#).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert_eq!(executions.len(), 1);
    executions.wait().await;
    assert!(executions.is_empty());
    assert_eq!(counts.get("echo"), 1);
    assert!(client
        .post("/tools/echo", "s", r#"{"delay_ms":300}"#)
        .await
        .replayed());
}

#[tokio::test]
async fn a_duplicate_that_disconnects_while_waiting_changes_nothing() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let body = r#"{"delay_ms":400}"#;
    let (first, gone) = tokio::join!(client.post("/tools/echo", "s", body), async {
        counts.reached("echo", 1).await;
        let patience = Duration::from_millis(100);
        client
            .post_giving_up("/tools/echo", "s", body, patience)
            .await
    });
    assert!(gone.is_err(), "the duplicate gave up while it waited");
    assert_eq!(
        first.status,
        StatusCode::CREATED,
        "the first caller still gets its result"
    );
    let retry = client.post("/tools/echo", "s", body).await;
    assert!(retry.replayed());
    assert_eq!(counts.get("echo"), 1);
}
