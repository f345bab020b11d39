//! Per-request cost of the layer in process: `oneshot` on the layered service against the
//! bare one, in one run, for first executions, replays, a duplicate coalesced onto a running
//! execution, and the 202 "in progress" answer; divan counts allocations per request.
//!
//! `cargo bench --bench layer`

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use divan::Bencher;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{service_fn, Service, ServiceBuilder, ServiceExt};
use tower_idempotency::IdempotencyLayer;

#[path = "support.rs"]
mod support;

const SIZES: &[usize] = &[256, 1024, 4 * 1024, 16 * 1024, 64 * 1024, 256 * 1024];

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A tool that answers a small JSON body at once, or, if it `yields`, after giving way once: a
/// duplicate sent beside it then finds it running.
fn tool(
    yields: bool,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send,
> + Clone
       + Send
       + 'static {
    service_fn(move |_: Request<Full<Bytes>>| async move {
        if yields {
            tokio::task::yield_now().await;
        }
        Ok(Response::new(Full::new(Bytes::from_static(
            br#"{"status":"sent","message_id":"msg_1"}"#,
        ))))
    })
}

fn request(body: Bytes) -> Request<Full<Bytes>> {
    Request::post("/tools/send_email")
        .header("x-session-id", "bench")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap()
}

/// Bodies of `size` bytes that are all different intents.
fn unique_bodies(size: usize) -> impl FnMut() -> Bytes {
    let counter = AtomicU64::new(0);
    let template = support::document(size, 0);
    move || {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        Bytes::from(template.replacen("call_0", &format!("call_{n}"), 1))
    }
}

/// Sends each request of `inputs` through `service` and reads the whole answer.
fn measure<S, B>(
    bencher: Bencher,
    rt: &tokio::runtime::Runtime,
    service: S,
    mut inputs: impl FnMut() -> Request<Full<Bytes>>,
) where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone,
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    bencher.with_inputs(&mut inputs).bench_local_values(|req| {
        rt.block_on(async {
            let response = service.clone().oneshot(req).await.unwrap();
            response.into_body().collect().await.unwrap().to_bytes()
        })
    });
}

fn layered() -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<tower_idempotency::ResponseBody<Full<Bytes>>>,
    Error = Infallible,
> + Clone {
    ServiceBuilder::new()
        .layer(IdempotencyLayer::new())
        .service(tool(false))
}

#[divan::bench(args = SIZES)]
fn bare_service(bencher: Bencher, size: usize) {
    let rt = runtime();
    let mut next = unique_bodies(size);
    measure(bencher, &rt, tool(false), || request(next()));
}

#[divan::bench(args = SIZES)]
fn layered_first_execution(bencher: Bencher, size: usize) {
    let rt = runtime();
    let service = rt.block_on(async { layered() });
    let mut next = unique_bodies(size);
    measure(bencher, &rt, service, || request(next()));
}

#[divan::bench(args = SIZES)]
fn layered_replay(bencher: Bencher, size: usize) {
    let rt = runtime();
    let service = rt.block_on(async { layered() });
    let body = Bytes::from(support::document(size, 0));
    rt.block_on(service.clone().oneshot(request(body.clone())))
        .unwrap();
    measure(bencher, &rt, service, || request(body.clone()));
}

/// Two bare calls side by side, against which a call and its coalesced duplicate compare.
#[divan::bench(args = SIZES)]
fn bare_pair(bencher: Bencher, size: usize) {
    let rt = runtime();
    let service = tool(true);
    let mut next = unique_bodies(size);
    bencher.with_inputs(&mut next).bench_local_values(|body| {
        rt.block_on(async {
            let first = service.clone().oneshot(request(body.clone()));
            let second = service.clone().oneshot(request(body));
            let (a, b) = futures_util::future::join(first, second).await;
            (a.unwrap(), b.unwrap())
        })
    });
}

/// A first execution and a duplicate sent beside it, which waits for it and shares its answer.
#[divan::bench(args = SIZES)]
fn layered_with_coalesced_duplicate(bencher: Bencher, size: usize) {
    let rt = runtime();
    let service = rt.block_on(async {
        ServiceBuilder::new()
            .layer(IdempotencyLayer::new())
            .service(tool(true))
    });
    let mut next = unique_bodies(size);
    bencher.with_inputs(&mut next).bench_local_values(|body| {
        rt.block_on(async {
            let first = service.clone().oneshot(request(body.clone()));
            let duplicate = service.clone().oneshot(request(body));
            let (a, b) = futures_util::future::join(first, duplicate).await;
            let (a, b) = (a.unwrap(), b.unwrap());
            let a = a.into_body().collect().await.unwrap().to_bytes();
            let b = b.into_body().collect().await.unwrap().to_bytes();
            (a, b)
        })
    });
}

/// A first execution answered 202 "in progress" at once (a zero deadline), the action
/// running on detached.
#[divan::bench(args = SIZES)]
fn layered_in_progress(bencher: Bencher, size: usize) {
    let rt = runtime();
    let service = rt.block_on(async {
        ServiceBuilder::new()
            .layer(IdempotencyLayer::new().deadline(Duration::ZERO))
            .service(tool(true))
    });
    let mut next = unique_bodies(size);
    measure(bencher, &rt, service, || request(next()));
}
