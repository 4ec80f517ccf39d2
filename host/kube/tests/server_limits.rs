//! The limits of [`flotilla_kube::server`] on a real loopback server, each against the client
//! it stops: connections beyond the slots, headers that never end, an idle kept-alive
//! connection, a body that stalls, a body over the cap.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::{net::SocketAddr, time::Duration};

use flotilla_kube::server::{Limits, Server};
use http_body_util::Full;
use hyper::{Response, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

/// Small limits; the deadlines are short so that the tests about them are quick.
const LIMITS: Limits = Limits {
    max_connections: 2,
    handshake: Duration::from_secs(60),
    headers: Duration::from_secs(2),
    body: Duration::from_secs(2),
    max_body_bytes: 1024,
    body_budget_bytes: 4096,
};
/// How long a test waits for what the server must do.
const PATIENCE: Duration = Duration::from_secs(20);

/// A server that reads each request's body within `limits` and answers 200 or the refusal.
async fn start(limits: Limits) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::new(limits);
    let task = tokio::spawn({
        let accepting = server.clone();
        async move {
            accepting
                .accept(listener, move |stream| {
                    let server = server.clone();
                    async move {
                        let service = service_fn(|request: hyper::Request<hyper::body::Incoming>| {
                            let server = server.clone();
                            async move {
                                let response = match server.read_body(request.into_body()).await {
                                    Ok((body, _held)) => {
                                        Response::new(Full::new(Bytes::from(body.len().to_string())))
                                    }
                                    Err(refused) => {
                                        let mut response =
                                            Response::new(Full::new(Bytes::from(refused.to_string())));
                                        *response.status_mut() = refused.status();
                                        response
                                    }
                                };
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        });
                        let _ = server
                            .http1()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                })
                .await;
        }
    });
    (addr, task)
}

/// The first line the server sends next, or `None` when it closes without one.
async fn first_line(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = vec![0; 1024];
    let read = tokio::time::timeout(PATIENCE, stream.read(&mut buffer))
        .await
        .expect("the server neither answered nor closed")
        .unwrap_or(0);
    String::from_utf8_lossy(&buffer[..read])
        .lines()
        .next()
        .map(str::to_owned)
}

async fn get(stream: &mut TcpStream) -> Option<String> {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    first_line(stream).await
}

#[tokio::test]
async fn a_body_within_the_cap_is_read() {
    let (addr, _server) = start(LIMITS).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .await
        .unwrap();
    assert_eq!(first_line(&mut stream).await.as_deref(), Some("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused() {
    let (addr, _server) = start(LIMITS).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let body = vec![b'x'; 2048];
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    assert_eq!(
        first_line(&mut stream).await.as_deref(),
        Some("HTTP/1.1 413 Payload Too Large")
    );
}

#[tokio::test]
async fn a_body_that_stalls_is_refused_at_its_deadline() {
    let (addr, _server) = start(LIMITS).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
        .await
        .unwrap();
    assert_eq!(
        first_line(&mut stream).await.as_deref(),
        Some("HTTP/1.1 408 Request Timeout")
    );
}

#[tokio::test]
async fn headers_that_never_end_and_idle_connections_are_closed() {
    let (addr, _server) = start(LIMITS).await;
    let mut dribbling = TcpStream::connect(addr).await.unwrap();
    dribbling
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    assert_eq!(first_line(&mut dribbling).await, None);
    // Kept alive after a request, then silent.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    assert_eq!(get(&mut idle).await.as_deref(), Some("HTTP/1.1 200 OK"));
    assert_eq!(first_line(&mut idle).await, None);
}

#[tokio::test]
async fn connections_beyond_the_slots_are_closed_at_once() {
    let (addr, _server) = start(Limits {
        headers: Duration::from_secs(300),
        ..LIMITS
    })
    .await;
    // Each answered, so each holds a slot (kept alive far longer than this test).
    let mut held = Vec::new();
    for _ in 0..LIMITS.max_connections {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert_eq!(get(&mut stream).await.as_deref(), Some("HTTP/1.1 200 OK"));
        held.push(stream);
    }
    let mut beyond = TcpStream::connect(addr).await.unwrap();
    assert_eq!(first_line(&mut beyond).await, None);
    // A slot given back is taken again.
    drop(held.pop());
    let answered = flotilla_testing::wait::until("a freed slot serves", PATIENCE, || async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(get_or_closed(&mut stream).await)
    })
    .await;
    assert_eq!(answered.unwrap().as_str(), "HTTP/1.1 200 OK");
}

/// [`get`], where a write to a connection the server already closed counts as no answer.
async fn get_or_closed(stream: &mut TcpStream) -> Option<String> {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    first_line(stream).await
}
