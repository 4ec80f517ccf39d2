//! Whether the work agent may start evicting an AppliedManifestWork whose ManifestWork is gone
//! from the hub, or must hold it because the hub looks restored from an older backup.
//!
//! A hub restored from a backup has lost every work created after the backup, and would have
//! every cluster delete what those works applied once the eviction grace ran out. A restored
//! hub's state is older than what the agent saw: its resourceVersions (etcd revisions, which
//! the apiserver itself compares as integers) start again from the backup's. Each record keeps
//! the hub's resourceVersion of its work when it was made ([`HUB_RESOURCE_VERSION_ANNOTATION`]);
//! if the hub's current one is lower, the record is held ([`EVICTION_HELD_ANNOTATION`]):
//! never evicted by the agent, until the work comes back or an admin deletes the record.
//! What cannot be compared holds too: a resourceVersion that is not a number is refused, not
//! skipped.
//!
//! ```text
//!  work gone ─▶ record made at rv R, hub now at rv H:  H < R or unparsable ─▶ held (Event)
//!                                                     H ≥ R or no R        ─▶ grace, then evict
//! ```

/// On an AppliedManifestWork: the hub's resourceVersion of its ManifestWork when the agent made
/// the record (a Flotilla extension).
pub const HUB_RESOURCE_VERSION_ANNOTATION: &str = "flotilla.dev/hub-resource-version";

/// On an AppliedManifestWork: the uid of its ManifestWork on the hub (a Flotilla extension).
/// Records are named by the hash of the hub's URL; when the same hub is reached under another
/// URL, a record of the old name whose work uid the agent sees on the hub is the same work's,
/// superseded by the record under the new name rather than another hub's.
pub const MANIFEST_WORK_UID_ANNOTATION: &str = "flotilla.dev/manifestwork-uid";

/// On an AppliedManifestWork: set by the agent when it holds the record's eviction, with why
/// (a Flotilla extension).
pub const EVICTION_HELD_ANNOTATION: &str = "flotilla.dev/eviction-held";

/// Why the eviction of a record made at hub resourceVersion `recorded` must be held now that
/// the hub is at `current`, or `None` when it may go ahead. Records without `recorded` (made
/// before the annotation existed) are evicted as before.
pub fn hold(recorded: Option<&str>, current: &str) -> Option<String> {
    let recorded = recorded?;
    match (recorded.parse::<u64>(), current.parse::<u64>()) {
        (Ok(recorded), Ok(current)) if current >= recorded => None,
        (Ok(recorded), Ok(current)) => Some(format!(
            "the hub's state (resourceVersion {current}) is older than this record (made at \
             {recorded}): the hub looks restored from a backup"
        )),
        _ => Some(format!(
            "the hub's resourceVersion {current:?} cannot be compared with this record's \
             {recorded:?}"
        )),
    }
}

/// Whether the hub, now at list resourceVersion `current`, is older than objects the agent has
/// already seen from it (`seen`): restored from a backup, so the agent's watch, which waits for
/// a resourceVersion the hub has not reached, must list afresh. What does not parse says
/// nothing either way.
pub fn hub_went_back<'a>(seen: impl IntoIterator<Item = &'a str>, current: &str) -> bool {
    let Ok(current) = current.parse::<u64>() else {
        return false;
    };
    seen.into_iter()
        .filter_map(|version| version.parse::<u64>().ok())
        .any(|version| version > current)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn a_hub_older_than_what_was_seen_went_back() {
        assert!(hub_went_back(["10", "600", "x"], "300"));
        assert!(!hub_went_back(["10", "300"], "300"));
        assert!(!hub_went_back(["600"], "not a number"));
        assert!(!hub_went_back([], "1"));
    }

    #[rstest]
    #[case::no_record(None, "5", false)]
    #[case::hub_moved_on(Some("100"), "250", false)]
    #[case::same(Some("100"), "100", false)]
    #[case::hub_went_back(Some("100"), "40", true)]
    #[case::hub_unparsable(Some("100"), "abc", true)]
    #[case::record_unparsable(Some("x1"), "100", true)]
    #[case::hub_empty(Some("100"), "", true)]
    fn a_record_newer_than_the_hub_or_not_comparable_is_held(
        #[case] recorded: Option<&str>,
        #[case] current: &str,
        #[case] held: bool,
    ) {
        assert_eq!(
            hold(recorded, current).is_some(),
            held,
            "{:?}",
            hold(recorded, current)
        );
    }
}
