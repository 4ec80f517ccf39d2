//! `flotilla up`, `status` and `down` as a newcomer runs them: the real binary, real control
//! planes, registry, hub and klusterlets as background processes under a temporary state
//! directory. The printed end state is checked against the hub's API; `down` must leave no
//! process and no port behind; and each bad input — a port in use, a stale state directory, no
//! Go toolchain, an interrupted `up` — ends with a clear message, a non-zero exit and nothing
//! left running.
//!
//! Each test has its own base port (below the kernel's ephemeral range, so the free ports other
//! tests pick never collide with them).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    io::{BufRead as _, BufReader},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use flotilla_api::{
    addon::v1alpha1::ManagedClusterAddOn,
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster},
    work::{consts::manifest_work as mw, v1::ManifestWork},
};
use flotilla_core::conditions;
use flotilla_testing::{
    ports::Layout,
    processes::{self, ProcessRecord},
};
use kube::{Api, Client};

/// Runs `flotilla ARGS --state-dir STATE`.
fn flotilla(state: &Path, args: &[&str]) -> Output {
    command(state, args).output().unwrap()
}

fn command(state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flotilla"));
    command
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env_remove("KUBECONFIG")
        .env_remove("FLOTILLA_STATE_DIR")
        .stdin(Stdio::null());
    command
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn ok(output: Output) -> (String, String) {
    let (out, err) = text(&output);
    assert!(output.status.success(), "flotilla failed:\n{out}\n{err}");
    (out, err)
}

fn failed(output: Output) -> String {
    let (out, err) = text(&output);
    assert!(
        !output.status.success(),
        "flotilla succeeded unexpectedly:\n{out}\n{err}"
    );
    err
}

/// Stops what a test's `up` left, also when the test fails.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = flotilla(self.0, &["down"]);
    }
}

/// Processes whose command line names the state directory: every component of an
/// environment does (data directory, kubeconfig or config file), recorded or not.
fn processes_of(state: &Path) -> Vec<String> {
    let needle = state.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')));
        if cmdline.contains(&needle) && !zombie && !cmdline.contains("--state-dir") {
            found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Every recorded process is gone, no process of the state directory runs and no port of the
/// layout accepts connections.
fn assert_nothing_left(state: &Path, recorded: &[ProcessRecord], layout: &Layout) {
    let strays = processes_of(state);
    assert!(
        strays.is_empty(),
        "processes of the state directory still run: {strays:#?}"
    );
    let alive: Vec<&str> = recorded
        .iter()
        .filter(|r| processes::is_running(r))
        .map(|r| r.name.as_str())
        .collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
    for (what, port) in layout.all() {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
            "port {port} ({what}) still accepts connections"
        );
    }
}

async fn hub_client(state: &Path) -> Client {
    let yaml = std::fs::read_to_string(state.join("controlplanes/hub/pki/admin.kubeconfig")).unwrap();
    flotilla_testing::kubeconfig::client_from_yaml(&yaml)
        .await
        .unwrap()
}

fn condition(list: &[flotilla_api::upstream::Condition], type_: &str) -> String {
    conditions::find(list, type_).map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
}

/// The printed table row starting with `first` that also contains `second`.
fn row<'a>(table: &'a str, first: &str, second: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first) && cells.contains(&second))
        .unwrap_or_else(|| panic!("no row {first} {second} in:\n{table}"))
}

