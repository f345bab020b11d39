//! The store protocol of `tower-idempotency`, model-checked with stateright on the crate's
//! own code.
//!
//! Instances take calls against one store, the crate's [`MemoryStore`] driven through the
//! [`Store`] trait, making its calls in the engine's order: claim under a fresh owner token,
//! run the tool, then complete (its answer kept) or release (a real failure, with a
//! tombstone), renewing the lease meanwhile; a caller that finds the intent running polls
//! the store until its deadline; a claim whose answer was lost is given back. Faults strike
//! at any step: an instance crashes, the clock moves past a lease, an operator removes or
//! resolves an intent, the store restarts without its data. The model owns the clock: each
//! transition rebuilds the store by replaying its trace on a paused Tokio runtime.
//!
//! The intents are those the crate's layer derives for one body sent under two scopes.
//!
//! [`MemoryStore`]: tower_idempotency::store::MemoryStore
//! [`Store`]: tower_idempotency::store::Store

pub mod bounds;
pub mod calls;
pub mod intents;
pub mod model;
pub mod properties;
pub mod report;
pub mod revert;
pub mod state;
pub mod step;
mod transition;
pub mod walk;
pub mod world;

pub use bounds::Bounds;
pub use model::{Action, StoreModel};
