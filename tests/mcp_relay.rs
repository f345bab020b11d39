//! What a server says on a protected call's event stream before the answer, relayed by the
//! crate's MCP layer over real HTTP on loopback: a notification and a question of the
//! server's reach the caller as they come; the client's answer to the question (a POST of a
//! JSON-RPC response) reaches the server as it was sent; a caller that takes over from one
//! that closed its stream is asked the question again; the deadline waits while the question
//! does; a caller that takes only JSON gets the answer alone.
#![cfg(feature = "mcp")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use support::{serve, Counts};
use tokio::sync::Notify;
use tower_idempotency::IdempotencyLayer;

/// The server's state: its counts, and the client responses it was sent, in order.
#[derive(Clone, Default)]
struct Server {
    counts: Counts,
    responses: Arc<Mutex<Vec<Value>>>,
    answered: Arc<Notify>,
}

const QUESTION: &str = r#"{"jsonrpc":"2.0","id":"q-1","method":"elicitation/create","params":{"message":"Which word?","requestedSchema":{"type":"object","properties":{"word":{"type":"string"}}}}}"#;

/// A progress notification for the call whose token is `token`.
fn progress(token: &Value, progress: u64) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": token, "progress": progress}})
    .to_string()
}

/// A server whose tool `confirm` sends a progress notification, then asks its client for a
/// word (`q-1`, counted as `asked` once read off its stream), and once the client's response
/// has come sends progress again and answers with the word; other POSTs are kept (responses)
/// and accepted.
async fn server(State(server): State<Server>, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap();
    if message.get("method").is_none() {
        server.responses.lock().unwrap().push(message);
        server.answered.notify_waiters();
        return StatusCode::ACCEPTED.into_response();
    }
    if message["method"] != "tools/call" {
        return StatusCode::ACCEPTED.into_response();
    }
    let n = server.counts.bump("confirm");
    let counts = server.counts.clone();
    let id = message["id"].clone();
    let token = message["params"]["_meta"]["progressToken"].clone();
    let (events, stream) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(8);
    tokio::spawn(async move {
        let event = |data: &str| Ok(Bytes::from(format!("event: message\ndata: {data}\n\n")));
        events.send(event(&progress(&token, 1))).await.unwrap();
        events.send(event(QUESTION)).await.unwrap();
        // The tool waits for its word, whoever listens to its stream.
        let answer = loop {
            let answered = server.answered.notified();
            if let Some(answer) = server.responses.lock().unwrap().first().cloned() {
                break answer;
            }
            answered.await;
        };
        events.send(event(&progress(&token, 2))).await.ok();
        let word = answer["result"]["content"]["word"]
            .as_str()
            .unwrap_or("none");
        let text = format!("run {n} with {word}");
        let result = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
        events.send(event(&result.to_string())).await.ok();
    });
    // Counted once the question is read off the stream: from then on the layer holds it.
    let question = Bytes::from(format!("event: message\ndata: {QUESTION}\n\n"));
    let events = futures_util::StreamExt::inspect(tokio_stream_of(stream), move |event| {
        if event.as_ref().is_ok_and(|event| *event == question) {
            counts.bump("asked");
        }
    });
    let body = Body::from_stream(events);
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn tokio_stream_of<T>(
    mut receiver: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// The server behind the MCP layer with `deadline`, on loopback; its base URL.
async fn start(deadline: Duration) -> (String, Server) {
    let state = Server::default();
    let app = Router::new()
        .route("/mcp", post(server))
        .with_state(state.clone())
        .layer(IdempotencyLayer::new().deadline(deadline).mcp());
    (serve(app).await, state)
}

/// POSTs `body` in session `s1`, taking `accept`; the response, as it streams.
async fn send(base: &str, accept: &str, body: String) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-session-id", "s1")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
        .send()
        .await
        .unwrap()
}

const BOTH: &str = "application/json, text/event-stream";

/// The call, with the progress token `p{id}`.
fn call(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"to": "a@example.com"},
            "_meta": {"progressToken": format!("p{id}")}}})
    .to_string()
}

fn answer_word(word: &str) -> String {
    json!({"jsonrpc": "2.0", "id": "q-1", "result": {"action": "accept", "content": {"word": word}}})
        .to_string()
}

