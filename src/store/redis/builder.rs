//! How a [`RedisStore`] is set up before it connects: its key prefix, call timeout and TLS.

use super::*;

/// Builds a [`RedisStore`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it connects"]
pub struct RedisStoreBuilder {
    pub(super) prefix: String,
    pub(super) call_timeout: Duration,
}

impl RedisStoreBuilder {
    /// Prefix of every key (default `idempotency:`). Layers in front of different services
    /// that share one Redis need prefixes of their own: two calls with the same scope, route
    /// and body are one intent to every layer on the same prefix, so one service would replay
    /// the other's result. Instances of one service share theirs. A prefix holds no `{` or `}`
    /// (the keys of one intent share a cluster hash tag).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Timeout of every call, connecting included (default 1 s). A claim that times out is
    /// answered 503 `not_executed`.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Connects to one node, e.g. `redis://127.0.0.1:6379`.
    pub async fn connect(self, url: &str) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url).map_err(StoreError::new)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.call_timeout))
            .set_response_timeout(Some(self.call_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(StoreError::new)?;
        self.build(Connection::Single(manager)).await
    }

    /// Connects to a cluster through any of its nodes.
    pub async fn connect_cluster<U: AsRef<str>>(
        self,
        urls: &[U],
    ) -> Result<RedisStore, StoreError> {
        let client = ClusterClient::builder(urls.iter().map(AsRef::as_ref))
            .connection_timeout(self.call_timeout)
            .response_timeout(self.call_timeout)
            .retries(2)
            .build()
            .map_err(StoreError::new)?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(StoreError::new)?;
        self.build(Connection::Cluster(connection)).await
    }

    /// Uses a connection manager the application already holds: for a private certificate
    /// authority or a client certificate (`redis::Client::build_with_tls`, feature
    /// `redis-tls`), or connection settings of its own. Its reconnects and response timeout
    /// are the manager's; every call is still bounded by [`RedisStoreBuilder::call_timeout`].
    ///
    /// ```no_run
    /// # #[cfg(feature = "redis-tls")]
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use redis::{aio::ConnectionManager, Client, TlsCertificates};
    /// use tower_idempotency::store::RedisStore;
    ///
    /// let authority = std::fs::read("ca.crt")?;
    /// let certificates = TlsCertificates { client_tls: None, root_cert: Some(authority) };
    /// let client = Client::build_with_tls("rediss://10.0.0.5:6380", certificates)?;
    /// let manager = ConnectionManager::new(client).await?;
    /// let store = RedisStore::builder().from_connection_manager(manager).await?;
    /// # let _ = store; Ok(()) }
    /// ```
    pub async fn from_connection_manager(
        self,
        manager: ConnectionManager,
    ) -> Result<RedisStore, StoreError> {
        self.build(Connection::Single(manager)).await
    }

    /// Uses a cluster connection the application already holds.
    pub async fn from_cluster_connection(
        self,
        connection: ClusterConnection,
    ) -> Result<RedisStore, StoreError> {
        self.build(Connection::Cluster(connection)).await
    }

    /// Loads the scripts, so that an operation costs one round trip from the first request.
    async fn build(self, mut connection: Connection) -> Result<RedisStore, StoreError> {
        let call_timeout = self.call_timeout;
        for script in scripts::all() {
            timed(
                call_timeout,
                script.prepare_invoke().load_async(&mut connection),
            )
            .await?;
        }
        Ok(RedisStore {
            connection,
            prefix: self.prefix.into(),
            call_timeout,
            owned: Arc::default(),
        })
    }
}
