//! The built-in plugin behind OCM `AddOnTemplate` add-ons: an add-on described as data (the
//! agent's manifests with `{{VARIABLE}}` placeholders, its registrations and hub permissions)
//! served through the same contract, sandbox and limits as any user plugin. The hub ships this
//! component inside its binary.
//!
//! ```text
//!   host: one instance per template (name + spec hash), granted ONE thing:
//!         WASI environment variable FLOTILLA_ADDON_TEMPLATE = {"name": ..., "spec": <AddOnTemplate spec>}
//!
//!   describe ──────── registrations from spec.registration (KubeClient: agent `<addon>-agent`;
//!                     CustomSigner: its signer and subject), health WorkloadAvailability,
//!                     configs addontemplates + addondeploymentconfigs
//!   manifests ─────── every spec.agentSpec.workload.manifests[i]: JSON text ─{{VAR}}─▶ object,
//!                     then Deployments/DaemonSets get the preset variables as container env,
//!                     the registration secrets as volumes, and the AddOnDeploymentConfig's node
//!                     placement, registry mirrors, proxy env and resources
//!   hub-permissions ─ KubeClient hubPermissions ─▶ RoleBindings (CurrentCluster: ClusterRole
//!                     bound in the cluster namespace; SingleNamespace: only the cluster namespace)
//!   approve-csr ───── OCM's defaults: kube-client CSRs by the default approver, custom-signer
//!                     CSRs for a signer the template declares
//! ```
//!
//! Why a grant instead of reading the template from the hook inputs: `describe` and
//! `hub-permissions` take no configs in the frozen contract, yet both depend on the template. So
//! the host instantiates this component once per template and hands it the template as its only
//! capability, an environment variable (no files, no network); every hook then reads the same
//! template, and the host's per-revision caches and fault books stay per template.
//!
//! Variables follow OCM's template agent: `HUB_KUBECONFIG` (`/managed/hub-kubeconfig/kubeconfig`,
//! only when the template registers), then the `customizedVariables` of the
//! AddOnDeploymentConfig (which may override it), then the built-ins `CLUSTER_NAME` and
//! `INSTALL_NAMESPACE` (which nothing overrides). One deliberate difference: OCM renders an
//! unknown `{{NAME}}` as an empty string; here it is an error naming the variable, so a typo
//! shows in the add-on's condition instead of as an empty flag on every cluster.

use std::collections::{BTreeMap, HashMap};

use flotilla_addon_sdk::config::{
    ADDON_GROUP, AddOnDeploymentConfigSpec, addon_deployment_config, addon_deployment_config_type,
};
use flotilla_addon_sdk::csr::{KUBE_CLIENT_SIGNER, default_approve};
use flotilla_addon_sdk::serde_json::{self, Value, json};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, ConfigType, Csr, CsrDecision, HealthMode, Manifest,
    Registration, ResolvedConfig, Subject,
};
use serde::Deserialize;

/// The WASI environment variable the host grants: the template as JSON, `{"name", "spec"}`.
pub const TEMPLATE_ENV: &str = "FLOTILLA_ADDON_TEMPLATE";
/// Resource of AddOnTemplates in config references.
pub const ADDON_TEMPLATES: &str = "addontemplates";
/// Where the agent finds its hub kubeconfig (OCM's fixed path).
pub const HUB_KUBECONFIG_PATH: &str = "/managed/hub-kubeconfig/kubeconfig";
/// Mount directory of the hub kubeconfig secret.
pub const HUB_KUBECONFIG_MOUNT: &str = "/managed/hub-kubeconfig";
/// Variable: the hub kubeconfig path.
pub const HUB_KUBECONFIG: &str = "HUB_KUBECONFIG";
/// Variable: the managed cluster's name.
pub const CLUSTER_NAME: &str = "CLUSTER_NAME";
/// Variable: the add-on's install namespace on the managed cluster.
pub const INSTALL_NAMESPACE: &str = "INSTALL_NAMESPACE";

/// An AddOnTemplate as the host grants it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Template {
    /// The AddOnTemplate's name.
    #[serde(default)]
    pub name: String,
    /// Its `spec`.
    pub spec: TemplateSpec,
}

/// `AddOnTemplate.spec`, the fields this plugin reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSpec {
    /// `addonName`.
    #[serde(default)]
    pub addon_name: String,
    /// `agentSpec` (a ManifestWorkSpec).
    #[serde(default)]
    pub agent_spec: AgentSpec,
    /// `registration`.
    #[serde(default)]
    pub registration: Option<Vec<RegistrationSpec>>,
}

