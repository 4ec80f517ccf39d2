//! Flotilla as users install it, on real nodes. The Flotilla image (built here, pushed to the
//! local registry) runs the hub, installed with `kubectl apply -k deploy/crds` and `-k` of an
//! overlay of deploy/hub that names the image (two replicas electing a leader, the webhook
//! reached through its Service), and the klusterlet installed as an operator does without
//! `flotilla join`: the bootstrap kubeconfig Secret, then `kubectl apply -k` of an overlay of
//! deploy/klusterlet naming the image and the cluster (`flotilla join --image` deploys the same
//! documents in the `up` test). The klusterlet is a pod that reaches its own cluster through the
//! `kubernetes` Service and the hub through the hub's. A ManifestWork's Deployment then runs real pods, and its
//! `AvailableReplicas` feedback follows their readiness when a container is killed.
//!
//! Then real add-on agents. helloworld's plugin is pulled by the hub's pods over HTTPS, the
//! registry verified with the CA bundle in the Flotilla image (a registry no CA there vouches
//! for is refused). The helloworld agent (`plugins/helloworld/agent`, its image built
//! here) runs as helloworld's pod with the credential the klusterlet obtained for it: the add-on
//! is Available because its lease is renewed, and a ConfigMap of the cluster namespace on the hub
//! appears on the cluster. helloworld-config runs the same agent with health mode `customized`:
//! Available from its Deployment's feedback, not Available while its container is down.
//!
//! deploy/cluster-gateway runs beside the hub (the gateway and the cluster-proxy tunnel server
//! in one pod, from the same image): a cluster-proxy agent's tunnel through it carries
//! `kubectl get --raw …/clustergateways/cluster1/proxy/healthz` to cluster1.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, time::Duration};

use common::{flotilla_at, hub_token, ok, pushed_digest};
use flotilla_api::addon::{consts::managed_cluster_addon as mca, v1alpha1::ManagedClusterAddOn};
use flotilla_api::plugins::{consts as plugin_consts, v1alpha1::AddOnPlugin};
use flotilla_plugin_loader::reasons::fetched;
use flotilla_registration::names;
use flotilla_test_plugins as plugins;
use flotilla_testing::{
    ControlPlane, Node, image, kubectl, pause_deployment, pki, registry::Registry, until_ready_replicas, wait,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::{
    ByteString,
    api::{apps::v1::Deployment, core::v1::ConfigMap},
};
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, ObjectMeta, PostParams},
    core::GroupVersionKind,
    discovery::ApiResource,
};

/// The `AvailableReplicas` the work agent reported for the work's Deployment.
fn available_replicas(work: &DynamicObject) -> Option<i64> {
    work.data
        .pointer("/status/resourceStatus/manifests/0/statusFeedback/values")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == "AvailableReplicas")?
        .pointer("/fieldValue/integer")?
        .as_i64()
}

/// A kustomize overlay in `dir` of `deploy/<base>` that runs `image` (`<name>@<digest>`), as an
/// operator points the base at their registry, with `patches` (kustomize's `patches:` entries).
fn overlay(dir: &Path, base: &str, image: &str, patches: &str) -> std::path::PathBuf {
    let (name, digest) = image.split_once('@').unwrap();
    let base_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(base);
    let overlay = dir.join(format!("{base}-overlay"));
    std::fs::create_dir_all(&overlay).unwrap();
    // Kustomize takes relative paths only: up to the root, then down to the base.
    let overlay = overlay.canonicalize().unwrap();
    let base_dir = base_dir.canonicalize().unwrap();
    let up = "../".repeat(overlay.components().count() - 1);
    let relative = format!("{up}{}", base_dir.strip_prefix("/").unwrap().display());
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {relative}\n\
             images:\n  - name: flotilla\n    newName: {name}\n    digest: {digest}\n{patches}"
        ),
    )
    .unwrap();
    overlay
}

/// The hub's bootstrap kubeconfig for a klusterlet that reaches it at `server`, with `token`:
/// what `flotilla join` writes into Secret `bootstrap-hub-kubeconfig`.
fn bootstrap_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\ncontexts:\n- name: bootstrap\n  context:\n    cluster: hub\n    \
         user: bootstrap\ncurrent-context: bootstrap\nusers:\n- name: bootstrap\n  user:\n    token: {token}\n"
    )
}

