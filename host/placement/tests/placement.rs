//! The placement controller against a real control plane: the Placement examples of OCM's
//! documentation with their documented decisions, decisions moving when a taint arrives or a
//! toleration runs out, pagination, and bad input reported through conditions while other
//! placements keep working. One control plane serves every test; each test has its own
//! namespace and cluster set, so the tests do not see each other's clusters.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{collections::BTreeSet, time::Duration};

use flotilla_api::cluster::{
    consts::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL},
    v1::ManagedCluster,
    v1alpha1::AddOnPlacementScore,
    v1beta1::{Placement, PlacementDecision},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_placement::PlacementOptions;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::Condition,
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";

/// The shared control plane with the placement controller running on its own thread.
async fn hub() -> Client {
    let cp: &'static ControlPlane = flotilla_testing::shared("placement")
        .await
        .expect("control plane");
    flotilla_testing::spawn_controllers_once("placement", cp, |client| async move {
        let options = PlacementOptions {
            resync: Duration::from_secs(30),
            debounce: Duration::from_millis(50),
            concurrency: 4,
        };
        flotilla_placement::run(client, options).await;
    });
    cp.admin_client().await.unwrap()
}

async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// Namespace `ns` with set `set` (exclusive label) bound into it.
async fn world(client: &Client, ns: &str, set: &str) {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    create(
        &Api::<ManagedClusterSet>::all(client.clone()),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
               "metadata": {"name": set}, "spec": {}}),
    )
    .await;
    create(
        &Api::<ManagedClusterSetBinding>::namespaced(client.clone(), ns),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
               "metadata": {"name": set, "namespace": ns}, "spec": {"clusterSet": set}}),
    )
    .await;
}

