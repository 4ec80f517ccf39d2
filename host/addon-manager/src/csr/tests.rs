//! The verdict on add-on CSRs with real plugin components: a hostile `approve-csr` (trap,
//! endless loop) never approves a CSR the host's checks pass, and the host's checks refuse a
//! forged CSR before an approving plugin is asked. The host rules themselves are tabled in
//! `flotilla_core::addon::registration`; the controller end to end in
//! `tests/registration_csr.rs`.

#![allow(clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use flotilla_api::addon::v1alpha1::RegistrationConfig;
use flotilla_core::addon::registration::{CsrFacts, Declared, default_subject, registrations};
use flotilla_wasm::types::{Addon, Cluster, Csr};
use flotilla_wasm::{Limits, PluginRegistry, Runtime, RuntimeConfig};

use super::reconcile::{PluginCall, Refusal, decide};

async fn plugin(addon: &str, path: &str) -> std::sync::Arc<flotilla_wasm::Plugin> {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let registry = PluginRegistry::new(runtime);
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    registry
        .install(addon, std::fs::read(path).expect("plugin built"), limits)
        .await
        .expect("plugin loads")
}

fn regs() -> Vec<RegistrationConfig> {
    registrations(&[Declared::KubeClient(None)], "c1", "hello").expect("default registration")
}

struct Request {
    username: String,
    groups: Vec<String>,
    cn: String,
    orgs: Vec<String>,
}

impl Request {
    fn agents_own() -> Self {
        let s = default_subject("c1", "hello");
        Self {
            username: "system:open-cluster-management:c1:agent1".into(),
            groups: vec!["system:open-cluster-management:c1".into()],
            cn: s.user,
            orgs: s.groups,
        }
    }
    fn facts(&self) -> CsrFacts<'_> {
        CsrFacts {
            cluster_label: Some("c1"),
            addon_label: Some("hello"),
            username: &self.username,
            groups: &self.groups,
            signer_name: "kubernetes.io/kube-apiserver-client",
            common_name: &self.cn,
            organizations: &self.orgs,
            organizational_units: &[],
        }
    }
    fn csr(&self) -> Csr {
        Csr {
            name: "addon-c1-hello-x".into(),
            signer_name: "kubernetes.io/kube-apiserver-client".into(),
            username: self.username.clone(),
            groups: self.groups.clone(),
            common_name: self.cn.clone(),
            organizations: self.orgs.clone(),
            organizational_units: Vec::new(),
            dns_names: vec!["hello.addon.open-cluster-management.io".into()],
            usages: vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ],
            request_pem: String::new(),
        }
    }
}

fn inputs() -> (Cluster, Addon) {
    (
        Cluster {
            name: "c1".into(),
            labels: Vec::new(),
            annotations: Vec::new(),
            claims: Vec::new(),
            kubernetes_version: String::new(),
        },
        Addon {
            name: "hello".into(),
            install_namespace: "open-cluster-management-agent-addon".into(),
            annotations: Vec::new(),
        },
    )
}

#[tokio::test]
async fn hostile_approve_csr_plugins_never_approve_a_csr_the_host_accepts() {
    let request = Request::agents_own();
    let regs = regs();
    let (cluster, addon) = inputs();
    let csr = request.csr();
    for (what, path) in [
        ("trap", flotilla_test_plugins::HOSTILE_TRAP),
        ("loop", flotilla_test_plugins::HOSTILE_LOOP),
    ] {
        let plugin = plugin("hello", path).await;
        let call = PluginCall {
            plugin: &plugin,
            cluster: &cluster,
            addon: &addon,
            csr: &csr,
        };
        let verdict = decide(&request.facts(), Some(&regs), "hello", Some(call)).await;
        match verdict {
            Err(Refusal::Plugin(reason)) => assert!(reason.contains("plugin fault"), "{what}: {reason}"),
            other => panic!("{what}: expected a plugin refusal, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_default_approver_approves_the_agents_own_csr_and_forgeries_never_reach_it() {
    let regs = regs();
    let (cluster, addon) = inputs();
    let plugin = plugin("hello", flotilla_test_plugins::HELLOWORLD).await;
    let good = Request::agents_own();
    let csr = good.csr();
    let call = PluginCall {
        plugin: &plugin,
        cluster: &cluster,
        addon: &addon,
        csr: &csr,
    };
    assert_eq!(
        decide(&good.facts(), Some(&regs), "hello", Some(call)).await,
        Ok(())
    );

    let forged = Request {
        username: "system:bootstrap:abcdef".into(),
        groups: vec!["system:bootstrappers:managedcluster".into()],
        ..Request::agents_own()
    };
    let csr = forged.csr();
    let call = PluginCall {
        plugin: &plugin,
        cluster: &cluster,
        addon: &addon,
        csr: &csr,
    };
    assert!(matches!(
        decide(&forged.facts(), Some(&regs), "hello", Some(call)).await,
        Err(Refusal::Host(_))
    ));
    assert_eq!(
        decide(&good.facts(), Some(&regs), "hello", None).await,
        Err(Refusal::NoPlugin("hello".into()))
    );
}
