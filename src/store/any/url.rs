//! Which store a URL names: read from its scheme, checked against the features this build has.
//!
//! Only the scheme is read here, by hand: the rest of the URL is parsed by the store's own
//! client when it connects (redis-rs, tokio-postgres), so a URL means exactly what it means to
//! that client; and a URL that is refused may be one no parser takes, yet must be named in the
//! error without its password.

use std::fmt;

use super::redaction::redacted;
use crate::store::StoreError;

/// The kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `memory` (or `memory://`): a [`MemoryStore`](crate::store::MemoryStore) in this process.
    Memory,
    /// `redis://…` or `rediss://…` (TLS): one Redis server.
    Redis,
    /// A Redis Cluster: `redis+cluster://HOST:PORT,HOST:PORT,…` (`rediss+cluster://` over TLS;
    /// credentials and a path, where given, hold for every node), or two or more `redis://` or
    /// `rediss://` node URLs separated by commas.
    RedisCluster,
    /// `postgres://…` or `postgresql://…`.
    Postgres,
}

impl Backend {
    /// The backend `url` names by its scheme, whether or not this build has its feature; `None`
    /// where it names no store this crate has.
    ///
    /// ```
    /// use tower_idempotency::store::Backend;
    ///
    /// assert_eq!(Backend::of("rediss://10.0.0.5:6380"), Some(Backend::Redis));
    /// assert_eq!(Backend::of("mysql://db/app"), None);
    /// ```
    pub fn of(url: &str) -> Option<Self> {
        if cluster_hosts(url).is_some() {
            return Some(Self::RedisCluster);
        }
        let nodes = nodes(url);
        if nodes.len() > 1 {
            let all_redis = nodes.iter().all(|node| redis_scheme(node).is_some());
            return all_redis.then_some(Self::RedisCluster);
        }
        if url == "memory" || url == "memory://" {
            return Some(Self::Memory);
        }
        match scheme(url)? {
            "redis" | "rediss" => Some(Self::Redis),
            "postgres" | "postgresql" => Some(Self::Postgres),
            _ => None,
        }
    }

    /// Its name, as a log line shows it: `memory`, `redis`, `redis-cluster` or `postgres`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "redis",
            Self::RedisCluster => "redis-cluster",
            Self::Postgres => "postgres",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A store's place, checked: what the builder connects to.
#[derive(Debug, Clone)]
pub(super) enum Location {
    Memory,
    #[cfg(feature = "redis")]
    Redis(String),
    #[cfg(feature = "redis")]
    Cluster(Vec<String>),
    #[cfg(feature = "postgres")]
    Postgres(String),
}

/// What `url` names, or why this build cannot use it.
pub(super) fn place(url: &str) -> Result<Location, StoreError> {
    match Backend::of(url).ok_or_else(|| unknown(url))? {
        Backend::Memory => Ok(Location::Memory),
        Backend::RedisCluster => match cluster_hosts(url) {
            Some(nodes) => cluster(&nodes),
            None => cluster(&nodes(url)),
        },
        #[cfg(feature = "redis")]
        Backend::Redis => {
            enabled(url, redis_feature(url))?;
            Ok(Location::Redis(url.to_owned()))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => Ok(Location::Postgres(url.to_owned())),
        #[allow(
            unreachable_patterns,
            reason = "reached in a build without a store's feature"
        )]
        Backend::Redis => Err(needs(url, redis_feature(url).unwrap_or("redis"))),
        #[allow(
            unreachable_patterns,
            reason = "reached in a build without a store's feature"
        )]
        Backend::Postgres => Err(needs(url, "postgres")),
    }
}

/// A Redis Cluster reached through any of `nodes`, each a `redis://` or `rediss://` URL.
pub(super) fn cluster<U: AsRef<str>>(nodes: &[U]) -> Result<Location, StoreError> {
    let nodes: Vec<&str> = nodes.iter().map(AsRef::as_ref).collect();
    if nodes.is_empty() {
        return Err(StoreError::new(
            "a Redis Cluster needs the URL of at least one of its nodes, like \
             redis://127.0.0.1:7000",
        ));
    }
    if let Some(other) = nodes.iter().find(|node| redis_scheme(node).is_none()) {
        return Err(StoreError::new(format!(
            "`{}` is not a Redis URL: a Redis Cluster's nodes are named like \
             redis://127.0.0.1:7000",
            redacted(other)
        )));
    }
    for node in &nodes {
        enabled(node, redis_feature(node))?;
    }
    #[cfg(feature = "redis")]
    {
        Ok(Location::Cluster(
            nodes.iter().map(|&node| node.to_owned()).collect(),
        ))
    }
    #[cfg(not(feature = "redis"))]
    {
        // Refused above all the same: every node needs the feature.
        Err(needs(nodes[0], "redis"))
    }
}

/// The node URLs of a `redis+cluster://` (or `rediss+cluster://`) URL: one scheme, one set of
/// credentials and one path for a list of hosts, `redis+cluster://:PASSWORD@a:7000,b:7001`
/// naming `redis://:PASSWORD@a:7000` and `redis://:PASSWORD@b:7001`. The credentials end at
/// the last `@` before the path, so that a password may hold a comma; `None` for any other
/// scheme.
pub(super) fn cluster_hosts(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = url.split_once("://")?;
    let node_scheme = match scheme {
        "redis+cluster" => "redis",
        "rediss+cluster" => "rediss",
        _ => return None,
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (credentials, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    Some(
        hosts
            .split(',')
            .filter(|host| !host.is_empty())
            .map(|host| format!("{node_scheme}://{credentials}{host}{tail}"))
            .collect(),
    )
}

/// The URLs of a list of nodes: split at each comma that a new `scheme://` follows, so that a
/// comma in a password never splits a URL (nor shows the password's end as a URL of its own).
fn nodes(text: &str) -> Vec<&str> {
    let mut nodes = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices(',') {
        if scheme(&text[at + 1..]).is_some() {
            nodes.push(&text[start..at]);
            start = at + 1;
        }
    }
    nodes.push(&text[start..]);
    nodes
}

/// The scheme before `://`, if `url` starts with one (letters, digits, `+`, `-`, `.`).
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some(scheme)
}

fn redis_scheme(url: &str) -> Option<&str> {
    scheme(url).filter(|scheme| matches!(*scheme, "redis" | "rediss"))
}

/// The feature a Redis URL needs that this build lacks, if one.
fn redis_feature(url: &str) -> Option<&'static str> {
    if !cfg!(feature = "redis") {
        Some("redis")
    } else if redis_scheme(url) == Some("rediss") && !cfg!(feature = "redis-tls") {
        Some("redis-tls")
    } else {
        None
    }
}

/// Refuses `url` when the feature its store needs is off.
fn enabled(url: &str, missing: Option<&'static str>) -> Result<(), StoreError> {
    missing.map_or(Ok(()), |feature| Err(needs(url, feature)))
}

fn needs(url: &str, feature: &str) -> StoreError {
    StoreError::new(format!(
        "`{}` needs tower-idempotency's `{feature}` feature, which this build does not have",
        redacted(url)
    ))
}

fn unknown(url: &str) -> StoreError {
    StoreError::new(format!(
        "`{}` names no store: expected `memory`, a Redis URL (redis://HOST:PORT, rediss:// \
         over TLS), the nodes of a Redis Cluster (redis+cluster://HOST:PORT,HOST:PORT, or \
         redis://HOST:PORT,redis://HOST:PORT) or a PostgreSQL URL (postgres://USER@HOST/DATABASE)",
        redacted(url)
    ))
}
