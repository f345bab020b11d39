//! The contract layer: arguments that break the schema are refused before the idempotency
//! store or the tool sees them.
#![cfg(feature = "contract")]

mod support;

use axum::http::{Method, StatusCode};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;
use support::{serve, tools, Client, Counts};
use tower::ServiceBuilder;
use tower_idempotency::contract::ContractLayer;
use tower_idempotency::IdempotencyLayer;

fn contracts() -> ContractLayer {
    ContractLayer::new()
        .operation(
            Method::POST,
            "/tools/echo",
            "echo/v2",
            &json!({
                "type": "object",
                "required": ["to", "subject"],
                "properties": {
                    "to": { "type": "string", "format": "email" },
                    "subject": { "type": "string", "maxLength": 20 }
                },
                "additionalProperties": false
            }),
        )
        .unwrap()
}

async fn start() -> (Client, Counts) {
    let counts = Counts::default();
    let stack = ServiceBuilder::new()
        .layer(contracts())
        .layer(IdempotencyLayer::new());
    let base = serve(tools(counts.clone()).layer(stack)).await;
    (Client::new(base), counts)
}

#[tokio::test]
async fn invalid_arguments_get_422_and_never_run_or_claim() {
    let (client, counts) = start().await;
    let cases = [
        (r#"{"to":"not-an-address","subject":"hi"}"#, "format", "/to"),
        (r#"{"to":"a@example.com"}"#, "required", "/subject"),
        (r#"{"to":"a@example.com","subject":7}"#, "type", "/subject"),
        (
            r#"{"to":"a@example.com","subject":"hi","cc":"x"}"#,
            "additional_properties",
            "",
        ),
        (
            r#"{"to":"a@example.com","subject":"a subject far too long"}"#,
            "length",
            "/subject",
        ),
        ("not json", "not_json", ""),
    ];
    for (body, reason, field) in cases {
        let answer = client.post("/tools/echo", "s", body).await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
        assert!(
            answer.header("idempotency-intent").is_none(),
            "no intent was claimed"
        );
        let problem = answer.json();
        assert_eq!(problem["outcome"], "invalid");
        assert_eq!(problem["retryable"], false);
        assert_eq!(problem["reason"], reason, "{body}");
        assert_eq!(problem["field"], field, "{body}");
        assert_eq!(problem["schema_version"], "echo/v2");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("The action was not executed"),
            "{detail}"
        );
    }
    assert_eq!(counts.get("echo"), 0);
}

#[tokio::test]
async fn valid_arguments_pass_through_to_the_idempotency_layer() {
    let (client, counts) = start().await;
    let body = r#"{"to":"a@example.com","subject":"hi"}"#;
    let first = client.post("/tools/echo", "s", body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(
        first.json()["echo"]["to"],
        "a@example.com",
        "the tool got the body"
    );
    assert!(client.post("/tools/echo", "s", body).await.replayed());
    // Operations without a contract are not touched.
    assert_eq!(
        client.post("/tools/raw", "s", "anything").await.status,
        StatusCode::OK
    );
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn refusals_are_counted_as_rejected_by_schema() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (client, _) = start().await;
    client.post("/tools/echo", "s", r#"{"to":"x"}"#).await;
    let rejected: u64 = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "idempotency_rejected_by_schema_total")
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(rejected, 1);
}

#[test]
fn a_schema_that_does_not_compile_is_an_error() {
    let broken =
        ContractLayer::new().operation(Method::POST, "/x", "v1", &json!({ "type": "not-a-type" }));
    assert!(broken.is_err());
}
