//! The operator's operations over HTTP, behind a bearer token: a tower service an app mounts
//! where it likes (`/admin` in the proxy).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Admin, Caller, Filter, ListedOutcome, PurgeError, Removed, Resolution, Resolved};
use crate::key::IntentKey;
use crate::store::Store;

/// The largest request body the service reads.
const BODY_LIMIT: usize = 64 * 1024;

/// The operator's operations over HTTP ([`Admin::service`]). Every request needs
/// `Authorization: Bearer <token>`; without it, 401. Paths are read from their end, so the
/// service answers wherever it is mounted: `…/records`, `…/records/{intent}` (`GET`, and
/// `DELETE` with `{"confirm": "<intent>"}`), `…/records/{intent}/resolve`, `…/scopes/purge`.
///
/// Each action is logged (the intent's first characters, the action, the client's address
/// where the request's extensions carry a [`SocketAddr`]) and counted in
/// `idempotency_admin_actions_total{action}`.
pub struct AdminService<St> {
    admin: Admin<St>,
    /// The token's digest: the comparison runs over digests of one length.
    token: Arc<[u8; 32]>,
}

impl<St> Clone for AdminService<St> {
    fn clone(&self) -> Self {
        Self {
            admin: self.admin.clone(),
            token: Arc::clone(&self.token),
        }
    }
}

impl<St> std::fmt::Debug for AdminService<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminService").finish_non_exhaustive()
    }
}

impl<St: Store> Admin<St> {
    /// The operations over HTTP, for requests that carry `Authorization: Bearer <token>`.
    ///
    /// # Panics
    ///
    /// If `token` is empty: an empty token would let anyone in.
    pub fn service(&self, token: impl Into<String>) -> AdminService<St> {
        let token = token.into();
        assert!(!token.is_empty(), "the admin API's token must not be empty");
        AdminService {
            admin: self.clone(),
            token: Arc::new(Sha256::digest(token.as_bytes()).into()),
        }
    }
}

/// Whether `request` carries the token. The digests are compared whole, whatever differs
/// first, so the time taken tells nothing of the token; written here rather than taken from a
/// crate for the eight lines it is, over the SHA-256 the crate already uses.
fn authorized(parts: &Parts, token: &[u8; 32]) -> bool {
    let Some(sent) = (parts.headers.get(header::AUTHORIZATION))
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    let sent: [u8; 32] = Sha256::digest(sent.trim().as_bytes()).into();
    sent.iter()
        .zip(token.iter())
        .fold(0u8, |differ, (a, b)| differ | (a ^ b))
        == 0
}

type AdminAnswer = Response<Full<Bytes>>;

fn answer(status: StatusCode, body: &Value) -> AdminAnswer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn problem(status: StatusCode, detail: impl std::fmt::Display) -> AdminAnswer {
    answer(status, &json!({ "error": detail.to_string() }))
}

/// One action, logged and counted.
fn audit(parts: &Parts, action: &'static str, intent: Option<&IntentKey>) {
    let client = parts.extensions.get::<SocketAddr>().copied();
    let client = client.map_or_else(|| "unknown".to_owned(), |addr| addr.to_string());
    let intent = intent.map(IntentKey::short).unwrap_or_default();
    tracing::info!(action, intent, client, "admin action");
    metrics::counter!("idempotency_admin_actions_total", "action" => action).increment(1);
}

/// The query's value of `name`, decoded as a form's.
fn query_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

