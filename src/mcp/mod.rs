//! The MCP mode: protects the tools of a Model Context Protocol server served over
//! Streamable HTTP (one `POST /mcp` endpoint, JSON-RPC 2.0 bodies).
//!
//! [`IdempotencyLayer::mcp`] turns a configured layer into an [`McpLayer`]. For a
//! `tools/call`:
//!
//! - **the key** is the scope and the canonical JSON of the request without its `id`,
//!   `params._meta` and `params.task`: the tool's name and its arguments. A retry with a new
//!   JSON-RPC id, or with a new progress token, is the same intent; two sessions never share
//!   one. The scope is the `Mcp-Session-Id` session; where the layer was given a principal
//!   ([`IdempotencyLayer::scope_header`], [`IdempotencyLayer::scope_fn`]) that principal is
//!   required and the session only narrows it, so a session id that a client chooses can
//!   never reach another principal's results ([`McpLayer::scope_by_principal`] leaves the
//!   session out);
//! - **cancellations stay with the layer**: a client's `notifications/cancelled` for a
//!   protected call is answered (202) and not passed on, so the execution goes on for every
//!   caller waiting on it and its retry gets the result; only a request this instance
//!   forwarded unprotected in that session is the server's to cancel. A client that closes
//!   its stream cannot stop the execution either: it runs detached;
//! - **answers carry the caller's id**: the kept JSON-RPC response is replayed with the id of
//!   the request it answers, as `application/json` or, for a client that accepts only that,
//!   as an SSE stream of one event. An SSE answer from the server is kept as its final
//!   JSON-RPC response (progress notifications before it are not replayed);
//! - **kept or released**: a result is kept, `isError: true` included, since it is the tool's
//!   own answer; so are the deterministic JSON-RPC refusals (-32600 invalid request, -32601
//!   unknown method, -32602 invalid params) and every code outside JSON-RPC's reserved range
//!   (-32768 to -32000). Every other reserved code (-32603 internal error, -32700, the
//!   -32000 to -32099 server errors), an HTTP error from the server (an unknown session) and
//!   an answer that never came release the key, so that a retry runs. The layer's
//!   [`classify`](IdempotencyLayer::classify) rule does not apply in this mode;
//! - **in progress**: past its deadline, a call is answered with a `CallToolResult` whose text
//!   says that the action is already running and must not be repeated with new arguments,
//!   and whose `structuredContent` holds `outcome: "in_progress"`, `retry_after_s` and the
//!   `intent`. Calling again with the same arguments later gets the real result. Every other
//!   answer the layer writes (not executed, failed) is a `CallToolResult` with
//!   `isError: true` whose text says first what happened and whether calling again is safe;
//! - **read-only tools pass through**: a tool that a `tools/list` answer passing through the
//!   layer annotates `readOnlyHint: true` is not protected, unless the configuration says
//!   otherwise ([`McpLayer::protect_tool`], [`McpLayer::pass_through_tool`]).
//!
//! Every other message (`initialize`, `tools/list`, notifications, `ping`, responses, the
//! `GET` stream and `DELETE`) passes through untouched. A batch that holds a `tools/call`, a
//! `tools/call` without an id or without `params.name` is refused with a JSON-RPC error,
//! nothing executed.
//!
//! Tools that ask the client something in the middle of a call (sampling, elicitation) need
//! the server's stream to reach the client: pass them through.
//!
//! With [`McpLayer::tasks`], a call that asks to run as an MCP task gets a task at once, and
//! the layer answers `tasks/get` and `tasks/result` for it from the store.
//!
//! ```
//! use std::time::Duration;
//! use tower_idempotency::IdempotencyLayer;
//!
//! let layer = IdempotencyLayer::new()
//!     .deadline(Duration::from_secs(20))
//!     .mcp()
//!     .deadline_for_tool("generate_report", Duration::from_secs(2))
//!     .pass_through_tool("search");
//! // axum::Router::new().nest_service("/mcp", layer.layer(rmcp_streamable_http_service))
//! # let _ = layer;
//! ```