async fn until_available(works: &Api<DynamicObject>, replicas: i64) {
    wait::until(
        &format!("AvailableReplicas {replicas} in the work's feedback"),
        Duration::from_secs(120),
        || {
            let works = works.clone();
            async move {
                let work = works.get("workload").await.map_err(|e| e.to_string())?;
                Ok::<_, String>((available_replicas(&work) == Some(replicas)).then_some(()))
            }
        },
    )
    .await
    .unwrap();
}

/// Where helloworld-config's component is kept: it comes from a ConfigMap, helloworld from a
/// registry over HTTPS.
const PLUGIN_NAMESPACE: &str = "default";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// A registry serving HTTPS with a certificate `ca` issues for `node`'s address, exposed to
/// `node`'s pods: returns it and the `host:port` they pull from.
async fn https_registry(ca: &pki::CertificateAuthority, node: &mut Node) -> (Registry, String) {
    let serving = ca
        .issue_serving_with_ips("registry", &[], &[node.address().into()])
        .unwrap();
    let registry = Registry::builder()
        .tls(&serving.cert_pem, &serving.key_pem)
        .start()
        .await
        .unwrap();
    let address = node.expose_registry(&registry).unwrap();
    (registry, address)
}

/// Pushes the component at `path` to `reference` over HTTPS, trusting the host's CAs and
/// `ca_pem` as a plugin author's machine would; returns the pushed digest.
fn push_https(state: &Path, admin: &Path, path: &str, reference: &str, ca_pem: &str) -> String {
    let bundle = state.join(format!("ca-bundle-{}.crt", fastrand::u32(..)));
    let mut trusted = std::fs::read_to_string(image::CA_BUNDLE).unwrap();
    trusted.push('\n');
    trusted.push_str(ca_pem);
    std::fs::write(&bundle, trusted).unwrap();
    let pushed = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["plugin", "push", path, reference, "--kubeconfig"])
        .arg(admin)
        .env("HOME", state)
        .env("SSL_CERT_FILE", &bundle)
        .output()
        .unwrap();
    pushed_digest(&ok(pushed))
}

/// The `Fetched` condition of AddOnPlugin `name` once it has one with `status`.
async fn until_fetched(hub: &kube::Client, name: &str, status: &str) -> Condition {
    let plugins: Api<AddOnPlugin> = Api::all(hub.clone());
    wait::until(
        &format!("AddOnPlugin {name} Fetched {status}"),
        Duration::from_secs(120),
        || async {
            let plugin = plugins.get_opt(name).await?;
            let fetched = plugin
                .and_then(|p| p.status)
                .map(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == plugin_consts::condition::FETCHED);
            Ok::<_, kube::Error>(fetched.filter(|c| c.status == status))
        },
    )
    .await
    .unwrap()
}

/// Enables add-on `name` on cluster1 once its ClusterManagementAddOn exists.
async fn enable(hub: &kube::Client, state: &Path, admin: &Path, name: &str) {
    let cmas: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(hub.clone());
    wait::until(
        &format!("ClusterManagementAddOn {name}"),
        Duration::from_secs(120),
        || async { cmas.get_opt(name).await.map(|c| c.map(|_| ())) },
    )
    .await
    .unwrap();
    ok(flotilla_at(
        state,
        admin,
        &["addon", "enable", "--names", name, "--clusters", "cluster1"],
    ));
}

/// Registers the component at `path` as add-on `name` from a ConfigMap (gzip-compressed).
async fn register_from_configmap(hub: &kube::Client, state: &Path, admin: &Path, name: &str, path: &str) {
    use std::io::Write as _;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&std::fs::read(path).unwrap()).unwrap();
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-plugin")),
            ..ObjectMeta::default()
        },
        binary_data: Some([("plugin.wasm".to_owned(), ByteString(gzip.finish().unwrap()))].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(hub.clone(), PLUGIN_NAMESPACE)
        .create(&PostParams::default(), &configmap)
        .await
        .unwrap();
    let source = format!("{PLUGIN_NAMESPACE}/{name}-plugin");
    ok(flotilla_at(
        state,
        admin,
        &["plugin", "register", name, "--configmap", &source],
    ));
    enable(hub, state, admin, name).await;
}