/// Cluster `name` in set `set` with extra labels, claims and taints.
async fn cluster(client: &Client, name: &str, set: &str, labels: Value, claims: Value, taints: Value) {
    let mut all_labels = labels;
    all_labels[CLUSTERSET_LABEL] = json!(set);
    let api = Api::<ManagedCluster>::all(client.clone());
    create(
        &api,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": name, "labels": all_labels},
               "spec": {"hubAcceptsClient": true, "taints": taints}}),
    )
    .await;
    if claims.as_array().is_some_and(|c| !c.is_empty()) {
        let patch = json!({"status": {"clusterClaims": claims}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

async fn placement(client: &Client, ns: &str, name: &str, spec: Value) {
    create(
        &Api::<Placement>::namespaced(client.clone(), ns),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": name, "namespace": ns}, "spec": spec}),
    )
    .await;
}

/// The clusters in the PlacementDecisions of `name`.
async fn decided(client: &Client, ns: &str, name: &str) -> BTreeSet<String> {
    let api = Api::<PlacementDecision>::namespaced(client.clone(), ns);
    let list = api
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={name}")))
        .await
        .unwrap();
    list.items
        .iter()
        .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect()
}

/// Waits until the decisions of `name` are exactly `expected`.
async fn wait_decided(client: &Client, ns: &str, name: &str, expected: &[&str]) {
    let expected: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    let what = format!("{ns}/{name} decides {expected:?}");
    wait::until(&what, TIMEOUT, || {
        let expected = expected.clone();
        async move {
            let got = decided(client, ns, name).await;
            Ok::<_, kube::Error>((got == expected).then_some(()))
        }
    })
    .await
    .unwrap();
}

fn condition<'a>(p: &'a Placement, type_: &str) -> Option<&'a Condition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until `name` has condition `type_` with `status` and `reason`; returns the placement.
async fn wait_condition(
    client: &Client,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> Placement {
    let api = Api::<Placement>::namespaced(client.clone(), ns);
    let what = format!("{ns}/{name} {type_}={status} {reason}");
    wait::until(&what, TIMEOUT, || {
        let api = api.clone();
        async move {
            let p = api.get(name).await?;
            let ok = condition(&p, type_).is_some_and(|c| c.status == status && c.reason == reason);
            Ok::<_, kube::Error>(ok.then_some(p))
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_claim_selector_selects_the_clusters_of_one_platform_with_argo_cd_labels() {
    let client = hub().await;
    world(&client, "claims", "claims-set").await;
    let platform = "platform.open-cluster-management.io";
    cluster(
        &client,
        "claims-aws-1",
        "claims-set",
        json!({}),
        json!([{"name": platform, "value": "AWS"}]),
        json!([]),
    )
    .await;
    cluster(
        &client,
        "claims-aws-2",
        "claims-set",
        json!({}),
        json!([{"name": platform, "value": "AWS"}]),
        json!([]),
    )
    .await;
    cluster(
        &client,
        "claims-gcp",
        "claims-set",
        json!({}),
        json!([{"name": platform, "value": "GCP"}]),
        json!([]),
    )
    .await;
    placement(
        &client,
        "claims",
        "aws",
        json!({"predicates": [{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
            {"key": platform, "operator": "In", "values": ["AWS"]}]}}}]}),
    )
    .await;
    wait_decided(&client, "claims", "aws", &["claims-aws-1", "claims-aws-2"]).await;
    let p = wait_condition(
        &client,
        "claims",
        "aws",
        "PlacementSatisfied",
        "True",
        "AllDecisionsScheduled",
    )
    .await;
    let decision = Api::<PlacementDecision>::namespaced(client.clone(), "claims")
        .get("aws-decision-1")
        .await
        .unwrap();
    assert_eq!(decision.labels()[PLACEMENT_LABEL], "aws");
    assert_eq!(decision.labels()[DECISION_GROUP_NAME_LABEL], "");
    assert_eq!(decision.labels()[DECISION_GROUP_INDEX_LABEL], "0");
    let owner = &decision.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Placement", "aws", Some(true))
    );
    assert_eq!(p.status.unwrap().number_of_selected_clusters, 2);
}

#[tokio::test]
async fn an_add_on_score_selects_the_cluster_with_the_most_cpu_available() {
    let client = hub().await;
    world(&client, "scores", "scores-set").await;
    for (name, value) in [("scores-a", 30), ("scores-b", 80), ("scores-c", 55)] {
        cluster(&client, name, "scores-set", json!({}), json!([]), json!([])).await;
        create(
            &Api::<Namespace>::all(client.clone()),
            json!({"metadata": {"name": name}}),
        )
        .await;
        let api = Api::<AddOnPlacementScore>::namespaced(client.clone(), name);
        create(
            &api,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
                   "metadata": {"name": "default", "namespace": name}}),
        )
        .await;
        let patch = json!({"status": {"scores": [{"name": "cpuAvailable", "value": value}]}});
        api.patch_status("default", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    placement(
        &client,
        "scores",
        "top",
        json!({"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "default", "scoreName": "cpuAvailable"}}, "weight": 1}]}}),
    )
    .await;
    wait_decided(&client, "scores", "top", &["scores-b"]).await;
    // A new score moves the decision: the score's change finds the placement through the index.
    let patch = json!({"status": {"scores": [{"name": "cpuAvailable", "value": 99}]}});
    Api::<AddOnPlacementScore>::namespaced(client.clone(), "scores-c")
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_decided(&client, "scores", "top", &["scores-c"]).await;
}

#[tokio::test]
async fn a_toleration_of_unreachable_keeps_the_cluster_until_its_seconds_run_out() {
    let client = hub().await;
    world(&client, "toleration", "toleration-set").await;
    // The taint was added 280 s ago: a 300 s toleration runs out in 20 s.
    // Whole seconds: the apiserver stores `timeAdded` with second precision.
    let added = Timestamp::from_second(Timestamp::now().as_second() - 280).unwrap();
    let taint = json!([{"key": "cluster.open-cluster-management.io/unreachable", "effect": "NoSelect",
                        "timeAdded": added.to_string()}]);
    cluster(
        &client,
        "toleration-down",
        "toleration-set",
        json!({}),
        json!([]),
        taint,
    )
    .await;
    cluster(
        &client,
        "toleration-up",
        "toleration-set",
        json!({}),
        json!([]),
        json!([]),
    )
    .await;
    placement(
        &client,
        "toleration",
        "tolerant",
        json!({"tolerations": [{"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists",
                                "tolerationSeconds": 300}]}),
    )
    .await;
    wait_decided(
        &client,
        "toleration",
        "tolerant",
        &["toleration-down", "toleration-up"],
    )
    .await;
    // No event happens after this point: only the requeue at expiry can remove the cluster.
    wait_decided(&client, "toleration", "tolerant", &["toleration-up"]).await;
    assert!(Timestamp::now() >= added + SignedDuration::from_secs(300));
}

#[tokio::test]
async fn decision_groups_put_the_canary_first() {
    let client = hub().await;
    world(&client, "groups", "groups-set").await;
    for (name, canary) in [
        ("groups-1", true),
        ("groups-2", false),
        ("groups-3", false),
        ("groups-4", false),
    ] {
        let labels = if canary {
            json!({"canary": "true"})
        } else {
            json!({})
        };
        cluster(&client, name, "groups-set", labels, json!([]), json!([])).await;
    }
    placement(
        &client,
        "groups",
        "rollout",
        json!({"decisionStrategy": {"groupStrategy": {
            "decisionGroups": [{"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}],
            "clustersPerDecisionGroup": "50%"}}}),
    )
    .await;
    wait_decided(
        &client,
        "groups",
        "rollout",
        &["groups-1", "groups-2", "groups-3", "groups-4"],
    )
    .await;
    let p = wait_condition(
        &client,
        "groups",
        "rollout",
        "PlacementSatisfied",
        "True",
        "AllDecisionsScheduled",
    )
    .await;
    let groups = p.status.unwrap().decision_groups.unwrap();
    let summary: Vec<(i32, String, i32)> = groups
        .iter()
        .map(|g| {
            (
                g.decision_group_index,
                g.decision_group_name.clone(),
                g.clusters_count,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, "canary".into(), 1),
            (1, String::new(), 2),
            (2, String::new(), 1)
        ]
    );
    let first = Api::<PlacementDecision>::namespaced(client.clone(), "groups")
        .get("rollout-decision-1")
        .await
        .unwrap();
    assert_eq!(first.labels()[DECISION_GROUP_NAME_LABEL], "canary");
    assert_eq!(first.status.unwrap().decisions[0].cluster_name, "groups-1");
}

#[tokio::test]
async fn a_taint_on_the_selected_cluster_moves_the_decision() {
    let client = hub().await;
    world(&client, "taint", "taint-set").await;
    cluster(&client, "taint-a", "taint-set", json!({}), json!([]), json!([])).await;
    cluster(&client, "taint-b", "taint-set", json!({}), json!([]), json!([])).await;
    placement(&client, "taint", "one", json!({"numberOfClusters": 1})).await;
    wait_decided(&client, "taint", "one", &["taint-a"]).await;
    let patch = json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoSelect", "timeAdded": Timestamp::now().to_string()}]}});
    Api::<ManagedCluster>::all(client.clone())
        .patch("taint-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_decided(&client, "taint", "one", &["taint-b"]).await;
}

#[tokio::test]
async fn two_hundred_fifty_clusters_fill_three_placement_decisions() {
    let client = hub().await;
    world(&client, "many", "many-set").await;
    for i in 0..250 {
        cluster(
            &client,
            &format!("many-{i:03}"),
            "many-set",
            json!({}),
            json!([]),
            json!([]),
        )
        .await;
    }
    placement(&client, "many", "all", json!({})).await;
    let api = Api::<PlacementDecision>::namespaced(client.clone(), "many");
    let sizes = wait::until("three decisions of 250 clusters", TIMEOUT, || {
        let api = api.clone();
        async move {
            let list = api
                .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}=all")))
                .await?;
            let mut sizes: Vec<(String, usize)> = list
                .items
                .iter()
                .map(|d| (d.name_any(), d.status.as_ref().map_or(0, |s| s.decisions.len())))
                .collect();
            sizes.sort();
            let total: usize = sizes.iter().map(|(_, n)| n).sum();
            Ok::<_, kube::Error>((total == 250).then_some(sizes))
        }
    })
    .await
    .unwrap();
    assert_eq!(
        sizes,
        vec![
            ("all-decision-1".into(), 100),
            ("all-decision-2".into(), 100),
            ("all-decision-3".into(), 50)
        ]
    );
}

#[tokio::test]
async fn bad_placements_are_reported_and_do_not_stop_good_ones() {
    let client = hub().await;
    world(&client, "bad", "bad-set").await;
    cluster(&client, "bad-a", "bad-set", json!({}), json!([]), json!([])).await;
    let cases = [
        (
            "unknown-prioritizer",
            json!({"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Cheapest"}, "weight": 1}]}}),
        ),
        (
            "exists-with-value",
            json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
        ),
        (
            "invalid-cel",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": ["managedCluster.("]}}}]}),
        ),
        (
            "costly-cel",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
            "managedCluster.status.clusterClaims.all(a, managedCluster.status.clusterClaims.all(b, managedCluster.status.clusterClaims.all(c, a.name != c.name)))"]}}}]}),
        ),
    ];
    for (name, spec) in &cases {
        placement(&client, "bad", name, spec.clone()).await;
    }
    placement(&client, "bad", "good", json!({})).await;
    for (name, _) in &cases {
        let p = wait_condition(
            &client,
            "bad",
            name,
            "PlacementMisconfigured",
            "True",
            "Misconfigured",
        )
        .await;
        assert_eq!(
            condition(&p, "PlacementSatisfied").unwrap().status,
            "False",
            "{name}"
        );
    }
    wait_decided(&client, "bad", "good", &["bad-a"]).await;

    // A binding to a set that does not exist is no binding at all.
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": "unbound"}}),
    )
    .await;
    create(
        &Api::<ManagedClusterSetBinding>::namespaced(client.clone(), "unbound"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
               "metadata": {"name": "no-such-set", "namespace": "unbound"}, "spec": {"clusterSet": "no-such-set"}}),
    )
    .await;
    placement(&client, "unbound", "lonely", json!({})).await;
    wait_condition(
        &client,
        "unbound",
        "lonely",
        "PlacementSatisfied",
        "False",
        "NoManagedClusterSetBindings",
    )
    .await;
}

