//! One real Kubernetes control plane on loopback: etcd, kube-apiserver and
//! kube-controller-manager, each its own process of the multi-call binary.
//!
//! ```text
//!   ControlPlane::builder("hub").start()
//!     ├─ pki/      CA (client CA = serving CA = CSR signing CA), SA keys, admin + KCM certs
//!     ├─ etcd      http://127.0.0.1:<p1>            (data in <dir>/etcd, fsync off)
//!     ├─ apiserver https://127.0.0.1:<p3>           RBAC, x509 client certs, bootstrap tokens
//!     └─ kcm       csrsigning, csrapproving, gc, namespace, serviceaccount(-token), … (no serving port)
//! ```
//!
//! Processes die with the handle: `Drop` kills them, and each process also watches its standard
//! input and exits when the harness's end of the pipe closes, which covers a harness that is
//! killed outright. A detached control plane (for `flotilla controlplane up`) has neither; it
//! outlives this process and is stopped by [`stop_detached`].

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::ServiceAccount,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use tempfile::TempDir;

use crate::{
    binary,
    error::{Error, Result, io, kube as kube_err},
    kubeconfig,
    pki::{CertificateAuthority, ServiceAccountKeys},
    processes::{self, Lifetime},
};

/// Controllers the controller manager runs: CSR signing/approval/cleanup for cluster
/// registration, garbage collection and namespace deletion for cleanup, service accounts and
/// their tokens, the root CA config map, role aggregation, bootstrap-token upkeep, the
/// workload controllers that add-on agents' Deployments and Jobs need, and node lifecycle and
/// endpoints for clusters with a node.
pub const CONTROLLERS: &[&str] = &[
    "csrsigning",
    "csrapproving",
    "csrcleaner",
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-cert-publisher",
    "clusterrole-aggregation",
    "bootstrapsigner",
    "tokencleaner",
    "deployment",
    "replicaset",
    "job",
    // Lifts the not-ready taint admission puts on a new node once its kubelet reports Ready.
    "nodelifecycle",
    // Endpoints of Services backed by pods (a hub's webhook on a node).
    "endpoint",
];

/// The field manager used when the harness applies objects.
pub const FIELD_MANAGER: &str = "flotilla-localenv";

/// How long to wait for the apiserver to report ready.
/// The common name of the aggregation layer's client certificate, the one name aggregated
/// API servers accept identity headers from.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How many times start-up is retried when a freshly picked port was taken meanwhile.
const PORT_RETRIES: usize = 3;

/// Settings for a control plane; see [`ControlPlane::builder`].
#[derive(Clone, Debug)]
pub struct ControlPlaneBuilder {
    name: String,
    state_dir: Option<PathBuf>,
    install_crds: bool,
    detached: bool,
    signing_duration: Duration,
    ports: Option<Ports>,
}

/// Fixed loopback ports of a control plane, for environments whose addresses must be known in
/// advance (`flotilla up --base-port`); without them free ports are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// The kube-apiserver's secure port.
    pub apiserver: u16,
    /// etcd's client port.
    pub etcd: u16,
    /// etcd's peer port.
    pub etcd_peer: u16,
}

impl ControlPlaneBuilder {
    /// Listens on these ports instead of free ones; start-up then fails, rather than retrying
    /// elsewhere, when one is taken.
    pub fn ports(mut self, ports: Ports) -> Self {
        self.ports = Some(ports);
        self
    }

    /// Keeps all files under `dir` instead of a temporary directory that is removed on drop.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Whether to install Flotilla's CRDs (OCM's and `AddOnPlugin`) once the apiserver is ready.
    /// On by default.
    pub fn install_crds(mut self, install: bool) -> Self {
        self.install_crds = install;
        self
    }

    /// Lifetime of certificates that the controller manager signs through CSRs (default one
    /// year); tests of certificate rotation shorten it.
    pub fn signing_duration(mut self, duration: Duration) -> Self {
        self.signing_duration = duration;
        self
    }

