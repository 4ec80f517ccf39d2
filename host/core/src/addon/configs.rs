//! Which configs an add-on uses on a cluster, and how they are recorded.
//!
//! Precedence, as OCM's add-on manager resolves it:
//!
//! ```text
//! ClusterManagementAddOn defaults            (v1alpha1 supportedConfigs[].defaultConfig,
//!        │                                     v1beta1 defaultConfigs; __reserved_no_default__ skipped)
//!        ▼ overridden by
//! installStrategy.placements[i].configs      (only the LAST placement selecting the cluster)
//!        ▼ overridden by
//! ManagedClusterAddOn spec.configs
//! ```
//!
//! An override replaces the whole list of its group/resource; other types keep the lower
//! layer's list; a config listed twice (same namespace and name) in one list counts once.
//! The result is recorded in the ManagedClusterAddOn's `status.configReferences` (with the spec
//! hash of each config), in the CMA's `defaultConfigReferences` and `installProgressions`, and in
//! the deploy works' `open-cluster-management.io/config-spec-hash` annotation.

use std::collections::BTreeMap;

use flotilla_api::addon::consts::RESERVED_NO_DEFAULT_CONFIG_NAME;
use flotilla_api::addon::v1alpha1;
use flotilla_api::addon::v1beta1::{
    self, AddOnConfig, ConfigGroupResource, ConfigReference, ConfigReferent, ConfigSpecHash,
    DefaultConfigReference, InstallConfigReference, InstallProgression, PlacementRef, PlacementStrategy,
};
use serde_json::Value;

use super::go_json::{self, GoJsonError};

pub use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;

/// Desired configs of an add-on, per config type (ordered by group, then resource, as OCM
/// orders `configReferences`), each list in precedence order without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredConfigs(BTreeMap<ConfigGroupResource, Vec<ConfigReferent>>);

impl DesiredConfigs {
    /// The configs in status order: by group and resource, then in list order.
    pub fn iter(&self) -> impl Iterator<Item = (&ConfigGroupResource, &ConfigReferent)> {
        self.0
            .iter()
            .flat_map(|(gr, list)| list.iter().map(move |r| (gr, r)))
    }

    /// How many configs there are.
    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `referent` is desired for `gr`.
    pub fn contains(&self, gr: &ConfigGroupResource, referent: &ConfigReferent) -> bool {
        self.0.get(gr).is_some_and(|list| list.contains(referent))
    }

    /// The configs as `AddOnConfig`s, in status order.
    pub fn to_configs(&self) -> Vec<AddOnConfig> {
        self.iter()
            .map(|(gr, referent)| AddOnConfig {
                group_resource: gr.clone(),
                referent: referent.clone(),
            })
            .collect()
    }

    /// Adds `config` unless present (defaults layer).
    fn add(&mut self, config: &AddOnConfig) {
        let list = self.0.entry(config.group_resource.clone()).or_default();
        if !list.contains(&config.referent) {
            list.push(config.referent.clone());
        }
    }

    /// Replaces, per group/resource present in `overrides`, the whole list with theirs.
    fn override_with(&mut self, overrides: &[AddOnConfig]) {
        let mut replaced: Vec<&ConfigGroupResource> = Vec::new();
        for config in overrides {
            if !replaced.contains(&&config.group_resource) {
                self.0.insert(config.group_resource.clone(), Vec::new());
                replaced.push(&config.group_resource);
            }
            self.add(config);
        }
    }
}

/// Whether a default config names a real config (OCM skips empty names and the v1beta1
/// placeholder for "supported, no default").
fn is_real_default(config: &AddOnConfig) -> bool {
    !config.referent.name.is_empty() && config.referent.name != RESERVED_NO_DEFAULT_CONFIG_NAME
}