impl<St: Store> AdminService<St> {
    async fn handle<B>(self, request: Request<B>) -> AdminAnswer
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        if !authorized(&parts, &self.token) {
            audit(&parts, "refused", None);
            let mut refused = problem(StatusCode::UNAUTHORIZED, "a bearer token is required");
            refused.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return refused;
        }
        let segments: Vec<String> = parts
            .uri
            .path()
            .split('/')
            .filter(|segment| !segment.is_empty())
            .map(str::to_owned)
            .collect();
        let tail: Vec<&str> = segments
            .iter()
            .rev()
            .take(3)
            .rev()
            .map(String::as_str)
            .collect();
        match (&parts.method, tail.as_slice()) {
            (&Method::GET, [.., "records"]) => self.list(&parts).await,
            (&Method::GET, [.., "records", intent]) => self.show(&parts, intent).await,
            (&Method::POST, ["records", intent, "resolve"]) => {
                self.resolve(&parts, body, intent).await
            }
            (&Method::DELETE, [.., "records", intent]) => self.remove(&parts, body, intent).await,
            (&Method::POST, [.., "scopes", "purge"]) => self.purge(&parts, body).await,
            _ => problem(StatusCode::NOT_FOUND, "no such admin operation"),
        }
    }

    async fn list(&self, parts: &Parts) -> AdminAnswer {
        let query = parts.uri.query().unwrap_or("");
        let mut filter = Filter::default();
        if let Some(outcome) = query_value(query, "outcome") {
            match ListedOutcome::parse(&outcome) {
                Some(outcome) => filter.outcome = Some(outcome),
                None => {
                    let detail = "outcome is one of running, kept, unknown, failed";
                    return problem(StatusCode::BAD_REQUEST, detail);
                }
            }
        }
        filter.operation = query_value(query, "operation");
        if let Some(limit) = query_value(query, "limit") {
            match limit.parse::<usize>() {
                Ok(limit) => filter.limit = limit.clamp(1, 10_000),
                Err(_) => return problem(StatusCode::BAD_REQUEST, "limit is a number"),
            }
        }
        filter.bodies = query_value(query, "bodies").as_deref() == Some("true");
        audit(parts, "list", None);
        match self.admin.list(&filter).await {
            Ok(found) => {
                let records: Vec<Value> = found.iter().map(super::Listed::to_json).collect();
                answer(StatusCode::OK, &json!({ "records": records }))
            }
            Err(error) => problem(StatusCode::SERVICE_UNAVAILABLE, error),
        }
    }

    async fn show(&self, parts: &Parts, intent: &str) -> AdminAnswer {
        let Ok(intent) = intent.parse::<IntentKey>() else {
            return problem(StatusCode::BAD_REQUEST, "an intent is 64 hex digits");
        };
        audit(parts, "show", Some(&intent));
        match self.admin.show(&intent).await {
            Ok(Some(listed)) => answer(StatusCode::OK, &listed.to_json()),
            Ok(None) => problem(
                StatusCode::NOT_FOUND,
                "the store holds nothing of this intent",
            ),
            Err(error) => problem(StatusCode::SERVICE_UNAVAILABLE, error),
        }
    }

    async fn resolve<B>(&self, parts: &Parts, body: B, intent: &str) -> AdminAnswer
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let Ok(intent) = intent.parse::<IntentKey>() else {
            return problem(StatusCode::BAD_REQUEST, "an intent is 64 hex digits");
        };
        audit(parts, "resolve", Some(&intent));
        let body = match json_body(body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let resolution = match (body["ran"].as_bool(), &body["note"]) {
            (Some(false), _) => Resolution::NotRun,
            (Some(true), Value::String(note)) => Resolution::Ran {
                note: Some(note.clone()),
            },
            (Some(true), Value::Null) => Resolution::Ran { note: None },
            _ => {
                let detail = r#"the body is {"ran": false} or {"ran": true, "note": "…"}"#;
                return problem(StatusCode::BAD_REQUEST, detail);
            }
        };
        match self.admin.resolve(&intent, resolution).await {
            Ok(Resolved::Released) => answer(StatusCode::OK, &json!({ "resolved": "released" })),
            Ok(Resolved::KeptAsRun) => {
                answer(StatusCode::OK, &json!({ "resolved": "kept_as_run" }))
            }
            Ok(Resolved::NotFound) => problem(
                StatusCode::NOT_FOUND,
                "the store holds nothing of this intent",
            ),
            Ok(Resolved::StillRunning) => problem(
                StatusCode::CONFLICT,
                "the action is still running: resolve it once it has ended",
            ),
            Ok(Resolved::Known(held)) => problem(StatusCode::CONFLICT, known(held, &intent)),
            Err(error) => problem(StatusCode::SERVICE_UNAVAILABLE, error),
        }
    }

    async fn remove<B>(&self, parts: &Parts, body: B, intent: &str) -> AdminAnswer
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let Ok(intent) = intent.parse::<IntentKey>() else {
            return problem(StatusCode::BAD_REQUEST, "an intent is 64 hex digits");
        };
        let body = match json_body(body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let confirmed = body["confirm"]
            .as_str()
            .and_then(|c| c.parse::<IntentKey>().ok());
        if confirmed != Some(intent) {
            let detail = format!(
                "nothing was removed: a removal names the intent it removes in its body, \
                 {{\"confirm\": \"{intent}\"}}"
            );
            return problem(StatusCode::BAD_REQUEST, detail);
        }
        audit(parts, "remove", Some(&intent));
        match self.admin.remove(&intent).await {
            Ok(Removed::Removed(held)) => answer(
                StatusCode::OK,
                &json!({ "removed": held.as_str(), "intent": intent.to_string() }),
            ),
            Ok(Removed::NotFound) => problem(
                StatusCode::NOT_FOUND,
                "the store holds nothing of this intent",
            ),
            Ok(Removed::StillRunning) => problem(
                StatusCode::CONFLICT,
                "the action is still running: nothing was removed; remove it once it has ended",
            ),
            Err(error) => problem(StatusCode::SERVICE_UNAVAILABLE, error),
        }
    }

    async fn purge<B>(&self, parts: &Parts, body: B) -> AdminAnswer
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        audit(parts, "purge", None);
        let body = match json_body(body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let named = |member: &str| body[member].as_str().filter(|value| !value.is_empty());
        let caller = match (named("scope"), named("credential")) {
            (Some(scope), None) => Caller::Scope(scope),
            (None, Some(credential)) => Caller::Credential(credential),
            _ => {
                let detail = r#"the body is {"scope": "…"} or {"credential": "…"}"#;
                return problem(StatusCode::BAD_REQUEST, detail);
            }
        };
        match self.admin.purge(caller).await {
            Ok(purged) => answer(
                StatusCode::OK,
                &json!({
                    "removed": purged.records + purged.failures,
                    "records": purged.records,
                    "failures": purged.failures,
                }),
            ),
            Err(error @ (PurgeError::ScopeFromFunction | PurgeError::NoCredentialScope)) => {
                problem(StatusCode::CONFLICT, error)
            }
            Err(error) => problem(StatusCode::SERVICE_UNAVAILABLE, error),
        }
    }
}