/// `agentSpec`: only the workload is read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AgentSpec {
    /// `workload`.
    #[serde(default)]
    pub workload: Workload,
}

/// `agentSpec.workload`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Workload {
    /// The manifests, with `{{VARIABLE}}` placeholders.
    #[serde(default)]
    pub manifests: Vec<Value>,
}

/// One `registration[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationSpec {
    /// `KubeClient` or `CustomSigner`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Settings of `KubeClient`.
    #[serde(default)]
    pub kube_client: Option<KubeClientSpec>,
    /// Settings of `CustomSigner`.
    #[serde(default)]
    pub custom_signer: Option<CustomSignerSpec>,
}

/// `kubeClient`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientSpec {
    /// `hubPermissions`.
    #[serde(default)]
    pub hub_permissions: Vec<HubPermission>,
}

/// One `hubPermissions[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubPermission {
    /// `CurrentCluster` or `SingleNamespace`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Settings of `CurrentCluster`.
    #[serde(default)]
    pub current_cluster: Option<CurrentCluster>,
    /// Settings of `SingleNamespace`.
    #[serde(default)]
    pub single_namespace: Option<SingleNamespace>,
}

/// `currentCluster`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentCluster {
    /// The ClusterRole bound in each cluster namespace.
    pub cluster_role_name: String,
}

/// `singleNamespace`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SingleNamespace {
    /// Namespace of the binding.
    pub namespace: String,
    /// The Role or ClusterRole bound.
    pub role_ref: RoleRef,
}

/// An RBAC `roleRef`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// `apiGroup`.
    #[serde(default)]
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// `customSigner`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerSpec {
    /// `signerName`.
    pub signer_name: String,
    /// `subject`; OCM's default subject when unset.
    #[serde(default)]
    pub subject: Option<SubjectSpec>,
}

/// A registration subject in the template.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubjectSpec {
    /// `user`.
    #[serde(default)]
    pub user: String,
    /// `groups`.
    #[serde(default)]
    pub groups: Vec<String>,
    /// `organizationUnit` (OCM's field name).
    #[serde(default, rename = "organizationUnit", alias = "organizationUnits")]
    pub organization_units: Vec<String>,
}

/// Reads the granted template; an error message a person can act on when it is missing or
/// malformed.
pub fn granted() -> Result<Template, AddonError> {
    let text = std::env::var(TEMPLATE_ENV).map_err(|_| {
        AddonError::MissingConfig(format!(
            "no AddOnTemplate was granted to the built-in template plugin ({TEMPLATE_ENV} unset)"
        ))
    })?;
    parse(&text)
}

/// Parses a template grant.
pub fn parse(text: &str) -> Result<Template, AddonError> {
    serde_json::from_str(text).map_err(|e| AddonError::InvalidConfig(format!("AddOnTemplate: {e}")))
}

impl Template {
    fn registrations(&self) -> &[RegistrationSpec] {
        self.spec.registration.as_deref().unwrap_or_default()
    }

    fn kube_client(&self) -> bool {
        self.registrations().iter().any(|r| r.type_ == "KubeClient")
    }
}

/// The kube-client subject of template add-ons, as a template: OCM names their agent
/// `<addon>-agent` (the last part of the user). `describe` has no add-on name and the host takes
/// only `{addon-name}` or a DNS-1123 name there, so the agent is named from the template's
/// `addonName` (the add-on it is for; its own name when unset).
fn kube_client_subject(template: &Template) -> Subject {
    let addon = if template.spec.addon_name.is_empty() {
        &template.name
    } else {
        &template.spec.addon_name
    };
    Subject {
        user: format!(
            "system:open-cluster-management:cluster:{{cluster-name}}:addon:{{addon-name}}:agent:{addon}-agent"
        ),
        groups: vec![
            "system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}".to_owned(),
            "system:open-cluster-management:addon:{addon-name}".to_owned(),
        ],
        organization_units: Vec::new(),
    }
}

