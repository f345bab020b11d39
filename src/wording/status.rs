//! What the status path says about an action it was asked about.

use super::Words;
use crate::key::IntentKey;

/// The user's scope hook panicked, so the record cannot be looked up.
pub(crate) fn status_layer_fault(what: &str) -> Words {
    Words::new(
        "layer-fault",
        "Idempotency hook failed",
        "unavailable",
        false,
        format!(
            "This status request was not answered: the layer's `{what}` hook failed on it, so \
             whether the action ran cannot be told from here."
        ),
    )
}

/// Nothing is visible to this scope.
pub(crate) fn status_not_found(key: &IntentKey) -> Words {
    Words::new(
        "not-found",
        "Intent not found",
        "not_found",
        false,
        "No record of this action is visible to this caller: it may never have run, its \
         record may have expired, or it belongs to another caller, so whether it ran cannot \
         be told from here. If it may have run, check its effect before calling again."
            .to_owned(),
    )
    .intent(key)
}

/// The status path was asked about something that is not an intent key.
pub(crate) fn status_malformed() -> Words {
    Words::new(
        "not-found",
        "Intent not found",
        "not_found",
        false,
        "This status request names no intent: an intent is the 64 hex digits of the \
         idempotency-intent header. Ask again with that value."
            .to_owned(),
    )
}

/// The status path needs the caller's scope too.
pub(crate) fn status_missing_scope(what: &str) -> Words {
    Words::new(
        "missing-scope",
        "Missing caller",
        "not_found",
        false,
        format!(
            "This status request was not answered: it needs {what}, the same as the call it \
             asks about. Send it again with that set; this says nothing about whether the \
             action ran."
        ),
    )
}

/// The status path could not ask the store: whether the action ran cannot be told now.
pub(crate) fn status_unavailable(key: &IntentKey, status_url: &str) -> Words {
    Words::new(
        "unavailable",
        "Idempotency store unavailable",
        "unavailable",
        true,
        format!(
            "Cannot tell right now whether this action ran: the idempotency store did not \
             answer. Do not repeat the action yet; ask {status_url} again in 1 s."
        ),
    )
    .intent(key)
    .retry_after(1)
}
