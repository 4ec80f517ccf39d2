//! deploy/hub's ClusterRole is exactly what `flotilla hub` needs: the real hub runs as that
//! service account (not admin, electing a leader as deployed) through joining and accepting
//! clusters, their leases, a ManifestWork, a placement with a ManifestWorkReplicaSet, and a
//! plugin add-on enabled and disabled. Then its own count of API requests
//! (`flotilla_apiserver_requests_total` on `/metrics`) shows (a) it was never refused (no 403)
//! and (b) every rule of the ClusterRole — each group × resource × verb — was used, except the
//! few in [`ALLOWED_UNUSED`], each with the reason no request shows it (and the few in
//! [`PERHAPS_UNUSED`], which a run uses or not as its timing goes). The klusterlets run as
//! deploy/klusterlet's service account and are never refused either.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use common::{Fleet, flotilla_at, ok};
use flotilla_api::work::v1::ManifestWork;
use flotilla_testing::wait;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

const TIMEOUT: Duration = Duration::from_secs(150);

/// (group, resource, verb) of deploy/hub's rules that a run may or may not use, and when it does.
const PERHAPS_UNUSED: &[(&str, &str, &str, &str)] = &[(
    "",
    "namespaces",
    "patch",
    "an accepted cluster's namespace is created once, and applied again when its accept pass \
     failed after creating it (a conflict on the condition it writes), after RBAC drift or at a \
     resync (registration hub/accept)",
)];

/// (group, resource, verb) of deploy/hub's rules that no request of the hub shows, and why
/// they are needed all the same. Most are permissions the apiserver checks on another request
/// rather than requests of their own.
const ALLOWED_UNUSED: &[(&str, &str, &str, &str)] = &[
    // Checked by the apiserver on other requests, never requested themselves.
    (
        RBAC,
        "clusterroles",
        "bind",
        "the hub binds clusters to the hub-wide roles it may bind by name but does not hold",
    ),
    (
        CLUSTER,
        "managedclusters",
        "update",
        "held so each cluster's own ClusterRole grants nothing the hub lacks (no escalate)",
    ),
    (
        CLUSTER,
        "managedclusters/status",
        "update",
        "as managedclusters update",
    ),
    (RBAC, "roles", "bind", BIND),
    (RBAC, "roles", "escalate", ESCALATE),
    (
        CERTS,
        "signers",
        "approve",
        "approving a kube-apiserver-client CSR (add-on and renewal) is checked against its signer",
    ),
    (
        CLUSTER,
        "managedclustersets/join",
        "create",
        "admission lets only who may join the set label a cluster into it; the hub labels clusters into `default`",
    ),
    // Paths this run does not take.
    (
        "addon.open-cluster-management.io",
        "managedclusteraddons/status",
        "patch",
        "the lease controller sets an add-on's Available Unknown when its cluster stops renewing (registration hub/lease); the add-on manager writes statuses whole (update)",
    ),
    (
        "addon.open-cluster-management.io",
        "addontemplates",
        "get",
        "the AddOnTemplate of a template add-on is read when one is enabled (addon_template_e2e); this run enables none",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        "create",
        "the hub installs the policies at start when `flotilla init` has not (a kustomize install); here init did",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        "create",
        "as validatingadmissionpolicies",
    ),
    (
        RBAC,
        "clusterroles",
        "delete",
        "a deleted cluster's ClusterRole goes (registration hub/deletion)",
    ),
    (
        RBAC,
        "clusterrolebindings",
        "delete",
        "a deleted cluster's ClusterRoleBinding goes (registration hub/deletion)",
    ),
    (
        RBAC,
        "rolebindings",
        "delete",
        "a denied or deleted cluster loses its RoleBindings (registration hub/accept)",
    ),
    (
        RBAC,
        "roles",
        "delete",
        "an add-on's stale hub Roles go when its registrations change (addon-manager registration)",
    ),
    (
        RBAC,
        "roles",
        "list",
        "an add-on registered before lists its hub Roles to prune the stale ones (addon-manager registration); a new one has none to list",
    ),
    (
        CERTS,
        "certificatesigningrequests/approval",
        "patch",
        "the hub approves a registered cluster's certificate renewal with a patch (registration hub/csr)",
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create",
        "a renewal is approved only if the cluster's agent may renew (registration hub/csr)",
    ),
    (
        CERTS,
        "certificatesigningrequests/status",
        "patch",
        "the certificate of an add-on's custom signer is written into its CSR (addon-manager csr)",
    ),
    (
        CLUSTER,
        "managedclustersets",
        "create",
        "a deleted `default` or `global` set is made again (registration hub/clusterset)",
    ),
    (
        CLUSTER,
        "placementdecisions",
        "delete",
        "decision pages no longer needed go when a placement shrinks (placement)",
    ),
    (
        CLUSTER,
        "placementdecisions",
        "get",
        "a decision page another writer created first is read back (placement)",
    ),
    (
        CLUSTER,
        "placementdecisions",
        "patch",
        "a decision page's labels are corrected (placement)",
    ),
    (
        "",
        "configmaps",
        "get",
        "a plugin registered from a ConfigMap is read (plugin host); this run's comes from OCI",
    ),
    (
        "addon.open-cluster-management.io",
        "addondeploymentconfigs",
        "get",
        "an add-on's referenced AddOnDeploymentConfig is read (addon-manager configs)",
    ),
    (
        "plugins.flotilla.dev",
        "addonplugins",
        "get",
        "a plugin's faults are summarised in its status (plugin host)",
    ),
    (
        "work.open-cluster-management.io",
        "manifestworks",
        "get",
        "an add-on's pre-delete work is read before it is written (addon-manager deploy)",
    ),
];
const RBAC: &str = "rbac.authorization.k8s.io";
const CERTS: &str = "certificates.k8s.io";
const CLUSTER: &str = "cluster.open-cluster-management.io";
const BIND: &str = "the hub binds add-on agents to Roles it does not hold itself (cluster namespaces only)";
const ESCALATE: &str =
    "the hub writes add-on agents' Roles it does not hold itself (cluster namespaces only)";