/// Waits until the `Available` condition of add-on `addon` on cluster1 satisfies `check`;
/// on a timeout, fails with the agent's pod log and the kubelet's.
async fn until_addon(
    hub: &kube::Client,
    node: &Node,
    addon: &str,
    check: impl Fn(&Condition) -> bool,
) -> Condition {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), "cluster1");
    let found = wait::until(
        &format!("{addon}'s Available on cluster1"),
        Duration::from_secs(120),
        || async {
            let conditions = api
                .get_opt(addon)
                .await
                .map_err(|e| e.to_string())?
                .and_then(|a| a.status)
                .map(|s| s.conditions)
                .unwrap_or_default();
            match conditions.iter().find(|c| c.type_ == mca::CONDITION_AVAILABLE) {
                Some(c) if check(c) => Ok(Some(c.clone())),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    found.unwrap_or_else(|e| {
        panic!(
            "{e}\nagent:\n{}\nklusterlet:\n{}\nkubelet:\n{}",
            node.pod_log_tail(INSTALL_NAMESPACE, "helloworld-agent", 20),
            node.pod_log_tail("open-cluster-management-agent", "klusterlet", 20),
            node.log_tail("kubelet", 10)
        )
    })
}

#[tokio::test]
async fn klusterlet_pod_from_the_flotilla_image_runs_a_work_whose_feedback_follows_pods() {
    let (hub, cluster, registry) = tokio::join!(
        ControlPlane::builder("nodes-hub").install_crds(false).start(),
        ControlPlane::start("nodes-cluster1"),
        Registry::start()
    );
    let (hub, cluster, registry) = (hub.unwrap(), cluster.unwrap(), registry.unwrap());
    let (hub_node, cluster_node) =
        tokio::join!(Node::start(&hub, &registry), Node::start(&cluster, &registry));
    let (mut hub_node, mut node) = (hub_node.unwrap(), cluster_node.unwrap());
    node.route(&hub).unwrap();
    // The image trusts the host's CAs and the plugin registry's, as an operator's would.
    let registry_ca = pki::CertificateAuthority::new("nodes-e2e plugin registry").unwrap();
    let flotilla_image = image::push_flotilla_trusting(
        &registry,
        env!("CARGO_BIN_EXE_flotilla").as_ref(),
        registry_ca.cert_pem(),
    )
    .await
    .unwrap();
    let pause = image::push_pause(&registry).await.unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();

    // The README's install, for real: the CRDs, then the hub's controllers from deploy/hub.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    kubectl(&hub, &["apply", "-k", deploy.join("crds").to_str().unwrap()]);
    let hub_overlay = overlay(state, "hub", &flotilla_image, "");
    kubectl(&hub, &["apply", "-k", hub_overlay.to_str().unwrap()]);
    let hub_admin = hub.admin_client().await.unwrap();
    let hub_deployments: Api<Deployment> = Api::namespaced(hub_admin.clone(), "open-cluster-management-hub");
    let replicas = until_ready_replicas(&hub_deployments, "flotilla-hub", 2, Duration::from_secs(120)).await;
    if let Err(e) = replicas {
        panic!(
            "{e}\nhub pods:\n{}\nkubelet:\n{}",
            hub_node.pod_log_tail("open-cluster-management-hub", "flotilla-hub", 20),
            hub_node.log_tail("kubelet", 20)
        );
    }
    // deploy/cluster-gateway beside it: the gateway and the tunnel server in one pod.
    let gateway_overlay = overlay(state, "cluster-gateway", &flotilla_image, "");
    kubectl(&hub, &["apply", "-k", gateway_overlay.to_str().unwrap()]);
    let admin = hub.admin_kubeconfig();
    let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));

    // The hub as pods see it: its `kubernetes` Service, which its certificate names.
    let hub_service = format!("https://{}:443", hub.service_address());
    // deploy/klusterlet as an operator applies it: the bootstrap kubeconfig in its Secret, then
    // `kubectl apply -k` of an overlay that names the image and the cluster.
    let agent_namespace = names::AGENT_NAMESPACE;
    kubectl(&cluster, &["create", "namespace", agent_namespace]);
    let bootstrap = state.join("bootstrap-kubeconfig");
    std::fs::write(
        &bootstrap,
        bootstrap_kubeconfig(&hub_service, hub.ca_pem(), &token),
    )
    .unwrap();
    kubectl(
        &cluster,
        &[
            "create",
            "secret",
            "generic",
            names::BOOTSTRAP_SECRET,
            "--namespace",
            agent_namespace,
            &format!("--from-file={}={}", names::KUBECONFIG_KEY, bootstrap.display()),
        ],
    );
    let args = "[\"klusterlet\", \"--cluster-name\", \"cluster1\", \"--ops-bind\", \"0.0.0.0:8080\"]";
    let patches = format!(
        "patches:\n  - target:\n      kind: Deployment\n      name: klusterlet\n    patch: |-\n      \
         - op: replace\n        path: /spec/template/spec/containers/0/args\n        value: {args}\n"
    );
    let klusterlet_overlay = overlay(state, "klusterlet", &flotilla_image, &patches);
    kubectl(&cluster, &["apply", "-k", klusterlet_overlay.to_str().unwrap()]);
    let accepted = flotilla_at(
        state,
        admin,
        &["accept", "--wait", "--clusters", "cluster1", "--timeout", "180s"],
    );
    assert!(
        accepted.status.success(),
        "accept failed: {}\nklusterlet pod:\n{}\nkubelet:\n{}",
        String::from_utf8_lossy(&accepted.stderr),
        node.pod_log_tail("open-cluster-management-agent", "klusterlet", 30),
        node.log_tail("kubelet", 20)
    );
    let managed = cluster.admin_client().await.unwrap();
    let klusterlet: Api<Deployment> = Api::namespaced(managed.clone(), "open-cluster-management-agent");
    until_ready_replicas(&klusterlet, "klusterlet", 1, Duration::from_secs(60))
        .await
        .unwrap();
    // `accept` returns once the cluster is accepted; the hub then makes its namespace.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(hub_admin.clone());
    wait::until(
        "the hub makes namespace cluster1",
        Duration::from_secs(60),
        || async { namespaces.get_opt("cluster1").await.map(|n| n.map(|_| ())) },
    )
    .await
    .unwrap();

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
    ));
    let works: Api<DynamicObject> =
        Api::namespaced_with(hub.admin_client().await.unwrap(), "cluster1", &resource);
    let work = serde_json::json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": { "name": "workload", "namespace": "cluster1" },
        "spec": {
            "workload": { "manifests": [pause_deployment("workload", "default", &pause, 2, 25)] },
            "manifestConfigs": [{
                "resourceIdentifier": {
                    "group": "apps", "resource": "deployments", "name": "workload", "namespace": "default"
                },
                "feedbackRules": [{ "type": "WellKnownStatus" }],
            }],
        },
    });
    works
        .create(&PostParams::default(), &serde_json::from_value(work).unwrap())
        .await
        .unwrap();
    until_available(&works, 2).await;

    node.kill_container("pause").unwrap();
    until_available(&works, 1).await;
    until_available(&works, 2).await;

    the_deployed_gateway_reaches_the_cluster_through_its_tunnel_server(&hub, &hub_node, &cluster).await;

    let hub_side = HubSide {
        client: &hub_admin,
        node: &mut hub_node,
        registry_ca: &registry_ca,
        state,
        admin,
    };
    real_addon_agents(hub_side, &managed, &node, &registry).await;
}