#[tokio::test]
async fn up_starts_everything_status_reports_it_a_second_up_reuses_it_down_leaves_nothing_and_up_works_again()
{
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let _down = Down(&state);
    let base = "21400";
    let layout = Layout::new(21400, 2).unwrap();

    // Nodes where the machine can run containers (CI's can); stand-in agents otherwise.
    let nodes = flotilla_testing::node::prerequisites().is_none();
    let (table, progress) = ok(flotilla(&state, &["up", "--base-port", base]));
    if nodes {
        assert!(progress.contains("start a node per control plane"), "{progress}");
    } else {
        assert!(progress.contains("without nodes"), "{progress}");
    }
    for step in [
        "start 3 control planes",
        "flotilla init",
        "join cluster2",
        "wait until",
    ] {
        assert!(progress.contains(step), "no step {step:?} in:\n{progress}");
    }
    assert!(table.contains("export KUBECONFIG="), "{table}");

    // The printed end state is what the hub's API says.
    let hub = hub_client(&state).await;
    for cluster in ["cluster1", "cluster2"] {
        let conds = Api::<ManagedCluster>::all(hub.clone())
            .get(cluster)
            .await
            .unwrap()
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        assert_eq!(condition(&conds, mc::CONDITION_AVAILABLE), "True", "{cluster}");
        assert_eq!(row(&table, cluster, "True")[2], "True", "{table}");

        let addon = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
            .get_opt("helloworld")
            .await
            .unwrap();
        let addon = addon.unwrap_or_else(|| panic!("no helloworld ManagedClusterAddOn on {cluster}"));
        assert_eq!(row(&table, "helloworld", cluster)[1], cluster);
        // Available through the real lease path: the agent (a pod of the helloworld image on
        // the cluster's node, or the stand-in process) renews Lease helloworld; a pod uses the
        // credential the klusterlet wrote after the plugin approved its CSR to read the hub.
        let available = addon
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Available"))
            .unwrap_or_else(|| panic!("helloworld on {cluster} has no Available"));
        assert_eq!(
            (available.status.as_str(), available.reason.as_str()),
            ("True", "ManagedClusterAddOnLeaseUpdated"),
            "{cluster}"
        );
        assert_eq!(row(&table, "helloworld", cluster)[3], "True", "{table}");

        let works = Api::<ManifestWork>::namespaced(hub.clone(), cluster)
            .list(
                &kube::api::ListParams::default().labels("open-cluster-management.io/addon-name=helloworld"),
            )
            .await
            .unwrap()
            .items;
        assert!(!works.is_empty(), "no helloworld work on {cluster}");
        for work in works {
            let name = work.metadata.name.clone().unwrap();
            let conds = work.status.map(|s| s.conditions).unwrap_or_default();
            assert_eq!(
                condition(&conds, mw::CONDITION_APPLIED),
                "True",
                "{cluster}/{name}"
            );
            assert_eq!(row(&table, &name, cluster)[2], "True", "{table}");
        }
    }

    let (status, _) = ok(flotilla(&state, &["status"]));
    let agents: &[&str] = if nodes {
        &[
            "hub-node-kubelet",
            "cluster1-node-containerd",
            "cluster1-node-kubelet",
            "cluster2-node-kube-scheduler",
            "tunnel-server",
            "cluster-gateway",
        ]
    } else {
        &["addon-agent-cluster1", "addon-agent-cluster2"]
    };
    for component in [
        "hub-kube-apiserver",
        "registry",
        "hub",
        "klusterlet-cluster1",
        "klusterlet-cluster2",
    ]
    .iter()
    .chain(agents)
    {
        assert!(
            status
                .lines()
                .any(|l| l.starts_with(component) && l.contains("running")),
            "{component} missing in:\n{status}"
        );
    }
    if nodes {
        assert!(
            status
                .lines()
                .any(|l| l.starts_with("cluster2-node-kubelet") && l.contains("node cluster2-node Ready")),
            "{status}"
        );
        // The hub and the klusterlets run as users install them: deploy/hub's two replicas
        // on the hub's node, deploy/klusterlet on each cluster's; none is a local process.
        for (row, deployment) in [
            ("hub ", "open-cluster-management-hub/flotilla-hub"),
            ("klusterlet-cluster1 ", "open-cluster-management-agent/klusterlet"),
            ("klusterlet-cluster2 ", "open-cluster-management-agent/klusterlet"),
        ] {
            assert!(
                status
                    .lines()
                    .any(|l| l.starts_with(row) && l.contains(&format!("Deployment {deployment} ready"))),
                "{row}in:\n{status}"
            );
        }
        let records = processes::read_all(&state).unwrap();
        assert!(
            !records
                .iter()
                .any(|r| r.name == "hub" || r.name.starts_with("klusterlet-")),
            "{records:?}"
        );
        let hub_pods = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
            hub.clone(),
            "open-cluster-management-hub",
        )
        .get("flotilla-hub")
        .await
        .unwrap();
        assert_eq!(hub_pods.status.and_then(|s| s.ready_replicas), Some(2));
        assert!(
            !status.contains("addon-agent"),
            "no stand-in agents beside nodes:\n{status}"
        );
        // The agent is a pod of the image built here, running on the cluster's node, and it
        // does its work: a ConfigMap of the cluster namespace on the hub is copied.
        let yaml =
            std::fs::read_to_string(state.join("controlplanes/cluster1/pki/admin.kubeconfig")).unwrap();
        let cluster1 = flotilla_testing::kubeconfig::client_from_yaml(&yaml)
            .await
            .unwrap();
        let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
            cluster1.clone(),
            "open-cluster-management-agent-addon",
        )
        .list(&Default::default())
        .await
        .unwrap()
        .items;
        let agent = pods
            .iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("helloworld-agent-"))
            })
            .unwrap_or_else(|| panic!("no helloworld agent pod: {pods:?}"));
        let spec = agent.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("cluster1-node"));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("flotilla.local/addons/helloworld-agent:0.1.0")
        );
        let note = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("note".into()),
                ..Default::default()
            },
            data: Some([("text".to_owned(), "hello".to_owned())].into()),
            ..Default::default()
        };
        Api::namespaced(hub.clone(), "cluster1")
            .create(&Default::default(), &note)
            .await
            .unwrap();
        let copies = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
            cluster1,
            "open-cluster-management-agent-addon",
        );
        flotilla_testing::wait::until(
            "the agent copies ConfigMap note",
            Duration::from_secs(60),
            || async { Ok::<_, kube::Error>(copies.get_opt("note").await?.and_then(|c| c.data)) },
        )
        .await
        .unwrap();
        for addon in [
            "cluster-proxy",
            "managed-serviceaccount",
            "resource-usage-collect",
        ] {
            assert_eq!(row(&table, addon, "cluster2")[2], "True", "{table}");
        }
        the_seed_commands_work_through_the_cluster_gateway(&state, &hub, &copies.into_client()).await;
    }
    let bridges: Vec<String> = std::fs::read_dir(state.join("nodes"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("bridge")).ok())
        .collect();
    assert_eq!(bridges.len(), if nodes { 3 } else { 0 }, "{bridges:?}");

    let recorded = processes::read_all(&state).unwrap();
    let (_, again) = ok(flotilla(&state, &["up", "--base-port", base]));
    assert!(again.contains("already up"), "{again}");
    assert!(!again.contains("start 3 control planes"), "{again}");
    assert_eq!(
        processes::read_all(&state).unwrap(),
        recorded,
        "reuse starts nothing"
    );

    ok(flotilla(&state, &["down"]));
    // Containers (their shims name the state directory) are gone too, and the bridges.
    assert_nothing_left(&state, &recorded, &layout);
    for bridge in &bridges {
        assert!(
            !Path::new("/sys/class/net").join(bridge.trim()).exists(),
            "bridge {bridge} remains"
        );
    }
    assert!(
        processes::read_all(&state).unwrap().is_empty(),
        "pid files remain"
    );
    let err = failed(flotilla(&state, &["status"]));
    assert!(err.contains("nothing is up"), "{err}");

    // Without nodes, stand-in agents make the add-on Available the same way.
    let (table, _) = ok(flotilla(&state, &["up", "--base-port", base, "--no-nodes"]));
    assert!(row(&table, "cluster2", "True").len() >= 3, "{table}");
    assert_eq!(row(&table, "helloworld", "cluster2")[3], "True", "{table}");
    let (status, _) = ok(flotilla(&state, &["status"]));
    assert!(status.contains("addon-agent-cluster2"), "{status}");
    // The add-ons' agents are local processes then, with the same credentials: the gateway
    // reaches the cluster through the tunnel of cluster2's local agent.
    for agent in [
        "cluster-proxy-agent-cluster2",
        "managed-serviceaccount-agent-cluster2",
        "cluster-gateway",
    ] {
        assert!(
            status
                .lines()
                .any(|l| l.starts_with(agent) && l.contains("running")),
            "{agent} in:\n{status}"
        );
    }
    assert_eq!(
        row(&table, "managed-serviceaccount", "cluster2")[2],
        "True",
        "{table}"
    );
    let admin = state.join("controlplanes/hub/pki/admin.kubeconfig");
    let healthz = flotilla_api::gateway::consts::proxy_path("cluster2", "/healthz");
    let raw = until_kubectl(
        "healthz through the hub without nodes",
        &admin,
        &["get", "--raw", &healthz],
    )
    .await;
    assert_eq!(raw, "ok");
    let recorded = processes::read_all(&state).unwrap();
    ok(flotilla(&state, &["down", "--purge"]));
    assert_nothing_left(&state, &recorded, &layout);
    assert!(!state.exists(), "--purge leaves the state directory");
}

