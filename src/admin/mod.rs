//! What an operator does with what a layer's store holds: list it, show one intent, resolve an
//! outcome that is not known, and purge one caller's records.
//!
//! [`IdempotencyLayer::admin`](crate::IdempotencyLayer::admin) gives the operations; an app
//! mounts them over HTTP with [`Admin::service`], behind a bearer token:
//!
//! ```
//! use axum::Router;
//! use tower_idempotency::IdempotencyLayer;
//!
//! let layer = IdempotencyLayer::new();
//! let admin = layer.admin().service("a long random token");
//! let app: Router = Router::new().nest_service("/admin", admin);
//! ```
//!
//! `GET …/records?outcome=unknown|kept|running|failed&operation=…&limit=…&bodies=true` lists,
//! `GET …/records/{intent}` shows one with its story (`history`: each attempt's claim and
//! outcome, an operator's resolution, oldest first, with their times in milliseconds since the
//! Unix epoch and the instance that made each; see [`Transition`]),
//! `POST …/records/{intent}/resolve` with
//! `{"ran": false}` releases an outcome that is not known so that the next identical call runs,
//! or with `{"ran": true, "note": "…"}` keeps it as executed; a known outcome (kept, or failed)
//! is never resolved: `DELETE …/records/{intent}` with `{"confirm": "<intent>"}` removes it on
//! purpose. `POST …/scopes/purge` with `{"scope": "<the principal or session value the caller
//! sends>"}` or `{"credential": "<its Authorization value>"}` removes every record and failed
//! attempt of that caller, in every session.

mod listing;
mod service;

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::engine::Runtime;
use crate::key::{IntentKey, ScopeHash};
use crate::settings::Settings;
use crate::store::{
    continued, Entry, Event, KeptResponse, Omission, Record, Store, StoreError, Transition,
};

pub use listing::{Filter, Listed, ListedOutcome};
pub use service::AdminService;

/// How many entries one page of a store's listing asks for.
const PAGE: usize = 500;

/// The operations on one layer's store. Cheap to clone; layers cloned from one builder share
/// it.
pub struct Admin<St> {
    settings: Arc<Settings>,
    runtime: Arc<Runtime<St>>,
}

impl<St> Clone for Admin<St> {
    fn clone(&self) -> Self {
        Self {
            settings: Arc::clone(&self.settings),
            runtime: Arc::clone(&self.runtime),
        }
    }
}

impl<St> std::fmt::Debug for Admin<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

/// What an operator decides of an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The action did not take effect: the record goes, and the next identical call runs.
    NotRun,
    /// The action took effect: kept as executed, and repeats are told so, with the
    /// operator's note kept beside it.
    Ran {
        /// Why the operator says so (a ticket, what was checked).
        note: Option<String>,
    },
}

/// What a resolution did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resolved {
    /// The record is gone: the next identical call runs.
    Released,
    /// Kept as executed.
    KeptAsRun,
    /// The store holds nothing of the intent.
    NotFound,
    /// The action is running: it is not the operator's to resolve until it ends.
    StillRunning,
    /// What became of the action is known (its answer is kept, or its last attempt failed):
    /// left as it was. Only [`Admin::remove`] takes it away, on purpose.
    Known(ListedOutcome),
}

/// What a removal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Removed {
    /// The record is gone, and it held this: the next identical call runs.
    Removed(ListedOutcome),
    /// The store holds nothing of the intent.
    NotFound,
    /// The action is running: its lease is never removed.
    StillRunning,
}

/// Who an operator purges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller<'a> {
    /// The value the caller sends in the header that names it: the principal's where one is
    /// configured, else its session's.
    Scope(&'a str),
    /// The value of the caller's credential header (the first of
    /// [`credential_headers`](crate::IdempotencyLayer::credential_headers), `Authorization` by
    /// default), where no principal is configured: every session it narrowed.
    Credential(&'a str),
}

/// What a purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Purged {
    /// Kept records (answers, and outcomes not known).
    pub records: u64,
    /// Failed attempts.
    pub failures: u64,
}

