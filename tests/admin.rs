//! The admin operations as an axum app mounts them (`Admin::service` under `/admin`): behind
//! the bearer token, they list what a call left, show an intent's story, release it so that it
//! runs again, and purge one caller's records.

mod support;

use axum::http::StatusCode;
use serde_json::Value;
use support::{tools, Answer, Client, Counts};
use tower_idempotency::IdempotencyLayer;

const TOKEN: &str = "a-long-random-token-of-the-apps";

/// The test tools behind `layer`, with its admin operations mounted under `/admin`.
fn mounted(layer: IdempotencyLayer) -> (Client, Counts) {
    let counts = Counts::default();
    let app = tools(counts.clone())
        .layer(layer.clone())
        .nest_service("/admin", layer.admin().service(TOKEN));
    (Client::in_memory(app), counts)
}

async fn admin(client: &Client, path: &str, token: Option<&str>, body: Option<&str>) -> Answer {
    let method = match body {
        Some(_) => axum::http::Method::POST,
        None => axum::http::Method::GET,
    };
    admin_request(client, method, path, token, body).await
}

/// An admin request with the token and `method`, carrying `body` as JSON.
async fn admin_with(client: &Client, method: &str, path: &str, body: &str) -> Answer {
    let method = axum::http::Method::from_bytes(method.as_bytes()).unwrap();
    admin_request(client, method, path, Some(TOKEN), Some(body)).await
}

