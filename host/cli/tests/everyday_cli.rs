//! clusteradm's everyday commands in Flotilla's CLI against a real hub control plane prepared
//! by `flotilla init` (issue 30): what each does and what each says when it cannot do what was
//! asked — the exit code and the exact first line, which names the object and what to do, with
//! the apiserver's answer told once.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    process::Output,
    time::{Duration, Instant},
};

use common::{flotilla, ok};
use flotilla_api::{
    addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn},
    cluster::v1::ManagedCluster,
};
use flotilla_testing::ControlPlane;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// The hub of this binary, `flotilla init` run once on it.
async fn hub() -> &'static ControlPlane {
    static INIT: OnceCell<()> = OnceCell::const_new();
    let hub = flotilla_testing::shared("everyday-cli").await.unwrap();
    INIT.get_or_init(|| async {
        ok(flotilla(hub.admin_kubeconfig(), &["init"]));
    })
    .await;
    hub
}

/// Creates what the test names, as an admin would (`kubectl create`).
async fn create<K>(api: &Api<K>, object: serde_json::Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A registered cluster `name` with its namespace, as the hub leaves it once accepted.
async fn registered_cluster(client: &kube::Client, name: &str) {
    create(
        &Api::<ManagedCluster>::all(client.clone()),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": { "name": name }, "spec": { "hubAcceptsClient": true },
        }),
    )
    .await;
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
    )
    .await;
}

/// The standard error of a command that must fail (exit code 1).
fn refused(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(1),
        "flotilla must refuse this:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[tokio::test]
async fn enabling_an_addon_the_hub_does_not_know_is_refused_naming_those_it_knows() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    registered_cluster(&client, "addon-c1").await;
    create(
        &Api::<ClusterManagementAddOn>::all(client.clone()),
        json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
            "metadata": { "name": "helloworld" }, "spec": {},
        }),
    )
    .await;

    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["addon", "enable", "--names", "nosuch", "--clusters", "addon-c1"],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: no add-on \"nosuch\" on this hub (no ClusterManagementAddOn or AddOnPlugin of that \
         name); add-ons here: helloworld",
        "{stderr}"
    );
    assert!(stderr.contains("flotilla plugin register"), "{stderr}");
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(client, "addon-c1");
    assert!(addons.get_opt("nosuch").await.unwrap().is_none());
}

#[tokio::test]
async fn a_refused_work_is_told_once_with_what_to_do_and_the_raw_status_only_with_verbose() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    registered_cluster(&client, "work-c1").await;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "kind: ConfigMap\nmetadata: {name: one, namespace: default}\n",
    )
    .unwrap();
    let args = [
        "create",
        "work",
        "w1",
        "-f",
        bad.to_str().unwrap(),
        "--clusters",
        "work-c1",
    ];

    let stderr = refused(flotilla(hub.admin_kubeconfig(), &args));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one line of error, one of advice:\n{stderr}");
    assert_eq!(
        lines[0],
        "error: create work w1 on cluster work-c1: ManifestWork.work.open-cluster-management.io \"w1\" \
         is invalid: spec.workload.manifests[0].apiVersion: Required value: must not be empty",
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        "hint: the apiserver refused the object as written: correct the field named above and run the \
         command again"
    );

    let verbose = refused(flotilla(hub.admin_kubeconfig(), &[&args[..], &["-v"]].concat()));
    let raw = verbose
        .lines()
        .find_map(|l| l.strip_prefix("apiserver status: "))
        .unwrap_or_else(|| panic!("-v shows the raw status:\n{verbose}"));
    let status: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(status["reason"], "Invalid", "{raw}");
    assert_eq!(status["code"], 422, "{raw}");
    assert_eq!(verbose.lines().count(), 3, "{verbose}");
}

#[tokio::test]
async fn accepting_a_cluster_that_never_registered_is_refused_at_once() {
    let hub = hub().await;
    let started = Instant::now();
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["accept", "--clusters", "nosuch"],
    ));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused only after {:?} (the default timeout is 60 s)",
        started.elapsed()
    );
    assert_eq!(
        first_line(&stderr),
        "error: accept cluster \"nosuch\": no ManagedCluster \"nosuch\" on this hub: its klusterlet has not \
         registered",
        "{stderr}"
    );
    assert!(stderr.contains("flotilla join"), "{stderr}");
}

