//! A real PostgreSQL server for the tests: the Debian packages' binaries, a fresh cluster in a
//! temporary folder, a free loopback port and a socket folder of its own, `fsync` off. Run as
//! the `postgres` user when the tests run as root (PostgreSQL refuses root); a server this
//! machine may run on 5432 is never used. Stopped when dropped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::process::{holds_within, wait_until};

/// The newest installed server's binaries (`/usr/lib/postgresql/<version>/bin`).
fn binaries() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL under /usr/lib/postgresql (.ci/test installs it)")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL server binary").1
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// `program` with `args`, as the `postgres` user where the tests run as root.
fn command(program: &Path, args: &[&str]) -> Command {
    if as_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args);
        command
    } else {
        let mut command = Command::new(program);
        command.args(args);
        command
    }
}

pub struct PostgresServer {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
    /// Whether a commit is acknowledged only once its WAL is written (to the system, which
    /// keeps it through a kill of the server): off, a kill may lose what was acknowledged.
    durable: bool,
}

impl PostgresServer {
    /// A fresh cluster in a folder of its own, not started.
    fn init() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pg-test-")
            .tempdir()
            .unwrap();
        if as_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "the cluster's folder given to postgres");
        }
        let data = dir.path().join("data");
        let data_arg = data.to_str().unwrap();
        let output = command(
            &binaries().join("initdb"),
            &["-D", data_arg, "-A", "trust", "-U", "postgres", "--no-sync"],
        )
        .stdout(Stdio::null())
        .output()
        .expect("initdb");
        assert!(
            output.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self {
            child: None,
            port: free_port(),
            dir,
            durable: false,
        }
    }

    pub fn start() -> Self {
        let mut server = Self::init();
        server.run();
        server
    }

    /// A server that keeps every commit it acknowledged through a kill (`synchronous_commit`
    /// on; `fsync` stays off, which only a crash of the machine would tell).
    pub fn start_durable() -> Self {
        let mut server = Self::init();
        server.durable = true;
        server.run();
        server
    }

    /// A server that speaks TLS with `cert` and `key` (PEM files) and refuses connections
    /// over TCP that do not.
    pub fn start_with_tls(cert: &str, key: &str) -> Self {
        let mut server = Self::init();
        let data = server.dir.path().join("data");
        std::fs::copy(cert, data.join("server.crt")).expect("the server's certificate");
        std::fs::copy(key, data.join("server.key")).expect("the server's key");
        let conf = "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n";
        let mut settings = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        settings.push_str(conf);
        std::fs::write(data.join("postgresql.conf"), settings).unwrap();
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\n\
                   hostnossl all all 127.0.0.1/32 reject\n";
        std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
        // PostgreSQL reads a key that only its owner can read.
        let key_file = data.join("server.key");
        std::fs::set_permissions(
            &key_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        if as_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .status()
                .expect("chown");
            assert!(status.success(), "the server's files given to postgres");
        }
        server.run();
        server
    }

    fn run(&mut self) {
        let data = self.dir.path().join("data");
        let port = self.port.to_string();
        let sockets = self.dir.path().to_str().unwrap().to_owned();
        let child = command(
            &binaries().join("postgres"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-p",
                &port,
                "-k",
                &sockets,
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                if self.durable {
                    "synchronous_commit=on"
                } else {
                    "synchronous_commit=off"
                },
                "-c",
                "full_page_writes=off",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(self.dir.path().join("log")).expect("the server's log"))
        // Its own process group: a stop reaches the server behind `runuser` too.
        .process_group(0)
        .spawn()
        .expect("start postgres");
        self.child = Some(child);
        let port = self.port.to_string();
        let ready = binaries().join("pg_isready");
        let accepting = holds_within(Duration::from_secs(30), || {
            Command::new(&ready)
                .args(["-q", "-h", "127.0.0.1", "-p", &port])
                .status()
                .is_ok_and(|status| status.success())
        });
        if !accepting {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            panic!("postgres did not accept connections on {port} within 30 s: {log}");
        }
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server at once, as a crash would (SIGKILL to its process group).
    pub fn kill(&mut self) {
        self.signal("KILL");
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.run();
    }

    fn signal(&mut self, signal: &str) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // The postmaster itself, whose PID it writes first in `postmaster.pid` (behind
        // `runuser` it is not the child), then the child's process group.
        let pid_file = self.dir.path().join("data").join("postmaster.pid");
        let postmaster = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned));
        if let Some(pid) = &postmaster {
            let _ = Command::new("kill").args(["-s", signal, pid]).status();
        }
        let group = format!("-{}", child.id());
        let _ = Command::new("kill")
            .args(["-s", signal, "--", &group])
            .status();
        let _ = child.wait();
        if let Some(pid) = postmaster {
            wait_until("the postmaster gone", Duration::from_secs(30), || {
                !Command::new("kill")
                    .args(["-0", &pid])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success())
            });
        }
        let port = self.port;
        wait_until("postgres stopped", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        });
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // A fast shutdown: the cluster's folder is removed after.
        self.signal("INT");
    }
}