/// The add-on's options for `template` (constant per template, as `describe` must be).
pub fn options(template: &Template) -> AddonOptions {
    let registrations = template
        .registrations()
        .iter()
        .filter_map(|r| match r.type_.as_str() {
            "KubeClient" => Some(Registration::KubeClient {
                subject: Some(kube_client_subject(template)),
            }),
            "CustomSigner" => r.custom_signer.as_ref().map(|s| Registration::CustomSigner {
                signer_name: s.signer_name.clone(),
                subject: s.subject.as_ref().map(|subject| Subject {
                    user: subject.user.clone(),
                    groups: subject.groups.clone(),
                    organization_units: subject.organization_units.clone(),
                }),
            }),
            _ => None,
        })
        .collect();
    AddonOptions {
        registrations,
        // OCM's template agent decides health from the workloads' availability.
        health: HealthMode::WorkloadAvailability,
        supported_configs: vec![
            ConfigType {
                group: ADDON_GROUP.to_owned(),
                resource: ADDON_TEMPLATES.to_owned(),
                default_config: None,
            },
            addon_deployment_config_type(),
        ],
        default_install_namespace: None,
    }
}

/// The variables of one rendering, in OCM's order of precedence: the default `HUB_KUBECONFIG`
/// (when the template registers), overridden by the AddOnDeploymentConfig's customized
/// variables, overridden by the built-ins `CLUSTER_NAME` and `INSTALL_NAMESPACE`. Also returns
/// the preset names (defaults, then built-ins, each sorted) that go into container env.
pub fn variables(
    template: &Template,
    cluster: &str,
    install_namespace: &str,
    customized: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<&'static str>) {
    let mut values = BTreeMap::new();
    let mut preset = Vec::new();
    if template.spec.registration.is_some() {
        values.insert(HUB_KUBECONFIG.to_owned(), HUB_KUBECONFIG_PATH.to_owned());
        preset.push(HUB_KUBECONFIG);
    }
    values.extend(customized.iter().map(|(k, v)| (k.clone(), v.clone())));
    values.insert(CLUSTER_NAME.to_owned(), cluster.to_owned());
    values.insert(INSTALL_NAMESPACE.to_owned(), install_namespace.to_owned());
    preset.extend([CLUSTER_NAME, INSTALL_NAMESPACE]);
    (values, preset)
}

/// Replaces every `{{NAME}}` in the JSON text of manifest `index` and parses the result, which
/// must be a Kubernetes object (a JSON object). Like OCM, values are put into the text as they
/// are, so a value that breaks the JSON is reported as such.
///
/// `new_string_template` does the substitution (with OCM's `{{`/`}}` delimiters: everything
/// between them is the name) and fails on a name it has no value for.
pub fn render(
    index: usize,
    manifest: &Value,
    values: &BTreeMap<String, String>,
) -> Result<Value, AddonError> {
    let invalid =
        |reason: String| AddonError::InvalidConfig(format!("AddOnTemplate manifest {index}: {reason}"));
    if !manifest.is_object() {
        return Err(invalid(format!(
            "{} is not a Kubernetes object",
            kind_of(manifest)
        )));
    }
    let text = manifest.to_string();
    let placeholder = regex::Regex::new(r"\{\{(.*?)\}\}").map_err(|e| AddonError::Internal(e.to_string()))?;
    if let Some(unknown) = placeholder
        .captures_iter(&text)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .find(|name| !values.contains_key(*name))
    {
        return Err(invalid(format!(
            "unknown variable {{{{{unknown}}}}} (known: {}; more come from the AddOnDeploymentConfig's customizedVariables)",
            values.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let lookup: HashMap<&str, &str> = values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let rendered = new_string_template::template::Template::new(text)
        .with_regex(&placeholder)
        .render(&lookup)
        .map_err(|e| invalid(e.to_string()))?;
    let object: Value = serde_json::from_str(&rendered)
        .map_err(|e| invalid(format!("not valid JSON once the variables are put in: {e}")))?;
    for (pointer, field) in [
        ("/apiVersion", "apiVersion"),
        ("/kind", "kind"),
        ("/metadata/name", "metadata.name"),
    ] {
        if object
            .pointer(pointer)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(invalid(format!("is not a Kubernetes object: it has no {field}")));
        }
    }
    Ok(object)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// OCM's decorations of a rendered Deployment or DaemonSet: every container gets the preset
/// variables as env, and the pod gets the registration secrets as volumes (the kube-client
/// `<addon>-hub-kubeconfig` at `/managed/hub-kubeconfig`, each custom signer's
/// `<addon>-<signer>-client-cert` at `/managed/<signer>`); then the AddOnDeploymentConfig's
/// settings, if any (see [`apply_deployment_config`]). Other objects are left as they are.
pub fn decorate(
    object: &mut Value,
    template: &Template,
    addon: &str,
    preset: &[(&str, &str)],
    adc: Option<&AddOnDeploymentConfigSpec>,
) {
    let resource = match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some("apps/v1"), Some("Deployment")) => "deployments",
        (Some("apps/v1"), Some("DaemonSet")) => "daemonsets",
        _ => return,
    };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(pod) = object
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    for registration in template.registrations() {
        match (registration.type_.as_str(), &registration.custom_signer) {
            ("KubeClient", _) => {
                mounts.push(json!({"name": "hub-kubeconfig", "mountPath": HUB_KUBECONFIG_MOUNT}));
                volumes.push(json!({"name": "hub-kubeconfig",
                    "secret": {"secretName": format!("{addon}-hub-kubeconfig")}}));
            }
            ("CustomSigner", Some(signer)) => {
                let dashed = signer.signer_name.replace('/', "-");
                let name = format!("cert-{}", dashed.replace('.', "-"));
                mounts.push(json!({"name": name, "mountPath": format!("/managed/{dashed}")}));
                volumes.push(json!({"name": name,
                    "secret": {"secretName": format!("{addon}-{dashed}-client-cert")}}));
            }
            _ => {}
        }
    }
    let env: Vec<Value> = preset
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            append(container, "env", &env);
            append(container, "volumeMounts", &mounts);
        }
    }
    append(pod, "volumes", &volumes);
    if let Some(adc) = adc {
        apply_deployment_config(pod, adc, resource, &name);
    }
}

