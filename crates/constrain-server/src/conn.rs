//! # Connections: the accept loop, its cap, and the read timeouts
//!
//! The server accepts connections itself (hyper's HTTP/1 connection under
//! the axum router) so that a client cannot hold the server by holding
//! sockets:
//!
//! * **A cap on connections** ([`crate::ServerConfig::max_connections`],
//!   `--max-connections`): past it, a new connection is answered
//!   `503 Service Unavailable` with `Retry-After` and closed, without being
//!   read as a request. At most [`REFUSING`] such answers are in flight;
//!   past that a connection is closed unanswered.
//! * **A header read timeout** ([`crate::ServerConfig::read_timeout`],
//!   `--read-timeout-s`): a request head that has not arrived in full within
//!   it is answered `408 Request Timeout` and the connection closed. An
//!   idle keep-alive connection (no byte of a next request) is closed
//!   silently after the same time.
//! * The **body** read timeout is the handler's (see `server.rs`): the body
//!   must arrive within the same time, counted from the end of the head;
//!   past it, 408.
//!
//! Malformed heads (garbage bytes, a head over hyper's size limit) are
//! answered by hyper (400, 431).

use crate::error::ApiError;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Refusals (503, connection cap) written at once at most; past them a
/// connection over the cap is closed unanswered.
pub const REFUSING: usize = 64;

/// How long a refusal, or the shutdown of a finished connection, may take.
const LINGER: Duration = Duration::from_secs(1);

/// What the accept loop needs.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections open at once (see [`crate::ServerConfig::max_connections`]).
    pub max_connections: usize,
    /// Time a request's head, and then its body, may take to arrive (see
    /// [`crate::ServerConfig::read_timeout`]).
    pub read_timeout: Duration,
}

/// Accepts connections on `listener` and serves `router` on each, under
/// `limits`, until the process ends.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of file descriptors, a connection reset before it was
            // accepted...: wait a moment and go on accepting.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        match open.clone().try_acquire_owned() {
            Ok(permit) => {
                let router = router.clone();
                tokio::spawn(async move {
                    connection(stream, router, limits.read_timeout).await;
                    drop(permit);
                });
            }
            Err(_) => {
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream, limits.max_connections).await;
                        drop(permit);
                    });
                }
            }
        }
    }
}

/// An error as raw HTTP/1.1 bytes, `Connection: close` (for answers
/// written outside hyper).
pub fn raw_response(e: &ApiError) -> Vec<u8> {
    let body = e.body().to_string();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        e.status.as_u16(),
        e.status.canonical_reason().unwrap_or(""),
        body.len()
    );
    if let Some(s) = e.retry_after {
        head.push_str(&format!("retry-after: {s}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Writes `answer`, closes the write side, and reads what the client sends
/// for a moment (so the close is a FIN after the client's bytes, not a
/// reset that could discard the answer before the client reads it).
async fn answer_and_close(stream: &mut TcpStream, answer: &[u8]) {
    let _ = tokio::time::timeout(LINGER, async {
        if stream.write_all(answer).await.is_err() {
            return;
        }
        let _ = stream.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut left = 1 << 20;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left -= n.min(left),
            }
        }
    })
    .await;
}

async fn refuse(mut stream: TcpStream, max: usize) {
    answer_and_close(
        &mut stream,
        &raw_response(&ApiError::too_many_connections(max)),
    )
    .await;
}

/// The 408 for a head that did not arrive in time.
fn head_timeout(timeout: Duration) -> ApiError {
    let mut e = ApiError::body_timeout(timeout);
    e.message = format!(
        "the request head did not arrive within the server's read timeout of {} s (--read-timeout-s)",
        timeout.as_secs_f64()
    );
    e
}

/// One connection: hyper's HTTP/1 over the router, with the head timeout.
async fn connection(stream: TcpStream, router: Router, read_timeout: Duration) {
    let served = Arc::new(AtomicUsize::new(0));
    let service = Service {
        router,
        served: served.clone(),
    };
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let done = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)).await;
    let parts = conn.into_parts();
    let mut stream = parts.io.into_inner();
    match done {
        // A head that began, or the first one, timed out: 408. An idle
        // keep-alive connection that times out is just closed.
        Err(e)
            if e.is_timeout()
                && (served.load(Ordering::SeqCst) == 0 || !parts.read_buf.is_empty()) =>
        {
            answer_and_close(&mut stream, &raw_response(&head_timeout(read_timeout))).await;
        }
        Ok(()) => {
            let _ = tokio::time::timeout(LINGER, stream.shutdown()).await;
        }
        Err(_) => {}
    }
}

/// The router as a hyper service (its future boxed: `Unpin`, so that the
/// connection can be polled without shutting its socket, see
/// [`connection`]).
#[derive(Clone)]
struct Service {
    router: Router,
    served: Arc<AtomicUsize>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Service {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        self.served.fetch_add(1, Ordering::SeqCst);
        let mut router = self.router.clone();
        Box::pin(async move {
            std::future::poll_fn(|cx| {
                tower_service::Service::<axum::extract::Request>::poll_ready(&mut router, cx)
            })
            .await?;
            tower_service::Service::call(&mut router, req.map(axum::body::Body::new)).await
        })
    }
}
