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
pub fn start_owned(env: &[(&str, String)]) -> Gateway {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(&pairs)
}

/// Two `tool_gateway` instances on the store that `store` (an environment variable and its
/// value) names, with a lease of 1 s: a long report started on one instance, whose process is
/// then killed, is left alone by the other while the owner lives, and run by it exactly once
/// after the lease lapses.
pub async fn assert_a_killed_owner_frees_the_intent_once(store: (&'static str, String)) {
    use axum::http::StatusCode;
    let env = |deadline: &str| {
        vec![
            store.clone(),
            ("LEASE_MS", "1000".to_owned()),
            ("DEADLINE_MS", deadline.to_owned()),
        ]
    };
    let mut owner = start_owned(&env("200"));
    let other = start_owned(&env("4000"));
    let report = r#"{"topic":"q3","seconds":30}"#;
    let started = owner
        .client
        .post("/tools/generate_report", "s", report)
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED);
    // While the owner lives and renews its lease, the other instance does not run it.
    let waiting = other
        .client
        .post("/tools/generate_report", "s", report)
        .await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED);
    let ran = || async {
        let stats = other.client.get("/stats", None).await.json();
        stats["generate_report"].as_u64()
    };
    assert_eq!(ran().await, Some(0));
    owner.kill();
    let limit = std::time::Duration::from_secs(10);
    let runs = super::process::eventually("the intent freed", limit, || async {
        other
            .client
            .post("/tools/generate_report", "s", report)
            .await;
        ran().await.filter(|&runs| runs > 0)
    })
    .await;
    assert_eq!(runs, 1, "the other instance ran it exactly once");
}
