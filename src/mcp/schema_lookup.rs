//! A protected 2026-07-28 call's `Mcp-Param-*` headers, checked before the layer takes the
//! call on, so that it never answers for the server (a replay, a wait on the running
//! execution, an in-progress answer, a task) a call the server would refuse. What the tool
//! declares comes from the listings seen on their way back; for a tool none named yet, the
//! layer asks the server for its listing, with the caller's own credentials and `_meta`, as
//! the server itself looks the schema up.

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Request};
use serde_json::{json, Value};

use super::endpoint::Endpoint;
use super::era::METHOD_HEADER;
use super::listing::{Revision, Server};
use super::message;
use super::param_headers::{self, Agreement, PREFIX};
use super::resume::resent_headers;
use crate::body::{Bufferable, Keepable};
use crate::dialect::Tool;

/// The most pages of a listing the layer reads looking for one tool.
const MOST_PAGES: usize = 20;

/// What the layer can say of a call's `Mcp-Param-*` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaVerdict {
    /// As the server would find them: the layer may answer for it.
    Agrees,
    /// The server refuses the call for this header.
    Refused(String),
    /// The layer cannot tell (the server would not list its tools, or an argument the
    /// layer cannot render as the server does): only the server checks the call, on the
    /// execution; the call is protected all the same.
    Unknown,
}

/// Checks the `Mcp-Param-*` headers of the call to `tool` on `server` whose request is
/// `parts` and `bytes`, learning what the tool declares from the server where no listing
/// named it yet.
pub(crate) async fn check_call<St, S, B, ResBody>(
    endpoint: &Endpoint<St>,
    inner: &mut S,
    (parts, bytes): (&Parts, &Bytes),
    server: Server,
    tool: &str,
) -> SchemaVerdict
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let body: Value = serde_json::from_slice(bytes).unwrap_or_default();
    let params = body.get("params");
    let arguments = params.and_then(|params| params.get("arguments"));
    // Arguments that are not an object are refused by the server on their own account.
    if arguments.is_some_and(|arguments| !arguments.is_object() && !arguments.is_null()) {
        return SchemaVerdict::Agrees;
    }
    let declared = match endpoint.policy.param_headers(server, tool) {
        Some(declared) => declared,
        None => {
            let sends_any = parts
                .headers
                .keys()
                .any(|name| name.as_str().starts_with(PREFIX));
            let has_arguments = arguments
                .and_then(Value::as_object)
                .is_some_and(|arguments| !arguments.is_empty());
            if !sends_any && !has_arguments {
                return SchemaVerdict::Agrees;
            }
            let meta = params.and_then(|params| params.get("_meta"));
            let revision = endpoint.policy.listings.revision(server);
            if !list_tools(endpoint, inner, parts, meta, (revision, tool)).await {
                return SchemaVerdict::Unknown;
            }
            match endpoint.policy.param_headers(server, tool) {
                Some(declared) => declared,
                None => return SchemaVerdict::Unknown,
            }
        }
    };
    match param_headers::check(&declared, arguments, &parts.headers) {
        Agreement::Agrees => SchemaVerdict::Agrees,
        Agreement::Refused(header) => SchemaVerdict::Refused(header),
        Agreement::Unsure => SchemaVerdict::Unknown,
    }
}

/// Reads the server's listing of tools for the caller of `parts`, page by page, until it
/// names `tool`, learning from it while `revision` of the listing lasts; whether the listing
/// was read to that point (a tool it never names is noted as declaring nothing, as the server
/// then checks nothing).
async fn list_tools<St, S, B, ResBody>(
    endpoint: &Endpoint<St>,
    inner: &mut S,
    parts: &Parts,
    meta: Option<&Value>,
    (revision, tool): (Revision, &str),
) -> bool
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let limit = endpoint.engine.settings.response_limit;
    let mut cursor: Option<Value> = None;
    for page in 0..MOST_PAGES {
        let id = json!(format!("tower-idempotency-tools-{page}"));
        let mut params = json!({ "_meta": meta.cloned().unwrap_or_else(|| json!({})) });
        if let Some(cursor) = cursor.take() {
            params["cursor"] = cursor;
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        let ready = futures_util::future::poll_fn(|cx| inner.poll_ready(cx)).await;
        if ready.is_err() {
            return false;
        }
        let Ok(response) = inner.call(listing_request(parts, body.to_string())).await else {
            return false;
        };
        if !response.status().is_success() {
            return false;
        }
        let (head, body) = response.into_parts();
        let Ok(answer) = message::read_answer(&head.headers, body, &id, limit).await else {
            return false;
        };
        let Some(result) = answer.get("result").and_then(Value::as_object) else {
            return false;
        };
        endpoint.policy.learn(revision, result);
        if endpoint
            .policy
            .param_headers(revision.server(), tool)
            .is_some()
        {
            return true;
        }
        match result.get("nextCursor") {
            Some(next @ Value::String(_)) => cursor = Some(next.clone()),
            _ => {
                endpoint.policy.listings.learn_unlisted(revision, tool);
                return true;
            }
        }
    }
    false
}

/// A `tools/list` request with the credentials, session and version of the call `parts`.
fn listing_request<B: From<Bytes>>(parts: &Parts, body: String) -> Request<B> {
    let mut headers = resent_headers(parts);
    let params: Vec<_> = headers
        .keys()
        .filter(|name| name.as_str().starts_with(PREFIX))
        .cloned()
        .collect();
    for name in params {
        headers.remove(name);
    }
    headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/list"));
    let json = HeaderValue::from_static("application/json");
    headers.insert(header::CONTENT_TYPE, json);
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    let mut request = Request::new(B::from(Bytes::from(body)));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = headers;
    *request.extensions_mut() = parts.extensions.clone();
    request
}
