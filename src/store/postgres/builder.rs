//! How a [`PostgresStore`] is set up before it connects: its table, pools and timeouts.

use super::*;

/// Builds a [`PostgresStore`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it connects"]
pub struct PostgresStoreBuilder {
    pub(super) table: String,
    pub(super) pool_size: usize,
    pub(super) transaction_pool_size: usize,
    pub(super) call_timeout: Duration,
}

impl PostgresStoreBuilder {
    /// The table of intents (default `idempotency_intents`): a plain lower-case identifier,
    /// optionally after a schema (`app.idempotency_intents`). Services that share a database
    /// but not their intents take tables of their own.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Connections in the pool (default 16).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Connections for transactional mode's transactions (default 16), a pool apart from the
    /// store's own: each running execution holds one, and an execution past them waits for
    /// one for at most the call timeout, then is refused with nothing run.
    pub fn transaction_pool_size(mut self, size: usize) -> Self {
        self.transaction_pool_size = size.max(1);
        self
    }

    /// The bound on every call, waiting for a connection included (default 2 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Connects to the database at `url` (`postgres://user:password@host:port/database`),
    /// creates the tables if they do not exist, and starts the sweep of expired rows.
    pub async fn connect(self, url: &str) -> Result<PostgresStore, StoreError> {
        let plain = |part: &str| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !part.as_bytes()[0].is_ascii_digit()
        };
        if !self.table.split('.').all(plain) || self.table.split('.').count() > 2 {
            return Err(StoreError::new(format!(
                "the table {:?} is not a plain identifier (lower-case letters, digits, `_`, \
                 optionally after a schema and a `.`)",
                self.table
            )));
        }
        let config = tokio_postgres::Config::from_str(url).map_err(StoreError::new)?;
        let pool = |size: usize, clean: bool| {
            Pool::builder(connect::manager(config.clone(), clean)?)
                .max_size(size)
                .wait_timeout(Some(self.call_timeout))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(StoreError::new)
        };
        let inner = Arc::new(PostgresState {
            pool: pool(self.pool_size, false)?,
            transactions: pool(self.transaction_pool_size, true)?,
            statements: Statements::for_table(&self.table),
            call_timeout: self.call_timeout,
        });
        let migrate = async {
            let mut client = inner.pool.get().await.map_err(described)?;
            let transaction = client.transaction().await.map_err(described)?;
            let sql = &inner.statements.migrate;
            transaction.batch_execute(sql).await.map_err(described)?;
            transaction.commit().await.map_err(described)
        };
        // The first connection may take longer than one call: the tables are made once.
        tokio::time::timeout(self.call_timeout.max(Duration::from_secs(10)), migrate)
            .await
            .map_err(|_| StoreError::new("postgres did not answer while the tables were made"))??;
        tokio::spawn(sweep(Arc::downgrade(&inner)));
        Ok(PostgresStore { inner })
    }
}
