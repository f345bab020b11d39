//! A client bound to one server, over real TCP on loopback or over an in-memory pipe.
//!
//! The in-memory pipe carries the same HTTP/1.1 through hyper's client and server, with no
//! socket between them: a test that measures time in leases, deadlines and retentions runs on
//! Tokio's paused clock and takes no real time, and no wake-up comes from outside the runtime
//! that could let the clock jump past one in flight.

use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;

use super::answer::Answer;

#[derive(Clone)]
enum Transport {
    Loopback,
    Memory(Router),
}

/// A client bound to one server.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub http: reqwest::Client,
    transport: Transport,
}

/// The client stopped waiting for its answer.
#[derive(Debug)]
pub struct GaveUp;

impl Client {
    /// A client of the server at `base` (`http://host:port`).
    pub fn new(base: String) -> Self {
        Self {
            base,
            http: reqwest::Client::new(),
            transport: Transport::Loopback,
        }
    }

    /// A client of `app` over an in-memory pipe: every request gets a connection of its own,
    /// served by hyper as `axum::serve` would.
    pub fn in_memory(app: Router) -> Self {
        Self {
            base: "http://in-memory.test".to_owned(),
            http: reqwest::Client::new(),
            transport: Transport::Memory(app),
        }
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        self.try_send(request)
            .await
            .expect("the request reaches the server")
    }

    /// Sends `request`; the client's error if it got no answer (its own body broke off, or
    /// the connection did before the answer's head).
    pub async fn try_send(&self, request: reqwest::RequestBuilder) -> Result<Answer, String> {
        match &self.transport {
            Transport::Loopback => {
                let response = request.send().await.map_err(|e| e.to_string())?;
                Ok(Answer::read(http::Response::from(response)).await)
            }
            Transport::Memory(app) => {
                let request = request.build().expect("a well-formed request");
                over_memory(app.clone(), request).await
            }
        }
    }

    /// POSTs `body` to `path` with exactly these headers.
    pub async fn post_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Answer {
        let mut request = self.http.post(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(body)).await
    }

    /// POSTs JSON text as `session`.
    pub async fn post(&self, path: &str, session: &str, json: &str) -> Answer {
        self.send(self.json_post(path, session, json)).await
    }

    /// POSTs `json` to `path` in `session` as a client that gives up after `patience` and
    /// closes its connection.
    pub async fn post_giving_up(
        &self,
        path: &str,
        session: &str,
        json: &str,
        patience: Duration,
    ) -> Result<Answer, GaveUp> {
        tokio::time::timeout(patience, self.post(path, session, json))
            .await
            .map_err(|_| GaveUp)
    }

    pub async fn get(&self, path: &str, session: Option<&str>) -> Answer {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(session) = session {
            request = request.header("x-session-id", session);
        }
        self.send(request).await
    }

    fn json_post(&self, path: &str, session: &str, json: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .header("x-session-id", session)
            .header("content-type", "application/json")
            .body(json.to_owned())
    }
}

/// Sends `request` to `app` over a fresh in-memory connection.
async fn over_memory(app: Router, mut request: reqwest::Request) -> Result<Answer, String> {
    let (near, far) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        // Ends when the client's half is dropped, as a closed socket ends a connection.
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(far), TowerToHyperService::new(app))
            .await;
    });
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(near))
        .await
        .expect("an in-memory handshake");
    tokio::spawn(connection);
    let body = request
        .body_mut()
        .take()
        .unwrap_or_else(|| reqwest::Body::from(Bytes::new()));
    let target = match request.url().query() {
        Some(query) => format!("{}?{query}", request.url().path()),
        None => request.url().path().to_owned(),
    };
    let mut outgoing = http::Request::builder()
        .method(request.method().clone())
        .uri(target)
        .header(http::header::HOST, "in-memory.test");
    for (name, value) in request.headers() {
        outgoing = outgoing.header(name, value);
    }
    let outgoing = outgoing.body(body).expect("a request");
    let response = sender
        .send_request(outgoing)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Answer::read(response).await)
}
