//! Add-on lease health end to end: a hub and two managed clusters on their own control planes,
//! the real `flotilla hub` (as deploy/hub's service account), one real `flotilla klusterlet` per
//! cluster (cluster lease 3 s, add-on leases judged on a 2 s period, so stale after 10 s) and the
//! helloworld plugin from a real OCI registry. helloworld is enabled on both clusters and a real
//! `flotilla addon-agent` process per cluster renews Lease `helloworld`: `Available` True on
//! both; the agent on cluster2 is killed → False `ManagedClusterAddOnLeaseUpdateStopped`; its
//! lease deleted → Unknown `ManagedClusterAddOnLeaseNotFound`; cluster2's klusterlet killed →
//! the cluster goes Unknown and takes the add-on with it (the cluster's reason), and the
//! `feature.open-cluster-management.io/addon-helloworld` label says `unreachable` — while
//! cluster1's add-on stays True / `available` throughout.
//!
//! A second test gives `flotilla addon-agent --hub-kubeconfig-secret` an OCM-shaped
//! `helloworld-hub-kubeconfig` secret on a managed cluster whose own credential means nothing to
//! the hub: the lease it renews in the cluster namespace on the hub can only come from the
//! secret's credential.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, process::Command, time::Duration};

use common::{Fleet, Running, flotilla_at, klusterlet_pid, ok};
use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::conditions;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::DeleteParams;
use kube::{Api, Client, ResourceExt};

const TIMEOUT: Duration = Duration::from_secs(150);
const ADDON: &str = "helloworld";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Short cluster and add-on leases, so lost leases show within seconds.
const SHORT_LEASES: [&str; 4] = [
    "--lease-duration-seconds",
    "3",
    "--addon-lease-duration-seconds",
    "2",
];
const LABEL: &str = "feature.open-cluster-management.io/addon-helloworld";

/// Starts `flotilla addon-agent` for helloworld against the managed cluster of `kubeconfig`.
fn start_addon_agent(kubeconfig: &Path, log: &Path) -> Running {
    let file = std::fs::File::create(log).unwrap();
    Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["addon-agent", "--addon", ADDON, "--lease-seconds", "1"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    )
}

async fn available(hub: &Client, cluster: &str) -> Option<Condition> {
    let addon = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
        .get_opt(ADDON)
        .await
        .unwrap()?;
    conditions::find(&addon.status?.conditions, "Available").cloned()
}

/// Waits until helloworld's `Available` on `cluster` has `status` and `reason`, showing the
/// logs if it never does.
async fn await_available(state: &Path, hub: &Client, cluster: &str, status: &str, reason: &str) -> Condition {
    let what = format!("{ADDON} on {cluster} Available {status} {reason}");
    let result = wait::until(&what, TIMEOUT, || async {
        let found = available(hub, cluster).await;
        match found {
            Some(c) if c.status == status && c.reason == reason => Ok(Some(c)),
            other => Err(format!("Available is {other:?}")),
        }
    })
    .await;
    result.unwrap_or_else(|e| {
        let log = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        panic!(
            "{e}\nhub log:\n{}\nklusterlet log:\n{}",
            log(&state.join("hub.log")),
            log(&state.join("klusterlets").join(cluster).join("klusterlet.log"))
        )
    })
}

