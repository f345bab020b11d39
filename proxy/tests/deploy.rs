//! What `proxy/deploy/` holds, checked as far as this machine can: the systemd unit verifies
//! with `systemd-analyze` (where it is installed), and the file the unit and the container run
//! starts the proxy, whose probes answer and whose SIGTERM drains. The container image itself
//! is not built here: no container engine runs on this machine.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use http::StatusCode;
use support::{answer, client, Proxy, Upstream};

fn deploy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(name)
}

#[test]
fn the_systemd_unit_verifies() {
    let Ok(version) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    };
    assert!(version.status.success());
    // The unit as installed, its binary where this build put it.
    let unit = std::fs::read_to_string(deploy("idempotency-proxy.service")).unwrap();
    let unit = unit.replace(
        "/usr/local/bin/idempotency-proxy",
        env!("CARGO_BIN_EXE_idempotency-proxy"),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idempotency-proxy.service");
    std::fs::write(&path, unit).unwrap();
    let verified = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{said}");
    assert!(said.trim().is_empty(), "every line is a warning: {said}");
}

#[tokio::test]
async fn the_deployed_file_starts_a_proxy_whose_probes_answer_and_whose_sigterm_drains() {
    let upstream = Upstream::tools(0);
    let file = deploy("proxy.toml");
    let mut proxy = Proxy::start(&[
        "--config",
        file.to_str().unwrap(),
        // The file's fixed ports, and its upstream, moved to this test's own.
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream.url(),
    ]);
    let metrics = proxy.metrics.clone().expect("the file serves the probes");
    for probe in ["/healthz", "/readyz"] {
        let probed = answer(client().get(format!("{metrics}{probe}"))).await;
        assert_eq!(probed.status, StatusCode::OK, "{probe}");
    }
    let sent = support::post(&proxy.url, "/tools/send_email", Some("s"), "{}").await;
    assert_eq!(sent.status, StatusCode::OK);
    proxy.terminate();
    let (code, stderr) = proxy.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn the_deployed_file_serves_traffic_on_every_interface_and_metrics_on_loopback_only() {
    let text = std::fs::read_to_string(deploy("proxy.toml")).unwrap();
    assert!(text.contains("\nlisten = \"0.0.0.0:3000\""), "{text}");
    // The metrics listener serves readiness's reasons and, with a token, the admin API.
    assert!(
        text.contains("\nmetrics_listen = \"127.0.0.1:9090\""),
        "{text}"
    );
    let dockerfile = std::fs::read_to_string(deploy("Dockerfile")).unwrap();
    assert!(dockerfile.contains("EXPOSE 3000\n"), "{dockerfile}");
    assert!(dockerfile.contains("--features redis-tls"), "{dockerfile}");
    let unit = std::fs::read_to_string(deploy("idempotency-proxy.service")).unwrap();
    assert!(
        !unit.contains("metrics-listen"),
        "the unit runs the file's: {unit}"
    );
}