/// The AddOnDeploymentConfig's settings on a workload's pod spec, as OCM's template agent
/// applies them: `nodePlacement` replaces the node selector and tolerations, `registries`
/// rewrite each container image, `proxyConfig` adds `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` env,
/// and `resourceRequirements` (`<resource>:<name>:<container>`, `*` for any) set each
/// container's resources. Edited as JSON, so fields the template sets are kept as written.
pub fn apply_deployment_config(
    pod: &mut serde_json::Map<String, Value>,
    adc: &AddOnDeploymentConfigSpec,
    resource: &str,
    name: &str,
) {
    if let Some(placement) = &adc.node_placement {
        if !placement.node_selector.is_empty() {
            pod.insert("nodeSelector".to_owned(), json!(placement.node_selector));
        }
        if !placement.tolerations.is_empty() {
            pod.insert("tolerations".to_owned(), json!(placement.tolerations));
        }
    }
    let proxy: Vec<Value> = adc.proxy_env().iter().map(|e| json!(e)).collect();
    let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(image) = container.get("image").and_then(Value::as_str) {
            let mirrored = adc.image(image);
            container.insert("image".to_owned(), Value::String(mirrored));
        }
        append(container, "env", &proxy);
        let container_name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(resources) = adc.resources_for(resource, name, &container_name) {
            container.insert("resources".to_owned(), json!(resources));
        }
    }
}

fn append(object: &mut serde_json::Map<String, Value>, key: &str, items: &[Value]) {
    if items.is_empty() {
        return;
    }
    let entry = object.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(list) = entry {
        list.extend(items.iter().cloned());
    }
}

/// Renders every manifest of `template` for one cluster (see the module docs).
pub fn manifests(
    template: &Template,
    cluster: &Cluster,
    addon: &AddOn,
    configs: &[ResolvedConfig],
) -> Result<Vec<Manifest>, AddonError> {
    let adc = addon_deployment_config(configs)?;
    let customized = adc.as_ref().map(|adc| adc.variables()).unwrap_or_default();
    let (values, preset) = variables(template, &cluster.name, &addon.install_namespace, &customized);
    let preset: Vec<(&str, &str)> = preset
        .into_iter()
        .filter_map(|name| values.get(name).map(|v| (name, v.as_str())))
        .collect();
    template
        .spec
        .agent_spec
        .workload
        .manifests
        .iter()
        .enumerate()
        .map(|(i, manifest)| {
            let mut object = render(i, manifest, &values)?;
            decorate(&mut object, template, &addon.name, &preset, adc.as_ref());
            Ok(object)
        })
        .collect()
}

