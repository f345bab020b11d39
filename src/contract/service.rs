//! The contract service.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::schemas::Contracts;
use super::violation::Violation;
use crate::body::read_body;
use crate::body::BoxError;
use crate::body::ResponseBody;
use crate::engine::Refusal;
use crate::idempotency::ResponseFuture;
use crate::idempotency::{refused, written};
use crate::service_parts::inner_service_accessors;
use crate::telemetry;

/// The settings a body refusal is told with: it names only the limit, none of a layer's.
static DEFAULTS: std::sync::LazyLock<crate::settings::Settings> =
    std::sync::LazyLock::new(crate::settings::Settings::default);

/// Middleware that refuses requests whose JSON breaks their operation's schema.
///
/// Built by [`ContractLayer`](super::ContractLayer).
#[derive(Clone)]
pub struct Contract<S> {
    inner: S,
    contracts: Arc<Contracts>,
}

impl<S> Contract<S> {
    pub(crate) fn new(inner: S, contracts: Arc<Contracts>) -> Self {
        Self { inner, contracts }
    }

    inner_service_accessors!();
}

impl<S: std::fmt::Debug> std::fmt::Debug for Contract<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contract")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Service<Request<B>> for Contract<S>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body + From<Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(contract) = self.contracts.of(request.method(), request.uri().path()) else {
            return ResponseFuture::passthrough(inner.call(request));
        };
        let contract = Arc::clone(contract);
        let body_limit = self.contracts.body_limit;
        ResponseFuture::layered(async move {
            let (parts, body) = request.into_parts();
            let bytes = match read_body(body, &parts.headers, body_limit).await {
                Ok(bytes) => bytes,
                Err(unread) => return Ok(refused(&DEFAULTS, &Refusal::from(unread))),
            };
            let violation = match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Err(_) => Some(Violation::not_json()),
                Ok(arguments) => contract
                    .validator
                    .validate(&arguments)
                    .err()
                    .map(|error| Violation::of(&error)),
            };
            if let Some(violation) = violation {
                telemetry::rejected_by_schema(&contract.label, violation.reason);
                let told = violation.told(&contract.version);
                let status = http::StatusCode::UNPROCESSABLE_ENTITY;
                return Ok(written(status, &told));
            }
            let response = inner
                .call(Request::from_parts(parts, B::from(bytes)))
                .await?;
            Ok(response.map(ResponseBody::inner))
        })
    }
}
