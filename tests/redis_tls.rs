//! Redis over TLS, as managed Redis services require: a real `redis-server` started with a
//! `tls-port` and a certificate authority this test makes (with the `openssl` tool), reached
//! through a `rediss://` URL and through a connection the application builds itself.
#![cfg(all(feature = "redis-tls", feature = "conformance"))]

mod support;

use std::path::Path;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, TlsCertificates};
use support::certificates::{certificates, Certificates};
use support::redis_tls::{tls_cluster, TlsServer};
use tower_idempotency::store::{conformance, RedisStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_reached_through_a_rediss_url_conforms() {
    let server = TlsServer::start(certificates());
    let store = RedisStore::connect(&server.url()).await.unwrap();
    conformance::assert_conforms(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_application_builds_with_its_own_authority_serves_the_store() {
    // An authority of its own, not the one `SSL_CERT_FILE` names for the other tests: only the
    // root the client is given can make this server trusted.
    let certificates = &Certificates::make();
    let server = TlsServer::start(certificates);
    let authority = std::fs::read(Path::new(&certificates.path("ca.crt"))).unwrap();
    let client = Client::build_with_tls(
        server.url(),
        TlsCertificates {
            client_tls: None,
            root_cert: Some(authority),
        },
    )
    .unwrap();
    let manager = ConnectionManager::new(client).await.unwrap();
    let store = RedisStore::builder()
        .from_connection_manager(manager)
        .await
        .unwrap();
    conformance::assert_conforms(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_url_to_the_tls_port_is_refused_at_connect() {
    let server = TlsServer::start(certificates());
    let plain = format!("redis://127.0.0.1:{}", server.tls_port);
    let connected = RedisStore::builder()
        .call_timeout(Duration::from_secs(2))
        .connect(&plain)
        .await;
    assert!(
        connected.is_err(),
        "no store over a connection that speaks no TLS"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_store_over_tls_conforms() {
    let nodes = tls_cluster(certificates());
    let urls: Vec<String> = nodes.iter().map(TlsServer::url).collect();
    let store = RedisStore::connect_cluster(&urls).await.unwrap();
    conformance::assert_conforms(&store).await;
}
