//! Real `redis-server` processes that speak TLS, with certificates of the tests' own
//! authority ([`super::certificates`]).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::certificates::Certificates;
use super::process::wait_until;
use super::redis_server::free_port;

/// A `redis-server` with a plain port (to see it is up) and a TLS port, stopped when dropped.
pub struct TlsServer {
    child: Child,
    pub port: u16,
    pub tls_port: u16,
    _dir: TempDir,
}

impl TlsServer {
    pub fn start(certificates: &Certificates) -> Self {
        Self::spawn(certificates, false)
    }

    /// A node; a cluster node speaks TLS on its bus too.
    fn spawn(certificates: &Certificates, cluster: bool) -> Self {
        let dir = TempDir::new().unwrap();
        let (port, tls_port) = (free_port(cluster), free_port(false));
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string()])
            .args(["--tls-port", &tls_port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--tls-cert-file", &certificates.path("server.crt")])
            .args(["--tls-key-file", &certificates.path("server.key")])
            .args(["--tls-ca-cert-file", &certificates.path("ca.crt")])
            .args(["--tls-auth-clients", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if cluster {
            command
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"])
                .args(["--tls-cluster", "yes"])
                .arg("--cluster-config-file")
                .arg(dir.path().join("nodes.conf"));
        }
        let child = command
            .spawn()
            .expect("redis-server on PATH (.ci/run installs it)");
        wait_until("redis-server starting", Duration::from_secs(10), || {
            super::redis_server::command(port, "PING").is_ok_and(|r| r.starts_with("+PONG"))
        });
        Self {
            child,
            port,
            tls_port,
            _dir: dir,
        }
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }
}

/// A 3-node cluster over TLS, no replicas, created with `redis-cli --tls`.
pub fn tls_cluster(certificates: &Certificates) -> Vec<TlsServer> {
    let nodes: Vec<TlsServer> = (0..3)
        .map(|_| TlsServer::spawn(certificates, true))
        .collect();
    let status = Command::new("redis-cli")
        .args(["--tls", "--cacert", &certificates.path("ca.crt")])
        .args(["--cluster", "create"])
        .args(
            nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.tls_port)),
        )
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-cli on PATH (.ci/run installs it)");
    assert!(
        status.success(),
        "redis-cli --cluster create over TLS failed"
    );
    for node in &nodes {
        wait_until(
            "the cluster becoming ready",
            Duration::from_secs(20),
            || {
                super::redis_server::command(node.port, "CLUSTER INFO")
                    .is_ok_and(|reply| reply.contains("cluster_state:ok"))
            },
        );
    }
    nodes
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
