//! Every call traceable: a request id read or minted (UUID v7), passed on and given back, and
//! written into the answers the layer writes; the W3C trace context continued by a span of the
//! proxy's own, which the upstream hears as its parent, the log line names, and an OTLP
//! collector receives. The collector here is a small OTLP receiver of the test's own, over
//! HTTP or gRPC, decoding what it is sent with `opentelemetry-proto`.

mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Attribute;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::Value;
use support::process::eventually;
use support::{client, config_file, Proxy, Upstream};

const LIMIT: Duration = Duration::from_secs(15);

/// An OTLP collector on loopback, on a thread of its own (so that a test blocked on the
/// proxy's exit does not stop it): every span posted to `/v1/traces` (OTLP/HTTP), or, over
/// gRPC, sent to `TraceService/Export`.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

/// An answer's body: its frames, trailers included (gRPC's status).
type Frames =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

impl Collector {
    fn start() -> Self {
        Self::start_speaking(false)
    }

    fn start_grpc() -> Self {
        Self::start_speaking(true)
    }

    fn start_speaking(grpc: bool) -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let kept = Arc::clone(&kept);
                    let service = hyper::service::service_fn(move |request| {
                        received(Arc::clone(&kept), request)
                    });
                    let io = TokioIo::new(stream);
                    if grpc {
                        let http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                        tokio::spawn(async move { http2.serve_connection(io, service).await });
                    } else {
                        let http1 = hyper::server::conn::http1::Builder::new();
                        tokio::spawn(async move { http1.serve_connection(io, service).await });
                    }
                }
            });
        });
        let addr = rx.recv_timeout(LIMIT).expect("the collector listens");
        Self {
            url: format!("http://{addr}"),
            spans,
        }
    }

    /// The span `span_id` names (hex), once the collector has it.
    async fn span(&self, span_id: &str) -> Span {
        eventually(&format!("the span {span_id} exported"), LIMIT, || async {
            let spans = self.spans.lock().unwrap();
            spans
                .iter()
                .find(|span| hex(&span.span_id) == span_id)
                .cloned()
        })
        .await
    }
}

/// gRPC's path of the export, and OTLP/HTTP's.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
const HTTP_EXPORT: &str = "/v1/traces";

async fn received(
    kept: Arc<Mutex<Vec<Span>>>,
    request: http::Request<Incoming>,
) -> Result<http::Response<Frames>, Infallible> {
    let path = request.uri().path().to_owned();
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    // A gRPC message is framed: a compression flag and its length, 5 bytes, before it.
    let grpc = path == GRPC_EXPORT;
    let message = match (grpc, body.get(5..)) {
        (true, Some(message)) if body[0] == 0 => Bytes::copy_from_slice(message),
        (true, _) => Bytes::new(),
        (false, _) => body,
    };
    let frames = |status, frames| {
        let mut response = http::Response::new(StreamBody::new(futures_util::stream::iter(frames)));
        *response.status_mut() = status;
        response
    };
    let Ok(export) = ExportTraceServiceRequest::decode(message) else {
        return Ok(frames(http::StatusCode::BAD_REQUEST, Vec::new()));
    };
    if !grpc && path != HTTP_EXPORT {
        return Ok(frames(http::StatusCode::NOT_FOUND, Vec::new()));
    }
    let spans = export.resource_spans.into_iter().flat_map(|resource| {
        let scopes = resource.scope_spans.into_iter();
        scopes.flat_map(|scope| scope.spans)
    });
    kept.lock().unwrap().extend(spans);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    let (content_type, body, trailers) = if grpc {
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(answer.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(&answer);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        ("application/grpc", framed, Some(trailers))
    } else {
        ("application/x-protobuf", answer, None)
    };
    let mut sent = vec![Ok(Frame::data(Bytes::from(body)))];
    sent.extend(trailers.map(|trailers| Ok(Frame::trailers(trailers))));
    let mut response = frames(http::StatusCode::OK, sent);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    Ok(response)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of `span`'s string attribute `key`.
fn attribute<'s>(span: &'s Span, key: &str) -> Option<&'s str> {
    let found = span.attributes.iter().find(|kv| kv.key == key)?;
    match found.value.as_ref()?.value.as_ref()? {
        Attribute::StringValue(text) => Some(text),
        _ => None,
    }
}

