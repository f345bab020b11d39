//! Real processes for the tests (examples, the proxy, Python upstreams, Redis): their output
//! read as it comes, the line that says they listen, a signal, and the one wait that only
//! polling can see, a condition outside this process.
#![allow(dead_code)] // each test binary uses the parts it needs

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Waits until `ready` holds, asking every 20 ms; fails the test with `what` past `limit`.
pub fn wait_until(what: &str, limit: Duration, ready: impl FnMut() -> bool) {
    assert!(holds_within(limit, ready), "{what}: not within {limit:?}");
}

/// Whether `ready` came to hold within `limit`, asked every 20 ms.
pub fn holds_within(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines a child writes to `pipe`, as they come; reading them also keeps the pipe from
/// filling up and stalling the child.
pub fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Waits for the line that says `child` accepts connections (`listening on ...`): the rest of
/// it, with the lines before it; panics with its stderr if it never comes.
pub fn listening(
    child: &mut Child,
    lines: &mpsc::Receiver<String>,
    what: &str,
) -> (String, Vec<String>) {
    let mut before = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => match line.strip_prefix("listening on ") {
                Some(rest) => return (rest.trim().to_owned(), before),
                None => before.push(line),
            },
            Err(_) => {
                let _ = child.kill();
                let mut text = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut text);
                }
                panic!("{what} did not start: {text}");
            }
        }
    }
}

/// Sends SIGTERM, as an orchestrator or a process manager does to stop a process.
pub fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success(), "SIGTERM was delivered");
}

/// How `child` exited, if it did within `limit`.
pub fn exited_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let mut status = None;
    holds_within(limit, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status
}

/// Asks `attempt` every 100 ms until it gives a value, for what a real process or server does
/// in its own time; fails the test with `what` past `limit`.
pub async fn eventually<T, F>(what: &str, limit: Duration, mut attempt: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