/// A CEL expression whose ranges the compile-time estimate cannot size (`size(name)` is known
/// only per cluster) runs ~10¹⁰ steps per cluster unmetered; metered, it stops at its cost
/// limit on each cluster, selects none of them, and the placement beside it is decided.
#[tokio::test]
async fn a_hostile_cel_expression_selects_nothing_and_does_not_hold_up_other_placements() {
    let client = hub().await;
    world(&client, "hostile", "hostile-set").await;
    let names = ["hostile-a", "hostile-b", "hostile-c"];
    for name in names {
        cluster(&client, name, "hostile-set", json!({}), json!([]), json!([])).await;
    }
    let nested = "lists.range(size(managedCluster.metadata.name) * 10000).all(i, \
                  lists.range(size(managedCluster.metadata.name) * 10000).all(j, true))";
    placement(
        &client,
        "hostile",
        "attacker",
        json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [nested]}}}]}),
    )
    .await;
    let started = std::time::Instant::now();
    placement(&client, "hostile", "normal", json!({})).await;
    wait_decided(&client, "hostile", "normal", &names).await;
    println!("the normal placement was decided in {:?}", started.elapsed());
    // Each cluster over its cost limit matches nothing; on a slow machine the three together may
    // instead run past the evaluation deadline, which makes the placement misconfigured. Before
    // the new clusters reach its cache, a loaded controller may first report the set empty.
    let api = Api::<Placement>::namespaced(client.clone(), "hostile");
    let reason = wait::until("the hostile placement settled", TIMEOUT, || async {
        let p = api.get("attacker").await?;
        Ok::<_, kube::Error>(
            condition(&p, "PlacementSatisfied")
                .filter(|c| c.status == "False" && c.reason != "AllManagedClusterSetsEmpty")
                .map(|c| c.reason.clone()),
        )
    })
    .await
    .unwrap();
    assert!(
        ["NoManagedClusterMatched", "Misconfigured"].contains(&reason.as_str()),
        "{reason}"
    );
    println!(
        "the hostile placement was settled ({reason}) in {:?}",
        started.elapsed()
    );
    assert!(decided(&client, "hostile", "attacker").await.is_empty());
}

