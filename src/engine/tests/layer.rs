//! The engine's timing paths through the HTTP layer, under Tokio's paused clock: deadlines,
//! coalescing, releases, leases and abandoned executions, in virtual time, with the in-process
//! store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tokio::time::Instant;
use tower::{service_fn, Service, ServiceExt};
use tower_layer::Layer;

use super::TestStore;
use crate::store::MemoryStore;
use crate::IdempotencyLayer;

/// A tool that counts its runs; run `n` (from 1) takes `took(n)` and answers `status(n)`.
#[derive(Clone)]
struct Tool {
    runs: Arc<AtomicUsize>,
}

impl Tool {
    fn new() -> Self {
        Self {
            runs: Arc::default(),
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    fn service(
        &self,
        took: fn(usize) -> Duration,
        status: fn(usize) -> u16,
    ) -> impl Service<
        Request<Full<Bytes>>,
        Response = Response<Full<Bytes>>,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone
           + Send
           + 'static {
        let runs = Arc::clone(&self.runs);
        service_fn(move |_: Request<Full<Bytes>>| {
            let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                tokio::time::sleep(took(run)).await;
                let mut response = Response::new(Full::new(Bytes::from(format!("run {run}"))));
                *response.status_mut() = StatusCode::from_u16(status(run)).unwrap();
                Ok(response)
            }
        })
    }
}

// The answer type of every test of the crate and the proxy.
#[path = "../../../tests/support/answer.rs"]
#[allow(unreachable_pub)] // public for the integration tests that share it
mod answer;
use answer::Answer;

async fn call<S>(service: &S) -> Answer
where
    S: Service<Request<Full<Bytes>>, Response = Response<crate::ResponseBody<Full<Bytes>>>> + Clone,
    S::Error: std::fmt::Debug,
{
    let request = Request::post("/tools/send_email")
        .header("x-session-id", "s1")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(br#"{"to":"a@example.com"}"#)))
        .unwrap();
    Answer::read(service.clone().oneshot(request).await.unwrap()).await
}

#[tokio::test(start_paused = true)]
async fn a_caller_past_its_deadline_is_told_in_progress_and_the_action_goes_on() {
    let tool = Tool::new();
    let layer = IdempotencyLayer::new().deadline(Duration::from_secs(2));
    let service = layer.layer(tool.service(|_| Duration::from_secs(10), |_| 200));
    let started = Instant::now();
    let first = call(&service).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "told at its deadline"
    );
    assert_eq!(first.json()["outcome"], "in_progress");
    tokio::time::sleep(Duration::from_secs(9)).await;
    let repeat = call(&service).await;
    assert_eq!(repeat.status, StatusCode::OK);
    assert!(repeat.replayed());
    assert_eq!(repeat.body, "run 1");
    assert_eq!(tool.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn concurrent_duplicates_coalesce_onto_one_execution() {
    let tool = Tool::new();
    let service = IdempotencyLayer::new().layer(tool.service(|_| Duration::from_secs(1), |_| 200));
    let answers = futures_util::future::join_all((0..5).map(|_| call(&service))).await;
    assert_eq!(tool.runs(), 1);
    assert!(answers.iter().all(|a| a.status == 200 && a.body == "run 1"));
    assert_eq!(answers.iter().filter(|a| a.replayed()).count(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_failure_releases_the_key_and_its_waiters_get_the_failure() {
    let tool = Tool::new();
    let service = IdempotencyLayer::new().layer(tool.service(
        |_| Duration::from_secs(1),
        |run| if run == 1 { 503 } else { 200 },
    ));
    let (first, waiter) = tokio::join!(call(&service), call(&service));
    assert_eq!(tool.runs(), 1, "the waiter did not run it again");
    assert_eq!(first.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(waiter.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(waiter.body, "run 1");
    let retry = call(&service).await;
    assert_eq!(retry.status, StatusCode::OK, "released: the retry ran");
    assert_eq!(retry.body, "run 2");
    assert_eq!(tool.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_renewed_lease_holds_off_another_instance_for_as_long_as_the_action_runs() {
    let tool = Tool::new();
    let store = MemoryStore::new();
    let lease = Duration::from_secs(3);
    let one = IdempotencyLayer::with_store(store.clone())
        .lease(lease)
        .deadline(Duration::ZERO);
    let other = IdempotencyLayer::with_store(store)
        .lease(lease)
        .deadline(Duration::from_secs(1));
    let tool_service = tool.service(|_| Duration::from_secs(60), |_| 200);
    let first = call(&one.layer(tool_service.clone())).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let elsewhere = other.layer(tool_service);
    let meanwhile = call(&elsewhere).await;
    assert_eq!(
        meanwhile.status,
        StatusCode::ACCEPTED,
        "ten leases later, still held"
    );
    assert_eq!(tool.runs(), 1);
    tokio::time::sleep(Duration::from_secs(31)).await;
    let after = call(&elsewhere).await;
    assert_eq!(after.status, StatusCode::OK);
    assert!(after.replayed());
    assert_eq!(tool.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_execution_past_its_bound_is_abandoned_and_never_runs_again() {
    let tool = Tool::new();
    let layer = IdempotencyLayer::new().max_execution(Duration::from_secs(5));
    let service = layer.layer(tool.service(|_| Duration::from_secs(3600), |_| 200));
    let started = Instant::now();
    let first = call(&service).await;
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(first.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(first.json()["outcome"], "unknown");
    let repeat = call(&service).await;
    assert_eq!(repeat.json()["outcome"], "unknown");
    assert_eq!(tool.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_write_that_waits_on_a_store_that_answers_at_once_is_made_again_in_the_background() {
    let tool = Tool::new();
    let store = TestStore::default().first_write_waits();
    let completes = store.completes();
    let layer = IdempotencyLayer::with_store(store);
    let service = layer.layer(tool.service(|_| Duration::ZERO, |_| 200));
    let first = call(&service).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(!first.replayed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = call(&service).await;
    assert!(again.replayed());
    assert_eq!(tool.runs(), 1);
    // The write that waited was dropped where it stood and made again: a store that was
    // waited on would have been asked once.
    assert_eq!(completes.load(Ordering::SeqCst), 2);
}
