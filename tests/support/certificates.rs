//! A certificate authority of the tests' own, a server certificate for 127.0.0.1 and a client
//! certificate that it signed, made with the `openssl` tool, for servers that speak TLS (Redis, an https upstream).
#![allow(dead_code)] // each test binary uses the parts it needs

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use tempfile::TempDir;

/// A certificate authority and a server certificate for 127.0.0.1 that it signed.
pub struct Certificates {
    dir: TempDir,
}

impl Certificates {
    /// A new authority, trusted by nothing until a client is given it.
    pub fn make() -> Self {
        let dir = TempDir::new().unwrap();
        let run = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl on PATH (.ci/run installs it)");
            assert!(status.success(), "openssl {args:?}");
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=test authority",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        std::fs::write(dir.path().join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ]);
        // A client's certificate, for servers that ask for one (an X.509 v3 one, as rustls
        // requires: its extension makes it so).
        std::fs::write(
            dir.path().join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=test client",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-extfile",
            "client.ext",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "client.crt",
        ]);
        Self { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// The authority, trusted by this test process as a system certificate would be: the
/// client's root store reads `SSL_CERT_FILE`. Set once, before any connection is made.
pub fn certificates() -> &'static Certificates {
    static CERTIFICATES: OnceLock<Certificates> = OnceLock::new();
    CERTIFICATES.get_or_init(|| {
        let certificates = Certificates::make();
        std::env::set_var("SSL_CERT_FILE", certificates.path("ca.crt"));
        certificates
    })
}
