//! A network the test controls: a thread in a fresh network namespace, joined to the host's by
//! a veth pair on a /30, so that what runs on it reaches the host only at one address — not
//! the host's loopback, where the control planes listen. Tests put the klusterlet there and a
//! proxy on the host end: the hub is then reachable only through the proxy.
//!
//! ```text
//!   host namespace                         the thread's namespace
//!   127.0.0.1: hub, managed apiservers     127.0.0.1: nothing
//!   10.234.x.y+1 ◀──── veth pair ────▶     10.234.x.y+2 (the only way out)
//! ```
//!
//! Only the thread changes namespace (`unshare(CLONE_NEWNET)` acts on the calling thread), and
//! every socket it opens — those of futures it runs on its own current-thread runtime, and of
//! processes it starts — lives there. The veth pair disappears with the namespace when the
//! thread ends. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's `ip`.

use std::{
    future::Future,
    net::Ipv4Addr,
    pin::Pin,
    process::Command,
    sync::{
        atomic::{AtomicU32, Ordering},
        mpsc,
    },
    thread::JoinHandle,
};

use flotilla_localenv::{
    Error, Result,
    tunnel::{ADDON, TunnelAgent, TunnelServer},
};
use tokio::sync::oneshot;

/// A job for the thread: builds the future it runs to completion.
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A thread in its own network namespace; see the module docs. Dropping it ends the thread
/// (after the job it runs, if any) and the namespace with it.
pub struct Netns {
    host: Ipv4Addr,
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

fn ip(args: &[&str]) -> Result<()> {
    let output = Command::new("ip").args(args).output().map_err(|e| Error::Start {
        component: "netns",
        message: format!("run `ip` (iproute2, needed for a test network namespace): {e}"),
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Start {
            component: "netns",
            message: format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

impl Netns {
    /// Creates the namespace, its thread and the veth pair (blocking: a few `ip` calls).
    pub fn create() -> Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Names of at most 15 bytes; a /30 per namespace, from the pid and a counter.
        let (outer, inner) = (
            format!("flt{}o{n}", pid % 100_000),
            format!("flt{}i{n}", pid % 100_000),
        );
        let base = u32::from(Ipv4Addr::new(10, 234, 0, 0)) | ((pid % 256) << 8) | ((n * 4) % 256);
        let (host, peer) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));

        let (tid_tx, tid_rx) = mpsc::channel::<Result<i32>>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let inner_name = inner.clone();
        let thread = std::thread::spawn(move || {
            let entered = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map(|()| nix::unistd::gettid().as_raw())
                .map_err(|e| Error::Start {
                    component: "netns",
                    message: format!("unshare a network namespace (needs root): {e}"),
                });
            let ok = entered.is_ok();
            let _ = tid_tx.send(entered);
            if !ok || go_rx.recv().is_err() {
                return;
            }
            // Processes started here are in this thread's namespace.
            let configured = ip(&["addr", "add", &format!("{peer}/30"), "dev", &inner_name])
                .and_then(|()| ip(&["link", "set", &inner_name, "up"]))
                .and_then(|()| ip(&["link", "set", "lo", "up"]));
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let _ = tid_tx.send(configured.and_then(|()| {
                runtime.as_ref().map(|_| 0).map_err(|e| Error::Start {
                    component: "netns",
                    message: format!("build the namespace's runtime: {e}"),
                })
            }));
            let Ok(runtime) = runtime else { return };
            while let Ok(job) = jobs_rx.recv() {
                runtime.block_on(job());
            }
        });
        let netns = Self {
            host,
            jobs: Some(jobs_tx),
            thread: Some(thread),
        };
        let gone = || Error::Start {
            component: "netns",
            message: "the namespace thread ended".into(),
        };
        let tid = tid_rx.recv().map_err(|_| gone())??;
        let tid = tid.to_string();
        ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner])?;
        let host_side = ip(&["link", "set", &inner, "netns", &tid])
            .and_then(|()| ip(&["addr", "add", &format!("{host}/30"), "dev", &outer]))
            .and_then(|()| ip(&["link", "set", &outer, "up"]));
        if let Err(e) = host_side {
            let _ = ip(&["link", "del", &outer]);
            return Err(e);
        }
        go_tx.send(()).map_err(|_| gone())?;
        tid_rx.recv().map_err(|_| gone())??;
        Ok(netns)
    }

    /// The host's address as seen from inside (bind a server here to be reachable from it).
    pub fn host_addr(&self) -> Ipv4Addr {
        self.host
    }

    /// Runs `job`'s future on the namespace's thread after the jobs before it; the receiver
    /// gets its output (or an error if the namespace is gone).
    pub fn spawn<T, F, Fut>(&self, job: F) -> oneshot::Receiver<T>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(job().await);
            })
        });
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
        rx
    }
}

impl Netns {
    /// A cluster-proxy tunnel server on the host's address here, trusting `hub`'s CA for agents,
    /// and `cluster`'s agent inside the namespace, with the credential the hub issues for it,
    /// dialing only `target` (`host:port` of the cluster's apiserver, inside).
    pub async fn tunnel_from(
        &self,
        hub: &flotilla_localenv::ControlPlane,
        cluster: &str,
        target: &str,
    ) -> Result<(TunnelServer, TunnelAgent)> {
        let host = self.host_addr();
        let serving = hub.issue_serving("tunnel", &[std::net::IpAddr::V4(host)])?;
        let server = TunnelServer::start(host, hub.ca_pem(), &serving, hub.ca_pem(), ADDON)?;
        let (common_name, group) = agent_subject(cluster);
        let credential = hub.issue_client(&common_name, &[&group])?;
        let (url, ca, target) = (server.agent_url(), server.ca_pem().to_owned(), target.to_owned());
        let agent = self
            .spawn(move || async move { TunnelAgent::start(&url, &ca, &credential, &target) })
            .await
            .map_err(|_| Error::Start {
                component: "netns",
                message: "the namespace's thread is gone".into(),
            })??;
        Ok((server, agent))
    }
}

/// The common name and group of `cluster`'s cluster-proxy agent credential (OCM's default
/// add-on subject), which the tunnel server keys the tunnel by.
pub fn agent_subject(cluster: &str) -> (String, String) {
    let group = format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}");
    (format!("{group}:agent:{ADDON}"), group)
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The thread ends after its current job; it is not joined, so a job that never ends
        // (a test that forgot to stop it) does not hang the test.
        self.jobs.take();
        self.thread.take();
    }
}
