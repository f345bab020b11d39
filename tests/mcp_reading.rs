//! What the MCP layer reads of a POST, over real HTTP on loopback: a body it cannot read as
//! one JSON document, or one that names a member twice, is answered by the layer and never
//! reaches the server, however the message is spelt; a `tools/call` spelt with escapes is
//! protected like any other; a cancellation reaches the server only for a request still open
//! through this instance.
#![cfg(feature = "mcp")]

mod support;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use support::{serve, Client, Counts};
use tower_idempotency::IdempotencyLayer;

/// A JSON-RPC server that counts every POST reaching it (`reached`) before it reads it, so
/// that a body a more lenient parser would run counts even though this one cannot read it;
/// then each message by its method (and tool). A message whose params ask to `hold` answers
/// only once a cancellation has reached the server: its request stays open until then.
async fn server(State(counts): State<Counts>, body: Bytes) -> Response {
    counts.bump("reached");
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    };
    let method = message["method"].as_str().unwrap_or_default();
    let params = &message["params"];
    let n = match params["name"].as_str() {
        Some(tool) if method == "tools/call" => counts.bump(&format!("{method} {tool}")),
        _ => counts.bump(method),
    };
    if params["hold"] == true {
        counts.reached("notifications/cancelled", 1).await;
    }
    match message.get("id") {
        Some(id) => Json(json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("run {n}")}]
        }}))
        .into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// The server behind the MCP layer at its defaults, on loopback.
async fn start() -> (Client, Counts) {
    let counts = Counts::default();
    let app = Router::new()
        .route("/mcp", post(server))
        .with_state(counts.clone())
        .layer(IdempotencyLayer::new().mcp());
    (Client::new(serve(app).await), counts)
}

/// POSTs `body` in the handshake-era session `s1`.
async fn send(client: &Client, body: impl Into<reqwest::Body>) -> support::Answer {
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", "s1"),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    client.post_with("/mcp", &headers, body).await
}

/// Checks that `answer` is the layer's JSON-RPC error `code` saying nothing was executed.
fn refused_with(answer: &support::Answer, code: i64, what: &str) {
    let message = answer.json();
    assert_eq!(message["jsonrpc"], "2.0", "{what}: {message}");
    assert_eq!(message["error"]["code"], code, "{what}: {message}");
    assert_eq!(
        message["error"]["data"]["outcome"], "not_executed",
        "{what}: {message}"
    );
    let words = message["error"]["message"].as_str().unwrap_or_default();
    assert!(words.starts_with("Nothing was executed"), "{what}: {words}");
}

#[tokio::test]
async fn an_escaped_tools_call_with_a_lone_surrogate_is_a_parse_error_and_never_reaches_the_server()
{
    let (client, counts) = start().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t","arguments":{"s":"\ud83d"}}}"#;
    for attempt in 0..2 {
        let answer = send(&client, body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "attempt {attempt}");
        assert_eq!(answer.json()["id"], Value::Null);
        refused_with(&answer, -32700, "a lone surrogate");
        let words = answer.json()["error"]["message"].to_string();
        assert!(words.contains("lone surrogate"), "{words}");
    }
    assert_eq!(counts.get("reached"), 0, "{:?}", counts.all());
}

#[tokio::test]
async fn a_body_that_is_not_one_json_document_is_a_parse_error_and_never_reaches_the_server() {
    let (client, counts) = start().await;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"send_email","arguments":{"to":"a@example.com"}}}"#;
    let truncated = call.as_bytes()[..call.len() - 3].to_vec();
    let trailing = format!("{call} x").into_bytes();
    let mut invalid_utf8 = call.replace("a@example.com", "a@example.co").into_bytes();
    let at = invalid_utf8.len() - 5;
    invalid_utf8.insert(at, 0xff);
    let not_json = b"{not json".to_vec();
    for (what, body) in [
        ("a truncated document", truncated),
        ("trailing characters", trailing),
        ("invalid UTF-8", invalid_utf8),
        ("not JSON at all", not_json),
    ] {
        let answer = send(&client, body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{what}");
        assert_eq!(answer.json()["id"], Value::Null, "{what}");
        refused_with(&answer, -32700, what);
    }
    assert_eq!(counts.get("reached"), 0, "{:?}", counts.all());
}