/// The JSON-RPC messages of an event stream's events, read as they come until `until` says.
async fn read_until(
    response: &mut reqwest::Response,
    read: &mut String,
    until: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    loop {
        let messages: Vec<Value> = read
            .split("\n\n")
            .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")))
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect();
        if until(&messages) {
            return messages;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("the next event in time")
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended: {read}"));
        read.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn a_question_reaches_its_caller_as_it_comes_its_answer_the_server_and_the_deadline_waits() {
    let (base, server) = start(Duration::from_millis(200)).await;
    let mut response = send(&base, BOTH, call(1)).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert!(response.headers().contains_key("idempotency-intent"));
    let mut read = String::new();
    let asked = read_until(&mut response, &mut read, |m| m.len() >= 2).await;
    assert_eq!(
        asked[0],
        serde_json::from_str::<Value>(&progress(&json!("p1"), 1)).unwrap()
    );
    assert_eq!(
        asked[1],
        serde_json::from_str::<Value>(QUESTION).unwrap(),
        "with the server's id"
    );
    // The user takes longer than the deadline to answer: the caller is not told "in progress".
    tokio::time::sleep(Duration::from_millis(600)).await;
    let answered = send(&base, BOTH, answer_word("blue")).await;
    assert_eq!(answered.status(), StatusCode::ACCEPTED);
    let messages = read_until(&mut response, &mut read, |m| {
        m.iter().any(|m| m.get("result").is_some())
    })
    .await;
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 1, "{read}");
    assert_eq!(
        last["result"]["content"][0]["text"], "run 1 with blue",
        "{read}"
    );
    assert_eq!(
        server.responses.lock().unwrap()[0],
        serde_json::from_str::<Value>(&answer_word("blue")).unwrap(),
        "the client's answer reached the server as sent"
    );
    assert!(
        response.chunk().await.unwrap().is_none(),
        "ends with the answer"
    );
}

#[tokio::test]
async fn a_caller_that_takes_over_from_one_that_closed_its_stream_is_asked_again_and_given_progress_under_its_own_token(
) {
    let (base, server) = start(Duration::from_secs(5)).await;
    let mut first = send(&base, BOTH, call(1)).await;
    let mut read = String::new();
    read_until(&mut first, &mut read, |m| m.len() >= 2).await;
    drop(first);
    let started = Instant::now();
    let mut retry = send(&base, BOTH, call(2)).await;
    let mut read = String::new();
    let asked = read_until(&mut retry, &mut read, |m| !m.is_empty()).await;
    assert_eq!(
        asked[0],
        serde_json::from_str::<Value>(QUESTION).unwrap(),
        "asked again, with the server's id: {read}"
    );
    assert!(started.elapsed() < Duration::from_secs(1), "at once");
    send(&base, BOTH, answer_word("green")).await;
    let messages = read_until(&mut retry, &mut read, |m| {
        m.iter().any(|m| m.get("result").is_some())
    })
    .await;
    assert_eq!(
        messages[1],
        serde_json::from_str::<Value>(&progress(&json!("p2"), 2)).unwrap(),
        "progress from then on, with the retry's own token: {read}"
    );
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 2, "{read}");
    let content = last["result"]["content"].as_array().unwrap();
    assert_eq!(
        content.last().unwrap()["text"],
        "run 1 with green",
        "{read}"
    );
    assert_eq!(server.counts.get("confirm"), 1, "ran once");
}

/// A call whose caller takes only JSON, sent in a task of its own, once the tool is running.
async fn json_only_call_running(
    base: &str,
    server: &Server,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let call = tokio::spawn({
        let base = base.to_owned();
        async move { send(&base, "application/json", call(1)).await }
    });
    server.counts.reached("confirm", 1).await;
    call
}

#[tokio::test]
async fn a_caller_that_takes_only_json_gets_the_answer_alone() {
    let (base, server) = start(Duration::from_secs(5)).await;
    let waiting = json_only_call_running(&base, &server).await;
    server.counts.reached("asked", 1).await;
    send(&base, BOTH, answer_word("red")).await;
    let response = waiting.await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["result"]["content"][0]["text"], "run 1 with red");
}

#[tokio::test]
async fn a_question_asked_of_a_caller_that_takes_only_json_is_asked_of_a_retry_that_listens() {
    let (base, server) = start(Duration::from_secs(5)).await;
    let first = json_only_call_running(&base, &server).await;
    // The first caller cannot be asked, and gives up.
    server.counts.reached("asked", 1).await;
    first.abort();
    let mut retry = send(&base, BOTH, call(2)).await;
    let mut read = String::new();
    let asked = read_until(&mut retry, &mut read, |m| !m.is_empty()).await;
    assert_eq!(
        asked[0],
        serde_json::from_str::<Value>(QUESTION).unwrap(),
        "asked of the retry: {read}"
    );
    send(&base, BOTH, answer_word("gold")).await;
    let messages = read_until(&mut retry, &mut read, |m| {
        m.iter().any(|m| m.get("result").is_some())
    })
    .await;
    let content = messages.last().unwrap()["result"]["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(content.last().unwrap()["text"], "run 1 with gold", "{read}");
    assert_eq!(server.counts.get("confirm"), 1, "ran once");
}
