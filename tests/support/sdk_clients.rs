//! The official MCP SDK clients the interop tests drive, each through a script written for the
//! tests (`tests/interop/python_client.py`, `tests/interop/ts_client.mjs`) that prints one
//! line of JSON with what it saw.
//!
//! The SDKs live outside the repository, where `bash .ci/run` installs them:
//! - the Python SDK (`mcp` 2.3.0) in a virtual environment, whose interpreter `MCP_PYTHON`
//!   names (default `~/.cache/tower-idempotency/venv/bin/python`);
//! - the TypeScript SDK (`@modelcontextprotocol/client` 2.4.0) in the folder `MCP_NODE_MODULES`
//!   names (default `~/.cache/tower-idempotency/node`), run by the machine's `node` (20 or
//!   later).
//!
//! Where one is missing the tests that need it say so and pass, except under `CI=true`, where
//! they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The Python SDK's version the client script is written for.
pub const PYTHON_SDK: &str = "2.3.0";
/// The TypeScript SDK's version the client script is written for.
pub const TYPESCRIPT_SDK: &str = "2.4.0";

/// A bearer token, as a client that authenticates sends it: the scope of a 2026-07-28 call,
/// which has no session.
pub const ALICE: &str = "Authorization=Bearer alice-token";
pub const BOB: &str = "Authorization=Bearer bob-token";

/// How a client is asked to speak, and the protocol it must then speak.
#[derive(Debug, Clone, Copy)]
pub struct Speaking {
    pub args: &'static [&'static str],
    pub version: &'static str,
}

/// The Python `Client` at its defaults, as Alice: 2026-07-28 against a server that serves it.
pub const STATELESS: Speaking = Speaking {
    args: &["--header", ALICE],
    version: "2026-07-28",
};

/// The Python `Client` forced to the handshake era (`mode="legacy"`): the session names the
/// caller.
pub const HANDSHAKE: Speaking = Speaking {
    args: &["--mode", "legacy"],
    version: "2025-11-25",
};

impl Speaking {
    /// `report`, once it says the client spoke the protocol it had to.
    pub fn spoke(&self, report: Value) -> Value {
        assert_eq!(report["protocol_version"], self.version, "{report}");
        report
    }
}

/// An SDK client, ready to run.
#[derive(Debug, Clone)]
pub enum Sdk {
    Python(PathBuf),
    TypeScript(PathBuf),
}

fn cache() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/tower-idempotency")
}

/// Fails under CI, else says what is missing and skips.
fn missing(what: String) -> Option<Sdk> {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{what}");
    eprintln!("skipped: {what}");
    None
}

/// The Python SDK's client, where it is installed.
pub fn python() -> Option<Sdk> {
    let python = std::env::var_os("MCP_PYTHON")
        .map_or_else(|| cache().join("venv/bin/python"), PathBuf::from);
    let check = format!(
        "import importlib.metadata as m, mcp.client.streamable_http; assert m.version('mcp') == '{PYTHON_SDK}'"
    );
    let found = Command::new(&python)
        .args(["-c", &check])
        .output()
        .is_ok_and(|output| output.status.success());
    if found {
        return Some(Sdk::Python(python));
    }
    missing(format!(
        "the official Python MCP SDK {PYTHON_SDK} is not installed at {} (bash .ci/run \
         installs it)",
        python.display()
    ))
}

/// The TypeScript SDK's client, where it and Node 20 or later are installed.
pub fn typescript() -> Option<Sdk> {
    let modules =
        std::env::var_os("MCP_NODE_MODULES").map_or_else(|| cache().join("node"), PathBuf::from);
    let package = modules.join("node_modules/@modelcontextprotocol/client/package.json");
    let version = std::fs::read_to_string(&package)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|package| package["version"].as_str().map(str::to_owned));
    let node = Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned());
    let major = node.as_deref().and_then(|v| {
        v.trim()
            .trim_start_matches('v')
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
    });
    if version.as_deref() == Some(TYPESCRIPT_SDK) && major.is_some_and(|major| major >= 20) {
        return Some(Sdk::TypeScript(modules));
    }
    missing(format!(
        "the official TypeScript MCP SDK {TYPESCRIPT_SDK} under {} with Node 20 or later is \
         not installed (found {version:?}, node {node:?}; bash .ci/run installs it)",
        modules.display()
    ))
}

/// Runs `scenario` of this SDK's client against the MCP endpoint `url`, with `args` added to
/// its command line; what it reported.
pub fn run(sdk: &Sdk, url: &str, scenario: &str, args: &[&str]) -> Value {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = if scripts.join("tests/interop").is_dir() {
        scripts.join("tests/interop")
    } else {
        scripts.join("../tests/interop")
    };
    let mut command = match sdk {
        Sdk::Python(python) => {
            let mut command = Command::new(python);
            command.arg(scripts.join("python_client.py"));
            command
        }
        Sdk::TypeScript(modules) => {
            let mut command = Command::new("node");
            command
                .arg(scripts.join("ts_client.mjs"))
                .env("MCP_NODE_MODULES", modules);
            command
        }
    };
    let output = command
        .args(["--url", url, "--scenario", scenario])
        .args(args)
        // Loopback traffic never goes through a proxy the environment may name.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .output()
        .expect("the SDK client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{scenario} could not run:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{scenario}: {e}: {stdout}\n{stderr}"))
}
