//! The memory store: leases, records, budgets and shares.

use super::*;
use crate::key::{Fingerprint, ScopeHash};
use crate::store::{KeptResponse, ReleaseCause, StoredResponse};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};

fn key(n: u8) -> IntentKey {
    IntentKey::from_bytes([n; 32])
}

fn request(lease: Duration) -> ClaimRequest {
    ClaimRequest {
        token: OwnerToken::generate(),
        lease,
        scope: ScopeHash::of(b"s"),
        share: ScopeHash::of(b"s"),
        fingerprint: Fingerprint::raw(None, b""),
        started_at_ms: 1,
    }
}

fn record(body_len: usize) -> Arc<Record> {
    Arc::new(Record {
        scope: ScopeHash::of(b"s"),
        fingerprint: Fingerprint::raw(None, b""),
        started_at_ms: 1,
        completed_at_ms: 2,
        expires_at_ms: u64::MAX,
        response: KeptResponse::Full(StoredResponse {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: Bytes::from(vec![b'x'; body_len]),
        }),
        protocol: crate::store::Protocol::Http,
        operation: None,
        share: None,
        note: None,
        history: Vec::new(),
    })
}

fn acquired(claim: Claim) -> OwnerToken {
    match claim {
        Claim::Acquired(token) => token,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

#[tokio::test]
async fn a_claimed_intent_is_running_until_completed_then_replayed() {
    let store = MemoryStore::new();
    let token = acquired(
        store
            .claim(&key(1), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    assert!(matches!(
        store
            .claim(&key(1), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
        Claim::Running(_)
    ));
    let fence = store
        .complete(&key(1), &token, record(3), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(fence, Fence::Held);
    assert!(matches!(
        store
            .claim(&key(1), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
        Claim::Completed(_)
    ));
    assert_eq!(store.running(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lapsed_lease_is_taken_over_and_the_old_owner_is_fenced() {
    let store = MemoryStore::new();
    let old = acquired(
        store
            .claim(&key(2), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_secs(29)).await;
    let rival = request(Duration::from_secs(30));
    let held = store.claim(&key(2), &rival).await.unwrap();
    assert!(matches!(held, Claim::Running(_)), "held until it lapses");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let new = acquired(
        store
            .claim(&key(2), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    assert_ne!(old, new);
    let stale = store
        .complete(&key(2), &old, record(1), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(stale, Fence::Lost);
    assert_eq!(
        store
            .extend(&key(2), &old, Duration::from_secs(1))
            .await
            .unwrap(),
        Fence::Lost
    );
    assert!(matches!(
        store.get(&key(2)).await.unwrap(),
        Some(Entry::Running(_))
    ));
}

#[tokio::test]
async fn a_release_leaves_a_tombstone_that_does_not_block_a_retry() {
    let store = MemoryStore::new();
    let token = acquired(
        store
            .claim(&key(3), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    let tombstone = Arc::new(Tombstone {
        scope: ScopeHash::of(b"s"),
        fingerprint: Fingerprint::raw(None, b""),
        failed_at_ms: 2,
        status: Some(StatusCode::SERVICE_UNAVAILABLE),
        cause: ReleaseCause::Status,
        retry_after_s: None,
        share: None,
        failures: 1,
        history: Vec::new(),
    });
    store
        .release(&key(3), &token, tombstone, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(
        store.get(&key(3)).await.unwrap(),
        Some(Entry::Failed(_))
    ));
    let claimed = store
        .claim(&key(3), &request(Duration::from_secs(30)))
        .await
        .unwrap();
    let Claim::AcquiredAfterFailure(_, replaced) = claimed else {
        panic!("expected AcquiredAfterFailure, got {claimed:?}")
    };
    assert_eq!((replaced.failed_at_ms, replaced.failures), (2, 1));
}

#[tokio::test]
async fn records_expire_after_their_retention() {
    let store = MemoryStore::new();
    let token = acquired(
        store
            .claim(&key(4), &request(Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    store
        .complete(&key(4), &token, record(1), Duration::from_millis(20))
        .await
        .unwrap();
    assert!(store.get(&key(4)).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(store.get(&key(4)).await.unwrap().is_none());
}

#[tokio::test]
async fn the_byte_budget_holds_and_evictions_are_counted() {
    let store = MemoryStore::builder().max_bytes(128 * 1024).build();
    for n in 0..64u8 {
        let token = acquired(
            store
                .claim(&key(n), &request(Duration::from_secs(30)))
                .await
                .unwrap(),
        );
        store
            .complete(&key(n), &token, record(4096), Duration::from_secs(3600))
            .await
            .unwrap();
    }
    assert!(store.weighted_size() <= 128 * 1024);
    assert!(store.evictions() > 0);
}