/// A `traceparent` header read: its trace id and its parent's span id.
fn traceparent(value: &str) -> (String, String) {
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "{value}");
    assert_eq!(parts[0], "00", "{value}");
    (parts[1].to_owned(), parts[2].to_owned())
}

/// A proxy in front of `upstream` with JSON logs at `info`, sending spans to `collector`
/// where there is one; `env` added to its environment.
fn proxy(upstream: &Upstream, collector: Option<&Collector>, env: &[(&str, &str)]) -> Proxy {
    proxy_with(upstream, collector, env, &[])
}

/// The same, with `extra` flags.
fn proxy_with(
    upstream: &Upstream,
    collector: Option<&Collector>,
    env: &[(&str, &str)],
    extra: &[&str],
) -> Proxy {
    let file = config_file("log_format = \"json\"\n");
    let path = file.path().to_str().unwrap().to_owned();
    let url = upstream.url();
    let mut args = vec!["--upstream", &url, "--listen", "127.0.0.1:0"];
    args.extend(["--config", &path]);
    if let Some(collector) = collector {
        args.extend(["--otlp-endpoint", &collector.url]);
    }
    args.extend_from_slice(extra);
    let mut env = env.to_vec();
    env.push(("RUST_LOG", "info"));
    let proxy = Proxy::start_with_env(&args, &env);
    // The file is read at start.
    drop(file);
    proxy
}

/// POSTs to the tool that says which headers it saw, in session `s1`, with `headers`.
async fn echo(proxy: &Proxy, body: &str, headers: &[(&str, &str)]) -> support::Answer {
    let mut request = client()
        .post(format!("{}/tools/echo_headers", proxy.url))
        .header("x-session-id", "s1")
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    support::answer(request).await
}

/// The proxy's JSON log line saying it answered the call whose id is `id`.
fn answered_line(proxy: &Proxy, id: &str) -> Value {
    let line = proxy
        .log_line(LIMIT, |line| line.contains("answered") && line.contains(id))
        .unwrap_or_else(|| panic!("no log line for the call {id}"));
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
}

