//! The whole layer fed arbitrary requests, each sent twice: never panics, always answers, and
//! the tool runs at most once for the pair (it always succeeds, so nothing is released).
#![no_main]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use libfuzzer_sys::fuzz_target;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_idempotency::IdempotencyLayer;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// Splits the input into request parts: flags, then NUL-separated path, session, content type,
/// explicit key and body.
fn request(data: &[u8]) -> Option<Request<Full<Bytes>>> {
    let (&flags, rest) = data.split_first()?;
    let mut parts = rest.splitn(5, |&b| b == 0);
    let path = parts.next()?;
    let session = parts.next().unwrap_or_default();
    let content_type = parts.next().unwrap_or_default();
    let key = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let method = ["POST", "PUT", "PATCH", "DELETE", "GET"][usize::from(flags % 5)];
    let mut path = String::from_utf8_lossy(path).into_owned();
    path.retain(|c| c.is_ascii_graphic());
    let uri = format!("/{}", path.trim_start_matches('/'));
    let mut builder = Request::builder().method(method).uri(uri);
    if flags & 0x08 != 0 {
        builder = builder.header("x-session-id", session);
    }
    if flags & 0x10 != 0 {
        builder = builder.header("content-type", content_type);
    }
    if flags & 0x20 != 0 {
        builder = builder.header("idempotency-key", key);
    }
    builder.body(Full::new(Bytes::copy_from_slice(body))).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(first) = request(data) else { return };
    let second = request(data).expect("the same input builds the same request");
    runtime().block_on(async {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&runs);
        let tool = service_fn(move |request: Request<Full<Bytes>>| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let body = request.into_body().collect().await.unwrap().to_bytes();
                Ok::<_, Infallible>(Response::new(Full::new(body)))
            }
        });
        let layer = IdempotencyLayer::new()
            .idempotency_key_header()
            .ignore_field("/tool_call_id")
            .body_limit(64 * 1024);
        let executions = layer.detached();
        let service = ServiceBuilder::new().layer(layer).service(tool);
        let is_safe = first.method() == http::Method::GET;
        let a = service.clone().oneshot(first).await.unwrap();
        let b = service.clone().oneshot(second).await.unwrap();
        executions.wait().await;
        for response in [&a, &b] {
            assert!(response.status() != StatusCode::INTERNAL_SERVER_ERROR);
        }
        if !is_safe {
            assert!(runs.load(Ordering::SeqCst) <= 1, "two identical requests ran twice");
        }
        let _ = a.into_body().collect().await;
        let _ = b.into_body().collect().await;
    });
});