/// The Placement CRD, for tests that change its schema for a moment.
fn placement_crds(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

const PLACEMENT_CRD: &str = "placements.cluster.open-cluster-management.io";

/// The schema node of `path` (property names) under the Placement spec, in a CRD as JSON.
fn spec_property<'a>(crd: &'a mut Value, path: &[&str]) -> &'a mut Value {
    let mut node = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    for step in path {
        node = if *step == "[]" {
            &mut node["items"]
        } else {
            &mut node["properties"][*step]
        };
    }
    node
}

const WEIGHT: [&str; 4] = ["prioritizerPolicy", "configurations", "[]", "weight"];
const PER_GROUP: [&str; 3] = ["decisionStrategy", "groupStrategy", "clustersPerDecisionGroup"];

#[tokio::test]
async fn weights_out_of_range_and_percentages_over_100_are_refused_or_reported_as_misconfigured() {
    // One test, not two: the CRD is loosened for a moment below, and a refusal checked at the
    // same time would not happen.
    let client = hub().await;
    world(&client, "bounds", "bounds-set").await;
    cluster(&client, "bounds-a", "bounds-set", json!({}), json!([]), json!([])).await;
    let weight = |w: i32| {
        json!({"prioritizerPolicy": {"configurations": [
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": w}]}})
    };
    let per_group =
        |v: Value| json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": v}}});
    let api = Api::<Placement>::namespaced(client.clone(), "bounds");
    let object = |name: &str, spec: &Value| -> Placement {
        serde_json::from_value(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "Placement", "metadata": {"name": name, "namespace": "bounds"}, "spec": spec}))
        .unwrap()
    };

    // The apiserver refuses them with a message naming the field and its bound.
    let weight_field = "spec.prioritizerPolicy.configurations[0].weight";
    let per_group_field = "spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup";
    for (name, spec, field, bound) in [
        ("heavy", weight(11), weight_field, "less than or equal to 10"),
        ("light", weight(-11), weight_field, "greater than or equal to -10"),
        (
            "oversized",
            per_group(json!("150%")),
            per_group_field,
            "should match",
        ),
        (
            "fractional",
            per_group(json!("12.5%")),
            per_group_field,
            "should match",
        ),
    ] {
        match api.create(&PostParams::default(), &object(name, &spec)).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{name}: {status:?}");
                assert!(
                    status.message.contains(field) && status.message.contains(bound),
                    "{name}: {}",
                    status.message
                );
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }

    // What the schema lets through reaches the controller, which answers as OCM does: a count
    // written as a string is no percentage (Misconfigured); a count below one means one group.
    placement(&client, "bounds", "string-count", per_group(json!("2"))).await;
    placement(&client, "bounds", "zero-count", per_group(json!(0))).await;
    placement(&client, "bounds", "negative-count", per_group(json!(-2))).await;
    let p = wait_condition(
        &client,
        "bounds",
        "string-count",
        "PlacementMisconfigured",
        "True",
        "Misconfigured",
    )
    .await;
    let message = &condition(&p, "PlacementMisconfigured").unwrap().message;
    assert!(message.contains("clustersPerDecisionGroup"), "{message}");
    for name in ["zero-count", "negative-count"] {
        let p = wait_condition(
            &client,
            "bounds",
            name,
            "PlacementMisconfigured",
            "False",
            "Succeedconfigured",
        )
        .await;
        let groups = p.status.unwrap().decision_groups.unwrap();
        assert_eq!(groups.len(), 1, "{name}: {groups:?}");
        assert_eq!(groups[0].clusters_count, 1, "{name}: {groups:?}");
    }

    // Placements stored before the CRD had these bounds (a CRD upgrade keeps them) do reach
    // the controller: loosen the schema, store them, restore it.
    let crds = placement_crds(&client);
    let original = serde_json::to_value(crds.get(PLACEMENT_CRD).await.unwrap()).unwrap();
    let mut loose = original.clone();
    let weight_schema = spec_property(&mut loose, &WEIGHT).as_object_mut().unwrap();
    weight_schema.remove("minimum");
    weight_schema.remove("maximum");
    spec_property(&mut loose, &PER_GROUP)
        .as_object_mut()
        .unwrap()
        .remove("pattern");
    let replace = |crd: Value| {
        let crds = crds.clone();
        async move {
            let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
            crds.replace(PLACEMENT_CRD, &PostParams::default(), &crd).await
        }
    };
    replace(loose).await.unwrap();
    // A schema change takes effect a moment later; until then the old bounds still refuse.
    for (name, spec) in [
        ("legacy-heavy", weight(11)),
        ("legacy-oversized", per_group(json!("150%"))),
    ] {
        wait::until(&format!("{name} stored"), TIMEOUT, || {
            let (api, object) = (api.clone(), object(name, &spec));
            async move {
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(Some(())),
                    Err(kube::Error::Api(status)) if status.code == 422 => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .await
        .unwrap();
    }
    let mut restored = serde_json::to_value(crds.get(PLACEMENT_CRD).await.unwrap()).unwrap();
    restored["spec"] = original["spec"].clone();
    replace(restored).await.unwrap();

    // As in OCM, a bad weight stops scoring (nothing is selected), while bad group settings
    // leave the selection standing: only the decision groups are refused.
    for (name, words, satisfied) in [
        ("legacy-heavy", "weight 11", "False"),
        ("legacy-oversized", "150%", "True"),
    ] {
        let p = wait_condition(
            &client,
            "bounds",
            name,
            "PlacementMisconfigured",
            "True",
            "Misconfigured",
        )
        .await;
        let message = &condition(&p, "PlacementMisconfigured").unwrap().message;
        assert!(message.contains(words), "{name}: {message}");
        assert_eq!(
            condition(&p, "PlacementSatisfied").unwrap().status,
            satisfied,
            "{name}"
        );
    }
    // The restored CRD refuses them again (once the change takes effect).
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait::until("the restored bounds refuse again", TIMEOUT, || {
        let (api, object, dry_run) = (api.clone(), object("late-heavy", &weight(11)), dry_run.clone());
        async move {
            match api.create(&dry_run, &object).await {
                Err(kube::Error::Api(status)) if status.code == 422 => Ok(Some(())),
                Ok(_) => Ok(None),
                Err(e) => Err(e),
            }
        }
    })
    .await
    .unwrap();
    wait_decided(&client, "bounds", "zero-count", &["bounds-a"]).await;
}

#[tokio::test]
async fn the_scheduling_disable_annotation_leaves_a_placement_alone() {
    let client = hub().await;
    world(&client, "disabled", "disabled-set").await;
    cluster(
        &client,
        "disabled-a",
        "disabled-set",
        json!({}),
        json!([]),
        json!([]),
    )
    .await;
    create(
        &Api::<Placement>::namespaced(client.clone(), "disabled"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": "off", "namespace": "disabled", "annotations": {
                   "cluster.open-cluster-management.io/experimental-scheduling-disable": "true"}}, "spec": {}}),
    )
    .await;
    placement(&client, "disabled", "on", json!({})).await;
    // Once the enabled placement in the same namespace is decided, the disabled one has had
    // every chance to be scheduled too.
    wait_decided(&client, "disabled", "on", &["disabled-a"]).await;
    let off = Api::<Placement>::namespaced(client.clone(), "disabled")
        .get("off")
        .await
        .unwrap();
    assert!(off.status.is_none_or(|s| s.conditions.is_none()));
    assert!(decided(&client, "disabled", "off").await.is_empty());
}

#[tokio::test]
async fn an_unchanged_placement_is_not_written_and_a_change_is_reported_with_scores() {
    let client = hub().await;
    world(&client, "quiet", "quiet-set").await;
    cluster(&client, "quiet-a", "quiet-set", json!({}), json!([]), json!([])).await;
    cluster(&client, "quiet-b", "quiet-set", json!({}), json!([]), json!([])).await;
    placement(&client, "quiet", "all", json!({})).await;
    placement(
        &client,
        "quiet",
        "picky",
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"pick": "me"}}}}]}),
    )
    .await;
    wait_decided(&client, "quiet", "all", &["quiet-a", "quiet-b"]).await;
    wait_condition(
        &client,
        "quiet",
        "picky",
        "PlacementSatisfied",
        "False",
        "NoManagedClusterMatched",
    )
    .await;
    let decisions = Api::<PlacementDecision>::namespaced(client.clone(), "quiet");
    let placements = Api::<Placement>::namespaced(client.clone(), "quiet");
    let decision_version = decisions.get("all-decision-1").await.unwrap().resource_version();
    let placement_version = placements.get("all").await.unwrap().resource_version();

    // One label change triggers both placements; only `picky`'s decision changes.
    let patch = json!({"metadata": {"labels": {"pick": "me"}}});
    Api::<ManagedCluster>::all(client.clone())
        .patch("quiet-b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_decided(&client, "quiet", "picky", &["quiet-b"]).await;
    assert_eq!(
        decisions.get("all-decision-1").await.unwrap().resource_version(),
        decision_version
    );
    assert_eq!(
        placements.get("all").await.unwrap().resource_version(),
        placement_version
    );

    // The changed decision is reported with the score of each selected cluster.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), "quiet");
    let note = wait::until("a ScoreUpdate event for picky", TIMEOUT, || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await?;
            Ok::<_, kube::Error>(list.items.into_iter().find_map(|e| {
                (e.reason.as_deref() == Some("ScoreUpdate")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("picky"))
                .then(|| e.note.unwrap_or_default())
            }))
        }
    })
    .await
    .unwrap();
    assert!(note.starts_with("quiet-b:"), "{note}");
}
