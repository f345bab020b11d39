//! With `answer_batching()`, answers of requests that arrive together are handed on together:
//! each is decided and its outcome recorded in its own turn, and the layer yields once before
//! handing it to the server. By default each answer is handed on as soon as it is decided.

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, Response, StatusCode};
use tower::ServiceExt;
use tower_idempotency::IdempotencyLayer;

type Events = Arc<Mutex<Vec<String>>>;

/// An app whose tool notes each run, and answers at once.
fn app(layer: IdempotencyLayer, events: &Events) -> Router {
    let events = Arc::clone(events);
    Router::new()
        .route(
            "/tools/send_email",
            post(move |body: String| {
                let events = Arc::clone(&events);
                async move {
                    events.lock().unwrap().push(format!("ran {body}"));
                    format!("sent {body}")
                }
            }),
        )
        .layer(layer)
}

fn call(body: &str) -> Request<Body> {
    Request::post("/tools/send_email")
        .header("content-type", "application/json")
        .header("x-session-id", "s1")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

/// Notes `name` when the layer hands the answer on.
async fn noted<F>(events: &Events, name: &str, answer: F) -> Response<Body>
where
    F: Future<Output = Result<Response<Body>, std::convert::Infallible>>,
{
    let response = answer.await.unwrap();
    events.lock().unwrap().push(format!("answered {name}"));
    response
}

async fn two_at_once(
    layer: IdempotencyLayer,
    first: &str,
    second: &str,
) -> (Vec<String>, [Response<Body>; 2]) {
    let events = Events::default();
    let app = app(layer, &events);
    // Polled in turn within one task, as a server's runtime polls the connections that
    // became ready together.
    let (a, b) = tokio::join!(
        noted(&events, first, app.clone().oneshot(call(first))),
        noted(&events, second, app.clone().oneshot(call(second))),
    );
    let events = events.lock().unwrap().clone();
    (events, [a, b])
}

#[tokio::test]
async fn answers_of_requests_that_arrive_together_are_handed_on_together() {
    let layer = IdempotencyLayer::new().answer_batching();
    let (events, [a, b]) = two_at_once(layer, "1", "2").await;
    // Both ran before either answer was handed on (in whichever order `join!` polls them).
    assert_eq!(events[..2], ["ran 1", "ran 2"]);
    let mut answered = events[2..].to_vec();
    answered.sort();
    assert_eq!(answered, ["answered 1", "answered 2"]);
    assert_eq!(a.status(), StatusCode::OK);
    assert_eq!(b.status(), StatusCode::OK);
}

#[tokio::test]
async fn by_default_each_answer_is_handed_on_as_soon_as_it_is_decided() {
    let (events, _) = two_at_once(IdempotencyLayer::new(), "1", "2").await;
    assert_eq!(events, ["ran 1", "answered 1", "ran 2", "answered 2"]);
}

#[tokio::test]
async fn a_repeat_that_arrives_while_an_answer_waits_its_turn_is_replayed() {
    // The outcome is recorded before the layer yields: the repeat finds it kept.
    let layer = IdempotencyLayer::new().answer_batching();
    let (events, [first, repeat]) = two_at_once(layer, "1", "1").await;
    assert_eq!(events, ["ran 1", "answered 1", "answered 1"]);
    assert!(first.headers().get("idempotent-replayed").is_none());
    assert_eq!(repeat.headers()["idempotent-replayed"], "true");
    let body = axum::body::to_bytes(repeat.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_eq!(body, "sent 1");
}