/// The default configs of a v1alpha1 ClusterManagementAddOn (`supportedConfigs[].defaultConfig`).
pub fn default_configs_v1alpha1(spec: &v1alpha1::ClusterManagementAddOnSpec) -> Vec<AddOnConfig> {
    spec.supported_configs
        .iter()
        .filter_map(|supported| {
            supported.default_config.as_ref().map(|referent| AddOnConfig {
                group_resource: supported.group_resource.clone(),
                referent: referent.clone(),
            })
        })
        .filter(is_real_default)
        .collect()
}

/// The default configs of a v1beta1 ClusterManagementAddOn (`defaultConfigs`).
pub fn default_configs_v1beta1(spec: &v1beta1::ClusterManagementAddOnSpec) -> Vec<AddOnConfig> {
    spec.default_configs
        .iter()
        .filter(|c| is_real_default(c))
        .cloned()
        .collect()
}

/// The placement whose configs apply to a cluster: the last one (in `placements` order) whose
/// decisions include it, as later placements override earlier ones. `selects` says whether a
/// placement's decisions include the cluster. A cluster no install placement selects (a
/// Manual add-on, or a user-made one) takes the defaults, and OCM releases its configs at once
/// (rollout `All`).
pub fn owning_placement(
    placements: &[PlacementStrategy],
    selects: impl Fn(&PlacementRef) -> bool,
) -> Option<&PlacementStrategy> {
    placements.iter().rev().find(|p| selects(&p.placement))
}

/// The desired configs of an add-on on a cluster: `defaults`, overridden by the configs of the
/// placement that owns the cluster (see [`owning_placement`]), overridden by the
/// ManagedClusterAddOn's `spec.configs`.
pub fn desired_configs(
    defaults: &[AddOnConfig],
    placement: Option<&[AddOnConfig]>,
    cluster: &[AddOnConfig],
) -> DesiredConfigs {
    let mut desired = DesiredConfigs::default();
    for config in defaults.iter().filter(|c| is_real_default(c)) {
        desired.add(config);
    }
    if let Some(placement) = placement {
        desired.override_with(placement);
    }
    desired.override_with(cluster);
    desired
}

/// The first config type in `configs` that the add-on does not support, if any (OCM then sets
/// `Progressing` False `ConfigurationUnsupported`).
pub fn first_unsupported<'a>(
    configs: &'a [AddOnConfig],
    supported: &[ConfigGroupResource],
) -> Option<&'a ConfigGroupResource> {
    configs
        .iter()
        .map(|c| &c.group_resource)
        .find(|gr| !supported.contains(gr))
}

/// What the hub knows about one config object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedConfig {
    /// Its spec hash (see [`super::spec_hash::spec_hash`]).
    pub spec_hash: String,
    /// Its `metadata.generation`.
    pub generation: i64,
}

/// Desired configs with their hashes, as `status.configReferences` entries (without
/// `lastAppliedConfig`), and the configs that do not exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedConfigs {
    /// One entry per desired config, in status order; a missing config has an empty hash and
    /// generation 0, as OCM leaves them.
    pub references: Vec<ConfigReference>,
    /// Desired configs that were not found; the controller reports them in a condition.
    pub missing: Vec<AddOnConfig>,
}

/// A message naming configs that do not exist, for the condition that reports them.
pub fn missing_configs_message(missing: &[AddOnConfig]) -> String {
    let names: Vec<String> = missing
        .iter()
        .map(|c| config_key(&c.group_resource, &c.referent))
        .collect();
    format!("configs not found: {}", names.join(", "))
}

/// Looks up every desired config with `observe` (None when the object does not exist).
pub fn resolve(
    desired: &DesiredConfigs,
    observe: impl Fn(&ConfigGroupResource, &ConfigReferent) -> Option<ObservedConfig>,
) -> ResolvedConfigs {
    let mut resolved = ResolvedConfigs::default();
    for (gr, referent) in desired.iter() {
        let observed = observe(gr, referent);
        if observed.is_none() {
            resolved.missing.push(AddOnConfig {
                group_resource: gr.clone(),
                referent: referent.clone(),
            });
        }
        let (spec_hash, generation) = observed.map_or((String::new(), 0), |o| (o.spec_hash, o.generation));
        resolved.references.push(ConfigReference {
            group_resource: gr.clone(),
            last_observed_generation: generation,
            desired_config: Some(ConfigSpecHash {
                referent: referent.clone(),
                spec_hash,
            }),
            last_applied_config: None,
        });
    }
    resolved
}