/// Polls kubectl until it succeeds, returning its output.
async fn until_kubectl(what: &str, kubeconfig: &Path, args: &[&str]) -> String {
    flotilla_testing::wait::until(what, Duration::from_secs(90), || async {
        crate::common::kubectl_as(kubeconfig, args).map(Some)
    })
    .await
    .unwrap()
}

/// OCM's cluster-gateway scenario, as its documentation gives the commands, against `up`'s
/// hub: the managed cluster's `/healthz` through the hub; plain kubectl with a kubeconfig whose
/// server ends in the proxy path, Forbidden as the managed service account until it is granted
/// rights on the cluster and allowed after; and the same after its token was revoked and
/// rotated.
async fn the_seed_commands_work_through_the_cluster_gateway(state: &Path, hub: &Client, cluster1: &Client) {
    use flotilla_api::gateway::consts::proxy_path;
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let admin = state.join("controlplanes/hub/pki/admin.kubeconfig");
    let healthz = proxy_path("cluster1", "/healthz");
    let raw = until_kubectl(
        "the cluster's healthz through the hub",
        &admin,
        &["get", "--raw", &healthz],
    )
    .await;
    assert_eq!(raw, "ok");

    let mut config: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&admin).unwrap()).unwrap();
    let server = config["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_owned();
    config["clusters"][0]["cluster"]["server"] = format!("{server}{}", proxy_path("cluster1", ""))
        .trim_end_matches('/')
        .into();
    let edited = state.join("cluster1-through-hub.kubeconfig");
    std::fs::write(&edited, serde_yaml::to_string(&config).unwrap()).unwrap();
    let refused = crate::common::kubectl_as(&edited, &["get", "ns"]).unwrap_err();
    let account = "system:serviceaccount:open-cluster-management-agent-addon:cluster-gateway";
    assert!(
        refused.contains("Forbidden") && refused.contains(account),
        "{refused}"
    );

    // Granted on the cluster, the same command lists the cluster's namespaces.
    let params = kube::api::PatchParams::apply("up-test").force();
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gateway-reads-namespaces"},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]}))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster1.clone())
        .patch(
            "gateway-reads-namespaces",
            &params,
            &kube::api::Patch::Apply(role),
        )
        .await
        .unwrap();
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gateway-reads-namespaces"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gateway-reads-namespaces"},
        "subjects": [{"kind": "ServiceAccount", "name": "cluster-gateway", "namespace": "open-cluster-management-agent-addon"}]}))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster1.clone())
        .patch(
            "gateway-reads-namespaces",
            &params,
            &kube::api::Patch::Apply(binding),
        )
        .await
        .unwrap();
    let namespaces = until_kubectl(
        "kubectl get ns through the hub",
        &edited,
        &["get", "ns", "-o", "name"],
    )
    .await;
    assert!(
        namespaces.contains("namespace/open-cluster-management-agent-addon")
            && !namespaces.contains("namespace/cluster1"),
        "the managed cluster's namespaces: {namespaces}"
    );

    // Revoked on the cluster (its service account deleted), the token is rotated by the
    // managed-serviceaccount agent and requests work again with the new one.
    let secrets: Api<Secret> = Api::namespaced(hub.clone(), "cluster1");
    let token = |secret: Secret| secret.data.and_then(|d| d.get("token").cloned()).map(|t| t.0);
    let before = token(secrets.get("cluster-gateway").await.unwrap()).unwrap();
    Api::<ServiceAccount>::namespaced(cluster1.clone(), "open-cluster-management-agent-addon")
        .delete("cluster-gateway", &Default::default())
        .await
        .unwrap();
    flotilla_testing::wait::until("a rotated token on the hub", Duration::from_secs(90), || async {
        let now = token(secrets.get("cluster-gateway").await?);
        Ok::<_, kube::Error>(now.filter(|t| *t != before).map(|_| ()))
    })
    .await
    .unwrap();
    let namespaces = until_kubectl(
        "kubectl get ns with the rotated token",
        &edited,
        &["get", "ns", "-o", "name"],
    )
    .await;
    assert!(namespaces.contains("namespace/default"), "{namespaces}");
}

