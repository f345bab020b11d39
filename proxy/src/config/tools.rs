//! The MCP tools the configuration names: each one's mode, times and arguments left out of
//! its key, from `[[tools]]` entries and `--pass-tool` flags.

use std::time::Duration;

use toml::Spanned;

use super::file::{ToolMode, ToolTable};
use super::ConfigError;

/// One tool's settings, on every MCP route.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    /// What the server declares where `None` (`readOnlyHint: true` passes).
    pub mode: Option<ToolMode>,
    pub deadline: Option<Duration>,
    pub retention: Option<Duration>,
    pub ignore_arguments: Vec<String>,
    /// This tool's retry budget, where its entry sets one of the budget's keys: those keys
    /// over the defaults' budget.
    pub retry_budget: Option<tower_idempotency::RetryBudget>,
}

/// The tools of the file's entries, then of the flags (`--pass-tool NAME`), which override a
/// file's mode for the same tool. A tool named twice in the file is refused.
pub(super) fn tools(
    tables: Vec<Spanned<ToolTable>>,
    defaults: tower_idempotency::RetryBudget,
    passed: &[String],
    where_: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<Vec<Tool>, ConfigError> {
    let mut tools: Vec<Tool> = Vec::new();
    for table in tables {
        let span = table.span();
        let table = table.into_inner();
        let Some(name) = table.name.filter(|name| !name.is_empty()) else {
            return Err(ConfigError(format!(
                "{}: a [[tools]] entry needs a `name`, like name = \"send_email\"",
                where_(span)
            )));
        };
        if tools.iter().any(|tool| tool.name == name) {
            return Err(ConfigError(format!(
                "{}: the tool \"{name}\" is named by two [[tools]] entries",
                where_(span)
            )));
        }
        tools.push(Tool {
            name,
            mode: table.mode,
            deadline: table.deadline.map(|d| d.0),
            retention: table.retention.map(|d| d.0),
            ignore_arguments: table.ignore_arguments.into_iter().map(|p| p.0).collect(),
            retry_budget: (table.retry_backoff.is_some()
                || table.max_failures.is_some()
                || table.failure_cooldown.is_some())
            .then(|| {
                super::route::retry_budget(
                    defaults,
                    table.retry_backoff,
                    table.max_failures,
                    table.failure_cooldown,
                )
            }),
        });
    }
    for name in passed {
        if name.is_empty() {
            return Err(ConfigError("--pass-tool: name a tool".to_owned()));
        }
        match tools.iter_mut().find(|tool| &tool.name == name) {
            Some(tool) => tool.mode = Some(ToolMode::Pass),
            None => tools.push(Tool {
                name: name.clone(),
                mode: Some(ToolMode::Pass),
                deadline: None,
                retention: None,
                ignore_arguments: Vec::new(),
                retry_budget: None,
            }),
        }
    }
    Ok(tools)
}
