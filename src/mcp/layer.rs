//! [`McpIdempotencyLayer`]: the MCP mode's builder, made from a configured [`IdempotencyLayer`].

use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use tower_layer::Layer;

use super::service::McpIdempotency;
use crate::canonical::pointer::parse_pointer;
use crate::canonical::JsonPointer;
use crate::engine::Engine;
use crate::idempotency::IdempotencyLayer;
use crate::mcp::cancellation::ForwardedRequests;
use crate::mcp::endpoint::Endpoint;
use crate::mcp::policy::{self, ToolPolicy};
use crate::mcp::MCP_SESSION_HEADER;
use crate::scope::ScopeSource;
use crate::store::{MemoryStore, Store};

/// The parts of a request the key leaves out: the JSON-RPC id, the task it may ask to be run
/// as (2025-11-25), and the `_meta` members the protocol defines per attempt: the progress
/// token, the version, the client's name and capabilities, its log level and the trace
/// context (W3C `baggage` included: it travels with the trace, and tracing systems add
/// members to it per hop). Every other `_meta` member (a tenant, a locale) is part of the
/// intent.
const LEFT_OUT: [&str; 10] = [
    "/id",
    "/params/task",
    "/params/_meta/progressToken",
    "/params/_meta/io.modelcontextprotocol~1protocolVersion",
    "/params/_meta/io.modelcontextprotocol~1clientInfo",
    "/params/_meta/io.modelcontextprotocol~1clientCapabilities",
    "/params/_meta/io.modelcontextprotocol~1logLevel",
    "/params/_meta/traceparent",
    "/params/_meta/tracestate",
    "/params/_meta/baggage",
];

/// The object that counts as absent once the members above are left out of it.
const EMPTIED: &str = "/params/_meta";

impl<St: Store> IdempotencyLayer<St> {
    /// This layer in MCP mode: for the Streamable HTTP endpoint of an MCP server. Configure
    /// the layer first; see [`McpIdempotencyLayer`].
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub fn mcp(self) -> McpIdempotencyLayer<St> {
        let layer = self.set(|settings| {
            let pointers = LEFT_OUT.iter().map(|pointer| parse_pointer(pointer));
            settings.fingerprint.ignored.extend(pointers);
            settings.fingerprint.emptied.push(parse_pointer(EMPTIED));
            let session = HeaderName::from_static(MCP_SESSION_HEADER);
            let configured = std::mem::replace(
                &mut settings.scope,
                ScopeSource::unconfigured(session.clone()),
            );
            match configured {
                // Without a principal, the credential headers set so far carry over.
                ScopeSource::Narrowed {
                    principal: None,
                    credentials,
                    shared,
                    ..
                } => {
                    settings.scope = ScopeSource::Narrowed {
                        principal: None,
                        by: session,
                        narrowed: true,
                        credentials,
                        shared,
                    }
                }
                principal => {
                    settings.scope = ScopeSource::Narrowed {
                        principal: Some(Box::new(principal)),
                        by: session,
                        narrowed: true,
                        credentials: Arc::new([]),
                        shared: false,
                    }
                }
            }
        });
        McpIdempotencyLayer {
            layer,
            policy: Arc::default(),
            forwarded: ForwardedRequests::default(),
            tasks: false,
            replay_notice: true,
        }
    }
}

/// [`IdempotencyLayer`] in MCP mode, made by [`IdempotencyLayer::mcp`]; see the
/// [module](crate::mcp) for what it does.
#[must_use = "a layer does nothing until it wraps a service"]
pub struct McpIdempotencyLayer<St = MemoryStore> {
    layer: IdempotencyLayer<St>,
    policy: Arc<ToolPolicy>,
    forwarded: ForwardedRequests,
    tasks: bool,
    replay_notice: bool,
}

// Written by hand: a derive would require `St: Clone`.
impl<St> Clone for McpIdempotencyLayer<St> {
    fn clone(&self) -> Self {
        Self {
            layer: self.layer.clone(),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        }
    }
}

impl<St> std::fmt::Debug for McpIdempotencyLayer<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpIdempotencyLayer")
            .field("tools", &self.policy.configured)
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

impl<St> McpIdempotencyLayer<St> {
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

    /// How soon a call of this tool whose attempts keep failing may run again; see
    /// [`IdempotencyLayer::retry_budget`].
    pub fn retry_budget_for_tool(self, name: &str, budget: crate::RetryBudget) -> Self {
        self.tool(name, |rule| rule.timing.retry_budget = Some(budget))
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
        self.layer = self.layer.set(|settings| match &mut settings.scope {
            ScopeSource::Narrowed {
                principal: Some(_),
                narrowed,
                ..
            } => *narrowed = false,
            _ => panic!(
                "McpIdempotencyLayer::scope_by_principal: configure a principal first \
                 (IdempotencyLayer::scope_header or scope_fn, before .mcp())"
            ),
        });
        self
    }

