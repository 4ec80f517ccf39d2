//! A real OCI distribution registry on loopback, for tests of plugin loading.
//!
//! ```text
//!   Registry::builder().htpasswd("alice", "s3cret").start()
//!     ├─ registry binary  tests/registry (CNCF distribution v3, cmd/registry's code), built once
//!     │                   and cached like the control-plane binary (source hash, lock, rename)
//!     ├─ <dir>/config.yml  http.addr 127.0.0.1:<free port>, filesystem storage, deletes enabled
//!     ├─ <dir>/storage/    docker/registry/v2/{blobs,repositories}/… (tests may tamper with it)
//!     ├─ <dir>/htpasswd    bcrypt entries, when auth is on (basic auth, no token server)
//!     └─ <dir>/tls.crt|key HTTPS instead of plain HTTP, when TLS is on
//! ```
//!
//! The process dies with the handle: `Drop` kills it, and it also exits when its standard input
//! (whose write end only this process holds) reaches EOF, which covers a harness killed
//! outright. No blob descriptor cache is configured, so a blob deleted from storage is missing
//! at once, and a blob modified in storage is served modified (what a tampering test needs).

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::Child,
    time::{Duration, Instant},
};

use base64::Engine as _;
use tempfile::TempDir;

use crate::{
    binary,
    error::{Error, Result, io},
    processes::{self, Lifetime},
};

/// Overrides the registry binary (skips building): a path to a prebuilt `registry`.
pub const BINARY_ENV: &str = "FLOTILLA_REGISTRY_BIN";
/// The distribution version the Go module pins (`tests/registry/go.mod`).
pub const DISTRIBUTION_VERSION: &str = "v3.1.2";

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const PORT_RETRIES: usize = 3;

/// The directory holding the registry's Go module.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/registry")
}

/// Returns the path of the registry binary, building it first if needed (about a minute on two
/// cores, once per source change).
pub fn registry_binary() -> Result<PathBuf> {
    if let Some(prebuilt) = binary::prebuilt(BINARY_ENV) {
        return prebuilt;
    }
    let source = source_dir();
    let key = binary::source_key(&source, DISTRIBUTION_VERSION, binary::is_go_input)?;
    binary::cached_artifact("registry", &key, "registry", |partial| {
        binary::go_build(
            &source,
            partial,
            &["-s".to_owned(), "-w".to_owned()],
            "local",
            &format!("the OCI registry (distribution {DISTRIBUTION_VERSION})"),
        )
    })
}

/// Settings for a registry; see [`Registry::builder`].
#[derive(Clone, Debug, Default)]
pub struct RegistryBuilder {
    htpasswd: Option<(String, String)>,
    state_dir: Option<PathBuf>,
    port: Option<u16>,
    detached: bool,
    tls: Option<(String, String)>,
}

impl RegistryBuilder {
    /// Requires HTTP basic authentication as `user` with `password` for every request.
    pub fn htpasswd(mut self, user: &str, password: &str) -> Self {
        self.htpasswd = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Keeps configuration, storage and log under `dir` (cleared first) instead of a temporary
    /// directory that is removed on drop.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Serves HTTPS with this certificate and key (PEM) instead of plain HTTP. Clients must
    /// trust the certificate's issuer; node images are pulled from plain-HTTP registries only.
    pub fn tls(mut self, cert_pem: &str, key_pem: &str) -> Self {
        self.tls = Some((cert_pem.to_owned(), key_pem.to_owned()));
        self
    }

    /// Listens on this loopback port instead of a free one (start-up fails if it is taken).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Starts a process that outlives this one (own process group, no standard-input
    /// watchdog). Call [`Registry::detach`] once started, or the handle still stops it on drop.
    pub fn detached(mut self, detached: bool) -> Self {
        self.detached = detached;
        self
    }

    /// Builds the binary if needed, starts the registry on a free loopback port and waits until
    /// it accepts connections.
    pub async fn start(self) -> Result<Registry> {
        let binary = tokio::task::spawn_blocking(registry_binary)
            .await
            .map_err(|e| Error::Binary(format!("build task: {e}")))??;
        let mut last = None;
        for _ in 0..PORT_RETRIES {
            match Registry::start_once(&self, &binary).await {
                Ok(r) => return Ok(r),
                Err(e) if e.to_string().contains("address already in use") && self.port.is_none() => {
                    last = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::State("no start attempted".into())))
    }
}

/// A running registry. Dropping it stops the process and removes its storage.
pub struct Registry {
    addr: SocketAddr,
    dir: PathBuf,
    credentials: Option<(String, String)>,
    child: Option<Child>,
    binary: PathBuf,
    detached: bool,
    // Declared last so the directory is removed after the process is gone.
    _temp: Option<TempDir>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("addr", &self.addr)
            .field("dir", &self.dir)
            .field("auth", &self.credentials.is_some())
            .finish()
    }
}

impl Registry {
    /// Settings for a registry (anonymous access unless [`RegistryBuilder::htpasswd`]).
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// Starts an anonymous registry.
    pub async fn start() -> Result<Self> {
        Self::builder().start().await
    }

