//! The fixed loopback ports of a local environment, laid out from one base port so that
//! addresses are predictable and can be checked before anything starts:
//!
//! ```text
//!   base + 0..=2     hub: kube-apiserver, etcd, etcd peer
//!   base + 3         OCI registry
//!   base + 4         hub webhook server
//!   base + 5         hub metrics and health endpoint
//!   base + 6         cluster-proxy tunnel server (agents)
//!   base + 7         cluster gateway
//!   base + 8         cluster gateway metrics and health endpoint
//!   base + 10·i + 0..=2   cluster i (1-based): kube-apiserver, etcd, etcd peer
//! ```

use std::net::{Ipv4Addr, TcpListener};

use crate::{
    controlplane::Ports,
    error::{Error, Result},
};

/// The ports of an environment with a hub and some managed clusters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    base: u16,
    clusters: u16,
}

impl Layout {
    /// The layout from `base` for `clusters` managed clusters; fails when the last port would
    /// pass 65535 or `base` is a privileged port.
    pub fn new(base: u16, clusters: u16) -> Result<Self> {
        if base < 1024 {
            return Err(Error::State(format!(
                "base port {base} is privileged; choose one from 1024 up"
            )));
        }
        let last = u32::from(base) + 10 * u32::from(clusters) + 2;
        if last > u32::from(u16::MAX) {
            return Err(Error::State(format!(
                "base port {base} with {clusters} clusters needs ports up to {last}, past 65535; choose a lower base"
            )));
        }
        Ok(Self { base, clusters })
    }

    /// The hub control plane's ports.
    pub fn hub(&self) -> Ports {
        self.control_plane(0)
    }

    /// The ports of managed cluster `index` (1-based).
    pub fn cluster(&self, index: u16) -> Ports {
        self.control_plane(index)
    }

    fn control_plane(&self, slot: u16) -> Ports {
        let first = self.base + 10 * slot;
        Ports {
            apiserver: first,
            etcd: first + 1,
            etcd_peer: first + 2,
        }
    }

    /// The OCI registry's port.
    pub fn registry(&self) -> u16 {
        self.base + 3
    }

    /// The hub webhook server's port.
    pub fn webhook(&self) -> u16 {
        self.base + 4
    }

    /// The hub's metrics and health endpoint (`/metrics`, `/healthz`, `/readyz`).
    pub fn hub_ops(&self) -> u16 {
        self.base + 5
    }

    /// The cluster-proxy tunnel server's port for agents.
    pub fn tunnel(&self) -> u16 {
        self.base + 6
    }

    /// The cluster gateway's port.
    pub fn gateway(&self) -> u16 {
        self.base + 7
    }

    /// The cluster gateway's metrics and health endpoint.
    pub fn gateway_ops(&self) -> u16 {
        self.base + 8
    }

    /// Every port with what uses it, hub first.
    pub fn all(&self) -> Vec<(String, u16)> {
        let mut all = Vec::new();
        let mut push_cp = |name: &str, ports: Ports| {
            all.push((format!("{name} kube-apiserver"), ports.apiserver));
            all.push((format!("{name} etcd"), ports.etcd));
            all.push((format!("{name} etcd peer"), ports.etcd_peer));
        };
        push_cp("hub", self.hub());
        for i in 1..=self.clusters {
            push_cp(&format!("cluster{i}"), self.cluster(i));
        }
        all.push(("registry".to_owned(), self.registry()));
        all.push(("hub webhook".to_owned(), self.webhook()));
        all.push(("hub metrics and health".to_owned(), self.hub_ops()));
        all.push(("cluster-proxy tunnel server".to_owned(), self.tunnel()));
        all.push(("cluster gateway".to_owned(), self.gateway()));
        all.push((
            "cluster gateway metrics and health".to_owned(),
            self.gateway_ops(),
        ));
        all.sort_by_key(|(_, port)| *port);
        all
    }
}

/// The entries of `ports` that cannot be bound on 127.0.0.1 right now (something else listens).
pub fn busy(ports: &[(String, u16)]) -> Vec<(String, u16)> {
    ports
        .iter()
        .filter(|(_, port)| TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).is_err())
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::default_two_clusters(17400, 2, &[17400, 17401, 17402, 17403, 17404, 17405, 17406, 17407, 17408, 17410, 17411, 17412, 17420, 17421, 17422])]
    #[case::hub_only(20000, 0, &[20000, 20001, 20002, 20003, 20004, 20005, 20006, 20007, 20008])]
    #[case::three_clusters(30000, 3, &[30000, 30001, 30002, 30003, 30004, 30005, 30006, 30007, 30008, 30010, 30011, 30012, 30020, 30021, 30022, 30030, 30031, 30032])]
    fn ports_are_laid_out_from_the_base_without_overlap(
        #[case] base: u16,
        #[case] clusters: u16,
        #[case] expected: &[u16],
    ) {
        let layout = Layout::new(base, clusters).unwrap();
        let ports: Vec<u16> = layout.all().into_iter().map(|(_, p)| p).collect();
        assert_eq!(ports, expected);
    }

    #[rstest]
    #[case::privileged(80, 2, "privileged")]
    #[case::past_the_last_port(65500, 4, "past 65535")]
    fn a_base_that_cannot_hold_the_layout_is_refused(
        #[case] base: u16,
        #[case] clusters: u16,
        #[case] why: &str,
    ) {
        let error = Layout::new(base, clusters).unwrap_err().to_string();
        assert!(error.contains(why), "{error}");
    }

    #[test]
    fn a_port_something_listens_on_is_busy() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let taken = listener.local_addr().unwrap().port();
        let free = {
            let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            probe.local_addr().unwrap().port()
        };
        let found = busy(&[("taken".to_owned(), taken), ("free".to_owned(), free)]);
        assert_eq!(found, [("taken".to_owned(), taken)]);
    }
}