/// A rule's unit: (group, resource, verb).
type Permission = (String, String, String);

/// Every (group, resource, verb) of ClusterRole `flotilla:hub` in deploy/hub.
fn hub_role_permissions() -> BTreeSet<Permission> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/hub/hub.yaml")).unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|d| <serde_json::Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "flotilla:hub")
        .unwrap();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let mut permissions = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    permissions.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    permissions
}

/// A process's API requests from its `/metrics`: (group, resource, verb) → response codes.
async fn requests_of(ops: &str) -> BTreeMap<Permission, BTreeSet<String>> {
    let scrape = common::scrape_metrics(ops).await;
    let mut requests: BTreeMap<Permission, BTreeSet<String>> = BTreeMap::new();
    for sample in scrape
        .samples
        .iter()
        .filter(|s| s.metric == "flotilla_apiserver_requests_total")
    {
        let label = |name: &str| sample.labels.get(name).unwrap_or_default().to_owned();
        let key = (label("group"), label("resource"), label("verb"));
        // A server-side apply that makes the object (201 Created) is authorised as `create`.
        if key.2 == "patch" && label("code") == "201" {
            requests
                .entry((key.0.clone(), key.1.clone(), "create".to_owned()))
                .or_default()
                .insert(label("code"));
        }
        requests.entry(key).or_default().insert(label("code"));
    }
    requests
}

