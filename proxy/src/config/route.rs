//! One route of the configuration, from its table and what it inherits.

use std::time::Duration;

use tower_idempotency::RetryBudget;

use super::file::{Mode, RouteTable};
use super::{values, KeySource, Route};

/// A retry budget from its three keys over `base`: each key the table sets replaces the
/// base's.
pub(super) fn retry_budget(
    base: RetryBudget,
    backoff: Option<values::Dur>,
    max_failures: Option<u32>,
    cooldown: Option<values::Dur>,
) -> RetryBudget {
    let mut budget = base;
    if let Some(backoff) = backoff {
        budget = budget.backoff(backoff.0);
    }
    if let Some(max_failures) = max_failures {
        budget = budget.max_failures(max_failures);
    }
    if let Some(cooldown) = cooldown {
        budget = budget.cooldown(cooldown.0);
    }
    budget
}

/// One route from its table; `inherit` gives what the route does not say.
pub(super) fn route(
    table: RouteTable,
    prefix: &str,
    default_timeout: Duration,
    inherit: Option<&Route>,
) -> Result<Route, String> {
    // A route is listed to be protected unless it says otherwise; `[defaults]`'s mode is
    // that of the paths no route names.
    let mode = table.mode.unwrap_or(Mode::Protect);
    // An MCP route keys by the tool's arguments: the defaults' key and body fields are not
    // its own.
    let inherit_body_rules = inherit.filter(|_| mode != Mode::Mcp);
    let key = match (table.key_header, table.key_field) {
        (Some(_), Some(_)) => {
            return Err(
                "a route reads its key from `key_header` or from `key_field`, not both".to_owned(),
            )
        }
        (Some(header), None) => Some(KeySource::Header(header.0)),
        (None, Some(field)) => Some(KeySource::Field(field.0)),
        (None, None) => inherit_body_rules.and_then(|r| r.key.clone()),
    };
    // A pass route keys nothing: it takes no `observe` from `[defaults]`, and may not say it.
    if table.observe == Some(true) && mode == Mode::Pass {
        return Err(
            "a route with mode = \"pass\" keys nothing: `observe` applies to the protect and mcp \
             modes"
                .to_owned(),
        );
    }
    let observe = mode != Mode::Pass
        && table
            .observe
            .unwrap_or_else(|| inherit.is_some_and(|r| r.observe));
    if mode == Mode::Mcp && key.is_some() {
        return Err(
            "an MCP route keys calls by their tool and arguments: `key_header` and `key_field` \
             do not apply to mode = \"mcp\""
                .to_owned(),
        );
    }
    // Arguments are checked against the schema of an MCP tool: an MCP route's alone.
    if table.validate_arguments == Some(true) && mode != Mode::Mcp {
        return Err(
            "`validate_arguments` checks MCP tool calls against their tools' inputSchema: it \
             applies to mode = \"mcp\""
                .to_owned(),
        );
    }
    let validate_arguments = mode == Mode::Mcp
        && table
            .validate_arguments
            .unwrap_or_else(|| inherit.is_some_and(|r| r.validate_arguments));
    let ignore_fields = if table.ignore_fields.is_empty() {
        inherit_body_rules
            .map(|r| r.ignore_fields.clone())
            .unwrap_or_default()
    } else {
        table.ignore_fields.into_iter().map(|p| p.0).collect()
    };
    // The route's own time, else the one it inherits.
    let own_or = |own: Option<values::Dur>, inherited: fn(&Route) -> Option<Duration>| {
        own.map(|d| d.0).or(inherit.and_then(inherited))
    };
    let budget_base = inherit.map_or_else(RetryBudget::default, |r| r.retry_budget);
    let retry_budget = retry_budget(
        budget_base,
        table.retry_backoff,
        table.max_failures,
        table.failure_cooldown,
    );
    Ok(Route {
        prefix: prefix.to_owned(),
        retry_budget,
        mode,
        deadline: own_or(table.deadline, |r| r.deadline),
        retention: own_or(table.retention, |r| r.retention),
        max_execution: own_or(table.max_execution, |r| r.max_execution),
        timeout: table
            .timeout
            .map(|d| d.0)
            .or(inherit.map(|r| r.timeout))
            .unwrap_or(default_timeout),
        ignore_fields,
        key,
        observe,
        validate_arguments,
    })
}
