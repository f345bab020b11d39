//! `Mcp-Param-*` headers (2026-07-28): before the layer answers a call for the server, each
//! header the tool's `inputSchema` declares (`x-mcp-header`) is checked as the server checks
//! it, against the `mcp_server` example, whose `regional_send` repeats its `region` argument
//! in `Mcp-Param-Region`.
#![cfg(feature = "mcp")]

mod support;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::{Json, Router};
use serde_json::{json, Value};
use support::gateway::{start_example, Gateway};
use support::{serve, Client, Counts};
use tower_idempotency::IdempotencyLayer;

const VERSION: &str = "2026-07-28";

fn start() -> Gateway {
    start_example("mcp_server", &[("DEADLINE_MS", "300")])
}

async fn stats(server: &Gateway) -> Value {
    let root = server.client.base.trim_end_matches("/mcp");
    let response = server.client.http.get(format!("{root}/stats")).send();
    response.await.unwrap().json().await.unwrap()
}

/// One POST of `message` with the routing headers a 2026-07-28 client sends for it, and
/// `extra`; the HTTP status and the answer.
async fn post(client: &Client, message: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut request = client
        .http
        .post(&client.base)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", message["method"].as_str().unwrap())
        .header("authorization", "Bearer t");
    if let Some(name) = message["params"]["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.body(message.to_string()).send().await.unwrap();
    support::json_rpc_answer(response).await
}

fn request(id: u32, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn regional(id: u32, region: &str) -> Value {
    let arguments = json!({"to": "ada@example.com", "region": region});
    request(
        id,
        "tools/call",
        json!({"name": "regional_send", "arguments": arguments}),
    )
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// Asserts the server's refusal of a header: HTTP 400 and `HeaderMismatch`, no result.
fn assert_mismatch(what: &str, (status, answer): (u16, Value)) {
    assert_eq!(status, 400, "{what}: {answer}");
    assert_eq!(answer["error"]["code"], -32020, "{what}: {answer}");
    assert!(answer.get("result").is_none(), "{what}: {answer}");
}

/// The headers that disagree with `region: "eu"`, or that no server reads as any value.
const WRONG: [(&str, &str); 4] = [
    ("another region", "us"),
    ("base64 without its padding", "=?base64?ZXU?="),
    (
        "base64 with a character outside its alphabet",
        "=?base64?ZX!U?=",
    ),
    ("base64 of bytes that are not UTF-8", "=?base64?/w==?="),
];

#[tokio::test]
async fn a_param_header_that_disagrees_with_its_argument_is_refused_and_never_answered_with_the_kept_result(
) {
    let server = start();
    // No `tools/list` went through the layer: it learns the tool's headers by itself.
    let (status, ran) = post(
        &server.client,
        &regional(1, "eu"),
        &[("mcp-param-region", "eu")],
    )
    .await;
    assert_eq!(status, 200, "{ran}");
    assert!(text(&ran).starts_with("Sent e-mail #1"), "{ran}");
    for (id, (what, value)) in (2..).zip(WRONG) {
        let sent = post(
            &server.client,
            &regional(id, "eu"),
            &[("mcp-param-region", value)],
        )
        .await;
        assert_mismatch(what, sent);
    }
    assert_mismatch(
        "no header",
        post(&server.client, &regional(8, "eu"), &[]).await,
    );
    let twice = [("mcp-param-region", "eu"), ("mcp-param-region", "eu")];
    assert_mismatch(
        "two headers",
        post(&server.client, &regional(9, "eu"), &twice).await,
    );
    // The same value, base64-encoded as a client may send any value: the kept result.
    let encoded = [("mcp-param-region", "=?base64?ZXU=?=")];
    let (status, replay) = post(&server.client, &regional(10, "eu"), &encoded).await;
    assert_eq!(status, 200, "{replay}");
    assert!(
        text(&replay).starts_with("This exact call already ran"),
        "{replay}"
    );
    let kept = replay["result"]["content"].to_string();
    assert!(
        kept.contains("Sent e-mail #1 to ada@example.com from eu"),
        "{replay}"
    );
    assert_eq!(stats(&server).await["regional_send"], 1);
}

#[tokio::test]
async fn a_param_header_is_checked_on_a_first_call_too_and_one_no_tool_declares_is_left_alone() {
    let server = start();
    let (status, listed) = post(&server.client, &request(1, "tools/list", json!({})), &[]).await;
    assert_eq!(status, 200, "{listed}");
    let schema = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "regional_send")
        .map(|tool| tool["inputSchema"].clone())
        .unwrap();
    assert_eq!(
        schema["properties"]["region"]["x-mcp-header"], "Region",
        "{schema}"
    );
    // Refused before anything runs, as the server refuses it.
    let wrong = [("mcp-param-region", "us")];
    assert_mismatch(
        "first call",
        post(&server.client, &regional(2, "eu"), &wrong).await,
    );
    assert_eq!(stats(&server).await["regional_send"], 0);
    // Header names are told apart case-insensitively; the value is compared as sent.
    let right = [("MCP-PARAM-REGION", "eu")];
    let (status, ran) = post(&server.client, &regional(3, "eu"), &right).await;
    assert_eq!(status, 200, "{ran}");
    assert!(text(&ran).starts_with("Sent e-mail #1"), "{ran}");
    // A header no tool declares is not the server's to check: the replay is given.
    let email = json!({"to": "ada@example.com", "subject": "Hi", "body": "Hello"});
    let call = request(
        4,
        "tools/call",
        json!({"name": "send_email", "arguments": email}),
    );
    let (_, first) = post(&server.client, &call, &[]).await;
    assert!(text(&first).starts_with("Sent e-mail #1"), "{first}");
    let stray = [("mcp-param-region", "=?base64?not base64?=")];
    let (status, replay) = post(&server.client, &call, &stray).await;
    assert_eq!(status, 200, "{replay}");
    assert!(
        text(&replay).starts_with("This exact call already ran"),
        "{replay}"
    );
    assert_eq!(stats(&server).await["regional_send"], 1);
    assert_eq!(stats(&server).await["send_email"], 1);
}

/// A server that will not list its tools (500), and whose tool `pay` counts its calls.
async fn unlisting(State(counts): State<Counts>, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap();
    if message["method"] != "tools/call" {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let n = counts.bump("pay");
    let content = json!([{"type": "text", "text": format!("paid #{n}")}]);
    let result = json!({"content": content, "resultType": "complete"});
    Json(json!({"jsonrpc": "2.0", "id": message["id"], "result": result})).into_response()
}

#[tokio::test]
async fn a_call_whose_headers_cannot_be_checked_is_still_protected_and_runs_once() {
    // The layer cannot learn what the tool declares: only the server can check its headers,
    // and it does on the call that runs; a repeat never runs the action again for it.
    let counts = Counts::default();
    let app = Router::new()
        .route("/mcp", route_post(unlisting))
        .with_state(counts.clone())
        .layer(IdempotencyLayer::new().mcp());
    let client = Client::new(format!("{}/mcp", serve(app).await));
    for id in [1, 2] {
        let call = request(
            id,
            "tools/call",
            json!({"name": "pay", "arguments": {"cents": 10}}),
        );
        let (status, answer) = post(&client, &call, &[]).await;
        assert_eq!(status, 200, "{answer}");
    }
    assert_eq!(
        counts.get("pay"),
        1,
        "the repeat is answered, not run again"
    );
}
