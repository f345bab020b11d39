//! Traces that carry the intent and never a secret, and request ids from tower-http carried
//! in the same span. Every test here installs a subscriber (tracing caches which callsites are
//! enabled process-wide, so a test without one would disable spans for the others).

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Request, StatusCode};
use support::{serve, tools, Client, Counts};
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tower_idempotency::IdempotencyLayer;
use tracing_subscriber::fmt::MakeWriter;

/// Everything written by the subscriber, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Captures every event at TRACE, from every crate, on this thread (the test's runtime runs
/// server, client and executions on it).
fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (captured, guard)
}

#[tokio::test]
async fn trace_output_never_holds_a_body_a_session_or_a_key() {
    let (captured, _guard) = capture();
    let counts = Counts::default();
    let layer = IdempotencyLayer::new()
        .idempotency_key_header()
        .deadline(Duration::from_millis(50));
    let executions = layer.detached();
    let client = Client::new(serve(tools(counts).layer(layer)).await);
    let secrets = ["ann.secret@example.com", "session-7f3a9c", "key-2b8e41d0"];
    let body = r#"{"to":"ann.secret@example.com","delay_ms":120}"#;
    let send = || {
        client.post_with(
            "/tools/echo",
            &[
                ("x-session-id", "session-7f3a9c"),
                ("idempotency-key", "key-2b8e41d0"),
                ("content-type", "application/json"),
            ],
            body,
        )
    };
    let first = send().await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    executions.wait().await;
    let waited = send().await;
    assert_eq!(waited.status, StatusCode::CREATED);
    let status = client
        .get(
            &format!("/_idempotency/{}", first.intent()),
            Some("session-7f3a9c"),
        )
        .await;
    assert_eq!(status.status, StatusCode::CREATED);
    client
        .post(
            "/tools/status/500",
            "session-7f3a9c",
            r#"{"to":"ann.secret@example.com"}"#,
        )
        .await;

    let text = captured.text();
    assert!(
        text.contains("idempotency{"),
        "the layer's span is there:\n{text}"
    );
    assert!(
        text.contains(&first.intent()[..12]),
        "the intent prefix is there"
    );
    assert!(
        !text.contains(first.intent()),
        "the whole intent key is not"
    );
    for secret in secrets {
        assert!(
            !text.contains(secret),
            "{secret} leaked into the trace output:\n{text}"
        );
    }
}

#[tokio::test]
async fn request_ids_from_tower_http_are_carried_in_the_span() {
    let (captured, _guard) = capture();
    let counts = Counts::default();
    let app = tools(counts).layer(IdempotencyLayer::new()).layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
                    let id = request
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    tracing::info_span!("request", request_id = id)
                }),
            )
            .layer(PropagateRequestIdLayer::x_request_id()),
    );
    let client = Client::new(serve(app).await);
    let answer = client
        .post_with(
            "/tools/echo",
            &[
                ("x-session-id", "s"),
                ("x-request-id", "req-42"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(
        answer.header("x-request-id"),
        Some("req-42"),
        "propagated back"
    );
    let generated = client.post("/tools/echo", "s", r#"{"n":2}"#).await;
    assert!(
        generated
            .header("x-request-id")
            .is_some_and(|id| id.len() == 36),
        "set when absent"
    );

    let text = captured.text();
    let claimed = text
        .lines()
        .find(|line| line.contains("claimed: executing") && line.contains("req-42"))
        .unwrap_or_else(|| panic!("no claim event in the request's span:\n{text}"));
    assert!(claimed.contains("idempotency{"), "{claimed}");
}

#[tokio::test]
async fn the_layers_own_answers_say_the_request_id_and_a_replay_gives_back_its_own() {
    let (_captured, _guard) = capture();
    // A tool that says back the id it was sent, as many servers do.
    let tool = axum::Router::new().route(
        "/tools/send",
        axum::routing::post(|headers: axum::http::HeaderMap| async move {
            let id = headers.get("x-request-id").cloned();
            (id.map(|id| [("x-request-id", id)]), "sent")
        }),
    );
    let app = tool.layer(IdempotencyLayer::new()).layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(PropagateRequestIdLayer::x_request_id()),
    );
    let client = Client::in_memory(app);
    let call = |id: &'static str| {
        let client = client.clone();
        async move {
            let headers = [("x-session-id", "s"), ("x-request-id", id)];
            client.post_with("/tools/send", &headers, "{}").await
        }
    };
    let first = call("first").await;
    assert_eq!(first.header("x-request-id"), Some("first"));
    let again = call("second").await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.text(), "sent", "the tool's body, byte for byte");
    assert_eq!(
        again.header("x-request-id"),
        Some("second"),
        "the replay answers the new request, not the first caller's"
    );

    // A refusal the layer writes says the id.
    let refused = client
        .post_with("/tools/send", &[("x-request-id", "req-7")], "{}")
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(refused.json()["request_id"], "req-7", "{refused:?}");
    assert_eq!(refused.json()["outcome"], "not_executed");

    // So does the status path's, and an id minted outside the layer is said as well.
    let status = format!("{}/_idempotency/{}", client.base, "0".repeat(64));
    let unknown = client
        .send(client.http.get(status).header("x-session-id", "s"))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let minted = unknown
        .header("x-request-id")
        .expect("an id minted")
        .to_owned();
    assert_eq!(unknown.json()["request_id"], minted.as_str(), "{unknown:?}");

    // A value that is not a short token is not written.
    let long = "x".repeat(200);
    let headers = [("x-request-id", long.as_str())];
    let refused = client.post_with("/tools/send", &headers, "{}").await;
    assert!(refused.json().get("request_id").is_none(), "{refused:?}");
}
