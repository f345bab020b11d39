//! The status path: `GET {status_path}/{intent}` answers what became of an action.

use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request, Response};

use crate::answer::{self, Failure};
use crate::body::ResponseBody;
use crate::clock::seconds_since;
use crate::key::{IntentKey, ScopeHash};
use crate::layer::Shared;
use crate::replay::{replay, with_intent, written};
use crate::settings::Settings;
use crate::store::{Entry, Store};

/// Whether `request` asks the status path about an intent.
pub(crate) fn asks_status<B>(settings: &Settings, request: &Request<B>) -> bool {
    request.method() == Method::GET && settings.status_target(request.uri().path()).is_some()
}

/// Answers a request for which [`asks_status`] holds.
pub(crate) async fn answer_status_request<St: Store, B>(
    shared: Arc<Shared<St>>,
    parts: Parts,
) -> Response<ResponseBody<B>> {
    let target = shared
        .settings
        .status_target(parts.uri.path())
        .unwrap_or_default();
    answer_status(&shared, &parts, target).await
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
    let Some(scope) = settings.scope.scope_of(parts) else {
        return written(answer::status_missing_scope(&settings.scope.describe()));
    };
    let scope = ScopeHash::of(&scope);
    let response = match shared.store.get(&key).await {
        Err(error) => {
            tracing::warn!(intent = %key.short(), %error, "the store could not answer a status request");
            written(answer::store_unavailable(&key))
        }
        Ok(Some(Entry::Completed(record))) if record.scope == scope => {
            replay(settings, &key, &record)
        }
        Ok(Some(Entry::Running(info))) if info.scope == scope => written(answer::in_progress(
            &key,
            &settings.status_url(&key),
            seconds_since(info.started_at_ms),
            false,
        )),
        Ok(Some(Entry::Failed(tombstone))) if tombstone.scope == scope => {
            written(answer::status_failed(&key, Failure::of(&tombstone)))
        }
        // Unknown, expired, or another scope's: the same answer, so nothing leaks.
        Ok(_) => written(answer::status_unknown(&key)),
    };
    with_intent(response, &key)
}
