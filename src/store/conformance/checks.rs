//! The checks, each on fresh keys.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tokio::time::sleep;

use super::data::*;
use super::expect::*;
use super::{Check, Stop};
use crate::store::{Fence, KeptResponse, Omission, Store};

pub(super) async fn claim_acquires_a_free_intent<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    expect_running(store, c, &key, &owner, "get after the claim").await
}

pub(super) async fn a_held_intent_answers_running_to_another_token<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let when = "claim under another token";
    expect_running_claim(store, c, &key, &rival(&owner), &owner, when).await?;
    expect_running(store, c, &key, &owner, "get after the second claim").await
}

pub(super) async fn a_repeated_claim_with_the_same_token_acquires_again<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    expect_acquired(store, c, &key, &owner, "the same claim repeated").await?;
    let when = "claim under another token after the repeat";
    expect_running_claim(store, c, &key, &rival(&owner), &owner, when).await
}

/// A fenced write.
#[derive(Clone, Copy)]
enum FencedWrite {
    Complete,
    Release,
    Extend,
    Abandon,
}

/// Makes `write` under the token of a claim that found the intent running, and expects it
/// fenced with nothing changed: the lease still held, and the owner still able to extend and
/// complete it.
async fn under_a_wrong_token<St: Store>(
    store: &St,
    c: &mut Check,
    write: FencedWrite,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let other = rival(&owner);
    let when = "claim under another token";
    expect_running_claim(store, c, &key, &other, &owner, when).await?;
    let token = &other.token;
    let (when, answer) = match write {
        FencedWrite::Complete => {
            let kept = record(&other, plain_response(), KEPT);
            let answer = store.complete(&key, token, kept, KEPT).await;
            ("complete under a wrong token", answer)
        }
        FencedWrite::Release => {
            let answer = store
                .release(&key, token, tombstone(&other, false), KEPT)
                .await;
            ("release under a wrong token", answer)
        }
        FencedWrite::Extend => {
            let answer = store.extend(&key, token, HELD).await;
            ("extend under a wrong token", answer)
        }
        FencedWrite::Abandon => {
            let answer = store.abandon(&key, token).await;
            ("abandon under a wrong token", answer)
        }
    };
    c.fence(when, answer, Fence::Lost)?;
    expect_running(store, c, &key, &owner, "get after the fenced write").await?;
    let when = "claim under a third token after the fenced write";
    expect_running_claim(store, c, &key, &rival(&owner), &owner, when).await?;
    let answer = store.extend(&key, &owner.token, HELD).await;
    c.fence(
        "extend by the owner after the fenced write",
        answer,
        Fence::Held,
    )?;
    let kept = record(&owner, plain_response(), KEPT);
    let answer = store
        .complete(&key, &owner.token, Arc::clone(&kept), KEPT)
        .await;
    c.fence(
        "complete by the owner after the fenced write",
        answer,
        Fence::Held,
    )?;
    expect_completed(store, c, &key, &kept, "get after the owner's complete").await
}

/// One check per fenced write, each named for it.
macro_rules! under_a_wrong_token_checks {
    ($($name:ident => $write:expr),+ $(,)?) => {$(
        pub(super) async fn $name<St: Store>(store: &St, c: &mut Check) -> Result<(), Stop> {
            under_a_wrong_token(store, c, $write).await
        }
    )+};
}

under_a_wrong_token_checks! {
    complete_under_a_wrong_token_is_fenced => FencedWrite::Complete,
    release_under_a_wrong_token_is_fenced => FencedWrite::Release,
    extend_under_a_wrong_token_is_fenced => FencedWrite::Extend,
    abandon_under_a_wrong_token_is_fenced => FencedWrite::Abandon,
}

/// Completes a fresh intent with `response` and expects the record back, equal in every
/// field, from `get`, from another token's `claim` and from `cached`, if it has it.
async fn kept_exactly<St: Store>(
    store: &St,
    c: &mut Check,
    response: KeptResponse,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let kept = record(&owner, response, KEPT);
    let answer = store
        .complete(&key, &owner.token, Arc::clone(&kept), KEPT)
        .await;
    c.fence("complete by the owner", answer, Fence::Held)?;
    expect_completed(store, c, &key, &kept, "get after complete").await?;
    let when = "claim under another token after complete";
    expect_completed_claim(store, c, &key, &rival(&owner), &kept, when).await?;
    if let Some(cached) = crate::store::cached(store, &key) {
        c.same("cached after complete", record_differences(&cached, &kept));
    }
    Ok(())
}

