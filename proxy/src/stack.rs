//! The configuration made into services, once: one idempotency layer per route, each in front
//! of the shared upstream pool, all on one store.

use std::convert::Infallible;

use http::{HeaderName, Request, Response};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_idempotency::mcp::McpIdempotencyLayer;
use tower_idempotency::store::Store;
use tower_idempotency::{DetachedExecutions, IdempotencyLayer};

use crate::body::{boxed, Inbound, Outbound};
use crate::config::{Config, KeySource, MissingScope, Mode, Route, ToolMode};
use crate::routes::{Handler, Routes};
use crate::upstream::Pool;

/// The services, and what a shutdown waits for.
pub struct Built<St> {
    pub routes: Routes,
    pub detached: DetachedExecutions,
    /// Shares the store with every route, for the readiness probe.
    pub layer: IdempotencyLayer<St>,
    /// The operator's operations on the store, with the HTTP routes' scope for purges.
    pub admin: tower_idempotency::admin::Admin<St>,
}

/// Builds every route's service over `store`.
pub fn build<St: Store>(config: &Config, store: St) -> Built<St> {
    let root = store_settings(config, IdempotencyLayer::with_store(store));
    let pool = Pool::new(&config.upstream, config.telemetry.request_id_header.clone());
    let http = http_scope(config, root.clone());
    let mcp = mcp_scope(config, root.clone());
    let handler = |route: &Route| match route.mode {
        Mode::Pass => BoxCloneSyncService::new(pool.route(route.timeout, false)),
        Mode::Protect => {
            let mut layer = timing(route, http.clone());
            if route.observe {
                layer = layer.observe();
            }
            for pointer in &route.ignore_fields {
                layer = layer.ignore_field(pointer);
            }
            let layer = match &route.key {
                Some(KeySource::Header(name)) => layer.key_header(name.clone()),
                Some(KeySource::Field(pointer)) => layer.key_field(pointer),
                None => layer,
            };
            boxed_service(layer, &pool, route)
        }
        Mode::Mcp => {
            // An MCP route's fields point into the tool's arguments, not the body.
            let mut layer = timing(route, mcp.clone());
            if route.observe {
                layer = layer.observe();
            }
            let mut layer = layer
                .mcp()
                .tasks()
                .validate_arguments(route.validate_arguments);
            if config.scope.mcp_shared {
                layer = layer.shared_scope();
            }
            for pointer in &route.ignore_fields {
                layer = layer.ignore_argument(pointer);
            }
            boxed_service(tools(config, layer), &pool, route)
        }
    };
    let fallback = handler(&config.default_route);
    let table: Vec<_> = config
        .routes
        .iter()
        .map(|route| (route.prefix.clone(), handler(route)))
        .collect();
    // Status queries go to an enforcing HTTP route's layer: every layer reads the same store,
    // and an observing one passes them to the upstream.
    let status = std::iter::once((&config.default_route, &fallback))
        .chain(config.routes.iter().zip(table.iter().map(|(_, h)| h)))
        .find(|(route, _)| route.mode == Mode::Protect && !route.observe)
        .map(|(_, handler)| handler.clone());
    Built {
        routes: Routes::new(table, fallback, status),
        detached: root.detached(),
        admin: http.admin(),
        layer: root,
    }
}

fn boxed_service<L>(layer: L, pool: &Pool, route: &Route) -> Handler
where
    L: Layer<crate::upstream::Upstream>,
    L::Service: tower::Service<
            Request<Inbound>,
            Response = Response<tower_idempotency::ResponseBody<Outbound>>,
            Error = Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<Request<Inbound>>>::Future: Send + 'static,
{
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(pool.route(route.timeout, true))
        .map_response(|response| response.map(boxed));
    BoxCloneSyncService::new(service)
}

/// The settings every route shares: the store's and the limits.
fn store_settings<St: Store>(
    config: &Config,
    mut layer: IdempotencyLayer<St>,
) -> IdempotencyLayer<St> {
    if let Some(timeout) = config.store.call_timeout {
        layer = layer.store_timeout(timeout);
    }
    if config.store.fail_open {
        layer = layer.fail_open();
    }
    if let Some(bytes) = config.limits.body {
        layer = layer.body_limit(bytes);
    }
    if let Some(bytes) = config.limits.response {
        layer = layer.response_limit(bytes);
    }
    if let Some(max) = config.limits.max_detached {
        layer = layer.max_detached(max);
    }
    layer.request_id_header(config.telemetry.request_id_header.clone())
}

/// HTTP routes: the principal where one is configured, else the caller's credential; each
/// narrowed by the session header, which alone names a caller that sends no credential.
fn http_scope<St: Store>(config: &Config, layer: IdempotencyLayer<St>) -> IdempotencyLayer<St> {
    let session = config
        .scope
        .header
        .clone()
        .unwrap_or(HeaderName::from_static(
            tower_idempotency::DEFAULT_SCOPE_HEADER,
        ));
    let layer = match &config.scope.principal_header {
        Some(principal) => layer
            .scope_header(principal.clone())
            .narrow_scope_by(session),
        None => layer
            .credential_headers(config.scope.credential_headers.iter().cloned())
            .narrow_scope_by(session),
    };
    when_missing(config, layer)
}

/// MCP routes: the principal where one is configured, else the caller's credential; each
/// narrowed by the `Mcp-Session-Id` session where the client has one (2026-07-28 has none);
/// without either, the session alone, else a shared scope where the operator serves one user.
fn mcp_scope<St: Store>(config: &Config, layer: IdempotencyLayer<St>) -> IdempotencyLayer<St> {
    let layer = match &config.scope.principal_header {
        Some(principal) => layer.scope_header(principal.clone()),
        None => layer.credential_headers(config.scope.credential_headers.iter().cloned()),
    };
    when_missing(config, layer)
}

/// Every MCP route's settings of the tools the configuration names.
fn tools<St>(config: &Config, mut layer: McpIdempotencyLayer<St>) -> McpIdempotencyLayer<St> {
    for tool in &config.tools {
        let name = tool.name.as_str();
        layer = match tool.mode {
            Some(ToolMode::Pass) => layer.pass_through_tool(name),
            Some(ToolMode::Protect) => layer.protect_tool(name),
            None => layer,
        };
        if let Some(deadline) = tool.deadline {
            layer = layer.deadline_for_tool(name, deadline);
        }
        if let Some(retention) = tool.retention {
            layer = layer.retention_for_tool(name, retention);
        }
        if let Some(budget) = tool.retry_budget {
            layer = layer.retry_budget_for_tool(name, budget);
        }
        for pointer in &tool.ignore_arguments {
            layer = layer.ignore_argument_of_tool(name, pointer);
        }
    }
    layer
}

/// What every route does with a request that has no scope.
fn when_missing<St: Store>(config: &Config, layer: IdempotencyLayer<St>) -> IdempotencyLayer<St> {
    match config.scope.missing {
        MissingScope::Refuse => layer,
        MissingScope::Pass => layer.pass_through_without_scope(),
    }
}

/// A route's times: its deadline, retention and execution bound, where it sets them, and its
/// retry budget.
fn timing<St: Store>(route: &Route, mut layer: IdempotencyLayer<St>) -> IdempotencyLayer<St> {
    if let Some(deadline) = route.deadline {
        layer = layer.deadline(deadline);
    }
    if let Some(retention) = route.retention {
        layer = layer.retention(retention);
    }
    if let Some(limit) = route.max_execution {
        layer = layer.max_execution(limit);
    }
    layer.retry_budget(route.retry_budget)
}