    async fn start_once(settings: &RegistryBuilder, binary: &Path) -> Result<Self> {
        let (temp, dir) = match &settings.state_dir {
            Some(dir) => {
                if dir.exists() {
                    fs::remove_dir_all(dir).map_err(io(format!("clear {}", dir.display())))?;
                }
                fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
                (None, dir.clone())
            }
            None => {
                let temp = crate::scratch::create("registry")?;
                let dir = temp.path().to_path_buf();
                (Some(temp), dir)
            }
        };
        let storage = dir.join("storage");
        fs::create_dir_all(&storage).map_err(io("create registry storage"))?;
        let port = match settings.port {
            Some(port) => port,
            None => free_port()?,
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  \
             maintenance:\n    uploadpurging:\n      enabled: false\n\
             http:\n  addr: {addr}\n  secret: flotilla-test-{port}\n",
            storage.display()
        );
        if let Some((cert, key)) = &settings.tls {
            let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
            fs::write(&cert_path, cert).map_err(io("write the registry's certificate"))?;
            fs::write(&key_path, key).map_err(io("write the registry's key"))?;
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert_path.display(),
                key_path.display()
            ));
        }
        if let Some((user, password)) = &settings.htpasswd {
            let hash = bcrypt::hash_with_result(password, 4)
                .map_err(|e| Error::State(format!("hash htpasswd password: {e}")))?
                .format_for_version(bcrypt::Version::TwoA);
            let htpasswd = dir.join("htpasswd");
            fs::write(&htpasswd, format!("{user}:{hash}\n")).map_err(io("write htpasswd"))?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: flotilla-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.join("config.yml");
        fs::write(&config_path, config).map_err(io("write registry config"))?;

        let lifetime = if settings.detached {
            Lifetime::Detached
        } else {
            Lifetime::Tied
        };
        let child = processes::spawn_logged(
            binary,
            &["serve".to_owned(), config_path.display().to_string()],
            "registry",
            &dir.join("registry.log"),
            lifetime,
            |command| {
                // distribution v3 exports traces through OpenTelemetry's autoexport; nothing listens.
                command
                    .env("OTEL_TRACES_EXPORTER", "none")
                    .env("OTEL_METRICS_EXPORTER", "none")
                    .env("OTEL_LOGS_EXPORTER", "none");
            },
        )?;
        let mut registry = Registry {
            addr,
            dir,
            credentials: settings.htpasswd.clone(),
            child: Some(child),
            binary: binary.to_path_buf(),
            detached: settings.detached,
            _temp: temp,
        };
        registry.wait_ready().await?;
        Ok(registry)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(Error::Start {
                    component: "registry",
                    message: format!("exited with {status}; log tail:\n{}", self.log_tail(25)),
                });
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::NotReady {
            what: format!("registry on {}", self.addr),
            message: format!("timed out; log tail:\n{}", self.log_tail(25)),
        })
    }

    /// `127.0.0.1:<port>`: the registry part of references.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The reference `127.0.0.1:<port>/<repository>:<tag>`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.addr)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The storage root (`docker/registry/v2/...` below it).
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.join("storage")
    }

    /// Where the registry keeps the blob with `digest` (`sha256:<hex>`).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.storage_dir()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2.min(hex.len())])
            .join(hex)
            .join("data")
    }

    /// The user and password when auth is on.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// A docker `config.json` (`{"auths": {...}}`) for this registry as `user`/`password`: the
    /// content of a `kubernetes.io/dockerconfigjson` secret's `.dockerconfigjson`.
    pub fn docker_config_json(&self, user: &str, password: &str) -> String {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        serde_json::json!({
            "auths": { self.host(): { "username": user, "password": password, "auth": auth } }
        })
        .to_string()
    }

    /// Stops the registry now (its port then refuses connections); storage stays until drop.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The registry's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("registry.log")
    }

    /// The registry binary the process runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The registry's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Leaves the process running after this handle is gone and returns its id. Only for a
    /// registry built with [`RegistryBuilder::detached`] and a [`RegistryBuilder::state_dir`].
    pub fn detach(mut self) -> Result<u32> {
        if self._temp.is_some() || !self.detached {
            return Err(Error::State(
                "only a detached registry with a state directory can be detached".into(),
            ));
        }
        match self.child.take() {
            // The child is reaped by init once this process exits.
            Some(child) => Ok(child.id()),
            None => Err(Error::State("the registry is not running".into())),
        }
    }

    /// The last `lines` lines of the registry's log.
    pub fn log_tail(&self, lines: usize) -> String {
        processes::log_tail(&self.log_path(), lines)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io("find a free port"))?;
    Ok(listener.local_addr().map_err(io("read free port"))?.port())
}
