//! Hub permissions of add-on agents, as pure rules: what a plugin's `hub-permissions` answer may
//! grant, to whom, and through which roles. The registration controller applies an answer only
//! once every object in it passed, and applies the objects as checked here (typed, so nothing
//! the checks did not read reaches the apiserver).
//!
//! ```text
//!  hub-permissions() objects ──typed_permissions──▶ rbac v1 Roles and RoleBindings in the
//!                                                   cluster namespace
//!                            ──check_permissions──▶ Roles: rules (check_rules)
//!                                                   RoleBindings: subjects = this cluster's
//!                                                     agent of this add-on; roleRef = a Role
//!                                                     of the answer or a ClusterRole ─┐
//!  ClusterRoles named by the answer, read from the hub ──check_cluster_role───────────┘
//!      (not reserved, not aggregated, rules pass check_rules)  ──▶ apply all, or nothing
//! ```
//!
//! What OCM's add-on model needs, and no more: an agent acts in its own cluster's namespace
//! only, as itself. The add-on-wide group `system:open-cluster-management:addon:<addon>` is in
//! every cluster's agent certificate, so a permission granted to it in one cluster namespace is
//! granted to every cluster's agent (OCM's addon-framework binds template permissions to the
//! per-cluster identity for that reason).
//!
//! Secrets are allowed: the namespace is the cluster's own, and OCM add-ons keep their
//! per-cluster credentials there (managed-serviceaccount's agent writes its token Secrets into
//! the cluster namespace). What would let an agent grant itself more or become someone else is
//! not: privilege verbs, RBAC writes, service account tokens, wildcards that would cover them,
//! non-resource URLs.

use std::collections::BTreeSet;

use flotilla_api::addon::consts::KUBE_APISERVER_CLIENT_SIGNER;
use flotilla_api::addon::v1alpha1::RegistrationConfig;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use serde_json::Value;

use super::registration::cluster_addon_group;

/// API group of Roles, RoleBindings and their references.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The API version hub permissions must have.
pub const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// Verbs that grant privileges rather than access: writing roles beyond one's own
/// (`escalate`), binding roles one does not hold (`bind`), acting as another identity
/// (`impersonate`), approving or signing certificates (`approve`, `sign`).
pub const PRIVILEGE_VERBS: &[&str] = &["escalate", "bind", "impersonate", "approve", "sign"];

/// Verbs that change objects; on RBAC objects they let an agent grant itself more.
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// RBAC resources an add-on agent may read but never write.
pub const RBAC_RESOURCES: &[&str] = &["roles", "rolebindings", "clusterroles", "clusterrolebindings"];

/// ClusterRoles no add-on may bind, whatever they grant: Kubernetes' user-facing roles.
pub const RESERVED_CLUSTER_ROLES: &[&str] = &["cluster-admin", "admin", "edit", "view"];

/// Name prefixes of ClusterRoles no add-on may bind: Kubernetes' own (`system:`), the hub's
/// (`flotilla:`) and the roles the hub's registration gives clusters and bootstrap identities
/// (`open-cluster-management:managedcluster…`, `open-cluster-management:bootstrap`).
pub const RESERVED_CLUSTER_ROLE_PREFIXES: &[&str] = &[
    "system:",
    "flotilla:",
    "open-cluster-management:managedcluster",
    "open-cluster-management:bootstrap",
];

/// One object of a checked answer, typed as the apiserver reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Permission {
    /// A Role in the cluster namespace.
    Role(Role),
    /// A RoleBinding in the cluster namespace.
    RoleBinding(RoleBinding),
}

impl Permission {
    /// `Role` or `RoleBinding`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Role(_) => "Role",
            Self::RoleBinding(_) => "RoleBinding",
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        match self {
            Self::Role(r) => r.metadata.name.as_deref(),
            Self::RoleBinding(b) => b.metadata.name.as_deref(),
        }
        .unwrap_or_default()
    }

    /// The object as JSON, with `apiVersion` and `kind`.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Role(r) => serde_json::to_value(r),
            Self::RoleBinding(b) => serde_json::to_value(b),
        }
        .unwrap_or(Value::Null)
    }
}

/// A `hub-permissions` answer that passed [`check_permissions`]; it may be applied once every
/// ClusterRole in `cluster_roles` passed [`check_cluster_role`].
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The objects, in the answer's order.
    pub objects: Vec<Permission>,
    /// ClusterRoles the RoleBindings reference, to be read from the hub and checked.
    pub cluster_roles: BTreeSet<String>,
}