mod answers;
mod cancellation;
mod envelope;
mod message;
mod policy;
mod tasks;
mod tool;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{header, HeaderName, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use serde_json::{Map, Value};
use tower_layer::Layer;
use tower_service::Service;

use self::cancellation::ForwardedRequests;
use self::envelope::{Discovery, Envelope, Refusal, TaskQuery, ToolCall};
use self::message::Form;
use self::policy::ToolPolicy;
use self::tasks::{TaskAnswer, TaskStatus, TaskView};
use self::tool::{ServerPath, MARK, MARK_VERBATIM};
use crate::answer::{INTENT_HEADER, REPLAYED_HEADER};
use crate::body::ResponseBody;
use crate::bounds::{Bufferable, Keepable, Tool};
use crate::buffer::read_body;
use crate::canonical::JsonPointer;
use crate::classify::Verdict;
use crate::clock::now_ms;
use crate::future::ResponseFuture;
use crate::key::IntentKey;
use crate::layer::{parse_pointer, Shared};
use crate::replay::{replay, written};
use crate::scope::ScopeSource;
use crate::store::{MemoryStore, ReleaseCause, Store};
use crate::telemetry::default_route_label;
use crate::{protect, status, BoxError, IdempotencyLayer};

/// The header that names an MCP session.
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";

/// The parts of a request the key leaves out: the JSON-RPC id, the request's metadata
/// (progress token) and the task it may ask to be run as.
const LEFT_OUT: [&str; 3] = ["/id", "/params/_meta", "/params/task"];

impl<St: Store> IdempotencyLayer<St> {
    /// This layer in MCP mode: for the Streamable HTTP endpoint of an MCP server. Configure
    /// the layer first; see [`McpLayer`].
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub fn mcp(mut self) -> McpLayer<St> {
        let settings = Arc::make_mut(&mut self.shared).settings_mut();
        let pointers = LEFT_OUT.iter().map(|pointer| parse_pointer(pointer));
        settings.fingerprint.ignored.extend(pointers);
        let configured = std::mem::replace(
            &mut settings.scope,
            ScopeSource::Header(HeaderName::from_static(MCP_SESSION_HEADER)),
        );
        settings.scope = ScopeSource::Narrowed {
            principal: settings.scope_configured.then(|| Box::new(configured)),
            by: HeaderName::from_static(MCP_SESSION_HEADER),
            narrowed: true,
        };
        settings.classify = Arc::new(|status: StatusCode, _: &http::HeaderMap| {
            match status {
                status if status.is_success() => Verdict::Keep,
                // The server path's answer was lost or broke off: the tool may have run.
                StatusCode::BAD_GATEWAY => Verdict::Release(ReleaseCause::ResponseBody),
                _ => Verdict::Release(ReleaseCause::Status),
            }
        });
        if settings.route_label.is_none() {
            settings.route_label = Some(Arc::new(tool_label));
        }
        McpLayer {
            shared: self.shared,
            policy: Arc::default(),
            forwarded: ForwardedRequests::default(),
            tasks: false,
            replay_notice: true,
        }
    }
}

/// The operation label of a tool call: `tools/call NAME` for names that look like tool
/// names, so that a client cannot grow the label set at will.
fn tool_label(parts: &Parts) -> String {
    match parts.extensions.get::<ToolCall>() {
        Some(call)
            if call.name.len() <= 64
                && call
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b)) =>
        {
            format!("tools/call {}", call.name)
        }
        Some(_) => "tools/call (other)".to_owned(),
        None => default_route_label(parts),
    }
}

/// [`IdempotencyLayer`] in MCP mode, made by [`IdempotencyLayer::mcp`]; see the
/// [module](crate::mcp) for what it does.
pub struct McpLayer<St = MemoryStore> {
    shared: Arc<Shared<St>>,
    policy: Arc<ToolPolicy>,
    forwarded: ForwardedRequests,
    tasks: bool,
    replay_notice: bool,
}