/// deploy/cluster-gateway's pod serves the ClusterGateway API behind the hub's aggregation
/// layer, and its tunnel server (with the credentials the gateway wrote for it) carries a
/// cluster-proxy agent's tunnel: `kubectl get --raw …/clustergateways/cluster1/proxy/healthz`
/// answers from cluster1. The agent is a process here with an add-on credential the hub's CA
/// signed, dialing the pod's address and verifying the server for its Service name. cluster1
/// reports no apiserver URL (as OCM's klusterlet reports none by default), so the gateway
/// verifies it with the CA beside the managed service account's token.
async fn the_deployed_gateway_reaches_the_cluster_through_its_tunnel_server(
    hub: &ControlPlane,
    hub_node: &Node,
    cluster: &ControlPlane,
) {
    use flotilla_api::authentication::consts::{
        IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE,
    };
    use k8s_openapi::api::core::v1::{Pod, Secret};
    let hub_admin = hub.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(hub_admin.clone(), "open-cluster-management-hub");
    if let Err(e) = until_ready_replicas(
        &deployments,
        "flotilla-cluster-gateway",
        1,
        Duration::from_secs(120),
    )
    .await
    {
        panic!(
            "{e}
gateway pod:
{}",
            hub_node.pod_log_tail("open-cluster-management-hub", "flotilla-cluster-gateway", 30)
        );
    }
    kubectl(cluster, &["create", "namespace", "gateway-msa"]);
    kubectl(
        cluster,
        &["create", "serviceaccount", "cluster-gateway", "-n", "gateway-msa"],
    );
    let token = kubectl(
        cluster,
        &["create", "token", "cluster-gateway", "-n", "gateway-msa"],
    );
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cluster-gateway", "namespace": "cluster1",
                     "labels": {IS_MANAGED_SERVICE_ACCOUNT_LABEL: IS_MANAGED_SERVICE_ACCOUNT_VALUE}},
        "stringData": {"token": token.trim(), "ca.crt": cluster.ca_pem()},
    }))
    .unwrap();
    Api::<Secret>::namespaced(hub_admin.clone(), "cluster1")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let pods = Api::<Pod>::namespaced(hub_admin.clone(), "open-cluster-management-hub")
        .list(&kube::api::ListParams::default().labels("app=flotilla-cluster-gateway"))
        .await
        .unwrap()
        .items;
    let pod_ip = pods
        .iter()
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .unwrap_or_else(|| panic!("no gateway pod address: {pods:?}"));
    let server_ca = Api::<Secret>::namespaced(hub_admin.clone(), "open-cluster-management-hub")
        .get("flotilla-hub-cluster-proxy-serving")
        .await
        .unwrap()
        .data
        .unwrap()
        .remove("ca.crt")
        .unwrap();
    let (common_name, group) = flotilla_testing::netns::agent_subject("cluster1");
    let credential = hub.issue_client(&common_name, &[&group]).unwrap();
    let _agent = flotilla_testing::tunnel::TunnelAgent::start_verifying(
        &format!("wss://{pod_ip}:8132/connect"),
        &String::from_utf8(server_ca.0).unwrap(),
        &credential,
        cluster.server().trim_start_matches("https://"),
        Some("flotilla-cluster-proxy.open-cluster-management-hub.svc"),
    )
    .unwrap();
    let healthz = flotilla_api::gateway::consts::proxy_path("cluster1", "/healthz");
    let answer = wait::until(
        "cluster1's healthz through the deployed gateway",
        Duration::from_secs(90),
        || {
            let output = hub.kubectl().args(["get", "--raw", &healthz]).output().unwrap();
            async move {
                if output.status.success() {
                    Ok(Some(String::from_utf8_lossy(&output.stdout).into_owned()))
                } else {
                    Err(String::from_utf8_lossy(&output.stderr).into_owned())
                }
            }
        },
    )
    .await;
    let answer = answer.unwrap_or_else(|e| {
        panic!(
            "{e}
gateway pod:
{}",
            hub_node.pod_log_tail("open-cluster-management-hub", "flotilla-cluster-gateway", 30)
        )
    });
    assert_eq!(answer, "ok");
}