    /// Gives every caller that no principal, session or credential names one shared scope,
    /// rather than refusing its calls: for a server with one user, such as a local server
    /// that a single agent talks to. Protocol 2026-07-28 has no session, so without a
    /// principal or an `Authorization` header its callers are named by nothing else. Every
    /// such caller then shares results: never turn it on for a server with several users.
    ///
    /// ```
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new().mcp().shared_scope();
    /// # let _ = layer;
    /// ```
    pub fn shared_scope(mut self) -> Self {
        self.layer = self.layer.set(|settings| {
            if let ScopeSource::Narrowed { shared, .. } = &mut settings.scope {
                *shared = true;
            }
        });
        self
    }

    /// Does not name a caller by its `Authorization` header where no principal or session
    /// does: such calls are refused (or shared, with [`shared_scope`](Self::shared_scope)).
    pub fn no_credential_scope(mut self) -> Self {
        self.layer = self.layer.set(|settings| {
            if let ScopeSource::Narrowed { credentials, .. } = &mut settings.scope {
                *credentials = Arc::new([]);
            }
        });
        self
    }

    /// Whether a principal was configured before [`IdempotencyLayer::mcp`]: without one,
    /// callers of protocol 2026-07-28, which has no session, are named by their credential.
    pub fn has_principal(&self) -> bool {
        self.layer.settings.scope_configured
    }

    /// Serves MCP tasks, off by default, answered from the store so that any instance sharing
    /// it answers them; a task's id is its intent.
    ///
    /// - **The tasks extension** (2026-07-28, `io.modelcontextprotocol/tasks`): a call from a
    ///   client that names the extension in its capabilities, still running at its deadline,
    ///   is answered with a task (`resultType: "task"`); `tasks/get` gives its status and then
    ///   its result, `tasks/update` is acknowledged, and `tasks/cancel` is acknowledged and
    ///   absorbed (the action goes on). The `server/discover` answer declares the extension.
    ///   The extension is left out of what a protected call forwards, so that only the layer
    ///   makes tasks of protected calls.
    /// - **The tasks of 2025-11-25** (experimental): a `tools/call` that asks to run as a task
    ///   (`params.task`) is answered at once with a task, while the server runs the call as a
    ///   plain one; `tasks/get` and `tasks/result` for it are answered from the store. The
    ///   `initialize` answer then declares `tasks.requests.tools.call`, and the `tools/list`
    ///   answer marks every protected tool `execution.taskSupport: optional`. `tasks/result`
    ///   waits for a running task up to the deadline, then answers "in progress" as a tool
    ///   result.
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

    /// Checks each `tools/call`'s arguments against the `inputSchema` its tool was listed
    /// with (off by default). The schemas are those of the `tools/list` answers passing back
    /// through the layer, kept per server and forgotten when the server says its tools
    /// changed (`notifications/tools/list_changed` on a stream passing back). A call whose
    /// arguments break its tool's schema is answered at once with a tool execution error
    /// (`isError: true`) whose text names each violation by JSON Pointer, so that the model
    /// can correct the call; it is not run, and nothing is kept of it. Absent arguments are
    /// checked as `{}`; formats such as `email` are checked. A call of a tool never listed,
    /// or listed with a schema that does not compile (said once in the log), goes on
    /// unchecked. Observe mode checks nothing.
    ///
    /// ```
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new().mcp().validate_arguments(true);
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "contract")]
    #[cfg_attr(docsrs, doc(cfg(feature = "contract")))]
    pub fn validate_arguments(mut self, validate: bool) -> Self {
        Arc::make_mut(&mut self.policy).validates_arguments = validate;
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
        self.layer = self
            .layer
            .set(|settings| settings.fingerprint.ignored.push(within));
        self
    }

    /// Leaves an argument out of the key of this tool's calls alone, such as `/request_id`
    /// of a tool that takes one: a JSON Pointer into its `params.arguments`. Calls of other
    /// tools keep it.
    ///
    /// ```
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new()
    ///     .mcp()
    ///     .ignore_argument_of_tool("send_email", "/request_id");
    /// # let _ = layer;
    /// ```
    ///
    /// # Panics
    ///
    /// If `pointer` is not a JSON Pointer (RFC 6901).
    pub fn ignore_argument_of_tool(mut self, name: &str, pointer: &str) -> Self {
        let _: JsonPointer = parse_pointer(pointer);
        let within = parse_pointer(&format!("/params/arguments{pointer}"));
        let rule = (parse_pointer("/params/name"), name.to_owned(), within);
        self.layer = self
            .layer
            .set(|settings| settings.fingerprint.ignored_in_tool.push(rule));
        self
    }
}

impl<S, St> Layer<S> for McpIdempotencyLayer<St> {
    type Service = McpIdempotency<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        let engine = Engine::new(
            Arc::clone(&self.layer.settings),
            Arc::clone(&self.layer.runtime),
        );
        let endpoint = Endpoint {
            engine: Arc::new(engine),
            policy: Arc::clone(&self.policy),
            forwarded: self.forwarded.clone(),
            relays: Default::default(),
            tasks: self.tasks,
            replay_notice: self.replay_notice,
        };
        McpIdempotency::new(inner, Arc::new(endpoint))
    }
}
