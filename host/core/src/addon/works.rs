//! From a plugin's `manifests()` output to the add-on's ManifestWorks, as OCM's addon-framework
//! builds them:
//!
//! ```text
//! plugin output (JSON strings) ──validate──▶ objects
//!   ├─ Job/Pod with the addon-pre-delete label or annotation ──▶ addon-<name>-pre-delete
//!   │                                                 (WellKnownStatus feedback per hook)
//!   └─ everything else ──split at 80 % of 500 KiB──▶ addon-<name>-deploy-0, -1, ...
//!        labels  open-cluster-management.io/addon-name=<name>
//!        owner   the ManagedClusterAddOn (controller)
//!        annot.  open-cluster-management.io/config-spec-hash
//!        deletion-orphan objects ──▶ deleteOption SelectivelyOrphan
//! ```
//!
//! Splitting keeps every object in the work it is already in (so a re-render moves nothing),
//! fills new objects into the existing work with the most room, and opens new works only for
//! what does not fit; works left empty are deleted. Hosted mode is not handled here.

use std::collections::BTreeMap;

use flotilla_api::addon::consts::{
    ADDON_NAME_LABEL, ADDON_PRE_DELETE_ANNOTATION, DELETION_ORPHAN_ANNOTATION,
};
use flotilla_api::addon::v1beta1::ConfigReference;
use flotilla_api::work::consts::{
    CONFIG_SPEC_HASH_ANNOTATION, DEFAULT_FIELD_MANAGER, MAX_MANIFESTS_SIZE, manifest_work,
};
use flotilla_api::work::v1::{
    DeleteOption, DeletePropagationPolicyType, FeedBackType, FeedbackRule, FeedbackScrapeType, FieldValue,
    Manifest, ManifestConfigOption, ManifestWork, ManifestWorkSpec, ManifestsTemplate, OrphaningRule,
    ResourceIdentifier, SelectivelyOrphan,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use super::configs::config_spec_hash_annotation;
use super::go_json::{self, GoJsonError};
use super::plugin_output::OutputCaps;
use crate::conditions;
use crate::resources::ResourceKey;

/// Share of [`MAX_MANIFESTS_SIZE`] a deploy work is filled to before a new one is opened (OCM's
/// work builder threshold).
pub const DEPLOY_WORK_FILL_RATIO: f64 = 0.8;

/// Bytes of manifests a deploy work is filled with: 80 % of 500 KiB, as OCM computes it.
pub const DEPLOY_WORK_MANIFEST_LIMIT: usize = (MAX_MANIFESTS_SIZE as f64 * DEPLOY_WORK_FILL_RATIO) as usize;

/// API version of the ManagedClusterAddOn owner reference OCM puts on deploy works.
pub const OWNER_API_VERSION: &str = "addon.open-cluster-management.io/v1beta1";

/// Name prefix of an add-on's deploy works: `addon-<name>-deploy`.
pub fn deploy_work_name_prefix(addon: &str) -> String {
    format!("addon-{addon}-deploy")
}

/// Name of an add-on's deploy work number `index`: `addon-<name>-deploy-<index>`.
pub fn deploy_work_name(addon: &str, index: usize) -> String {
    format!("{}-{index}", deploy_work_name_prefix(addon))
}

/// Name of an add-on's pre-delete hook work: `addon-<name>-pre-delete`.
pub fn pre_delete_work_name(addon: &str) -> String {
    format!("addon-{addon}-pre-delete")
}

/// The index of a deploy work of `addon` named `name`, if it is one.
pub fn deploy_work_index(addon: &str, name: &str) -> Option<usize> {
    let prefix = deploy_work_name_prefix(addon);
    name.strip_prefix(&prefix)?.strip_prefix('-')?.parse().ok()
}

/// Why a plugin's output was refused; each names the manifest by its index in the output.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    /// A manifest is not JSON.
    #[error("manifest {index} is not JSON: {message}")]
    NotJson {
        /// Position in the plugin output.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A manifest is JSON but not an object.
    #[error("manifest {index} is not a JSON object")]
    NotAnObject {
        /// Position in the plugin output.
        index: usize,
    },
    /// A required field is missing, empty or not a string.
    #[error("manifest {index} has no {field} (a Kubernetes object needs apiVersion, kind and metadata.name)")]
    MissingField {
        /// Position in the plugin output.
        index: usize,
        /// `apiVersion`, `kind` or `metadata.name`.
        field: &'static str,
    },
    /// `metadata.generateName` is set, which ManifestWorks do not allow.
    #[error("manifest {index} ({kind} {name}) sets metadata.generateName, which ManifestWorks do not allow")]
    GenerateName {
        /// Position in the plugin output.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// Two manifests name the same object.
    #[error("manifest {index} ({kind} {name}) repeats manifest {first}")]
    Duplicate {
        /// Position of the repeat.
        index: usize,
        /// Position of the first occurrence.
        first: usize,
        /// Its kind.
        kind: String,
        /// Its namespace/name.
        name: String,
    },
    /// One manifest is bigger than a whole ManifestWork may be.
    #[error("manifest {index} ({kind} {name}) is {size} bytes, over the {limit}-byte ManifestWork limit")]
    TooLarge {
        /// Position in the plugin output.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Its size as JSON.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// More manifests than accepted.
    #[error("the plugin output holds {count} manifests, over the limit of {limit}")]
    TooMany {
        /// How many the output holds.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The whole output is bigger than accepted.
    #[error("the plugin output exceeds the {limit}-byte limit (at least {size} bytes)")]
    OutputTooLarge {
        /// Size as JSON of the manifests up to the one that crossed the limit.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A manifest cannot be re-encoded.
    #[error("manifest {index} cannot be encoded: {message}")]
    Encode {
        /// Position in the plugin output.
        index: usize,
        /// The encoder's message.
        message: String,
    },
}

/// One validated object of a plugin's output.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentManifest {
    /// The object.
    pub object: Value,
    /// Its size as Go encodes it (what OCM's work builder counts).
    pub size: usize,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`, empty when absent.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl AgentManifest {
    /// The API group (the part of `apiVersion` before `/`; empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(group, _)| group)
    }

    /// Whether the object has `key` as an annotation (or, when `labels_too`, as a label).
    fn has_marker(&self, key: &str, labels_too: bool) -> bool {
        let metadata = &self.object["metadata"];
        metadata["annotations"].get(key).is_some() || (labels_too && metadata["labels"].get(key).is_some())
    }

    /// Identity used to keep an object in the work it is already in.
    fn key(&self) -> ResourceKey {
        ResourceKey {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// A non-empty string field of `object`.
fn string_field<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(object, |v, key| v.get(key))?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// Checks a plugin's `manifests` output, the one reading of it: at most `caps.max_objects`
/// entries and `caps.max_bytes` bytes (checked before any is parsed); every entry a JSON object
/// with `apiVersion`, `kind` and `metadata.name`, no `generateName`, no object twice, none over
/// [`MAX_MANIFESTS_SIZE`] and at most `caps.max_bytes` in all as Go encodes them.
pub fn validate_manifests(output: &[String], caps: OutputCaps) -> Result<Vec<AgentManifest>, ManifestError> {
    if output.len() > caps.max_objects {
        return Err(ManifestError::TooMany {
            count: output.len(),
            limit: caps.max_objects,
        });
    }
    let raw = output.iter().map(String::len).fold(0, usize::saturating_add);
    if raw > caps.max_bytes {
        return Err(ManifestError::OutputTooLarge {
            size: raw,
            limit: caps.max_bytes,
        });
    }
    let max_output_bytes = caps.max_bytes;
    let mut manifests: Vec<AgentManifest> = Vec::with_capacity(output.len());
    let mut seen: BTreeMap<ResourceKey, usize> = BTreeMap::new();
    let mut total = 0usize;
    for (index, text) in output.iter().enumerate() {
        let object: Value = serde_json::from_str(text).map_err(|e| ManifestError::NotJson {
            index,
            message: e.to_string(),
        })?;
        if !object.is_object() {
            return Err(ManifestError::NotAnObject { index });
        }
        let missing = |field| ManifestError::MissingField { index, field };
        let api_version = string_field(&object, &["apiVersion"]).ok_or(missing("apiVersion"))?;
        let kind = string_field(&object, &["kind"]).ok_or(missing("kind"))?;
        let name = string_field(&object, &["metadata", "name"]).ok_or(missing("metadata.name"))?;
        let namespace = string_field(&object, &["metadata", "namespace"]).unwrap_or_default();
        if string_field(&object, &["metadata", "generateName"]).is_some() {
            return Err(ManifestError::GenerateName {
                index,
                kind: kind.into(),
                name: name.into(),
            });
        }
        let size = go_json::encoded_len(&object).map_err(|e| ManifestError::Encode {
            index,
            message: e.to_string(),
        })?;
        if size > MAX_MANIFESTS_SIZE {
            return Err(ManifestError::TooLarge {
                index,
                kind: kind.into(),
                name: name.into(),
                size,
                limit: MAX_MANIFESTS_SIZE,
            });
        }
        total += size;
        if total > max_output_bytes {
            return Err(ManifestError::OutputTooLarge {
                size: total,
                limit: max_output_bytes,
            });
        }
        let manifest = AgentManifest {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            size,
            object: Value::Null,
        };
        if let Some(first) = seen.insert(manifest.key(), index) {
            return Err(ManifestError::Duplicate {
                index,
                first,
                kind: manifest.kind,
                name: format!("{}/{}", manifest.namespace, manifest.name),
            });
        }
        manifests.push(AgentManifest { object, ..manifest });
    }
    Ok(manifests)
}

/// The orphaning rule of an object annotated `addon.open-cluster-management.io/deletion-orphan`.
pub fn orphaning_rule(manifest: &AgentManifest) -> Option<OrphaningRule> {
    manifest
        .has_marker(DELETION_ORPHAN_ANNOTATION, false)
        .then(|| ResourceIdentifier {
            group: manifest.group().into(),
            resource: crate::resources::plural(&manifest.kind),
            name: manifest.name.clone(),
            namespace: manifest.namespace.clone(),
        })
}

/// The feedback config of a pre-delete hook: a Job or Pod (any group, as OCM checks only the
/// kind) with the `addon.open-cluster-management.io/addon-pre-delete` annotation or label.
pub fn pre_delete_hook(manifest: &AgentManifest) -> Option<ManifestConfigOption> {
    let resource = match manifest.kind.as_str() {
        "Job" => "jobs",
        "Pod" => "pods",
        _ => return None,
    };
    manifest
        .has_marker(ADDON_PRE_DELETE_ANNOTATION, true)
        .then(|| ManifestConfigOption {
            resource_identifier: ResourceIdentifier {
                group: manifest.group().into(),
                resource: resource.into(),
                name: manifest.name.clone(),
                namespace: manifest.namespace.clone(),
            },
            feedback_rules: vec![FeedbackRule {
                type_: FeedBackType::WellKnownStatus,
                json_paths: Vec::new(),
            }],
            ..Default::default()
        })
}

/// Which status feedback the add-on's health prober needs from the deploy works.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProbeFeedback<'a> {
    /// Lease or no prober: no feedback.
    None,
    /// A work prober: feedback rules for the listed objects (OCM `ProbeFields`).
    Fields(&'a [ManifestConfigOption]),
    /// WellKnownStatus of every Deployment (group `apps`) in the manifests.
    DeploymentAvailability,
    /// WellKnownStatus of every Deployment and DaemonSet (group `apps`) in the manifests.
    WorkloadAvailability,
}

/// A WellKnownStatus feedback config for one object.
pub fn well_known_status_config(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> ManifestConfigOption {
    ManifestConfigOption {
        resource_identifier: ResourceIdentifier {
            group: group.into(),
            resource: resource.into(),
            name: name.into(),
            namespace: namespace.into(),
        },
        feedback_rules: vec![FeedbackRule {
            type_: FeedBackType::WellKnownStatus,
            json_paths: Vec::new(),
        }],
        ..Default::default()
    }
}

/// The `manifestConfigs` of the deploy works, as addon-framework builds them: the prober's
/// feedback first, then the add-on's own configs, each merged into an existing entry for the
/// same object (feedback rules added unless already there — JSONPaths by name — and its update
/// strategy taking over) or appended.
pub fn manifest_configs(
    probe: ProbeFeedback<'_>,
    manifests: &[AgentManifest],
    own: &[ManifestConfigOption],
) -> Vec<ManifestConfigOption> {
    let apps = |kinds: &[&str]| -> Vec<ManifestConfigOption> {
        manifests
            .iter()
            .filter(|m| m.group() == "apps" && kinds.contains(&m.kind.as_str()))
            .map(|m| {
                let resource = if m.kind == "Deployment" {
                    "deployments"
                } else {
                    "daemonsets"
                };
                well_known_status_config("apps", resource, &m.namespace, &m.name)
            })
            .collect()
    };
    let mut configs: Vec<ManifestConfigOption> = match probe {
        ProbeFeedback::None => Vec::new(),
        ProbeFeedback::Fields(fields) => fields
            .iter()
            .map(|f| ManifestConfigOption {
                resource_identifier: f.resource_identifier.clone(),
                feedback_rules: f.feedback_rules.clone(),
                ..Default::default()
            })
            .collect(),
        ProbeFeedback::DeploymentAvailability => apps(&["Deployment"]),
        ProbeFeedback::WorkloadAvailability => apps(&["Deployment", "DaemonSet"]),
    };
    for config in own {
        let Some(existing) = configs
            .iter_mut()
            .find(|c| c.resource_identifier == config.resource_identifier)
        else {
            configs.push(config.clone());
            continue;
        };
        for rule in &config.feedback_rules {
            merge_feedback_rule(&mut existing.feedback_rules, rule);
        }
        if config.update_strategy.is_some() {
            existing.update_strategy = config.update_strategy.clone();
        }
    }
    configs
}

/// Adds `rule` to `rules`: a WellKnownStatus rule once, the JSONPaths whose names are new as
/// one more rule.
fn merge_feedback_rule(rules: &mut Vec<FeedbackRule>, rule: &FeedbackRule) {
    match rule.type_ {
        FeedBackType::WellKnownStatus => {
            if !rules.iter().any(|r| r.type_ == FeedBackType::WellKnownStatus) {
                rules.push(rule.clone());
            }
        }
        FeedBackType::JSONPaths => {
            let known: Vec<&str> = rules
                .iter()
                .filter(|r| r.type_ == FeedBackType::JSONPaths)
                .flat_map(|r| r.json_paths.iter().map(|p| p.name.as_str()))
                .collect();
            let new: Vec<_> = rule
                .json_paths
                .iter()
                .filter(|p| !known.contains(&p.name.as_str()))
                .cloned()
                .collect();
            if !new.is_empty() {
                rules.push(FeedbackRule {
                    type_: FeedBackType::JSONPaths,
                    json_paths: new,
                });
            }
        }
    }
}

/// The ManagedClusterAddOn that owns an add-on's works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddonIdentity {
    /// Add-on name (= ManagedClusterAddOn and ClusterManagementAddOn name).
    pub name: String,
    /// Cluster namespace (= ManagedClusterAddOn and work namespace).
    pub namespace: String,
    /// ManagedClusterAddOn uid.
    pub uid: String,
}

impl AddonIdentity {
    /// Controller owner reference to the ManagedClusterAddOn, as OCM sets it.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: OWNER_API_VERSION.into(),
            kind: "ManagedClusterAddOn".into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Metadata of a work of this add-on named `name`.
    fn work_meta(&self, name: String, annotation: Option<&String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(BTreeMap::from([(ADDON_NAME_LABEL.to_owned(), self.name.clone())])),
            annotations: annotation
                .map(|a| BTreeMap::from([(CONFIG_SPEC_HASH_ANNOTATION.to_owned(), a.clone())])),
            owner_references: Some(vec![self.owner_reference()]),
            ..Default::default()
        }
    }
}

/// Why deploy works could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildWorksError {
    /// The config-spec-hash annotation could not be encoded.
    #[error("building the config-spec-hash annotation: {0}")]
    Annotation(#[from] GoJsonError),
}

/// Deploy works to apply and to delete.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeployPlan {
    /// Works to create or update, complete with metadata and spec.
    pub apply: Vec<ManifestWork>,
    /// Names of existing deploy works left without objects.
    pub delete: Vec<String>,
}

/// A work being filled.
struct Filling {
    name: String,
    manifests: Vec<Value>,
    room: usize,
}

/// Annotation on an add-on's ManifestWork: [`work_spec_hash`] of the spec the add-on manager
/// applied. Built with [`with_crd_defaults`], the spec reads back from the apiserver with this
/// same hash, so comparing it with the hash of the spec read back finds hand edits without
/// keeping the spec itself.
pub const WORK_SPEC_HASH_ANNOTATION: &str = "flotilla.dev/applied-spec-hash";

/// The hash of a work's spec ([`crate::addon::spec_hash`] of `{"spec": …}`): what
/// [`WORK_SPEC_HASH_ANNOTATION`] records. None when the spec cannot be printed as Go does.
pub fn work_spec_hash(spec: &ManifestWorkSpec) -> Option<String> {
    let spec = serde_json::to_value(spec).ok()?;
    super::spec_hash::spec_hash(&serde_json::json!({ "spec": spec })).ok()
}

/// `spec` with the values the ManifestWork CRD defaults filled into the fields left unset that
/// serialise as absent (the others always carry a value), so that the spec the apiserver
/// stores is the one applied and [`work_spec_hash`] of it matches the stamp.
pub fn with_crd_defaults(spec: &mut ManifestWorkSpec) {
    for config in &mut spec.manifest_configs {
        config
            .feedback_scrape_type
            .get_or_insert(FeedbackScrapeType::Poll);
        if let Some(apply) = config
            .update_strategy
            .as_mut()
            .and_then(|s| s.server_side_apply.as_mut())
            && apply.field_manager.is_empty()
        {
            DEFAULT_FIELD_MANAGER.clone_into(&mut apply.field_manager);
        }
    }
}

/// The deploy works of `addon` for `manifests` (plugin output after [`validate_manifests`]),
/// given the add-on's current deploy works `existing` (other works are ignored),
/// `manifest_configs` (feedback rules for health probing) and the ManagedClusterAddOn's
/// `configReferences` (for the config-spec-hash annotation). With no deployable object, nothing
/// is applied or deleted, as in OCM.
pub fn deploy_works(
    addon: &AddonIdentity,
    manifests: &[AgentManifest],
    existing: &[ManifestWork],
    manifest_configs: &[ManifestConfigOption],
    config_references: &[ConfigReference],
) -> Result<DeployPlan, BuildWorksError> {
    let deployable: Vec<&AgentManifest> = manifests
        .iter()
        .filter(|m| pre_delete_hook(m).is_none())
        .collect();
    if deployable.is_empty() {
        return Ok(DeployPlan::default());
    }
    let rules: Vec<OrphaningRule> = deployable.iter().filter_map(|m| orphaning_rule(m)).collect();
    let delete_option = (!rules.is_empty()).then_some(DeleteOption {
        propagation_policy: DeletePropagationPolicyType::SelectivelyOrphan,
        selectively_orphan: Some(SelectivelyOrphan {
            orphaning_rules: rules,
        }),
        ttl_seconds_after_finished: None,
    });
    let annotation = config_spec_hash_annotation(config_references)?;

    // Required objects by identity; taken out as they find their place.
    let mut required: BTreeMap<_, &AgentManifest> = deployable.iter().map(|m| (m.key(), *m)).collect();

    // Existing deploy works, in index order, keep the objects they already hold.
    let mut current: Vec<(usize, &ManifestWork)> = existing
        .iter()
        .filter_map(|w| Some((deploy_work_index(&addon.name, w.metadata.name.as_deref()?)?, w)))
        .collect();
    current.sort_by_key(|(index, _)| *index);
    let mut filling: Vec<Filling> = current
        .iter()
        .map(|(index, work)| {
            let mut kept = Vec::new();
            let mut used = 0;
            for old in work_objects(work) {
                if let Some(m) = required.remove(&old.key()) {
                    kept.push(m.object.clone());
                    used += m.size;
                }
            }
            Filling {
                name: deploy_work_name(&addon.name, *index),
                manifests: kept,
                room: DEPLOY_WORK_MANIFEST_LIMIT.saturating_sub(used),
            }
        })
        .collect();

    // New objects, biggest first (ties in output order), into the work with the most room.
    let mut remaining: Vec<&AgentManifest> = deployable
        .iter()
        .copied()
        .filter(|m| required.contains_key(&m.key()))
        .collect();
    remaining.sort_by_key(|m| std::cmp::Reverse(m.size));
    let mut overflow: Vec<&AgentManifest> = Vec::new();
    for manifest in remaining {
        let roomiest = filling
            .iter_mut()
            .filter(|f| f.room > 0)
            .reduce(|best, f| if f.room > best.room { f } else { best });
        match roomiest {
            Some(work) if manifest.size < work.room => {
                work.manifests.push(manifest.object.clone());
                work.room -= manifest.size;
            }
            _ => overflow.push(manifest),
        }
    }

    // What does not fit opens new works at the next free indexes.
    let mut taken: Vec<usize> = current.iter().map(|(index, _)| *index).collect();
    let mut next_index = || {
        let index = (0..).find(|i| !taken.contains(i)).unwrap_or(0);
        taken.push(index);
        index
    };
    let mut new_works: Vec<Filling> = Vec::new();
    let mut size = 0;
    for manifest in overflow {
        match new_works.last_mut() {
            Some(work) if size + manifest.size < DEPLOY_WORK_MANIFEST_LIMIT => {
                work.manifests.push(manifest.object.clone());
                size += manifest.size;
            }
            _ => {
                new_works.push(Filling {
                    name: deploy_work_name(&addon.name, next_index()),
                    manifests: vec![manifest.object.clone()],
                    room: 0,
                });
                size = manifest.size;
            }
        }
    }

    let mut plan = DeployPlan::default();
    for work in new_works.into_iter().chain(filling) {
        if work.manifests.is_empty() {
            plan.delete.push(work.name);
            continue;
        }
        let mut built = ManifestWork::new(
            &work.name,
            ManifestWorkSpec {
                workload: ManifestsTemplate {
                    manifests: work.manifests.into_iter().map(Manifest).collect(),
                },
                delete_option: delete_option.clone(),
                manifest_configs: manifest_configs.to_vec(),
                executor: None,
            },
        );
        built.metadata = addon.work_meta(work.name, annotation.as_ref());
        plan.apply.push(built);
    }
    Ok(plan)
}

/// Identity of an object already in a work.
/// Annotation the add-on manager's work cache puts on each work in place of its objects, never
/// written to the apiserver: the [`WorkObject`]s, as JSON. A thousand clusters' works held with
/// their objects, even trimmed to stubs, were the largest part of the hub's memory.
pub const WORK_OBJECTS_ANNOTATION: &str = "flotilla.dev/cached-objects";

/// An object of a work as the add-on manager reads it once applied: its identity (where
/// [`deploy_works`] keeps it) and the replicas it asks for (the health check passes over
/// Deployments scaled to zero; unset means one).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkObject {
    /// `apiVersion`.
    #[serde(rename = "v")]
    pub api_version: String,
    /// `kind`.
    #[serde(rename = "k")]
    pub kind: String,
    /// `metadata.namespace` ("" for a cluster-scoped object).
    #[serde(rename = "ns", default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `metadata.name`.
    #[serde(rename = "n")]
    pub name: String,
    /// `spec.replicas`, when the object has it.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

impl WorkObject {
    /// The object's identity and replicas; None without apiVersion, kind or name.
    fn of(object: &Value) -> Option<Self> {
        let ResourceKey {
            api_version,
            kind,
            namespace,
            name,
        } = ResourceKey::of(object)?;
        Some(Self {
            api_version,
            kind,
            namespace,
            name,
            replicas: object["spec"]["replicas"].as_i64(),
        })
    }

    /// The API group of the object ("" for the core group).
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(group, _)| group)
    }

    /// The object's identity.
    pub fn key(self) -> ResourceKey {
        ResourceKey {
            api_version: self.api_version,
            kind: self.kind,
            namespace: self.namespace,
            name: self.name,
        }
    }
}

/// The objects of `work`: from [`WORK_OBJECTS_ANNOTATION`] on a work as the cache keeps it
/// ([`keep_only_work_objects`]), else from its manifests.
pub fn work_objects(work: &ManifestWork) -> Vec<WorkObject> {
    match work
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(WORK_OBJECTS_ANNOTATION))
    {
        Some(cached) => serde_json::from_str(cached).unwrap_or_default(),
        None => work
            .spec
            .workload
            .manifests
            .iter()
            .filter_map(|m| WorkObject::of(&m.0))
            .collect(),
    }
}

/// Replaces the manifests of `work` with [`WORK_OBJECTS_ANNOTATION`]: how the add-on manager's
/// cache keeps a work. Any such annotation the work came with is overwritten.
pub fn keep_only_work_objects(work: &mut ManifestWork) {
    let objects: Vec<WorkObject> = work
        .spec
        .workload
        .manifests
        .iter()
        .filter_map(|m| WorkObject::of(&m.0))
        .collect();
    let text = serde_json::to_string(&objects).unwrap_or_else(|_| "[]".to_owned());
    work.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(WORK_OBJECTS_ANNOTATION.to_owned(), text);
    work.spec.workload.manifests = Vec::new();
}

/// The pre-delete hook work of `addon` (`addon-<name>-pre-delete`, WellKnownStatus feedback for
/// each hook), or None when the output has no hook.
pub fn pre_delete_work(addon: &AddonIdentity, manifests: &[AgentManifest]) -> Option<ManifestWork> {
    let (objects, configs): (Vec<Manifest>, Vec<ManifestConfigOption>) = manifests
        .iter()
        .filter_map(|m| pre_delete_hook(m).map(|config| (Manifest(m.object.clone()), config)))
        .unzip();
    if objects.is_empty() {
        return None;
    }
    let name = pre_delete_work_name(&addon.name);
    let mut work = ManifestWork::new(
        &name,
        ManifestWorkSpec {
            workload: ManifestsTemplate { manifests: objects },
            manifest_configs: configs,
            ..Default::default()
        },
    );
    work.metadata = addon.work_meta(name, None);
    Some(work)
}

/// A feedback value of `identifier` in a work's status, the way addon-framework looks it up:
/// the scan stops at the first manifest without feedback values (an OCM quirk kept so that
/// both managers agree on when hooks are done).
fn feedback_value<'a>(
    work: &'a ManifestWork,
    identifier: &ResourceIdentifier,
    name: &str,
) -> Option<&'a FieldValue> {
    let status = work.status.as_ref()?;
    for manifest in &status.resource_status.manifests {
        let values = &manifest.status_feedbacks.values;
        if values.is_empty() {
            return None;
        }
        let meta = &manifest.resource_meta;
        if meta.group == identifier.group
            && meta.resource == identifier.resource
            && meta.name == identifier.name
            && meta.namespace == identifier.namespace
        {
            return values.iter().find(|v| v.name == name).map(|v| &v.value);
        }
    }
    None
}

/// Whether the pre-delete hooks of `work` have completed: the work is Available, and every
/// hook Job reports `JobComplete` = `"True"` and every hook Pod `PodPhase` = `"Succeeded"`.
pub fn hook_work_completed(work: &ManifestWork) -> bool {
    let available = work
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, manifest_work::CONDITION_AVAILABLE));
    if !available || work.spec.manifest_configs.is_empty() {
        return false;
    }
    work.spec.manifest_configs.iter().all(|config| {
        let (field, done) = match config.resource_identifier.resource.as_str() {
            "jobs" => ("JobComplete", "True"),
            "pods" => ("PodPhase", "Succeeded"),
            _ => return false,
        };
        feedback_value(work, &config.resource_identifier, field).and_then(|v| v.string.as_deref())
            == Some(done)
    })
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::v1beta1::{ConfigGroupResource, ConfigReferent, ConfigSpecHash};
    use flotilla_api::work::v1::{
        FeedbackValue, ManifestCondition, ManifestResourceMeta, ManifestResourceStatus, ManifestWorkStatus,
        StatusFeedbackResult, ValueType,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn addon() -> AddonIdentity {
        AddonIdentity {
            name: "hello".into(),
            namespace: "cluster1".into(),
            uid: "uid-1".into(),
        }
    }

    fn object(kind: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "ns"}})
    }

    const CAPS: OutputCaps = OutputCaps {
        max_bytes: 20 * MAX_MANIFESTS_SIZE,
        max_objects: 1000,
    };

    fn validated(objects: &[Value]) -> Vec<AgentManifest> {
        let output: Vec<String> = objects.iter().map(Value::to_string).collect();
        validate_manifests(&output, CAPS).unwrap()
    }

    /// A ConfigMap whose JSON is about `bytes` long.
    fn big(name: &str, bytes: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"x": "a".repeat(bytes)}})
    }

    #[rstest]
    #[case::not_json("{nope", "manifest 0 is not JSON")]
    #[case::not_an_object("[1]", "manifest 0 is not a JSON object")]
    #[case::no_kind(r#"{"apiVersion":"v1","metadata":{"name":"a"}}"#, "manifest 0 has no kind")]
    #[case::empty_kind(
        r#"{"apiVersion":"v1","kind":"","metadata":{"name":"a"}}"#,
        "manifest 0 has no kind"
    )]
    #[case::no_api_version(r#"{"kind":"Pod","metadata":{"name":"a"}}"#, "manifest 0 has no apiVersion")]
    #[case::no_name(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{}}"#,
        "manifest 0 has no metadata.name"
    )]
    #[case::name_not_a_string(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":3}}"#,
        "manifest 0 has no metadata.name"
    )]
    #[case::generate_name(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","generateName":"a-"}}"#,
        "manifest 0 (Pod a) sets metadata.generateName"
    )]
    fn bad_output_is_refused_naming_the_manifest(#[case] text: &str, #[case] message: &str) {
        let output = vec![text.to_owned()];
        let error = validate_manifests(&output, CAPS).unwrap_err();
        assert!(error.to_string().starts_with(message), "{error}");
    }

    #[test]
    fn the_index_of_the_bad_manifest_is_reported() {
        let output = vec![object("Pod", "a").to_string(), "{}".to_owned()];
        let error = validate_manifests(&output, CAPS).unwrap_err();
        assert_eq!(
            error,
            ManifestError::MissingField {
                index: 1,
                field: "apiVersion"
            }
        );
    }

    #[test]
    fn a_repeated_object_is_refused() {
        let output = vec![object("Pod", "a").to_string(), object("Pod", "a").to_string()];
        let error = validate_manifests(&output, CAPS).unwrap_err();
        assert!(
            matches!(
                error,
                ManifestError::Duplicate {
                    index: 1,
                    first: 0,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn output_over_the_size_limits_is_refused() {
        let one = vec![big("huge", MAX_MANIFESTS_SIZE).to_string()];
        let error = validate_manifests(&one, CAPS).unwrap_err();
        assert!(
            matches!(error, ManifestError::TooLarge { index: 0, .. }),
            "{error}"
        );

        let many: Vec<String> = (0..3).map(|i| big(&format!("c{i}"), 1000).to_string()).collect();
        let small = OutputCaps {
            max_bytes: 2500,
            ..CAPS
        };
        let error = validate_manifests(&many, small).unwrap_err();
        assert!(
            matches!(error, ManifestError::OutputTooLarge { limit: 2500, .. }),
            "{error}"
        );
        // Counted before any is parsed: raw bytes, then the number of entries.
        let junk = vec!["x".repeat(2501)];
        assert_eq!(
            validate_manifests(&junk, small),
            Err(ManifestError::OutputTooLarge {
                size: 2501,
                limit: 2500
            })
        );
        let two = OutputCaps {
            max_objects: 2,
            ..CAPS
        };
        assert_eq!(
            validate_manifests(&vec!["junk".to_owned(); 3], two),
            Err(ManifestError::TooMany { count: 3, limit: 2 })
        );
    }

    #[test]
    fn sizes_are_counted_as_go_encodes_the_object() {
        let manifests = validated(&[json!({"kind": "K", "apiVersion": "v1", "metadata": {"name": "<"}})]);
        // {"apiVersion":"v1","kind":"K","metadata":{"name":"\u003c"}}
        assert_eq!(manifests[0].size, 59);
    }

    #[test]
    fn names_follow_ocm() {
        assert_eq!(deploy_work_name("hello", 0), "addon-hello-deploy-0");
        assert_eq!(pre_delete_work_name("hello"), "addon-hello-pre-delete");
        assert_eq!(deploy_work_index("hello", "addon-hello-deploy-12"), Some(12));
        assert_eq!(deploy_work_index("hello", "addon-hello-pre-delete"), None);
        assert_eq!(deploy_work_index("hello", "addon-hello-deploy-hosting-c-0"), None);
        assert_eq!(DEPLOY_WORK_MANIFEST_LIMIT, 409_600);
    }

    fn references() -> Vec<ConfigReference> {
        vec![ConfigReference {
            group_resource: ConfigGroupResource {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
            },
            last_observed_generation: 1,
            desired_config: Some(ConfigSpecHash {
                referent: ConfigReferent {
                    namespace: "ns".into(),
                    name: "c".into(),
                },
                spec_hash: "abc".into(),
            }),
            last_applied_config: None,
        }]
    }

    #[test]
    fn a_small_output_becomes_one_work_with_ocm_metadata() {
        let manifests = validated(&[object("ServiceAccount", "sa"), object("ConfigMap", "cm")]);
        let plan = deploy_works(&addon(), &manifests, &[], &[], &references()).unwrap();
        assert!(plan.delete.is_empty());
        let [work] = plan.apply.as_slice() else {
            panic!("one work: {plan:?}")
        };
        assert_eq!(work.metadata.name.as_deref(), Some("addon-hello-deploy-0"));
        assert_eq!(work.metadata.namespace.as_deref(), Some("cluster1"));
        assert_eq!(work.metadata.labels.as_ref().unwrap()[ADDON_NAME_LABEL], "hello");
        assert_eq!(
            work.metadata.annotations.as_ref().unwrap()[CONFIG_SPEC_HASH_ANNOTATION],
            r#"{"addondeploymentconfigs.addon.open-cluster-management.io/ns/c":"abc"}"#
        );
        let owner = &work.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("ManagedClusterAddOn", "uid-1", Some(true))
        );
        assert_eq!(work.spec.workload.manifests.len(), 2);
        assert!(work.spec.delete_option.is_none());
    }

    #[test]
    fn no_config_references_means_no_annotation() {
        let manifests = validated(&[object("ServiceAccount", "sa")]);
        let plan = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        assert!(plan.apply[0].metadata.annotations.is_none());
    }

    fn work_sizes(plan: &DeployPlan) -> Vec<(String, usize)> {
        plan.apply
            .iter()
            .map(|w| (w.metadata.name.clone().unwrap(), w.spec.workload.manifests.len()))
            .collect()
    }

    #[test]
    fn output_above_eighty_percent_of_the_limit_is_split() {
        // Three objects of ~150 KB: two fit under 409 600 bytes, the third opens a second work.
        let manifests = validated(&[big("a", 150_000), big("b", 150_000), big("c", 150_000)]);
        let plan = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        assert_eq!(
            work_sizes(&plan),
            vec![
                ("addon-hello-deploy-0".into(), 2),
                ("addon-hello-deploy-1".into(), 1)
            ]
        );
    }

    #[test]
    fn objects_stay_in_their_work_and_emptied_works_are_deleted() {
        let first = validated(&[big("a", 150_000), big("b", 150_000), big("c", 150_000)]);
        let existing = deploy_works(&addon(), &first, &[], &[], &[]).unwrap().apply;
        // "c" sits alone in deploy-1; dropping "a" and "b" empties deploy-0.
        let second = validated(&[big("c", 150_000)]);
        let plan = deploy_works(&addon(), &second, &existing, &[], &[]).unwrap();
        assert_eq!(plan.delete, vec!["addon-hello-deploy-0".to_owned()]);
        assert_eq!(work_sizes(&plan), vec![("addon-hello-deploy-1".into(), 1)]);

        // A new object goes to the existing work with the most room, here the emptied one.
        let third = validated(&[big("c", 150_000), object("Secret", "s")]);
        let plan = deploy_works(&addon(), &third, &existing, &[], &[]).unwrap();
        assert!(plan.delete.is_empty());
        assert_eq!(
            work_sizes(&plan),
            vec![
                ("addon-hello-deploy-0".into(), 1),
                ("addon-hello-deploy-1".into(), 1)
            ]
        );
    }

    #[test]
    fn works_kept_as_their_objects_plan_as_the_works_themselves() {
        let manifests = validated(&[big("a", 150_000), big("b", 150_000), big("c", 150_000)]);
        let first = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        let kept: Vec<ManifestWork> = first
            .apply
            .iter()
            .map(|w| {
                let mut w = w.clone();
                keep_only_work_objects(&mut w);
                w
            })
            .collect();
        assert!(kept.iter().all(|w| w.spec.workload.manifests.is_empty()));
        for (whole, kept) in first.apply.iter().zip(&kept) {
            assert_eq!(work_objects(kept), work_objects(whole));
        }
        // "b" leaves, a new "d" takes its room: the others stay where they were.
        let next = validated(&[big("a", 150_000), big("c", 150_000), big("d", 150_000)]);
        assert_eq!(
            deploy_works(&addon(), &next, &kept, &[], &[]).unwrap().apply,
            deploy_works(&addon(), &next, &first.apply, &[], &[])
                .unwrap()
                .apply
        );
    }

    #[test]
    fn a_work_object_is_its_identity_and_replicas() {
        let mut work = ManifestWork::new("w", ManifestWorkSpec::default());
        work.spec.workload.manifests = vec![
            Manifest(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": "d", "namespace": "ns", "labels": {"x": "y"}},
                            "spec": {"replicas": 0, "template": {}}})),
            Manifest(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})),
        ];
        keep_only_work_objects(&mut work);
        assert_eq!(
            work_objects(&work),
            [
                WorkObject {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: "ns".into(),
                    name: "d".into(),
                    replicas: Some(0),
                },
                WorkObject {
                    api_version: "v1".into(),
                    kind: "Namespace".into(),
                    namespace: String::new(),
                    name: "ns".into(),
                    replicas: None,
                },
            ]
        );
        assert_eq!(
            (work_objects(&work)[0].group(), work_objects(&work)[1].group()),
            ("apps", "")
        );
    }

    #[test]
    fn an_unchanged_output_renders_the_same_works() {
        let manifests = validated(&[big("a", 150_000), big("b", 150_000), big("c", 150_000)]);
        let first = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        let again = deploy_works(&addon(), &manifests, &first.apply, &[], &[]).unwrap();
        assert_eq!(again.apply, first.apply);
        assert!(again.delete.is_empty());
    }

    #[test]
    fn deletion_orphan_objects_are_selectively_orphaned() {
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"}});
        crd["metadata"]["annotations"] = json!({DELETION_ORPHAN_ANNOTATION: ""});
        let manifests = validated(&[crd, object("ConfigMap", "cm")]);
        let plan = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        let option = plan.apply[0].spec.delete_option.clone().unwrap();
        assert_eq!(
            option.propagation_policy,
            DeletePropagationPolicyType::SelectivelyOrphan
        );
        assert_eq!(
            option.selectively_orphan.unwrap().orphaning_rules,
            vec![ResourceIdentifier {
                group: "apiextensions.k8s.io".into(),
                resource: "customresourcedefinitions".into(),
                name: "things.example.com".into(),
                namespace: String::new(),
            }]
        );
    }

    fn hook(kind: &str, api_version: &str, marker: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "cleanup", "namespace": "ns", marker: {ADDON_PRE_DELETE_ANNOTATION: ""}}})
    }

    #[rstest]
    #[case::job_annotation(hook("Job", "batch/v1", "annotations"), Some(("batch", "jobs")))]
    #[case::pod_label(hook("Pod", "v1", "labels"), Some(("", "pods")))]
    #[case::deployment_is_never_a_hook(hook("Deployment", "apps/v1", "annotations"), None)]
    #[case::job_without_marker(object("Job", "j"), None)]
    fn pre_delete_hooks_are_jobs_and_pods_with_the_marker(
        #[case] object: Value,
        #[case] expected: Option<(&str, &str)>,
    ) {
        let manifests = validated(&[object]);
        let found = pre_delete_hook(&manifests[0]).map(|c| {
            assert_eq!(c.feedback_rules[0].type_, FeedBackType::WellKnownStatus);
            (c.resource_identifier.group, c.resource_identifier.resource)
        });
        assert_eq!(found, expected.map(|(g, r)| (g.to_owned(), r.to_owned())));
    }

    #[test]
    fn hooks_go_to_the_pre_delete_work_only() {
        let manifests = validated(&[hook("Job", "batch/v1", "annotations"), object("ConfigMap", "cm")]);
        let plan = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
        assert_eq!(plan.apply[0].spec.workload.manifests.len(), 1);
        let work = pre_delete_work(&addon(), &manifests).unwrap();
        assert_eq!(work.metadata.name.as_deref(), Some("addon-hello-pre-delete"));
        assert_eq!(work.spec.workload.manifests.len(), 1);
        assert_eq!(work.spec.manifest_configs[0].resource_identifier.resource, "jobs");
        assert!(pre_delete_work(&addon(), &validated(&[object("ConfigMap", "cm")])).is_none());
    }

    #[test]
    fn an_output_of_only_hooks_changes_no_deploy_work() {
        let manifests = validated(&[hook("Job", "batch/v1", "annotations")]);
        assert_eq!(
            deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap(),
            DeployPlan::default()
        );
    }

    fn hook_work(available: bool, job_complete: Option<&str>) -> ManifestWork {
        let manifests = validated(&[hook("Job", "batch/v1", "annotations")]);
        let mut work = pre_delete_work(&addon(), &manifests).unwrap();
        let values = job_complete
            .map(|v| {
                vec![FeedbackValue {
                    name: "JobComplete".into(),
                    value: FieldValue {
                        type_: ValueType::String,
                        string: Some(v.into()),
                        ..Default::default()
                    },
                }]
            })
            .unwrap_or_default();
        work.status = Some(ManifestWorkStatus {
            conditions: vec![Condition {
                type_: manifest_work::CONDITION_AVAILABLE.into(),
                status: if available { "True" } else { "False" }.into(),
                reason: "r".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
            }],
            resource_status: ManifestResourceStatus {
                manifests: vec![ManifestCondition {
                    resource_meta: ManifestResourceMeta {
                        group: "batch".into(),
                        resource: "jobs".into(),
                        name: "cleanup".into(),
                        namespace: "ns".into(),
                        ..Default::default()
                    },
                    status_feedbacks: StatusFeedbackResult { values },
                    conditions: vec![],
                }],
            },
        });
        work
    }

    #[rstest]
    #[case::job_complete(true, Some("True"), true)]
    #[case::job_not_complete(true, Some("False"), false)]
    #[case::no_feedback_yet(true, None, false)]
    #[case::work_not_available(false, Some("True"), false)]
    fn hooks_are_complete_when_every_job_completed(
        #[case] available: bool,
        #[case] value: Option<&str>,
        #[case] done: bool,
    ) {
        assert_eq!(hook_work_completed(&hook_work(available, value)), done);
    }

    /// Name of every object in `plan`'s works, with the work holding it.
    fn placement_of(plan: &[ManifestWork]) -> Vec<(String, String)> {
        let mut placed: Vec<(String, String)> = plan
            .iter()
            .flat_map(|w| {
                let work = w.metadata.name.clone().unwrap();
                w.spec
                    .workload
                    .manifests
                    .iter()
                    .map(move |m| (m.0["metadata"]["name"].as_str().unwrap().to_owned(), work.clone()))
            })
            .collect();
        placed.sort();
        placed
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        #[test]
        fn every_object_lands_once_in_a_work_within_the_limit_and_stays_there(
            sizes in proptest::collection::vec(1usize..260_000, 1..10),
            dropped in proptest::collection::vec(proptest::bool::ANY, 10),
        ) {
            let objects: Vec<Value> = sizes.iter().enumerate().map(|(i, n)| big(&format!("o{i}"), *n)).collect();
            let manifests = validated(&objects);
            let plan = deploy_works(&addon(), &manifests, &[], &[], &[]).unwrap();
            let placed = placement_of(&plan.apply);
            proptest::prop_assert_eq!(placed.len(), objects.len());
            proptest::prop_assert!(placed.windows(2).all(|w| w[0].0 != w[1].0), "an object is in two works");
            for work in &plan.apply {
                let total: usize = work.spec.workload.manifests.iter().map(|m| go_json::to_vec(&m.0).unwrap().len()).sum();
                proptest::prop_assert!(
                    total < DEPLOY_WORK_MANIFEST_LIMIT || work.spec.workload.manifests.len() == 1,
                    "{} holds {} bytes", work.metadata.name.clone().unwrap(), total
                );
            }

            // Dropping some objects moves none of the others.
            let kept: Vec<Value> = objects
                .iter()
                .zip(&dropped)
                .filter(|(_, drop)| !**drop)
                .map(|(o, _)| o.clone())
                .collect();
            let replan = deploy_works(&addon(), &validated(&kept), &plan.apply, &[], &[]).unwrap();
            let before: Vec<(String, String)> = placed
                .iter()
                .filter(|(name, _)| kept.iter().any(|o| o["metadata"]["name"] == name.as_str()))
                .cloned()
                .collect();
            if kept.is_empty() {
                proptest::prop_assert_eq!(replan, DeployPlan::default());
            } else {
                proptest::prop_assert_eq!(placement_of(&replan.apply), before);
                let names: Vec<String> = replan.apply.iter().filter_map(|w| w.metadata.name.clone()).collect();
                for work in &plan.apply {
                    let name = work.metadata.name.clone().unwrap();
                    proptest::prop_assert!(names.contains(&name) != replan.delete.contains(&name));
                }
            }
        }
    }

    fn json_path_rule(names: &[&str]) -> FeedbackRule {
        FeedbackRule {
            type_: FeedBackType::JSONPaths,
            json_paths: names
                .iter()
                .map(|n| flotilla_api::work::v1::JsonPath {
                    name: (*n).into(),
                    version: String::new(),
                    path: format!(".status.{n}"),
                })
                .collect(),
        }
    }

    #[test]
    fn probes_ask_for_feedback_on_the_rendered_workloads() {
        let manifests = validated(&[
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "agent", "namespace": "ns"}}),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "ns"}}),
            object("ConfigMap", "cm"),
        ]);
        let ids = |configs: Vec<ManifestConfigOption>| -> Vec<String> {
            configs
                .into_iter()
                .map(|c| {
                    format!(
                        "{}/{}/{}",
                        c.resource_identifier.group,
                        c.resource_identifier.resource,
                        c.resource_identifier.name
                    )
                })
                .collect()
        };
        assert_eq!(
            ids(manifest_configs(
                ProbeFeedback::DeploymentAvailability,
                &manifests,
                &[]
            )),
            vec!["apps/deployments/agent"]
        );
        assert_eq!(
            ids(manifest_configs(
                ProbeFeedback::WorkloadAvailability,
                &manifests,
                &[]
            )),
            vec!["apps/deployments/agent", "apps/daemonsets/ds"]
        );
        assert!(manifest_configs(ProbeFeedback::None, &manifests, &[]).is_empty());
    }

    #[test]
    fn own_manifest_configs_merge_into_the_probe_feedback() {
        let mut probe = well_known_status_config("apps", "deployments", "ns", "agent");
        probe.feedback_rules.push(json_path_rule(&["ready"]));
        let probes = [probe];
        let mut own = well_known_status_config("apps", "deployments", "ns", "agent");
        own.feedback_rules.push(json_path_rule(&["ready", "replicas"]));
        own.update_strategy = Some(flotilla_api::work::v1::UpdateStrategy::default());
        let other = well_known_status_config("", "configmaps", "ns", "cm");
        let merged = manifest_configs(ProbeFeedback::Fields(&probes), &[], &[own, other.clone()]);
        assert_eq!(merged.len(), 2);
        let rules = &merged[0].feedback_rules;
        assert_eq!(rules.len(), 3, "{rules:?}");
        assert_eq!(rules[2].json_paths.len(), 1);
        assert_eq!(rules[2].json_paths[0].name, "replicas");
        assert!(merged[0].update_strategy.is_some());
        assert_eq!(merged[1], other);
    }
}