/// What the add-on part acts with on the hub's side.
struct HubSide<'a> {
    client: &'a kube::Client,
    node: &'a mut Node,
    registry_ca: &'a pki::CertificateAuthority,
    state: &'a Path,
    admin: &'a Path,
}

/// Starts an HTTPS registry with a certificate `ca` issues, pushes helloworld's component to
/// it and registers it as add-on `name` by digest, without `--insecure`.
async fn publish_over_https(hub: &mut HubSide<'_>, ca: &pki::CertificateAuthority, name: &str) -> Registry {
    let (registry, host) = https_registry(ca, hub.node).await;
    let reference = format!("{host}/addons/{name}:v1");
    let digest = push_https(
        hub.state,
        hub.admin,
        plugins::HELLOWORLD,
        &reference,
        ca.cert_pem(),
    );
    ok(flotilla_at(
        hub.state,
        hub.admin,
        &[
            "plugin", "register", name, "--oci", &reference, "--digest", &digest,
        ],
    ));
    registry
}

/// Registers helloworld from an HTTPS registry the hub's pods verify with the image's CA
/// bundle, and shows a registry no CA in the bundle vouches for refused.
async fn register_over_https(hub: &mut HubSide<'_>) -> [Registry; 2] {
    let registry_ca = hub.registry_ca;
    let trusted = publish_over_https(hub, registry_ca, "helloworld").await;
    until_fetched(hub.client, "helloworld", "True").await;

    let stranger = pki::CertificateAuthority::new("a CA the image does not carry").unwrap();
    let untrusted = publish_over_https(hub, &stranger, "untrusted").await;
    let refused = until_fetched(hub.client, "untrusted", "False").await;
    assert_eq!(refused.reason, fetched::REGISTRY_UNREACHABLE, "{refused:?}");
    assert!(
        refused.message.to_lowercase().contains("certificate"),
        "{refused:?}"
    );
    [trusted, untrusted]
}

