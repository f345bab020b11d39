//! Never merge two requests an upstream can tell apart: number kinds, media types, the rules
//! each layer fingerprints by, and bodies whose fields cannot be left out of the key.

mod support;

use axum::http::StatusCode;
use support::{serve, start, tools, Client, Counts};
use tower_idempotency::IdempotencyLayer;

/// Sends each body once to `/tools/echo` as JSON; returns how many ran.
async fn executions(client: &Client, counts: &Counts, bodies: &[&str]) -> usize {
    for body in bodies {
        let answer = client.post("/tools/echo", "s", body).await;
        assert!(answer.status.is_success(), "{body}: {}", answer.status);
    }
    counts.get("echo")
}

#[tokio::test]
async fn an_integer_and_a_number_with_a_fraction_or_exponent_are_two_intents() {
    for pair in [
        [r#"{"n":1}"#, r#"{"n":1.0}"#],
        [r#"{"n":100}"#, r#"{"n":1e2}"#],
        [r#"{"n":0}"#, r#"{"n":-0}"#],
        [r#"{"n":0.0}"#, r#"{"n":-0.0}"#],
        [r#"{"n":0}"#, r#"{"n":0.0}"#],
    ] {
        let (client, counts) = start(IdempotencyLayer::new()).await;
        assert_eq!(executions(&client, &counts, &pair).await, 2, "{pair:?}");
    }
}

#[tokio::test]
async fn numbers_with_a_fraction_or_exponent_follow_rfc_8785_among_themselves() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let spellings = [
        r#"{"n":1.0}"#,
        r#"{"n":1.00}"#,
        r#"{"n":10E-1}"#,
        r#"{"n":0.1e1}"#,
    ];
    assert_eq!(executions(&client, &counts, &spellings).await, 1);
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let big = [r#"{"n":1e21}"#, r#"{"n":1000000000000000000000.0}"#];
    assert_eq!(executions(&client, &counts, &big).await, 1);
}

#[tokio::test]
async fn the_media_type_is_part_of_the_intent_but_its_parameters_are_not() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let body = r#"{"name":"x"}"#;
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/merge-patch+json",
    ] {
        let answer = client
            .post_with(
                "/tools/echo",
                &[("x-session-id", "s"), ("content-type", content_type)],
                body,
            )
            .await;
        assert!(answer.status.is_success(), "{content_type}");
    }
    assert_eq!(counts.get("echo"), 2, "plain JSON once, merge patch once");
}

#[tokio::test]
async fn layers_with_other_rules_never_share_a_recent_fingerprint() {
    let counts = Counts::default();
    let builder = IdempotencyLayer::new();
    // Two layers from one builder: one leaves the call id out of its key, one does not.
    let ignoring = builder.clone().ignore_field("/call");
    let app = tools(counts.clone()).layer(builder);
    let plain = Client::new(serve(app).await);
    let app = tools(counts.clone()).layer(ignoring);
    let ignoring = Client::new(serve(app).await);
    let first = r#"{"to":"a","call":"1"}"#;
    plain.post("/tools/echo", "s", first).await;
    assert_eq!(counts.get("echo"), 1);
    ignoring.post("/tools/echo", "s", first).await;
    let retry = ignoring
        .post("/tools/echo", "s", r#"{"to":"a","call":"2"}"#)
        .await;
    assert!(
        retry.replayed(),
        "the retry with a new call id is the same intent"
    );
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn a_body_whose_ignored_fields_cannot_be_left_out_is_refused_with_nothing_run() {
    let (client, counts) = start(IdempotencyLayer::new().ignore_field("/tool_call_id")).await;
    let deep = format!(
        "{{\"tool_call_id\":\"c1\",\"a\":{}1{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    for body in [
        r#"{"tool_call_id":"c1","to":"a","to":"b"}"#.to_owned(),
        deep,
    ] {
        let answer = client.post("/tools/raw", "s", &body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body:.60}");
        let problem = answer.json();
        assert_eq!(problem["outcome"], "not_executed");
        assert_eq!(problem["retryable"], false);
        assert!(problem["detail"]
            .as_str()
            .unwrap()
            .starts_with("The action was not executed"));
    }
    // Without fields to leave out, such a body still keys by its bytes and runs.
    let (client, counts_raw) = start(IdempotencyLayer::new()).await;
    let answer = client
        .post("/tools/raw", "s", r#"{"to":"a","to":"b"}"#)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!((counts.get("raw"), counts_raw.get("raw")), (0, 1));
}
