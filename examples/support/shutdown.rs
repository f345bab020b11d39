//! The shutdown of an example server: on SIGTERM (what orchestrators and process managers
//! send) as on Ctrl-C, stop accepting, then let the detached executions finish and record.

use std::time::Duration;

/// Resolves at the first SIGTERM or Ctrl-C.
pub async fn signal() {
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminated = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminated = std::future::pending::<()>();
    tokio::select! {
        () = interrupted => {}
        () = terminated => {}
    }
}

/// How long the detached executions may take once the server stops accepting:
/// `SHUTDOWN_GRACE_MS` (default 25000, under the usual 30 s grace period of orchestrators).
pub fn grace() -> Duration {
    let millis = std::env::var("SHUTDOWN_GRACE_MS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(25_000);
    Duration::from_millis(millis)
}
