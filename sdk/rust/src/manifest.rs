//! Building manifests from `k8s-openapi` types.
//!
//! [`to_manifest`] serializes any top-level Kubernetes type with its `apiVersion` and `kind` set
//! (from the type, so they cannot be forgotten or misspelt). [`meta`] and [`labels`] shorten the
//! usual `ObjectMeta` boilerplate; [`agent_deployment`] wraps a pod spec in the Deployment most
//! add-on agents are, and [`agent_container`] the container in it; [`role_bound_to`] grants rules
//! in one namespace and [`cluster_role_bound_to`] cluster-wide, with [`rule`], [`agent_group`]
//! (an agent's hub identity) and [`service_account`] as subjects.
//!
//! An agent reaches the hub with the credential the klusterlet obtains for it and keeps in
//! Secret `<addon>-hub-kubeconfig` of the install namespace; [`hub_kubeconfig_volume`] mounts
//! it into the agent's pod:
//!
//! ```text
//!   install namespace                        cluster scope
//!   ├─ ServiceAccount  <agent-sa>  ◀──────── ClusterRoleBinding <name> ─▶ ClusterRole <name>
//!   ├─ Role, RoleBinding (role_bound_to)       (cluster_role_bound_to)
//!   ├─ Secret <addon>-hub-kubeconfig           (written by the klusterlet)
//!   │    └──▶ volume hub-config, read-only at <dir> (hub_kubeconfig_volume)
//!   └─ Deployment (agent_deployment) ─ pod (agent_pod) ─ container (agent_container)
//! ```

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{Container, PodSpec, PodTemplateSpec, SecretVolumeSource, Volume, VolumeMount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};
use serde::Serialize;

use crate::types::{AddonError, Manifest};

/// `object` as a manifest with `apiVersion` and `kind` from its type.
pub fn to_manifest<K: k8s_openapi::Resource + Serialize>(object: &K) -> Result<Manifest, AddonError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| AddonError::Internal(format!("cannot serialize {}: {e}", K::KIND)))?;
    let map = value
        .as_object_mut()
        .ok_or_else(|| AddonError::Internal(format!("{} did not serialize to a JSON object", K::KIND)))?;
    map.insert("apiVersion".to_owned(), K::API_VERSION.into());
    map.insert("kind".to_owned(), K::KIND.into());
    Ok(value)
}

/// `ObjectMeta` with a name and, if not empty, a namespace.
pub fn meta(name: impl Into<String>, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A label map from pairs.
pub fn labels<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A Deployment `name` in `namespace` running `replicas` copies of `pod`, whose pods carry
/// `pod_labels` and are selected by them; the Deployment carries them too.
pub fn agent_deployment(
    name: &str,
    namespace: &str,
    pod_labels: BTreeMap<String, String>,
    replicas: i32,
    pod: PodSpec,
) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            labels: Some(pod_labels.clone()),
            ..meta(name, namespace)
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(pod_labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// A container `name` running `program` of `image` with `args`; the image is pulled only when
/// the node does not have it (`IfNotPresent`), so a tag pushed once to a local registry serves.
/// Set mounts, resources and the like on the result.
pub fn agent_container(name: &str, image: impl Into<String>, program: &str, args: Vec<String>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![program.to_owned()]),
        args: Some(args),
        ..Container::default()
    }
}

/// Name of the volume [`hub_kubeconfig_volume`] gives the hub credential.
pub const HUB_KUBECONFIG_VOLUME: &str = "hub-config";

/// The Secret holding add-on `addon`'s hub credential on the managed cluster,
/// `<addon>-hub-kubeconfig`, in the install namespace: the klusterlet writes it (keys
/// `kubeconfig`, `tls.crt`, `tls.key`; the kubeconfig names the other two by relative path)
/// and rewrites it when the credential is rotated.
pub fn hub_kubeconfig_secret(addon: &str) -> String {
    format!("{addon}-hub-kubeconfig")
}

/// Volume `name` of Secret `secret`, every key a file.
pub fn secret_volume(name: &str, secret: impl Into<String>) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A read-only mount of volume `volume` at directory `dir`.
pub fn read_only_mount(volume: &str, dir: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_owned(),
        mount_path: dir.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// The hub credential of add-on `addon` for its agent's pod: volume [`HUB_KUBECONFIG_VOLUME`] of
/// Secret [`hub_kubeconfig_secret`], and its read-only mount at `dir` for the container, where
/// the agent finds `<dir>/kubeconfig`.
///
/// Mount the whole directory (no `subPath`): the kubelet then updates the files in place when
/// the klusterlet rotates the credential, and an agent that rereads them needs no restart.
pub fn hub_kubeconfig_volume(addon: &str, dir: &str) -> (Volume, VolumeMount) {
    (
        secret_volume(HUB_KUBECONFIG_VOLUME, hub_kubeconfig_secret(addon)),
        read_only_mount(HUB_KUBECONFIG_VOLUME, dir),
    )
}

/// The pod of an agent that works with the hub: `container`, with add-on `addon`'s hub
/// credential mounted at `hub_kubeconfig_dir` ([`hub_kubeconfig_volume`]; the container's own
/// mounts are replaced), running as ServiceAccount `service_account`. Set node placement and
/// the like on the result.
pub fn agent_pod(
    service_account: &str,
    container: Container,
    addon: &str,
    hub_kubeconfig_dir: &str,
) -> PodSpec {
    let (volume, mount) = hub_kubeconfig_volume(addon, hub_kubeconfig_dir);
    PodSpec {
        service_account_name: Some(service_account.to_owned()),
        containers: vec![Container {
            volume_mounts: Some(vec![mount]),
            ..container
        }],
        volumes: Some(vec![volume]),
        ..PodSpec::default()
    }
}

/// A rule granting `verbs` on `resource` of API group `group` (`""` for the core group).
pub fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The group every credential the add-on's agent obtains on `cluster` carries on the hub
/// (`system:open-cluster-management:cluster:<cluster>:addon:<addon>`): the subject of its hub
/// permissions.
pub fn agent_group(cluster: &str, addon: &str) -> Subject {
    Subject {
        kind: "Group".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        name: format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}"),
        namespace: None,
    }
}