    /// Starts processes that outlive this process (own process group, no stdin watchdog).
    /// Call [`ControlPlane::detach`] once started, or the handle still kills them on drop.
    pub fn detached(mut self, detached: bool) -> Self {
        self.detached = detached;
        self
    }

    /// Builds the binary if needed, starts the three components and waits until the apiserver
    /// is ready, the controller manager works and the CRDs are established.
    pub async fn start(self) -> Result<ControlPlane> {
        let binary = tokio::task::spawn_blocking(binary::controlplane_binary)
            .await
            .map_err(|e| Error::Binary(format!("build task: {e}")))??;
        let mut last_error = None;
        for _ in 0..PORT_RETRIES {
            match ControlPlane::start_once(&self, &binary).await {
                Ok(cp) => return Ok(cp),
                Err(e) if is_port_clash(&e) && self.ports.is_none() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::State("no start attempted".into())))
    }
}

fn is_port_clash(error: &Error) -> bool {
    let text = error.to_string();
    text.contains("address already in use") || text.contains("bind:")
}

/// Where a running control plane listens and keeps its files; written to `state.json` in the
/// state directory so that `flotilla controlplane down` can find a detached one again.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneState {
    /// The control plane's name (also its kubeconfig context).
    pub name: String,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// The admin kubeconfig (user `flotilla-admin`, group `system:masters`).
    pub admin_kubeconfig: PathBuf,
    /// The multi-call binary the processes run.
    pub binary: PathBuf,
    /// Process ids by component.
    pub pids: Vec<(String, u32)>,
}

/// A running control plane. Dropping it stops every process and frees its ports.
pub struct ControlPlane {
    state: ControlPlaneState,
    dir: PathBuf,
    ca: CertificateAuthority,
    processes: Vec<(&'static str, Child)>,
    detached: bool,
    timings: Vec<(&'static str, Duration)>,
    /// The apiserver's arguments, kept so that [`ControlPlane::start_apiserver`] brings it back
    /// on the same port with the same certificates and etcd.
    apiserver_args: Vec<String>,
    /// etcd's arguments and client port, kept so that [`ControlPlane::start_etcd`] brings it
    /// back on the same data directory and ports.
    etcd_args: Vec<String>,
    etcd_port: u16,
    // Declared last so the directory is removed after the processes are gone.
    _temp: Option<TempDir>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("state", &self.state)
            .field("dir", &self.dir)
            .finish()
    }
}

impl ControlPlane {
    /// Settings for a control plane called `name` (used as the kubeconfig context and cluster
    /// name).
    pub fn builder(name: impl Into<String>) -> ControlPlaneBuilder {
        ControlPlaneBuilder {
            name: name.into(),
            state_dir: None,
            install_crds: true,
            detached: false,
            signing_duration: Duration::from_secs(365 * 24 * 3600),
            ports: None,
        }
    }

    /// Starts a control plane with default settings in a temporary directory.
    pub async fn start(name: impl Into<String>) -> Result<Self> {
        Self::builder(name).start().await
    }