// Written by hand: a derive would require `St: Clone`.
impl<St> Clone for McpLayer<St> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        }
    }
}

impl<St> std::fmt::Debug for McpLayer<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpLayer")
            .field("tools", &self.policy.configured)
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

impl<St> McpLayer<St> {
    fn tool(mut self, name: &str, change: impl FnOnce(&mut policy::ToolRule)) -> Self {
        change(Arc::make_mut(&mut self.policy).rule_mut(name));
        self
    }

    /// Protects calls of this tool even if the server declares it read-only.
    pub fn protect_tool(self, name: &str) -> Self {
        self.tool(name, |rule| rule.pass_through = Some(false))
    }

    /// Passes calls of this tool through unprotected, whatever the server declares: a
    /// read-only tool, or one that talks to the client in the middle of a call.
    pub fn pass_through_tool(self, name: &str) -> Self {
        self.tool(name, |rule| rule.pass_through = Some(true))
    }

    /// How long a call of this tool waits before it is told "in progress"; zero answers
    /// "in progress" at once.
    pub fn deadline_for_tool(self, name: &str, deadline: Duration) -> Self {
        self.tool(name, |rule| rule.timing.deadline = Some(deadline))
    }

    /// How long the outcome of a call of this tool is kept for replay.
    pub fn retention_for_tool(self, name: &str, retention: Duration) -> Self {
        self.tool(name, |rule| rule.timing.retention = Some(retention))
    }

    /// Scopes calls by the configured principal alone ([`IdempotencyLayer::scope_header`],
    /// [`IdempotencyLayer::scope_fn`]), not narrowed by the session: a client that crashes
    /// and reconnects with a new session still gets the results of its earlier calls. The
    /// trade-off: two conversations of one principal that make the same call share its result.
    ///
    /// # Panics
    ///
    /// If no principal was configured before [`IdempotencyLayer::mcp`].
    pub fn scope_by_principal(mut self) -> Self {
        let settings = Arc::make_mut(&mut self.shared).settings_mut();
        match &mut settings.scope {
            ScopeSource::Narrowed {
                principal: Some(_),
                narrowed,
                ..
            } => *narrowed = false,
            _ => panic!(
                "McpLayer::scope_by_principal: configure a principal first \
                 (IdempotencyLayer::scope_header or scope_fn, before .mcp())"
            ),
        }
        self
    }

    /// Serves MCP tasks (specification 2025-11-25, experimental, so off by default): a
    /// `tools/call` that asks to run as a task (`params.task`) is answered at once with a task
    /// whose id is its intent, while the server runs the call as a plain one; `tasks/get` and
    /// `tasks/result` for it are answered from the store, so any instance sharing the store
    /// answers them. The `initialize` answer then declares `tasks.requests.tools.call`, and
    /// the `tools/list` answer marks every protected tool `execution.taskSupport: optional`.
    /// `tasks/result` waits for a running task up to the deadline, then answers "in progress"
    /// as a tool result.
    pub fn tasks(mut self) -> Self {
        self.tasks = true;
        self
    }

    /// Replays a kept result exactly as it was first given. By default a replayed tool result
    /// says so to the model, which never sees HTTP headers: a leading text block ("This exact
    /// call already ran N s ago and was not run again; its result follows.") and
    /// `_meta["tower-idempotency/replay"]`.
    pub fn no_replay_notice(mut self) -> Self {
        self.replay_notice = false;
        self
    }

    /// Leaves an argument out of the key, such as `/request_nonce`: a JSON Pointer into
    /// `params.arguments`.
    ///
    /// # Panics
    ///
    /// If `pointer` is not a JSON Pointer (RFC 6901).
    pub fn ignore_argument(mut self, pointer: &str) -> Self {
        let _: JsonPointer = parse_pointer(pointer);
        let within = parse_pointer(&format!("/params/arguments{pointer}"));
        Arc::make_mut(&mut self.shared)
            .settings_mut()
            .fingerprint
            .ignored
            .push(within);
        self
    }
}

