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
        // The server's certificate names the address it is reached at; the client's says what
        // it is for. Either extension makes it X.509 v3, which rustls requires.
        let sign = |name: &str, subject: &str, extension: &str| {
            let file = |suffix: &str| format!("{name}.{suffix}");
            std::fs::write(dir.path().join(file("ext")), extension).unwrap();
            let (key, csr, ext, crt) = (file("key"), file("csr"), file("ext"), file("crt"));
            run(&[
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", &key, "-out",
                &csr,
            ]);
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-extfile",
                &ext,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &crt,
            ]);
        };
        sign("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\n");
        sign("client", "/CN=test client", "extendedKeyUsage=clientAuth\n");
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
