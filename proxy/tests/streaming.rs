//! What the proxy does not keep, it streams frame by frame; and it handles headers as a
//! proxy should. The upstream holds its second SSE event until the client has seen the
//! first, so a proxy that buffered would never deliver either in time.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use support::{client, Proxy, Upstream};

/// Reads the SSE answer to `request`, telling the upstream once event one has arrived.
async fn events_one_then_two(request: reqwest::RequestBuilder, upstream: &str) {
    let response = request.send().await.expect("an answer");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let first = tokio::time::timeout(Duration::from_secs(5), async {
        while !seen.contains("data: one\n\n") {
            let chunk = stream.next().await.expect("more").expect("a chunk");
            seen.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    })
    .await;
    assert!(
        first.is_ok(),
        "event one did not arrive on its own: {seen:?}"
    );
    assert!(!seen.contains("two"), "{seen:?}");
    client()
        .get(format!("{upstream}/sse/seen"))
        .send()
        .await
        .unwrap();
    while let Some(chunk) = stream.next().await {
        seen.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    assert_eq!(seen, "data: one\n\ndata: two\n\n");
}

#[tokio::test]
async fn a_get_event_stream_arrives_event_by_event() {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let proxy = Proxy::in_front_of(&url, &[]);
    events_one_then_two(client().get(format!("{}/events", proxy.url)), &url).await;
}

#[tokio::test]
async fn a_pass_through_routes_sse_answer_to_a_post_arrives_event_by_event() {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let routes = "[[routes]]\nprefix = \"/tools/stream\"\nmode = \"pass\"\n";
    let (proxy, _config) = support::proxy_with_config(&url, routes);
    let request = client()
        .post(format!("{}/tools/stream", proxy.url))
        .header("x-session-id", "s1")
        .body("{}");
    events_one_then_two(request, &url).await;
    // Passed through: every call runs.
    let again = client()
        .post(format!("{}/tools/stream", proxy.url))
        .header("x-session-id", "s1")
        .body("{}");
    events_one_then_two(again, &url).await;
    assert_eq!(support::stats(&url).await["stream"], 2);
}

async fn headers_seen(proxy: &str, host: &str) -> (serde_json::Value, reqwest::header::HeaderMap) {
    let answer = support::answer(
        client()
            .get(format!("{proxy}/headers?x=1"))
            .header("host", host)
            .header("connection", "x-hop")
            .header("x-hop", "dropped")
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-session-id", "s1"),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    (answer.json(), answer.headers)
}

#[tokio::test]
async fn hop_by_hop_headers_stay_on_their_hop_and_the_upstream_learns_who_asked() {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let proxy = Proxy::in_front_of(&url, &[]);
    let (seen, answered) = headers_seen(&proxy.url, "tools.example:8443").await;
    let headers = &seen["headers"];
    assert_eq!(seen["path"], "/headers?x=1");
    assert!(headers.get("x-hop").is_none(), "{headers}");
    assert_eq!(headers["x-session-id"][0], "s1");
    // A client's own x-forwarded-for is dropped: the upstream hears who this proxy saw.
    assert_eq!(headers["x-forwarded-for"][0], "127.0.0.1");
    assert_eq!(
        headers["forwarded"][0],
        "for=127.0.0.1;proto=http;host=\"tools.example:8443\""
    );
    assert_eq!(headers["x-forwarded-proto"][0], "http");
    // Host is kept by default.
    assert_eq!(headers["host"][0], "tools.example:8443");
    // The upstream's own hop-by-hop headers stay with it.
    assert!(answered.get("x-upstream-hop").is_none(), "{answered:?}");
    assert_eq!(answered["x-kept"], "1");
}

#[tokio::test]
async fn host_is_rewritten_to_the_upstreams_when_configured() {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let (proxy, _config) = support::proxy_with_config(&url, "[upstream]\nhost = \"rewrite\"\n");
    let (seen, _) = headers_seen(&proxy.url, "tools.example:8443").await;
    assert_eq!(
        seen["headers"]["host"][0],
        format!("127.0.0.1:{}", upstream.port)
    );
    assert_eq!(seen["headers"]["x-forwarded-host"][0], "tools.example:8443");
}

#[tokio::test]
async fn calls_in_sequence_reuse_one_pooled_upstream_connection() {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let proxy = Proxy::in_front_of(&url, &[]);
    let mut ports = std::collections::HashSet::new();
    for _ in 0..5 {
        // A new client each time: a new connection to the proxy, not to the upstream.
        let (seen, _) = headers_seen(&proxy.url, "tools.example").await;
        ports.insert(seen["peer_port"].as_u64().unwrap());
        // The connection goes back to the pool just after the answer's last byte.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(ports.len(), 1, "{ports:?}");
}

#[tokio::test]
async fn an_http2_callers_authority_is_kept_as_host_and_a_trusted_proxys_hops_are_kept() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let proxy = Proxy::in_front_of(&url, &["--trusted-proxies", "127.0.0.1"]);
    let addr = proxy.url.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 connection (prior knowledge)");
    tokio::spawn(connection);
    let request = http::Request::get("http://tools.example:8443/headers")
        .header("x-forwarded-for", "203.0.113.7")
        .header("forwarded", "for=203.0.113.7")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let seen: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let headers = &seen["headers"];
    assert_eq!(headers["host"][0], "tools.example:8443", "{headers}");
    assert_eq!(headers["x-forwarded-host"][0], "tools.example:8443");
    assert_eq!(headers["x-forwarded-for"][0], "203.0.113.7, 127.0.0.1");
    assert_eq!(
        headers["forwarded"][0],
        "for=203.0.113.7, for=127.0.0.1;proto=http;host=\"tools.example:8443\""
    );
}

#[tokio::test]
async fn a_header_the_connection_header_names_is_neither_keyed_on_nor_forwarded() {
    // `Connection: x-session-id` makes the session hop-by-hop: the upstream never sees it, so
    // the layer must not scope the call by it either. Without a scope the call is refused,
    // nothing run, as any call without one.
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let answer = support::answer(
        client()
            .post(format!("{}/tools/send_email", proxy.url))
            .header("content-type", "application/json")
            .header("connection", "x-session-id")
            .header("x-session-id", "s1")
            .body(r#"{"to":"ada@example.com"}"#),
    )
    .await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(answer.json()["outcome"], "not_executed", "{answer:?}");
    let sent = support::stats(&upstream.url()).await["send_email"].as_u64();
    assert_eq!(sent.unwrap_or(0), 0, "nothing ran");
}