pub(super) async fn a_full_response_is_kept_exactly<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    kept_exactly(store, c, full_response()).await
}

pub(super) async fn an_omitted_response_is_kept_exactly<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let omitted = [
        (StatusCode::OK, Omission::TooLarge),
        (StatusCode::CREATED, Omission::NoStore),
        (StatusCode::ACCEPTED, Omission::Unclassified),
    ];
    for (status, why) in omitted {
        kept_exactly(store, c, KeptResponse::Omitted { status, why }).await?;
    }
    Ok(())
}

pub(super) async fn an_abandoned_execution_is_kept_exactly<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    kept_exactly(store, c, KeptResponse::Abandoned).await
}

pub(super) async fn a_release_leaves_a_tombstone_that_never_blocks<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    for bare in [false, true] {
        let key = fresh_key();
        let owner = hold(store, c, &key, HELD).await?;
        let stone = tombstone(&owner, bare);
        let answer = store
            .release(&key, &owner.token, Arc::clone(&stone), KEPT)
            .await;
        c.fence("release by the owner", answer, Fence::Held)?;
        expect_failed(store, c, &key, &stone, "get after release").await?;
        let when = "claim under another token over the tombstone";
        expect_acquired_after(store, c, &key, &rival(&owner), &stone, when).await?;
    }
    Ok(())
}

pub(super) async fn a_completed_intent_fences_its_old_owner<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let token = &owner.token;
    let kept = record(&owner, plain_response(), KEPT);
    let answer = store.complete(&key, token, Arc::clone(&kept), KEPT).await;
    c.fence("complete by the owner", answer, Fence::Held)?;
    let other = record(&owner, KeptResponse::Abandoned, KEPT);
    let answer = store.complete(&key, token, other, KEPT).await;
    c.fence("another complete by the old owner", answer, Fence::Lost)?;
    let answer = store.extend(&key, token, HELD).await;
    c.fence("extend by the old owner", answer, Fence::Lost)?;
    let answer = store
        .release(&key, token, tombstone(&owner, false), KEPT)
        .await;
    c.fence("release by the old owner", answer, Fence::Lost)?;
    let answer = store.abandon(&key, token).await;
    c.fence("abandon by the old owner", answer, Fence::Lost)?;
    expect_completed(store, c, &key, &kept, "get after the fenced writes").await
}

pub(super) async fn a_released_intent_fences_its_old_owner<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let token = &owner.token;
    let stone = tombstone(&owner, false);
    let answer = store.release(&key, token, Arc::clone(&stone), KEPT).await;
    c.fence("release by the owner", answer, Fence::Held)?;
    let answer = store.extend(&key, token, HELD).await;
    c.fence("extend by the old owner", answer, Fence::Lost)?;
    let answer = store
        .release(&key, token, tombstone(&owner, true), KEPT)
        .await;
    c.fence("another release by the old owner", answer, Fence::Lost)?;
    let answer = store.abandon(&key, token).await;
    c.fence("abandon by the old owner", answer, Fence::Lost)?;
    expect_failed(store, c, &key, &stone, "get after the fenced writes").await?;
    let next = rival(&owner);
    let when = "claim under another token over the tombstone";
    if !expect_acquired_after(store, c, &key, &next, &stone, when).await? {
        return Ok(());
    }
    let answer = store
        .complete(&key, token, record(&owner, plain_response(), KEPT), KEPT)
        .await;
    c.fence(
        "complete by the old owner after a new claim",
        answer,
        Fence::Lost,
    )?;
    expect_running(store, c, &key, &next, "get after the old owner's complete").await
}