impl<S, St> Layer<S> for McpLayer<St> {
    type Service = McpService<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        McpService {
            inner,
            shared: Arc::clone(&self.shared),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        }
    }
}

/// Middleware that makes an MCP server's tool calls safe to repeat; built by [`McpLayer`].
pub struct McpService<S, St = MemoryStore> {
    inner: S,
    shared: Arc<Shared<St>>,
    policy: Arc<ToolPolicy>,
    forwarded: ForwardedRequests,
    tasks: bool,
    replay_notice: bool,
}

// Written by hand: a derive would require `St: Clone`.
impl<S: Clone, St> Clone for McpService<S, St> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        }
    }
}

impl<S: std::fmt::Debug, St> std::fmt::Debug for McpService<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, St, B, ResBody> Service<Request<B>> for McpService<S, St>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body + From<Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
    St: Store,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service that was driven to readiness goes into the future; a clone stays.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if status::asks_status(&self.shared.settings, &request) {
            return status::respond(&self.shared, request);
        }
        let protected = self
            .shared
            .settings
            .paths
            .is_protected(request.uri().path());
        if request.method() != Method::POST || !protected {
            return ResponseFuture::passthrough(inner.call(request));
        }
        let endpoint = Endpoint {
            shared: Arc::clone(&self.shared),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        };
        ResponseFuture::layered(endpoint.post(inner, request))
    }
}

type Answered<B, E> = Result<Response<ResponseBody<B>>, E>;

/// What one POST needs of the layer.
struct Endpoint<St> {
    shared: Arc<Shared<St>>,
    policy: Arc<ToolPolicy>,
    forwarded: ForwardedRequests,
    tasks: bool,
    replay_notice: bool,
}

