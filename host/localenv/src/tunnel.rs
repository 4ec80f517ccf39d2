//! The cluster-proxy add-on's reverse tunnel (`plugins/cluster-proxy/tunnel`, a Go module around
//! Rancher's remotedialer): built on first use like the control-plane binary, and started as
//! the server beside a hub or as an agent for a managed cluster.
//!
//! ```text
//!   hub side                                        managed cluster side
//!   unix socket ◀── CONNECT <cluster>:443           agent ──▶ its kube-apiserver only
//!        server (TLS, agents' client certs) ◀──────── wss://<server>/connect
//! ```

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::Child,
    time::{Duration, Instant},
};

use tempfile::TempDir;

use crate::{
    binary,
    error::{Error, Result, io},
    pki::CertAndKey,
    processes::{self, Lifetime},
    scratch,
};

/// Overrides the tunnel binary (skips building): a path to a prebuilt `flotilla-tunnel`.
pub const BINARY_ENV: &str = "FLOTILLA_TUNNEL_BIN";
/// The remotedialer version the Go module pins.
pub const REMOTEDIALER_VERSION: &str = "v0.6.2";
/// The add-on whose agent credentials the server accepts by default.
pub const ADDON: &str = "cluster-proxy";
/// The path agents open their websocket at.
pub const CONNECT_PATH: &str = "/connect";

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The directory holding the tunnel's Go module.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/cluster-proxy/tunnel")
}

/// Returns the path of the tunnel binary, building it first if needed. remotedialer needs a
/// newer Go than the machine's, so this one module builds with [`binary::NEWER_GO`].
pub fn tunnel_binary() -> Result<PathBuf> {
    if let Some(prebuilt) = binary::prebuilt(BINARY_ENV) {
        return prebuilt;
    }
    let source = source_dir();
    let key = binary::source_key(&source, REMOTEDIALER_VERSION, binary::is_go_input)?;
    binary::cached_artifact("tunnel", &key, "flotilla-tunnel", |partial| {
        binary::go_build(
            &source,
            partial,
            &["-s".to_owned(), "-w".to_owned()],
            binary::NEWER_GO,
            &format!("the reverse tunnel (remotedialer {REMOTEDIALER_VERSION})"),
        )
    })
}

/// A running tunnel server; dropping it stops the process.
pub struct TunnelServer {
    child: Child,
    address: SocketAddr,
    socket: PathBuf,
    ca_pem: String,
    dir: TempDir,
}

