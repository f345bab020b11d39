//! Real processes for the proxy's tests: the proxy binary, Python upstreams, Redis.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

// The crate's own test support, shared: processes, answers, Redis, PostgreSQL, the MCP SDK
// clients.
#[path = "../../../tests/support/answer.rs"]
pub mod answer;
#[path = "../../../tests/support/certificates.rs"]
pub mod certificates;
#[path = "../../../tests/support/postgres_server.rs"]
pub mod postgres_server;
#[path = "../../../tests/support/process.rs"]
pub mod process;
#[path = "../../../tests/support/redis_server.rs"]
pub mod redis_server;
#[path = "../../../tests/support/sdk_clients.rs"]
pub mod sdk_clients;
#[path = "../../../tests/support/soak.rs"]
pub mod soak;

pub use answer::Answer;
use process::{exited_within, lines, listening};

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    redis_server::free_port(false)
}

/// The Python interpreter: the tests' virtual environment's where it has the MCP SDK, else
/// the system's (the HTTP upstream needs only the standard library).
pub fn python() -> PathBuf {
    let venv = std::env::var_os("MCP_PYTHON").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/tower-idempotency/venv/bin/python")
        },
        PathBuf::from,
    );
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The interpreter where `check` runs (an import), or `None` where it fails outside CI, which
/// the test says and passes; under `CI=true` a missing package fails the test.
pub fn python_with(check: &str, missing: &str) -> Option<PathBuf> {
    let python = python();
    let found = Command::new(&python)
        .args(["-c", check])
        .output()
        .is_ok_and(|output| output.status.success());
    if found {
        return Some(python);
    }
    let missing = format!(
        "{missing} is not installed at {} (bash .ci/run installs it into the tests' venv)",
        python.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{missing}");
    eprintln!("skipped: {missing}");
    None
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/upstreams")
        .join(name)
}

/// A Python upstream process, killed when dropped.
pub struct Upstream {
    child: Child,
    pub port: u16,
}

impl Upstream {
    /// The standard-library tool server, on `port` (0: a free one).
    pub fn tools(port: u16) -> Self {
        Self::start("tool_server.py", &[&port.to_string()])
    }

    pub fn start(script_name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(python())
            .arg(script(script_name))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the Python upstream");
        let stdout = lines(child.stdout.take().expect("stdout piped"));
        let (port, _) = listening(&mut child, &stdout, script_name);
        // Read on, so that a traceback it logs never fills the pipe and stalls it.
        drop(lines(child.stderr.take().expect("stderr piped")));
        Self {
            child,
            port: port.parse().expect("a port"),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An `idempotency-proxy` process, killed when dropped.
pub struct Proxy {
    child: Child,
    pub url: String,
    pub metrics: Option<String>,
    stderr: Option<mpsc::Receiver<String>>,
}

fn proxy_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_idempotency-proxy"));
    command.args(args).env("RUST_LOG", "warn");
    command
}

impl Proxy {
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// A proxy in front of `upstream` on a free port, with `extra` flags.
    pub fn in_front_of(upstream: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--upstream", upstream, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Self::start(&args)
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = proxy_command(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start idempotency-proxy");
        let stdout = lines(child.stdout.take().expect("stdout piped"));
        let (url, before) = listening(&mut child, &stdout, "the proxy");
        let metrics = before
            .iter()
            .find_map(|line| line.strip_prefix("metrics on ").map(str::to_owned));
        let stderr = child.stderr.take().map(lines);
        Self {
            child,
            url,
            metrics,
            stderr,
        }
    }

    /// The first line of the proxy's stderr from now on that `wanted` accepts, within `limit`
    /// (the lines before it are read and dropped); `None` if none came.
    pub fn log_line(&self, limit: Duration, wanted: impl Fn(&str) -> bool) -> Option<String> {
        let lines = self.stderr.as_ref()?;
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        process::terminate(&self.child);
    }

    /// Waits for the process to exit, for at most `limit`; its exit code and stderr.
    pub fn wait_exit(&mut self, limit: Duration) -> (Option<i32>, String) {
        let status = exited_within(&mut self.child, limit)
            .unwrap_or_else(|| panic!("the proxy did not exit within {limit:?}"));
        let text = self
            .stderr
            .take()
            .map(|lines| lines.iter().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        (status.code(), text)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A configuration file holding `text`, removed when dropped.
pub fn config_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// A proxy in front of `upstream` on a free port, with the configuration file `text`; the
/// file lives as long as the pair.
pub fn proxy_with_config(upstream: &str, text: &str) -> (Proxy, tempfile::NamedTempFile) {
    let config = config_file(text);
    let path = config.path().to_str().unwrap().to_owned();
    (Proxy::in_front_of(upstream, &["--config", &path]), config)
}

/// Runs the proxy with `args` to its exit, expecting it not to start: its exit code and
/// stderr.
pub fn refused(args: &[&str]) -> (Option<i32>, String) {
    let mut child = proxy_command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idempotency-proxy");
    let Some(status) = exited_within(&mut child, Duration::from_secs(10)) else {
        let _ = child.kill();
        panic!("the proxy started with {args:?}");
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status.code(), stderr)
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub async fn answer(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("an answer");
    Answer::read(http::Response::from(response)).await
}

/// POSTs `json` to `base` + `path` in `session` (none: no session header).
pub async fn post(base: &str, path: &str, session: Option<&str>, json: &str) -> Answer {
    let mut request = client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(json.to_owned());
    if let Some(session) = session {
        request = request.header("x-session-id", session);
    }
    answer(request).await
}

/// The upstream's execution counts.
pub async fn stats(upstream: &str) -> serde_json::Value {
    answer(client().get(format!("{upstream}/stats")))
        .await
        .json()
}
