//! A TCP relay in front of a server that breaks a connection when it sends a given message:
//! before passing it on, or after, with the server's answer to it never passed back. What a
//! network that fails at the worst moment does to a client. Each trigger, once armed, breaks
//! the next connection to send its marker, then waits to be armed again.
#![allow(dead_code)] // each test binary uses the parts it needs

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Where the relay breaks the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The message never reaches the server.
    Before,
    /// The server gets the message and answers, and the client never hears the answer.
    After,
}

/// A marker, where to cut at it, and whether the next connection to send it is cut.
struct Trigger {
    marker: &'static [u8],
    at: Cut,
    armed: AtomicBool,
}

pub struct Relay {
    pub port: u16,
    triggers: Arc<Vec<Trigger>>,
    cuts: Arc<AtomicU64>,
}

impl Relay {
    /// Relays loopback connections to `server_port`; once [armed](Relay::arm), it breaks the
    /// first that sends `marker`.
    pub async fn start(server_port: u16, marker: &'static [u8], at: Cut) -> Self {
        Self::cutting(server_port, &[(marker, at)]).await
    }

    /// Relays loopback connections to `server_port`; once trigger `n` of `triggers` is
    /// [armed](Relay::arm_nth), it breaks the next connection that sends its marker.
    pub async fn cutting(server_port: u16, triggers: &[(&'static [u8], Cut)]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let triggers: Arc<Vec<Trigger>> = Arc::new(
            triggers
                .iter()
                .map(|&(marker, at)| Trigger {
                    marker,
                    at,
                    armed: AtomicBool::new(false),
                })
                .collect(),
        );
        let cuts = Arc::new(AtomicU64::new(0));
        let (shared, counted) = (Arc::clone(&triggers), Arc::clone(&cuts));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)).await else {
                    continue;
                };
                let (triggers, cuts) = (Arc::clone(&shared), Arc::clone(&counted));
                tokio::spawn(relay(client, server, triggers, cuts));
            }
        });
        Self {
            port,
            triggers,
            cuts,
        }
    }

    /// From now on, the next connection to send the marker is broken.
    pub fn arm(&self) {
        self.arm_nth(0);
    }

    /// From now on, the next connection to send trigger `n`'s marker is broken.
    pub fn arm_nth(&self, n: usize) {
        self.triggers[n].armed.store(true, Ordering::SeqCst);
    }

    /// Leaves every trigger unarmed.
    pub fn disarm(&self) {
        for trigger in self.triggers.iter() {
            trigger.armed.store(false, Ordering::SeqCst);
        }
    }

    /// Whether it has broken a connection yet.
    pub fn has_cut(&self) -> bool {
        self.cuts() > 0
    }

    /// How many connections it has broken.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::SeqCst)
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    triggers: Arc<Vec<Trigger>>,
    cuts: Arc<AtomicU64>,
) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let muted = Arc::new(AtomicBool::new(false));
    let deaf = Arc::clone(&muted);
    // Told when the server answers what it was sent once muted.
    let answered = Arc::new(Notify::new());
    let heard = Arc::clone(&answered);
    let answers = tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        while let Ok(read @ 1..) = from_server.read(&mut buffer).await {
            if deaf.load(Ordering::SeqCst) {
                heard.notify_one();
                return;
            }
            if to_client.write_all(&buffer[..read]).await.is_err() {
                return;
            }
        }
    });
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read @ 1..) = from_client.read(&mut buffer).await {
        let chunk = &buffer[..read];
        let fired = triggers.iter().find(|trigger| {
            let marked = chunk
                .windows(trigger.marker.len())
                .any(|window| window == trigger.marker);
            marked && trigger.armed.swap(false, Ordering::SeqCst)
        });
        if let Some(trigger) = fired {
            cuts.fetch_add(1, Ordering::SeqCst);
            muted.store(true, Ordering::SeqCst);
            if trigger.at == Cut::After {
                let _ = to_server.write_all(chunk).await;
                // The server has acted on it once it answers: then the connection goes.
                let _ = tokio::time::timeout(Duration::from_secs(10), answered.notified()).await;
            }
            break;
        }
        if to_server.write_all(chunk).await.is_err() {
            break;
        }
    }
    // Both ends close: the server's and the client's sockets are dropped here.
    answers.abort();
}
