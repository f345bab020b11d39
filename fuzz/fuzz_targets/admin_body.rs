//! The admin API fed arbitrary request bodies and query strings, on each of its operations,
//! over a store that holds one intent: never panics, always answers JSON, never with a 500.
//! The input is a byte choosing the operation, then the query, a NUL byte and the body, in
//! which `$INTENT` stands for the intent the store holds.
#![no_main]

use std::convert::Infallible;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use libfuzzer_sys::fuzz_target;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_idempotency::{IdempotencyLayer, INTENT_HEADER};

const TOKEN: &str = "fuzzing-admin-token";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The operation the byte chooses, on `intent`: its method and path.
fn operation(choice: u8, intent: &str) -> (Method, String) {
    match choice % 6 {
        0 => (Method::GET, "/admin/records".to_owned()),
        1 => (Method::GET, format!("/admin/records/{intent}")),
        2 => (Method::POST, format!("/records/{intent}/resolve")),
        3 => (Method::DELETE, format!("/admin/records/{intent}")),
        4 => (Method::POST, "/admin/scopes/purge".to_owned()),
        // An intent that is not one.
        _ => (Method::POST, "/records/0abc/resolve".to_owned()),
    }
}

/// `body` with each `$INTENT` in it replaced by `intent`.
fn with_intent(body: &[u8], intent: &str) -> Bytes {
    const MARK: &[u8] = b"$INTENT";
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.windows(MARK.len()).position(|w| w == MARK) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(intent.as_bytes());
        rest = &rest[at + MARK.len()..];
    }
    out.extend_from_slice(rest);
    Bytes::from(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.splitn(2, |&b| b == 0);
    let query = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    runtime().block_on(async {
        let layer = IdempotencyLayer::new().scope_header(http::HeaderName::from_static("x-tenant"));
        let admin = layer.admin().service(TOKEN);
        let tool = service_fn(|_: Request<Full<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                b"{\"sent\":1}",
            ))))
        });
        let service = ServiceBuilder::new().layer(layer).service(tool);
        let call = Request::post("/tools/send_email")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-tenant", "t1")
            .body(Full::new(Bytes::from_static(b"{\"to\":\"a@example.com\"}")))
            .unwrap();
        let answered = service.oneshot(call).await.unwrap();
        let intent = answered.headers()[INTENT_HEADER]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = answered.into_body().collect().await;

        let (method, path) = operation(choice, &intent);
        let query = String::from_utf8_lossy(query);
        let with_query = format!("{path}?{query}");
        let uri = if with_query.parse::<http::Uri>().is_ok() {
            with_query
        } else {
            path
        };
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .body(Full::new(with_intent(body, &intent)))
            .unwrap();
        let answer = admin.oneshot(request).await.unwrap();
        let status = answer.status();
        assert!(status != StatusCode::INTERNAL_SERVER_ERROR, "a 500");
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        assert!(
            serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(),
            "a {status} answer that is not JSON"
        );
    });
});
