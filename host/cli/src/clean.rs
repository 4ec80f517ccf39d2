//! `flotilla clean`: remove the hub's Flotilla install — what `flotilla init` created and, with
//! `--image`, deploy/hub — as clusteradm clean removes the cluster manager from a hub.
//!
//! Like clusteradm, it refuses while ManagedClusters exist (their agents would lose the hub
//! under them), unless `--force`. The objects are [`crate::init::installed_objects`], deleted in
//! the reverse order `init` applies them: the hub's Deployment and RBAC first, the CRDs (and
//! with them every object of their kinds) last. `kube-public/cluster-info` is deleted only when
//! Flotilla published it (kubeadm publishes one of its own), and the bootstrap tokens are the
//! ones labelled as Flotilla's.

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::cluster::v1::ManagedCluster;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
};

use crate::{cli::GlobalArgs, kube::client, manifests::Applier};

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Remove the install even though ManagedClusters still exist (their agents lose the hub).
    #[arg(long)]
    pub force: bool,
}

pub async fn clean(global: &GlobalArgs, args: &CleanArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let clusters = match Api::<ManagedCluster>::all(hub.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items.iter().map(ResourceExt::name_any).collect(),
        // No ManagedCluster kind: no clusters (or nothing installed).
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => return Err(error).context("list ManagedClusters"),
    };
    if !clusters.is_empty() && !args.force {
        bail!(
            "{} managed cluster(s) still joined to this hub ({}); unjoin them first \
             (`flotilla unjoin` on each cluster), or pass --force to remove the hub anyway",
            clusters.len(),
            clusters.join(", ")
        );
    }

    let mut objects = crate::init::installed_objects()?;
    objects.reverse();
    let (crds, rest): (Vec<_>, Vec<_>) = objects
        .into_iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    let mut applier = Applier::new(hub.clone());
    let mut deleted = 0usize;
    for object in &rest {
        // Objects of Flotilla's own kinds go with their CRDs.
        let own_kind = crds
            .iter()
            .any(|crd| crd["spec"]["names"]["kind"] == object["kind"]);
        if own_kind || (object["kind"] == "ConfigMap" && !cluster_info_is_ours(&hub).await?) {
            continue;
        }
        deleted += usize::from(applier.delete_if_present(object).await?);
    }
    let secrets: Api<Secret> = Api::namespaced(hub.clone(), "kube-system");
    for token in secrets
        .list(&ListParams::default().labels(&crate::init::managed_by_selector()))
        .await
        .context("list Flotilla's bootstrap tokens")?
        .items
    {
        deleted += usize::from(delete(&secrets, &token.name_any()).await?);
    }
    for crd in &crds {
        deleted += usize::from(applier.delete_if_present(crd).await?);
    }
    if deleted == 0 {
        println!("nothing to remove: no Flotilla install on this hub");
    } else {
        println!("the hub's Flotilla install is removed ({deleted} objects deleted)");
    }
    Ok(())
}

/// Whether `kube-public/cluster-info` is the one `init` published: written by Flotilla, and
/// otherwise only signed (the controller manager's bootstrap signer adds a
/// `jws-kubeconfig-<token id>` key per token). kubeadm's own has writers of its own.
async fn cluster_info_is_ours(hub: &kube::Client) -> anyhow::Result<bool> {
    let info = Api::<ConfigMap>::namespaced(hub.clone(), "kube-public")
        .get_opt("cluster-info")
        .await
        .context("read kube-public/cluster-info")?;
    Ok(info.is_some_and(|info| {
        info.managed_fields().iter().all(|entry| {
            entry.manager.as_deref() == Some(flotilla_kube::FIELD_MANAGER)
                || entry
                    .fields_v1
                    .as_ref()
                    .is_some_and(|fields| only_signatures(&fields.0))
        })
    }))
}

/// Whether managed fields `fields` (FieldsV1) are bootstrap-token signatures alone.
fn only_signatures(fields: &serde_json::Value) -> bool {
    let Some(top) = fields.as_object() else {
        return false;
    };
    top.iter().all(|(key, value)| {
        key == "f:data"
            && value
                .as_object()
                .is_some_and(|data| data.keys().all(|k| k.starts_with("f:jws-kubeconfig-")))
    })
}

/// Deletes `name`; returns whether it was there.
async fn delete<K>(api: &Api<K>, name: &str) -> anyhow::Result<bool>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error).with_context(|| format!("delete {name}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::only_signatures;

    #[test]
    fn only_the_bootstrap_signers_keys_are_signatures() {
        assert!(only_signatures(
            &json!({"f:data": {"f:jws-kubeconfig-abc123": {}}})
        ));
        assert!(!only_signatures(&json!({"f:data": {"f:kubeconfig": {}}})));
        assert!(!only_signatures(&json!({"f:metadata": {"f:labels": {}}})));
    }
}