/// The referent of a reference's desired config, if it has one.
fn desired_referent(reference: &ConfigReference) -> Option<&ConfigReferent> {
    reference.desired_config.as_ref().map(|d| &d.referent)
}

/// The new `status.configReferences` when `desired` (from [`resolve`]) is released to the
/// cluster: entries of `existing` still desired keep their place and `lastAppliedConfig` and
/// take the new desired config and generation; new ones are appended; the rest are dropped;
/// the list is grouped by group and resource, in that order.
pub fn merge_config_references(
    existing: &[ConfigReference],
    desired: &[ConfigReference],
) -> Vec<ConfigReference> {
    let is_desired = |r: &ConfigReference| {
        desired
            .iter()
            .any(|d| d.group_resource == r.group_resource && desired_referent(d) == desired_referent(r))
    };
    let mut merged: BTreeMap<ConfigGroupResource, Vec<ConfigReference>> = BTreeMap::new();
    for reference in existing
        .iter()
        .filter(|r| desired_referent(r).is_some() && is_desired(r))
    {
        merged
            .entry(reference.group_resource.clone())
            .or_default()
            .push(reference.clone());
    }
    for wanted in desired {
        let list = merged.entry(wanted.group_resource.clone()).or_default();
        match list
            .iter_mut()
            .find(|r| desired_referent(r) == desired_referent(wanted))
        {
            Some(current) => {
                current.desired_config = wanted.desired_config.clone();
                current.last_observed_generation = wanted.last_observed_generation;
            }
            None => list.push(wanted.clone()),
        }
    }
    merged.into_values().flatten().collect()
}

/// Key of a config in the [`CONFIG_SPEC_HASH_ANNOTATION`] map: `<resource>[.<group>]/<ns>/<name>`
/// (the namespace is empty for cluster-scoped configs: `addonhubconfigs.<group>//default`).
pub fn config_key(gr: &ConfigGroupResource, referent: &ConfigReferent) -> String {
    let mut key = gr.resource.clone();
    if !gr.group.is_empty() {
        key.push('.');
        key.push_str(&gr.group);
    }
    format!("{key}/{}/{}", referent.namespace, referent.name)
}

/// The config-spec-hash map of `references`: [`config_key`] → desired spec hash (entries
/// without a desired config are left out).
pub fn config_spec_hashes(references: &[ConfigReference]) -> BTreeMap<String, String> {
    references
        .iter()
        .filter_map(|r| {
            let desired = r.desired_config.as_ref()?;
            Some((
                config_key(&r.group_resource, &desired.referent),
                desired.spec_hash.clone(),
            ))
        })
        .collect()
}

/// The [`CONFIG_SPEC_HASH_ANNOTATION`] value for works rendered with `references` (Go's JSON of
/// [`config_spec_hashes`]), or None when there are no references (OCM then sets no annotation).
pub fn config_spec_hash_annotation(references: &[ConfigReference]) -> Result<Option<String>, GoJsonError> {
    if references.is_empty() {
        return Ok(None);
    }
    let map: serde_json::Map<String, Value> = config_spec_hashes(references)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    Ok(Some(go_json::to_string(&Value::Object(map))?))
}

