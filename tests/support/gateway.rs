//! The `tool_gateway` example as a child process, the way a user runs it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::Client;

/// The example binary that `cargo test` builds beside this test.
fn example_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().unwrap().parent().unwrap();
    profile.join("examples").join("tool_gateway")
}

pub struct Gateway {
    child: Child,
    pub client: Client,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(env: &[(&str, &str)]) -> Gateway {
    let mut child = Command::new(example_binary())
        .env("ADDR", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the tool_gateway example is built by cargo test");
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
    }
}

impl Gateway {
    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Like [`start`], with values that are not static strings.
pub fn start_owned(env: &[(&'static str, String)]) -> Gateway {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(&pairs)
}