/// Service account `name` in `namespace` as a subject.
pub fn service_account(name: &str, namespace: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        api_group: None,
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
    }
}

/// Role `name` in `namespace` with `rules`, and RoleBinding `name` granting it to `subject`.
pub fn role_bound_to(
    name: &str,
    namespace: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> Result<Vec<Manifest>, AddonError> {
    let role = Role {
        metadata: meta(name, namespace),
        rules: Some(rules),
    };
    let binding = RoleBinding {
        metadata: meta(name, namespace),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.to_owned(),
        },
        subjects: Some(vec![subject]),
    };
    Ok(vec![to_manifest(&role)?, to_manifest(&binding)?])
}

/// ClusterRole `name` with `rules`: for what an agent needs beyond one namespace (cluster-scoped
/// resources such as nodes or tokenreviews, or reads in every namespace). Prefer
/// [`role_bound_to`] for what one namespace holds.
pub fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, ""),
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// ClusterRoleBinding `name` granting ClusterRole `cluster_role` to `subject`.
pub fn cluster_role_binding(name: &str, cluster_role: &str, subject: Subject) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name, ""),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: cluster_role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

/// ClusterRole `name` with `rules`, and ClusterRoleBinding `name` granting it to `subject`
/// (usually the agent's [`service_account`]): the cluster-wide counterpart of [`role_bound_to`].
pub fn cluster_role_bound_to(
    name: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> Result<Vec<Manifest>, AddonError> {
    Ok(vec![
        to_manifest(&cluster_role(name, rules))?,
        to_manifest(&cluster_role_binding(name, name, subject))?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceAccount;

    #[test]
    fn manifests_carry_api_version_and_kind() {
        let sa = ServiceAccount {
            metadata: meta("agent", "ns"),
            ..ServiceAccount::default()
        };
        let m = to_manifest(&sa).unwrap();
        assert_eq!(m["apiVersion"], "v1");
        assert_eq!(m["kind"], "ServiceAccount");
        assert_eq!(m["metadata"]["namespace"], "ns");
    }

    #[test]
    fn agent_deployments_select_their_own_pods() {
        let d = to_manifest(&agent_deployment(
            "agent",
            "ns",
            labels([("app", "agent")]),
            2,
            PodSpec::default(),
        ))
        .unwrap();
        assert_eq!(d["metadata"]["labels"]["app"], "agent");
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "agent");
        assert_eq!(d["spec"]["template"]["metadata"]["labels"]["app"], "agent");
    }

    #[test]
    fn agent_containers_run_their_program_and_pull_only_when_missing() {
        let c = agent_container("agent", "registry/agent:1", "/agent", vec!["--v=2".to_owned()]);
        assert_eq!(c.name, "agent");
        assert_eq!(c.image.as_deref(), Some("registry/agent:1"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(c.command, Some(vec!["/agent".to_owned()]));
        assert_eq!(c.args, Some(vec!["--v=2".to_owned()]));
        assert_eq!(c.volume_mounts, None);
    }

    #[test]
    fn the_hub_kubeconfig_is_the_addons_secret_mounted_read_only_at_the_directory() {
        let (volume, mount) = hub_kubeconfig_volume("my-addon", "/var/run/hub");
        let volume = serde_json::to_value(&volume).unwrap();
        assert_eq!(
            volume,
            serde_json::json!({"name": "hub-config", "secret": {"secretName": "my-addon-hub-kubeconfig"}})
        );
        let mount = serde_json::to_value(&mount).unwrap();
        assert_eq!(
            mount,
            serde_json::json!({"name": "hub-config", "mountPath": "/var/run/hub", "readOnly": true})
        );
    }

    #[test]
    fn agent_pods_run_the_container_as_the_account_with_the_hub_credential_mounted() {
        let container = agent_container("agent", "registry/agent:1", "/agent", Vec::new());
        let pod = agent_pod("agent-sa", container, "my-addon", "/var/run/hub");
        assert_eq!(pod.service_account_name.as_deref(), Some("agent-sa"));
        let (volume, mount) = hub_kubeconfig_volume("my-addon", "/var/run/hub");
        assert_eq!(pod.volumes, Some(vec![volume]));
        let [container] = pod.containers.as_slice() else {
            panic!("one container: {:?}", pod.containers);
        };
        assert_eq!(container.name, "agent");
        assert_eq!(container.volume_mounts, Some(vec![mount]));
    }

    #[test]
    fn cluster_roles_are_cluster_scoped_and_bound_to_the_subject_by_name() {
        let rendered = cluster_role_bound_to(
            "addon:agent",
            vec![rule("", "nodes", &["get", "list"])],
            service_account("agent-sa", "ns"),
        )
        .unwrap();
        let [role, binding] = rendered.as_slice() else {
            panic!("two objects: {rendered:?}");
        };
        assert_eq!(role["kind"], "ClusterRole");
        assert_eq!(role["metadata"], serde_json::json!({"name": "addon:agent"}));
        assert_eq!(role["rules"][0]["resources"][0], "nodes");
        assert_eq!(binding["kind"], "ClusterRoleBinding");
        assert_eq!(binding["metadata"], serde_json::json!({"name": "addon:agent"}));
        assert_eq!(
            binding["roleRef"],
            serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "addon:agent"})
        );
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "agent-sa", "namespace": "ns"}])
        );
    }
}
