//! Prints how registration scales: time from join to Available for 1, 10 and 100 agents against
//! one hub, the hub process's CPU and memory, and apiserver requests per cluster per minute in
//! steady state. Asserts nothing.
//!
//! The hub runs as the real `flotilla hub` process (its CPU and memory are its own) under an
//! identity of its own; the agents run in this process, all on one managed control plane, each
//! in its own agent namespace. The benchmark approves join CSRs as an admin running `flotilla
//! accept` would, with a reason of its own, so the hub controller's reason never appears on a
//! request it did not approve. Steady-state requests are counted per client from the hub
//! apiserver's own API Priority and Fairness metrics: the benchmark installs one FlowSchema for
//! the hub's identity and one for the agents' groups, so each client's requests land in a flow
//! schema of its own.
//!
//! Then the hub apiserver is stopped for `OUTAGE` and started again: requests per cluster per
//! minute by client in the `AFTER_OUTAGE` that follow (retries back off with jitter, so they
//! do not arrive together). Last, one cluster's agent floods the hub with CSRs (`FLOOD_CSRS` of them, each carrying
//! `FLOOD_ANNOTATION_BYTES` of annotations, half labelled as add-on CSRs): the hub's RSS before
//! and after, and how many of them the hub decided on (approved) while they came in.
//!
//! `cargo build --release -p flotilla && cargo run --release -p flotilla-tests --bin bench-registration -- [COUNTS] [STEADY_SECONDS]`
//! (defaults `1,10,100` and 60).

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use flotilla_api::cluster::{consts::managed_cluster as mc, v1::ManagedCluster};
use flotilla_core::conditions;
use flotilla_registration::{agent, hub, names};
use flotilla_testing::ControlPlane;
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Namespace, Secret},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// The hub's identity in this benchmark.
const HUB_USER: &str = "flotilla-bench-hub";
/// How long the hub apiserver is down in the outage phase…
const OUTAGE: Duration = Duration::from_secs(30);
/// …and how long its requests are counted once it is back.
const AFTER_OUTAGE: Duration = Duration::from_secs(60);
/// CSRs in the flood.
const FLOOD_CSRS: usize = 500;
/// Annotation bytes per flood CSR (the apiserver takes up to 256 KiB).
const FLOOD_ANNOTATION_BYTES: usize = 200 * 1024;
/// Flow schemas that sort the hub apiserver's requests by client: (flow schema, who).
const CLIENTS: &[(&str, &str)] = &[
    ("bench-hub", "hub (flotilla hub)"),
    ("bench-agents", "agents (registration)"),
    ("kube-controller-manager", "controller manager"),
    (
        "kube-system-service-accounts",
        "controller manager (service accounts)",
    ),
];

/// `apiserver_flowcontrol_dispatched_requests_total` on the hub, summed per flow schema.
async fn requests_by_flow_schema(client: &Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("read hub /metrics")?;
    let mut totals = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_flowcontrol_dispatched_requests_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let schema = labels
            .split(',')
            .find_map(|label| label.strip_prefix("flow_schema=\""))
            .map(|v| v.trim_end_matches('"').to_owned());
        if let (Some(schema), Ok(value)) = (schema, value.trim().parse::<f64>()) {
            *totals.entry(schema).or_insert(0.0) += value;
        }
    }
    Ok(totals)
}

/// Installs the benchmark's flow schemas: the hub's user and the agents' groups (bootstrap and
/// accepted) each get one, at a precedence before the built-in catch-alls.
async fn install_flow_schemas(hub: &Client) -> anyhow::Result<()> {
    use k8s_openapi::api::flowcontrol::v1::FlowSchema;
    let api: Api<FlowSchema> = Api::all(hub.clone());
    let rule = |subjects: serde_json::Value| {
        json!([{ "subjects": subjects,
                 "resourceRules": [{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                     "clusterScope": true, "namespaces": ["*"] }],
                 "nonResourceRules": [{ "verbs": ["*"], "nonResourceURLs": ["*"] }] }])
    };
    let schemas = [
        (
            "bench-hub",
            500,
            rule(json!([{ "kind": "User", "user": { "name": HUB_USER } }])),
        ),
        (
            "bench-agents",
            501,
            rule(json!([
                { "kind": "Group", "group": { "name": names::BOOTSTRAP_GROUP } },
                { "kind": "Group", "group": { "name": "system:open-cluster-management:managed-clusters" } },
            ])),
        ),
    ];
    for (name, precedence, rules) in schemas {
        let schema: FlowSchema = serde_json::from_value(json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": { "name": name },
            "spec": { "priorityLevelConfiguration": { "name": "workload-high" },
                      "matchingPrecedence": precedence, "rules": rules },
        }))?;
        flotilla_kube::apply::apply(&api, &schema).await?;
    }
    Ok(())
}

