//! Store calls with the answer a check expects of them.

use std::time::Duration;

use super::data::*;
use super::{Check, Stop};
use crate::key::IntentKey;
use crate::store::{Claim, ClaimRequest, Entry, Record, Store, Tombstone};

/// Claims under `request` and expects `Acquired` with its token; answers whether it was.
pub(super) async fn expect_acquired<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    request: &ClaimRequest,
    when: &str,
) -> Result<bool, Stop> {
    match c.ok(when, store.claim(key, request).await)? {
        Claim::Acquired(token) if token == request.token => return Ok(true),
        Claim::Acquired(token) => c.fail(format!(
            "{when}: answered Acquired({token:?}), expected the request's {:?}",
            request.token
        )),
        other => c.fail(format!(
            "{when}: answered {}, expected Acquired",
            claim_kind(&other)
        )),
    }
    Ok(false)
}

/// Claims under `request` over `stone`, the intent's tombstone, and expects
/// `AcquiredAfterFailure` with the request's token and that tombstone, so that a retry budget
/// reads the failures in a row; answers whether it did.
pub(super) async fn expect_acquired_after<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    request: &ClaimRequest,
    stone: &Tombstone,
    when: &str,
) -> Result<bool, Stop> {
    match c.ok(when, store.claim(key, request).await)? {
        Claim::AcquiredAfterFailure(token, got) if token == request.token => {
            c.same(when, tombstone_differences(&got, stone));
            return Ok(true);
        }
        other => c.fail(format!(
            "{when}: answered {}, expected AcquiredAfterFailure with the request's token and \
             the tombstone it replaced",
            claim_kind(&other)
        )),
    }
    Ok(false)
}

/// Claims `key` for a new owner; the check stops if the store does not grant it.
pub(super) async fn hold<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    lease: Duration,
) -> Result<ClaimRequest, Stop> {
    let owner = request(lease);
    if expect_acquired(store, c, key, &owner, "claim of a free intent").await? {
        Ok(owner)
    } else {
        Err(Stop)
    }
}

/// Claims under `request` and expects `Running` with `holder`'s execution.
pub(super) async fn expect_running_claim<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    request: &ClaimRequest,
    holder: &ClaimRequest,
    when: &str,
) -> Result<(), Stop> {
    match c.ok(when, store.claim(key, request).await)? {
        Claim::Running(info) => c.same(when, running_differences(&info, holder)),
        other => c.fail(format!(
            "{when}: answered {}, expected Running",
            claim_kind(&other)
        )),
    }
    Ok(())
}

/// Claims under `request` and expects `Completed` with `record`.
pub(super) async fn expect_completed_claim<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    request: &ClaimRequest,
    record: &Record,
    when: &str,
) -> Result<(), Stop> {
    match c.ok(when, store.claim(key, request).await)? {
        Claim::Completed(kept) => c.same(when, record_differences(&kept, record)),
        other => c.fail(format!(
            "{when}: answered {}, expected Completed",
            claim_kind(&other)
        )),
    }
    Ok(())
}

/// Reads `key` and expects `Running` with `holder`'s execution.
pub(super) async fn expect_running<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    holder: &ClaimRequest,
    when: &str,
) -> Result<(), Stop> {
    match c.ok(when, store.get(key).await)? {
        Some(Entry::Running(info)) => c.same(when, running_differences(&info, holder)),
        other => c.fail(format!(
            "{when}: get answered {}, expected Running",
            entry_kind(other.as_ref())
        )),
    }
    Ok(())
}

/// Reads `key` and expects `Completed` with `record`.
pub(super) async fn expect_completed<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    record: &Record,
    when: &str,
) -> Result<(), Stop> {
    match c.ok(when, store.get(key).await)? {
        Some(Entry::Completed(kept)) => c.same(when, record_differences(&kept, record)),
        other => c.fail(format!(
            "{when}: get answered {}, expected Completed",
            entry_kind(other.as_ref())
        )),
    }
    Ok(())
}

/// Reads `key` and expects `Failed` with `tombstone`.
pub(super) async fn expect_failed<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    tombstone: &Tombstone,
    when: &str,
) -> Result<(), Stop> {
    match c.ok(when, store.get(key).await)? {
        Some(Entry::Failed(kept)) => c.same(when, tombstone_differences(&kept, tombstone)),
        other => c.fail(format!(
            "{when}: get answered {}, expected Failed",
            entry_kind(other.as_ref())
        )),
    }
    Ok(())
}

/// Reads `key` and expects anything but an entry of kind `gone`.
pub(super) async fn expect_gone<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
    gone: &str,
    when: &str,
) -> Result<(), Stop> {
    let entry = c.ok(when, store.get(key).await)?;
    if entry_kind(entry.as_ref()) == gone {
        c.fail(format!("{when}: get still answered {gone}"));
    }
    Ok(())
}
