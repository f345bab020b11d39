//! The checks of what an operator asks of a store: a listing, a removal and a resolution kept
//! without an owner. A store that does not list (the trait's default answers an error) passes
//! them: an operator then cannot list or mend what it holds, and the layer needs nothing of it.

use std::sync::Arc;

use super::data::*;
use super::expect::*;
use super::{Check, Stop};
use crate::key::IntentKey;
use crate::store::{Entry, Fence, Record, Store};

/// Pages through the whole store for `key`'s entry; `None` if the store does not list.
async fn listed<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
) -> Result<Option<Option<Entry>>, Stop> {
    let mut cursor = 0;
    // Bounded, for a store whose cursor never comes back to 0.
    for page in 0..100_000 {
        let scanned = match store.scan(cursor, 100).await {
            Err(_) if page == 0 => return Ok(None),
            answer => c.ok("scan", answer)?,
        };
        let found = scanned.entries.into_iter().find(|(k, _)| k == key);
        if let Some((_, entry)) = found {
            return Ok(Some(Some(entry)));
        }
        if scanned.next == 0 {
            return Ok(Some(None));
        }
        cursor = scanned.next;
    }
    c.fail("the listing did not end within 100 000 pages");
    Err(Stop)
}

/// A completed intent's record, kept by `owner`.
async fn completed<St: Store>(
    store: &St,
    c: &mut Check,
    key: &IntentKey,
) -> Result<(crate::store::ClaimRequest, Arc<Record>), Stop> {
    let owner = hold(store, c, key, HELD).await?;
    let kept = record(&owner, plain_response(), KEPT);
    let answer = store
        .complete(key, &owner.token, Arc::clone(&kept), KEPT)
        .await;
    c.fence("complete by the owner", answer, Fence::Held)?;
    Ok((owner, kept))
}

pub(super) async fn a_listing_finds_what_the_store_holds<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let (held, done) = (fresh_key(), fresh_key());
    let owner = hold(store, c, &held, HELD).await?;
    let (_, kept) = completed(store, c, &done).await?;
    let Some(found) = listed(store, c, &done).await? else {
        return Ok(());
    };
    match found {
        Some(Entry::Completed(got)) => c.same("the listed record", record_differences(&got, &kept)),
        other => c.fail(format!(
            "the listing gave the completed intent as {}",
            entry_kind(other.as_ref())
        )),
    }
    match listed(store, c, &held).await? {
        Some(Some(Entry::Running(info))) => {
            c.same("the listed lease", running_differences(&info, &owner));
        }
        other => c.fail(format!(
            "the listing gave the running intent as {}",
            entry_kind(other.flatten().as_ref())
        )),
    }
    Ok(())
}

pub(super) async fn a_removed_intent_runs_again_and_a_resolution_is_kept<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let (owner, _kept) = completed(store, c, &key).await?;
    // A store that does not list does not remove either.
    if store.scan(0, 1).await.is_err() {
        return Ok(());
    }
    if !c.ok("remove", store.remove(&key).await)? {
        c.fail("remove of a completed intent answered that it held nothing");
    }
    let again = rival(&owner);
    expect_acquired(store, c, &key, &again, "claim after remove").await?;
    let resolved = record(&again, plain_response(), KEPT);
    c.ok("put", store.put(&key, Arc::clone(&resolved), KEPT).await)?;
    expect_completed(store, c, &key, &resolved, "get after put").await?;
    let when = "claim after put";
    expect_completed_claim(store, c, &key, &rival(&again), &resolved, when).await
}
