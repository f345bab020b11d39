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

pub(super) async fn a_listing_in_small_pages_finds_every_intent_once<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    if store.scan(0, 1).await.is_err() {
        return Ok(());
    }
    let mut keys = std::collections::HashSet::new();
    for _ in 0..120 {
        let key = fresh_key();
        completed(store, c, &key).await?;
        keys.insert(key);
    }
    let (mut cursor, mut seen, mut pages) = (0, std::collections::HashMap::new(), 0);
    loop {
        pages += 1;
        let scanned = c.ok("scan", store.scan(cursor, 25).await)?;
        for (key, _) in scanned.entries {
            *seen.entry(key).or_insert(0) += 1;
        }
        if scanned.next == 0 || pages > 100_000 {
            break;
        }
        cursor = scanned.next;
    }
    let missing = keys.iter().filter(|key| !seen.contains_key(key)).count();
    let twice = keys.iter().filter(|key| seen.get(key) > Some(&1)).count();
    if missing > 0 || twice > 0 {
        c.fail(format!(
            "pages of 25 over 120 completed intents missed {missing} and gave {twice} twice"
        ));
    }
    if pages < 2 {
        c.fail("120 intents came back in one page of 25");
    }
    Ok(())
}

pub(super) async fn a_removed_intent_runs_again_a_resolution_is_kept_and_a_lease_is_neither<
    St: Store,
>(
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
    // A running lease is never the operator's to remove or overwrite.
    let resolved = record(&again, plain_response(), KEPT);
    if c.ok("remove of a lease", store.remove(&key).await)? {
        c.fail("remove answered that it removed a running lease");
    }
    if c.ok(
        "put over a lease",
        store.put(&key, Arc::clone(&resolved), KEPT).await,
    )? {
        c.fail("put answered that it wrote over a running lease");
    }
    expect_running(
        store,
        c,
        &key,
        &again,
        "get after remove and put over a lease",
    )
    .await?;
    let answer = store.abandon(&key, &again.token).await;
    c.fence("abandon by the lease's owner", answer, Fence::Held)?;
    if !c.ok("put", store.put(&key, Arc::clone(&resolved), KEPT).await)? {
        c.fail("put over nothing answered that it wrote nothing");
    }
    expect_completed(store, c, &key, &resolved, "get after put").await?;
    let when = "claim after put";
    expect_completed_claim(store, c, &key, &rival(&again), &resolved, when).await
}
