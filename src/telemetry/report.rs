//! The duplicate report: what observe mode counted in this process, per operation, since the
//! process started and over the last hour, with the callers that repeat the most.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use super::duplicates::Finding;
use crate::clock::now_ms;
use crate::key::{KeyHasher, ScopeHash};

/// Callers kept per operation, by how often they repeat.
const CALLERS: usize = 32;
/// Callers listed per operation in a report.
const LISTED: usize = 10;
const MINUTE_MS: u64 = 60_000;

/// What observe mode counted, in this process, for every operation it saw. Every instance
/// reports its own calls; whether a call repeated an intent is known across every instance on
/// the same store. Serializes to the JSON that `idempotency-proxy` serves at `GET /duplicates`.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct DuplicateReport {
    /// One entry per operation, the most repeated first.
    pub operations: Vec<OperationDuplicates>,
}

/// One operation's counts.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct OperationDuplicates {
    /// The operation label, as in the metrics.
    pub operation: String,
    /// Since the process started.
    pub since_start: DuplicateCounts,
    /// The last sixty whole minutes and the current one.
    pub last_hour: DuplicateCounts,
    /// The callers whose calls repeated an intent most, by scope hash (16 hex digits), with
    /// their repeats since the process started.
    pub top_callers: Vec<RepeatingCaller>,
}

/// Calls of one operation, by what their check found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DuplicateCounts {
    /// Every call.
    pub calls: u64,
    /// Calls that were the first of their intent.
    pub intents: u64,
    /// Calls that repeated an intent seen within its retention.
    pub duplicates: u64,
    /// Calls no intent could be derived for.
    pub not_keyable: u64,
    /// Calls the store could not count.
    pub uncounted: u64,
    /// `duplicates` over `calls` (0 without calls).
    pub duplicate_rate: f64,
}

/// A caller that repeats intents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RepeatingCaller {
    /// The caller's scope, hashed again with a key of this process's own (16 hex digits): the
    /// same caller reads the same here until the process restarts, and no one can test a guess
    /// of a scope (a user name) against it.
    pub scope: String,
    /// Its calls that repeated an intent, since the process started (at most a few more where
    /// it took the place of a caller that repeated less).
    pub repeats: u64,
}

impl DuplicateCounts {
    fn add(&mut self, checked: Finding) {
        self.calls += 1;
        match checked {
            Finding::First => self.intents += 1,
            Finding::Repeat(_) => self.duplicates += 1,
            Finding::NotKeyable => self.not_keyable += 1,
            Finding::Uncounted => self.uncounted += 1,
        }
    }

    fn sum(&mut self, other: &Self) {
        self.calls += other.calls;
        self.intents += other.intents;
        self.duplicates += other.duplicates;
        self.not_keyable += other.not_keyable;
        self.uncounted += other.uncounted;
    }

    fn rated(mut self) -> Self {
        self.duplicate_rate = if self.calls == 0 {
            0.0
        } else {
            self.duplicates as f64 / self.calls as f64
        };
        self
    }
}

/// One operation's tally: since the start, per minute of the last hour, and its callers.
#[derive(Default)]
struct Tally {
    since_start: DuplicateCounts,
    /// Indexed by minute modulo 61, each with the minute it counts.
    minutes: Vec<(u64, DuplicateCounts)>,
    callers: HashMap<ScopeHash, u64>,
}

impl Tally {
    fn add(&mut self, minute: u64, scope: Option<ScopeHash>, checked: Finding) {
        self.since_start.add(checked);
        if self.minutes.is_empty() {
            self.minutes = vec![(u64::MAX, DuplicateCounts::default()); 61];
        }
        let slot = &mut self.minutes[(minute % 61) as usize];
        if slot.0 != minute {
            *slot = (minute, DuplicateCounts::default());
        }
        slot.1.add(checked);
        if let (Finding::Repeat(_), Some(scope)) = (checked, scope) {
            self.repeated(scope);
        }
    }

    /// Counts a repeat of `scope`'s; a new caller takes the place of the one with the fewest
    /// repeats once the list is full, starting from its count (the "space saving" way), so
    /// that a caller that repeats a lot is never lost among many that repeat once.
    fn repeated(&mut self, scope: ScopeHash) {
        if let Some(repeats) = self.callers.get_mut(&scope) {
            *repeats += 1;
            return;
        }
        let mut floor = 0;
        if self.callers.len() >= CALLERS {
            if let Some((&least, &repeats)) = self.callers.iter().min_by_key(|(_, &r)| r) {
                self.callers.remove(&least);
                floor = repeats;
            }
        }
        self.callers.insert(scope, floor + 1);
    }