impl<St: Store> Endpoint<St> {
    /// One POST to the endpoint: a tool call is protected, a task query answered, a discovery
    /// answer read on its way back, and the rest passed on.
    async fn post<S, B, ResBody>(
        self,
        mut inner: S,
        request: Request<B>,
    ) -> Answered<ResBody, S::Error>
    where
        S: Tool<B, ResBody>,
        B: Bufferable,
        ResBody: Keepable<Error: Into<BoxError>>,
    {
        let (parts, body) = request.into_parts();
        let settings = &self.shared.settings;
        let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
            Ok(bytes) => bytes,
            Err(refusal) => return Ok(written(refusal)),
        };
        let form = Form::of(&parts.headers);
        match envelope::read(&bytes) {
            Envelope::ToolCall(call) if !self.policy.passes_through(&call.name) => {
                self.forwarded.protected(&parts.headers, &call.id);
                self.call_tool(inner, parts, bytes, call, form).await
            }
            Envelope::Discovery { id, what } => {
                self.forwarded.forwarded(&parts.headers, &id);
                let response = inner
                    .call(Request::from_parts(parts, B::from(bytes)))
                    .await?;
                Ok(self.read_discovery(response, &id, what).await)
            }
            Envelope::TaskQuery(query) if self.tasks => {
                match self.answer_task_query(&parts, &query).await {
                    Some(message) => Ok(message::write(&message, form, http::HeaderMap::new())
                        .map(ResponseBody::full)),
                    None => self.forward(inner, parts, bytes, Some(query.id)).await,
                }
            }
            Envelope::Refused(refusal) => Ok(self.refuse(&parts, &refusal, form)),
            Envelope::Cancellation { request_id } => {
                let passes_on = request_id
                    .as_ref()
                    .is_some_and(|id| self.forwarded.passes_on(&parts.headers, id));
                if !passes_on {
                    crate::telemetry::cancellation_absorbed();
                    return Ok(accepted());
                }
                self.forward(inner, parts, bytes, None).await
            }
            Envelope::ToolCall(ToolCall { id, .. }) | Envelope::TaskQuery(TaskQuery { id, .. }) => {
                self.forward(inner, parts, bytes, Some(id)).await
            }
            Envelope::Other { id } => self.forward(inner, parts, bytes, id).await,
        }
    }

    /// Passes a message on to the server unprotected, remembering the id of a request so
    /// that the client can still cancel it.
    async fn forward<S, B, ResBody>(
        &self,
        mut inner: S,
        parts: Parts,
        bytes: Bytes,
        id: Option<Value>,
    ) -> Answered<ResBody, S::Error>
    where
        S: Tool<B, ResBody>,
        B: Bufferable,
        ResBody: Keepable<Error: Into<BoxError>>,
    {
        if let Some(id) = id {
            self.forwarded.forwarded(&parts.headers, &id);
        }
        let response = inner
            .call(Request::from_parts(parts, B::from(bytes)))
            .await?;
        Ok(response.map(ResponseBody::inner))
    }

    /// A protected tool call, run once per intent; run as a task where one is asked for and
    /// tasks are served.
    async fn call_tool<S, B, ResBody>(
        &self,
        inner: S,
        mut parts: Parts,
        mut bytes: Bytes,
        call: ToolCall,
        form: Form,
    ) -> Answered<ResBody, S::Error>
    where
        S: Tool<B, ResBody>,
        B: Bufferable,
        ResBody: Keepable<Error: Into<BoxError>>,
    {
        let settings = &self.shared.settings;
        let mut timing = self.policy.timing(&call.name);
        let as_task = call.as_task && self.tasks;
        if as_task {
            // The server runs a plain call; the layer is the one that answers with a task.
            if let Some(plain) = envelope::without_task(&bytes) {
                bytes = Bytes::from(plain);
                parts.headers.remove(header::CONTENT_LENGTH);
            }
            timing.deadline = Some(Duration::ZERO);
        }
        let retention = timing.retention.unwrap_or(settings.paths.default_retention);
        parts.extensions.insert(timing);
        parts.extensions.insert(call.clone());
        let server = ServerPath {
            inner,
            limit: settings.response_limit,
        };
        let request = Request::from_parts(parts, B::from(bytes));
        let response = protect::protect(Arc::clone(&self.shared), server, request).await?;
        let (parts, answered) = Answer::of(response).await;
        let message = match answered {
            // The key could not be taken: refused as the envelope refusal it is.
            Answer::Written(answer) if is_unkeyable(&answer) => {
                let why = answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let why = why.to_owned();
                answers::refused(&Refusal::Unkeyable { id: call.id, why })
            }
            Answer::Verbatim(bytes) => {
                return Ok(Response::from_parts(parts, ResponseBody::full(bytes)))
            }
            Answer::Message { kept, message } if as_task => {
                let status = if kept {
                    TaskStatus::Completed
                } else {
                    TaskStatus::Failed
                };
                task_created(&parts, status, 0, retention)
                    .map_or_else(|| with_id(message, &call.id), |view| view.created(&call.id))
            }
            Answer::Written(answer) if as_task && is_in_progress(&answer) => {
                let started_s_ago = answer.get("started_s_ago").and_then(Value::as_u64);
                let view = task_created(
                    &parts,
                    TaskStatus::Working,
                    started_s_ago.unwrap_or(0),
                    retention,
                );
                match view {
                    Some(view) => view.created(&call.id),
                    None => answers::tool_result(&call.id, &answer),
                }
            }
            Answer::Message { message, kept } => {
                let mut message = with_id(message, &call.id);
                let replayed = parts.headers.contains_key(REPLAYED_HEADER);
                if kept && replayed && self.replay_notice {
                    let ran_s_ago = parts
                        .headers
                        .get(header::AGE)
                        .and_then(|age| age.to_str().ok()?.parse().ok())
                        .unwrap_or(0);
                    let intent = parts
                        .headers
                        .get(INTENT_HEADER)
                        .and_then(|v| v.to_str().ok());
                    answers::note_replay(&mut message, ran_s_ago, intent.unwrap_or_default());
                }
                message
            }
            Answer::Written(answer) => answers::tool_result(&call.id, &answer),
            Answer::Lost => answers::lost(&call.id),
        };
        Ok(answer_with(parts, &message, form))
    }

    /// Answers `tasks/get` or `tasks/result` for one of the layer's tasks; `None` for a task
    /// that is not (the server's own), which the server answers.
    async fn answer_task_query(&self, parts: &Parts, query: &TaskQuery) -> Option<Value> {
        let settings = &self.shared.settings;
        // A scope function that panics finds no task: nothing leaks, nothing runs.
        let scope = settings.scope.scope_of(parts).ok().flatten();
        let scope = scope.map(|scope| scope.to_vec());
        let ttl = settings.paths.default_retention;
        let wait = settings.paths.default_deadline;
        let answered = tasks::answer(&self.shared, scope, query, ttl, wait).await?;
        let key: IntentKey = query.task_id.parse().ok()?;
        let response = match answered {
            TaskAnswer::Message(message) => return Some(message),
            TaskAnswer::Result(record) => replay::<Full<Bytes>>(settings, &key, &record),
            TaskAnswer::StillRunning { started_at_ms } => {
                let started = crate::clock::seconds_since(started_at_ms);
                let mut message = answers::task_still_running(&query.id, &key, started);
                if let Value::Object(message) = &mut message {
                    tasks::relate(message, &query.task_id);
                }
                return Some(message);
            }
        };
        let (_, answered) = Answer::of(response).await;
        let mut message = match answered {
            Answer::Message { message, .. } => with_id(message, &query.id),
            Answer::Written(answer) => answers::tool_result(&query.id, &answer),
            Answer::Verbatim(_) | Answer::Lost => answers::lost(&query.id),
        };
        if let Value::Object(message) = &mut message {
            tasks::relate(message, &query.task_id);
        }
        Some(message)
    }

    /// Answers a refused envelope, counted as not executed.
    fn refuse<B>(&self, parts: &Parts, refusal: &Refusal, form: Form) -> Response<ResponseBody<B>> {
        let shared = &self.shared;
        let op = shared.ops.of(shared.settings.route_label.as_ref(), parts);
        crate::telemetry::not_executed(&op, "mcp-envelope");
        let error = answers::refused(refusal);
        let (status, form) = match refusal {
            // A request with an id is answered as requests are.
            Refusal::NoToolName { .. } | Refusal::Unkeyable { .. } => (StatusCode::OK, form),
            // The rest cannot be answered as a request: an HTTP error with the JSON-RPC error.
            _ => (StatusCode::BAD_REQUEST, Form::Json),
        };
        let mut response = message::write(&error, form, http::HeaderMap::new());
        *response.status_mut() = status;
        response.map(ResponseBody::full)
    }

    /// Passes an `initialize` or `tools/list` answer on, learning the tools' annotations from
    /// it on the way; with tasks served, it is completed with what the layer adds (the tasks
    /// capability, the tools' task support) and written again in the form it came in. One
    /// over the response limit is passed on unread.
    async fn read_discovery<B>(
        &self,
        response: Response<B>,
        id: &Value,
        what: Discovery,
    ) -> Response<ResponseBody<B>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let limit = self.shared.settings.response_limit;
        let (parts, body) = response.into_parts();
        if !parts.status.is_success() || (what == Discovery::Initialize && !self.tasks) {
            return Response::from_parts(parts, ResponseBody::inner(body));
        }
        let mut body = Box::pin(body);
        let mut head = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map(|frame| frame.into_data()) else {
                return Response::from_parts(parts, ResponseBody::chained(head.freeze(), body));
            };
            if let Ok(data) = data {
                head.extend_from_slice(&data);
            }
            if head.len() > limit {
                return Response::from_parts(parts, ResponseBody::chained(head.freeze(), body));
            }
        }
        let head = head.freeze();
        let answer = message::read_answer(&parts.headers, Full::new(head.clone()), id, limit).await;
        let Ok(Value::Object(mut answer)) = answer else {
            return Response::from_parts(parts, ResponseBody::full(head));
        };
        let Some(Value::Object(result)) = answer.get_mut("result") else {
            return Response::from_parts(parts, ResponseBody::full(head));
        };
        match what {
            Discovery::ToolsList => self.policy.learn(result),
            Discovery::Initialize => {}
        }
        if !self.tasks {
            return Response::from_parts(parts, ResponseBody::full(head));
        }
        match what {
            Discovery::ToolsList => {
                tasks::offer_to_tools(result, |name| !self.policy.passes_through(name))
            }
            Discovery::Initialize => tasks::declare_capability(result),
        }
        let came_as = if message::is_event_stream(&parts.headers) {
            Form::EventStream
        } else {
            Form::Json
        };
        let status = parts.status;
        let mut rewritten = message::write(&Value::Object(answer), came_as, parts.headers);
        *rewritten.status_mut() = status;
        rewritten.map(ResponseBody::full)
    }
}

