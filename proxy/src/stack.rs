//! The configuration made into services, once: one idempotency layer per route, each in front
//! of the shared upstream pool, all on one store.

use std::convert::Infallible;

use http::{HeaderName, Request, Response};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_idempotency::store::Store;
use tower_idempotency::{DetachedExecutions, IdempotencyLayer};

use crate::body::{boxed, Inbound, Outbound};
use crate::config::{Config, KeySource, MissingScope, Mode, Route};
use crate::routes::{Handler, Routes};
use crate::upstream::Pool;

/// The services, and what a shutdown waits for.
pub struct Built<St> {
    pub routes: Routes,
    pub detached: DetachedExecutions,
    /// Shares the store with every route, for the readiness probe.
    pub layer: IdempotencyLayer<St>,
}

/// Builds every route's service over `store`.
pub fn build<St: Store>(config: &Config, store: St) -> Built<St> {
    let root = store_settings(config, IdempotencyLayer::with_store(store));
    let pool = Pool::new(&config.upstream);
    let http = http_scope(config, root.clone());
    let mcp = mcp_scope(config, root.clone());
    let handler = |route: &Route| match route.mode {
        Mode::Pass => BoxCloneSyncService::new(pool.route(route.timeout, false)),
        Mode::Protect => {
            let layer = route_settings(route, http.clone());
            let layer = match &route.key {
                Some(KeySource::Header(name)) => layer.key_header(name.clone()),
                Some(KeySource::Field(pointer)) => layer.key_field(pointer),
                None => layer,
            };
            boxed_service(layer, &pool, route)
        }
        Mode::Mcp => {
            let mut layer = route_settings_mcp(route, mcp.clone()).mcp().tasks();
            for pointer in &route.ignore_fields {
                layer = layer.ignore_argument(pointer);
            }
            boxed_service(layer, &pool, route)
        }
    };
    let fallback = handler(&config.default_route);
    let table = config
        .routes
        .iter()
        .map(|route| (route.prefix.clone(), handler(route)))
        .collect();
    // Status queries go to a protected HTTP route's layer: every layer reads the same store.
    let status = std::iter::once(&config.default_route)
        .chain(&config.routes)
        .find(|route| route.mode == Mode::Protect)
        .map(handler);
    Built {
        routes: Routes::new(table, fallback, status),
        detached: root.detached(),
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
    layer
}

/// HTTP routes: the session header, under the principal where one is configured.
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
        None => layer.scope_header(session),
    };
    match config.scope.missing {
        MissingScope::Refuse => layer,
        MissingScope::Pass => layer.pass_through_without_scope(),
    }
}

/// MCP routes: the `Mcp-Session-Id` session, under the principal where one is configured.
fn mcp_scope<St: Store>(config: &Config, layer: IdempotencyLayer<St>) -> IdempotencyLayer<St> {
    match &config.scope.principal_header {
        Some(principal) => layer.scope_header(principal.clone()),
        None => layer,
    }
}

fn route_settings<St: Store>(
    route: &Route,
    mut layer: IdempotencyLayer<St>,
) -> IdempotencyLayer<St> {
    if let Some(deadline) = route.deadline {
        layer = layer.deadline(deadline);
    }
    if let Some(retention) = route.retention {
        layer = layer.retention(retention);
    }
    if let Some(limit) = route.max_execution {
        layer = layer.max_execution(limit);
    }
    for pointer in &route.ignore_fields {
        layer = layer.ignore_field(pointer);
    }
    layer
}

/// An MCP route's fields are the tool's arguments, not the body's: they are given to the MCP
/// layer, not to this one.
fn route_settings_mcp<St: Store>(
    route: &Route,
    layer: IdempotencyLayer<St>,
) -> IdempotencyLayer<St> {
    let fields = Route {
        ignore_fields: Vec::new(),
        ..route.clone()
    };
    route_settings(&fields, layer)
}