#[tokio::test]
async fn accepting_a_registered_cluster_without_a_request_says_it_waits() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    create(
        &Api::<ManagedCluster>::all(client),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": { "name": "no-request" }, "spec": {},
        }),
    )
    .await;
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["accept", "--clusters", "no-request", "--timeout", "3s"],
    ));
    assert_eq!(
        first_line(&stderr),
        "cluster \"no-request\": waiting up to 3s for its klusterlet's certificate request",
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: accept cluster \"no-request\": ManagedCluster \"no-request\" filed no"),
        "{stderr}"
    );
}

/// The standard output of a command that must succeed, and its first line.
fn first_out(output: Output) -> String {
    ok(output).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn cluster_sets_are_created_bound_unbound_and_deleted_and_refused_when_that_cannot_be() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    let config = hub.admin_kubeconfig();
    create(
        &Api::<Namespace>::all(client),
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "team-ns" } }),
    )
    .await;

    assert_eq!(
        first_out(flotilla(config, &["create", "clusterset", "team-a"])),
        "cluster set team-a created"
    );
    assert_eq!(
        first_out(flotilla(config, &["create", "clusterset", "team-a"])),
        "cluster set team-a already exists"
    );
    let stderr = refused(flotilla(config, &["create", "clusterset", "Team_A"]));
    assert_eq!(
        first_line(&stderr),
        "error: create cluster set Team_A: ManagedClusterSet.cluster.open-cluster-management.io \"Team_A\" \
         is invalid: metadata.name: Invalid value: \"Team_A\": a lowercase RFC 1123 subdomain must consist \
         of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
         character (e.g. 'example.com', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "{stderr}"
    );

    ok(flotilla(
        config,
        &["clusterset", "bind", "team-a", "--namespace", "team-ns"],
    ));
    let stderr = refused(flotilla(config, &["delete", "clusterset", "team-a"]));
    assert_eq!(
        first_line(&stderr),
        "error: cluster set team-a is bound to namespace(s) team-ns; unbind it first \
         (`flotilla clusterset unbind team-a --namespace team-ns`)",
        "{stderr}"
    );
    assert_eq!(
        first_out(flotilla(
            config,
            &["clusterset", "unbind", "team-a", "--namespace", "team-ns"]
        )),
        "cluster set team-a is no longer bound to namespace team-ns"
    );
    let stderr = refused(flotilla(
        config,
        &["clusterset", "unbind", "team-a", "--namespace", "team-ns"],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: cluster set team-a is not bound to namespace team-ns (`flotilla get clustersets` shows its \
         namespaces)",
        "{stderr}"
    );

    assert_eq!(
        first_out(flotilla(config, &["delete", "clusterset", "team-a"])),
        "cluster set team-a deleted"
    );
    let stderr = refused(flotilla(config, &["delete", "clusterset", "team-a"]));
    assert_eq!(
        first_line(&stderr),
        "error: no cluster set team-a on this hub (`flotilla get clustersets` lists them)",
        "{stderr}"
    );
    let stderr = refused(flotilla(config, &["delete", "clusterset", "default"]));
    assert_eq!(
        first_line(&stderr),
        "error: cluster set default is kept by the hub, which would make it again; remove its bindings \
         instead (`flotilla clusterset unbind default --namespace NS`)",
        "{stderr}"
    );
}

#[tokio::test]
async fn get_addon_shows_one_clusters_addons_as_a_table_json_or_yaml() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    let config = hub.admin_kubeconfig();
    registered_cluster(&client, "get-addon-c1").await;
    create(
        &Api::<ManagedClusterAddOn>::namespaced(client, "get-addon-c1"),
        json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
            "metadata": { "name": "probe", "namespace": "get-addon-c1" }, "spec": {},
        }),
    )
    .await;

    let table = ok(flotilla(config, &["get", "addon", "--cluster", "get-addon-c1"]));
    let header: Vec<&str> = first_line(&table).split_whitespace().collect();
    assert_eq!(header[..2], ["CLUSTER", "NAME"], "{table}");
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[..2], ["get-addon-c1", "probe"], "{table}");

    let json: serde_json::Value = serde_json::from_str(&ok(flotilla(
        config,
        &["get", "addon", "--cluster", "get-addon-c1", "-o", "json"],
    )))
    .unwrap();
    assert_eq!(json["items"][0]["metadata"]["name"], "probe", "{json}");
    let yaml = ok(flotilla(
        config,
        &["get", "addon", "--cluster", "get-addon-c1", "-o", "yaml"],
    ));
    assert_eq!(first_line(&yaml), "apiVersion: v1", "{yaml}");
    assert!(yaml.contains("name: probe"), "{yaml}");
}