/// Why an outcome that is known is not resolved, and how to remove it on purpose.
fn known(held: ListedOutcome, intent: &IntentKey) -> String {
    let holds = match held {
        ListedOutcome::Failed => {
            "the last attempt of this intent failed and released it, so the next identical \
             call runs the action already"
        }
        _ => "this intent's action ran and its answer is kept, so repeats are answered with it",
    };
    format!(
        "Nothing was changed: {holds}. Only an outcome that is not known (unknown) is \
         resolved. To remove the record on purpose, so that the next identical call runs the \
         action again, send DELETE on this record with {{\"confirm\": \"{intent}\"}}."
    )
}

/// The request's JSON body, read up to [`BODY_LIMIT`].
async fn json_body<B>(body: B) -> Result<Value, AdminAnswer>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = Limited::new(body, BODY_LIMIT);
    let Ok(collected) = limited.collect().await else {
        return Err(problem(
            StatusCode::BAD_REQUEST,
            "the body could not be read",
        ));
    };
    serde_json::from_slice(&collected.to_bytes())
        .map_err(|_| problem(StatusCode::BAD_REQUEST, "the body is not JSON"))
}

impl<St, B> tower_service::Service<Request<B>> for AdminService<St>
where
    St: Store,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = AdminAnswer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<AdminAnswer, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(request).await) })
    }
}