/// The CMA's `status.defaultConfigReferences`: one entry per real default config, keeping the
/// spec hash already recorded for the same config and taking `observe`'s when it has one.
pub fn default_config_references(
    defaults: &[AddOnConfig],
    existing: &[DefaultConfigReference],
    observe: impl Fn(&ConfigGroupResource, &ConfigReferent) -> Option<ObservedConfig>,
) -> Vec<DefaultConfigReference> {
    defaults
        .iter()
        .filter(|c| is_real_default(c))
        .map(|config| {
            let recorded = existing
                .iter()
                .filter(|e| e.group_resource == config.group_resource)
                .filter_map(|e| e.desired_config.as_ref())
                .find(|d| d.referent == config.referent)
                .map(|d| d.spec_hash.clone())
                .unwrap_or_default();
            let spec_hash =
                observe(&config.group_resource, &config.referent).map_or(recorded, |o| o.spec_hash);
            DefaultConfigReference {
                group_resource: config.group_resource.clone(),
                desired_config: Some(ConfigSpecHash {
                    referent: config.referent.clone(),
                    spec_hash,
                }),
            }
        })
        .collect()
}

/// The CMA's `status.installProgressions`: one per install placement, with its configs (the
/// defaults overridden by the placement's configs) and their hashes. A progression whose
/// recorded configs cover all of the new ones keeps its `lastAppliedConfig`,
/// `lastKnownGoodConfig` and conditions; otherwise it starts afresh.
pub fn install_progressions(
    defaults: &[AddOnConfig],
    placements: &[PlacementStrategy],
    existing: &[InstallProgression],
    observe: impl Fn(&ConfigGroupResource, &ConfigReferent) -> Option<ObservedConfig>,
) -> Vec<InstallProgression> {
    placements
        .iter()
        .map(|strategy| {
            let desired = desired_configs(defaults, Some(&strategy.configs), &[]);
            let mut progression = InstallProgression {
                placement: strategy.placement.clone(),
                config_references: desired
                    .iter()
                    .map(|(gr, referent)| InstallConfigReference {
                        group_resource: gr.clone(),
                        desired_config: Some(ConfigSpecHash {
                            referent: referent.clone(),
                            spec_hash: observe(gr, referent).map(|o| o.spec_hash).unwrap_or_default(),
                        }),
                        last_known_good_config: None,
                        last_applied_config: None,
                    })
                    .collect(),
                conditions: Vec::new(),
            };
            let same = |a: &InstallConfigReference, b: &InstallConfigReference| {
                a.group_resource == b.group_resource
                    && a.desired_config.as_ref().map(|d| &d.referent)
                        == b.desired_config.as_ref().map(|d| &d.referent)
            };
            let previous = existing.iter().find(|old| {
                old.placement == progression.placement
                    && progression
                        .config_references
                        .iter()
                        .all(|new| old.config_references.iter().any(|o| same(o, new)))
            });
            if let Some(previous) = previous {
                for new in &mut progression.config_references {
                    if let Some(old) = previous.config_references.iter().find(|o| same(o, new)) {
                        if let (Some(new_desired), Some(old_desired)) =
                            (new.desired_config.as_mut(), &old.desired_config)
                            && new_desired.spec_hash.is_empty()
                        {
                            new_desired.spec_hash = old_desired.spec_hash.clone();
                        }
                        new.last_applied_config = old.last_applied_config.clone();
                        new.last_known_good_config = old.last_known_good_config.clone();
                    }
                }
                progression.conditions = previous.conditions.clone();
            }
            progression
        })
        .collect()
}

/// Whether an add-on's desired configs are its placement's, apart from the types its
/// `spec.configs` override (OCM counts only such add-ons as done or failed in the placement's
/// install progression). As in OCM, an overridden type must hold as many configs as
/// `overrides` lists for it, and every other type the same configs in the same order.
pub fn inherits_placement_configs(
    addon: &DesiredConfigs,
    placement: &DesiredConfigs,
    overrides: &[AddOnConfig],
) -> bool {
    let mut override_counts: BTreeMap<&ConfigGroupResource, usize> = BTreeMap::new();
    for config in overrides {
        *override_counts.entry(&config.group_resource).or_default() += 1;
    }
    let expected_types: std::collections::BTreeSet<&ConfigGroupResource> = placement
        .0
        .keys()
        .chain(override_counts.keys().copied())
        .collect();
    if addon.0.len() != expected_types.len() {
        return false;
    }
    expected_types.into_iter().all(|gr| {
        let Some(list) = addon.0.get(gr) else {
            return false;
        };
        match override_counts.get(gr) {
            Some(count) => list.len() == *count,
            None => placement.0.get(gr) == Some(list),
        }
    })
}