fn kubectl_apply(fleet: &Fleet, yaml: &str) {
    let path = fleet.state().join("apply.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = fleet
        .hub
        .kubectl()
        .args(["apply", "-f", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Waits until `count(cluster namespace)` of ManifestWorks named by `keep` is `want` on each
/// cluster, with the hub's log on failure.
async fn await_works(state: &Path, hub: &Client, what: &str, want: usize, keep: fn(&ManifestWork) -> bool) {
    let result = wait::until(what, TIMEOUT, || async {
        let mut counts = Vec::new();
        for cluster in ["cluster1", "cluster2"] {
            let works = Api::<ManifestWork>::namespaced(hub.clone(), cluster)
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            counts.push(works.items.iter().filter(|w| keep(w)).count());
        }
        if counts.iter().all(|c| *c == want) {
            Ok(Some(()))
        } else {
            Err(format!("works per cluster {counts:?}"))
        }
    })
    .await;
    if let Err(e) = result {
        panic!("{e}\nhub log:\n{}", log_tail(state));
    }
}

/// The last lines of the hub's log.
fn log_tail(state: &Path) -> String {
    let log = std::fs::read_to_string(state.join("hub.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn label_is(work: &ManifestWork, key: &str, value: &str) -> bool {
    work.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .is_some_and(|v| v == value)
}

#[tokio::test]
async fn the_hub_as_deploy_hubs_service_account_is_never_refused_and_uses_every_rule_of_its_role() {
    // Join, CSR approval, accept and the clusters' leases: what Fleet does.
    let fleet = Fleet::start_with("rbac", &[], true).await;
    let (state, admin) = (fleet.state(), fleet.admin());
    let hub = fleet.hub.admin_client().await.unwrap();

    // A placement over both clusters and a ManifestWorkReplicaSet following it.
    kubectl_apply(
        &fleet,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
         metadata: {name: all, namespace: apps}\nspec: {}\n",
    );
    ok(flotilla_at(
        state,
        admin,
        &["clusterset", "bind", "global", "--namespace", "apps"],
    ));
    kubectl_apply(
        &fleet,
        "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\n\
         metadata: {name: web, namespace: apps}\n\
         spec:\n  placementRefs: [{name: all}]\n  manifestWorkTemplate:\n    workload:\n      manifests:\n\
         \x20     - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: default}, data: {a: b}}\n",
    );
    let from_replica_set = |w: &ManifestWork| {
        label_is(
            w,
            "work.open-cluster-management.io/manifestworkreplicaset",
            "apps.web",
        )
    };
    await_works(state, &hub, "the replica set's works", 1, from_replica_set).await;

    // A plugin add-on enabled on both clusters, then disabled.
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "enable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1,cluster2",
        ],
    ));
    let of_addon = |w: &ManifestWork| label_is(w, "open-cluster-management.io/addon-name", "helloworld");
    await_works(state, &hub, "helloworld's works", 1, of_addon).await;
    // The add-on's registration: its CSR approved by the hub, its hub kubeconfig written.
    for managed in [&fleet.one, &fleet.two] {
        let secrets: Api<Secret> = Api::namespaced(
            managed.admin_client().await.unwrap(),
            "open-cluster-management-agent-addon",
        );
        let found = wait::until("helloworld-hub-kubeconfig", TIMEOUT, || async {
            secrets
                .get_opt("helloworld-hub-kubeconfig")
                .await
                .map(|s| s.map(|_| ()))
        })
        .await;
        if let Err(e) = found {
            panic!("{e}\nhub log:\n{}", log_tail(state));
        }
    }
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "disable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1,cluster2",
        ],
    ));
    await_works(state, &hub, "helloworld's works gone", 0, of_addon).await;

    // Installed by the hub itself on the placement's clusters, then removed from them.
    for verb in ["enable", "disable"] {
        ok(flotilla_at(
            state,
            admin,
            &["addon", verb, "--names", "helloworld", "--placement", "apps/all"],
        ));
        let want = usize::from(verb == "enable");
        await_works(
            state,
            &hub,
            &format!("helloworld {verb}d by placement"),
            want,
            of_addon,
        )
        .await;
    }

    // The replica set goes, and its works with it.
    let out = fleet
        .hub
        .kubectl()
        .args(["delete", "manifestworkreplicaset", "web", "-n", "apps"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    await_works(state, &hub, "the replica set's works gone", 0, from_replica_set).await;

    hub_identity_is_confined(state, &hub).await;
    // A quick run can end before the leader's first renewal (every retry period).
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(hub.clone(), "open-cluster-management-hub");
    wait::until("the hub's first lease renewal", TIMEOUT, || async {
        let lease = leases.get_opt("flotilla-hub").await.map_err(|e| e.to_string())?;
        let spec = lease.and_then(|l| l.spec).unwrap_or_default();
        Ok::<_, String>((spec.renew_time.is_some() && spec.renew_time != spec.acquire_time).then_some(()))
    })
    .await
    .unwrap();

    let requests = requests_of(&fleet.hub_ops().await).await;
    let refused: Vec<_> = requests
        .iter()
        .filter(|(_, codes)| codes.contains("403"))
        .map(|(p, _)| p)
        .collect();
    assert!(
        refused.is_empty(),
        "deploy/hub's ClusterRole lacks (group, resource, verb): {refused:?}"
    );

    // The klusterlets ran as deploy/klusterlet's service account on their clusters. Its one
    // rule is the broad one the work agent needs to apply whatever a ManifestWork holds
    // (cluster-admin, as OCM's work agent has), so there is no narrower rule to prove unused;
    // it suffices, and the work agent's applies went through it.
    for cluster in ["cluster1", "cluster2"] {
        let requests = requests_of(&fleet.klusterlet_ops(cluster).await).await;
        let refused: Vec<_> = requests
            .iter()
            .filter(|(_, codes)| codes.contains("403"))
            .map(|(p, _)| p)
            .collect();
        assert!(
            refused.is_empty(),
            "deploy/klusterlet's binding lacks on {cluster}: {refused:?}"
        );
        let applied = ("".to_owned(), "configmaps".to_owned(), "create".to_owned());
        assert!(
            requests.contains_key(&applied),
            "the work agent on {cluster} created the replica set's ConfigMap: {:?}",
            requests.keys().collect::<Vec<_>>()
        );
    }

    let permissions = |list: &[(&str, &str, &str, &str)]| -> BTreeSet<Permission> {
        list.iter()
            .map(|(g, r, v, _)| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned()))
            .collect()
    };
    let allowed = permissions(ALLOWED_UNUSED);
    let perhaps = permissions(PERHAPS_UNUSED);
    let unused: Vec<_> = hub_role_permissions()
        .into_iter()
        .filter(|p| !requests.contains_key(p) && !allowed.contains(p) && !perhaps.contains(p))
        .collect();
    let used_yet_allowed: Vec<_> = allowed.iter().filter(|p| requests.contains_key(*p)).collect();
    assert!(
        unused.is_empty() && used_yet_allowed.is_empty(),
        "rules of deploy/hub's ClusterRole no request of the hub used (remove them or justify them \
         in ALLOWED_UNUSED): {unused:#?}\nALLOWED_UNUSED entries that are used after all: \
         {used_yet_allowed:?}\nrequests: {:#?}",
        requests.keys().collect::<Vec<_>>()
    );
}

/// The hub's identity approves kube-apiserver-client CSRs only: a kubelet-serving request
/// (a node's serving identity) and an add-on signer the admin has not granted are refused; it
/// reads Secrets in its own namespace only; and it cannot grant itself more (see
/// [`hub_identity_cannot_grant_itself_more`]).
async fn hub_identity_is_confined(state: &Path, admin: &Client) {
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    };
    use kube::api::{Patch, PatchParams, PostParams};

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(state.join("hub-sa.kubeconfig")).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let hub_identity = Client::try_from(config).unwrap();
    hub_identity_cannot_grant_itself_more(&hub_identity, admin).await;
    // Authorised before it is looked up: 404 where the hub may read, 403 where it may not.
    let elsewhere = Api::<Secret>::namespaced(hub_identity.clone(), "kube-system")
        .get("any-secret")
        .await;
    assert!(
        matches!(&elsewhere, Err(kube::Error::Api(status)) if status.code == 403),
        "the hub's identity may read Secrets in kube-system: {:?}",
        elsewhere.map(|_| ())
    );
    let as_hub: Api<CertificateSigningRequest> = Api::all(hub_identity);
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let made =
        flotilla_core::x509::client_request("system:node:n1", &["system:nodes"], &[], &["n1"]).unwrap();
    for (name, signer, usages) in [
        (
            "kubelet-serving-n1",
            "kubernetes.io/kubelet-serving",
            ["digital signature", "key encipherment", "server auth"],
        ),
        (
            "ungranted-addon-signer",
            "example.com/not-granted",
            ["digital signature", "key encipherment", "client auth"],
        ),
    ] {
        let csr = CertificateSigningRequest {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: k8s_openapi::ByteString(made.request_pem.clone().into_bytes()),
                signer_name: signer.into(),
                usages: Some(usages.map(String::from).to_vec()),
                ..Default::default()
            },
            ..Default::default()
        };
        csrs.create(&PostParams::default(), &csr).await.unwrap();
        let approval = serde_json::json!({"status": {"conditions": [CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("Test".into()),
            ..Default::default()
        }]}});
        let refused = as_hub
            .patch_approval(name, &PatchParams::default(), &Patch::Merge(&approval))
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
            "the hub's identity approved a {signer} CSR: {refused:?}"
        );
    }
}