#[tokio::test]
async fn a_call_without_a_request_id_gets_one_that_the_upstream_the_log_and_the_collector_see() {
    let upstream = Upstream::tools(0);
    let collector = Collector::start();
    let proxy = proxy(
        &upstream,
        Some(&collector),
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let answer = echo(&proxy, r#"{"n":1}"#, &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");

    let id = answer.header("x-request-id").expect("an id given back");
    let uuid = uuid::Uuid::parse_str(id).unwrap_or_else(|_| panic!("not a UUID: {id}"));
    assert_eq!(uuid.get_version_num(), 7, "{id}");
    let seen = &answer.json()["headers"];
    assert_eq!(seen["x-request-id"][0], id, "the upstream saw it: {seen}");
    let sent = seen["traceparent"][0]
        .as_str()
        .expect("a traceparent sent on");
    let (trace_id, parent) = traceparent(sent);

    let line = answered_line(&proxy, id);
    let span = &line["span"];
    assert_eq!(span["request_id"], id, "{line}");
    assert_eq!(span["trace_id"], trace_id.as_str(), "{line}");
    assert_eq!(span["intent"], &answer.intent()[..12], "{line}");

    // The upstream's parent is the proxy's span, which starts the trace.
    let exported = collector.span(&parent).await;
    assert_eq!(hex(&exported.trace_id), trace_id);
    assert!(exported.parent_span_id.is_empty(), "a root span");
    assert_eq!(attribute(&exported, "request_id"), Some(id));
    assert_eq!(attribute(&exported, "trace_id"), Some(trace_id.as_str()));
    assert_eq!(attribute(&exported, "intent"), Some(&answer.intent()[..12]));
}

#[tokio::test]
async fn a_clients_traceparent_is_continued_by_the_proxys_span_and_exported_at_shutdown() {
    let upstream = Upstream::tools(0);
    let collector = Collector::start();
    // The exporter's batches wait their usual 5 s: only the shutdown sends them in time.
    let mut proxy = proxy(&upstream, Some(&collector), &[]);
    let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let sent = format!("00-{client_trace}-{client_span}-01");
    let headers = [
        ("traceparent", sent.as_str()),
        ("tracestate", "vendor=opaque"),
        ("x-request-id", "call-7"),
    ];
    let answer = echo(&proxy, r#"{"n":2}"#, &headers).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("x-request-id"), Some("call-7"));

    let seen = &answer.json()["headers"];
    let (trace_id, parent) = traceparent(seen["traceparent"][0].as_str().unwrap());
    assert_eq!(trace_id, client_trace, "the same trace: {seen}");
    assert_ne!(parent, client_span, "a span of the proxy's own: {seen}");
    assert_eq!(seen["tracestate"][0], "vendor=opaque", "{seen}");
    assert_eq!(seen["x-request-id"][0], "call-7", "{seen}");

    let line = answered_line(&proxy, "call-7");
    assert_eq!(line["span"]["trace_id"], client_trace, "{line}");

    proxy.terminate();
    let (code, stderr) = proxy.wait_exit(LIMIT);
    assert_eq!(code, Some(0), "{stderr}");
    let exported = collector.span(&parent).await;
    assert_eq!(hex(&exported.trace_id), client_trace);
    assert_eq!(
        hex(&exported.parent_span_id),
        client_span,
        "the client's span is its parent"
    );
    assert_eq!(attribute(&exported, "request_id"), Some("call-7"));
    // The layer's own span is the proxy span's child, in the same trace.
    let spans = collector.spans.lock().unwrap();
    let layers = spans.iter().find(|span| span.name == "idempotency");
    let layers = layers.expect("the layer's span exported");
    assert_eq!(hex(&layers.parent_span_id), parent);
    assert_eq!(hex(&layers.trace_id), client_trace);
}

#[tokio::test]
async fn spans_go_out_over_grpc_too_and_the_last_ones_at_shutdown() {
    let upstream = Upstream::tools(0);
    let collector = Collector::start_grpc();
    let flags = ["--otlp-protocol", "grpc"];
    let mut proxy = proxy_with(&upstream, Some(&collector), &[], &flags);
    let answer = echo(&proxy, r#"{"n":6}"#, &[("x-request-id", "over-grpc")]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let seen = &answer.json()["headers"];
    let (trace_id, parent) = traceparent(seen["traceparent"][0].as_str().unwrap());
    proxy.terminate();
    let (code, stderr) = proxy.wait_exit(LIMIT);
    assert_eq!(code, Some(0), "{stderr}");
    let exported = collector.span(&parent).await;
    assert_eq!(hex(&exported.trace_id), trace_id);
    assert_eq!(attribute(&exported, "request_id"), Some("over-grpc"));
}

#[tokio::test]
async fn without_an_exporter_the_trace_is_still_continued_and_a_new_one_started() {
    let upstream = Upstream::tools(0);
    let proxy = proxy(&upstream, None, &[]);
    let client_trace = "0af7651916cd43dd8448eb211c80319c";
    let sent = format!("00-{client_trace}-b7ad6b7169203331-01");
    let continued = echo(&proxy, r#"{"n":3}"#, &[("traceparent", &sent)]).await;
    let seen = &continued.json()["headers"];
    let (trace_id, parent) = traceparent(seen["traceparent"][0].as_str().unwrap());
    assert_eq!(trace_id, client_trace, "{seen}");
    assert_ne!(parent, "b7ad6b7169203331", "{seen}");

    let started = echo(&proxy, r#"{"n":4}"#, &[]).await;
    let id = started.header("x-request-id").unwrap().to_owned();
    let seen = &started.json()["headers"];
    let (trace_id, _) = traceparent(seen["traceparent"][0].as_str().unwrap());
    assert_ne!(trace_id, "0".repeat(32), "{seen}");
    let line = answered_line(&proxy, &id);
    assert_eq!(line["span"]["trace_id"], trace_id.as_str(), "{line}");
}

#[tokio::test]
async fn a_replay_gives_back_its_own_request_id_not_the_first_callers() {
    let upstream = Upstream::tools(0);
    let proxy = proxy(&upstream, None, &[]);
    let first = echo(&proxy, r#"{"n":5}"#, &[("x-request-id", "first")]).await;
    assert_eq!(first.header("x-request-id"), Some("first"));
    let again = echo(&proxy, r#"{"n":5}"#, &[("x-request-id", "second")]).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, first.body, "the tool's answer, byte for byte");
    assert_eq!(again.header("x-request-id"), Some("second"));
    let minted = echo(&proxy, r#"{"n":5}"#, &[]).await;
    assert!(minted.replayed());
    let id = minted.header("x-request-id").unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
}

#[tokio::test]
async fn the_layers_own_answers_say_the_request_id_in_problem_documents_and_mcp_meta() {
    let upstream = Upstream::tools(0);
    let config = config_file("[[routes]]\nprefix = \"/tools/mcp\"\nmode = \"mcp\"\n");
    let path = config.path().to_str().unwrap();
    let proxy = Proxy::in_front_of(&upstream.url(), &["--config", path]);

    // No session: refused, nothing run, in a problem document.
    let refused = support::answer(
        client()
            .post(format!("{}/tools/send_email", proxy.url))
            .header("content-type", "application/json")
            .header("x-request-id", "req-400")
            .body(r#"{"to":"a@example.com"}"#),
    )
    .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(refused.json()["request_id"], "req-400", "{refused:?}");
    assert_eq!(refused.header("x-request-id"), Some("req-400"));

    // The status path's answer, with an id the proxy minted.
    let unknown = support::answer(
        client()
            .get(format!("{}/_idempotency/{}", proxy.url, "0".repeat(64)))
            .header("x-session-id", "s1"),
    )
    .await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let minted = unknown.header("x-request-id").unwrap();
    assert_eq!(unknown.json()["request_id"], minted, "{unknown:?}");

    // The proxy's own answer, where the upstream gave none, says it too.
    let lost = support::answer(
        client()
            .post(format!("{}/tools/reset", proxy.url))
            .header("content-type", "application/json")
            .header("x-session-id", "s1")
            .header("x-request-id", "req-502")
            .body("{}"),
    )
    .await;
    assert_eq!(lost.status, 502, "{lost:?}");
    assert_eq!(lost.json()["outcome"], "unknown", "{lost:?}");
    assert_eq!(lost.json()["request_id"], "req-502", "{lost:?}");
    // At `RUST_LOG=warn` the warning about it still carries the call's id, trace and intent.
    let warned = proxy
        .log_line(LIMIT, |line| line.contains("connection broke"))
        .expect("a warning about the lost answer");
    assert!(warned.contains("request_id=\"req-502\""), "{warned}");
    assert!(warned.contains("trace_id="), "{warned}");
    let intent = format!("intent=\"{}\"", &lost.intent()[..12]);
    assert!(warned.contains(&intent), "{warned}");

    // An MCP call that names no caller: the layer's tool result says the id in `_meta`.
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"a@example.com"}}}"#;
    let answer = support::answer(
        client()
            .post(format!("{}/tools/mcp", proxy.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-request-id", "req-mcp")
            .body(call),
    )
    .await;
    let data = answer
        .text()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "));
    let message: Value = serde_json::from_str(data.unwrap_or(answer.text())).unwrap();
    let result = &message["result"];
    assert_eq!(result["isError"], true, "{message}");
    assert_eq!(
        result["structuredContent"]["outcome"], "not_executed",
        "{message}"
    );
    assert_eq!(result["_meta"]["request_id"], "req-mcp", "{message}");
    assert_eq!(support::stats(&upstream.url()).await.get("mcp"), None);
}