    async fn start_once(settings: &ControlPlaneBuilder, binary: &Path) -> Result<Self> {
        let (temp, dir) = match &settings.state_dir {
            Some(dir) => {
                if dir.exists() {
                    fs::remove_dir_all(dir).map_err(io(format!("clear {}", dir.display())))?;
                }
                (None, dir.clone())
            }
            None => {
                let temp = crate::scratch::create(&settings.name)?;
                let dir = temp.path().to_path_buf();
                (Some(temp), dir)
            }
        };
        for sub in ["pki", "etcd", "logs"] {
            fs::create_dir_all(dir.join(sub)).map_err(io(format!("create {}/{sub}", dir.display())))?;
        }

        let ca = CertificateAuthority::new(&format!("flotilla-{}-ca", settings.name))?;
        let sa = ServiceAccountKeys::generate()?;
        let (etcd_port, peer_port, api_port) = match settings.ports {
            Some(ports) => (ports.etcd, ports.etcd_peer, ports.apiserver),
            None => (free_port()?, free_port()?, free_port()?),
        };
        let server = format!("https://127.0.0.1:{api_port}");
        let serving = ca.issue_serving_with_ips(
            "kube-apiserver",
            &["kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            &[kubernetes_service_address(api_port).into()],
        )?;
        let admin = ca.issue_client("flotilla-admin", &["system:masters"])?;
        // The aggregation layer's own CA, apart from the cluster's, as kubeadm sets it up: an
        // aggregated API server (the hub's cluster gateway) trusts only the front proxy, never
        // an ordinary client certificate carrying identity headers.
        let front_proxy_ca =
            CertificateAuthority::new(&format!("flotilla-{}-front-proxy-ca", settings.name))?;
        let front_proxy = front_proxy_ca.issue_client(FRONT_PROXY_CLIENT, &[])?;
        let kcm = ca.issue_client("system:kube-controller-manager", &[])?;

        let pki = dir.join("pki");
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = pki.join(name);
            fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
            Ok(path)
        };
        let ca_crt = write("ca.crt", ca.cert_pem())?;
        let ca_key = write("ca.key", ca.key_pem())?;
        let tls_crt = write("apiserver.crt", &serving.cert_pem)?;
        let tls_key = write("apiserver.key", &serving.key_pem)?;
        let sa_key = write("sa.key", &sa.private_pem)?;
        let sa_pub = write("sa.pub", &sa.public_pem)?;
        let front_proxy_ca_crt = write("front-proxy-ca.crt", front_proxy_ca.cert_pem())?;
        let front_proxy_crt = write("front-proxy-client.crt", &front_proxy.cert_pem)?;
        let front_proxy_key = write("front-proxy-client.key", &front_proxy.key_pem)?;

        let admin_yaml = kubeconfig::render(
            &settings.name,
            &server,
            ca.cert_pem(),
            "flotilla-admin",
            &admin.cert_pem,
            &admin.key_pem,
        )?;
        let admin_kubeconfig = write("admin.kubeconfig", &admin_yaml)?;
        let kcm_kubeconfig = write(
            "kube-controller-manager.kubeconfig",
            &kubeconfig::render(
                &settings.name,
                &server,
                ca.cert_pem(),
                "system:kube-controller-manager",
                &kcm.cert_pem,
                &kcm.key_pem,
            )?,
        )?;

        let mut cp = ControlPlane {
            state: ControlPlaneState {
                name: settings.name.clone(),
                server: server.clone(),
                admin_kubeconfig,
                binary: binary.to_path_buf(),
                pids: Vec::new(),
            },
            dir: dir.clone(),
            ca,
            processes: Vec::new(),
            detached: settings.detached,
            timings: Vec::new(),
            apiserver_args: Vec::new(),
            etcd_args: vec![
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-url=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-url=http://127.0.0.1:{peer_port}"),
            ],
            etcd_port,
            _temp: temp,
        };

        let started = Instant::now();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        cp.spawn("etcd", &cp.etcd_args.clone())?;
        cp.wait_for_port("etcd", etcd_port).await?;
        cp.timings.push(("etcd serving", started.elapsed()));

        let path = |p: &Path| p.display().to_string();
        cp.apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", path(&pki)),
            format!("--tls-cert-file={}", path(&tls_crt)),
            format!("--tls-private-key-file={}", path(&tls_key)),
            format!("--client-ca-file={}", path(&ca_crt)),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-signing-key-file={}", path(&sa_key)),
            format!("--service-account-key-file={}", path(&sa_pub)),
            // Node: kubelets of local nodes get exactly their own pods' objects, as in a
            // production cluster, instead of a broad binding.
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--enable-bootstrap-token-auth=true".into(),
            // Its own range per control plane, so that the nodes of several clusters on one
            // host route each `kubernetes` Service address to the right apiserver.
            format!("--service-cluster-ip-range={}", service_range(api_port)),
            // Loopback addresses may not be endpoints of the `kubernetes` service.
            "--endpoint-reconciler-type=none".into(),
            // Webhooks behind a Service are dialled at a pod's address (there is no
            // kube-proxy to route the Service's address).
            "--enable-aggregator-routing=true".into(),
            format!("--requestheader-client-ca-file={}", path(&front_proxy_ca_crt)),
            format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!("--proxy-client-cert-file={}", path(&front_proxy_crt)),
            format!("--proxy-client-key-file={}", path(&front_proxy_key)),
            "--profiling=false".into(),
            "--v=0".into(),
        ];
        cp.spawn("kube-apiserver", &cp.apiserver_args.clone())?;
        cp.wait_for_readyz().await?;
        cp.timings.push(("kube-apiserver ready", started.elapsed()));

