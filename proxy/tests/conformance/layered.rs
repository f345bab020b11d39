//! The crate's own MCP layer in an axum app that forwards every request to an MCP server: the
//! layer as a user puts it in a gateway of their own, at its defaults, serving one user.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower::Layer;
use tower_idempotency::mcp::McpIdempotencyLayer;
use tower_idempotency::IdempotencyLayer;

/// Serves `/mcp` on a free loopback port, forwarding to `upstream` (`http://host:port`)
/// behind `IdempotencyLayer::new().mcp().shared_scope()`; its MCP endpoint's URL.
pub async fn serve(upstream: String) -> String {
    // The suite's calls carry no credential: one user, one scope.
    serve_behind(upstream, IdempotencyLayer::new().mcp().shared_scope()).await
}

/// Serves `/mcp` on a free loopback port, forwarding to `upstream` behind `layer`, and every
/// other path to `upstream` as it is; its MCP endpoint's URL.
pub async fn serve_behind(upstream: String, layer: McpIdempotencyLayer) -> String {
    let client: Client<HttpConnector, Body> = Client::builder(TokioExecutor::new()).build_http();
    let forward = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let upstream = upstream.clone();
        async move { Ok::<_, Infallible>(forward(&client, &upstream, request).await) }
    });
    let app = Router::new()
        .route_service("/mcp", layer.layer(forward.clone()))
        .fallback_service(forward);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/mcp")
}

/// Sends `request` to `upstream` as it came, headers and all, and its answer back as it comes.
async fn forward(
    client: &Client<HttpConnector, Body>,
    upstream: &str,
    request: Request<Body>,
) -> Response<Body> {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    parts.uri = format!("{upstream}{path}").parse::<Uri>().unwrap();
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => response.map(Body::new),
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}
