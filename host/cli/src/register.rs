//! `flotilla plugin register NAME --oci REF | --configmap NS/NAME`: the one custom resource a hub
//! admin writes to add an add-on. The hub's plugin controller loads the component and the add-on
//! manager creates the ClusterManagementAddOn once the plugin is Ready.

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// The plugin's name, and the add-on it drives unless `--addon-name` says otherwise.
    pub name: String,
    /// An OCI reference of the component (`registry/repository:tag` or `@sha256:…`).
    #[arg(long, conflicts_with = "configmap", required_unless_present = "configmap")]
    pub oci: Option<String>,
    /// A ConfigMap holding the component, `NAMESPACE/NAME`.
    #[arg(long)]
    pub configmap: Option<String>,
    /// The ConfigMap's key (binaryData) with the component.
    #[arg(long, default_value = "plugin.wasm", requires = "configmap")]
    pub key: String,
    /// Pin the component's bytes: `sha256:<hex>`; other bytes are refused.
    #[arg(long)]
    pub digest: Option<String>,
    /// The add-on the plugin drives (default: the plugin's name).
    #[arg(long)]
    pub addon_name: Option<String>,
    /// Pull from the registry over plain HTTP.
    #[arg(long, requires = "oci")]
    pub insecure: bool,
}

pub async fn register(global: &GlobalArgs, args: &RegisterArgs) -> anyhow::Result<()> {
    if let Some(digest) = &args.digest
        && !digest
            .strip_prefix("sha256:")
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        bail!("--digest {digest:?}: use sha256:<64 hex digits>, as `flotilla plugin inspect` prints it");
    }
    let source = match (&args.oci, &args.configmap) {
        (Some(reference), None) => json!({ "oci": { "reference": reference, "insecure": args.insecure } }),
        (None, Some(configmap)) => {
            let Some((namespace, name)) = configmap
                .split_once('/')
                .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
            else {
                bail!("--configmap {configmap:?}: use NAMESPACE/NAME");
            };
            json!({ "configMap": { "namespace": namespace, "name": name, "key": args.key } })
        }
        _ => bail!("give exactly one of --oci or --configmap"),
    };
    let mut spec = json!({ "addOnName": args.addon_name.as_deref().unwrap_or(&args.name), "source": source });
    if let Some(digest) = &args.digest {
        spec["digest"] = json!(digest);
    }
    let plugin: AddOnPlugin = serde_json::from_value(json!({
        "apiVersion": "plugins.flotilla.dev/v1alpha1", "kind": "AddOnPlugin",
        "metadata": { "name": args.name }, "spec": spec,
    }))
    .context("build the AddOnPlugin")?;
    let (hub, _) = client(global).await.context("connect to the hub")?;
    Api::<AddOnPlugin>::all(hub)
        .patch(
            &args.name,
            &PatchParams::apply(flotilla_kube::FIELD_MANAGER).force(),
            &Patch::Apply(&plugin),
        )
        .await
        .with_context(|| format!("register plugin {:?}", args.name))?;
    eprintln!(
        "plugin {:?} registered; watch it become Ready with `kubectl get addonplugins {}`",
        args.name, args.name
    );
    Ok(())
}
