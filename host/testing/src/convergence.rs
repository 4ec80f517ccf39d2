//! Whether a fleet that went through a fault ended where a fault-free run of the same scenario
//! ends: a [`Snapshot`] of the objects that matter on the hub and the managed clusters,
//! normalised so that two runs on different control planes compare equal, and a [`Diff`] that
//! names what was lost, duplicated, left behind or changed.
//!
//! Reading is the only I/O ([`Snapshot::read_hub`], [`Snapshot::read_managed`]); normalising
//! and diffing are pure.

use std::{collections::BTreeMap, fmt};

use flotilla_localenv::{Error, Result};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams},
    core::GroupVersionKind,
};
use serde_json::{Map, Value};

/// What is read from a hub: (group, version, kind, plural, name prefixes; empty = all).
const HUB_KINDS: &[(&str, &str, &str, &str, &[&str])] = &[
    (
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
        "managedclusters",
        &[],
    ),
    (
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
        "manifestworks",
        &[],
    ),
    (
        "work.open-cluster-management.io",
        "v1alpha1",
        "ManifestWorkReplicaSet",
        "manifestworkreplicasets",
        &[],
    ),
    (
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ManagedClusterAddOn",
        "managedclusteraddons",
        &[],
    ),
    (
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
        "placementdecisions",
        &[],
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", RBAC_PREFIXES),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        RBAC_PREFIXES,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        RBAC_PREFIXES,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        RBAC_PREFIXES,
    ),
    ("coordination.k8s.io", "v1", "Lease", "leases", LEASE_PREFIXES),
    (
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        &[],
    ),
];

/// RBAC objects the hub and its add-ons write, by name; the apiserver's own are left out.
const RBAC_PREFIXES: &[&str] = &["open-cluster-management", "flotilla"];
/// Cluster leases (named `managed-cluster-lease`, `<addon>`) and flotilla's own; the
/// apiserver's and controller manager's are left out.
const LEASE_PREFIXES: &[&str] = &["managed-cluster-lease", "flotilla", "open-cluster-management"];

const APPLIED_WORK: (&str, &str, &str, &str) = (
    "work.open-cluster-management.io",
    "v1",
    "AppliedManifestWork",
    "appliedmanifestworks",
);

/// Normalised objects by `<cluster>/<kind>/<namespace>/<name>`; several under one key mean
/// duplicates (objects with generated names share the key of their `generateName`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The objects.
    pub objects: BTreeMap<String, Vec<Value>>,
}

impl Snapshot {
    /// Adds the hub's objects, keyed under `cluster` (a label such as `hub`).
    pub async fn read_hub(&mut self, cluster: &str, client: &Client) -> Result<()> {
        for (group, version, kind, plural, prefixes) in HUB_KINDS {
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
            for object in list(client, &resource).await? {
                let name = object.metadata.name.as_deref().unwrap_or_default();
                if prefixes.is_empty() || prefixes.iter().any(|p| name.starts_with(p)) {
                    self.add(cluster, kind, serde_json::to_value(&object).unwrap_or_default());
                }
            }
        }
        Ok(())
    }

    /// Adds a managed cluster's AppliedManifestWorks and every object they list as applied,
    /// keyed under `cluster`.
    pub async fn read_managed(&mut self, cluster: &str, client: &Client) -> Result<()> {
        let (group, version, kind, plural) = APPLIED_WORK;
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        for applied in list(client, &resource).await? {
            let applied = serde_json::to_value(&applied).unwrap_or_default();
            let resources = applied
                .pointer("/status/appliedResources")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            self.add(cluster, kind, applied);
            for resource in resources {
                let text = |field: &str| resource.get(field).and_then(Value::as_str).unwrap_or_default();
                let object = read_applied(
                    client,
                    text("group"),
                    text("version"),
                    text("resource"),
                    text("namespace"),
                    text("name"),
                )
                .await?;
                if let Some(object) = object {
                    let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
                    self.add(cluster, &kind, serde_json::to_value(&object).unwrap_or_default());
                }
            }
        }
        Ok(())
    }

