//! One POST to the MCP endpoint: a protected tool call, a task query the layer answers, a
//! cancellation it keeps, a discovery answer it reads on the way back, or a message passed on.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use serde_json::Value;

use super::answers;
use super::envelope::{self, Envelope, EnvelopeRefusal, TaskAsk, TaskQuery};
use super::era::{self, Era, RequestMeta, Unservable};
use super::message::{self, Form};
use crate::body::read_body;
use crate::body::ResponseBody;
use crate::body::{Bufferable, Keepable};
use crate::dialect::{Answer, Tool};
use crate::idempotency::refused;
use crate::store::Store;

#[cfg(feature = "contract")]
use super::arguments;
use super::endpoint::Endpoint;
use super::list_changed::ListChanges;
use super::listing::Server;
use super::schema_lookup::{self, SchemaVerdict};
use super::{call, discovery, task_query};

/// One POST to the endpoint: a tool call is protected, a task query answered, a discovery
/// answer read on its way back, and the rest passed on.
pub(crate) async fn post<St: Store, S, B, ResBody>(
    endpoint: Arc<Endpoint<St>>,
    mut inner: S,
    request: Request<B>,
) -> Answer<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let (parts, body) = request.into_parts();
    let settings = &endpoint.engine.settings;
    let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
        Ok(bytes) => bytes,
        Err(unread) => {
            let refusal = crate::engine::Refusal::from(unread);
            return Ok(refused(settings, &refusal));
        }
    };
    let form = Form::of(&parts.headers);
    let server = endpoint.policy.listings.server(&parts);
    match envelope::read(&bytes) {
        Envelope::ToolCall(call) if !endpoint.policy.passes_through(server, &call.name) => {
            let spoken = served_era(&parts, envelope::TOOLS_CALL, &call.name, &call.meta);
            let era = match spoken {
                Ok(era) => era,
                Err(why) => return Ok(unservable(&endpoint, &parts, &call.id, &why)),
            };
            if era == Era::Stateless {
                let request = (&parts, &bytes);
                let verdict =
                    schema_lookup::check_call(&endpoint, &mut inner, request, server, &call.name)
                        .await;
                match verdict {
                    SchemaVerdict::Agrees => {}
                    SchemaVerdict::Refused(header) => {
                        let why = Unservable::Param(header);
                        return Ok(unservable(&endpoint, &parts, &call.id, &why));
                    }
                    // Only the server can check this call's headers, which it does on the
                    // call that runs. The call stays protected: passed on unprotected, each
                    // retry could run the action again, which is worse than a repeat answered
                    // with the kept result of the same arguments.
                    SchemaVerdict::Unknown => {
                        tracing::warn!(
                            tool = %call.name,
                            "an MCP call's Mcp-Param headers could not be checked against the \
                             tool's schema; it is protected, and only the server checks them"
                        );
                    }
                }
            }
            #[cfg(feature = "contract")]
            {
                let request = (&parts, &bytes);
                let refused = arguments::refusal(&endpoint, request, (&call, server), (era, form));
                if let Some(refused) = refused {
                    return Ok(refused);
                }
            }
            if era == Era::Stateless {
                let ready = futures_util::future::poll_fn(|cx| inner.poll_ready(cx));
                ready.await?;
            }
            endpoint.forwarded.protected(&parts.headers, &call.id);
            call::call_tool(&endpoint, inner, parts, bytes, (call, server), form, era).await
        }
        Envelope::Discovery { id, what } => {
            let open = endpoint.forwarded.open(&parts.headers, &id);
            let era = Era::of(&parts.headers, None).unwrap_or(Era::Stateless);
            let revision = endpoint.policy.listings.revision(server);
            let response = inner
                .call(Request::from_parts(parts, B::from(bytes)))
                .await?;
            let answer =
                discovery::read_discovery(&endpoint, response, &id, (what, era), revision).await;
            Ok(answer.map(|body| body.holding(open)))
        }
        Envelope::TaskQuery(query) if endpoint.tasks && query.key.is_some() => {
            let method = query.asks.method();
            let era = match served_era(&parts, method, &query.task_id, &query.meta) {
                Ok(era) => era,
                Err(why) => return Ok(unservable(&endpoint, &parts, &query.id, &why)),
            };
            // Each era has its own task methods; the other era's are the server's to refuse.
            let ours = match era {
                Era::Handshake => matches!(query.asks, TaskAsk::Get | TaskAsk::Result),
                Era::Stateless => query.asks != TaskAsk::Result,
            };
            if !ours {
                return forward(&endpoint, inner, (parts, bytes, server), Some(query.id)).await;
            }
            match task_query::answer_task_query(&endpoint, &parts, &query, era).await {
                Some(mut message) => {
                    era.fit(&mut message);
                    Ok(message::write(&message, form, http::HeaderMap::new())
                        .map(ResponseBody::full))
                }
                None => forward(&endpoint, inner, (parts, bytes, server), Some(query.id)).await,
            }
        }
        Envelope::Refused(refusal) => Ok(refuse(&endpoint, &parts, &refusal, form)),
        Envelope::Cancellation { request_id } => {
            let passes_on = request_id
                .as_ref()
                .is_some_and(|id| endpoint.forwarded.passes_on(&parts.headers, id));
            if !passes_on {
                if let Some(id) = &request_id {
                    // The caller gave up on the call: what the server says goes to a retry.
                    endpoint.relays.cancelled(&parts.headers, id);
                }
                crate::telemetry::cancellation_absorbed();
                return Ok(accepted());
            }
            forward(&endpoint, inner, (parts, bytes, server), None).await
        }
        Envelope::ToolCall(call) => {
            // Passed on unprotected, unless its arguments break its tool's schema: such a
            // call is refused, here as by the server, and runs nowhere.
            #[cfg(feature = "contract")]
            if endpoint.policy.validates_arguments {
                let spoken = served_era(&parts, envelope::TOOLS_CALL, &call.name, &call.meta);
                if let Ok(era) = spoken {
                    let request = (&parts, &bytes);
                    let refused =
                        arguments::refusal(&endpoint, request, (&call, server), (era, form));
                    if let Some(refused) = refused {
                        return Ok(refused);
                    }
                }
            }
            forward(&endpoint, inner, (parts, bytes, server), Some(call.id)).await
        }
        Envelope::TaskQuery(TaskQuery { id, .. }) => {
            forward(&endpoint, inner, (parts, bytes, server), Some(id)).await
        }
        Envelope::Other { id } => {
            // The client's answer to a question the server asked it on a relayed call.
            endpoint.relays.answered(&parts.headers, &bytes);
            forward(&endpoint, inner, (parts, bytes, server), id).await
        }
    }
}