#[test]
fn up_refuses_a_port_in_use_before_starting_anything() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let _down = Down(&state);
    let layout = Layout::new(21600, 2).unwrap();
    let _taken = TcpListener::bind((Ipv4Addr::LOCALHOST, layout.registry())).unwrap();

    let err = failed(flotilla(&state, &["up", "--base-port", "21600"]));
    assert!(
        err.contains(&format!("{} (registry)", layout.registry())),
        "{err}"
    );
    assert!(err.contains("--base-port"), "{err}");
    assert!(
        processes::read_all(&state).unwrap().is_empty(),
        "something was started"
    );
}

#[test]
fn up_without_go_fails_at_once_naming_go_when_the_control_plane_must_be_built() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let empty_cache = temp.path().join("cache");
    let output = command(&state, &["up", "--base-port", "21700"])
        .env("FLOTILLA_CACHE_DIR", &empty_cache)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("FLOTILLA_CONTROLPLANE_BIN")
        .env_remove("FLOTILLA_REGISTRY_BIN")
        .output()
        .unwrap();
    let err = failed(output);
    assert!(err.contains("build the control-plane binary"), "{err}");
    assert!(err.contains("needs the Go toolchain"), "{err}");
    assert!(!err.contains("start 3 control planes"), "{err}");
    assert!(
        processes::read_all(&state).unwrap().is_empty(),
        "something was started"
    );
}

