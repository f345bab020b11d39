//! The proxy's settings: the file and the flags, checked together before anything starts.

mod file;
mod proxies;
mod route;
mod store;
mod telemetry;
mod tls;
mod tools;
mod values;

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::{HeaderName, Uri};

pub use file::{HostHeader, LogFormat, MissingScope, Mode, ToolMode};
pub use telemetry::{Otlp, OtlpProtocol, Telemetry};
pub use tools::Tool;

use crate::cli::Cli;
use file::{File, RouteTable};
use route::route;

/// A setting that cannot be used: what, where, and what would be valid.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Everything the proxy runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    /// The peers whose forwarding headers are kept and extended; every other client's are
    /// dropped and the proxy writes its own.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The admin API's bearer token: the API is off without one.
    pub admin_token: Option<String>,
    pub log_format: LogFormat,
    /// Request ids, trace context and where spans go.
    pub telemetry: Telemetry,
    pub shutdown_grace: Duration,
    pub upstream: Upstream,
    pub store: Store,
    pub scope: Scope,
    pub limits: Limits,
    /// Longest prefix first.
    pub routes: Vec<Route>,
    /// For every path no route names.
    pub default_route: Route,
    /// The MCP tools with settings of their own, on every MCP route.
    pub tools: Vec<Tool>,
}

#[derive(Debug, Clone)]
pub struct Upstream {
    pub url: Uri,
    /// For an `https://` upstream.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    pub host: HostHeader,
    pub connect_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
}

#[derive(Debug, Clone)]
pub enum StoreKind {
    Memory,
    Redis(String),
    Cluster(Vec<String>),
    Postgres(String),
}

impl Store {
    /// What the store is, for the start-up log line.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            StoreKind::Memory => "memory",
            StoreKind::Redis(_) => "redis",
            StoreKind::Cluster(_) => "redis-cluster",
            StoreKind::Postgres(_) => "postgres",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Store {
    pub kind: StoreKind,
    pub prefix: Option<String>,
    pub memory_max_bytes: Option<u64>,
    /// How long the local cache in front of a shared store keeps a copy: an operator's release
    /// or purge reaches every proxy's replays within it.
    pub local_ttl: Duration,
    pub call_timeout: Option<Duration>,
    pub fail_open: bool,
}

#[derive(Debug, Clone)]
pub struct Scope {
    pub header: Option<HeaderName>,
    pub principal_header: Option<HeaderName>,
    /// The headers whose values, hashed, name a caller where no principal header is set:
    /// narrowed by the session, so that a session value alone names only a caller that sends
    /// no credential.
    pub credential_headers: Vec<HeaderName>,
    pub missing: MissingScope,
    /// MCP routes: one scope for every caller that no principal, session or credential names.
    pub mcp_shared: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub body: Option<usize>,
    pub response: Option<usize>,
    pub max_detached: Option<usize>,
}

/// Where an explicit idempotency key is read.
#[derive(Debug, Clone)]
pub enum KeySource {
    Header(HeaderName),
    Field(String),
}

#[derive(Debug, Clone)]
pub struct Route {
    /// Without a trailing `/`; empty for every path.
    pub prefix: String,
    pub mode: Mode,
    pub deadline: Option<Duration>,
    pub retention: Option<Duration>,
    pub max_execution: Option<Duration>,
    pub timeout: Duration,
    pub ignore_fields: Vec<String>,
    pub key: Option<KeySource>,
    /// Keyed and counted, never enforced.
    pub observe: bool,
    /// How soon an intent whose attempts keep failing may run again.
    pub retry_budget: tower_idempotency::RetryBudget,
    /// An MCP route's tool calls are checked against their tools' listed `inputSchema`.
    pub validate_arguments: bool,
}

/// The upstream's answer is awaited this long unless a route says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl Config {
    /// Reads the file the flags name, if any, and lays the flags over it.
    pub fn load(cli: &Cli) -> Result<Self, ConfigError> {
        let (file, source) = match &cli.config {
            Some(path) => read(path)?,
            None => (File::default(), None),
        };
        let where_ = |span: std::ops::Range<usize>| match &source {
            Some((path, text)) => {
                let line = text[..span.start].matches('\n').count() + 1;
                format!("{}, line {line}", path)
            }
            None => "the configuration".to_owned(),
        };
        resolve(cli, file, &where_)
    }
}

