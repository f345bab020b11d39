//! The table's orders and accounts.

use std::sync::Arc;

use super::*;
use crate::key::Fingerprint;
use crate::store::memory::kept::CachedRecord;
use crate::store::{KeptResponse, Record, StoredResponse, Tombstone};

fn key(n: u8) -> IntentKey {
    IntentKey::from_bytes([n; 32])
}

fn value() -> Closing {
    let tombstone = Tombstone::new(
        ScopeHash::of(b"s"),
        Fingerprint::raw(None, b""),
        0,
        None,
        crate::store::ReleaseCause::Panic,
        None,
    );
    Closing::Failed(Arc::new(tombstone))
}

/// A kept (completed) record.
fn kept() -> Closing {
    let response = StoredResponse::new(http::StatusCode::OK, http::HeaderMap::new(), "ok".into());
    let (scope, fingerprint) = (ScopeHash::of(b"s"), Fingerprint::raw(None, b""));
    let record = Record::new(scope, fingerprint, 1, 2, 3, KeptResponse::Full(response));
    Closing::Completed(CachedRecord::new(&record))
}

const HOUR: Duration = Duration::from_secs(3600);

fn keys(evicted: &[Eviction]) -> Vec<(IntentKey, Cause)> {
    evicted.iter().map(|e| (e.key, e.cause)).collect()
}

#[test]
fn past_its_part_a_share_drops_its_own_oldest_values_only() {
    let now = Instant::now();
    let mut table = Table::new(10_000, 300, HOUR);
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
    let mut table = Table::new(10_000, 200, HOUR);
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
    let mut table = Table::new(10_000, 100, HOUR);
    let a = ScopeHash::of(b"a");
    assert!(table.insert(key(1), value(), 50, a, HOUR, now).is_empty());
    let evicted = table.insert(key(2), value(), 500, a, HOUR, now);
    assert_eq!(keys(&evicted), vec![(key(1), Cause::Share)]);
    assert!(table.get(&key(2), || now).is_some());
}

#[test]
fn the_whole_budget_drops_the_least_recently_used_and_expired_values_silently() {
    let now = Instant::now();
    let mut table = Table::new(300, 1_000, HOUR);
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
    let mut table = Table::new(300, 1_000, HOUR);
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
fn over_the_budget_failure_records_go_first_then_the_largest_shares_oldest_record() {
    let start = Instant::now();
    let mut table = Table::new(1_000, 1_000, Duration::from_secs(10));
    let scope = |n: u8| ScopeHash::of(&[n]);
    // The oldest record is the lone share's; the largest share kept its records after it.
    assert!(table
        .insert(key(1), kept(), 200, scope(1), HOUR, start)
        .is_empty());
    for n in 2..=4 {
        assert!(table
            .insert(key(n), kept(), 200, scope(2), HOUR, start)
            .is_empty());
    }
    assert!(table
        .insert(key(5), value(), 100, scope(3), HOUR, start)
        .is_empty());
    // Past the minimum retention, everything may go: the failure record first, though newest.
    let later = start + Duration::from_secs(11);
    let evicted = table.insert(key(6), kept(), 200, scope(4), HOUR, later);
    assert_eq!(keys(&evicted), vec![(key(5), Cause::Budget)]);
    // Then the largest share's oldest record, not the oldest record of all.
    let evicted = table.insert(key(7), kept(), 200, scope(4), HOUR, later);
    assert_eq!(keys(&evicted), vec![(key(2), Cause::Budget)]);
    assert!(table.get(&key(1), || later).is_some());
    assert_eq!(table.bytes(), 1_000);
}

#[test]
fn a_young_kept_record_is_never_dropped_for_another_share() {
    let start = Instant::now();
    let mut table = Table::new(1_000, 1_000, Duration::from_secs(10));
    let scope = |n: u8| ScopeHash::of(&[n]);
    for n in 1..=4 {
        assert!(table
            .insert(key(n), kept(), 250, scope(n), HOUR, start)
            .is_empty());
    }
    assert!(
        !table.has_room(scope(9), start),
        "a new share finds no room"
    );
    assert!(table.has_room(scope(1), start), "a share may drop its own");
    // A failure record that finds no room is not kept, and pushes out no kept record.
    let evicted = table.insert(key(5), value(), 100, scope(5), HOUR, start);
    assert_eq!(keys(&evicted), vec![(key(5), Cause::Budget)]);
    // A record whose action ran is kept all the same, over the budget.
    let evicted = table.insert(key(6), kept(), 100, scope(6), HOUR, start);
    assert!(evicted.is_empty(), "{:?}", keys(&evicted));
    assert_eq!(table.bytes(), 1_100);
    // A share that holds records drops its own oldest, young as it is.
    let evicted = table.insert(key(7), kept(), 100, scope(6), HOUR, start);
    assert_eq!(keys(&evicted), vec![(key(6), Cause::Budget)]);
    for n in 1..=4 {
        assert!(table.get(&key(n), || start).is_some(), "record {n} kept");
    }
    // Past the minimum retention the oldest go again, and new shares find room.
    let later = start + Duration::from_secs(10);
    assert!(table.has_room(scope(9), later));
    let evicted = table.insert(key(8), kept(), 100, scope(8), HOUR, later);
    assert_eq!(keys(&evicted), vec![(key(1), Cause::Budget)]);
}

#[test]
fn an_expired_value_is_gone_when_read() {
    let now = Instant::now();
    let mut table = Table::new(1_000, 1_000, HOUR);
    let a = ScopeHash::of(b"a");
    table.insert(key(1), value(), 100, a, Duration::from_secs(1), now);
    assert!(table.get(&key(1), || now).is_some());
    assert!(table
        .get(&key(1), || now + Duration::from_secs(1))
        .is_none());
    assert_eq!(table.bytes(), 0);
    assert!(table.get(&key(1), || now).is_none(), "and stays gone");
}

/// A key from two numbers: keys that share `head` share the first eight bytes, all the index
/// hashes, so that they meet in its probes and only the full key tells them apart.
fn key_of(head: u8, tail: u16) -> IntentKey {
    let mut bytes = [head; 32];
    bytes[8..10].copy_from_slice(&tail.to_le_bytes());
    IntentKey::from_bytes(bytes)
}

#[derive(Debug, Clone)]
enum Step {
    Insert {
        head: u8,
        tail: u16,
        share: u8,
        weight: u32,
        kept: bool,
    },
    Get {
        head: u8,
        tail: u16,
    },
    Remove {
        head: u8,
        tail: u16,
    },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..4u8, 0..600u16, 0..6u8, 1..200u32, any::<bool>())
            .prop_map(|(head, tail, share, weight, kept)| {
                Step::Insert { head, tail, share, weight, kept }
            }),
        2 => (0..4u8, 0..600u16).prop_map(|(head, tail)| Step::Get { head, tail }),
        1 => (0..4u8, 0..600u16).prop_map(|(head, tail)| Step::Remove { head, tail }),
    ]
}