impl TunnelServer {
    /// Starts a server that accepts agents at `listen` (port 0 picks one) presenting client
    /// certificates signed by `agent_ca_pem` for `addon`, serving TLS with `serving` (signed by
    /// `serving_ca_pem`, which agents are given), and the hub on a unix socket of its own.
    pub fn start(
        listen: Ipv4Addr,
        agent_ca_pem: &str,
        serving: &CertAndKey,
        serving_ca_pem: &str,
        addon: &str,
    ) -> Result<Self> {
        let dir = scratch::create("tunnel-server")?;
        let port = TcpListener::bind((listen, 0))
            .and_then(|l| l.local_addr())
            .map_err(io("find a free port for the tunnel server"))?
            .port();
        let address = SocketAddr::from((listen, port));
        let running = spawn_server(dir.path(), address, agent_ca_pem, serving, addon, Lifetime::Tied)?;
        Ok(Self {
            child: running.child,
            address,
            socket: running.socket,
            ca_pem: serving_ca_pem.to_owned(),
            dir,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The URL agents connect to.
    pub fn agent_url(&self) -> String {
        format!("wss://{}{CONNECT_PATH}", self.address)
    }

    /// The CA agents verify the server with.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The unix socket the hub opens tunnels through.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        processes::log_tail(&self.dir.path().join("server.log"), lines)
    }
}

impl Drop for TunnelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tunnel server started by [`start_detached_server`], which outlives this process.
pub struct DetachedServer {
    /// Its process id.
    pub pid: u32,
    /// The tunnel binary it runs.
    pub binary: PathBuf,
    /// Its log.
    pub log: PathBuf,
    /// The unix socket the hub opens tunnels through.
    pub socket: PathBuf,
}

/// Starts a tunnel server that outlives this process (for `flotilla up`, which records it),
/// with its files in `dir`, accepting agents at `listen`; see [`TunnelServer::start`].
pub fn start_detached_server(
    dir: &Path,
    listen: SocketAddr,
    agent_ca_pem: &str,
    serving: &CertAndKey,
    addon: &str,
) -> Result<DetachedServer> {
    fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let running = spawn_server(dir, listen, agent_ca_pem, serving, addon, Lifetime::Detached)?;
    Ok(DetachedServer {
        pid: running.child.id(),
        binary: tunnel_binary()?,
        log: running.log,
        socket: running.socket,
    })
}

/// A server process just started, and where it listens for the hub.
struct Spawned {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

/// Writes the server's credentials into `dir`, starts it and waits until it serves agents at
/// `address` and the hub on its socket.
fn spawn_server(
    dir: &Path,
    address: SocketAddr,
    agent_ca_pem: &str,
    serving: &CertAndKey,
    addon: &str,
    lifetime: Lifetime,
) -> Result<Spawned> {
    let binary = tunnel_binary()?;
    let write = |name: &str, text: &str| -> Result<PathBuf> {
        let path = dir.join(name);
        fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
        Ok(path)
    };
    let ca = write("agent-ca.crt", agent_ca_pem)?;
    let cert = write("tls.crt", &serving.cert_pem)?;
    let key = write("tls.key", &serving.key_pem)?;
    let socket = dir.join("tunnel.sock");
    // A socket left by an earlier server would pass for this one's.
    let _ = fs::remove_file(&socket);
    let path = |p: &Path| p.display().to_string();
    let args = vec![
        "server".to_owned(),
        format!("--agent-listen={address}"),
        format!("--tls-cert={}", path(&cert)),
        format!("--tls-key={}", path(&key)),
        format!("--agent-ca={}", path(&ca)),
        format!("--addon-name={addon}"),
        format!("--proxy-socket={}", path(&socket)),
    ];
    let log = dir.join("server.log");
    let mut child = processes::spawn_logged(&binary, &args, "tunnel-server", &log, lifetime, |_| {})?;
    // A server on every address is reached on loopback too.
    let probe = match address.ip() {
        ip if ip.is_unspecified() => SocketAddr::from((Ipv4Addr::LOCALHOST, address.port())),
        _ => address,
    };
    let started = Instant::now();
    while !socket.exists() || std::net::TcpStream::connect(probe).is_err() {
        let failed = |what: String| Error::Start {
            component: "tunnel-server",
            message: format!("{what}; log tail:\n{}", processes::log_tail(&log, 25)),
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(failed(format!("exited with {status}")));
        }
        if started.elapsed() > READY_TIMEOUT {
            let _ = child.kill();
            return Err(failed(format!("not serving after {READY_TIMEOUT:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Spawned { child, socket, log })
}

/// A running tunnel agent; dropping it stops the process (and so drops its tunnel).
pub struct TunnelAgent {
    child: Child,
    dir: TempDir,
}

impl TunnelAgent {
    /// Starts an agent that connects to `server_url` (verifying it with `server_ca_pem`) with
    /// the client credential `credential`, and dials only `target` for the hub.
    pub fn start(
        server_url: &str,
        server_ca_pem: &str,
        credential: &CertAndKey,
        target: &str,
    ) -> Result<Self> {
        Self::start_verifying(server_url, server_ca_pem, credential, target, None)
    }

    /// [`TunnelAgent::start`], verifying the server's certificate for `server_name` instead of
    /// the URL's host (a server reached at an address its certificate does not name).
    pub fn start_verifying(
        server_url: &str,
        server_ca_pem: &str,
        credential: &CertAndKey,
        target: &str,
        server_name: Option<&str>,
    ) -> Result<Self> {
        let binary = tunnel_binary()?;
        let dir = scratch::create("tunnel-agent")?;
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = dir.path().join(name);
            fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
            Ok(path)
        };
        let ca = write("hub-ca.crt", server_ca_pem)?;
        let cert = write("tls.crt", &credential.cert_pem)?;
        let key = write("tls.key", &credential.key_pem)?;
        let path = |p: &Path| p.display().to_string();
        let args = vec![
            "agent".to_owned(),
            format!("--hub-url={server_url}"),
            format!("--hub-ca={}", path(&ca)),
            format!("--cert={}", path(&cert)),
            format!("--key={}", path(&key)),
            format!("--target={target}"),
        ];
        let args: Vec<String> = args
            .into_iter()
            .chain(server_name.map(|name| format!("--hub-server-name={name}")))
            .collect();
        let log = dir.path().join("agent.log");
        let child = processes::spawn_logged(&binary, &args, "tunnel-agent", &log, Lifetime::Tied, |_| {})?;
        Ok(Self { child, dir })
    }

    /// The last `lines` lines of the agent's log.
    pub fn log_tail(&self, lines: usize) -> String {
        processes::log_tail(&self.dir.path().join("agent.log"), lines)
    }
}

impl Drop for TunnelAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