    /// Adds one object, normalised, under `cluster`.
    pub fn add(&mut self, cluster: &str, kind: &str, object: Value) {
        let (key, value) = normalize(cluster, kind, object);
        self.objects.entry(key).or_default().push(value);
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.objects.values().map(Vec::len).sum()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

async fn list(client: &Client, resource: &ApiResource) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    api.list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| Error::State(format!("list {}: {e}", resource.plural)))
}

/// Reads an object an AppliedManifestWork lists; the kind comes from the object itself.
async fn read_applied(
    client: &Client,
    group: &str,
    version: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<DynamicObject>> {
    let resource = ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        },
        kind: String::new(),
        plural: plural.to_owned(),
    };
    let api: Api<DynamicObject> = if namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource)
    };
    api.get_opt(name)
        .await
        .map_err(|e| Error::State(format!("read applied {plural} {namespace}/{name}: {e}")))
}

/// The key and the comparable part of one object: identity, labels, annotations, spec, data
/// and status, without what differs between two runs of one scenario (uids, resource
/// versions, generations, timestamps, managed fields, certificate bytes, ports, condition
/// reasons and messages) and without what is churn by nature (a Lease's renewals).
pub fn normalize(cluster: &str, kind: &str, object: Value) -> (String, Value) {
    let metadata = object.get("metadata").cloned().unwrap_or_default();
    let text = |field: &str| {
        metadata
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let work_name = object.pointer("/spec/manifestWorkName").and_then(Value::as_str);
    let name = match (text("generateName"), work_name) {
        // Named `<hub hash>-<work>`, and the hub hash differs between hubs.
        (_, Some(work)) if kind == "AppliedManifestWork" => work.to_owned(),
        (generated, _) if !generated.is_empty() => format!("{generated}*"),
        _ => text("name"),
    };
    let key = format!("{cluster}/{kind}/{}/{name}", text("namespace"));
    let mut kept = Map::new();
    for field in ["labels", "annotations"] {
        if let Some(value) = metadata.get(field) {
            kept.insert(field.to_owned(), value.clone());
        }
    }
    if kind != "Lease" {
        for (field, value) in object.as_object().into_iter().flatten() {
            if !matches!(field.as_str(), "metadata" | "apiVersion" | "kind") {
                kept.insert(field.clone(), value.clone());
            }
        }
    }
    let mut value = Value::Object(kept);
    scrub(&mut value);
    (key, value)
}

/// Replaces run-specific values in place.
fn scrub(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for field in [
                "uid",
                "resourceVersion",
                "generation",
                "observedGeneration",
                "managedFields",
                "creationTimestamp",
            ] {
                map.remove(field);
            }
            for (field, inner) in map.iter_mut() {
                if field == "conditions" {
                    *inner = conditions_only(inner);
                } else if matches!(
                    field.as_str(),
                    "caBundle"
                        | "certificate"
                        | "request"
                        | "ca.crt"
                        | "tls.crt"
                        | "tls.key"
                        | "token"
                        | "username"
                        | "uid"
                        | "groups"
                        | "hubHash"
                        | "agentID"
                        // A record's work uid and hub resourceVersion (AppliedManifestWork
                        // annotations) differ between two hubs.
                        | "flotilla.dev/manifestwork-uid"
                        | "flotilla.dev/hub-resource-version"
                        // The fingerprint of the certificate a CSR was filed with
                        // (`spec.extra`), set by the apiserver.
                        | "authentication.kubernetes.io/credential-id"
                ) {
                    *inner = Value::String("<credential>".into());
                } else {
                    scrub(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(scrub),
        Value::String(text) => {
            if looks_like_time(text) {
                *text = "<time>".into();
            } else if let Some(port) = loopback_port(text) {
                *text = text.replace(&port, "<port>");
            }
        }
        _ => {}
    }
}

/// Conditions reduced to type and status, sorted by type.
fn conditions_only(value: &Value) -> Value {
    let mut conditions: Vec<(String, String)> = value
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default().to_owned();
            (field("type"), field("status"))
        })
        .collect();
    conditions.sort();
    Value::Array(
        conditions
            .into_iter()
            .map(|(type_, status)| serde_json::json!({"type": type_, "status": status}))
            .collect(),
    )
}

/// RFC 3339 timestamps as the apiserver writes them (`2026-01-02T03:04:05Z`, with or without
/// fractions).
fn looks_like_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && text.ends_with('Z')
        && bytes[..4].iter().all(u8::is_ascii_digit)
}

