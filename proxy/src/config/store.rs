//! Which store the flags and the file name, checked: one kind, with a URL of its scheme; and
//! the crate's builder for it.

use tower_idempotency::store::{redacted, AnyStore, AnyStoreBuilder, Backend, StoreError};

use super::file::StoreTable;
use super::{ConfigError, Store, StoreKind};
use crate::cli::Cli;

pub(super) fn store(
    cli: &Cli,
    table: &StoreTable,
    where_: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<Store, ConfigError> {
    let redis = |url: &str| url_of(url, Backend::Redis, "Redis", "redis://127.0.0.1:6379");
    let postgres = |url: &str| {
        let example = "postgres://app@127.0.0.1:5432/app";
        url_of(url, Backend::Postgres, "PostgreSQL", example)
    };
    let kind = if let Some(url) = &cli.postgres_url {
        StoreKind::Postgres(postgres(url).map_err(|m| ConfigError(format!("--postgres-url: {m}")))?)
    } else if let Some(url) = &cli.redis_url {
        StoreKind::Redis(redis(url).map_err(|m| ConfigError(format!("--redis-url: {m}")))?)
    } else if !cli.redis_cluster_urls.is_empty() {
        let urls = cli
            .redis_cluster_urls
            .iter()
            .map(|u| redis(u))
            .collect::<Result<_, _>>()
            .map_err(|m| ConfigError(format!("--redis-cluster-urls: {m}")))?;
        StoreKind::Cluster(urls)
    } else if let Some(url) = &table.postgres_url {
        if table.redis_url.is_some() || table.redis_cluster_urls.is_some() {
            return Err(ConfigError(format!(
                "{}: [store] names both Postgres and Redis: keep one",
                where_(url.span())
            )));
        }
        StoreKind::Postgres(
            postgres(url.get_ref()).map_err(|m| {
                ConfigError(format!("{}: store.postgres_url: {m}", where_(url.span())))
            })?,
        )
    } else {
        match (&table.redis_url, &table.redis_cluster_urls) {
            (Some(_), Some(urls)) => {
                return Err(ConfigError(format!(
                    "{}: [store] names both `redis_url` and `redis_cluster_urls`: keep one",
                    where_(urls.span())
                )))
            }
            (Some(url), None) => StoreKind::Redis(redis(url.get_ref()).map_err(|m| {
                ConfigError(format!("{}: store.redis_url: {m}", where_(url.span())))
            })?),
            (None, Some(urls)) if urls.get_ref().is_empty() => {
                return Err(ConfigError(format!(
                    "{}: store.redis_cluster_urls is empty: list the nodes, like \
                     [\"redis://127.0.0.1:7000\"]",
                    where_(urls.span())
                )))
            }
            (None, Some(urls)) => StoreKind::Cluster(
                urls.get_ref()
                    .iter()
                    .map(|u| redis(u))
                    .collect::<Result<_, _>>()
                    .map_err(|m| {
                        ConfigError(format!(
                            "{}: store.redis_cluster_urls: {m}",
                            where_(urls.span())
                        ))
                    })?,
            ),
            (None, None) => StoreKind::Memory,
        }
    };
    Ok(Store {
        kind,
        prefix: table.prefix.clone(),
        memory_max_bytes: table.memory_max_bytes,
        local_ttl: (table.local_ttl.as_ref())
            .map_or(tower_idempotency::store::DEFAULT_LOCAL_TTL, |d| d.0),
        call_timeout: table.call_timeout.as_ref().map(|d| d.0),
        fail_open: table.fail_open.unwrap_or(false),
    })
}

/// `url` if the crate reads it as a URL of `backend` that this build has; else what a URL of
/// `what` looks like, and `url` without its password.
fn url_of(url: &str, backend: Backend, what: &str, example: &str) -> Result<String, String> {
    if Backend::of(url) != Some(backend) {
        return Err(format!(
            "`{}` is not a {what} URL: expected one like {example}",
            redacted(url)
        ));
    }
    // A store whose feature this build lacks (`rediss://` without `redis-tls`) is refused here.
    AnyStore::builder(url)
        .map(|_| url.to_owned())
        .map_err(|error| error.to_string())
}

impl Store {
    /// The crate's builder for this store, with the file's settings: Redis keys under the
    /// prefix (`default_prefix` where none is set), and the local cache in front of a shared
    /// store.
    pub fn builder(
        &self,
        default_prefix: impl FnOnce() -> String,
    ) -> Result<AnyStoreBuilder, StoreError> {
        let builder = match &self.kind {
            StoreKind::Memory => AnyStore::builder("memory"),
            StoreKind::Redis(url) | StoreKind::Postgres(url) => AnyStore::builder(url),
            StoreKind::Cluster(nodes) => AnyStore::cluster_builder(nodes),
        }?;
        let prefix = self.prefix.clone().unwrap_or_else(default_prefix);
        let mut builder = builder.prefix(prefix).local_ttl(self.local_ttl);
        if let Some(timeout) = self.call_timeout {
            builder = builder.call_timeout(timeout);
        }
        if let Some(bytes) = self.memory_max_bytes {
            builder = builder.max_bytes(bytes);
        }
        Ok(builder)
    }
}
