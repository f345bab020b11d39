//! An example server (`tool_gateway`, `mcp_server`) as a child process, the way a user runs it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};

use super::process::{exited_within, lines, listening, terminate};
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
    /// What the process writes to stderr, when it was started to keep it: the lines not yet
    /// read, and those read.
    stderr: Option<Mutex<(mpsc::Receiver<String>, String)>>,
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
    let stderr = child
        .stderr
        .take()
        .map(|pipe| Mutex::new((lines(pipe), String::new())));
    let stdout = lines(child.stdout.take().expect("stdout piped"));
    let (base, _) = listening(&mut child, &stdout, name);
    Gateway {
        child,
        client: Client::new(base),
        stderr,
    }
}

impl Gateway {
    /// What the process has written to stderr so far (empty unless it was kept).
    pub fn stderr(&self) -> String {
        let Some(kept) = &self.stderr else {
            return String::new();
        };
        let mut kept = kept.lock().unwrap();
        let (unread, read) = &mut *kept;
        for line in unread.try_iter() {
            read.push_str(&line);
            read.push('\n');
        }
        read.clone()
    }

    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM, as an orchestrator or a process manager does to stop a process.
    pub fn terminate(&self) {
        terminate(&self.child);
    }

    /// Waits up to `limit` for the process to exit; whether it did.
    pub fn exited_within(&mut self, limit: std::time::Duration) -> bool {
        exited_within(&mut self.child, limit).is_some()
    }
}

/// Like [`start`], with values that are not static strings.
pub fn start_owned(env: &[(&'static str, String)]) -> Gateway {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(&pairs)
}