/// `:<port>` of a loopback URL in `text`, which differs between control planes.
fn loopback_port(text: &str) -> Option<String> {
    let rest = text.split("127.0.0.1:").nth(1)?;
    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!port.is_empty())
        .then(|| format!("127.0.0.1:{port}"))
        .map(|_| port)
}

/// What differs between a faulted run and a fault-free one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// In the fault-free run only.
    pub lost: Vec<String>,
    /// More copies after the fault than without it.
    pub duplicated: Vec<String>,
    /// After the fault only.
    pub left_behind: Vec<String>,
    /// Present in both, with different content: key, fault-free and faulted value.
    pub changed: Vec<(String, Value, Value)>,
}

impl Diff {
    /// Whether the runs ended alike.
    pub fn is_empty(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.left_behind.is_empty()
            && self.changed.is_empty()
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for key in &self.lost {
            writeln!(f, "lost:        {key}")?;
        }
        for key in &self.duplicated {
            writeln!(f, "duplicated:  {key}")?;
        }
        for key in &self.left_behind {
            writeln!(f, "left behind: {key}")?;
        }
        for (key, expected, actual) in &self.changed {
            writeln!(
                f,
                "changed:     {key}\n  fault-free: {expected}\n  faulted:    {actual}"
            )?;
        }
        Ok(())
    }
}

/// Compares a faulted run's snapshot with a fault-free one's.
pub fn diff(faulted: &Snapshot, fault_free: &Snapshot) -> Diff {
    let mut out = Diff::default();
    for (key, expected) in &fault_free.objects {
        match faulted.objects.get(key) {
            None => out.lost.push(key.clone()),
            Some(actual) if actual.len() > expected.len() => out.duplicated.push(key.clone()),
            Some(actual) if actual.len() < expected.len() => out.lost.push(key.clone()),
            Some(actual) => {
                let (mut expected, mut actual) = (expected.clone(), actual.clone());
                expected.sort_by_key(Value::to_string);
                actual.sort_by_key(Value::to_string);
                for (e, a) in expected.into_iter().zip(actual) {
                    if e != a {
                        out.changed.push((key.clone(), e, a));
                    }
                }
            }
        }
    }
    out.left_behind = faulted
        .objects
        .keys()
        .filter(|key| !fault_free.objects.contains_key(*key))
        .cloned()
        .collect();
    out
}