/// Reads a `hub-permissions` answer's objects (JSON objects with `apiVersion`, `kind` and
/// `metadata.name`, as [`super::plugin_output::parse_objects`] returns them) for `cluster` as the
/// apiserver will: only `rbac.authorization.k8s.io/v1` Roles and RoleBindings, with a name, in
/// the cluster namespace (`metadata.namespace` unset, null or the cluster's), each typed.
///
/// The error names the object and what is wrong with it.
pub fn typed_permissions(objects: &[Value], cluster: &str) -> Result<Vec<Permission>, String> {
    objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let text = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default();
            let (api_version, kind, name) = (text("/apiVersion"), text("/kind"), text("/metadata/name"));
            let what = format!("object {i} ({kind} {name:?})");
            if api_version != RBAC_V1 || !matches!(kind, "Role" | "RoleBinding") {
                return Err(format!(
                    "{what}: {api_version} {kind} is not an {RBAC_V1} Role or RoleBinding"
                ));
            }
            if name.is_empty() {
                return Err(format!("{what}: has no metadata.name"));
            }
            match o.pointer("/metadata/namespace") {
                None | Some(Value::Null) => {}
                Some(Value::String(ns)) if ns == cluster => {}
                Some(other) => {
                    return Err(format!(
                        "{what}: namespace {other} is not the cluster namespace {cluster:?}"
                    ));
                }
            }
            if kind == "Role" {
                serde_json::from_value::<Role>(o.clone()).map(Permission::Role)
            } else {
                serde_json::from_value::<RoleBinding>(o.clone()).map(Permission::RoleBinding)
            }
            .map_err(|e| format!("{what}: not a valid {kind}: {e}"))
        })
        .collect()
}

/// Checks a `hub-permissions` answer for `addon` on `cluster` ([`typed_permissions`]), whose
/// registrations are `registrations`:
///
/// - every Role's rules pass [`check_rules`];
/// - a RoleBinding's subjects are this cluster's agent of this add-on only: a kube-client
///   registration's user, or the per-cluster add-on group
///   `system:open-cluster-management:cluster:<cluster>:addon:<addon>`; never the add-on-wide
///   group (shared by every cluster's agent), another group, a ServiceAccount;
/// - a RoleBinding references a Role of the same answer (the add-on's earlier Roles not in it
///   are pruned), or a ClusterRole that is not reserved ([`RESERVED_CLUSTER_ROLES`],
///   [`RESERVED_CLUSTER_ROLE_PREFIXES`]); those are returned to be checked by what they grant.
///
/// The error names the object and the rule it breaks.
pub fn check_permissions(
    objects: Vec<Permission>,
    cluster: &str,
    addon: &str,
    registrations: &[RegistrationConfig],
) -> Result<Checked, String> {
    let users: BTreeSet<&str> = registrations
        .iter()
        .filter(|r| r.signer_name == KUBE_APISERVER_CLIENT_SIGNER)
        .map(|r| r.subject.user.as_str())
        .collect();
    let group = cluster_addon_group(cluster, addon);
    let mut checked = Checked {
        objects,
        cluster_roles: BTreeSet::new(),
    };
    let roles: BTreeSet<&str> = checked
        .objects
        .iter()
        .filter(|p| matches!(p, Permission::Role(_)))
        .map(Permission::name)
        .collect();
    for (i, object) in checked.objects.iter().enumerate() {
        let what = format!("object {i} ({} {:?})", object.kind(), object.name());
        match object {
            Permission::Role(role) => {
                check_rules(role.rules.as_deref().unwrap_or_default()).map_err(|e| format!("{what}: {e}"))?;
            }
            Permission::RoleBinding(binding) => {
                for s in binding.subjects.iter().flatten() {
                    let allowed = match s.kind.as_str() {
                        "User" => users.contains(s.name.as_str()),
                        "Group" => s.name == group,
                        _ => false,
                    };
                    if !allowed {
                        return Err(format!(
                            "{what}: subject {} {:?} is not add-on {addon}'s agent on cluster {cluster} \
                             (its kube-client user or group {group:?})",
                            s.kind, s.name
                        ));
                    }
                }
                let role_ref = &binding.role_ref;
                let (ref_kind, ref_name) = (role_ref.kind.as_str(), role_ref.name.as_str());
                if role_ref.api_group != RBAC_GROUP {
                    return Err(format!(
                        "{what}: roleRef apiGroup {:?} is not {RBAC_GROUP}",
                        role_ref.api_group
                    ));
                }
                match ref_kind {
                    "Role" if roles.contains(ref_name) => {}
                    "Role" => {
                        return Err(format!(
                            "{what}: references Role {ref_name:?}, which the answer does not declare"
                        ));
                    }
                    "ClusterRole" => {
                        reserved(ref_name).map_err(|e| format!("{what}: {e}"))?;
                        checked.cluster_roles.insert(ref_name.to_owned());
                    }
                    other => {
                        return Err(format!(
                            "{what}: roleRef kind {other:?} is not Role or ClusterRole"
                        ));
                    }
                }
            }
        }
    }
    Ok(checked)
}