async fn await_label(hub: &Client, cluster: &str, value: &str) {
    let api: Api<ManagedCluster> = Api::all(hub.clone());
    wait::until(&format!("{cluster} label {LABEL}={value}"), TIMEOUT, || async {
        let found = api.get(cluster).await.unwrap();
        Ok::<_, String>((found.labels().get(LABEL).map(String::as_str) == Some(value)).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn addon_agents_renewing_their_leases_make_helloworld_available_and_silence_lost_leases_and_lost_clusters_show()
 {
    let fleet = Fleet::start("health", &SHORT_LEASES).await;
    let (hub, one, two) = (&fleet.hub, &fleet.one, &fleet.two);
    let (state, admin) = (fleet.state(), fleet.admin());
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "enable",
            "--names",
            ADDON,
            "--clusters",
            "cluster1,cluster2",
        ],
    ));

    let hub_client = hub.admin_client().await.unwrap();
    let (one_client, two_client) = (
        one.admin_client().await.unwrap(),
        two.admin_client().await.unwrap(),
    );
    // Deployed: the install namespace exists on both clusters, and nothing renews a lease yet.
    for (name, client) in [("cluster1", &one_client), ("cluster2", &two_client)] {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), INSTALL_NAMESPACE);
        wait::until(
            &format!("helloworld agent deployed on {name}"),
            TIMEOUT,
            || async { Ok::<_, kube::Error>(deployments.get_opt("helloworld-agent").await?.map(|_| ())) },
        )
        .await
        .unwrap();
        await_available(
            state,
            &hub_client,
            name,
            "Unknown",
            "ManagedClusterAddOnLeaseNotFound",
        )
        .await;
    }

    // The stand-in agents renew: Available on both, and the feature labels say so.
    let started = std::time::Instant::now();
    let agent1 = start_addon_agent(one.admin_kubeconfig(), &state.join("agent1.log"));
    let agent2 = start_addon_agent(two.admin_kubeconfig(), &state.join("agent2.log"));
    for name in ["cluster1", "cluster2"] {
        let up = await_available(
            state,
            &hub_client,
            name,
            "True",
            "ManagedClusterAddOnLeaseUpdated",
        )
        .await;
        assert_eq!(up.message, "helloworld add-on is available.");
        await_label(&hub_client, name, "available").await;
    }
    // A figure for the record, not a check: from the agents' start to Available on both.
    eprintln!(
        "addon-agent start to Available on 2 clusters: {:?}",
        started.elapsed()
    );

    // cluster2's agent dies: its lease goes stale.
    drop(agent2);
    await_available(
        state,
        &hub_client,
        "cluster2",
        "False",
        "ManagedClusterAddOnLeaseUpdateStopped",
    )
    .await;
    await_label(&hub_client, "cluster2", "unhealthy").await;

    // Its lease is deleted: not found.
    Api::<Lease>::namespaced(two_client.clone(), INSTALL_NAMESPACE)
        .delete(ADDON, &DeleteParams::default())
        .await
        .unwrap();
    await_available(
        state,
        &hub_client,
        "cluster2",
        "Unknown",
        "ManagedClusterAddOnLeaseNotFound",
    )
    .await;

    // cluster2's klusterlet stops: the hub marks the cluster Unknown, and its add-on with it.
    let pid = klusterlet_pid(state, "cluster2");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let lost = await_available(
        state,
        &hub_client,
        "cluster2",
        "Unknown",
        "ManagedClusterLeaseUpdateStopped",
    )
    .await;
    assert!(!lost.message.is_empty());
    await_label(&hub_client, "cluster2", "unreachable").await;

    // cluster1 never noticed.
    let still = available(&hub_client, "cluster1").await.unwrap();
    assert_eq!(
        (still.status.as_str(), still.reason.as_str()),
        ("True", "ManagedClusterAddOnLeaseUpdated")
    );
    await_label(&hub_client, "cluster1", "available").await;

    // The ClusterManagementAddOn is deleted, and the agent stops as its Deployment would: nothing
    // of the add-on stays on the hub or on cluster1 (cluster2's klusterlet is gone, so its work
    // waits for it, as OCM's would).
    Api::<ClusterManagementAddOn>::all(hub_client.clone())
        .delete(ADDON, &DeleteParams::default())
        .await
        .unwrap();
    drop(agent1);
    wait::until(
        "nothing of helloworld left on the hub and cluster1",
        TIMEOUT,
        || async {
            let left = leftovers(&hub_client, &one_client).await?;
            Ok::<_, kube::Error>(left.is_empty().then_some(()).or_else(|| {
                eprintln!("still there: {left:?}");
                None
            }))
        },
    )
    .await
    .unwrap();
}

