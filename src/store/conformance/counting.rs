//! The checks of the count observe mode keeps per intent. A store that does not count (the
//! trait's default answers an error) passes them: observe mode then counts its calls as
//! uncounted, and enforcing needs nothing of it.

use tokio::time::sleep;

use super::data::*;
use super::expect::*;
use super::{Check, Stop};
use crate::store::Store;

/// The counts `store` gives `key`'s next `calls` calls, or `None` if it does not count.
async fn counts<St: Store>(
    store: &St,
    c: &mut Check,
    key: &crate::key::IntentKey,
    calls: usize,
) -> Result<Option<Vec<u64>>, Stop> {
    let mut got = Vec::with_capacity(calls);
    for call in 0..calls {
        match store.count_call(key, SHORT).await {
            Err(_) if call == 0 && got.is_empty() => return Ok(None),
            answer => got.push(c.ok("count_call", answer)?),
        }
    }
    Ok(Some(got))
}

pub(super) async fn calls_are_counted_per_intent_within_the_first_calls_window<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let (one, two) = (fresh_key(), fresh_key());
    let Some(first) = counts(store, c, &one, 3).await? else {
        return Ok(());
    };
    if first != [1, 2, 3] {
        c.fail(format!(
            "three calls of one intent counted {first:?}, expected [1, 2, 3]"
        ));
    }
    let other = counts(store, c, &two, 1).await?.unwrap_or_default();
    if other != [1] {
        c.fail(format!(
            "the first call of another intent counted {other:?}, expected [1]"
        ));
    }
    sleep(PAST_KEPT_SHORT).await;
    let again = counts(store, c, &one, 1).await?.unwrap_or_default();
    if again != [1] {
        c.fail(format!(
            "a call past the window counted {again:?}, expected a new count [1]"
        ));
    }
    Ok(())
}

pub(super) async fn counting_calls_leaves_the_intent_free<St: Store>(
    store: &St,
    c: &mut Check,
) -> Result<(), Stop> {
    let key = fresh_key();
    if counts(store, c, &key, 2).await?.is_none() {
        return Ok(());
    }
    let when = "get after counting calls";
    if c.ok(when, store.get(&key).await)?.is_some() {
        c.fail(format!(
            "{when}: answered an entry for an intent only counted"
        ));
    }
    let owner = hold(store, c, &key, HELD).await?;
    expect_running(
        store,
        c,
        &key,
        &owner,
        "get after a claim of a counted intent",
    )
    .await
}