#[tokio::test]
async fn get_token_gives_the_join_command_or_an_object_for_scripts() {
    let hub = hub().await;
    let config = hub.admin_kubeconfig();
    let command = first_out(flotilla(config, &["get", "token"]));
    assert!(command.starts_with("flotilla join --hub-token "), "{command}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(flotilla(config, &["get", "token", "-o", "json"]))).unwrap();
    assert_eq!(json["joinCommand"], command.as_str(), "{json}");
    assert_eq!(json["hubApiserver"], hub.server().trim_end_matches('/'), "{json}");
    let yaml: serde_json::Value =
        serde_yaml::from_str(&ok(flotilla(config, &["get", "token", "-o", "yaml"]))).unwrap();
    assert_eq!(yaml, json);
}

#[test]
fn completion_scripts_are_printed_for_bash_zsh_and_fish_and_other_shells_refused() {
    let run = |shell: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["completion", shell])
            .output()
            .unwrap()
    };
    let bash = ok(run("bash"));
    assert_eq!(first_line(&bash), "_flotilla() {", "{bash}");
    assert!(bash.contains("clusterset") && bash.contains("--kubeconfig"));
    let zsh = ok(run("zsh"));
    assert_eq!(first_line(&zsh), "#compdef flotilla", "{zsh}");
    let fish = ok(run("fish"));
    assert!(fish.contains("complete -c flotilla"), "{fish}");

    let output = run("tcsh");
    assert_eq!(output.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        first_line(&stderr),
        "error: invalid value 'tcsh' for '<SHELL>'",
        "{stderr}"
    );
}

#[tokio::test]
async fn create_placement_writes_clusteradms_flags_and_refuses_unbound_sets_and_overwrites() {
    use flotilla_api::cluster::v1beta1::Placement;
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "placing" } }),
    )
    .await;

    // A cluster set not bound to the namespace: refused, saying how to bind it.
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &[
            "create",
            "placement",
            "web",
            "-n",
            "placing",
            "--clustersets",
            "global",
        ],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: cluster set global is not bound to namespace placing; bind it first: flotilla \
         clusterset bind global --namespace placing",
        "{stderr}"
    );

    ok(flotilla(
        hub.admin_kubeconfig(),
        &["clusterset", "bind", "global", "--namespace", "placing"],
    ));
    let out = ok(flotilla(
        hub.admin_kubeconfig(),
        &[
            "create",
            "placement",
            "web",
            "-n",
            "placing",
            "--clustersets",
            "global",
            "--clusters",
            "c1,c2",
            "--label-selectors",
            "env=prod",
            "--count",
            "1",
        ],
    ));
    assert_eq!(first_line(&out), "placement placing/web created");
    let placements: Api<Placement> = Api::namespaced(client.clone(), "placing");
    let spec = placements.get("web").await.unwrap().spec;
    assert_eq!(spec.cluster_sets, ["global"]);
    assert_eq!(spec.number_of_clusters, Some(1));
    let selector = &spec.predicates[0].required_cluster_selector;
    assert_eq!(
        selector.label_selector.match_labels.as_ref().unwrap()["env"],
        "prod"
    );
    assert_eq!(
        selector.cel_selector.cel_expressions,
        ["managedCluster.metadata.name in ['c1', 'c2']"]
    );

    // It exists: refused without --overwrite, replaced with it.
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["create", "placement", "web", "-n", "placing"],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: placement placing/web already exists; pass --overwrite to replace its spec",
        "{stderr}"
    );
    let out = ok(flotilla(
        hub.admin_kubeconfig(),
        &[
            "create",
            "placement",
            "web",
            "-n",
            "placing",
            "--overwrite",
            "--num-clusters",
            "2",
        ],
    ));
    assert_eq!(first_line(&out), "placement placing/web replaced");
    let spec = placements.get("web").await.unwrap().spec;
    assert_eq!(spec.number_of_clusters, Some(2));
    assert!(spec.predicates.is_empty() && spec.cluster_sets.is_empty());

    // A selector that cannot be read names the term.
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &[
            "create",
            "placement",
            "bad",
            "-n",
            "placing",
            "--label-selectors",
            "env in prod",
        ],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: --label-selectors: label selector \"env in prod\": values of in/notin go in parentheses",
        "{stderr}"
    );
}