/// Why a purge could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum PurgeError {
    /// The layer reads its scope through a function: a value cannot be hashed as it would be.
    ScopeFromFunction,
    /// A credential was named, but the layer has a principal, or names callers by none.
    NoCredentialScope,
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for PurgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ScopeFromFunction => f.write_str(
                "the layer reads its scope through a function, so a scope value cannot be \
                 hashed as the layer would hash it",
            ),
            Self::NoCredentialScope => f.write_str(
                "the layer does not name callers by a credential (a principal is configured, \
                 or no credential headers are): purge by the scope value instead",
            ),
            Self::Store(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for PurgeError {}

impl<St> Admin<St> {
    pub(crate) fn new(settings: Arc<Settings>, runtime: Arc<Runtime<St>>) -> Self {
        Self { settings, runtime }
    }
}

impl<St: Store> Admin<St> {
    fn store(&self) -> &St {
        &self.runtime.store
    }

    /// Hands `visit` every entry of the store, a page at a time, until it breaks.
    async fn each_entry(
        &self,
        mut visit: impl FnMut(IntentKey, Entry) -> ControlFlow<()>,
    ) -> Result<(), StoreError> {
        let mut cursor = 0;
        loop {
            let scanned = self.store().scan(cursor, PAGE).await?;
            for (key, entry) in scanned.entries {
                if visit(key, entry).is_break() {
                    return Ok(());
                }
            }
            if scanned.next == 0 {
                return Ok(());
            }
            cursor = scanned.next;
        }
    }

    /// The entries that `filter` selects, as many as its limit, in the store's order.
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Listed>, StoreError> {
        let mut found = Vec::new();
        self.each_entry(|key, entry| {
            let listed = Listed::of(key, &entry, filter.bodies);
            if filter.selects(&listed) {
                found.push(listed);
            }
            if found.len() >= filter.limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        Ok(found)
    }

    /// One intent, with its body where it has one and its story.
    pub async fn show(&self, intent: &IntentKey) -> Result<Option<Listed>, StoreError> {
        let entry = self.store().get(intent).await?;
        Ok(entry.map(|entry| {
            let mut listed = Listed::of(*intent, &entry, true);
            listed.history = Some(history_of(&entry).to_vec());
            listed
        }))
    }

    /// Resolves what the store holds of `intent`, as the operator found it.
    pub async fn resolve(
        &self,
        intent: &IntentKey,
        resolution: Resolution,
    ) -> Result<Resolved, StoreError> {
        let held = match self.store().get(intent).await? {
            None => return Ok(Resolved::NotFound),
            Some(Entry::Running(_)) => return Ok(Resolved::StillRunning),
            Some(Entry::Failed(_)) => return Ok(Resolved::Known(ListedOutcome::Failed)),
            Some(Entry::Completed(kept)) if !kept.response.is_unknown() => {
                return Ok(Resolved::Known(ListedOutcome::Kept));
            }
            Some(held) => held,
        };
        // The store never removes or overwrites a running lease: one that began since the
        // read above goes on, and the operator is told so.
        let done = match &resolution {
            Resolution::NotRun => self.store().remove(intent).await?,
            Resolution::Ran { note } => {
                let record = Arc::new(self.resolved_record(&held, note.clone()));
                let retention = self.settings.paths.default_retention;
                self.store().put(intent, record, retention).await?
            }
        };
        Ok(match (done, resolution) {
            (true, Resolution::NotRun) => Resolved::Released,
            (true, Resolution::Ran { .. }) => Resolved::KeptAsRun,
            (false, _) => match self.store().get(intent).await? {
                Some(Entry::Running(_)) => Resolved::StillRunning,
                _ => Resolved::NotFound,
            },
        })
    }

    /// The record of an outcome an operator says ran: the kept record's, or the failed
    /// attempt's, with what the operator said.
    fn resolved_record(&self, held: &Entry, note: Option<String>) -> Record {
        let now = crate::clock::now_ms();
        let resolved = |status| KeptResponse::Omitted {
            status,
            why: Omission::Resolved,
        };
        let ok = http::StatusCode::OK;
        let mut record = match held {
            // An abandoned execution never answered: it keeps no status of its own.
            Entry::Completed(kept) => Record {
                response: resolved(match &kept.response {
                    KeptResponse::Abandoned => ok,
                    _ => kept.status(),
                }),
                ..Record::clone(kept)
            },
            Entry::Failed(t) => Record::new(
                t.scope,
                t.fingerprint,
                t.failed_at_ms,
                now,
                now,
                resolved(ok),
            ),
            Entry::Running(i) => Record::new(
                i.scope,
                i.fingerprint,
                i.started_at_ms,
                now,
                now,
                resolved(ok),
            ),
        };
        let retention = crate::clock::millis(self.settings.paths.default_retention);
        record.completed_at_ms = now;
        record.expires_at_ms = now.saturating_add(retention);
        record.note = note.map(Arc::from);
        let resolved = Event::Resolved {
            note: record.note.clone(),
        };
        record.history = continued(history_of(held), [Transition::new(now, resolved)]);
        record
    }

    /// Removes what the store holds of `intent`, whatever its outcome, but a running one: an
    /// operator's deliberate act (the next identical call runs the action again), for an
    /// outcome known to be wrong.
    pub async fn remove(&self, intent: &IntentKey) -> Result<Removed, StoreError> {
        let outcome = match self.store().get(intent).await? {
            None => return Ok(Removed::NotFound),
            Some(Entry::Running(_)) => return Ok(Removed::StillRunning),
            Some(held) => Listed::of(*intent, &held, false).outcome,
        };
        // The store never removes a running lease: one that began since the read goes on.
        Ok(match self.store().remove(intent).await? {
            true => Removed::Removed(outcome),
            false => match self.store().get(intent).await? {
                Some(Entry::Running(_)) => Removed::StillRunning,
                _ => Removed::NotFound,
            },
        })
    }

    /// Removes every completed record and failed attempt of `caller`, in every session that
    /// narrowed it: how many of each.
    pub async fn purge(&self, caller: Caller<'_>) -> Result<Purged, PurgeError> {
        let scope = &self.settings.scope;
        let hash = match caller {
            Caller::Scope(value) => scope
                .hash_of_value(value)
                .ok_or(PurgeError::ScopeFromFunction)?,
            Caller::Credential(value) => scope
                .share_of_credential(value)
                .ok_or(PurgeError::NoCredentialScope)?,
        };
        let mut doomed = Vec::new();
        self.each_entry(|key, entry| {
            if let Some(failed) = belongs_to(&entry, &hash) {
                doomed.push((key, failed));
            }
            ControlFlow::Continue(())
        })
        .await
        .map_err(PurgeError::Store)?;
        let mut purged = Purged::default();
        for (key, failed) in doomed {
            if self.store().remove(&key).await.map_err(PurgeError::Store)? {
                match failed {
                    true => purged.failures += 1,
                    false => purged.records += 1,
                }
            }
        }
        Ok(purged)
    }

    /// Removes every completed record and failed attempt of the caller that sends `scope`
    /// (as the layer's scope header, or its principal's): how many, both kinds together.
    pub async fn purge_scope(&self, scope: &str) -> Result<u64, PurgeError> {
        let purged = self.purge(Caller::Scope(scope)).await?;
        Ok(purged.records + purged.failures)
    }
}

/// The story `entry` keeps: none for a running execution, whose story is written when it
/// ends.
fn history_of(entry: &Entry) -> &[Transition] {
    match entry {
        Entry::Completed(record) => &record.history,
        Entry::Failed(tombstone) => &tombstone.history,
        Entry::Running(_) => &[],
    }
}

/// Whether `entry` is a record (`Some(false)`) or a failed attempt (`Some(true)`) of the
/// caller whose scope, or share (its principal or credential), hashes to `hash`. A running
/// execution is left to end, one that began since the listing too (the store never removes a
/// lease); it records after the purge.
fn belongs_to(entry: &Entry, hash: &ScopeHash) -> Option<bool> {
    match entry {
        Entry::Completed(record) => {
            (record.scope == *hash || record.share == Some(*hash)).then_some(false)
        }
        Entry::Failed(tombstone) => {
            (tombstone.scope == *hash || tombstone.share == Some(*hash)).then_some(true)
        }
        Entry::Running(_) => None,
    }
}