fn read(path: &Path) -> Result<(File, Option<(String, String)>), ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|error| ConfigError(format!("cannot read {shown}: {error}")))?;
    let file: File =
        toml::from_str(&text).map_err(|error| ConfigError(format!("{shown}: {error}")))?;
    Ok((file, Some((shown, text))))
}

fn flag<T>(
    name: &str,
    value: &Option<String>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    value
        .as_deref()
        .map(parse)
        .transpose()
        .map_err(|message| ConfigError(format!("--{name}: {message}")))
}

fn resolve(
    cli: &Cli,
    file: File,
    where_: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<Config, ConfigError> {
    let url = match flag("upstream", &cli.upstream, values::upstream)? {
        Some(url) => url,
        None => file.upstream.url.map(|u| u.0).ok_or_else(|| {
            ConfigError(
                "no upstream: give --upstream http://HOST:PORT, or `url` under [upstream] in \
                 the file"
                    .to_owned(),
            )
        })?,
    };
    let listen = flag("listen", &cli.listen, values::socket_addr)?
        .or(file.listen.map(|a| a.0))
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 3000)));
    let metrics_listen = flag("metrics-listen", &cli.metrics_listen, values::socket_addr)?
        .or(file.metrics_listen.map(|a| a.0));
    let trusted_proxies = proxies::trusted_proxies(cli, file.trusted_proxies.as_ref(), where_)?;
    let admin_token = cli.admin_token.clone().or(file.admin_token);
    if let Some(token) = &admin_token {
        if token.trim().len() < 16 {
            return Err(ConfigError(
                "admin_token: use a random token of at least 16 characters".to_owned(),
            ));
        }
        if metrics_listen.is_none() {
            return Err(ConfigError(
                "admin_token: the admin API is served on the metrics listener; set \
                 --metrics-listen (or `metrics_listen`) too"
                    .to_owned(),
            ));
        }
    }
    let identity = (&file.upstream.client_cert, &file.upstream.client_key);
    let tls = tls::upstream_tls(&url, &file.upstream.ca_file, identity)?;
    let default_timeout = file.upstream.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0);
    let upstream = Upstream {
        url,
        tls,
        host: file.upstream.host.unwrap_or(HostHeader::Keep),
        connect_timeout: file
            .upstream
            .connect_timeout
            .map_or(Duration::from_secs(5), |d| d.0),
        // Under the 5 s keep-alive of common servers (uvicorn, Node): a request written on a
        // connection the upstream is closing would be taken for one that may have run.
        pool_idle_timeout: file
            .upstream
            .pool_idle_timeout
            .map_or(Duration::from_secs(4), |d| d.0),
        pool_max_idle_per_host: file.upstream.pool_max_idle_per_host.unwrap_or(64),
    };
    let store = store::store(cli, &file.store, where_)?;
    let scope = Scope {
        header: flag("scope-header", &cli.scope_header, values::header_name)?
            .or(file.scope.header.map(|h| h.0)),
        principal_header: flag(
            "principal-header",
            &cli.principal_header,
            values::header_name,
        )?
        .or(file.scope.principal_header.map(|h| h.0)),
        credential_headers: file.scope.credential_headers.map_or_else(
            || vec![http::header::AUTHORIZATION],
            |names| names.into_iter().map(|h| h.0).collect(),
        ),
        missing: file.scope.missing.unwrap_or(MissingScope::Refuse),
        mcp_shared: cli.mcp_shared_scope || file.scope.mcp_shared.unwrap_or(false),
    };
    let telemetry = telemetry::telemetry(cli, file.telemetry, where_)?;
    let limits = Limits {
        body: file.limits.body,
        response: file.limits.response,
        max_detached: file.limits.max_detached,
    };
    let deadline = flag("deadline", &cli.deadline, values::duration)?;
    if file.defaults.prefix.is_some() {
        return Err(ConfigError(
            "[defaults]: `prefix` names a route: put it in a [[routes]] entry; [defaults] holds \
             the settings of every path no route names"
                .to_owned(),
        ));
    }
    let mut default_route = route(file.defaults, "", default_timeout, None)
        .map_err(|message| ConfigError(format!("[defaults]: {message}")))?;
    if deadline.is_some() {
        default_route.deadline = deadline;
    }
    let tools = tools::tools(
        file.tools,
        default_route.retry_budget,
        &cli.pass_tool,
        where_,
    )?;
    // Paths named by `--mcp` are MCP routes: a file's route for one keeps its other settings,
    // and is built in MCP mode, so that it takes no key or body fields from `[defaults]`.
    let mcp = cli
        .mcp
        .iter()
        .map(|path| values::prefix(path).map_err(|m| ConfigError(format!("--mcp: {m}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut routes = Vec::new();
    for table in file.routes {
        let span = table.span();
        let mut table = table.into_inner();
        let Some(prefix) = table.prefix.clone() else {
            return Err(ConfigError(format!(
                "{}: a [[routes]] entry needs a `prefix`, like prefix = \"/tools\"",
                where_(span)
            )));
        };
        let by_flag = mcp.contains(&prefix.0);
        if by_flag {
            table.mode = Some(Mode::Mcp);
        }
        let mut built =
            route(table, &prefix.0, default_timeout, Some(&default_route)).map_err(|message| {
                // The file may never say `mode = "mcp"`: the flag that made it so is named.
                let named = if by_flag {
                    format!(" (an MCP route by --mcp {})", prefix.0)
                } else {
                    String::new()
                };
                ConfigError(format!("{}: {message}{named}", where_(span.clone())))
            })?;
        if deadline.is_some() && built.deadline.is_none() {
            built.deadline = deadline;
        }
        if routes.iter().any(|r: &Route| r.prefix == built.prefix) {
            return Err(ConfigError(format!(
                "{}: the prefix \"{}\" is named by two routes",
                where_(span),
                built.prefix
            )));
        }
        routes.push(built);
    }
    for prefix in mcp {
        if routes.iter().all(|r| r.prefix != prefix) {
            let table = RouteTable {
                mode: Some(Mode::Mcp),
                ..RouteTable::default()
            };
            let built = route(table, &prefix, default_timeout, Some(&default_route))
                .map_err(|m| ConfigError(format!("--mcp {prefix}: {m}")))?;
            routes.push(built);
        }
    }
    for route in std::iter::once(&mut default_route).chain(&mut routes) {
        if cli.observe {
            route.observe = route.mode != Mode::Pass;
        }
        if cli.mcp_validate_arguments {
            route.validate_arguments = route.mode == Mode::Mcp;
        }
    }
    for route in std::iter::once(&default_route).chain(&routes) {
        check_timeouts(route, &upstream)?;
    }
    routes.sort_by_key(|route| std::cmp::Reverse(route.prefix.len()));
    Ok(Config {
        listen,
        metrics_listen,
        trusted_proxies,
        admin_token,
        log_format: file.log_format.unwrap_or(LogFormat::Text),
        telemetry,
        shutdown_grace: file.shutdown_grace.map_or(Duration::from_secs(30), |d| d.0),
        upstream,
        store,
        scope,
        limits,
        routes,
        default_route,
        tools,
    })
}

/// A route whose timeouts cannot all hold is refused: a connection that takes longer than the
/// route waits would be told "may have run" with nothing sent, and an answer awaited past
/// `max_execution` is abandoned first.
fn check_timeouts(route: &Route, upstream: &Upstream) -> Result<(), ConfigError> {
    let name = if route.prefix.is_empty() {
        "[defaults]".to_owned()
    } else {
        format!("the route \"{}\"", route.prefix)
    };
    let shown = |d: Duration| humantime::format_duration(d).to_string();
    if upstream.connect_timeout >= route.timeout {
        return Err(ConfigError(format!(
            "{name}: its timeout ({}) must be longer than upstream.connect_timeout ({}), so \
             that a call not yet sent is never taken for one that may have run",
            shown(route.timeout),
            shown(upstream.connect_timeout)
        )));
    }
    if let Some(limit) = route.max_execution {
        if route.timeout > limit {
            return Err(ConfigError(format!(
                "{name}: its timeout ({}) is longer than its max_execution ({}), which abandons \
                 the call first: make max_execution at least the timeout",
                shown(route.timeout),
                shown(limit)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
