//! The layer under each way of building a server: axum's Router::layer (the other test
//! files), tower's ServiceBuilder, and plain hyper through hyper-util.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use support::Client;
use tokio::net::TcpListener;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_idempotency::{IdempotencyLayer, RequestBody};

type Body = RequestBody<Incoming>;

/// A tool: counts executions, echoes the body, and fails with an error on `/error`.
fn tool<B>(
    executions: Arc<AtomicUsize>,
) -> impl tower::Service<
    Request<B>,
    Response = Response<Full<Bytes>>,
    Error = std::io::Error,
    Future: Send,
> + Clone
       + Send
       + 'static
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    service_fn(move |request: Request<B>| {
        let executions = Arc::clone(&executions);
        async move {
            let n = executions.fetch_add(1, Ordering::SeqCst) + 1;
            if request.uri().path() == "/error" {
                return Err(std::io::Error::other("the tool failed"));
            }
            let body = request
                .into_body()
                .collect()
                .await
                .map_err(std::io::Error::other)?;
            let text = format!("{n}:{}", String::from_utf8_lossy(&body.to_bytes()));
            Ok(Response::new(Full::new(Bytes::from(text))))
        }
    })
}

/// Serves a tower service under plain hyper, wrapping `Incoming` for the layer.
async fn serve_hyper<S>(service: S) -> String
where
    S: tower::Service<
            Request<Body>,
            Response = Response<tower_idempotency::ResponseBody<Full<Bytes>>>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = ServiceBuilder::new()
                .map_request(|request: Request<Incoming>| request.map(RequestBody::new))
                .service(service.clone());
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn the_layer_protects_a_plain_hyper_server() {
    let executions = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new())
        .service(tool(Arc::clone(&executions)));
    let client = Client::new(serve_hyper(service).await);
    let first = client.post("/send", "s", r#"{"a":1}"#).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        &first.body[..],
        br#"1:{"a":1}"#,
        "the tool got the same bytes"
    );
    let again = client.post("/send", "s", r#"{ "a": 1 }"#).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(executions.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_inner_error_releases_the_key_so_a_retry_runs() {
    let executions = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new())
        .service(tool(Arc::clone(&executions)));
    let client = Client::new(serve_hyper(service).await);
    let send = || {
        client
            .http
            .post(format!("{}/error", client.base))
            .header("x-session-id", "s")
            .body("{}")
            .send()
    };
    // hyper closes the connection on a service error: the caller sees a transport error.
    assert!(send().await.is_err());
    assert!(send().await.is_err());
    assert_eq!(
        executions.load(Ordering::SeqCst),
        2,
        "the error released the key"
    );
}

#[tokio::test]
async fn the_layer_composes_in_a_service_builder_called_in_process() {
    let executions = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new())
        .service(tool::<Full<Bytes>>(Arc::clone(&executions)));
    let request = || {
        Request::post("/send")
            .header("x-session-id", "s")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"{\"x\":1}")))
            .unwrap()
    };
    let first = service.clone().oneshot(request()).await.unwrap();
    let again = service.clone().oneshot(request()).await.unwrap();
    assert!(first.headers().get("idempotent-replayed").is_none());
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let first_body = first.into_body().collect().await.unwrap().to_bytes();
    let again_body = again.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(first_body, again_body);
    assert_eq!(executions.load(Ordering::SeqCst), 1);
}