#[test]
fn up_cleans_a_stale_state_directory_and_starts_again_and_status_fails_when_a_component_dies() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let _down = Down(&state);
    let layout = Layout::new(21800, 1).unwrap();
    // What a machine that rebooted under a running environment leaves: pid files of dead
    // processes (pids are below 2^22 on Linux, so these never run).
    let exe = Path::new(env!("CARGO_BIN_EXE_flotilla"));
    for name in ["hub-etcd", "hub"] {
        processes::record(&state, name, 4_194_305, exe, &state.join("x.log"), None).unwrap();
    }

    let (_, progress) = ok(flotilla(
        &state,
        &[
            "up",
            "--base-port",
            "21800",
            "--clusters",
            "1",
            "--no-addon",
            "--no-nodes",
        ],
    ));
    assert!(progress.contains("stale state directory"), "{progress}");
    let recorded = processes::read_all(&state).unwrap();
    assert!(recorded.iter().all(processes::is_running), "{recorded:?}");
    ok(flotilla(&state, &["status"]));

    // A component that dies is reported, and status fails.
    let klusterlet = recorded.iter().find(|r| r.name == "klusterlet-cluster1").unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(klusterlet.pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let output = flotilla(&state, &["status"]);
    let (table, _) = text(&output);
    let err = failed(output);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("klusterlet-cluster1") && l.contains("not running")),
        "{table}"
    );
    assert!(err.contains("down: klusterlet-cluster1"), "{err}");
    ok(flotilla(&state, &["down"]));
    assert_nothing_left(&state, &recorded, &layout);
}

#[test]
fn an_interrupted_up_stops_what_it_started_and_the_next_up_works() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let _down = Down(&state);
    let layout = Layout::new(22000, 1).unwrap();
    let args = [
        "up",
        "--base-port",
        "22000",
        "--clusters",
        "1",
        "--no-addon",
        "--no-nodes",
    ];

    let mut child = command(&state, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // Mid-way: control planes, registry and hub run; the klusterlet is being started.
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "up ended early:\n{seen}"
        );
        seen.push_str(&line);
        if line.contains("join cluster1") {
            break;
        }
    }
    let recorded = processes::read_all(&state).unwrap();
    assert!(recorded.iter().any(|r| r.name == "hub"), "{recorded:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{seen}{rest}");
    assert!(rest.contains("interrupted by SIGTERM"), "{seen}{rest}");
    assert!(rest.contains("nothing is left running"), "{seen}{rest}");
    assert_nothing_left(&state, &recorded, &layout);
    assert!(
        processes::read_all(&state).unwrap().is_empty(),
        "pid files remain"
    );

    let (_, progress) = ok(flotilla(&state, &args));
    assert!(progress.contains("Flotilla is up"), "{progress}");
    let recorded = processes::read_all(&state).unwrap();
    ok(flotilla(&state, &["down"]));
    assert_nothing_left(&state, &recorded, &layout);
}

#[test]
fn a_failed_step_is_named_with_its_cause_and_log_and_what_up_started_is_stopped() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    let _down = Down(&state);
    let layout = Layout::new(22200, 1).unwrap();
    // A plugin file that is no WebAssembly component: pushing it is refused.
    let bogus = temp.path().join("bogus.wasm");
    std::fs::write(&bogus, b"not a component").unwrap();

    let output = command(
        &state,
        &["up", "--base-port", "22200", "--clusters", "1", "--no-nodes"],
    )
    .env(flotilla_testing::plugins::HELLOWORLD_ENV, &bogus)
    .output()
    .unwrap();
    let err = failed(output);
    assert!(
        err.contains("step \"push helloworld to the registry\" failed"),
        "{err}"
    );
    assert!(err.contains("`flotilla plugin push` failed"), "{err}");
    assert!(err.contains("not a WebAssembly binary"), "{err}");
    let log = state.join("logs").join("up.log");
    assert!(err.contains(&format!("log: {}", log.display())), "{err}");
    assert!(log.is_file(), "the named log is kept");
    assert!(err.contains("nothing is left running"), "{err}");
    assert_nothing_left(&state, &[], &layout);
}