/// Per install placement (in `placements` order), the clusters where its configs apply: those
/// it selects that no later placement selects.
pub fn configured_clusters(
    selected: &[std::collections::BTreeSet<String>],
) -> Vec<std::collections::BTreeSet<String>> {
    selected
        .iter()
        .enumerate()
        .map(|(i, clusters)| {
            clusters
                .iter()
                .filter(|c| !selected[i + 1..].iter().any(|later| later.contains(*c)))
                .cloned()
                .collect()
        })
        .collect()
}

/// `reference` as a v1alpha1 (storage version) config reference, which repeats the desired config's
/// namespace and name inline, as OCM's conversion does.
pub fn config_reference_to_v1alpha1(reference: &ConfigReference) -> v1alpha1::ConfigReference {
    v1alpha1::ConfigReference {
        group_resource: reference.group_resource.clone(),
        referent: reference
            .desired_config
            .as_ref()
            .map(|d| d.referent.clone())
            .unwrap_or_default(),
        last_observed_generation: reference.last_observed_generation,
        desired_config: reference.desired_config.clone(),
        last_applied_config: reference.last_applied_config.clone(),
    }
}

/// A v1alpha1 config reference as v1beta1 (an old reference with only the inline namespace
/// and name takes them as its desired config, without hash).
pub fn config_reference_from_v1alpha1(reference: &v1alpha1::ConfigReference) -> ConfigReference {
    let desired = reference.desired_config.clone().or_else(|| {
        (!reference.referent.name.is_empty()).then(|| ConfigSpecHash {
            referent: reference.referent.clone(),
            spec_hash: String::new(),
        })
    });
    ConfigReference {
        group_resource: reference.group_resource.clone(),
        last_observed_generation: reference.last_observed_generation,
        desired_config: desired,
        last_applied_config: reference.last_applied_config.clone(),
    }
}

/// A v1beta1 install progression as v1alpha1 (same fields).
pub fn install_progression_to_v1alpha1(progression: &InstallProgression) -> v1alpha1::InstallProgression {
    v1alpha1::InstallProgression {
        placement: progression.placement.clone(),
        config_references: progression.config_references.clone(),
        conditions: progression.conditions.clone(),
    }
}