        cp.spawn(
            "kube-controller-manager",
            &[
                format!("--kubeconfig={}", path(&kcm_kubeconfig)),
                format!("--controllers={}", CONTROLLERS.join(",")),
                format!("--cluster-signing-cert-file={}", path(&ca_crt)),
                format!("--cluster-signing-key-file={}", path(&ca_key)),
                format!(
                    "--cluster-signing-duration={}s",
                    settings.signing_duration.as_secs()
                ),
                format!("--service-account-private-key-file={}", path(&sa_key)),
                format!("--root-ca-file={}", path(&ca_crt)),
                "--use-service-account-credentials=true".into(),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                format!("--cluster-name={}", settings.name),
                "--v=0".into(),
            ],
        )?;

        if settings.install_crds {
            cp.install_crds().await?;
            cp.timings.push(("CRDs established", started.elapsed()));
        }
        cp.wait_for_controller_manager().await?;
        cp.timings
            .push(("kube-controller-manager working", started.elapsed()));
        Ok(cp)
    }

    fn spawn(&mut self, component: &'static str, args: &[String]) -> Result<()> {
        let lifetime = if self.detached {
            Lifetime::Detached
        } else {
            Lifetime::Tied
        };
        let mut full = vec![component.to_owned()];
        full.extend_from_slice(args);
        let child = processes::spawn_logged(
            &self.state.binary,
            &full,
            component,
            &self.log_path(component),
            lifetime,
            |_| {},
        )?;
        self.state.pids.push((component.to_owned(), child.id()));
        self.processes.push((component, child));
        Ok(())
    }

    /// Fails with the log tail if `component` has exited.
    fn check_alive(&mut self, component: &'static str) -> Result<()> {
        let exited = self
            .processes
            .iter_mut()
            .find(|(name, _)| *name == component)
            .and_then(|(_, child)| child.try_wait().ok().flatten());
        match exited {
            Some(status) => Err(Error::Start {
                component,
                message: format!(
                    "exited with {status}; log tail:\n{}",
                    self.log_tail(component, 25)
                ),
            }),
            None => Ok(()),
        }
    }