/// helloworld and helloworld-config with the real helloworld agent (see the module docs).
async fn real_addon_agents(
    mut hub_side: HubSide<'_>,
    managed: &kube::Client,
    node: &Node,
    registry: &Registry,
) {
    image::push_helloworld_agent(registry).await.unwrap();
    let _plugin_registries = register_over_https(&mut hub_side).await;
    let HubSide {
        client: hub,
        state,
        admin,
        ..
    } = hub_side;
    enable(hub, state, admin, "helloworld").await;
    let available = until_addon(hub, node, "helloworld", |c| c.status == "True").await;
    assert_eq!(available.reason, mca::REASON_LEASE_UPDATED, "{available:?}");

    // The agent's visible work: a ConfigMap of the cluster namespace on the hub is copied. One
    // the cluster already has under another owner is left alone: the hub's `planted` comes
    // first, and once `greeting` (after it) is copied, the cluster's `planted` is still its own.
    let config_map = |name: &str, value: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("hello".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    };
    let copies: Api<ConfigMap> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    copies
        .create(
            &PostParams::default(),
            &config_map("planted", "the cluster's own"),
        )
        .await
        .unwrap();
    let sources = Api::<ConfigMap>::namespaced(hub.clone(), "cluster1");
    for (name, value) in [("planted", "from the hub"), ("greeting", "world")] {
        sources
            .create(&PostParams::default(), &config_map(name, value))
            .await
            .unwrap();
    }
    wait::until(
        "the agent copies ConfigMap greeting",
        Duration::from_secs(60),
        || async {
            let copy = copies.get_opt("greeting").await?;
            Ok::<_, kube::Error>(
                copy.and_then(|c| c.data)
                    .filter(|d| d.get("hello").is_some_and(|v| v == "world")),
            )
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nagent:\n{}",
            node.pod_log_tail(INSTALL_NAMESPACE, "helloworld-agent", 20)
        )
    });
    let planted = copies.get("planted").await.unwrap();
    assert_eq!(
        planted.data.unwrap_or_default().get("hello").map(String::as_str),
        Some("the cluster's own"),
        "the agent took over a ConfigMap another manager owns"
    );
    assert!(planted.metadata.labels.unwrap_or_default().is_empty());

    // helloworld-config renders the same Deployment: helloworld goes first.
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "disable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1",
        ],
    ));
    let deployments: Api<Deployment> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    wait::until(
        "helloworld's agent is removed",
        Duration::from_secs(60),
        || async {
            Ok::<_, kube::Error>(
                deployments
                    .get_opt("helloworld-agent")
                    .await?
                    .is_none()
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    pods.delete_collection(&DeleteParams::default().grace_period(0), &Default::default())
        .await
        .unwrap();

    register_from_configmap(hub, state, admin, "helloworld-config", plugins::HELLOWORLD_CONFIG).await;
    let available = until_addon(hub, node, "helloworld-config", |c| c.status == "True").await;
    assert_eq!(available.reason, mca::REASON_PROBE_AVAILABLE, "{available:?}");
    // Its container dies: the Deployment has no ready replica until the kubelet restarts it,
    // and the plugin's verdict follows. A restart may be quicker than the verdict, so the
    // container is killed again until the verdict is seen (the kubelet backs off longer each time).
    let mut verdict = None;
    for _ in 0..5 {
        node.kill_container("helloworld-agent").unwrap();
        let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), "cluster1");
        verdict = wait::until(
            "helloworld-config not Available",
            Duration::from_secs(20),
            || async {
                let status = api.get("helloworld-config").await?.status.unwrap_or_default();
                let available = status
                    .conditions
                    .into_iter()
                    .find(|c| c.type_ == mca::CONDITION_AVAILABLE);
                Ok::<_, kube::Error>(available.filter(|c| c.status != "True"))
            },
        )
        .await
        .ok();
        if verdict.is_some() {
            break;
        }
    }
    let verdict = verdict.expect("helloworld-config's verdict never left Available while its agent was down");
    assert_eq!(verdict.reason, mca::REASON_PROBE_UNAVAILABLE, "{verdict:?}");
    until_addon(hub, node, "helloworld-config", |c| c.status == "True").await;
}