/// The lease lapses and another token takes over; then, under its own name, the lapsed owner
/// is fenced (a store whose leases never lapse never gets that far).
pub(super) async fn a_lease_that_is_not_extended_lapses<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let first = hold(store, c, &key, SHORT).await?;
    sleep(PAST_SHORT).await;
    expect_gone(store, c, &key, "Running", "get past the lease").await?;
    let next = rival(&first);
    let when = "claim under another token past the lease";
    if !expect_acquired(store, c, &key, &next, when).await? {
        return Ok(());
    }
    c.name = "a_lapsed_owner_is_fenced";
    let token = &first.token;
    let answer = store
        .complete(&key, token, record(&first, plain_response(), KEPT), KEPT)
        .await;
    c.fence("complete by the lapsed owner", answer, Fence::Lost)?;
    let answer = store.extend(&key, token, HELD).await;
    c.fence("extend by the lapsed owner", answer, Fence::Lost)?;
    let answer = store
        .release(&key, token, tombstone(&first, false), KEPT)
        .await;
    c.fence("release by the lapsed owner", answer, Fence::Lost)?;
    expect_running(store, c, &key, &next, "get after the lapsed owner's writes").await?;
    let kept = record(&next, plain_response(), KEPT);
    let answer = store
        .complete(&key, &next.token, Arc::clone(&kept), KEPT)
        .await;
    c.fence("complete by the new owner", answer, Fence::Held)?;
    expect_completed(store, c, &key, &kept, "get after the new owner's complete").await
}

pub(super) async fn an_extended_lease_stays_held<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    // A 300 ms lease extended by 600 ms at 150 ms and at 400 ms holds until 1000 ms at least.
    const EXTENSION: Duration = Duration::from_millis(600);
    let key = fresh_key();
    let owner = hold(store, c, &key, SHORT).await?;
    for (at, wait) in [(150, 150), (400, 250)] {
        sleep(Duration::from_millis(wait)).await;
        let answer = store.extend(&key, &owner.token, EXTENSION).await;
        c.fence(
            &format!("extend by the owner at {at} ms"),
            answer,
            Fence::Held,
        )?;
    }
    sleep(Duration::from_millis(300)).await;
    let when = "claim under another token at 700 ms";
    expect_running_claim(store, c, &key, &rival(&owner), &owner, when).await
}

pub(super) async fn a_record_expires_after_its_retention<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let kept = record(&owner, plain_response(), SHORT);
    let answer = store
        .complete(&key, &owner.token, Arc::clone(&kept), SHORT)
        .await;
    c.fence("complete by the owner", answer, Fence::Held)?;
    expect_completed(store, c, &key, &kept, "get right after complete").await?;
    sleep(PAST_KEPT_SHORT).await;
    expect_gone(store, c, &key, "Completed", "get past the retention").await?;
    if crate::store::cached(store, &key).is_some() {
        c.fail("cached past the retention: still answered the record");
    }
    let when = "claim under another token past the retention";
    expect_acquired(store, c, &key, &rival(&owner), when).await?;
    Ok(())
}

pub(super) async fn a_tombstone_expires_after_its_ttl<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let stone = tombstone(&owner, false);
    let answer = store
        .release(&key, &owner.token, Arc::clone(&stone), SHORT)
        .await;
    c.fence("release by the owner", answer, Fence::Held)?;
    expect_failed(store, c, &key, &stone, "get right after release").await?;
    sleep(PAST_KEPT_SHORT).await;
    expect_gone(store, c, &key, "Failed", "get past the ttl").await?;
    // A tombstone past its time hands no failures on.
    let when = "claim under another token past the ttl";
    expect_acquired(store, c, &key, &rival(&owner), when).await?;
    Ok(())
}

pub(super) async fn abandon_frees_the_intent_at_once<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    let owner = hold(store, c, &key, HELD).await?;
    let answer = store.abandon(&key, &owner.token).await;
    c.fence("abandon by the owner", answer, Fence::Held)?;
    expect_gone(store, c, &key, "Running", "get after abandon").await?;
    let when = "claim under another token after abandon";
    expect_acquired(store, c, &key, &rival(&owner), when).await?;
    Ok(())
}

pub(super) async fn distinct_keys_are_independent<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let (one, two) = (fresh_key(), fresh_key());
    let first = hold(store, c, &one, HELD).await?;
    let second = hold(store, c, &two, HELD).await?;
    let kept = record(&first, plain_response(), KEPT);
    let answer = store
        .complete(&one, &first.token, Arc::clone(&kept), KEPT)
        .await;
    c.fence("complete of the first intent", answer, Fence::Held)?;
    let when = "get of the second intent after the first completed";
    expect_running(store, c, &two, &second, when).await?;
    let stone = tombstone(&second, false);
    let answer = store
        .release(&two, &second.token, Arc::clone(&stone), KEPT)
        .await;
    c.fence("release of the second intent", answer, Fence::Held)?;
    let when = "get of the first intent after the second released";
    expect_completed(store, c, &one, &kept, when).await?;
    expect_failed(store, c, &two, &stone, "get of the second intent").await
}