    async fn wait_for_port(&mut self, component: &'static str, port: u16) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while Instant::now() < deadline {
            self.check_alive(component)?;
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::NotReady {
            what: format!("{component} on port {port}"),
            message: "timed out".into(),
        })
    }

    async fn wait_for_readyz(&mut self) -> Result<()> {
        let client = self.admin_client().await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            self.check_alive("etcd")?;
            self.check_alive("kube-apiserver")?;
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::NotReady {
                    what: "kube-apiserver /readyz".into(),
                    message: e.to_string(),
                })?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(Error::NotReady {
            what: "kube-apiserver /readyz".into(),
            message: format!("timed out; last answer: {last}"),
        })
    }

    /// The service-account controller creates `default` in every namespace; seeing it proves
    /// the controller manager is up and authorised.
    async fn wait_for_controller_manager(&mut self) -> Result<()> {
        let client = self.admin_client().await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            self.check_alive("kube-controller-manager")?;
            if accounts
                .get_opt("default")
                .await
                .map_err(kube_err("read default service account"))?
                .is_some()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(Error::NotReady {
            what: "kube-controller-manager".into(),
            message: format!(
                "no default service account; log tail:\n{}",
                self.log_tail("kube-controller-manager", 25)
            ),
        })
    }

    /// Applies every Flotilla CRD (server-side) and waits until each is established.
    pub async fn install_crds(&self) -> Result<()> {
        let client = self.admin_client().await?;
        install_crds(&client, &flotilla_api::crds::crds()).await
    }

    /// The control plane's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// The apiserver URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.state.server
    }

    /// The apiserver's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.state
            .server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_default()
    }

    /// The address of the `kubernetes` Service in this cluster, which the kubelet hands to
    /// every pod (`KUBERNETES_SERVICE_HOST`) and which the apiserver's certificate names. A
    /// node makes it reach the apiserver (see `crate::service_route`).
    pub fn service_address(&self) -> Ipv4Addr {
        kubernetes_service_address(self.port())
    }

    /// The directory holding keys, logs and etcd data.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state recorded for this control plane.
    pub fn state(&self) -> &ControlPlaneState {
        &self.state
    }

    /// The CA certificate (PEM) that serves the apiserver and signs client certificates.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// Path of the admin kubeconfig (group `system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.state.admin_kubeconfig
    }

    /// A client acting as the admin.
    pub async fn admin_client(&self) -> Result<Client> {
        let yaml = fs::read_to_string(&self.state.admin_kubeconfig).map_err(io("read admin kubeconfig"))?;
        kubeconfig::client_from_yaml(&yaml).await
    }

    /// Kubeconfig text for `user` in `groups`, with a fresh client certificate signed by the CA.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> Result<String> {
        let issued = self.ca.issue_client(user, groups)?;
        kubeconfig::render(
            &self.state.name,
            &self.state.server,
            self.ca.cert_pem(),
            user,
            &issued.cert_pem,
            &issued.key_pem,
        )
    }

    /// A client certificate for `user` in `groups`, signed by the cluster's CA (which the
    /// apiserver trusts for clients, and the tunnel server for add-on agents).
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<crate::pki::CertAndKey> {
        self.ca.issue_client(user, groups)
    }

    /// A serving certificate for loopback plus `extra_ips`, signed by the cluster's CA.
    pub fn issue_serving(
        &self,
        common_name: &str,
        extra_ips: &[std::net::IpAddr],
    ) -> Result<crate::pki::CertAndKey> {
        self.ca.issue_serving_with_ips(common_name, &[], extra_ips)
    }

    /// A client acting as `user` in `groups` (no RBAC bindings unless the test creates them).
    pub async fn client_for(&self, user: &str, groups: &[&str]) -> Result<Client> {
        kubeconfig::client_from_yaml(&self.kubeconfig_for(user, groups)?).await
    }

    /// `kubectl --kubeconfig <admin>` of the same Kubernetes version as the server.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(&self.state.binary);
        command
            .arg("kubectl")
            .arg(format!("--kubeconfig={}", self.state.admin_kubeconfig.display()));
        command
    }

    /// When each start-up phase finished, measured from the first process start.
    pub fn startup_timings(&self) -> &[(&'static str, Duration)] {
        &self.timings
    }

    /// Process ids of the running components.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|(_, child)| child.id()).collect()
    }

    /// The log file of `component`.
    pub fn log_path(&self, component: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{component}.log"))
    }

    /// The last `lines` lines of a component's log.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        processes::log_tail(&self.log_path(component), lines)
    }

    /// Stops the kube-apiserver alone (etcd and the controller manager keep running), as an
    /// outage of the API does: clients get connection errors until [`Self::start_apiserver`].
    pub fn stop_apiserver(&mut self) -> Result<()> {
        self.stop_component("kube-apiserver")
    }

    /// Starts the kube-apiserver again after [`Self::stop_apiserver`], on the same port and
    /// etcd, and waits until it is ready.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        if self.is_running("kube-apiserver") {
            return Err(Error::State("the kube-apiserver is already running".into()));
        }
        self.spawn("kube-apiserver", &self.apiserver_args.clone())?;
        self.wait_for_readyz().await
    }

    /// Stops etcd alone, as a storage outage does: the apiserver keeps accepting connections
    /// and answers errors (or times out) until [`Self::start_etcd`].
    pub fn stop_etcd(&mut self) -> Result<()> {
        self.stop_component("etcd")
    }

    /// Starts etcd again after [`Self::stop_etcd`] on the same data directory and ports, and
    /// waits until the apiserver, which reconnects by itself, is ready again.
    pub async fn start_etcd(&mut self) -> Result<()> {
        if self.is_running("etcd") {
            return Err(Error::State("etcd is already running".into()));
        }
        // Stopped before the others, so it stops last on drop.
        self.spawn("etcd", &self.etcd_args.clone())?;
        let etcd = self.processes.pop();
        self.processes.splice(0..0, etcd);
        self.wait_for_port("etcd", self.etcd_port).await?;
        if self.is_running("kube-apiserver") {
            self.wait_for_readyz().await?;
        }
        Ok(())
    }

    /// Freezes `component` (SIGSTOP): its sockets stay open but nothing answers, as a hung
    /// process or a stalled disk looks to its peers. [`Self::resume`] thaws it.
    pub fn pause(&self, component: &str) -> Result<()> {
        self.signal(component, nix::sys::signal::Signal::SIGSTOP)
    }

    /// Thaws a component frozen by [`Self::pause`] (SIGCONT).
    pub fn resume(&self, component: &str) -> Result<()> {
        self.signal(component, nix::sys::signal::Signal::SIGCONT)
    }

    fn signal(&self, component: &str, signal: nix::sys::signal::Signal) -> Result<()> {
        let (_, child) = self
            .processes
            .iter()
            .find(|(name, _)| *name == component)
            .ok_or_else(|| Error::State(format!("{component} is not running")))?;
        let pid = nix::unistd::Pid::from_raw(
            i32::try_from(child.id()).map_err(|_| Error::State(format!("pid of {component}")))?,
        );
        nix::sys::signal::kill(pid, signal)
            .map_err(|e| Error::State(format!("send {signal} to {component}: {e}")))
    }

    fn is_running(&self, component: &str) -> bool {
        self.processes.iter().any(|(name, _)| *name == component)
    }

    /// Kills `component` and forgets it; a paused one is thawed first so that it dies at once.
    fn stop_component(&mut self, component: &str) -> Result<()> {
        let Some(index) = self.processes.iter().position(|(name, _)| *name == component) else {
            return Err(Error::State(format!("{component} is not running")));
        };
        let (_, mut child) = self.processes.remove(index);
        child.kill().map_err(io(format!("kill {component}")))?;
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGCONT);
        }
        child.wait().map_err(io(format!("wait for {component}")))?;
        self.state.pids.retain(|(name, _)| name != component);
        Ok(())
    }

    /// Leaves the processes running after this handle is gone, records where they are in
    /// `<dir>/state.json` and returns that record. Only for a control plane built with
    /// [`ControlPlaneBuilder::detached`] and a [`ControlPlaneBuilder::state_dir`].
    pub fn detach(mut self) -> Result<ControlPlaneState> {
        if !self.detached || self._temp.is_some() {
            return Err(Error::State(
                "only a detached control plane with a state directory can be detached".into(),
            ));
        }
        let state = self.state.clone();
        let text =
            serde_json::to_string_pretty(&state).map_err(|e| Error::State(format!("encode state: {e}")))?;
        let path = self.dir.join("state.json");
        fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
        // The children are reaped by init once this process exits.
        self.processes.clear();
        Ok(state)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Reverse order: controller manager, apiserver, then etcd.
        for (_, child) in self.processes.iter_mut().rev() {
            let _ = child.kill();
        }
        for (_, child) in self.processes.iter_mut() {
            let _ = child.wait();
        }
    }
}

