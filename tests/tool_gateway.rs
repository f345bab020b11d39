//! The contract of `examples/tool_gateway.rs`, checked against the built example as a user
//! would run it: a child process on a free loopback port, driven over HTTP.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::gateway::start;
use support::process::eventually;
use support::Client;

async fn stats(client: &Client) -> Value {
    client.get("/stats", None).await.json()
}

#[tokio::test]
async fn the_gateway_runs_each_tool_once_per_intent() {
    let gateway = start(&[]);
    let c = &gateway.client;

    let email = r#"{"to":"a@example.com","subject":"hi","body":"x","tool_call_id":"call_1"}"#;
    let sent = c.post("/tools/send_email", "s1", email).await;
    assert_eq!(sent.status, StatusCode::OK);
    assert_eq!(sent.json(), json!({"status":"sent","message_id":"msg_1"}));
    let retry = r#"{"body":"x","subject":"hi","to":"a@example.com","tool_call_id":"call_2"}"#;
    let replay = c.post("/tools/send_email", "s1", retry).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, sent.body);

    let record = c
        .post("/tools/create_record", "s1", r#"{"name":"x"}"#)
        .await;
    assert_eq!(record.status, StatusCode::CREATED);
    assert_eq!(record.json(), json!({"id":"rec_1","echo":{"name":"x"}}));

    let report = c
        .post(
            "/tools/generate_report",
            "s1",
            r#"{"topic":"q3","seconds":0}"#,
        )
        .await;
    assert_eq!(report.json(), json!({"status":"done","report_id":"rep_1"}));

    let flaky = r#"{"fail_times":2}"#;
    assert_eq!(
        c.post("/tools/flaky", "s1", flaky).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        c.post("/tools/flaky", "s1", flaky).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Two failures in a row: the retry budget holds a third attempt back for a second, and
    // runs it after.
    let held = c.post("/tools/flaky", "s1", flaky).await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(held.header("retry-after"), Some("1"));
    let ok = eventually("the third attempt runs", Duration::from_secs(5), || async {
        let answer = c.post("/tools/flaky", "s1", flaky).await;
        (answer.status != StatusCode::TOO_MANY_REQUESTS).then_some(answer)
    })
    .await;
    assert_eq!(ok.json(), json!({"status":"ok","attempt":3}));
    assert!(c.post("/tools/flaky", "s1", flaky).await.replayed());

    let rejected = c.post("/tools/reject", "s1", "{}").await;
    assert_eq!(rejected.status, StatusCode::BAD_REQUEST);
    assert_eq!(rejected.json(), json!({"error":"invalid input"}));
    assert!(c.post("/tools/reject", "s1", "{}").await.replayed());

    for _ in 0..2 {
        assert_eq!(
            c.get("/tools/search?q=x", None).await.status,
            StatusCode::OK
        );
    }
    assert_eq!(
        stats(c).await,
        json!({"send_email":1,"create_record":1,"generate_report":1,"flaky":3,"reject":1,"search":2})
    );
}

#[tokio::test]
async fn the_gateway_honours_idempotency_keys_sessions_and_the_deadline() {
    let gateway = start(&[("DEADLINE_MS", "200")]);
    let c = &gateway.client;
    let keyed = |body: &'static str| {
        c.post_with(
            "/tools/create_record",
            &[
                ("x-session-id", "s1"),
                ("idempotency-key", "k-1"),
                ("content-type", "application/json"),
            ],
            body,
        )
    };
    assert_eq!(keyed(r#"{"a":1}"#).await.status, StatusCode::CREATED);
    assert_eq!(
        keyed(r#"{"a":2}"#).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );

    let anonymous = c.post_with("/tools/create_record", &[], "{}").await;
    assert_eq!(anonymous.status, StatusCode::BAD_REQUEST);

    let slow = r#"{"topic":"q4","seconds":0.6}"#;
    let first = c.post("/tools/generate_report", "s1", slow).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let url = first.header("location").unwrap().to_owned();
    assert!(url.starts_with("/_idempotency/"));
    let done = eventually("the report done", Duration::from_secs(10), || async {
        let asked = c.get(&url, Some("s1")).await;
        (asked.status != StatusCode::ACCEPTED).then_some(asked)
    })
    .await;
    assert_eq!(done.json(), json!({"status":"done","report_id":"rep_1"}));
    assert_eq!(stats(c).await["generate_report"], 1);
}

#[tokio::test]
async fn with_idempotency_off_every_call_runs() {
    let gateway = start(&[("IDEMPOTENCY", "off")]);
    let c = &gateway.client;
    let email = r#"{"to":"a@example.com","subject":"hi","body":"x"}"#;
    let first = c.post("/tools/send_email", "s1", email).await;
    let second = c.post("/tools/send_email", "s1", email).await;
    assert!(first.header("idempotency-intent").is_none());
    assert_eq!(second.json()["message_id"], "msg_2");
    assert_eq!(stats(c).await["send_email"], 2);
}

#[tokio::test]
async fn behind_an_authenticating_proxy_the_principal_scopes_and_the_session_only_narrows() {
    let gateway = start(&[("PRINCIPAL_HEADER", "x-user")]);
    let c = &gateway.client;
    let email = r#"{"to":"p@example.com","subject":"hi","body":"x"}"#;
    let as_user = |user: &'static str, session: Option<&'static str>| async move {
        let mut headers = vec![("content-type", "application/json"), ("x-user", user)];
        if let Some(session) = session {
            headers.push(("x-session-id", session));
        }
        c.post_with("/tools/send_email", &headers, email).await
    };
    let alice = as_user("alice", Some("s1")).await;
    assert_eq!(alice.status, StatusCode::OK);
    // Mallory sends Alice's session id: her own principal still scopes the call.
    let mallory = as_user("mallory", Some("s1")).await;
    assert!(!mallory.replayed());
    assert_ne!(mallory.body, alice.body);
    // Another conversation of Alice's is its own scope; the same one replays.
    assert!(!as_user("alice", Some("s2")).await.replayed());
    assert!(as_user("alice", Some("s1")).await.replayed());
    // No principal: refused, whatever session is sent.
    let anonymous = c
        .post_with(
            "/tools/send_email",
            &[("content-type", "application/json"), ("x-session-id", "s1")],
            email,
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::BAD_REQUEST);
    assert!(anonymous.json()["detail"]
        .as_str()
        .unwrap()
        .contains("x-user"));
    assert_eq!(stats(c).await["send_email"], 3);
}
