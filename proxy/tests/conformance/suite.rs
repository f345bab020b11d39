//! The official MCP conformance suite (`@modelcontextprotocol/conformance`), run by Node 22 or
//! later against a server's URL, its verdict read per scenario.
//!
//! It lives outside the repository, where `bash .ci/test` installs it: the package under the
//! folder `MCP_CONFORMANCE` names (default `~/.cache/tower-idempotency/conformance`), run by
//! the `node` that `CONFORMANCE_NODE` names (default the tests' venv's, from the Node.js wheel,
//! else the machine's). Where either is missing the test says so and passes, except under
//! `CI=true`, where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The suite's version the test is written for: its newest release, whose `--requirements`
/// knows `2025-11-25` and `2026-07-28` (the `latest` tag's 0.1 line has neither).
pub const VERSION: &str = "0.2.0-alpha.12";

/// The oldest Node the suite runs on.
const NODE_MAJOR: u32 = 22;

/// The suite, ready to run.
pub struct Suite {
    node: PathBuf,
    cli: PathBuf,
}

/// How a scenario counts in a requirement set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Required by the revision: its score.
    Required,
    /// Run but not scored: pending, or added after the revision's release.
    Unscored,
    /// An extension's (`tasks-*`): run and reported only.
    Extension,
}

/// One scenario's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub passed: bool,
    pub standing: Standing,
    /// The first failing check's message, where it failed.
    pub why: Option<String>,
}

/// One run of a requirement set against one URL.
pub struct Run {
    pub verdicts: BTreeMap<String, Verdict>,
    pub took: Duration,
}

fn cache() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/tower-idempotency")
}

/// The major version of the `node` at `path`, where it runs.
fn node_major(path: &Path) -> Option<u32> {
    let output = Command::new(path).arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&output.stdout);
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// The suite, where it and a Node to run it are installed.
pub fn find() -> Option<Suite> {
    let folder = std::env::var_os("MCP_CONFORMANCE")
        .map_or_else(|| cache().join("conformance"), PathBuf::from);
    let package = folder.join("node_modules/@modelcontextprotocol/conformance");
    let version = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|package| package["version"].as_str().map(str::to_owned));
    let node = match std::env::var_os("CONFORMANCE_NODE") {
        Some(node) => PathBuf::from(node),
        None => [cache().join("venv/bin/node"), PathBuf::from("node")]
            .into_iter()
            .find(|node| node_major(node).is_some_and(|major| major >= NODE_MAJOR))
            .unwrap_or_else(|| PathBuf::from("node")),
    };
    let major = node_major(&node);
    if version.as_deref() == Some(VERSION) && major.is_some_and(|major| major >= NODE_MAJOR) {
        return Some(Suite {
            node,
            cli: package.join("dist/index.js"),
        });
    }
    let missing = format!(
        "the MCP conformance suite {VERSION} under {} with Node {NODE_MAJOR} or later is not \
         installed (found {version:?}, {} at major {major:?}; bash .ci/test installs both)",
        folder.display(),
        node.display(),
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{missing}");
    eprintln!("skipped: {missing}");
    None
}

impl Suite {
    /// Runs the server scenarios `requirements` (a revision, `2025-11-25`) requires against
    /// the MCP endpoint `url`.
    pub fn run(&self, url: &str, requirements: &str) -> Run {
        let results = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let output = Command::new(&self.node)
            .arg(&self.cli)
            .args(["server", "--url", url, "--requirements", requirements])
            .arg("--output-dir")
            .arg(results.path())
            .current_dir(results.path())
            // Loopback traffic never goes through a proxy the environment may name.
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .output()
            .expect("the conformance suite runs");
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut verdicts = summary(&stdout);
        assert!(
            !verdicts.is_empty(),
            "the suite gave no summary against {url}:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for (scenario, verdict) in &mut verdicts {
            if !verdict.passed {
                verdict.why = first_failure(results.path(), scenario);
            }
        }
        Run { verdicts, took }
    }
}

/// The verdicts of the suite's summary: `✓ name: 2 passed, 0 failed` per scenario, then the
/// ones not scored, `  ✗ name (extension)`.
fn summary(stdout: &str) -> BTreeMap<String, Verdict> {
    let mut verdicts = BTreeMap::new();
    let Some((_, summary)) = stdout.split_once("=== SUMMARY ===") else {
        return verdicts;
    };
    for line in summary.lines() {
        let (passed, rest) = match line.trim_start().split_once(' ') {
            Some(("✓", rest)) => (true, rest),
            Some(("✗", rest)) => (false, rest),
            _ => continue,
        };
        if let Some((name, _)) = rest.split_once(": ") {
            let verdict = Verdict {
                passed,
                standing: Standing::Required,
                why: None,
            };
            verdicts.insert(name.to_owned(), verdict);
        } else if let Some((name, kind)) = rest.split_once(" (") {
            let standing = if kind.starts_with("extension") {
                Standing::Extension
            } else {
                Standing::Unscored
            };
            if let Some(verdict) = verdicts.get_mut(name) {
                verdict.standing = standing;
            }
        }
    }
    verdicts
}

/// The message of the first failing check of `scenario`, from the results the suite saved
/// under `folder` (`server-<scenario>-<time>/checks.json`).
fn first_failure(folder: &Path, scenario: &str) -> Option<String> {
    let prefix = format!("server-{scenario}-");
    let run = std::fs::read_dir(folder).ok()?.flatten().find(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name.strip_prefix(&prefix)
            .is_some_and(|time| time.starts_with(|c: char| c.is_ascii_digit()))
    })?;
    let checks = std::fs::read_to_string(run.path().join("checks.json")).ok()?;
    let checks: Vec<Value> = serde_json::from_str(&checks).ok()?;
    let failed = checks.iter().find(|check| check["status"] == "FAILURE")?;
    let message = failed["errorMessage"]
        .as_str()
        .or(failed["description"].as_str())
        .unwrap_or_default();
    Some(format!(
        "{}: {message}",
        failed["id"].as_str().unwrap_or("?")
    ))
}
