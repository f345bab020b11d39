//! The story of DESIGN's first page, in a few seconds: an agent calls a slow `send_email`, its
//! HTTP client times out first, the model reads "error" and calls again.
//!
//! ```text
//! cargo run --example agent_retries
//! ```
//!
//! Run once against the bare tool (every retry sends another email) and once behind
//! `IdempotencyLayer` (one email; the model is told the action is running and gets its result).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use tower_idempotency::IdempotencyLayer;

/// How long the tool takes, and how long the agent's HTTP client waits.
const TOOL_TAKES: Duration = Duration::from_millis(1500);
const CLIENT_TIMEOUT: Duration = Duration::from_millis(1000);
/// The layer answers before the client gives up.
const DEADLINE: Duration = Duration::from_millis(800);
const MAX_ATTEMPTS: usize = 3;

/// The email goes out at once; confirming delivery is what takes time.
async fn send_email(State(sent): State<Arc<AtomicUsize>>, Json(_): Json<Value>) -> Json<Value> {
    let n = sent.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(TOOL_TAKES).await;
    Json(json!({ "status": "sent", "message_id": format!("msg_{n}") }))
}

/// Serves the tool, with or without the layer; returns its URL and its count of emails sent.
async fn serve(with_layer: bool) -> (String, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let tool = Router::new()
        .route("/tools/send_email", post(send_email))
        .with_state(Arc::clone(&sent));
    let app = if with_layer {
        tool.layer(IdempotencyLayer::new().deadline(DEADLINE))
    } else {
        tool
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/tools/send_email", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, sent)
}

fn first_sentence(detail: &str) -> &str {
    detail
        .split_inclusive(". ")
        .next()
        .unwrap_or(detail)
        .trim_end()
}

/// The agent's loop: call, read the answer as a model would, and decide whether to call again.
async fn agent(url: &str) {
    let client = reqwest::Client::builder()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap();
    let email = json!({ "to": "ana@example.com", "subject": "Invoice", "body": "Attached." });
    for attempt in 1..=MAX_ATTEMPTS {
        let sent = client
            .post(url)
            .header("x-session-id", "agent-session-1")
            .json(&email)
            .send()
            .await;
        let response = match sent {
            Err(error) if error.is_timeout() => {
                println!("  attempt {attempt}: error: timed out after {CLIENT_TIMEOUT:?} -> the model calls again");
                continue;
            }
            Err(error) => {
                println!("  attempt {attempt}: error: {error} -> the model calls again");
                continue;
            }
            Ok(response) => response,
        };
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status == reqwest::StatusCode::ACCEPTED {
            let wait = body["retry_after_s"].as_u64().unwrap_or(1);
            let detail = body["detail"].as_str().unwrap_or_default();
            let outcome = body["outcome"].as_str().unwrap_or_default();
            println!(
                "  attempt {attempt}: 202 {outcome}: \"{}\"",
                first_sentence(detail)
            );
            println!(
                "             -> the model waits {wait} s and asks again with the same arguments"
            );
            tokio::time::sleep(Duration::from_secs(wait)).await;
            continue;
        }
        let how = if replayed { " (replayed)" } else { "" };
        println!("  attempt {attempt}: {}{how}: {body}", status.as_u16());
        return;
    }
    println!("  the model gives up after {MAX_ATTEMPTS} attempts");
}

#[tokio::main]
async fn main() {
    println!(
        "send_email takes {TOOL_TAKES:?}; the agent's HTTP client times out after {CLIENT_TIMEOUT:?}.\n"
    );
    println!("Without the layer:");
    let (url, sent) = serve(false).await;
    agent(&url).await;
    tokio::time::sleep(TOOL_TAKES).await;
    let bare = sent.load(Ordering::SeqCst);
    println!("  emails sent: {bare}\n");

    println!("With IdempotencyLayer (deadline {DEADLINE:?}):");
    let (url, sent) = serve(true).await;
    agent(&url).await;
    tokio::time::sleep(TOOL_TAKES).await;
    let layered = sent.load(Ordering::SeqCst);
    println!("  emails sent: {layered}");
}