#[tokio::test]
async fn a_message_that_names_a_member_twice_is_refused_as_ambiguous_and_never_reaches_the_server()
{
    let (client, counts) = start().await;
    let args = r#"{"to":"a@example.com"}"#;
    let cases = [
        (
            "method, the tool call last",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call","params":{{"name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "method, the tool call first",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","method":"tools/list","params":{{"name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "jsonrpc",
            format!(
                r#"{{"jsonrpc":"2.0","jsonrpc":"1.0","id":3,"method":"tools/call","params":{{"name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "id",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"id":4,"method":"tools/call","params":{{"name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "params",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"search"}},"params":{{"name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "name",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"search","name":"send_email","arguments":{args}}}}}"#
            ),
        ),
        (
            "arguments",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"send_email","arguments":{{}},"arguments":{args}}}}}"#
            ),
        ),
        (
            "a member of a message the layer passes on",
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"a","uri":"b"}}"#
                .to_owned(),
        ),
    ];
    for (what, body) in cases {
        let answer = send(&client, body).await;
        refused_with(&answer, -32600, what);
        let words = answer.json()["error"]["message"].to_string();
        assert!(words.contains("twice"), "{what}: {words}");
    }
    assert_eq!(counts.get("reached"), 0, "{:?}", counts.all());
}

#[tokio::test]
async fn a_tools_call_spelt_with_escapes_is_protected_and_its_repeat_replayed() {
    let (client, counts) = start().await;
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools\/call","params":{{"name":"send\u005femail","arguments":{{"to":"a@example.com"}}}}}}"#
        )
    };
    let first = send(&client, call(5)).await;
    let repeat = send(&client, call(6)).await;
    for (answer, id) in [(&first, 5), (&repeat, 6)] {
        let message = answer.json();
        assert_eq!(message["id"], id, "{message}");
        let content = message["result"]["content"].as_array().cloned();
        let last = content.and_then(|c| c.last().cloned()).unwrap_or_default();
        assert_eq!(last["text"], "run 1", "{message}");
    }
    assert!(repeat.replayed(), "the repeat is a replay");
    assert_eq!(counts.get("tools/call send_email"), 1, "{:?}", counts.all());
}

#[tokio::test]
async fn a_cancellation_reaches_the_server_only_while_its_request_is_open_through_the_layer() {
    let (client, counts) = start().await;
    let cancel = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        )
    };
    // A request forwarded and answered: no longer open, so its cancellation stays here.
    let ping = send(&client, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await;
    assert_eq!(ping.json()["id"], 7);
    let answer = send(&client, cancel(7)).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert_eq!(counts.get("notifications/cancelled"), 0, "answered request");
    // Nor for an id this instance never relayed.
    let answer = send(&client, cancel(70)).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert_eq!(counts.get("notifications/cancelled"), 0, "unknown request");
    // A request still open through the layer: its cancellation is the server's.
    let slow =
        r#"{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"a","hold":true}}"#;
    let cancelling = async {
        counts.reached("resources/read", 1).await;
        send(&client, cancel(8)).await
    };
    let (read, cancelled) = tokio::join!(send(&client, slow), cancelling);
    assert_eq!(read.json()["id"], 8);
    assert_eq!(cancelled.status, StatusCode::ACCEPTED);
    assert_eq!(counts.get("notifications/cancelled"), 1, "open request");
    // Once answered, it is closed.
    send(&client, cancel(8)).await;
    assert_eq!(counts.get("notifications/cancelled"), 1, "answered since");
}