/// Panics with the diff unless the faulted run ended as the fault-free one did.
#[track_caller]
pub fn assert_converged(faulted: &Snapshot, fault_free: &Snapshot) {
    let diff = diff(faulted, fault_free);
    assert!(
        diff.is_empty(),
        "the faulted run ({} objects) differs from the fault-free one ({} objects):\n{diff}",
        faulted.len(),
        fault_free.len()
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn work(rv: &str, port: u16, manifests: Value) -> Value {
        json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": "w", "namespace": "c1", "uid": rv, "resourceVersion": rv,
                         "creationTimestamp": "2026-01-02T03:04:05Z", "generation": 3},
            "spec": {"workload": {"manifests": manifests}, "url": format!("https://127.0.0.1:{port}")},
            "status": {"conditions": [
                {"type": "Applied", "status": "True", "reason": "r", "lastTransitionTime": "2026-01-02T03:04:05.123456Z"},
                {"type": "Available", "status": "True", "message": rv}]},
        })
    }

    fn snapshot(objects: &[(&str, Value)]) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for (kind, object) in objects {
            snapshot.add("hub", kind, object.clone());
        }
        snapshot
    }

    #[test]
    fn two_runs_differing_only_in_run_specific_values_compare_equal() {
        let one = snapshot(&[("ManifestWork", work("1", 6443, json!([1])))]);
        let two = snapshot(&[("ManifestWork", work("77", 7443, json!([1])))]);
        assert_eq!(diff(&one, &two), Diff::default());
    }

    #[test]
    fn records_of_two_hubs_differing_in_work_uid_and_hub_version_compare_equal() {
        let record = |uid: &str, version: &str| {
            json!({"metadata": {"name": "h-w", "annotations": {
                "flotilla.dev/manifestwork-uid": uid, "flotilla.dev/hub-resource-version": version,
            }}, "spec": {"manifestWorkName": "w"}})
        };
        let one = snapshot(&[("AppliedManifestWork", record("a", "370"))]);
        let two = snapshot(&[("AppliedManifestWork", record("b", "376"))]);
        assert_eq!(diff(&one, &two), Diff::default());
    }

    #[test]
    fn csrs_filed_with_two_certificates_compare_equal() {
        let csr = |fingerprint: &str| {
            json!({"metadata": {"name": "addon-c1-a-x", "generateName": "addon-c1-a-"}, "spec": {
                "extra": {"authentication.kubernetes.io/credential-id": [fingerprint]},
            }})
        };
        let one = snapshot(&[("CertificateSigningRequest", csr("X509SHA256=aa"))]);
        let two = snapshot(&[("CertificateSigningRequest", csr("X509SHA256=bb"))]);
        assert_eq!(diff(&one, &two), Diff::default());
    }

    #[test]
    fn a_changed_spec_is_reported_with_both_values() {
        let faulted = snapshot(&[("ManifestWork", work("1", 1, json!([2])))]);
        let fault_free = snapshot(&[("ManifestWork", work("1", 1, json!([1])))]);
        let diff = diff(&faulted, &fault_free);
        assert_eq!(diff.changed.len(), 1, "{diff}");
        assert!(
            diff.to_string().contains("changed:     hub/ManifestWork/c1/w"),
            "{diff}"
        );
    }

    #[test]
    fn missing_extra_and_doubled_objects_are_lost_left_behind_and_duplicated() {
        let csr = |name: &str| json!({"metadata": {"name": name, "generateName": "c1-"}, "spec": {"request": name}});
        let lease = |holder: &str| json!({"metadata": {"name": "managed-cluster-lease", "namespace": "c1"}, "spec": {"holderIdentity": holder}});
        let fault_free = snapshot(&[
            ("CertificateSigningRequest", csr("c1-abc")),
            ("ManifestWork", work("1", 1, json!([]))),
        ]);
        let faulted = snapshot(&[
            ("CertificateSigningRequest", csr("c1-abc")),
            ("CertificateSigningRequest", csr("c1-def")),
            ("Lease", lease("x")),
        ]);
        let diff = diff(&faulted, &fault_free);
        assert_eq!(diff.lost, ["hub/ManifestWork/c1/w"]);
        assert_eq!(diff.duplicated, ["hub/CertificateSigningRequest//c1-*"]);
        assert_eq!(diff.left_behind, ["hub/Lease/c1/managed-cluster-lease"]);
        assert!(diff.changed.is_empty());
    }

    #[test]
    fn applied_works_of_different_hubs_share_a_key() {
        let applied = |hash: &str| json!({"metadata": {"name": format!("{hash}-w")}, "spec": {"hubHash": hash, "agentID": hash, "manifestWorkName": "w"}});
        let one = snapshot(&[("AppliedManifestWork", applied("aaa"))]);
        let two = snapshot(&[("AppliedManifestWork", applied("bbb"))]);
        assert!(diff(&one, &two).is_empty(), "{}", diff(&one, &two));
    }

    #[test]
    fn leases_compare_by_identity_and_conditions_by_type_and_status() {
        let lease = |holder: &str| json!({"metadata": {"name": "l", "namespace": "n"}, "spec": {"holderIdentity": holder, "leaseTransitions": 4}});
        assert!(
            diff(
                &snapshot(&[("Lease", lease("a"))]),
                &snapshot(&[("Lease", lease("b"))])
            )
            .is_empty()
        );
        let mut unknown = work("1", 1, json!([]));
        unknown["status"]["conditions"][1]["status"] = json!("Unknown");
        let diff = diff(
            &snapshot(&[("ManifestWork", unknown)]),
            &snapshot(&[("ManifestWork", work("1", 1, json!([])))]),
        );
        assert_eq!(diff.changed.len(), 1);
    }
}