/// Refuses a reserved ClusterRole name.
fn reserved(name: &str) -> Result<(), String> {
    if RESERVED_CLUSTER_ROLES.contains(&name)
        || RESERVED_CLUSTER_ROLE_PREFIXES.iter().any(|p| name.starts_with(p))
    {
        return Err(format!(
            "binds ClusterRole {name:?}, one of Kubernetes' or the hub's own roles"
        ));
    }
    Ok(())
}

/// Checks what a ClusterRole an answer binds grants: `role` as read from the hub (`None` when
/// it does not exist). Refused when reserved, missing (it could be created later with any
/// rules), aggregated (its rules follow other ClusterRoles' labels, so they change without it
/// changing) or when its rules fail [`check_rules`].
pub fn check_cluster_role(name: &str, role: Option<&ClusterRole>) -> Result<(), String> {
    let what = format!("ClusterRole {name:?}");
    reserved(name).map_err(|e| format!("{what}: {e}"))?;
    let Some(role) = role else {
        return Err(format!(
            "{what} does not exist on the hub; a bound ClusterRole is checked by what it grants"
        ));
    };
    if role.aggregation_rule.is_some() {
        return Err(format!(
            "{what} is aggregated: its rules come from other ClusterRoles and may change"
        ));
    }
    check_rules(role.rules.as_deref().unwrap_or_default()).map_err(|e| format!("{what}: {e}"))
}

/// Checks the rules an add-on agent would hold in its cluster namespace. Refused:
///
/// - `*` in verbs, apiGroups or any resource (`*`, `*/status`, `pods/*` all match more than
///   they name); `resourceNames` have no wildcard and are not restricted;
/// - any of [`PRIVILEGE_VERBS`];
/// - `nonResourceURLs` (not namespaced: a binding in the cluster namespace has no business
///   with them);
/// - [`WRITE_VERBS`] on RBAC objects ([`RBAC_RESOURCES`]): the agent would grant itself more;
/// - `serviceaccounts/token`: a token is another identity.
pub fn check_rules(rules: &[PolicyRule]) -> Result<(), String> {
    for (i, rule) in rules.iter().enumerate() {
        let refuse = |why: String| Err(format!("rule {i}: {why}"));
        if rule.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()) {
            return refuse("nonResourceURLs are not an add-on agent's".to_owned());
        }
        if rule.verbs.iter().any(|v| v == "*") {
            return refuse("verb \"*\" grants every verb, privilege verbs included".to_owned());
        }
        let groups = rule.api_groups.as_deref().unwrap_or_default();
        if groups.iter().any(|g| g == "*") {
            return refuse("apiGroup \"*\" grants every API group".to_owned());
        }
        let resources = rule.resources.as_deref().unwrap_or_default();
        if let Some(r) = resources.iter().find(|r| r.contains('*')) {
            return refuse(format!("resource {r:?} is a wildcard"));
        }
        if let Some(v) = rule.verbs.iter().find(|v| PRIVILEGE_VERBS.contains(&v.as_str())) {
            return refuse(format!("verb {v:?} grants privileges, not access"));
        }
        let writes = rule.verbs.iter().any(|v| WRITE_VERBS.contains(&v.as_str()));
        let rbac = groups.iter().any(|g| g == RBAC_GROUP);
        if let Some(r) = resources
            .iter()
            .find(|r| RBAC_RESOURCES.contains(&r.split('/').next().unwrap_or_default()))
            .filter(|_| rbac && writes)
        {
            return refuse(format!(
                "writing {RBAC_GROUP} {r} lets the agent grant itself more"
            ));
        }
        if groups.iter().any(String::is_empty) && resources.iter().any(|r| r == "serviceaccounts/token") {
            return refuse("serviceaccounts/token mints another identity".to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
