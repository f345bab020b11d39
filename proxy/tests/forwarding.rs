//! The forwarding headers the upstream is sent: by default the proxy's own, whatever a client
//! wrote; a client's kept and extended only when the TCP peer is one of `trusted_proxies`.

mod support;

use support::{client, Proxy, Upstream};

/// What the upstream's `/headers` saw of a GET sent with `Host: tools.example:8443` and the
/// forwarding headers a client might write itself.
async fn seen_through(proxy: &Proxy) -> serde_json::Value {
    let answer = support::answer(
        client()
            .get(format!("{}/headers", proxy.url))
            .header("host", "tools.example:8443")
            .header("x-forwarded-host", "evil.example")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-forwarded-prefix", "/admin")
            .header("forwarded", "for=203.0.113.9;host=evil.example;proto=https")
            .header("x-session-id", "s1"),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["headers"].clone()
}

#[tokio::test]
async fn a_client_forwarded_host_is_replaced_by_the_proxys_own() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let headers = seen_through(&proxy).await;
    assert_eq!(
        headers["x-forwarded-host"],
        serde_json::json!(["tools.example:8443"]),
        "{headers}"
    );
}

#[tokio::test]
async fn a_client_forwarded_proto_https_over_plain_http_reaches_the_upstream_as_http() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let headers = seen_through(&proxy).await;
    assert_eq!(
        headers["x-forwarded-proto"],
        serde_json::json!(["http"]),
        "{headers}"
    );
}

#[tokio::test]
async fn a_client_forwarded_header_and_its_other_x_forwarded_headers_are_dropped() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let headers = seen_through(&proxy).await;
    // Only this hop, as the proxy saw it.
    assert_eq!(
        headers["forwarded"],
        serde_json::json!(["for=127.0.0.1;proto=http;host=\"tools.example:8443\""]),
        "{headers}"
    );
    assert_eq!(
        headers["x-forwarded-for"],
        serde_json::json!(["127.0.0.1"]),
        "{headers}"
    );
    assert!(headers.get("x-forwarded-prefix").is_none(), "{headers}");
    // What the proxy does not write passes through.
    assert_eq!(headers["x-session-id"][0], "s1");
}

#[tokio::test]
async fn from_a_trusted_proxy_the_clients_forwarding_headers_are_kept_and_the_peer_appended() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(
        &upstream.url(),
        "trusted_proxies = [\"10.0.0.0/8\", \"127.0.0.1/32\"]\n",
    );
    let headers = seen_through(&proxy).await;
    assert_eq!(headers["x-forwarded-host"][0], "evil.example", "{headers}");
    assert_eq!(headers["x-forwarded-proto"][0], "https", "{headers}");
    assert_eq!(headers["x-forwarded-for"][0], "203.0.113.9, 127.0.0.1");
    assert_eq!(headers["x-forwarded-prefix"][0], "/admin");
    assert_eq!(
        headers["forwarded"][0],
        "for=203.0.113.9;host=evil.example;proto=https, \
         for=127.0.0.1;proto=http;host=\"tools.example:8443\""
    );
}

#[tokio::test]
async fn a_trusted_proxy_range_that_does_not_hold_the_peer_keeps_nothing_of_the_clients() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &["--trusted-proxies", "10.0.0.0/8,::1"]);
    let headers = seen_through(&proxy).await;
    assert_eq!(headers["x-forwarded-host"][0], "tools.example:8443");
    assert_eq!(headers["x-forwarded-for"][0], "127.0.0.1", "{headers}");
}

#[test]
fn a_trusted_proxies_entry_that_is_no_address_range_is_refused_naming_the_setting() {
    let file = support::config_file("trusted_proxies = [\"10.0.0.0/33\"]\n");
    let path = file.path().to_str().unwrap();
    let (code, stderr) = support::refused(&["--upstream", "http://127.0.0.1:1", "--config", path]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("trusted_proxies"), "{stderr}");
    assert!(stderr.contains("10.0.0.0/33"), "{stderr}");
    assert!(stderr.contains("10.0.0.0/8"), "an example: {stderr}");
    let (code, stderr) = support::refused(&[
        "--upstream",
        "http://127.0.0.1:1",
        "--trusted-proxies",
        "office",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--trusted-proxies"), "{stderr}");
    assert!(stderr.contains("`office`"), "{stderr}");
}
