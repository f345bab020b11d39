//! A TCP relay in front of a server that breaks the first connection to send a given message:
//! before passing it on, or after, with the server's answer to it never passed back. What a
//! network that fails at the worst moment does to a client.
#![allow(dead_code)] // each test binary uses the parts it needs

use std::sync::atomic::{AtomicBool, Ordering};
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

pub struct Relay {
    pub port: u16,
    armed: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
}

impl Relay {
    /// Relays loopback connections to `server_port`; once [armed](Relay::arm), it breaks the
    /// first that sends `marker`.
    pub async fn start(server_port: u16, marker: &'static [u8], at: Cut) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let armed = Arc::new(AtomicBool::new(false));
        let once = Arc::clone(&cut);
        let set = Arc::clone(&armed);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)).await else {
                    continue;
                };
                let (once, set) = (Arc::clone(&once), Arc::clone(&set));
                tokio::spawn(relay(client, server, marker, at, set, once));
            }
        });
        Self { port, armed, cut }
    }

    /// From now on, the next connection to send the marker is broken.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Whether it has broken a connection yet.
    pub fn has_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    marker: &[u8],
    at: Cut,
    armed: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
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
        let marked = chunk.windows(marker.len()).any(|window| window == marker);
        if marked && armed.load(Ordering::SeqCst) && !cut.swap(true, Ordering::SeqCst) {
            muted.store(true, Ordering::SeqCst);
            if at == Cut::After {
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
