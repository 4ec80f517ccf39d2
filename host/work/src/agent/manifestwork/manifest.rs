//! How one manifest of a work is matched with what else the work says about it: its
//! `manifestConfigs` entry, its entry in the work's status, and the object a watch follows.
//! The apply and the status steps both need these, and must agree on them.

use flotilla_api::work::v1::{FeedbackScrapeType, ManifestConfigOption, ManifestResourceMeta};
use flotilla_core::work::agent::watch::{WatchedKind, WatchedObject};

/// Whether `a` and `b` are the same manifest of a work (its status entry for it).
pub(super) fn same_manifest(a: &ManifestResourceMeta, b: &ManifestResourceMeta) -> bool {
    a.group == b.group
        && a.kind == b.kind
        && a.name == b.name
        && a.namespace == b.namespace
        && a.ordinal == b.ordinal
}

/// The `manifestConfigs` entry of the manifest `meta`, if the work has one.
pub(super) fn find_config<'a>(
    configs: &'a [ManifestConfigOption],
    meta: &ManifestResourceMeta,
) -> Option<&'a ManifestConfigOption> {
    configs.iter().find(|c| {
        let id = &c.resource_identifier;
        id.group == meta.group
            && id.resource == meta.resource
            && id.name == meta.name
            && id.namespace == meta.namespace
    })
}

/// Whether `config` asks for its status (feedback or condition rules) to be watched.
pub(super) fn watches_feedback(config: Option<&ManifestConfigOption>) -> bool {
    config.is_some_and(|c| {
        c.feedback_scrape_type == Some(FeedbackScrapeType::Watch)
            && (!c.feedback_rules.is_empty() || !c.condition_rules.is_empty())
    })
}

/// The object of manifest `meta` as the on-demand watches name it.
pub(super) fn watched_object(meta: &ManifestResourceMeta) -> WatchedObject {
    WatchedObject {
        kind: WatchedKind {
            group: meta.group.clone(),
            version: meta.version.clone(),
            resource: meta.resource.clone(),
            namespaced: !meta.namespace.is_empty(),
        },
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    }
}
