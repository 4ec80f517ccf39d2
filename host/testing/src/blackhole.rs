//! A TCP proxy in front of an apiserver that can black-hole its traffic, as a network
//! partition does: connections stay open and nothing moves, so clients see hangs and timeouts
//! rather than the prompt refusals of a stopped process.
//!
//! ```text
//!   client ──https://127.0.0.1:P──▶ Blackhole ──TCP──▶ apiserver 127.0.0.1:A
//!                                    blackhole(): every connection, old and new, goes silent
//!                                    restore():   new connections forward again
//! ```
//!
//! TLS passes through untouched, so the apiserver's serving certificate (which names
//! 127.0.0.1) still verifies for a kubeconfig pointed at [`Blackhole::url`].

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
};

use flotilla_localenv::{Error, Result};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinHandle, JoinSet},
};

/// Sockets of black-holed connections, kept open (never read, written or closed) until the
/// proxy is dropped.
type Held = Arc<Mutex<Vec<TcpStream>>>;

/// A running proxy; dropping it closes every connection.
pub struct Blackhole {
    addr: SocketAddr,
    holed: watch::Sender<bool>,
    held: Held,
    accept: JoinHandle<()>,
}

impl Blackhole {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| Error::State(format!("bind the black-hole proxy: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::State(format!("read the black-hole proxy's address: {e}")))?;
        let (holed, watching) = watch::channel(false);
        let held = Held::default();
        let accept = tokio::spawn(accept_loop(listener, upstream, watching, held.clone()));
        Ok(Self {
            addr,
            holed,
            held,
            accept,
        })
    }

    /// `https://127.0.0.1:<port>`, for a kubeconfig's `server`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops every existing connection moving bytes and accepts new ones without ever
    /// answering; nothing is closed or refused.
    pub fn blackhole(&self) {
        self.holed.send_replace(true);
    }

    /// Forwards new connections again; connections black-holed meanwhile stay dead but open.
    pub fn restore(&self) {
        self.holed.send_replace(false);
    }

    /// How many black-holed connections are held open.
    pub fn held(&self) -> usize {
        self.held.lock().map(|held| held.len()).unwrap_or_default()
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut held) = self.held.lock() {
            held.clear();
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, holed: watch::Receiver<bool>, held: Held) {
    // Owned here, so aborting the loop ends every connection task with it.
    let mut connections = JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        connections.spawn(forward(client, upstream, holed.clone(), held.clone()));
        while connections.try_join_next().is_some() {}
    }
}

/// Copies bytes both ways until either side closes or the proxy black-holes, and then parks
/// both sockets.
async fn forward(mut client: TcpStream, upstream: SocketAddr, mut holed: watch::Receiver<bool>, held: Held) {
    if *holed.borrow_and_update() {
        hold(&held, [client]);
        return;
    }
    let mut server = tokio::select! {
        connected = TcpStream::connect(upstream) => match connected {
            // The upstream is down: the client sees its connection closed, as it would directly.
            Err(_) => return,
            Ok(server) => server,
        },
        _ = holed.wait_for(|h| *h) => {
            hold(&held, [client]);
            return;
        }
    };
    let partitioned = tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
        _ = holed.wait_for(|h| *h) => true,
    };
    if partitioned {
        hold(&held, [client, server]);
    }
}

fn hold(held: &Held, sockets: impl IntoIterator<Item = TcpStream>) {
    if let Ok(mut held) = held.lock() {
        held.extend(sockets);
    }
}