/// A v1alpha1 install progression as v1beta1 (same fields).
pub fn install_progression_from_v1alpha1(progression: &v1alpha1::InstallProgression) -> InstallProgression {
    InstallProgression {
        placement: progression.placement.clone(),
        config_references: progression.config_references.clone(),
        conditions: progression.conditions.clone(),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const ADC: (&str, &str) = ("addon.open-cluster-management.io", "addondeploymentconfigs");
    const CM: (&str, &str) = ("", "configmaps");

    fn gr(t: (&str, &str)) -> ConfigGroupResource {
        ConfigGroupResource {
            group: t.0.into(),
            resource: t.1.into(),
        }
    }

    fn cfg(t: (&str, &str), ns: &str, name: &str) -> AddOnConfig {
        AddOnConfig {
            group_resource: gr(t),
            referent: ConfigReferent {
                namespace: ns.into(),
                name: name.into(),
            },
        }
    }

    fn names(desired: &DesiredConfigs) -> Vec<String> {
        desired
            .iter()
            .map(|(gr, r)| format!("{}/{}/{}", gr.resource, r.namespace, r.name))
            .collect()
    }

    #[rstest]
    #[case::defaults_only(
        vec![cfg(ADC, "ns", "a"), cfg(CM, "ns", "c")], None, vec![],
        vec!["configmaps/ns/c", "addondeploymentconfigs/ns/a"]
    )]
    #[case::reserved_and_empty_defaults_are_skipped(
        vec![cfg(ADC, "", RESERVED_NO_DEFAULT_CONFIG_NAME), cfg(CM, "ns", "")], None, vec![],
        vec![]
    )]
    #[case::duplicate_defaults_count_once(
        vec![cfg(ADC, "ns", "a"), cfg(ADC, "ns", "a")], None, vec![],
        vec!["addondeploymentconfigs/ns/a"]
    )]
    #[case::placement_replaces_only_its_types(
        vec![cfg(ADC, "ns", "a"), cfg(CM, "ns", "c")], Some(vec![cfg(ADC, "p", "b")]), vec![],
        vec!["configmaps/ns/c", "addondeploymentconfigs/p/b"]
    )]
    #[case::an_empty_placement_list_keeps_defaults(
        vec![cfg(ADC, "ns", "a")], Some(vec![]), vec![],
        vec!["addondeploymentconfigs/ns/a"]
    )]
    #[case::cluster_overrides_placement(
        vec![cfg(ADC, "ns", "a")], Some(vec![cfg(ADC, "p", "b")]), vec![cfg(ADC, "c", "x"), cfg(ADC, "c", "y")],
        vec!["addondeploymentconfigs/c/x", "addondeploymentconfigs/c/y"]
    )]
    #[case::duplicates_in_an_override_are_dropped(
        vec![], None, vec![cfg(ADC, "c", "x"), cfg(CM, "c", "m"), cfg(ADC, "c", "x")],
        vec!["configmaps/c/m", "addondeploymentconfigs/c/x"]
    )]
    #[case::cluster_adds_a_type_without_default(
        vec![cfg(ADC, "ns", "a")], None, vec![cfg(CM, "c", "m")],
        vec!["configmaps/c/m", "addondeploymentconfigs/ns/a"]
    )]
    fn desired_configs_follow_ocm_precedence(
        #[case] defaults: Vec<AddOnConfig>,
        #[case] placement: Option<Vec<AddOnConfig>>,
        #[case] cluster: Vec<AddOnConfig>,
        #[case] expected: Vec<&str>,
    ) {
        let desired = desired_configs(&defaults, placement.as_deref(), &cluster);
        assert_eq!(names(&desired), expected);
    }

    fn strategy(name: &str, configs: Vec<AddOnConfig>) -> PlacementStrategy {
        PlacementStrategy {
            placement: PlacementRef {
                namespace: "default".into(),
                name: name.into(),
            },
            configs,
            ..Default::default()
        }
    }

    #[rstest]
    #[case::in_both_the_later_wins(&["p1", "p2"], Some("p2"))]
    #[case::only_the_first(&["p1"], Some("p1"))]
    #[case::in_none(&[], None)]
    fn a_cluster_in_several_placements_takes_the_last(
        #[case] selecting: &[&str],
        #[case] expected: Option<&str>,
    ) {
        let placements = vec![strategy("p1", vec![]), strategy("p2", vec![])];
        let owner = owning_placement(&placements, |p| selecting.contains(&p.name.as_str()));
        assert_eq!(owner.map(|p| p.placement.name.as_str()), expected);
    }

    #[rstest]
    #[case::all_supported(vec![cfg(ADC, "a", "b")], None)]
    #[case::one_unsupported(vec![cfg(ADC, "a", "b"), cfg(CM, "a", "b")], Some(gr(CM)))]
    #[case::none(vec![], None)]
    fn unsupported_config_types_are_found(
        #[case] configs: Vec<AddOnConfig>,
        #[case] expected: Option<ConfigGroupResource>,
    ) {
        assert_eq!(first_unsupported(&configs, &[gr(ADC)]).cloned(), expected);
    }

    #[rstest]
    #[case::namespaced(
        ADC,
        "open-cluster-management",
        "default",
        "addondeploymentconfigs.addon.open-cluster-management.io/open-cluster-management/default"
    )]
    #[case::cluster_scoped(("addon.open-cluster-management.io", "addonhubconfigs"), "", "default",
        "addonhubconfigs.addon.open-cluster-management.io//default")]
    #[case::core_group(CM, "ns", "cm", "configmaps/ns/cm")]
    fn config_keys_use_ocm_format(
        #[case] t: (&str, &str),
        #[case] ns: &str,
        #[case] name: &str,
        #[case] key: &str,
    ) {
        let c = cfg(t, ns, name);
        assert_eq!(config_key(&c.group_resource, &c.referent), key);
    }

    fn observed(hash: &str) -> Option<ObservedConfig> {
        Some(ObservedConfig {
            spec_hash: hash.into(),
            generation: 3,
        })
    }

    #[test]
    fn the_annotation_is_sorted_go_json_of_desired_hashes() {
        let desired = desired_configs(&[cfg(ADC, "ns", "a"), cfg(CM, "ns", "<c>")], None, &[]);
        let resolved = resolve(&desired, |gr, _| {
            observed(if gr.group.is_empty() { "h2" } else { "h1" })
        });
        assert_eq!(
            config_spec_hash_annotation(&resolved.references)
                .unwrap()
                .unwrap(),
            r#"{"addondeploymentconfigs.addon.open-cluster-management.io/ns/a":"h1","configmaps/ns/\u003cc\u003e":"h2"}"#
        );
        assert_eq!(config_spec_hash_annotation(&[]).unwrap(), None);
    }

    #[test]
    fn missing_configs_are_listed_and_keep_an_empty_hash() {
        let desired = desired_configs(&[cfg(ADC, "ns", "a"), cfg(CM, "ns", "gone")], None, &[]);
        let resolved = resolve(
            &desired,
            |gr, _| if gr.group.is_empty() { None } else { observed("h") },
        );
        assert_eq!(resolved.missing, vec![cfg(CM, "ns", "gone")]);
        let gone = &resolved.references[0];
        assert_eq!(gone.desired_config.as_ref().unwrap().spec_hash, "");
        assert_eq!(gone.last_observed_generation, 0);
        assert_eq!(resolved.references[1].last_observed_generation, 3);
        assert_eq!(
            missing_configs_message(&resolved.missing),
            "configs not found: configmaps/ns/gone"
        );
    }

    fn reference(t: (&str, &str), name: &str, desired: &str, applied: Option<&str>) -> ConfigReference {
        let hash = |h: &str| ConfigSpecHash {
            referent: ConfigReferent {
                namespace: "ns".into(),
                name: name.into(),
            },
            spec_hash: h.into(),
        };
        ConfigReference {
            group_resource: gr(t),
            last_observed_generation: 1,
            desired_config: Some(hash(desired)),
            last_applied_config: applied.map(hash),
        }
    }

    #[test]
    fn merging_keeps_last_applied_and_drops_configs_no_longer_desired() {
        let existing = vec![
            reference(ADC, "a", "old", Some("old")),
            reference(ADC, "gone", "x", Some("x")),
        ];
        let desired = vec![reference(CM, "m", "m1", None), reference(ADC, "a", "new", None)];
        let merged = merge_config_references(&existing, &desired);
        assert_eq!(
            merged,
            vec![
                reference(CM, "m", "m1", None),
                reference(ADC, "a", "new", Some("old"))
            ]
        );
    }

    #[test]
    fn default_config_references_skip_placeholders_and_keep_known_hashes() {
        let defaults = vec![cfg(ADC, "ns", "a"), cfg(CM, "", RESERVED_NO_DEFAULT_CONFIG_NAME)];
        let existing = vec![DefaultConfigReference {
            group_resource: gr(ADC),
            desired_config: Some(ConfigSpecHash {
                referent: cfg(ADC, "ns", "a").referent,
                spec_hash: "known".into(),
            }),
        }];
        let refs = default_config_references(&defaults, &existing, |_, _| None);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].desired_config.as_ref().unwrap().spec_hash, "known");
        let refs = default_config_references(&defaults, &existing, |_, _| observed("fresh"));
        assert_eq!(refs[0].desired_config.as_ref().unwrap().spec_hash, "fresh");
    }

    #[test]
    fn install_progressions_keep_history_only_while_their_configs_are_the_same() {
        let placements = vec![strategy("p1", vec![cfg(ADC, "p", "b")])];
        let first = install_progressions(&[cfg(ADC, "ns", "a")], &placements, &[], |_, _| observed("h"));
        assert_eq!(first.len(), 1);
        let refs = &first[0].config_references;
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].desired_config.as_ref().unwrap().referent.name, "b");

        let mut recorded = first.clone();
        recorded[0].config_references[0].last_applied_config =
            recorded[0].config_references[0].desired_config.clone();
        let again = install_progressions(&[cfg(ADC, "ns", "a")], &placements, &recorded, |_, _| {
            observed("h")
        });
        assert!(again[0].config_references[0].last_applied_config.is_some());

        let changed = vec![strategy("p1", vec![cfg(ADC, "p", "other")])];
        let fresh = install_progressions(&[], &changed, &recorded, |_, _| observed("h"));
        assert!(fresh[0].config_references[0].last_applied_config.is_none());
    }

    #[rstest]
    #[case::same_configs(vec![cfg(ADC, "p", "b")], vec![], vec![cfg(ADC, "p", "b")], true)]
    #[case::other_inherited_config(vec![cfg(ADC, "p", "b")], vec![], vec![cfg(ADC, "x", "y")], false)]
    #[case::overridden_type_is_not_compared(vec![cfg(ADC, "p", "b")], vec![cfg(ADC, "c", "z")], vec![cfg(ADC, "c", "z")], true)]
    #[case::override_adds_a_type(vec![cfg(ADC, "p", "b")], vec![cfg(CM, "c", "m")], vec![cfg(ADC, "p", "b"), cfg(CM, "c", "m")], true)]
    #[case::duplicate_overrides_count_twice(vec![], vec![cfg(CM, "c", "m"), cfg(CM, "c", "m")], vec![cfg(CM, "c", "m")], false)]
    fn add_ons_inherit_placement_configs_unless_they_differ(
        #[case] placement: Vec<AddOnConfig>,
        #[case] overrides: Vec<AddOnConfig>,
        #[case] addon: Vec<AddOnConfig>,
        #[case] inherits: bool,
    ) {
        let placement = desired_configs(&[], Some(&placement), &[]);
        let addon = desired_configs(&[], Some(&addon), &[]);
        assert_eq!(
            inherits_placement_configs(&addon, &placement, &overrides),
            inherits
        );
    }

    #[test]
    fn later_placements_take_configured_clusters_from_earlier_ones() {
        let sets = vec![
            ["c1", "c2"].iter().map(|s| s.to_string()).collect(),
            ["c2", "c3"].iter().map(|s| s.to_string()).collect(),
        ];
        let configured = configured_clusters(&sets);
        assert_eq!(configured[0].iter().collect::<Vec<_>>(), vec!["c1"]);
        assert_eq!(configured[1].len(), 2);
    }

    #[test]
    fn config_references_convert_between_versions() {
        let beta = reference(ADC, "a", "h", Some("h"));
        let alpha = config_reference_to_v1alpha1(&beta);
        assert_eq!(alpha.referent.name, "a");
        assert_eq!(config_reference_from_v1alpha1(&alpha), beta);
        let old = v1alpha1::ConfigReference {
            referent: cfg(ADC, "ns", "legacy").referent,
            ..Default::default()
        };
        let converted = config_reference_from_v1alpha1(&old);
        assert_eq!(converted.desired_config.unwrap().referent.name, "legacy");
    }
}
