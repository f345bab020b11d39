//! The upstream as a tower service: pooled connections (HTTP/1.1, or over TLS HTTP/2 where the
//! upstream offers it and is sent its own name), the request rewritten for its hop, and every
//! failure turned into an answer that says what happened to the action.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::{PathAndQuery, Scheme};
use http::{header, Method, Request, Response, Uri, Version};
use http_body_util::BodyExt;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::Service;
use tower_idempotency::Interrupted;

use crate::answers::{lost, Lost};
use crate::body::{boxed, Answering, BoxError, Deadline, Inbound, Outbound};
use crate::config::{self, HostHeader};
use crate::forward::{add_forwarded, strip_hop_by_hop, ClientAddr};

type Client = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Outbound>;

/// The pool of connections to the upstream, shared by every route.
#[derive(Clone)]
pub struct Pool {
    client: Client,
    base: Arc<Base>,
}

struct Base {
    scheme: Scheme,
    authority: http::uri::Authority,
    /// The upstream URL's path, without a trailing `/`, put before each request's path.
    path: String,
    host: HostHeader,
    /// The header of each call's id, said in the proxy's own answers.
    request_id: http::HeaderName,
}

impl Pool {
    pub fn new(config: &config::Upstream, request_id: http::HeaderName) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout));
        connector.set_nodelay(true);
        // The TLS connector takes https:// itself; plain http:// passes through it.
        connector.enforce_http(false);
        // A connector of an http:// upstream never begins TLS: its configuration is unused.
        let tls = config.tls.clone().unwrap_or_else(plain_only);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(Arc::unwrap_or_clone(tls))
            .https_or_http()
            .enable_http1();
        // HTTP/2 names the upstream in `:authority`: offered only where the upstream is sent
        // its own name. With the client's `Host` kept, HTTP/1.1 carries that one name alone
        // (a server may refuse a request whose two names differ, before anything ran, and the
        // answer would have to say the call may have run).
        let connector = match config.host {
            HostHeader::Rewrite => https.enable_http2().wrap_connector(connector),
            HostHeader::Keep => https.wrap_connector(connector),
        };
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .build(connector);
        let authority = config
            .url
            .authority()
            .cloned()
            .expect("checked when the configuration was read");
        Self {
            client,
            base: Arc::new(Base {
                scheme: config.url.scheme().cloned().unwrap_or(Scheme::HTTP),
                authority,
                path: config.url.path().trim_end_matches('/').to_owned(),
                host: config.host,
                request_id,
            }),
        }
    }

    /// The service that forwards one route's requests, waiting `timeout` for an answer;
    /// `kept` says whether an idempotency layer records them.
    pub fn route(&self, timeout: Duration, kept: bool) -> Upstream {
        Upstream {
            pool: self.clone(),
            timeout,
            kept,
        }
    }
}

/// A client configuration for a connector that only ever connects over plain http://.
fn plain_only() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    Arc::new(config)
}

/// The upstream's answer, its break marked [`Interrupted`]: the request reached the upstream,
/// so the layer keeps the call as one that may have run.
fn marked<B>(body: B) -> Outbound
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    body.map_err(|error| {
        tracing::warn!(%error, "the upstream's answer broke off");
        metrics::counter!("idempotency_proxy_upstream_errors_total", "kind" => "broken")
            .increment(1);
        BoxError::from(Interrupted)
    })
    .boxed_unsync()
}

/// Forwards requests to the upstream.
#[derive(Clone)]
pub struct Upstream {
    pool: Pool,
    timeout: Duration,
    kept: bool,
}

impl Upstream {
    fn target(&self, uri: &Uri) -> Uri {
        let base = &self.pool.base;
        let path_and_query = uri.path_and_query().map_or("/", PathAndQuery::as_str);
        let joined = format!("{}{path_and_query}", base.path);
        Uri::builder()
            .scheme(base.scheme.clone())
            .authority(base.authority.clone())
            .path_and_query(joined)
            .build()
            .expect("a valid authority and a path that was already valid")
    }
}

impl Service<Request<Inbound>> for Upstream {
    type Response = Response<Outbound>;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Inbound>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        let client = parts.extensions.get::<ClientAddr>().map(|c| c.0);
        strip_hop_by_hop(&mut parts.headers);
        if !parts.headers.contains_key(header::HOST) {
            // An HTTP/2 caller names the host in the request's authority.
            if let Some(authority) = parts.uri.authority() {
                if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
                    parts.headers.insert(header::HOST, host);
                }
            }
        }
        add_forwarded(&mut parts.headers, client);
        if self.pool.base.host == HostHeader::Rewrite {
            // The client fills it in from the upstream URL.
            parts.headers.remove(header::HOST);
        }
        parts.uri = self.target(&parts.uri);
        // A call that may change something gets its whole answer within the timeout, and so
        // does the resumption of its event stream (a GET with `Last-Event-ID`); any other GET's
        // stream (an MCP server's event stream) is not cut.
        let bounded = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS)
            || parts.headers.contains_key("last-event-id");
        // The client speaks HTTP/1.1 to the upstream, whatever the caller spoke, or HTTP/2
        // where the upstream chose it in the TLS handshake.
        parts.version = Version::HTTP_11;
        // Kept for the proxy's own answer, should the upstream give none.
        let request_id = parts.headers.get(&self.pool.base.request_id).cloned();
        let outgoing = self
            .pool
            .client
            .request(Request::from_parts(parts, body.into_outbound()));
        let (timeout, kept) = (self.timeout, self.kept);
        let deadline = tokio::time::Instant::now() + timeout;
        Box::pin(async move {
            let request_id = request_id.as_ref().and_then(|id| id.to_str().ok());
            let answer = match tokio::time::timeout(timeout, outgoing).await {
                Ok(Ok(response)) => {
                    let (mut parts, body) = response.into_parts();
                    strip_hop_by_hop(&mut parts.headers);
                    let body = match (kept, bounded) {
                        (true, true) => marked(Deadline::new(body, deadline)),
                        (true, false) => marked(body),
                        (false, _) => boxed(body),
                    };
                    return Ok(Response::from_parts(parts, body));
                }
                Ok(Err(error)) if error.is_connect() => {
                    tracing::warn!(%error, "the upstream could not be reached");
                    metrics::counter!("idempotency_proxy_upstream_errors_total", "kind" => "connect")
                        .increment(1);
                    lost(Lost::Unreachable, timeout, request_id)
                }
                Ok(Err(error)) => {
                    tracing::warn!(%error, "the upstream's connection broke before it answered");
                    metrics::counter!("idempotency_proxy_upstream_errors_total", "kind" => "broken")
                        .increment(1);
                    lost(Lost::Broken, timeout, request_id)
                }
                Err(_elapsed) => {
                    tracing::warn!(
                        timeout_s = timeout.as_secs(),
                        "the upstream did not answer in time"
                    );
                    metrics::counter!("idempotency_proxy_upstream_errors_total", "kind" => "timeout")
                        .increment(1);
                    lost(Lost::TimedOut, timeout, request_id)
                }
            };
            Ok(answer)
        })
    }
}