/// What of the helloworld add-on still exists: add-ons on the hub, cluster1's works and the
/// hub permissions in both cluster namespaces, and on cluster1 the agent's objects, its
/// credential secret and its lease.
async fn leftovers(hub: &Client, one: &Client) -> Result<Vec<String>, kube::Error> {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use kube::api::ListParams;
    let selector = ListParams::default().labels(&format!("{ADDON_NAME_LABEL}={ADDON}"));
    let mut left = Vec::new();
    let by_name = ListParams::default().fields(&format!("metadata.name={ADDON}"));
    for addon in Api::<ManagedClusterAddOn>::all(hub.clone())
        .list(&by_name)
        .await?
        .items
    {
        left.push(format!(
            "ManagedClusterAddOn {}",
            addon.namespace().unwrap_or_default()
        ));
    }
    for work in Api::<ManifestWork>::namespaced(hub.clone(), "cluster1")
        .list(&selector)
        .await?
        .items
    {
        left.push(format!("ManifestWork {}", work.name_any()));
    }
    for cluster in ["cluster1", "cluster2"] {
        for role in Api::<Role>::namespaced(hub.clone(), cluster)
            .list(&selector)
            .await?
            .items
        {
            left.push(format!("Role {cluster}/{}", role.name_any()));
        }
        for binding in Api::<RoleBinding>::namespaced(hub.clone(), cluster)
            .list(&selector)
            .await?
            .items
        {
            left.push(format!("RoleBinding {cluster}/{}", binding.name_any()));
        }
    }
    if Api::<Lease>::namespaced(hub.clone(), "cluster1")
        .get_opt(ADDON)
        .await?
        .is_some()
    {
        left.push("Lease on the hub".into());
    }
    let found = [
        (
            "Deployment",
            Api::<Deployment>::namespaced(one.clone(), INSTALL_NAMESPACE)
                .get_opt("helloworld-agent")
                .await?
                .is_some(),
        ),
        (
            "ServiceAccount",
            Api::<ServiceAccount>::namespaced(one.clone(), INSTALL_NAMESPACE)
                .get_opt("helloworld-agent-sa")
                .await?
                .is_some(),
        ),
        (
            "ClusterRole",
            Api::<ClusterRole>::all(one.clone())
                .get_opt("open-cluster-management:helloworld:agent")
                .await?
                .is_some(),
        ),
        (
            "ClusterRoleBinding",
            Api::<ClusterRoleBinding>::all(one.clone())
                .get_opt("open-cluster-management:helloworld:agent")
                .await?
                .is_some(),
        ),
        (
            "Secret",
            Api::<Secret>::namespaced(one.clone(), INSTALL_NAMESPACE)
                .get_opt("helloworld-hub-kubeconfig")
                .await?
                .is_some(),
        ),
        (
            "Lease",
            Api::<Lease>::namespaced(one.clone(), INSTALL_NAMESPACE)
                .get_opt(ADDON)
                .await?
                .is_some(),
        ),
    ];
    left.extend(
        found
            .iter()
            .filter(|(_, there)| *there)
            .map(|(kind, _)| format!("{kind} on cluster1")),
    );
    Ok(left)
}