fn is_available(cluster: &ManagedCluster) -> bool {
    let conditions = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    conditions::is_true(conditions, mc::CONDITION_AVAILABLE)
        && conditions::is_true(conditions, mc::CONDITION_JOINED)
}

/// Gives bootstrap identities the bootstrap ClusterRole, as `flotilla init` does.
async fn prepare_hub(hub: &Client) -> anyhow::Result<()> {
    let roles: Api<ClusterRole> = Api::all(hub.clone());
    for role in hub::hub_cluster_roles() {
        flotilla_kube::apply::apply(&roles, &role).await?;
    }
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "bench-bootstrap" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names::BOOTSTRAP_CLUSTER_ROLE },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names::BOOTSTRAP_GROUP }]
    }))?;
    flotilla_kube::apply::apply(&Api::<ClusterRoleBinding>::all(hub.clone()), &binding).await?;
    // The hub's own identity: what it may do is not what this benchmark measures.
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "bench-hub" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": HUB_USER }]
    }))?;
    flotilla_kube::apply::apply(&Api::<ClusterRoleBinding>::all(hub.clone()), &binding).await?;
    install_flow_schemas(hub).await
}

/// Approves pending bootstrap CSRs and accepts their clusters until `total` are accepted.
async fn approver(hub: Client, prefix: String, total: usize) -> anyhow::Result<()> {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let clusters: Api<ManagedCluster> = Api::all(hub);
    loop {
        for csr in csrs.list(&ListParams::default()).await?.items {
            let pending = csr
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(|c| c.is_empty());
            let ours = csr
                .labels()
                .get("open-cluster-management.io/cluster-name")
                .is_some_and(|c| c.starts_with(&prefix));
            if pending
                && ours
                && csr
                    .spec
                    .username
                    .as_deref()
                    .is_some_and(|u| u.starts_with(names::BOOTSTRAP_USER_PREFIX))
            {
                let patch = json!({ "status": { "conditions": [{
                    "type": "Approved", "status": "True", "reason": "ApprovedByBenchmark",
                    "message": "approved by the registration benchmark, as an admin's `flotilla accept` would", "lastUpdateTime": k8s_openapi::jiff::Timestamp::now().to_string(),
                }]}});
                csrs.patch_approval(&csr.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        let mut accepted = 0;
        for cluster in clusters.list(&ListParams::default()).await?.items {
            if !cluster.name_any().starts_with(&prefix) {
                continue;
            }
            if cluster.spec.hub_accepts_client {
                accepted += 1;
            } else {
                let patch = json!({ "spec": { "hubAcceptsClient": true } });
                clusters
                    .patch(
                        &cluster.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
            }
        }
        if accepted >= total {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let counts: Vec<usize> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "1,10,100".into())
        .split(',')
        .map(|n| n.parse().context("counts are comma-separated numbers"))
        .collect::<anyhow::Result<_>>()?;
    let steady: u64 = std::env::args()
        .nth(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(60);
    let flotilla = std::env::current_exe()?.with_file_name("flotilla");
    if !flotilla.is_file() {
        bail!(
            "{} is missing: build it first with the same profile (cargo build --release -p flotilla)",
            flotilla.display()
        );
    }

    let (hub_cp, managed_cp) = tokio::join!(
        ControlPlane::start("bench-hub"),
        ControlPlane::start("bench-managed")
    );
    let (mut hub_cp, managed_cp) = (hub_cp?, managed_cp?);
    let hub_client = hub_cp.admin_client().await?;
    let managed = managed_cp.admin_client().await?;
    prepare_hub(&hub_client).await?;
    let hub_kubeconfig = tempfile::NamedTempFile::new()?;
    std::fs::write(hub_kubeconfig.path(), hub_cp.kubeconfig_for(HUB_USER, &[])?)?;
    let hub_process = flotilla_tests::KillOnDrop(
        Command::new(&flotilla)
            .args(["hub", "--disable-leader-election", "--kubeconfig"])
            .arg(hub_kubeconfig.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start flotilla hub")?,
    );
    let hub_pid = hub_process.0.id();
    let bootstrap = hub_cp.kubeconfig_for("system:bootstrap:bench", &[names::BOOTSTRAP_GROUP])?;
    let clusters: Api<ManagedCluster> = Api::all(hub_client.clone());
    let mut agents = Vec::new();
    let mut registered = 0usize;

    println!(
        "registration benchmark: hub {} / managed {}",
        hub_cp.server(),
        managed_cp.server()
    );
    for count in counts {
        let prefix = format!("bench{count}-");
        let started = Instant::now();
        for i in 0..count {
            let name = format!("{prefix}{i}");
            let namespace = format!("agent-{name}");
            let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": namespace } }))?;
            Api::<Namespace>::all(managed.clone())
                .create(&PostParams::default(), &ns)
                .await?;
            let mut secret: Secret = serde_json::from_value(json!({
                "metadata": { "name": names::BOOTSTRAP_SECRET, "namespace": namespace }
            }))?;
            secret.data = Some(
                [(
                    names::KUBECONFIG_KEY.to_owned(),
                    ByteString(bootstrap.clone().into_bytes()),
                )]
                .into(),
            );
            Api::<Secret>::namespaced(managed.clone(), &namespace)
                .create(&PostParams::default(), &secret)
                .await?;
            let options = agent::AgentOptions {
                cluster_name: Some(name),
                agent_namespace: namespace,
                ..Default::default()
            };
            agents.push(tokio::spawn(agent::run(managed.clone(), options)));
        }
        let approving = tokio::spawn(approver(hub_client.clone(), prefix.clone(), count));
        let cpu_before = flotilla_tests::process_usage(hub_pid).0;
        let mut ready_at: Vec<Duration> = Vec::new();
        let deadline = started + Duration::from_secs(600);
        while ready_at.len() < count {
            if Instant::now() > deadline {
                bail!(
                    "only {} of {count} clusters available after 10 minutes",
                    ready_at.len()
                );
            }
            let available = clusters
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|c| c.name_any().starts_with(&prefix) && is_available(c))
                .count();
            while ready_at.len() < available {
                ready_at.push(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        approving.await??;
        registered += count;
        let (cpu_after, rss) = flotilla_tests::process_usage(hub_pid);
        let pick =
            |q: f64| ready_at[((ready_at.len() as f64 * q).ceil() as usize).clamp(1, ready_at.len()) - 1];
        println!(
            "{count:>4} agents: join→Available p50 {:.2}s, p90 {:.2}s, all {:.2}s; hub CPU {:.2}s during join, hub RSS {rss} MiB",
            pick(0.5).as_secs_f64(),
            pick(0.9).as_secs_f64(),
            pick(1.0).as_secs_f64(),
            cpu_after - cpu_before
        );
    }

    let requests_before = requests_by_flow_schema(&hub_client).await?;
    let cpu_before = flotilla_tests::process_usage(hub_pid).0;
    tokio::time::sleep(Duration::from_secs(steady)).await;
    let requests_after = requests_by_flow_schema(&hub_client).await?;
    let (cpu_after, rss) = flotilla_tests::process_usage(hub_pid);
    let minutes = steady as f64 / 60.0;
    let per_cluster_minute = |schema: &str| {
        let delta = requests_after.get(schema).copied().unwrap_or(0.0)
            - requests_before.get(schema).copied().unwrap_or(0.0);
        delta / registered.max(1) as f64 / minutes
    };
    println!(
        "steady state, {registered} clusters over {steady}s: hub CPU {:.1}% of a core, hub RSS {rss} MiB; \
         hub apiserver requests per cluster per minute, by client (flow schema):",
        100.0 * (cpu_after - cpu_before) / steady as f64
    );
    let mut counted = 0.0;
    for (schema, who) in CLIENTS {
        let rate = per_cluster_minute(schema);
        counted += rate;
        println!("  {who:<40} {rate:>6.2}   ({schema})");
    }
    let all: f64 = requests_after
        .keys()
        .map(|schema| per_cluster_minute(schema))
        .sum();
    println!(
        "  {:<40} {:>6.2}   (every other flow schema, incl. this benchmark's admin)",
        "others",
        all - counted
    );
    // An outage of the hub apiserver: what the hub and the agents ask of it once it is back
    // (its request counters start again at zero with it).
    hub_cp.stop_apiserver()?;
    tokio::time::sleep(OUTAGE).await;
    hub_cp.start_apiserver().await?;
    tokio::time::sleep(AFTER_OUTAGE).await;
    let after = requests_by_flow_schema(&hub_client).await?;
    println!(
        "after a {}s hub apiserver outage, its first {}s back: requests per cluster per minute, by client:",
        OUTAGE.as_secs(),
        AFTER_OUTAGE.as_secs()
    );
    let minutes = AFTER_OUTAGE.as_secs_f64() / 60.0;
    for (schema, who) in CLIENTS {
        let rate = after.get(*schema).copied().unwrap_or(0.0) / registered.max(1) as f64 / minutes;
        println!("  {who:<40} {rate:>6.2}   ({schema})");
    }
    csr_flood(
        &hub_cp,
        &hub_client,
        hub_pid,
        clusters.list(&Default::default()).await?.items,
    )
    .await?;
    for agent in agents {
        agent.abort();
    }
    drop(hub_process);
    Ok(())
}

/// Floods the hub with CSRs from the first registered cluster's agent and prints what the hub
/// kept of them (its RSS) and how many it approved.
async fn csr_flood(
    hub_cp: &ControlPlane,
    hub: &Client,
    hub_pid: u32,
    registered: Vec<ManagedCluster>,
) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let Some(cluster) = registered.first().map(ResourceExt::name_any) else {
        return Ok(());
    };
    let agent_user = names::agent_user(&cluster, "bench-flooder");
    let group = names::cluster_group(&cluster);
    let flooder = hub_cp
        .client_for(&agent_user, &[&group, names::MANAGED_CLUSTERS_GROUP])
        .await?;
    let request =
        flotilla_core::x509::client_request(&agent_user, &[&group, names::MANAGED_CLUSTERS_GROUP], &[], &[])?;
    let (_, rss_before) = flotilla_tests::process_usage(hub_pid);
    let padding = "x".repeat(FLOOD_ANNOTATION_BYTES);
    let started = Instant::now();
    let csrs: Api<CertificateSigningRequest> = Api::all(flooder);
    let created = futures::stream::iter(0..FLOOD_CSRS)
        .map(|i| {
            let csrs = csrs.clone();
            let mut labels = json!({ "open-cluster-management.io/cluster-name": cluster });
            if i % 2 == 1 {
                labels["open-cluster-management.io/addon-name"] = json!("bench");
            }
            let csr: CertificateSigningRequest = serde_json::from_value(json!({
                "metadata": { "generateName": "flood-", "labels": labels, "annotations": { "flood": padding } },
                "spec": {
                    "request": ByteString(request.request_pem.clone().into_bytes()),
                    "signerName": names::KUBE_APISERVER_CLIENT_SIGNER,
                    "usages": ["digital signature", "key encipherment", "client auth"],
                }
            }))
            .expect("a CSR");
            async move { csrs.create(&PostParams::default(), &csr).await.is_ok() }
        })
        .buffer_unordered(16)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (_, rss_after) = flotilla_tests::process_usage(hub_pid);
    let all: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let flood = all.list(&ListParams::default()).await?.items;
    let flood: Vec<_> = flood
        .iter()
        .filter(|c| c.metadata.generate_name.as_deref() == Some("flood-"))
        .collect();
    let approved = flood
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Approved"))
        })
        .count();
    println!(
        "CSR flood from one cluster's agent: {created} CSRs of {} KiB in {:.1} s; hub RSS {rss_before} MiB before, \
         {rss_after} MiB 10 s after; {approved} approved",
        FLOOD_ANNOTATION_BYTES / 1024,
        took.as_secs_f64()
    );
    for csr in flood {
        all.delete(&csr.name_any(), &Default::default()).await?;
    }
    Ok(())
}
