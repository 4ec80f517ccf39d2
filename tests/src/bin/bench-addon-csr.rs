//! Prints add-on CSR approval throughput on the hub, in one run: the decision the add-on CSR
//! controller makes for each CSR (parse the PEM request, the host's checks, then helloworld's
//! `approve-csr`) through the plugin host — sequentially and with one call in flight per core
//! — against the same checks with helloworld's approver compiled natively; and custom-signer
//! signing (ECDSA P-256 CA, 24 h client certificate) per second. The apiserver round trips
//! (watch, `/approval` update) are the same either way and are left out. Asserts nothing.
//!
//! `cargo run --release -p flotilla-tests --bin bench-addon-csr -- [CSRS]`

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use flotilla_addon_sdk::Addon as _;
use flotilla_api::addon::v1alpha1::RegistrationConfig;
use flotilla_core::addon::registration::{
    CUSTOM_SIGNER_LIFETIME, CsrFacts, Declared, check_csr, registrations, sign_client_certificate,
};
use flotilla_core::x509;
use flotilla_wasm::types::{Addon, Cluster, Csr, CsrDecision};
use flotilla_wasm::{Limits, Plugin, Runtime, RuntimeConfig};

const CLUSTER: &str = "cluster1";
const ADDON: &str = "helloworld";
const AGENT: &str = "system:open-cluster-management:cluster1:agent1";

/// One CSR as the klusterlet makes it for helloworld's default registration.
struct Request {
    pem: String,
    groups: Vec<String>,
}

fn request(regs: &[RegistrationConfig]) -> anyhow::Result<Request> {
    let subject = &regs[0].subject;
    let groups: Vec<&str> = subject.groups.iter().map(String::as_str).collect();
    let made = x509::client_request(
        &subject.user,
        &groups,
        &[],
        &["helloworld.addon.open-cluster-management.io"],
    )?;
    Ok(Request {
        pem: made.request_pem,
        groups: vec![
            "system:open-cluster-management:cluster1".into(),
            "system:authenticated".into(),
        ],
    })
}

/// Parse + host checks; the parsed request for the approver.
fn host_checks(request: &Request, regs: &[RegistrationConfig]) -> anyhow::Result<x509::RequestInfo> {
    let info = x509::parse_request(request.pem.as_bytes())?;
    let facts = CsrFacts {
        cluster_label: Some(CLUSTER),
        addon_label: Some(ADDON),
        username: AGENT,
        groups: &request.groups,
        signer_name: "kubernetes.io/kube-apiserver-client",
        common_name: &info.subject.common_name,
        organizations: &info.subject.organizations,
        organizational_units: &info.subject.organizational_units,
    };
    check_csr(&facts, Some(regs)).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(info)
}

fn wasm_csr(request: &Request, info: x509::RequestInfo) -> Csr {
    Csr {
        name: "addon-cluster1-helloworld-bench".into(),
        signer_name: "kubernetes.io/kube-apiserver-client".into(),
        username: AGENT.into(),
        groups: request.groups.clone(),
        common_name: info.subject.common_name,
        organizations: info.subject.organizations,
        organizational_units: info.subject.organizational_units,
        dns_names: info.dns_names,
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ],
        request_pem: request.pem.clone(),
    }
}

fn inputs() -> (Cluster, Addon) {
    (
        Cluster {
            name: CLUSTER.into(),
            labels: Vec::new(),
            annotations: Vec::new(),
            claims: Vec::new(),
            kubernetes_version: String::new(),
        },
        Addon {
            name: ADDON.into(),
            install_namespace: "open-cluster-management-agent-addon".into(),
            annotations: Vec::new(),
        },
    )
}

async fn through_plugin(
    plugin: &Plugin,
    request: &Request,
    regs: &[RegistrationConfig],
) -> anyhow::Result<()> {
    let info = host_checks(request, regs)?;
    let (cluster, addon) = inputs();
    match plugin
        .approve_csr(&cluster, &addon, &wasm_csr(request, info))
        .await
    {
        CsrDecision::Approve => Ok(()),
        CsrDecision::Deny(reason) => anyhow::bail!("denied: {reason}"),
    }
}

fn native(request: &Request, regs: &[RegistrationConfig]) -> anyhow::Result<()> {
    let info = host_checks(request, regs)?;
    let cluster = flotilla_addon_sdk::Cluster::new(CLUSTER);
    let addon = flotilla_addon_sdk::AddOn::new(ADDON, "open-cluster-management-agent-addon");
    let csr = flotilla_addon_sdk::Csr {
        name: "addon-cluster1-helloworld-bench".into(),
        signer_name: "kubernetes.io/kube-apiserver-client".into(),
        username: AGENT.into(),
        groups: request.groups.clone(),
        common_name: info.subject.common_name,
        organizations: info.subject.organizations,
        organizational_units: info.subject.organizational_units,
        dns_names: info.dns_names,
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ],
        request_pem: request.pem.clone(),
    };
    match helloworld::HelloWorld::approve_csr(&cluster, &addon, &csr) {
        flotilla_addon_sdk::CsrDecision::Approve => Ok(()),
        flotilla_addon_sdk::CsrDecision::Deny(reason) => anyhow::bail!("denied natively: {reason}"),
    }
}

fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let csrs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000);
    let regs = registrations(&[Declared::KubeClient(None)], CLUSTER, ADDON)?;
    let request = Arc::new(request(&regs)?);
    let regs = Arc::new(regs);

    let runtime = Runtime::new(RuntimeConfig::default())?;
    let registry = flotilla_wasm::PluginRegistry::new(runtime);
    let bytes = std::fs::read(flotilla_test_plugins::HELLOWORLD)?;
    let plugin = registry.install(ADDON, bytes, Limits::default()).await?;
    through_plugin(&plugin, &request, &regs).await?; // warm-up

    let started = Instant::now();
    for _ in 0..csrs {
        native(&request, &regs)?;
    }
    let native_rate = per_second(csrs, started.elapsed());

    let started = Instant::now();
    for _ in 0..csrs {
        through_plugin(&plugin, &request, &regs).await?;
    }
    let plugin_rate = per_second(csrs, started.elapsed());

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..cores {
        let (plugin, request, regs) = (Arc::clone(&plugin), Arc::clone(&request), Arc::clone(&regs));
        let share = csrs / cores + usize::from(worker < csrs % cores);
        tasks.push(tokio::spawn(async move {
            for _ in 0..share {
                through_plugin(&plugin, &request, &regs).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let parallel_rate = per_second(csrs, started.elapsed());

    let ca = flotilla_testing::pki::CertificateAuthority::new("bench CA")?;
    let signs = csrs.min(500);
    let started = Instant::now();
    for _ in 0..signs {
        sign_client_certificate(
            request.pem.as_bytes(),
            ca.cert_pem().as_bytes(),
            ca.key_pem().as_bytes(),
            SystemTime::now(),
            CUSTOM_SIGNER_LIFETIME,
        )?;
    }
    let sign_rate = per_second(signs, started.elapsed());

    println!("add-on CSR decisions (parse + host checks + helloworld approve-csr), {csrs} CSRs:");
    println!("  native approver                       {native_rate:>10.0} CSRs/s");
    println!("  through the plugin, 1 in flight       {plugin_rate:>10.0} CSRs/s");
    println!("  through the plugin, {cores} in flight       {parallel_rate:>10.0} CSRs/s");
    println!(
        "  plugin / native                       {:>10.2}x slower",
        native_rate / plugin_rate
    );
    println!("custom-signer signing (P-256 CA, 24 h): {sign_rate:>10.0} certificates/s ({signs})");
    Ok(())
}
