//! Transactional mode on the layer: the call's record committed in the handler's own
//! Postgres transaction ([`Transaction`](crate::store::Transaction)).

use crate::store::{AnyStore, PostgresStore, StoreError, TieredStore};
use crate::IdempotencyLayer;

impl IdempotencyLayer<PostgresStore> {
    /// Transactional mode: every protected call runs in a database transaction of its own,
    /// which the handler takes from the request ([`Transaction`](crate::store::Transaction), an
    /// `Extension` in axum), and
    /// the layer writes the call's record in that transaction and commits it with the
    /// handler's changes. A crash, an error, a panic, a lapsed lease or an answer whose effect
    /// is not known rolls the transaction back: the changes are then known not to have been
    /// kept, the intent is released, and a retry runs once.
    ///
    /// What it covers is the handler's writes in that transaction: anything else it does (a
    /// message sent, another service called) may still have happened when a call is rolled
    /// back, and the words say so. Each running execution holds a connection of the
    /// transaction pool ([`transaction_pool_size`](crate::store::PostgresStoreBuilder::transaction_pool_size)):
    /// past it, executions wait for one, for at most the store's call timeout. The layer fails
    /// closed: no connection in time, or no store, answers 503 with nothing run.
    ///
    /// ```no_run
    /// use axum::{routing::post, Extension, Router};
    /// use tower_idempotency::store::{PostgresStore, Transaction};
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// async fn create(Extension(transaction): Extension<Transaction>) -> &'static str {
    ///     let client = transaction.client().await.expect("a protected call");
    ///     client
    ///         .execute("INSERT INTO orders (item) VALUES ('tea')", &[])
    ///         .await
    ///         .expect("inserted");
    ///     "created"
    /// }
    ///
    /// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
    /// let store = PostgresStore::connect("postgres://app@127.0.0.1/app").await?;
    /// let app: Router = Router::new()
    ///     .route("/orders", post(create))
    ///     .layer(IdempotencyLayer::with_store(store).transactional());
    /// # let _ = app;
    /// # Ok(())
    /// # }
    /// ```
    pub fn transactional(self) -> Self {
        let transactions = self.store_ref().transactions();
        self.set(|s| s.transactions = Some(transactions))
    }
}

impl IdempotencyLayer<TieredStore<PostgresStore>> {
    /// Transactional mode under the in-process cache of completed records: as
    /// [`IdempotencyLayer::<PostgresStore>::transactional`](IdempotencyLayer::transactional),
    /// with the replays this process has seen once served from the cache.
    pub fn transactional(self) -> Self {
        let transactions = self.store_ref().remote().transactions();
        self.set(|s| s.transactions = Some(transactions))
    }
}

impl IdempotencyLayer<AnyStore> {
    /// Transactional mode on a store chosen at run time: as
    /// [`IdempotencyLayer::<PostgresStore>::transactional`](IdempotencyLayer::transactional),
    /// where the store is PostgreSQL (under the cache or not); an error where it is not, which
    /// has no transaction to give the handler.
    pub fn transactional(self) -> Result<Self, StoreError> {
        let Some(store) = self.store_ref().postgres() else {
            return Err(StoreError::new(format!(
                "transactional mode needs a PostgreSQL store, not {}",
                self.store_ref().backend()
            )));
        };
        let transactions = store.transactions();
        Ok(self.set(|s| s.transactions = Some(transactions)))
    }
}