/// What the protected path answered, taken apart.
enum Answer {
    /// The server's own HTTP error, passed on as it was.
    Verbatim(Bytes),
    /// The server's JSON-RPC answer, and whether it was kept.
    Message { kept: bool, message: Value },
    /// An answer the layer wrote (in progress, not executed, failed...): its members.
    Written(Map<String, Value>),
    /// Nothing readable.
    Lost,
}

impl Answer {
    async fn of<RB: Body<Data = Bytes>>(
        response: Response<ResponseBody<RB>>,
    ) -> (http::response::Parts, Self) {
        let (mut parts, body) = response.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let mark = parts.headers.remove(MARK);
        if mark.is_some_and(|mark| mark == MARK_VERBATIM) {
            parts.headers.remove(header::CONTENT_LENGTH);
            return (parts, Self::Verbatim(bytes));
        }
        let answer = match serde_json::from_slice(&bytes) {
            // The server's JSON-RPC answer; the layer's own answers have no `jsonrpc` member.
            Ok(Value::Object(message)) if message.contains_key("jsonrpc") => Self::Message {
                kept: parts.status.is_success(),
                message: Value::Object(message),
            },
            Ok(Value::Object(answer)) => Self::Written(answer),
            _ => Self::Lost,
        };
        (parts, answer)
    }
}

