//! The order manifests are applied in: OCM's rank by kind, stable within a rank, so that a
//! Namespace or CRD exists before the objects that live in it or are of it, RBAC before the
//! workloads that use it, and webhooks last (they may need the workloads behind them).

/// Rank of kinds OCM does not list.
pub const UNLISTED_RANK: u32 = 1000;
/// Rank of manifests whose kind could not be read (applied last; they fail anyway).
pub const UNREADABLE_RANK: u32 = 1001;

/// Apply rank of `kind` (`None` for a manifest that is not an object with a kind).
pub fn kind_rank(kind: Option<&str>) -> u32 {
    let Some(kind) = kind else {
        return UNREADABLE_RANK;
    };
    match kind {
        "PriorityClass"
        | "Namespace"
        | "CustomResourceDefinition"
        | "StorageClass"
        | "PersistentVolume"
        | "PodSecurityPolicy" => 0,
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => 1,
        "NetworkPolicy" | "ResourceQuota" | "LimitRange" | "PodDisruptionBudget" | "ServiceAccount" => 2,
        "Secret" | "ConfigMap" | "PersistentVolumeClaim" => 3,
        "Service" => 4,
        "DaemonSet"
        | "Pod"
        | "ReplicationController"
        | "ReplicaSet"
        | "Deployment"
        | "HorizontalPodAutoscaler"
        | "StatefulSet"
        | "Job"
        | "CronJob" => 5,
        "APIService"
        | "MutatingWebhookConfiguration"
        | "ValidatingWebhookConfiguration"
        | "ValidatingAdmissionPolicy"
        | "ValidatingAdmissionPolicyBinding" => 6,
        _ => UNLISTED_RANK,
    }
}

/// Indexes of `kinds` (one per manifest, in spec order) in apply order.
pub fn apply_order(kinds: &[Option<&str>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..kinds.len()).collect();
    // `sort_by_key` is stable: manifests of one rank keep their spec order.
    order.sort_by_key(|&i| kind_rank(kinds[i]));
    order
}

/// [`apply_order`] cut into waves of one rank each: the manifests of a wave do not depend on
/// each other (OCM's ranks put every dependency in an earlier rank), so a wave may be applied
/// concurrently, while waves follow each other. Empty input gives no waves.
pub fn apply_waves(kinds: &[Option<&str>]) -> Vec<Vec<usize>> {
    let mut waves: Vec<Vec<usize>> = Vec::new();
    let mut current_rank = None;
    for index in apply_order(kinds) {
        let rank = kind_rank(kinds[index]);
        match waves.last_mut() {
            Some(wave) if current_rank == Some(rank) => wave.push(index),
            _ => waves.push(vec![index]),
        }
        current_rank = Some(rank);
    }
    waves
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::namespace("Namespace", 0)]
    #[case::crd("CustomResourceDefinition", 0)]
    #[case::role_binding("RoleBinding", 1)]
    #[case::service_account("ServiceAccount", 2)]
    #[case::config_map("ConfigMap", 3)]
    #[case::service("Service", 4)]
    #[case::deployment("Deployment", 5)]
    #[case::admission_policy_binding("ValidatingAdmissionPolicyBinding", 6)]
    #[case::custom_resource("Widget", 1000)]
    fn each_kind_has_ocms_rank(#[case] kind: &str, #[case] rank: u32) {
        assert_eq!(kind_rank(Some(kind)), rank);
    }

    #[test]
    fn the_issue_s_work_lands_namespace_and_crd_first_and_custom_resources_last() {
        let kinds = [
            Some("Deployment"),
            Some("Widget"),
            Some("ConfigMap"),
            Some("ServiceAccount"),
            Some("CustomResourceDefinition"),
            Some("Namespace"),
        ];
        assert_eq!(apply_order(&kinds), vec![4, 5, 3, 2, 0, 1]);
    }

    #[test]
    fn manifests_of_one_rank_keep_spec_order_and_unreadable_ones_go_last() {
        let kinds = [
            None,
            Some("Secret"),
            Some("Widget"),
            Some("ConfigMap"),
            Some("Gadget"),
        ];
        assert_eq!(apply_order(&kinds), vec![1, 3, 2, 4, 0]);
    }

    #[rstest]
    #[case::empty(&[], vec![])]
    #[case::one_rank_is_one_wave(&[Some("ConfigMap"), Some("Secret")], vec![vec![0, 1]])]
    #[case::ranks_follow_each_other(
        &[Some("Deployment"), Some("ConfigMap"), Some("Namespace"), Some("Secret")],
        vec![vec![2], vec![1, 3], vec![0]]
    )]
    #[case::custom_resources_after_their_crd(
        &[Some("Widget"), Some("CustomResourceDefinition"), Some("Gadget"), None],
        vec![vec![1], vec![0, 2], vec![3]]
    )]
    fn waves_group_one_rank_in_spec_order(#[case] kinds: &[Option<&str>], #[case] expected: Vec<Vec<usize>>) {
        assert_eq!(apply_waves(kinds), expected);
    }
}