/// Applies `crds` server-side and waits until each is established.
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    flotilla_kube::crds::install(client, crds, READY_TIMEOUT)
        .await
        .map_err(|e| Error::NotReady {
            what: "CRDs".into(),
            message: e.to_string(),
        })
}

/// Reads the state of a detached control plane kept in `dir`.
pub fn read_state(dir: &Path) -> Result<ControlPlaneState> {
    let path = dir.join("state.json");
    let text = fs::read_to_string(&path)
        .map_err(|e| Error::State(format!("read {} (is the control plane up?): {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::State(format!("parse {}: {e}", path.display())))
}

/// Stops a detached control plane kept in `dir` and removes the directory. Only processes
/// that still run the recorded binary are signalled, so a reused pid is never hit.
pub fn stop_detached(dir: &Path) -> Result<ControlPlaneState> {
    use std::os::unix::ffi::OsStrExt;

    use nix::{sys::signal, unistd::Pid};

    let state = read_state(dir)?;
    let ours = |pid: u32| -> bool {
        fs::read(format!("/proc/{pid}/cmdline"))
            .map(|cmdline| {
                let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
                Path::new(std::ffi::OsStr::from_bytes(argv0)) == state.binary
            })
            .unwrap_or(false)
    };
    let running: Vec<u32> = state
        .pids
        .iter()
        .map(|(_, pid)| *pid)
        .filter(|pid| ours(*pid))
        .collect();
    for pid in running.iter().rev() {
        let _ = signal::kill(Pid::from_raw(*pid as i32), signal::Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while running.iter().any(|pid| ours(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in running.iter().filter(|pid| ours(**pid)) {
        let _ = signal::kill(Pid::from_raw(*pid as i32), signal::Signal::SIGKILL);
    }
    fs::remove_dir_all(dir).map_err(io(format!("remove {}", dir.display())))?;
    Ok(state)
}

/// The block every local control plane's Service range is cut from (10.64.0.0/10: clear of
/// the nodes' pod subnets, 10.244.0.0/16).
const SERVICE_BLOCK: Ipv4Addr = Ipv4Addr::new(10, 64, 0, 0);
/// Bits of a control plane's Service range: a /26, 62 Service addresses per cluster; 65 536
/// ports of 64 addresses fill the /10 exactly.
const SERVICE_RANGE_BITS: u32 = 6;

/// The Service range of the control plane whose apiserver listens on `port`: a /26 inside
/// [`SERVICE_BLOCK`] derived from the port, so that every apiserver on this host (ports are
/// unique) has its own, and the `kubernetes` Service address says which apiserver it stands
/// for.
pub fn service_range(port: u16) -> String {
    format!("{}/{}", range_start(port), 32 - SERVICE_RANGE_BITS)
}

/// The `kubernetes` Service address of the apiserver on `port`: the first of its range, as the
/// apiserver allocates it.
pub fn kubernetes_service_address(port: u16) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range_start(port)) + 1)
}

fn range_start(port: u16) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVICE_BLOCK) + (u32::from(port) << SERVICE_RANGE_BITS))
}

/// Asks the kernel for a free loopback port. Another process may take it before it is used;
/// start-up retries on a clash.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io("find a free port"))?;
    Ok(listener.local_addr().map_err(io("read free port"))?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_port_has_its_own_service_range_inside_the_service_block() {
        assert_eq!(service_range(6443), "10.70.74.192/26");
        assert_eq!(kubernetes_service_address(6443), Ipv4Addr::new(10, 70, 74, 193));
        // The highest port's range still ends inside 10.64.0.0/10.
        assert_eq!(service_range(u16::MAX), "10.127.255.192/26");
        assert_ne!(service_range(40000), service_range(40001));
    }
}