/// The RoleBindings of the template's kube-client hub permissions on `cluster`, named as OCM
/// names them (`open-cluster-management:<addon>:<role kind>:agent`), binding this cluster's
/// agent only: its user and the per-cluster add-on group. Never the add-on-wide group
/// `system:open-cluster-management:addon:<addon>`, which every cluster's agent carries: bound
/// here it would let every cluster's agent act in this cluster's namespace (and the host
/// refuses it). `CurrentCluster` binds its ClusterRole in the cluster namespace;
/// `SingleNamespace` is honoured only for the cluster namespace itself, since add-on
/// permissions never reach beyond it here, and any other namespace is an error saying so.
pub fn hub_permissions(template: &Template, cluster: &str, addon: &str) -> Result<Vec<Manifest>, AddonError> {
    let subject = flotilla_addon_sdk::csr::expand_subject(&kube_client_subject(template), cluster, addon);
    let cluster_group = format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}");
    let subjects = [
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": subject.user}),
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": cluster_group}),
    ];
    let mut bindings = Vec::new();
    for registration in template
        .registrations()
        .iter()
        .filter(|r| r.type_ == "KubeClient")
    {
        let Some(kube) = &registration.kube_client else {
            continue;
        };
        for (i, permission) in kube.hub_permissions.iter().enumerate() {
            let invalid = |reason: String| {
                AddonError::InvalidConfig(format!("AddOnTemplate hubPermissions[{i}]: {reason}"))
            };
            let (kind, name) = match (
                permission.type_.as_str(),
                &permission.current_cluster,
                &permission.single_namespace,
            ) {
                ("CurrentCluster", Some(current), _) => {
                    ("ClusterRole".to_owned(), current.cluster_role_name.clone())
                }
                ("CurrentCluster", None, _) => {
                    return Err(invalid(
                        "type CurrentCluster needs currentCluster.clusterRoleName".to_owned(),
                    ));
                }
                ("SingleNamespace", _, Some(single)) if single.namespace == cluster => {
                    (single.role_ref.kind.clone(), single.role_ref.name.clone())
                }
                ("SingleNamespace", _, Some(single)) => {
                    return Err(invalid(format!(
                        "namespace {:?} is not the cluster namespace {cluster:?}; add-on hub permissions are \
                         only granted in the cluster namespace",
                        single.namespace
                    )));
                }
                ("SingleNamespace", _, None) => {
                    return Err(invalid("type SingleNamespace needs singleNamespace".to_owned()));
                }
                (other, _, _) => {
                    return Err(invalid(format!(
                        "type {other:?} is neither CurrentCluster nor SingleNamespace"
                    )));
                }
            };
            if name.is_empty() || !matches!(kind.as_str(), "Role" | "ClusterRole") {
                return Err(invalid(format!(
                    "role reference {kind} {name:?} is not a named Role or ClusterRole"
                )));
            }
            bindings.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {
                    "name": format!("open-cluster-management:{addon}:{}:agent", kind.to_lowercase()),
                    "namespace": cluster,
                    "labels": {
                        "addon.open-cluster-management.io/name": addon,
                        "open-cluster-management.io/addon-template-name": template.name,
                    },
                },
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": subjects,
            }));
        }
    }
    Ok(bindings)
}

/// OCM's approvals for template add-ons: a kube-client CSR by the default approver (for the
/// agent `<addon>-agent`); a custom-signer CSR when the template declares its signer (OCM approves
/// those without further checks; the host's own checks still apply).
pub fn approve(template: &Template, cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
    if csr.signer_name == KUBE_CLIENT_SIGNER {
        if !template.kube_client() {
            return CsrDecision::Deny(format!(
                "AddOnTemplate {} has no KubeClient registration",
                template.name
            ));
        }
        return default_approve(&options(template), cluster, addon, csr);
    }
    let declared = template.registrations().iter().any(|r| {
        r.type_ == "CustomSigner"
            && r.custom_signer
                .as_ref()
                .is_some_and(|s| s.signer_name == csr.signer_name)
    });
    if declared {
        CsrDecision::Approve
    } else {
        CsrDecision::Deny(format!(
            "AddOnTemplate {} declares no registration for signer {:?}",
            template.name, csr.signer_name
        ))
    }
}

/// The plugin: every hook reads the granted template.
pub struct AddOnTemplatePlugin;

impl Addon for AddOnTemplatePlugin {
    fn describe() -> AddonOptions {
        // A template that cannot be read still loads (describe has no error); manifests() then
        // reports why in the add-on's condition.
        options(&granted().unwrap_or_default())
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        manifests(&granted()?, cluster, addon, configs)
    }

    fn approve_csr(cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
        match granted() {
            Ok(template) => approve(&template, cluster, addon, csr),
            Err(e) => CsrDecision::Deny(e.to_string()),
        }
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        hub_permissions(&granted()?, &cluster.name, &addon.name)
    }
}

flotilla_addon_sdk::export_addon!(AddOnTemplatePlugin);

#[cfg(test)]
mod tests;
