//! The table's orders and accounts.

use std::sync::Arc;

use super::*;
use crate::key::Fingerprint;
use crate::store::Tombstone;

fn key(n: u8) -> IntentKey {
    IntentKey::from_bytes([n; 32])
}

fn value() -> Settled {
    let tombstone = Tombstone::new(
        ScopeHash::of(b"s"),
        Fingerprint::raw(None, b""),
        0,
        None,
        crate::store::ReleaseCause::Panic,
        None,
    );
    Settled::Failed(Arc::new(tombstone), Duration::from_secs(60))
}

const HOUR: Duration = Duration::from_secs(3600);

fn keys(evicted: &[Evicted]) -> Vec<(IntentKey, Cause)> {
    evicted.iter().map(|e| (e.key, e.cause)).collect()
}

#[test]
fn past_its_part_a_share_drops_its_own_oldest_values_only() {
    let now = Instant::now();
    let mut table = Table::new(10_000, 300);
    let (a, b) = (ScopeHash::of(b"a"), ScopeHash::of(b"b"));
    assert!(table.insert(key(1), value(), 100, a, HOUR, now).is_empty());
    for n in 2..=4 {
        assert!(table.insert(key(n), value(), 100, b, HOUR, now).is_empty());
    }
    let evicted = table.insert(key(5), value(), 100, b, HOUR, now);
    assert_eq!(keys(&evicted), vec![(key(2), Cause::Share)]);
    let evicted = table.insert(key(6), value(), 150, b, HOUR, now);
    assert_eq!(
        keys(&evicted),
        vec![(key(3), Cause::Share), (key(4), Cause::Share)]
    );
    // A value that left no longer counts, and is never named again.
    table.remove(&key(5));
    assert!(table.insert(key(7), value(), 100, b, HOUR, now).is_empty());
    assert!(
        table.get(&key(1), || now).is_some(),
        "the other share kept its own"
    );
    assert_eq!(table.bytes(), 100 + 150 + 100);
}

#[test]
fn a_value_kept_again_takes_its_new_place_in_its_share() {
    let now = Instant::now();
    let mut table = Table::new(10_000, 200);
    let a = ScopeHash::of(b"a");
    assert!(table.insert(key(1), value(), 100, a, HOUR, now).is_empty());
    assert!(table.insert(key(2), value(), 100, a, HOUR, now).is_empty());
    // The same intent kept again: replaced, so the oldest is now the second.
    assert!(table.insert(key(1), value(), 100, a, HOUR, now).is_empty());
    let evicted = table.insert(key(3), value(), 100, a, HOUR, now);
    assert_eq!(keys(&evicted), vec![(key(2), Cause::Share)]);
    assert_eq!(table.bytes(), 200);
}

#[test]
fn a_value_larger_than_the_part_is_kept_alone() {
    let now = Instant::now();
    let mut table = Table::new(10_000, 100);
    let a = ScopeHash::of(b"a");
    assert!(table.insert(key(1), value(), 50, a, HOUR, now).is_empty());
    let evicted = table.insert(key(2), value(), 500, a, HOUR, now);
    assert_eq!(keys(&evicted), vec![(key(1), Cause::Share)]);
    assert!(table.get(&key(2), || now).is_some());
}

#[test]
fn the_whole_budget_drops_the_least_recently_used_and_expired_values_silently() {
    let now = Instant::now();
    let mut table = Table::new(300, 1_000);
    let scope = |n: u8| ScopeHash::of(&[n]);
    assert!(table
        .insert(key(1), value(), 100, scope(1), HOUR, now)
        .is_empty());
    let brief = Duration::from_secs(1);
    assert!(table
        .insert(key(2), value(), 100, scope(2), brief, now)
        .is_empty());
    assert!(table
        .insert(key(3), value(), 100, scope(3), HOUR, now)
        .is_empty());
    // Reading the first makes the second the least recently used.
    assert!(table.get(&key(1), || now).is_some());
    let later = now + Duration::from_secs(2);
    let evicted = table.insert(key(4), value(), 100, scope(4), HOUR, later);
    assert!(
        evicted.is_empty(),
        "the second had expired: dropped, not reported"
    );
    let evicted = table.insert(key(5), value(), 100, scope(5), HOUR, later);
    assert_eq!(keys(&evicted), vec![(key(3), Cause::Budget)]);
    assert!(table.get(&key(2), || later).is_none());
    assert_eq!(table.bytes(), 300);
}

#[test]
fn expired_values_free_their_budget_before_a_live_one_is_evicted() {
    let now = Instant::now();
    let mut table = Table::new(300, 1_000);
    let scope = |n: u8| ScopeHash::of(&[n]);
    let brief = Duration::from_secs(1);
    assert!(table
        .insert(key(1), value(), 100, scope(1), HOUR, now)
        .is_empty());
    assert!(table
        .insert(key(2), value(), 100, scope(2), brief, now)
        .is_empty());
    assert!(table
        .insert(key(3), value(), 100, scope(3), brief, now)
        .is_empty());
    // The first is the least recently used but lives on; the two brief ones expired.
    let later = now + Duration::from_secs(2);
    let evicted = table.insert(key(4), value(), 100, scope(4), HOUR, later);
    assert!(evicted.is_empty(), "{:?}", keys(&evicted));
    assert!(
        table.get(&key(1), || later).is_some(),
        "never evicted for expired ones"
    );
    assert_eq!(table.bytes(), 200, "what expired no longer counts");
}

#[test]
fn an_expired_value_is_gone_when_read() {
    let now = Instant::now();
    let mut table = Table::new(1_000, 1_000);
    let a = ScopeHash::of(b"a");
    table.insert(key(1), value(), 100, a, Duration::from_secs(1), now);
    assert!(table.get(&key(1), || now).is_some());
    assert!(table
        .get(&key(1), || now + Duration::from_secs(1))
        .is_none());
    assert_eq!(table.bytes(), 0);
    assert!(table.get(&key(1), || now).is_none(), "and stays gone");
}