/// The hub's own service account as a subject.
fn hub_subject() -> serde_json::Value {
    serde_json::json!({"kind": "ServiceAccount", "name": "flotilla-hub", "namespace": "open-cluster-management-hub"})
}

fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// Why `result` is not a 403 from RBAC or (when `policy`) from the confinement policy, if so.
fn not_refused<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, kube::Error>,
    policy: bool,
) -> Option<String> {
    match &result {
        Err(kube::Error::Api(status))
            if status.code == 403
                && status
                    .message
                    .contains("ValidatingAdmissionPolicy 'flotilla.dev-hub-confinement'")
                    == policy =>
        {
            None
        }
        other => Some(format!("the hub's identity could {what}: {other:?}")),
    }
}

/// A hub that is taken over cannot make itself cluster-admin: it may not bind a ClusterRole it
/// does not hold (cluster-admin), write one (no `escalate` on ClusterRoles), widen the hub-wide
/// roles it binds, change the policy confining it; its `bind`/`escalate` on Roles and its
/// Leases work in cluster namespaces only (Roles for agents only), and it may not make another
/// namespace one.
async fn hub_identity_cannot_grant_itself_more(hub: &Client, admin: &Client) {
    use k8s_openapi::api::{
        admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        core::v1::Namespace,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    };
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use serde_json::json;

    let create = PostParams::default();
    let mut open = Vec::new();
    let binding = |kind: &str,
                   name: &str,
                   namespace: Option<&str>,
                   role_kind: &str,
                   role: &str,
                   subject: serde_json::Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
            "subjects": [subject],
        })
    };
    let secrets_rule = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]);

    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(hub.clone());
    let to_cluster_admin: ClusterRoleBinding = decode(binding(
        "ClusterRoleBinding",
        "takeover",
        None,
        "ClusterRole",
        "cluster-admin",
        hub_subject(),
    ));
    open.extend(not_refused(
        "bind cluster-admin to itself",
        cluster_bindings.create(&create, &to_cluster_admin).await,
        false,
    ));
    let cluster_roles: Api<ClusterRole> = Api::all(hub.clone());
    let everything: ClusterRole = decode(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "takeover"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }));
    open.extend(not_refused(
        "write a ClusterRole granting everything",
        cluster_roles.create(&create, &everything).await,
        false,
    ));
    open.extend(not_refused(
        "widen a hub-wide role it may bind",
        cluster_roles
            .patch(
                "open-cluster-management:managedcluster:registration",
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": secrets_rule})),
            )
            .await,
        false,
    ));
    let confinement: Api<ValidatingAdmissionPolicyBinding> = Api::all(hub.clone());
    open.extend(not_refused(
        "turn its confinement policy to audit only",
        confinement
            .patch(
                "flotilla.dev-hub-confinement",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"validationActions": ["Audit"]}})),
            )
            .await,
        false,
    ));

    // Roles: cluster namespaces only, bound to agents only.
    let secrets_role = |namespace: &str| -> Role {
        decode(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "takeover", "namespace": namespace},
            "rules": secrets_rule,
        }))
    };
    open.extend(not_refused(
        "write a Role in kube-system",
        Api::<Role>::namespaced(hub.clone(), "kube-system")
            .create(&create, &secrets_role("kube-system"))
            .await,
        true,
    ));
    let agent_group =
        json!({"apiGroup": RBAC, "kind": "Group", "name": "system:open-cluster-management:cluster1"});
    let in_kube_system: RoleBinding = decode(binding(
        "RoleBinding",
        "takeover",
        Some("kube-system"),
        "ClusterRole",
        "open-cluster-management:managedcluster:registration",
        agent_group,
    ));
    open.extend(not_refused(
        "bind a cluster's registration role in kube-system (its leader leases)",
        Api::<RoleBinding>::namespaced(hub.clone(), "kube-system")
            .create(&create, &in_kube_system)
            .await,
        true,
    ));
    // In a cluster namespace a Role is the hub's to write (add-on agents' permissions), but
    // not to bind to itself.
    Api::<Role>::namespaced(hub.clone(), "cluster1")
        .create(&create, &secrets_role("cluster1"))
        .await
        .unwrap();
    let to_itself: RoleBinding = decode(binding(
        "RoleBinding",
        "takeover",
        Some("cluster1"),
        "Role",
        "takeover",
        hub_subject(),
    ));
    open.extend(not_refused(
        "bind a Role of a cluster namespace to itself",
        Api::<RoleBinding>::namespaced(hub.clone(), "cluster1")
            .create(&create, &to_itself)
            .await,
        true,
    ));
    Api::<Role>::namespaced(admin.clone(), "cluster1")
        .delete("takeover", &DeleteParams::default())
        .await
        .unwrap();
    open.extend(not_refused(
        "make kube-system a cluster namespace",
        Api::<Namespace>::all(hub.clone())
            .patch(
                "kube-system",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"open-cluster-management.io/cluster-name": "kube-system"}}})),
            )
            .await,
        true,
    ));
    let leader_lease: k8s_openapi::api::coordination::v1::Lease = decode(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {"holderIdentity": "flotilla-hub", "leaseDurationSeconds": 3600},
    }));
    open.extend(not_refused(
        "take a leader-election Lease in kube-system",
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(hub.clone(), "kube-system")
            .create(&create, &leader_lease)
            .await,
        true,
    ));
    assert!(open.is_empty(), "doors open:\n{}", open.join("\n"));
}
