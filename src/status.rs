//! The status path: `GET {status_path}/{intent}` answers what became of an action.

use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request, Response};

use crate::answer::{self, Failure};
use crate::body::ResponseBody;
use crate::clock::seconds_since;
use crate::future::ResponseFuture;
use crate::key::{IntentKey, ScopeHash};
use crate::layer::Shared;
use crate::replay::{replay, with_intent, written};
use crate::settings::Settings;
use crate::store::{Entry, Record, Store, StoreError, Tombstone};

/// Whether `request` asks the status path about an intent.
pub(crate) fn asks_status<B>(settings: &Settings, request: &Request<B>) -> bool {
    request.method() == Method::GET && settings.status_target(request.uri().path()).is_some()
}

/// The answer to a request for which [`asks_status`] holds, as a service's response future.
pub(crate) fn respond<St: Store, B, F, RB, E>(
    shared: &Arc<Shared<St>>,
    request: Request<B>,
) -> ResponseFuture<F, RB, E> {
    let shared = Arc::clone(shared);
    let (parts, _) = request.into_parts();
    ResponseFuture::layered(async move {
        let target = shared
            .settings
            .status_target(parts.uri.path())
            .unwrap_or_default();
        Ok(answer_status(&shared, &parts, target).await)
    })
}

/// What the store holds of an intent, as far as one scope may see it: another scope's
/// intent is as unknown as one that never ran or has expired, so that nothing leaks.
pub(crate) enum Seen {
    Running { started_at_ms: u64 },
    Completed(Arc<Record>),
    Failed(Arc<Tombstone>),
    Unknown,
}

/// Looks `key` up for `scope`.
pub(crate) async fn seen<St: Store>(
    shared: &Shared<St>,
    key: &IntentKey,
    scope: &ScopeHash,
) -> Result<Seen, StoreError> {
    Ok(match shared.store.get(key).await? {
        Some(Entry::Running(info)) if info.scope == *scope => Seen::Running {
            started_at_ms: info.started_at_ms,
        },
        Some(Entry::Completed(record)) if record.scope == *scope => Seen::Completed(record),
        Some(Entry::Failed(tombstone)) if tombstone.scope == *scope => Seen::Failed(tombstone),
        _ => Seen::Unknown,
    })
}

/// Answers a status request for `target` (the path segment after the status path).
pub(crate) async fn answer_status<St: Store, B>(
    shared: &Shared<St>,
    parts: &Parts,
    target: &str,
) -> Response<ResponseBody<B>> {
    let settings = &shared.settings;
    let Ok(key) = target.parse::<IntentKey>() else {
        return written(answer::status_malformed());
    };
    let scope = match settings.scope.scope_of(parts) {
        Ok(scope) => scope,
        Err(panicked) => return written(answer::status_layer_fault(panicked.what)),
    };
    let Some(scope) = scope else {
        return written(answer::status_missing_scope(&settings.scope.describe()));
    };
    let response = match seen(shared, &key, &ScopeHash::of(&scope)).await {
        Err(error) => {
            tracing::warn!(intent = %key.short(), %error, "the store could not answer a status request");
            written(answer::status_unavailable(&key, &settings.status_url(&key)))
        }
        Ok(Seen::Completed(record)) => replay(settings, &key, &record),
        Ok(Seen::Running { started_at_ms }) => written(answer::in_progress(
            &key,
            &settings.status_url(&key),
            seconds_since(started_at_ms),
            false,
            &settings.repeat_keeps(None),
        )),
        Ok(Seen::Failed(tombstone)) => {
            written(answer::status_failed(&key, Failure::of(&tombstone)))
        }
        Ok(Seen::Unknown) => written(answer::status_not_found(&key)),
    };
    with_intent(response, &key)
}
