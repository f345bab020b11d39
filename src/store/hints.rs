//! Hooks through which this crate's own stores answer faster than their trait's calls can:
//! a record held in process, returned without a round trip, and the promise that every call
//! answers at its first poll. Sealed: [`Store::hints`](super::Store) takes a [`Sealed`] that
//! only this crate can make, so a store of your own neither needs nor can give them, and the
//! layer works the same without them.

use std::sync::Arc;

use super::{Record, Store};
use crate::key::IntentKey;

/// What only this crate can make, so that only its stores give [`Hints`].
#[derive(Debug, Clone, Copy)]
#[allow(
    unreachable_pub,
    reason = "named in the public trait's hidden method, and unreachable from outside on purpose"
)]
pub struct Sealed(pub(super) ());

/// The hooks. Not part of the public API.
#[allow(
    unreachable_pub,
    reason = "named in the public trait's hidden method, and unreachable from outside on purpose"
)]
pub trait Hints: Send + Sync {
    /// A completed record held in process, returned at once: the layer asks this first, so
    /// that a replay this process has seen costs no coordination at all.
    fn cached(&self, key: &IntentKey) -> Option<Arc<Record>> {
        let _ = key;
        None
    }

    /// Whether every call answers at its first poll, never waiting (a store in process
    /// memory). The layer then writes an outcome in place rather than in a boxed future; a
    /// write that waits all the same is dropped where it stands and retried in the
    /// background.
    fn answers_at_once(&self) -> bool {
        false
    }
}

/// The record `store` holds in process for `key`, if it is one of this crate's stores.
pub(crate) fn cached<St: Store>(store: &St, key: &IntentKey) -> Option<Arc<Record>> {
    store.hints(Sealed(()))?.cached(key)
}

/// Whether `store` is one of this crate's stores whose calls all answer at once.
pub(crate) fn answers_at_once<St: Store>(store: &St) -> bool {
    store
        .hints(Sealed(()))
        .is_some_and(|hints| hints.answers_at_once())
}
