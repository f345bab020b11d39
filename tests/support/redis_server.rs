//! Real `redis-server` processes for the tests: one node, or a 3-node cluster, each on free
//! loopback ports with a fresh directory, stopped when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempfile::TempDir;

use super::process::wait_until;

/// A port nothing listens on now (and, for cluster nodes, whose bus port is free too).
pub fn free_port(with_bus: bool) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !with_bus {
            return port;
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Sends one inline command and returns the raw reply.
pub fn command(port: u16, line: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(format!("{line}\r\n").as_bytes())?;
    let mut reply = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let n = stream.read(&mut buffer)?;
        reply.extend_from_slice(&buffer[..n]);
        if n == 0 || complete_reply(&reply) {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Whether a RESP reply is whole: simple replies end at the first CRLF, bulk ones after
/// their declared length.
fn complete_reply(reply: &[u8]) -> bool {
    let Some(end) = reply.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    if reply[0] != b'$' {
        return true;
    }
    let len: i64 = std::str::from_utf8(&reply[1..end])
        .unwrap()
        .parse()
        .unwrap();
    len < 0 || reply.len() >= end + 2 + len as usize + 2
}

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
    cluster: bool,
}

impl RedisServer {
    /// A single node on a free port.
    pub fn start() -> Self {
        Self::spawn(free_port(false), TempDir::new().unwrap(), false)
    }

    fn spawn(port: u16, dir: TempDir, cluster: bool) -> Self {
        let mut server = Self {
            child: None,
            port,
            dir,
            cluster,
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let dir: &Path = self.dir.path();
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"])
                .arg("--cluster-config-file")
                .arg(dir.join("nodes.conf"));
        }
        let child = cmd
            .spawn()
            .expect("redis-server on PATH (.ci/run installs it)");
        self.child = Some(child);
        let port = self.port;
        wait_until(
            &format!("redis-server starting on {port}"),
            Duration::from_secs(10),
            || command(port, "PING").is_ok_and(|r| r.starts_with("+PONG")),
        );
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (its data is gone: no persistence).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// How many times `INFO commandstats` says EVALSHA ran.
    pub fn evalsha_calls(&self) -> u64 {
        let info = command(self.port, "INFO commandstats").unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().unwrap())
    }

    /// Watches the commands clients send this server (`MONITOR`).
    pub fn monitor(&self) -> Monitor {
        let mut child = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "monitor"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli on PATH");
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let monitor = Monitor {
            child,
            lines,
            port: self.port,
            marks: 0,
        };
        // Wait until MONITOR is attached: its first line is OK, then commands follow.
        monitor.wait_for("OK");
        monitor
    }
}

/// The commands clients sent, as `MONITOR` reports them.
pub struct Monitor {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    port: u16,
    marks: u32,
}

impl Monitor {
    fn wait_for(&self, needle: &str) {
        wait_until(
            &format!("MONITOR reporting {needle:?}"),
            Duration::from_secs(10),
            || {
                self.lines
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|l| l.contains(needle))
            },
        );
    }

    /// The commands clients sent since the last call, without those run inside scripts.
    pub fn client_commands(&mut self) -> Vec<String> {
        self.marks += 1;
        let mark = format!("mark-{}", self.marks);
        command(self.port, &format!("ECHO {mark}")).unwrap();
        self.wait_for(&mark);
        let mut lines = self.lines.lock().unwrap();
        let seen: Vec<String> = lines.drain(..).collect();
        seen.into_iter()
            .filter(|l| l.contains(" [") && !l.contains(" lua]"))
            .filter(|l| {
                !l.contains("\"ECHO\"") && !l.contains("\"PING\"") && !l.contains("\"INFO\"")
            })
            .collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A 3-node Redis Cluster, no replicas.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Three fresh nodes joined into a cluster. A port found free can be taken by another
    /// process before a node binds it (its bus port too), so the whole is tried again, on new
    /// ports, a few times before it fails with what `redis-cli` said.
    pub fn start() -> Self {
        let mut said = String::new();
        for _ in 0..3 {
            match Self::try_start() {
                Ok(cluster) => return cluster,
                Err(output) => said = output,
            }
        }
        panic!("redis-cli --cluster create failed three times; last:\n{said}");
    }

    fn try_start() -> Result<Self, String> {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::spawn(free_port(true), TempDir::new().unwrap(), true))
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli on PATH (.ci/run installs it)");
        if !output.status.success() {
            let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
            said.push_str(&String::from_utf8_lossy(&output.stderr));
            return Err(said);
        }
        for node in &nodes {
            wait_until(
                "the cluster becoming ready",
                Duration::from_secs(20),
                || command(node.port, "CLUSTER INFO").is_ok_and(|r| r.contains("cluster_state:ok")),
            );
        }
        Ok(Self { nodes })
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}
