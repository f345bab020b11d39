//! An example server (`tool_gateway`, `mcp_server`) as a child process, the way a user runs it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use super::Client;

/// The example binary that `cargo test` builds beside this test.
pub fn example_binary(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().unwrap().parent().unwrap();
    profile.join("examples").join(name)
}

pub struct Gateway {
    child: Child,
    pub client: Client,
    /// What the process wrote to stderr, when it was started to keep it.
    stderr: Option<Arc<Mutex<String>>>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the `tool_gateway` example.
pub fn start(env: &[(&str, &str)]) -> Gateway {
    start_example("tool_gateway", env)
}

/// Starts the example `name` on a free loopback port; its client's base is the address the
/// example prints.
pub fn start_example(name: &str, env: &[(&str, &str)]) -> Gateway {
    launch(name, env, false)
}

/// Like [`start_example`], keeping what the process writes to stderr (read by a thread of its
/// own, so that the process never blocks on a full pipe).
pub fn start_example_keeping_stderr(name: &str, env: &[(&str, &str)]) -> Gateway {
    launch(name, env, true)
}

fn launch(name: &str, env: &[(&str, &str)], keep_stderr: bool) -> Gateway {
    let mut command = Command::new(example_binary(name));
    command
        .env("ADDR", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(Stdio::piped());
    if keep_stderr {
        command.stderr(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("the {name} example is built by cargo test: {e}"));
    let stderr = child.stderr.take().map(|pipe| {
        let kept = Arc::new(Mutex::new(String::new()));
        let writer = Arc::clone(&kept);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut kept = writer.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        kept
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Gateway {
        child,
        client: Client::new(base),
        stderr,
    }
}

impl Gateway {
    /// What the process has written to stderr so far (empty unless it was kept).
    pub fn stderr(&self) -> String {
        self.stderr
            .as_ref()
            .map(|kept| kept.lock().unwrap().clone())
            .unwrap_or_default()
    }

    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM, as an orchestrator or a process manager does to stop a process.
    pub fn terminate(&self) {
        // The shell's own `kill`: no separate binary needed.
        let status = Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", self.child.id())])
            .status()
            .expect("sh runs");
        assert!(status.success(), "SIGTERM was delivered");
    }

    /// Waits up to `limit` for the process to exit; whether it did.
    pub fn exited_within(&mut self, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while std::time::Instant::now() < until {
            if self.child.try_wait().ok().flatten().is_some() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }
}

/// Like [`start`], with values that are not static strings.
pub fn start_owned(env: &[(&'static str, String)]) -> Gateway {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(&pairs)
}
