//! The Postgres store over TLS, on a PostgreSQL the tests start with a certificate of the
//! tests' own authority and that refuses plain connections over TCP: with `sslmode=require`
//! it conforms; without TLS, or with a server it cannot trust, it does not connect; with
//! `sslmode=prefer` (the default) it tries TLS first, and takes plain text only from a server
//! that has no TLS.
#![cfg(all(feature = "postgres-tls", feature = "conformance"))]

mod support;

use support::certificates::{certificates, Certificates};
use support::postgres_server::PostgresServer;
use tower_idempotency::store::{conformance, PostgresStore};

fn server_of(certificates: &Certificates) -> PostgresServer {
    let (cert, key) = (
        certificates.path("server.crt"),
        certificates.path("server.key"),
    );
    PostgresServer::start_with_tls(&cert, &key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_over_tls_conforms_and_a_plain_connection_is_refused() {
    let server = server_of(certificates());
    let store = PostgresStore::connect(&format!("{}?sslmode=require", server.url()))
        .await
        .expect("the store connects over TLS");
    conformance::assert_conforms(&store).await;
    let plain = PostgresStore::connect(&format!("{}?sslmode=disable", server.url())).await;
    let error = plain
        .expect_err("the server refuses plain connections")
        .to_string();
    assert!(
        error.contains("no encryption") || error.contains("pg_hba"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_server_whose_certificate_no_trusted_authority_signed_is_refused() {
    // The process trusts the tests' authority; this server's comes from another.
    certificates();
    let server = server_of(&Certificates::make());
    let store = PostgresStore::connect(&format!("{}?sslmode=require", server.url())).await;
    let error = store.expect_err("an untrusted server").to_string();
    assert!(error.contains("certificate"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_prefers_tls_or_names_no_sslmode_connects_over_tls() {
    // The server refuses plain connections over TCP: connecting is connecting over TLS.
    let server = server_of(certificates());
    for url in [format!("{}?sslmode=prefer", server.url()), server.url()] {
        let store = PostgresStore::connect(&url).await;
        assert!(store.is_ok(), "{url}: {:?}", store.err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_prefers_tls_connects_in_plain_text_to_a_server_without_it() {
    certificates();
    let server = PostgresServer::start();
    let store = PostgresStore::connect(&format!("{}?sslmode=prefer", server.url())).await;
    assert!(store.is_ok(), "{:?}", store.err());
}
