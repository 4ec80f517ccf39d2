//! Makes the `kubernetes` Service of a local cluster reach its apiserver from the pods of local
//! nodes, without kube-proxy.
//!
//! ```text
//!   pod 10.244.N.x ──▶ <service address>:443 ──(nat PREROUTING, -i flt+, DNAT)──▶ 127.0.0.1:<apiserver port>
//!   host process   ──▶ <service address>:443 ──(nat OUTPUT, DNAT)──────────────▶ 127.0.0.1:<apiserver port>
//! ```
//!
//! Every apiserver listens on loopback only, so the DNAT needs `route_localnet` on the node's
//! bridge. That setting alone would let a pod reach *any* loopback listener (another cluster's
//! etcd, the registry) by sending packets to 127.0.0.1 through its gateway; [`loopback_guard`]
//! drops every packet from the bridge to 127.0.0.0/8 that this DNAT did not produce, so a pod
//! reaches exactly the apiservers routed here.
//!
//! Each owner appends its own copy of a rule and deletes one copy when its [`Rules`] is dropped,
//! so two nodes that route the same hub never take each other's route away. Every rule carries
//! [`RULE_COMMENT`]; a node records its rules so that those of a killed process are removed by
//! the next node that starts (see `crate::node`).

use std::net::Ipv4Addr;

use crate::{
    controlplane::ControlPlane,
    error::{Error, Result},
    processes,
};

/// The comment on every rule added here.
pub const RULE_COMMENT: &str = "flotilla local node";
/// The name prefix of node bridges, which the routing rules match (`-i flt+`).
pub const BRIDGE_PREFIX: &str = "flt";

/// One iptables rule: table, chain and the rule's specification.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    /// `nat` or `filter`.
    pub table: String,
    /// The chain it is in.
    pub chain: String,
    /// Its match and target arguments.
    pub spec: Vec<String>,
}

/// iptables rules owned by this process, deleted on drop (newest first).
#[derive(Debug, Default)]
pub struct Rules {
    added: Vec<Rule>,
}

impl Rules {
    /// Appends (`-A`) or, with `first`, inserts (`-I`) this owner's copy of `spec` into `chain`
    /// of `table`.
    fn add(&mut self, table: &str, chain: &str, spec: &[String], first: bool) -> Result<()> {
        let mut spec = spec.to_vec();
        spec.extend(["-m", "comment", "--comment", RULE_COMMENT].map(String::from));
        iptables(table, if first { "-I" } else { "-A" }, chain, &spec)?;
        self.added.push(Rule {
            table: table.to_owned(),
            chain: chain.to_owned(),
            spec,
        });
        Ok(())
    }

    /// The rules, oldest first.
    pub fn rules(&self) -> &[Rule] {
        &self.added
    }

    /// Takes over `rules` that another process added (and recorded), to delete them on drop.
    pub fn adopt(rules: Vec<Rule>) -> Self {
        Self { added: rules }
    }
}

impl Rules {
    /// Leaves the rules in place when this is dropped (their owner records them elsewhere).
    pub fn keep(mut self) {
        self.added.clear();
    }
}

impl Drop for Rules {
    fn drop(&mut self) {
        for rule in self.added.drain(..).rev() {
            // Deletes one copy: another owner's identical rule stays.
            if let Err(e) = iptables(&rule.table, "-D", &rule.chain, &rule.spec) {
                tracing::warn!(error = %e, "remove a local node's iptables rule");
            }
        }
    }
}

/// Routes `cp`'s `kubernetes` Service address (port 443) to its apiserver, for pods on every
/// node bridge and for processes on this host.
pub fn route_kubernetes_service(cp: &ControlPlane) -> Result<Rules> {
    route(
        &format!("{BRIDGE_PREFIX}+"),
        (cp.service_address(), 443),
        cp.port(),
    )
}

/// Routes `address:port` to the loopback listener on `port` for pods on `bridge` only, and for
/// processes on this host: how one node's pods reach the local registry (the hub's plugin
/// pulls), while other nodes' pods do not.
pub fn route_loopback_port(bridge: &str, address: Ipv4Addr, port: u16) -> Result<Rules> {
    route(bridge, (address, port), port)
}

fn route(bridges: &str, (service, service_port): (Ipv4Addr, u16), loopback_port: u16) -> Result<Rules> {
    let mut rules = Rules::default();
    let dnat = |from_bridges: bool| -> Vec<String> {
        let mut spec = Vec::new();
        if from_bridges {
            spec.extend(["-i".to_owned(), bridges.to_owned()]);
        }
        spec.extend(
            [
                "-d",
                &format!("{service}/32"),
                "-p",
                "tcp",
                "--dport",
                &service_port.to_string(),
                "-j",
                "DNAT",
                "--to-destination",
                &format!("127.0.0.1:{loopback_port}"),
            ]
            .map(String::from),
        );
        spec
    };
    rules.add("nat", "PREROUTING", &dnat(true), false)?;
    rules.add("nat", "OUTPUT", &dnat(false), false)?;
    Ok(rules)
}

/// Drops packets from `bridge` to loopback addresses unless a DNAT of [`route_kubernetes_service`]
/// or [`route_loopback_port`] rewrote them: what `route_localnet` would otherwise let pods reach.
pub fn loopback_guard(bridge: &str) -> Result<Rules> {
    let mut rules = Rules::default();
    let spec = [
        "-i",
        bridge,
        "-d",
        "127.0.0.0/8",
        "-m",
        "conntrack",
        "!",
        "--ctstate",
        "DNAT",
        "-j",
        "DROP",
    ]
    .map(String::from);
    rules.add("filter", "INPUT", &spec, true)?;
    Ok(rules)
}

fn iptables(table: &str, action: &str, chain: &str, spec: &[String]) -> Result<()> {
    // `-w`: several nodes may change rules at once; wait for the lock instead of failing.
    let mut args = vec!["-w", "-t", table, action, chain];
    args.extend(spec.iter().map(String::as_str));
    processes::run_tool("iptables", "iptables", &args)
        .map(drop)
        .map_err(Error::Route)
}