proptest::proptest! {
    /// Whatever the inserts, reads and removals, the table holds exactly the values kept and
    /// neither replaced, removed nor reported evicted (never a kept record as it is kept), charges exactly their weights, and
    /// stays within its budget (no record is kept for a minimum time here): its index never
    /// loses, keeps or confuses a value, however many keys meet in its probes and however
    /// often it grows, and its heap always names the largest share.
    #[test]
    fn the_table_holds_what_was_kept_and_not_reported_gone(
        steps in proptest::collection::vec(step(), 1..1500),
    ) {
        let now = Instant::now();
        let (budget, part) = (20_000, 12_000);
        let mut table = Table::new(budget, part, Duration::ZERO);
        let mut held: HashMap<IntentKey, u64> = HashMap::new();
        for step in steps {
            match step {
                Step::Insert { head, tail, share, weight, kept: is_kept } => {
                    let key = key_of(head, tail);
                    let share = ScopeHash::of(&[share]);
                    held.insert(key, u64::from(weight));
                    let value = if is_kept { kept() } else { value() };
                    for gone in table.insert(key, value, weight, share, HOUR, now) {
                        // A failure record finds no room where only kept ones could go.
                        let just_kept = gone.key == key;
                        proptest::prop_assert!(!(just_kept && is_kept), "the record just kept");
                        proptest::prop_assert!(held.remove(&gone.key).is_some());
                    }
                }
                Step::Get { head, tail } => {
                    let key = key_of(head, tail);
                    let found = table.get(&key, || now).is_some();
                    proptest::prop_assert_eq!(found, held.contains_key(&key));
                }
                Step::Remove { head, tail } => {
                    let key = key_of(head, tail);
                    table.remove(&key);
                    held.remove(&key);
                }
            }
            proptest::prop_assert_eq!(table.bytes(), held.values().sum::<u64>());
            proptest::prop_assert!(table.bytes() <= budget);
            let largest = table.share_places.values().map(|&at| table.shares[at as usize].bytes);
            let top = table.largest.top().map(|at| table.shares[at as usize].bytes);
            proptest::prop_assert_eq!(top, largest.max());
        }
        for (key, _) in held {
            proptest::prop_assert!(table.get(&key, || now).is_some());
        }
    }
}

#[test]
fn a_node_spans_two_cache_lines_aligned() {
    assert_eq!(std::mem::size_of::<TableNode>(), 128);
    assert_eq!(std::mem::align_of::<TableNode>(), 64);
}
