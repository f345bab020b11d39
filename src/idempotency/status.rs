//! The status path: `GET {status_path}/{intent}` answers what became of an action.

use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request, Response, StatusCode};

use super::answer::{with_request_id, written};
use super::render::in_progress;
use super::replay::replay;
use crate::body::ResponseBody;
use crate::engine::lookup::IntentView;
use crate::engine::{Engine, Failure, Refusal};
use crate::headers::{with_intent, RequestId};
use crate::idempotency::ResponseFuture;
use crate::key::{IntentKey, ScopeHash};
use crate::scope::ScopeFault;
use crate::settings::Settings;
use crate::store::Store;
use crate::wording;

/// Whether `request` asks the status path about an intent.
pub(crate) fn asks_status<B>(settings: &Settings, request: &Request<B>) -> bool {
    request.method() == Method::GET && settings.status_target(request.uri().path()).is_some()
}

/// The answer to a request for which [`asks_status`] holds, as a service's response future.
pub(crate) fn respond<St: Store, B, F, RB, E>(
    engine: &Arc<Engine<St>>,
    request: Request<B>,
) -> ResponseFuture<F, RB, E> {
    let engine = Arc::clone(engine);
    let (parts, _) = request.into_parts();
    ResponseFuture::layered(async move {
        let target = engine
            .settings
            .status_target(parts.uri.path())
            .unwrap_or_default();
        let answer = answer_status(&engine, &parts, target).await;
        let id = RequestId::of(&parts.headers, &engine.settings.request_id_header);
        Ok(with_request_id(answer, id.as_ref()))
    })
}

/// Answers a status request for `target` (the path segment after the status path).
pub(crate) async fn answer_status<St: Store, B>(
    engine: &Engine<St>,
    parts: &Parts,
    target: &str,
) -> Response<ResponseBody<B>> {
    let settings = &engine.settings;
    let Ok(key) = target.parse::<IntentKey>() else {
        return written(StatusCode::NOT_FOUND, &wording::status_malformed());
    };
    let scope = match settings.scope.scope_of(parts) {
        Ok(scope) => scope,
        Err(ScopeFault::Panicked(panicked)) => {
            let told = wording::status_layer_fault(panicked.what);
            return written(StatusCode::INTERNAL_SERVER_ERROR, &told);
        }
        Err(ScopeFault::Repeated(name)) => {
            let told = wording::refusal(&Refusal::RepeatedScope(name), settings, None);
            return written(StatusCode::BAD_REQUEST, &told);
        }
    };
    let Some(scope) = scope else {
        let told = wording::status_missing_scope(&settings.scope.describe());
        return written(StatusCode::BAD_REQUEST, &told);
    };
    let response = match engine.seen(&key, &ScopeHash::of(&scope)).await {
        Err(error) => {
            tracing::warn!(intent = %key.short(), %error, "the store could not answer a status request");
            let told = wording::status_unavailable(&key, &settings.status_url(&key));
            written(StatusCode::SERVICE_UNAVAILABLE, &told)
        }
        Ok(IntentView::Completed(record)) => replay(settings, &key, &record),
        Ok(IntentView::Running { started_at_ms }) => {
            // Whether the call sent an explicit key is not known here: named if it did.
            let keeps = settings.repeat_keeps_if_sent();
            in_progress(
                settings,
                &key,
                started_at_ms,
                wording::Asker::Status,
                &keeps,
            )
        }
        Ok(IntentView::Failed(tombstone)) => {
            let told = wording::status_failed(&key, Failure::of(&tombstone));
            written(StatusCode::OK, &told)
        }
        Ok(IntentView::Unknown) => written(StatusCode::NOT_FOUND, &wording::status_not_found(&key)),
    };
    with_intent(response, &key)
}
