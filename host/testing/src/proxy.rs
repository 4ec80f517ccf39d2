//! A real forward proxy on loopback for tests of the klusterlet behind a proxy: tinyproxy (HTTP
//! CONNECT), optionally behind stunnel for an `https://` proxy whose certificate a test CA
//! signs.
//!
//! ```text
//!   client ──http://127.0.0.1:P──▶ tinyproxy ──CONNECT host:port──▶ hub
//!   client ──https://127.0.0.1:S─▶ stunnel (TLS, test CA) ──▶ tinyproxy ──▶ hub
//! ```
//!
//! The binaries are Debian's (`tinyproxy`, `stunnel4`): taken from PATH when installed, else
//! fetched once into the cache directory with `apt-get download` (after `apt-get update` when
//! the package lists are empty) and unpacked with `dpkg-deb -x`, so `cargo test` works on a
//! fresh Debian machine without installing anything system-wide. An unpacked binary is run
//! once (`-v`/`-version`) before it is used, so a missing shared library fails here, by name,
//! rather than as a proxy that never answers.
//!
//! tinyproxy logs every request line at `LogLevel Connect`, so a test proves its traffic went
//! through the proxy by finding `CONNECT <hub host:port>` in [`Proxy::log`].

use std::{
    fs::{self, File},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use flotilla_localenv::{
    Error, Result,
    binary::{cache_dir, cached_artifact},
    pki::CertificateAuthority,
};

/// The Debian packages unpacked when the tools are not on PATH: the proxy (its binary is in
/// `tinyproxy-bin` since Debian 12), the TLS front and the one library stunnel4 needs that a
/// minimal Debian lacks.
const PACKAGES: &[&str] = &["tinyproxy-bin", "stunnel4", "libwrap0"];

/// Where the tools come from.
#[derive(Clone, Debug)]
pub struct Tools {
    /// The tinyproxy binary.
    pub tinyproxy: PathBuf,
    /// The stunnel binary.
    pub stunnel: PathBuf,
    /// Extra library directory for unpacked binaries (`LD_LIBRARY_PATH`), if any.
    pub library_path: Option<PathBuf>,
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Finds tinyproxy and stunnel on PATH, or unpacks Debian's packages into the cache.
pub fn tools() -> Result<Tools> {
    if let (Some(tinyproxy), Some(stunnel)) = (on_path(&["tinyproxy"]), on_path(&["stunnel4", "stunnel"])) {
        return Ok(Tools {
            tinyproxy,
            stunnel,
            library_path: None,
        });
    }
    // The key names the package set; a changed set unpacks anew beside the old one.
    let marker = cached_artifact(
        "proxy-tools",
        "tinyproxy-stunnel4-libwrap0",
        "unpacked",
        |partial| {
            let dir = partial
                .parent()
                .ok_or_else(|| Error::Binary("cache directory has no parent".into()))?;
            unpack(dir)?;
            fs::write(partial, PACKAGES.join("\n")).map_err(|e| Error::Binary(format!("write marker: {e}")))
        },
    )?;
    let root = marker
        .parent()
        .map(|dir| dir.join("root"))
        .ok_or_else(|| Error::Binary("cache directory has no parent".into()))?;
    let tools = Tools {
        tinyproxy: root.join("usr/bin/tinyproxy"),
        stunnel: root.join("usr/bin/stunnel4"),
        library_path: multiarch_lib_dir(&root.join("usr/lib")),
    };
    check_runs(&tools, &tools.tinyproxy, "-v")?;
    check_runs(&tools, &tools.stunnel, "-version")?;
    Ok(tools)
}

/// The multiarch library directory (`usr/lib/<triplet>`) of an unpacked root, whatever the
/// machine's architecture.
fn multiarch_lib_dir(lib: &Path) -> Option<PathBuf> {
    fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.is_dir() && path.to_string_lossy().ends_with("-linux-gnu"))
}

/// `apt-get download` the packages into `dir/debs` and unpack them into `dir/root`.
fn unpack(dir: &Path) -> Result<()> {
    let debs = dir.join("debs");
    let root = dir.join("root");
    for d in [&debs, &root] {
        fs::create_dir_all(d).map_err(|e| Error::Binary(format!("create {}: {e}", d.display())))?;
    }
    eprintln!(
        "flotilla-testing: fetching {} with apt-get into {}",
        PACKAGES.join(", "),
        cache_dir().display()
    );
    let download = || {
        Command::new("apt-get")
            .arg("download")
            .args(PACKAGES)
            .current_dir(&debs)
            .stdin(Stdio::null())
            .output()
    };
    let run_error = |e: std::io::Error| {
        Error::Binary(format!(
            "run apt-get (tests behind a proxy need Debian's tinyproxy and stunnel4: install them, \
             or run on Debian with apt reachable): {e}"
        ))
    };
    let mut output = download().map_err(run_error)?;
    if !output.status.success() {
        // A fresh machine may have empty package lists.
        let _ = Command::new("apt-get")
            .arg("update")
            .stdin(Stdio::null())
            .output()
            .map_err(run_error)?;
        output = download().map_err(run_error)?;
    }
    if !output.status.success() {
        return Err(Error::Binary(format!(
            "apt-get download {} failed: {}",
            PACKAGES.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let entries = fs::read_dir(&debs).map_err(|e| Error::Binary(format!("read {}: {e}", debs.display())))?;
    for entry in entries.flatten() {
        let status = Command::new("dpkg-deb")
            .arg("-x")
            .arg(entry.path())
            .arg(&root)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::Binary(format!("run dpkg-deb: {e}")))?;
        if !status.success() {
            return Err(Error::Binary(format!(
                "dpkg-deb -x {} failed with {status}",
                entry.path().display()
            )));
        }
    }
    Ok(())
}

fn command(tools: &Tools, binary: &Path) -> Command {
    let mut command = Command::new(binary);
    if let Some(dir) = &tools.library_path {
        command.env("LD_LIBRARY_PATH", dir);
    }
    command
}

/// Runs `binary flag` once; an error names what is missing (usually a shared library).
fn check_runs(tools: &Tools, binary: &Path, flag: &str) -> Result<()> {
    let output = command(tools, binary)
        .arg(flag)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Binary(format!("run {}: {e}", binary.display())))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("error while loading shared libraries") {
        return Err(Error::Binary(format!(
            "{} cannot run: {}",
            binary.display(),
            stderr.trim()
        )));
    }
    Ok(())
}

/// What kind of proxy to start.
#[derive(Debug, Default)]
pub struct ProxyBuilder {
    allowed_connect_ports: Option<Vec<u16>>,
    https: bool,
    listen: Option<Ipv4Addr>,
}

impl ProxyBuilder {
    /// Allows CONNECT only to these ports (tinyproxy's `ConnectPort`); any other is answered
    /// `403 Access violation`. Default: every port.
    pub fn allow_connect_ports(mut self, ports: &[u16]) -> Self {
        self.allowed_connect_ports = Some(ports.to_vec());
        self
    }

    /// Listens on `address` instead of 127.0.0.1 (the host end of a [`crate::netns::Netns`]);
    /// an https front still listens on 127.0.0.1.
    pub fn listen(mut self, address: Ipv4Addr) -> Self {
        self.listen = Some(address);
        self
    }

    /// Puts stunnel with a certificate of a fresh test CA in front: an `https://` proxy.
    pub fn https(mut self) -> Self {
        self.https = true;
        self
    }

    /// Starts the proxy and waits until it accepts connections.
    pub async fn start(self) -> Result<Proxy> {
        let tools = tokio::task::spawn_blocking(tools)
            .await
            .map_err(|e| Error::Binary(format!("proxy tools task: {e}")))??;
        let temp = tempfile::Builder::new()
            .prefix("flotilla-proxy-")
            .tempdir()
            .map_err(|e| Error::Binary(format!("create proxy directory: {e}")))?;
        let dir = temp.path().to_path_buf();
        let port = free_port()?;
        let listen = self.listen.unwrap_or(Ipv4Addr::LOCALHOST);
        let log = dir.join("tinyproxy.log");
        let mut config = format!(
            "Port {port}\nListen {listen}\nTimeout 600\nLogFile \"{}\"\nLogLevel Connect\nMaxClients 200\n",
            log.display()
        );
        if let Some(ports) = &self.allowed_connect_ports {
            for p in ports {
                config.push_str(&format!("ConnectPort {p}\n"));
            }
        }
        let config_path = dir.join("tinyproxy.conf");
        write(&config_path, &config)?;
        let mut children = vec![spawn(
            &tools,
            &tools.tinyproxy,
            &["-d", "-c"],
            &config_path,
            &dir,
            "tinyproxy",
        )?];
        wait_listening(SocketAddr::from((listen, port)), &mut children, &log).await?;

        let (url, ca_pem) = if self.https {
            let ca = CertificateAuthority::new("flotilla-test-proxy-ca")?;
            let serving = ca.issue_serving("flotilla-test-proxy", &[])?;
            let tls_port = free_port()?;
            let (cert, key) = (dir.join("proxy.crt"), dir.join("proxy.key"));
            write(&cert, &serving.cert_pem)?;
            write(&key, &serving.key_pem)?;
            let stunnel_log = dir.join("stunnel.log");
            let stunnel_config = dir.join("stunnel.conf");
            write(
                &stunnel_config,
                &format!(
                    "foreground = yes\npid =\noutput = {}\ndebug = 5\n[proxy]\naccept = 127.0.0.1:{tls_port}\n\
                     connect = {listen}:{port}\ncert = {}\nkey = {}\n",
                    stunnel_log.display(),
                    cert.display(),
                    key.display()
                ),
            )?;
            children.push(spawn(
                &tools,
                &tools.stunnel,
                &[],
                &stunnel_config,
                &dir,
                "stunnel",
            )?);
            wait_listening(
                SocketAddr::from((Ipv4Addr::LOCALHOST, tls_port)),
                &mut children,
                &stunnel_log,
            )
            .await?;
            (
                format!("https://127.0.0.1:{tls_port}"),
                Some(ca.cert_pem().to_owned()),
            )
        } else {
            (format!("http://{listen}:{port}"), None)
        };
        Ok(Proxy {
            url,
            ca_pem,
            log,
            children,
            _temp: temp,
        })
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| Error::Binary(format!("write {}: {e}", path.display())))
}

fn spawn(
    tools: &Tools,
    binary: &Path,
    args: &[&str],
    config: &Path,
    dir: &Path,
    name: &str,
) -> Result<Child> {
    let out = File::create(dir.join(format!("{name}.out")))
        .map_err(|e| Error::Binary(format!("create {name} output: {e}")))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::Binary(format!("clone {name} output: {e}")))?;
    command(tools, binary)
        .args(args)
        .arg(config)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| Error::Start {
            component: "proxy",
            message: format!("spawn {}: {e}", binary.display()),
        })
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::Binary(format!("find a free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::Binary(format!("read free port: {e}")))
}

async fn wait_listening(addr: SocketAddr, children: &mut [Child], log: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        for child in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::Start {
                    component: "proxy",
                    message: format!(
                        "exited with {status}; log:\n{}",
                        fs::read_to_string(log).unwrap_or_default()
                    ),
                });
            }
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(Error::NotReady {
        what: format!("proxy on {addr}"),
        message: "timed out".into(),
    })
}

/// A running proxy; dropping it stops its processes and removes its files.
#[derive(Debug)]
pub struct Proxy {
    url: String,
    ca_pem: Option<String>,
    log: PathBuf,
    children: Vec<Child>,
    _temp: tempfile::TempDir,
}

impl Proxy {
    /// Settings for a proxy.
    pub fn builder() -> ProxyBuilder {
        ProxyBuilder::default()
    }

    /// Starts a plain `http://` proxy that allows CONNECT to any port.
    pub async fn start() -> Result<Self> {
        Self::builder().start().await
    }

    /// The proxy URL for `proxy-url`: `http://127.0.0.1:P` or `https://127.0.0.1:S`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The PEM CA of an `https://` proxy's certificate.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// tinyproxy's log so far (one `Request (…): CONNECT host:port HTTP/1.1` line per tunnel).
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many tunnels to `host_port` the proxy was asked for so far.
    pub fn connects_to(&self, host_port: &str) -> usize {
        let needle = format!(": CONNECT {host_port} ");
        self.log().lines().filter(|l| l.contains(&needle)).count()
    }

    /// Stops the proxy's processes (its URL then refuses connections).
    pub fn stop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}