fn is_unkeyable(answer: &Map<String, Value>) -> bool {
    answer.get("type").and_then(Value::as_str) == Some("urn:tower-idempotency:unkeyable")
}

fn is_in_progress(answer: &Map<String, Value>) -> bool {
    answer.get("outcome").and_then(Value::as_str) == Some("in_progress")
}

/// A JSON-RPC message answering the request `id`.
fn with_id(mut message: Value, id: &Value) -> Value {
    if let Value::Object(message) = &mut message {
        message.insert("id".to_owned(), id.clone());
    }
    message
}

/// The task a task-augmented call created: its id is the intent the layer answered with.
fn task_created(
    parts: &http::response::Parts,
    status: TaskStatus,
    started_s_ago: u64,
    ttl: Duration,
) -> Option<TaskView> {
    let key: IntentKey = parts
        .headers
        .get(INTENT_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    let now = now_ms();
    Some(TaskView {
        key,
        status,
        created_at_ms: now.saturating_sub(started_s_ago * 1000),
        updated_at_ms: now,
        ttl,
    })
}

/// What Streamable HTTP answers to a notification the server accepts: 202, no body.
fn accepted<B>() -> Response<ResponseBody<B>> {
    let mut response = Response::new(ResponseBody::full(Bytes::new()));
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// The answer to a call, in `form`, with the headers the layer set (less its HTTP framing:
/// a 202's `Location` means nothing to a JSON-RPC client).
fn answer_with<B>(
    mut parts: http::response::Parts,
    message: &Value,
    form: Form,
) -> Response<ResponseBody<B>> {
    parts.headers.remove(header::LOCATION);
    message::write(message, form, parts.headers).map(ResponseBody::full)
}