/// Passes a message on to the server (`server`) unprotected, remembering the id of a request
/// while its answer is on its way, so that the client can still cancel it; an event stream
/// that answers it is watched for the server's word that its tools changed.
async fn forward<St: Store, S, B, ResBody>(
    endpoint: &Endpoint<St>,
    mut inner: S,
    (parts, bytes, server): (Parts, Bytes, Server),
    id: Option<Value>,
) -> Answer<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let open = id.map(|id| endpoint.forwarded.open(&parts.headers, &id));
    let response = inner
        .call(Request::from_parts(parts, B::from(bytes)))
        .await?;
    let response = match ListChanges::of(&endpoint.policy, server) {
        Some(changes) => changes.watching(response),
        None => response.map(ResponseBody::inner),
    };
    Ok(response.map(|body| match open {
        Some(open) => body.holding(open),
        None => body,
    }))
}

/// Answers a request the layer will not answer for the server, as the server would
/// (HTTP 400 and the protocol's JSON-RPC error), counted as not executed.
fn unservable<St: Store, B>(
    endpoint: &Endpoint<St>,
    parts: &Parts,
    id: &Value,
    why: &Unservable,
) -> Response<ResponseBody<B>> {
    let reason = match why {
        Unservable::Version(_) => "mcp-version",
        Unservable::Mismatch(_) | Unservable::Param(_) => "mcp-header-mismatch",
        Unservable::MissingMeta(_) => "mcp-envelope",
    };
    let error = answers::unservable(id, why);
    not_executed(
        endpoint,
        parts,
        reason,
        &error,
        StatusCode::BAD_REQUEST,
        Form::Json,
    )
}

/// Answers a refused envelope, counted as not executed.
fn refuse<St: Store, B>(
    endpoint: &Endpoint<St>,
    parts: &Parts,
    refusal: &EnvelopeRefusal,
    form: Form,
) -> Response<ResponseBody<B>> {
    let error = answers::refused(refusal);
    let (status, form) = match refusal {
        // A request with an id is answered as requests are.
        EnvelopeRefusal::NoToolName { .. }
        | EnvelopeRefusal::Unkeyable { .. }
        | EnvelopeRefusal::Ambiguous { id: Some(_) } => (StatusCode::OK, form),
        // The rest cannot be answered as a request: an HTTP error with the JSON-RPC error.
        _ => (StatusCode::BAD_REQUEST, Form::Json),
    };
    not_executed(endpoint, parts, "mcp-envelope", &error, status, form)
}

/// The layer's JSON-RPC error for a message it runs nothing for, counted as not executed
/// for `reason`.
fn not_executed<St: Store, B>(
    endpoint: &Endpoint<St>,
    parts: &Parts,
    reason: &'static str,
    error: &Value,
    status: StatusCode,
    form: Form,
) -> Response<ResponseBody<B>> {
    let engine = &endpoint.engine;
    let op = engine
        .runtime
        .ops
        .of(engine.settings.route_label.as_ref(), parts);
    crate::telemetry::not_executed(&op, reason);
    let mut response = message::write(error, form, http::HeaderMap::new());
    *response.status_mut() = status;
    response.map(ResponseBody::full)
}

/// The era of a request the layer answers for the server (a protected call, one of its own
/// tasks), where the layer may: a version it knows, and in the stateless era routing headers
/// that say what the body says (`name`: the tool, or the task id), as the server would
/// check them.
fn served_era(
    parts: &Parts,
    method: &str,
    name: &str,
    meta: &RequestMeta,
) -> Result<Era, Unservable> {
    let era = Era::of(&parts.headers, meta.version.as_deref())?;
    if era::versions_disagree(&parts.headers, meta) {
        return Err(Unservable::Mismatch(era::VERSION_HEADER));
    }
    if era == Era::Stateless {
        era::check_routing(&parts.headers, method, Some(name), meta)?;
    }
    Ok(era)
}

/// What Streamable HTTP answers to a notification the server accepts: 202, no body.
fn accepted<B>() -> Response<ResponseBody<B>> {
    let mut response = Response::new(ResponseBody::full(Bytes::new()));
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}
