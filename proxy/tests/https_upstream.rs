//! `https://` upstreams: the tool server speaks TLS with a certificate of the tests' own
//! authority, which the proxy trusts through `SSL_CERT_FILE` or `ca_file`; a client
//! certificate where the upstream asks for one; HTTP/2 where the upstream offers it.

mod support;

use std::sync::Arc;

use http::StatusCode;
use serde_json::Value;
use support::certificates::Certificates;
use support::{post, proxy_with_config, Proxy, Upstream};

const EMAIL: &str = r#"{"to":"a@example.com","subject":"hi"}"#;

/// The Python tool server over TLS; `client_ca`: it asks for a client certificate.
fn tls_upstream(certificates: &Certificates, client_ca: bool) -> (Upstream, String) {
    let (cert, key, ca) = (
        certificates.path("server.crt"),
        certificates.path("server.key"),
        certificates.path("ca.crt"),
    );
    let mut args = vec!["0", cert.as_str(), key.as_str()];
    if client_ca {
        args.push(ca.as_str());
    }
    let upstream = Upstream::start("tool_server.py", &args);
    let url = format!("https://127.0.0.1:{}", upstream.port);
    (upstream, url)
}

fn proxy_trusting(url: &str, ca_file: &str) -> Proxy {
    Proxy::start_with_env(
        &["--upstream", url, "--listen", "127.0.0.1:0"],
        &[("SSL_CERT_FILE", ca_file)],
    )
}

/// Sends the same call twice: the first runs, the second is its replay.
async fn sent_twice_ran_once(proxy: &Proxy) {
    let first = post(&proxy.url, "/tools/send_email", Some("s"), EMAIL).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    let second = post(&proxy.url, "/tools/send_email", Some("s"), EMAIL).await;
    assert_eq!(second.status, StatusCode::OK);
    assert!(second.replayed(), "the repeat was replayed");
    let stats = support::stats(&proxy.url).await;
    assert_eq!(stats["send_email"], 1, "{stats}");
}

#[tokio::test]
async fn an_https_upstream_trusted_through_ssl_cert_file_runs_each_call_once() {
    let certificates = Certificates::make();
    let (_upstream, url) = tls_upstream(&certificates, false);
    let proxy = proxy_trusting(&url, &certificates.path("ca.crt"));
    sent_twice_ran_once(&proxy).await;
}

#[tokio::test]
async fn an_https_upstream_the_proxy_does_not_trust_is_answered_not_executed() {
    let certificates = Certificates::make();
    let stranger = Certificates::make();
    let (_upstream, url) = tls_upstream(&certificates, false);
    let proxy = proxy_trusting(&url, &stranger.path("ca.crt"));
    let refused = post(&proxy.url, "/tools/send_email", Some("s"), EMAIL).await;
    let body = refused.json();
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["outcome"], "not_executed", "{body}");
    // Through a proxy that trusts it, the upstream shows it never ran.
    let trusting = proxy_trusting(&url, &certificates.path("ca.crt"));
    let stats = support::stats(&trusting.url).await;
    assert!(stats.is_object(), "{stats}");
    assert_eq!(stats["send_email"].as_u64().unwrap_or(0), 0, "{stats}");
}

#[tokio::test]
async fn the_file_names_the_authority_and_the_client_certificate_an_upstream_asks_for() {
    let certificates = Certificates::make();
    let (_upstream, url) = tls_upstream(&certificates, true);
    let file = format!(
        "[upstream]\nurl = \"{url}\"\nca_file = \"{}\"\nclient_cert = \"{}\"\nclient_key = \"{}\"\n",
        certificates.path("ca.crt"),
        certificates.path("client.crt"),
        certificates.path("client.key"),
    );
    let (proxy, _file) = proxy_with_config(&url, &file);
    sent_twice_ran_once(&proxy).await;
}

/// An upstream over TLS that offers HTTP/2 (and HTTP/1.1) and answers with the version each
/// request came in.
async fn http2_upstream(certificates: &Certificates) -> String {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let chain = CertificateDer::pem_file_iter(certificates.path("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(certificates.path("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(|request: http::Request<_>| async move {
                    let version = format!("{:?}", request.version());
                    let host = (request.headers().get("host"))
                        .map(|host| host.to_str().unwrap_or_default().to_owned());
                    let authority = request.uri().authority().map(ToString::to_string);
                    let body = serde_json::json!({
                        "version": version,
                        "host": host,
                        "authority": authority,
                    })
                    .to_string();
                    Ok::<_, std::convert::Infallible>(
                        http::Response::builder()
                            .header("content-type", "application/json")
                            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                            .unwrap(),
                    )
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("https://127.0.0.1:{port}")
}

/// The proxy in front of the HTTP/2 upstream, trusting it through `SSL_CERT_FILE`, with the
/// file's `[upstream]` `host`.
async fn in_front_of_http2(host: &str) -> (Value, tempfile::NamedTempFile) {
    let certificates = Certificates::make();
    let url = http2_upstream(&certificates).await;
    let file = support::config_file(&format!("[upstream]\nhost = \"{host}\"\n"));
    let proxy = Proxy::start_with_env(
        &[
            "--upstream",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--config",
            file.path().to_str().unwrap(),
        ],
        &[("SSL_CERT_FILE", &certificates.path("ca.crt"))],
    );
    let answer = post(&proxy.url, "/tools/version", Some("s"), "{}").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    (answer.json(), file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_offers_http2_is_spoken_to_in_http2_under_its_own_name() {
    let (heard, _file) = in_front_of_http2("rewrite").await;
    assert_eq!(heard["version"], "HTTP/2.0", "{heard}");
    assert_eq!(heard["host"], Value::Null, "{heard}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_host_kept_is_the_only_name_the_upstream_hears() {
    // Over HTTP/2 the upstream's own name would ride in `:authority` beside the client's
    // `Host`, which a server may refuse as malformed: with `host = "keep"` the proxy speaks
    // HTTP/1.1.
    let (heard, _file) = in_front_of_http2("keep").await;
    assert_eq!(heard["version"], "HTTP/1.1", "{heard}");
    assert!(
        heard["host"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{heard}"
    );
}