/// An admin request with `method`, carrying `token` and a JSON `body` where there are some.
async fn admin_request(
    client: &Client,
    method: axum::http::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let url = format!("{}/admin{path}", client.base);
    let mut request = client.http.request(method, url);
    if let Some(body) = body {
        request = (request.header("content-type", "application/json")).body(body.to_owned());
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    client.send(request).await
}

#[tokio::test]
async fn an_app_mounts_the_admin_operations_behind_its_token() {
    let (client, counts) = mounted(IdempotencyLayer::new());
    let first = client.post("/tools/echo", "s", r#"{"a":1}"#).await;
    assert_eq!(first.status, StatusCode::CREATED);

    let refused = admin(&client, "/records", Some("a guess"), None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));

    let listing = admin(
        &client,
        "/records?outcome=kept&bodies=true",
        Some(TOKEN),
        None,
    )
    .await;
    let records: Vec<Value> = listing.json()["records"].as_array().cloned().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["intent"], first.intent());
    assert_eq!(records[0]["operation"], "POST /tools/echo");
    assert!(records[0]["body"].as_str().unwrap().contains("\"a\":1"));

    let record = format!("/records/{}", first.intent());
    let confirm = format!(r#"{{"confirm": "{}"}}"#, first.intent());
    let removed = admin_with(&client, "DELETE", &record, &confirm).await;
    assert_eq!(removed.json()["removed"], "kept");
    let again = client.post("/tools/echo", "s", r#"{"a":1}"#).await;
    assert!(!again.replayed(), "removed, the call runs again");
    assert_eq!(counts.get("echo"), 2);

    client.post("/tools/echo", "other", r#"{"a":1}"#).await;
    let purge = r#"{"scope": "s"}"#;
    let purged = admin(&client, "/scopes/purge", Some(TOKEN), Some(purge)).await;
    assert_eq!(purged.json()["removed"], 1, "{}", purged.text());
    let left = admin(&client, "/records", Some(TOKEN), None).await;
    assert_eq!(left.json()["records"].as_array().unwrap().len(), 1);
    let unknown = admin(&client, "/records?outcome=sideways", Some(TOKEN), None).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn an_execution_abandoned_at_its_bound_is_listed_unknown_and_released_runs_once_more() {
    let (client, counts) =
        mounted(IdempotencyLayer::new().max_execution(std::time::Duration::from_millis(100)));
    let slow = r#"{"delay_ms":1000}"#;
    let abandoned = client.post("/tools/echo", "s", slow).await;
    assert_eq!(abandoned.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(abandoned.json()["outcome"], "unknown");

    let listing = admin(&client, "/records?outcome=unknown", Some(TOKEN), None).await;
    let records: Vec<Value> = listing.json()["records"].as_array().cloned().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["intent"], abandoned.intent());
    assert_eq!(records[0]["status"], 504);

    // Never run again by itself; released by the operator, its retry runs once.
    client.post("/tools/echo", "s", slow).await;
    assert_eq!(counts.get("echo"), 1);
    let resolve = format!("/records/{}/resolve", abandoned.intent());
    admin(&client, &resolve, Some(TOKEN), Some(r#"{"ran": false}"#)).await;
    client.post("/tools/echo", "s", slow).await;
    assert_eq!(counts.get("echo"), 2, "the retry ran, once");
    let kept = admin(&client, "/records?outcome=unknown", Some(TOKEN), None).await;
    assert_eq!(
        kept.json()["records"].as_array().unwrap().len(),
        1,
        "abandoned again"
    );
}

#[tokio::test]
async fn resolving_a_known_outcome_is_refused_and_the_record_is_left_as_it_was() {
    let (client, counts) = mounted(IdempotencyLayer::new());
    let paid = client.post("/tools/echo", "s", r#"{"pay":10}"#).await;
    assert_eq!(paid.status, StatusCode::CREATED);
    let resolve = format!("/records/{}/resolve", paid.intent());
    for resolution in [r#"{"ran": false}"#, r#"{"ran": true, "note": "x"}"#] {
        let refused = admin_with(&client, "POST", &resolve, resolution).await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
        let said = refused.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(said.contains("kept"), "{said}");
        assert!(said.contains("DELETE"), "{said}");
    }
    let repeat = client.post("/tools/echo", "s", r#"{"pay":10}"#).await;
    assert!(repeat.replayed(), "the kept answer stands");
    assert_eq!(repeat.body, paid.body, "byte for byte");
    assert_eq!(counts.get("echo"), 1);

    // A failed attempt is not the operator's to resolve either.
    let failed = client.post("/tools/status/503", "s", "{}").await;
    let resolve = format!("/records/{}/resolve", failed.intent());
    let refused = admin_with(&client, "POST", &resolve, r#"{"ran": true}"#).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
    assert!(refused.text().contains("failed"), "{}", refused.text());
}

#[tokio::test]
async fn a_known_outcome_is_removed_only_on_purpose_naming_its_intent() {
    let (client, counts) = mounted(IdempotencyLayer::new());
    let paid = client.post("/tools/echo", "s", r#"{"pay":10}"#).await;
    let record = format!("/records/{}", paid.intent());
    let unconfirmed = admin_with(&client, "DELETE", &record, "{}").await;
    assert_eq!(unconfirmed.status, StatusCode::BAD_REQUEST);
    let other = format!(r#"{{"confirm": "{}"}}"#, "0".repeat(64));
    let mistaken = admin_with(&client, "DELETE", &record, &other).await;
    assert_eq!(mistaken.status, StatusCode::BAD_REQUEST);
    assert!(client
        .post("/tools/echo", "s", r#"{"pay":10}"#)
        .await
        .replayed());
    let confirm = format!(r#"{{"confirm": "{}"}}"#, paid.intent());
    let removed = admin_with(&client, "DELETE", &record, &confirm).await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.text());
    assert_eq!(removed.json()["removed"], "kept");
    let again = client.post("/tools/echo", "s", r#"{"pay":10}"#).await;
    assert!(!again.replayed(), "removed on purpose, the call runs again");
    assert_eq!(counts.get("echo"), 2);
}

#[tokio::test]
async fn a_purge_of_a_credential_removes_its_records_and_failures_in_every_session() {
    let (client, _) = mounted(IdempotencyLayer::new());
    let call = |token: &'static str, session: &'static str, path: &'static str| {
        let client = &client;
        async move {
            let headers = [
                ("authorization", token),
                ("x-session-id", session),
                ("content-type", "application/json"),
            ];
            client.post_with(path, &headers, "{}").await
        }
    };
    call("Bearer A", "s1", "/tools/echo").await;
    call("Bearer A", "s2", "/tools/status/503").await;
    call("Bearer A", "s3", "/tools/echo").await;
    call("Bearer B", "s1", "/tools/echo").await;
    let purge = r#"{"credential": "Bearer A"}"#;
    let purged = admin_with(&client, "POST", "/scopes/purge", purge).await;
    assert_eq!(purged.status, StatusCode::OK, "{}", purged.text());
    let told = purged.json();
    assert_eq!(
        (told["records"].clone(), told["failures"].clone()),
        (Value::from(2), Value::from(1)),
        "{told}"
    );
    assert!(!call("Bearer A", "s1", "/tools/echo").await.replayed());
    assert!(call("Bearer B", "s1", "/tools/echo").await.replayed());
}

/// The events of the intent's story as `GET /admin/records/{intent}` shows it, each with its
/// status where it has one; and the story itself.
async fn story(client: &Client, intent: &str) -> (Vec<(String, Option<u64>)>, Vec<Value>) {
    let shown = admin(client, &format!("/records/{intent}"), Some(TOKEN), None).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text());
    let history = shown.json()["history"].as_array().cloned().unwrap();
    let events = history
        .iter()
        .map(|t| {
            (
                t["event"].as_str().unwrap().to_owned(),
                t["status"].as_u64(),
            )
        })
        .collect();
    (events, history)
}

#[tokio::test(start_paused = true)]
async fn an_intents_story_lists_its_failure_its_retry_and_its_success_in_order_but_no_replay() {
    let (client, counts) = mounted(IdempotencyLayer::new());
    let call = r#"{"to":"ops@example.com"}"#;
    let failed = client.post("/tools/flaky", "s", call).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    // After one failure the retry runs at once, and fails too.
    let retried = client.post("/tools/flaky", "s", call).await;
    assert_eq!(retried.status, StatusCode::SERVICE_UNAVAILABLE);
    // Past the wait two failures in a row set (1 s), the tool has recovered.
    counts.set_flaky(false);
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    let succeeded = client.post("/tools/flaky", "s", call).await;
    assert_eq!(succeeded.status, StatusCode::OK, "{}", succeeded.text());
    let replayed = client.post("/tools/flaky", "s", call).await;
    assert!(replayed.replayed(), "{}", replayed.text());
    assert_eq!(counts.get("flaky"), 3);

    let (events, history) = story(&client, succeeded.intent()).await;
    let expected = [
        ("claimed", None),
        ("released", Some(503)),
        ("claimed", None),
        ("released", Some(503)),
        ("claimed", None),
        ("executed", Some(200)),
    ];
    let expected: Vec<(String, Option<u64>)> = (expected.iter())
        .map(|(event, status)| ((*event).to_owned(), *status))
        .collect();
    assert_eq!(events, expected, "the replay is not written: {history:?}");
    assert_eq!(history[1]["cause"], "status");
    let times: Vec<u64> = history
        .iter()
        .map(|t| t["at_ms"].as_u64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "in order: {times:?}"
    );
    assert!(
        times[4] >= times[3] + 1000,
        "the success came after the wait: {times:?}"
    );
    for ended in [&history[1], &history[3], &history[5]] {
        assert!(ended["duration_ms"].is_u64(), "{ended}");
    }
    let instance = history[0]["instance"].as_str().unwrap();
    assert_eq!(instance.len(), 8, "{instance}");
    assert!(
        history.iter().all(|t| t["instance"] == instance),
        "one process ran every step: {history:?}"
    );

    // A listing stays short: the story is shown for one intent.
    let listing = admin(&client, "/records", Some(TOKEN), None).await;
    assert!(listing.json()["records"][0].get("history").is_none());
}

#[tokio::test(start_paused = true)]
async fn an_operators_resolution_is_the_last_step_of_the_story_with_its_note() {
    let (client, _) =
        mounted(IdempotencyLayer::new().max_execution(std::time::Duration::from_millis(100)));
    let abandoned = client
        .post("/tools/echo", "s", r#"{"delay_ms":1000}"#)
        .await;
    assert_eq!(abandoned.json()["outcome"], "unknown");
    let resolve = format!("/records/{}/resolve", abandoned.intent());
    let ran = r#"{"ran": true, "note": "INC-7: the row is there"}"#;
    let resolved = admin(&client, &resolve, Some(TOKEN), Some(ran)).await;
    assert_eq!(resolved.status, StatusCode::OK, "{}", resolved.text());

    let (events, history) = story(&client, abandoned.intent()).await;
    let events: Vec<&str> = events.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(events, ["claimed", "abandoned", "resolved"], "{history:?}");
    assert_eq!(history[1]["duration_ms"], 100, "{history:?}");
    assert_eq!(history[2]["note"], "INC-7: the row is there");
}