    fn report(&self, operation: &str, minute: u64, pseudonyms: &KeyHasher) -> OperationDuplicates {
        let mut last_hour = DuplicateCounts::default();
        for (counted, counts) in &self.minutes {
            if *counted <= minute && minute - counted <= 60 {
                last_hour.sum(counts);
            }
        }
        let mut callers: Vec<_> = self.callers.iter().collect();
        callers.sort_by(|a, b| {
            b.1.cmp(a.1)
                .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
        });
        let top_callers = callers
            .into_iter()
            .take(LISTED)
            .map(|(scope, &repeats)| RepeatingCaller {
                scope: format!("{:016x}", pseudonyms.hash_one(scope.as_bytes())),
                repeats,
            })
            .collect();
        OperationDuplicates {
            operation: operation.to_owned(),
            since_start: self.since_start.rated(),
            last_hour: last_hour.rated(),
            top_callers,
        }
    }
}

/// The tallies of every operation one layer observed: shared by its services. The operations
/// are the metrics' labels, bounded as they are.
#[derive(Clone, Default)]
pub struct Duplicates(Arc<Tallies>);

#[derive(Default)]
struct Tallies {
    by_operation: Mutex<HashMap<String, Tally>>,
    /// Seeded per process: what the report shows of a caller's scope.
    pseudonyms: KeyHasher,
}

impl std::fmt::Debug for Duplicates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Duplicates").finish_non_exhaustive()
    }
}

impl Duplicates {
    pub(crate) fn add(&self, operation: &str, scope: Option<ScopeHash>, checked: Finding) {
        let minute = now_ms() / MINUTE_MS;
        let tallies = &self.0.by_operation;
        let mut tallies = tallies.lock().unwrap_or_else(PoisonError::into_inner);
        match tallies.get_mut(operation) {
            Some(tally) => tally.add(minute, scope, checked),
            None => {
                let mut tally = Tally::default();
                tally.add(minute, scope, checked);
                tallies.insert(operation.to_owned(), tally);
            }
        }
    }

    /// What was counted so far, the operations with the most duplicates first.
    ///
    /// ```
    /// let layer = tower_idempotency::IdempotencyLayer::new().observe();
    /// let report = layer.duplicates().report();
    /// assert!(report.operations.is_empty(), "nothing counted yet");
    /// ```
    pub fn report(&self) -> DuplicateReport {
        let minute = now_ms() / MINUTE_MS;
        let tallies = self.0.by_operation.lock();
        let tallies = tallies.unwrap_or_else(PoisonError::into_inner);
        let pseudonyms = &self.0.pseudonyms;
        let mut operations: Vec<_> = tallies
            .iter()
            .map(|(operation, tally)| tally.report(operation, minute, pseudonyms))
            .collect();
        operations.sort_by(|a, b| {
            let most = b.since_start.duplicates.cmp(&a.since_start.duplicates);
            most.then_with(|| a.operation.cmp(&b.operation))
        });
        DuplicateReport { operations }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scope(n: u8) -> ScopeHash {
        ScopeHash::from_bytes([n; 32])
    }

    #[tokio::test(start_paused = true)]
    async fn counts_are_kept_since_the_start_and_for_the_last_hour() {
        let duplicates = Duplicates::default();
        duplicates.add("send", Some(scope(1)), Finding::First);
        duplicates.add("send", Some(scope(1)), Finding::Repeat(2));
        tokio::time::advance(Duration::from_secs(2 * 60 * 60)).await;
        duplicates.add("send", Some(scope(1)), Finding::Repeat(3));
        duplicates.add("send", None, Finding::NotKeyable);
        let report = duplicates.report();
        let send = &report.operations[0];
        assert_eq!(send.since_start.calls, 4);
        assert_eq!(send.since_start.duplicates, 2);
        assert_eq!(send.since_start.duplicate_rate, 0.5);
        assert_eq!(send.last_hour.calls, 2, "the first two are past the hour");
        assert_eq!(send.last_hour.duplicates, 1);
        assert_eq!(send.last_hour.not_keyable, 1);
        assert_eq!(send.top_callers[0].repeats, 2);
        let shown = &send.top_callers[0].scope;
        assert_eq!(shown.len(), 16);
        assert!(!shown.contains("0101010101"), "not the scope hash itself");
        assert_eq!(
            duplicates.report().operations[0].top_callers[0].scope,
            *shown
        );
    }

    #[test]
    fn a_caller_that_repeats_a_lot_stays_listed_among_many_that_repeat_once() {
        let duplicates = Duplicates::default();
        for _ in 0..5 {
            duplicates.add("send", Some(scope(0)), Finding::Repeat(2));
        }
        for n in 1..=60 {
            duplicates.add("send", Some(scope(n)), Finding::Repeat(2));
        }
        let report = duplicates.report();
        let top = &report.operations[0].top_callers;
        assert_eq!(top.len(), LISTED);
        assert!(top[0].repeats >= 5);
        assert!(top[1..]
            .iter()
            .all(|caller| caller.repeats < top[0].repeats));
    }
}
