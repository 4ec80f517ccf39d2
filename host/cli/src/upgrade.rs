//! `flotilla upgrade hub|klusterlet --image IMG`: roll the hub's or the klusterlet's Deployment
//! to another image, as clusteradm upgrade does for the cluster manager and the klusterlet.
//!
//! The Deployments are the ones `flotilla init --image` and `flotilla join --image` install
//! (deploy/hub and deploy/klusterlet; their names are read from those files, so the two cannot
//! drift). Only the image of each container changes; the rollout is the Deployment's own.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use flotilla_registration::names;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client, manifests::parse_yaml_stream};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Roll the hub's Deployment (`flotilla init --image`) to another image.
    Hub(HubArgs),
    /// Roll the klusterlet's Deployment (`flotilla join --image`) to another image; run it
    /// against the managed cluster.
    Klusterlet(KlusterletArgs),
}

#[derive(Debug, Args)]
pub struct HubArgs {
    /// The new image of `flotilla hub`.
    #[arg(long)]
    pub image: String,
}

#[derive(Debug, Args)]
pub struct KlusterletArgs {
    /// The new image of `flotilla klusterlet`.
    #[arg(long)]
    pub image: String,
    /// The agent namespace the klusterlet was joined with.
    #[arg(long, default_value = names::AGENT_NAMESPACE)]
    pub agent_namespace: String,
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Hub(args) => {
                let (name, namespace) = deployment_of(crate::init::HUB_MANIFESTS)?;
                let namespace = namespace.context("deploy/hub's Deployment has no namespace")?;
                let installs = "`flotilla init --image IMG` installs it";
                upgrade(global, &namespace, &name, &args.image, installs).await
            }
            Command::Klusterlet(args) => {
                let (name, _) = deployment_of(crate::join::KLUSTERLET_MANIFESTS)?;
                let installs =
                    "`flotilla join --image IMG` installs it (is --agent-namespace the one joined with?)";
                upgrade(global, &args.agent_namespace, &name, &args.image, installs).await
            }
        }
    }
}

/// The name and namespace of the one Deployment in `manifests`.
fn deployment_of(manifests: &str) -> anyhow::Result<(String, Option<String>)> {
    let objects = parse_yaml_stream(manifests).context("read the install manifests")?;
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .context("the install manifests hold no Deployment")?;
    let name = deployment["metadata"]["name"]
        .as_str()
        .context("the Deployment has no name")?;
    let namespace = deployment["metadata"]["namespace"].as_str().map(str::to_owned);
    Ok((name.to_owned(), namespace))
}

/// Sets `image` on every container of Deployment `namespace/name`.
async fn upgrade(
    global: &GlobalArgs,
    namespace: &str,
    name: &str,
    image: &str,
    installs: &str,
) -> anyhow::Result<()> {
    let (cluster, _) = client(global).await?;
    let deployments: Api<Deployment> = Api::namespaced(cluster, namespace);
    let Some(deployment) = deployments
        .get_opt(name)
        .await
        .with_context(|| format!("read Deployment {namespace}/{name}"))?
    else {
        bail!("no Deployment {namespace}/{name} on this cluster to upgrade; {installs}");
    };
    let containers = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let old: Vec<String> = containers.iter().filter_map(|c| c.image.clone()).collect();
    if !containers.is_empty() && old.iter().all(|i| i == image) && old.len() == containers.len() {
        println!("Deployment {namespace}/{name} already runs {image}");
        return Ok(());
    }
    // Containers are merged by name: only their images change.
    let patch = json!({"spec": {"template": {"spec": {"containers": containers
        .iter()
        .map(|c| json!({"name": c.name, "image": image}))
        .collect::<Vec<_>>()}}}});
    deployments
        .patch(
            name,
            &PatchParams {
                field_manager: Some(flotilla_kube::FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Strategic(&patch),
        )
        .await
        .with_context(|| format!("set the image of Deployment {namespace}/{name}"))?;
    println!(
        "Deployment {namespace}/{name} upgraded from {} to {image}; its pods roll over as its strategy allows",
        old.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployments_come_from_the_install_manifests() {
        let (hub, namespace) = deployment_of(crate::init::HUB_MANIFESTS).unwrap();
        assert_eq!(
            (hub.as_str(), namespace.as_deref()),
            ("flotilla-hub", Some(names::HUB_NAMESPACE))
        );
        let (klusterlet, _) = deployment_of(crate::join::KLUSTERLET_MANIFESTS).unwrap();
        assert_eq!(klusterlet, "klusterlet");
    }
}