/// The `<addon>-hub-kubeconfig` secret as OCM's registration agent writes it: `kubeconfig`
/// pointing at the files `tls.crt` and `tls.key` beside it, those two, and `cluster-name`.
fn hub_kubeconfig_secret(kubeconfig: &str, cluster: &str) -> k8s_openapi::api::core::v1::Secret {
    use base64::Engine as _;
    let mut config: serde_yaml::Value = serde_yaml::from_str(kubeconfig).unwrap();
    let user = &mut config["users"][0]["user"];
    let decode = |key: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(user[key].as_str().unwrap())
            .unwrap()
    };
    let (cert, key) = (decode("client-certificate-data"), decode("client-key-data"));
    let mapping = user.as_mapping_mut().unwrap();
    mapping.remove("client-certificate-data");
    mapping.remove("client-key-data");
    mapping.insert("client-certificate".into(), "tls.crt".into());
    mapping.insert("client-key".into(), "tls.key".into());
    let data = [
        ("kubeconfig", serde_yaml::to_string(&config).unwrap().into_bytes()),
        ("tls.crt", cert),
        ("tls.key", key),
        ("cluster-name", cluster.as_bytes().to_vec()),
    ];
    k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{ADDON}-hub-kubeconfig")),
            namespace: Some(INSTALL_NAMESPACE.to_owned()),
            ..Default::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v)))
                .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn with_its_hub_kubeconfig_secret_the_addon_agent_renews_its_lease_on_the_hub_with_that_credential_only()
 {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use kube::api::{Patch, PatchParams, PostParams};
    let (hub, managed) = tokio::join!(
        ControlPlane::start("agent-secret-hub"),
        ControlPlane::start("agent-secret-managed")
    );
    let (hub, managed) = (hub.unwrap(), managed.unwrap());
    let (hub_client, managed_client) = (
        hub.admin_client().await.unwrap(),
        managed.admin_client().await.unwrap(),
    );
    let cluster = "cluster1";
    let user = format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}:agent:{ADDON}");
    // On the hub, the add-on's identity may touch leases of its cluster namespace, nothing else.
    let apply = |client: &Client, object: serde_json::Value| {
        let client = client.clone();
        async move {
            let resource = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                object["apiVersion"]
                    .as_str()
                    .unwrap()
                    .rsplit_once('/')
                    .map_or("", |(g, _)| g),
                object["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap(),
                object["kind"].as_str().unwrap(),
            ));
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            let api: Api<kube::api::DynamicObject> = match object["metadata"]["namespace"].as_str() {
                Some(ns) => Api::namespaced_with(client, ns, &resource),
                None => Api::all_with(client, &resource),
            };
            api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&object))
                .await
                .unwrap();
        }
    };
    apply(
        &hub_client,
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster}}),
    )
    .await;
    apply(&hub_client, serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "addon-lease", "namespace": cluster},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]})).await;
    apply(
        &hub_client,
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "addon-lease", "namespace": cluster},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "addon-lease"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await;
    // On the managed cluster: the secret, as the klusterlet would write it.
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": INSTALL_NAMESPACE}})).unwrap();
    Api::<Namespace>::all(managed_client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let secret = hub_kubeconfig_secret(&hub.kubeconfig_for(&user, &[]).unwrap(), cluster);
    Api::<Secret>::namespaced(managed_client.clone(), INSTALL_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("agent.log");
    let file = std::fs::File::create(&log).unwrap();
    let _agent = Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "addon-agent",
                "--addon",
                ADDON,
                "--lease-seconds",
                "1",
                "--hub-kubeconfig-secret",
            ])
            .arg("--kubeconfig")
            .arg(managed.admin_kubeconfig())
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    );
    let leases: Api<Lease> = Api::namespaced(hub_client.clone(), cluster);
    let renewed = |lease: &Lease| {
        lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    let first = wait::until("the add-on lease on the hub", TIMEOUT, || async {
        Ok::<_, kube::Error>(leases.get_opt(ADDON).await?.as_ref().and_then(renewed))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nagent log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    wait::until("the add-on lease renewed again", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            leases
                .get_opt(ADDON)
                .await?
                .as_ref()
                .and_then(renewed)
                .filter(|t| *t > first),
        )
    })
    .await
    .unwrap();
    let on_managed = Api::<Lease>::namespaced(managed_client, INSTALL_NAMESPACE)
        .get_opt(ADDON)
        .await
        .unwrap();
    assert!(on_managed.is_none(), "nothing renewed on the managed cluster");
}
