use super::{AnyStore, Backend};
use crate::store::answers_at_once;

const SECRET: &str = "S3cr3tPw";

fn refused(url: &str) -> String {
    AnyStore::builder(url)
        .expect_err("a URL that names no store here")
        .to_string()
}

#[test]
fn each_scheme_names_its_backend() {
    let cases = [
        ("memory", Some(Backend::Memory)),
        ("memory://", Some(Backend::Memory)),
        ("redis://127.0.0.1:6379", Some(Backend::Redis)),
        (
            "rediss://user:pw@redis.example.com:6380/0",
            Some(Backend::Redis),
        ),
        (
            "redis://10.0.0.1:7000,redis://10.0.0.2:7000",
            Some(Backend::RedisCluster),
        ),
        ("postgres://app@db/app", Some(Backend::Postgres)),
        ("postgresql://app@db/app", Some(Backend::Postgres)),
        ("mysql://db/app", None),
        ("127.0.0.1:6379", None),
        ("host=db dbname=app", None),
        ("", None),
        ("memory:", None),
        ("redis://10.0.0.1:7000,postgres://db/app", None),
    ];
    for (url, backend) in cases {
        assert_eq!(Backend::of(url), backend, "{url}");
    }
}

#[test]
fn a_comma_in_a_password_never_splits_a_url() {
    assert_eq!(Backend::of("redis://:a,b@h1:6379"), Some(Backend::Redis));
    assert_eq!(
        Backend::of("redis://:a,b@h1:7000,redis://:c,d@h2:7000"),
        Some(Backend::RedisCluster)
    );
}

#[test]
fn an_unknown_scheme_is_refused_saying_what_names_a_store() {
    let error = refused("mysql://db/app");
    assert!(error.contains("`mysql://db/app` names no store"), "{error}");
    assert!(error.contains("redis://HOST:PORT"), "{error}");
    assert!(error.contains("postgres://"), "{error}");
}

#[test]
fn a_password_in_a_refused_url_is_never_shown() {
    let cases = [
        format!("mysql://app:{SECRET}@db/app"),
        format!("postgresql+asyncpg://app:{SECRET}@db.internal/app"),
        format!("http://:{SECRET}@127.0.0.1:6379"),
        format!("redis://127.0.0.1:7000,http://:{SECRET}@127.0.0.1:7001"),
        format!("host=db password={SECRET} dbname=app"),
        format!("db/app?password={SECRET}"),
    ];
    for url in cases {
        let error = refused(&url);
        assert!(!error.contains(SECRET), "the password is shown: {error}");
        assert!(error.contains("***"), "{error}");
    }
    let nodes = [
        "redis://127.0.0.1:7000".to_owned(),
        format!("http://:{SECRET}@h:1"),
    ];
    let error = AnyStore::cluster_builder(&nodes).unwrap_err().to_string();
    assert!(!error.contains(SECRET), "the password is shown: {error}");
    assert!(
        error.contains("`http://:***@h:1` is not a Redis URL"),
        "{error}"
    );
}

#[test]
fn a_cluster_of_no_nodes_is_refused() {
    let error = AnyStore::cluster_builder::<&str>(&[]).unwrap_err();
    assert!(error.to_string().contains("at least one"), "{error}");
}

#[cfg(not(feature = "redis"))]
#[test]
fn a_redis_url_without_the_redis_feature_is_refused_naming_it() {
    for url in ["redis://127.0.0.1:6379", "redis://h1:7000,redis://h2:7000"] {
        let error = refused(url);
        assert!(error.contains("`redis` feature"), "{error}");
    }
}

#[cfg(all(feature = "redis", not(feature = "redis-tls")))]
#[test]
fn a_rediss_url_without_the_tls_feature_is_refused_naming_it() {
    let error = refused(&format!("rediss://:{SECRET}@redis.example.com:6380"));
    assert!(error.contains("`redis-tls` feature"), "{error}");
    assert!(!error.contains(SECRET), "{error}");
}

#[cfg(not(feature = "postgres"))]
#[test]
fn a_postgres_url_without_the_postgres_feature_is_refused_naming_it() {
    let error = refused("postgres://app@db/app");
    assert!(error.contains("`postgres` feature"), "{error}");
}

#[tokio::test]
async fn memory_is_the_memory_store_and_answers_at_once() {
    let store = AnyStore::from_url("memory").await.unwrap();
    assert_eq!(store.backend(), Backend::Memory);
    assert!(store.memory().is_some());
    assert!(!store.is_tiered());
    // The layer's fast path for a store in process memory is kept through the erasure.
    assert!(answers_at_once(&store));
}

#[tokio::test]
async fn memory_takes_its_budget_and_no_cache() {
    let builder = AnyStore::builder("memory")
        .unwrap()
        .max_bytes(4096)
        .tiered();
    assert_eq!(builder.backend(), Backend::Memory);
    let store = builder.build().await.unwrap();
    assert!(!store.is_tiered());
    assert_eq!(store.memory().map(|m| m.weighted_size()), Some(0));
}

#[tokio::test]
async fn the_layer_takes_it_with_its_operator_api_and_for_mcp() {
    let store = AnyStore::from_url("memory").await.unwrap();
    let layer = crate::IdempotencyLayer::new().store(store);
    let _operator = layer.admin();
    #[cfg(feature = "mcp")]
    let _mcp = layer.clone().mcp().tasks();
    assert_eq!(layer.store_ref().backend(), Backend::Memory);
}

/// A port on loopback with nothing listening.
#[cfg(any(feature = "redis", feature = "postgres"))]
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[cfg(any(feature = "redis", feature = "postgres"))]
fn assert_named_without_password(error: &crate::store::StoreError, shown: &str) {
    let error = error.to_string();
    assert!(!error.contains(SECRET), "the password is shown: {error}");
    assert!(error.contains(shown), "{error}");
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_redis_store_that_cannot_be_reached_is_named_without_its_password() {
    let port = closed_port();
    let url = format!("redis://app:{SECRET}@127.0.0.1:{port}");
    let error = AnyStore::builder(&url)
        .unwrap()
        .call_timeout(std::time::Duration::from_millis(300))
        .build()
        .await
        .unwrap_err();
    let shown = format!("cannot connect to Redis at redis://app:***@127.0.0.1:{port}");
    assert_named_without_password(&error, &shown);
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_store_that_cannot_be_reached_is_named_without_its_password() {
    let port = closed_port();
    let url = format!("postgres://app:{SECRET}@127.0.0.1:{port}/app?sslmode=disable");
    let error = AnyStore::from_url(&url).await.unwrap_err();
    let shown = format!("cannot connect to PostgreSQL at postgres://app:***@127.0.0.1:{port}/app");
    assert_named_without_password(&error, &shown);
}

#[test]
fn a_redis_cluster_url_names_each_host_with_its_credentials_and_path() {
    let nodes = super::url::cluster_hosts("redis+cluster://:p,w@a:7000,b:7001/2").unwrap();
    assert_eq!(nodes, ["redis://:p,w@a:7000/2", "redis://:p,w@b:7001/2"]);
    let nodes = super::url::cluster_hosts("rediss+cluster://a:7000").unwrap();
    assert_eq!(nodes, ["rediss://a:7000"]);
    assert_eq!(super::url::cluster_hosts("redis://a:7000"), None);
    assert_eq!(
        Backend::of("redis+cluster://a:7000,b:7001"),
        Some(Backend::RedisCluster)
    );
}
