//! `flotilla init` and `flotilla get token`: prepare a hub and print the command that joins a
//! cluster to it.
//!
//! A hub gets the CRDs, the registration ClusterRoles, a bootstrap identity (a bootstrap token
//! in group `system:bootstrappers:managedcluster`, and the `agent-registration-bootstrap`
//! service account), the admission policies and the `default`/`global` cluster sets. It also
//! publishes `kube-public/cluster-info` — the server and CA that the controller manager's
//! bootstrap signer signs with each token — so `flotilla join` can learn the hub's CA from the
//! token alone and verify it, as kubeadm's discovery does.
//!
//! One list, [`hub_manifests`], is both what `init` applies and what `init --dry-run` prints
//! for GitOps; `--image` adds deploy/hub (embedded, so the kustomize base and `init` cannot
//! drift; the CRDs are generated from flotilla-api, as deploy/crds is, which CI checks).

use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use clap::Args;
use flotilla_api::cluster::consts as cluster_consts;
use flotilla_registration::names;
use k8s_openapi::{
    api::core::v1::Secret, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use crate::{
    cli::GlobalArgs,
    kube::client,
    manifests::{Applier, ManifestFormat, parse_yaml_stream, print_manifests},
};

/// Label on the bootstrap tokens Flotilla creates.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flotilla");
/// Binding of the bootstrap identities to the bootstrap ClusterRole.
const BOOTSTRAP_BINDING: &str = "open-cluster-management:bootstrap";
/// The hub's own manifests (namespace, service account, ClusterRole and binding, Deployment,
/// metrics Service): what `init --image` installs, from the same file a kustomize install uses.
pub(crate) const HUB_MANIFESTS: &str = include_str!("../../../deploy/hub/hub.yaml");

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The hub apiserver URL managed clusters reach (default: the kubeconfig's server).
    #[arg(long)]
    pub hub_apiserver: Option<String>,
    /// A PEM file with the hub's CA, published for join discovery (default: the kubeconfig's).
    #[arg(long)]
    pub hub_ca_file: Option<PathBuf>,
    /// Also run `flotilla hub` in the hub cluster: install deploy/hub (service account,
    /// ClusterRole, Deployment, metrics Service) with this image. Without it no Deployment is
    /// installed and `flotilla hub` runs elsewhere.
    #[arg(long)]
    pub image: Option<String>,
    /// Print what would be created on the hub instead of creating it (for GitOps); the hub is
    /// not contacted (its server and CA come from the flags or the kubeconfig file), and the
    /// printed bootstrap token is a new one.
    #[arg(long)]
    pub dry_run: bool,
    /// The format of `--dry-run`'s output.
    #[arg(short = 'o', long, value_enum, default_value_t = ManifestFormat::Yaml, requires = "dry_run")]
    pub output: ManifestFormat,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The hub apiserver URL managed clusters reach (default: the kubeconfig's server).
    #[arg(long)]
    pub hub_apiserver: Option<String>,
    /// Output format: the join command (table), or the token, server and command as an object.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: crate::output::Format,
}

/// What the hub's manifests are made for.
#[derive(Debug)]
struct Hub<'a> {
    /// The apiserver URL managed clusters reach.
    server: &'a str,
    /// The hub's CA (PEM), published in `kube-public/cluster-info`.
    ca_pem: &'a str,
    /// The bootstrap token, `<id>.<secret>`.
    token: &'a str,
    /// The image of the hub Deployment, if `init` installs one.
    image: Option<&'a str>,
}

pub async fn init(global: &GlobalArgs, args: &InitArgs) -> anyhow::Result<()> {
    if args.dry_run {
        let (server, ca_pem) = server_and_ca_offline(global, args).await?;
        let token = format!("{}.{}", random_token_part(6)?, random_token_part(16)?);
        let objects = hub_manifests(&Hub {
            server: &server,
            ca_pem: &ca_pem,
            token: &token,
            image: args.image.as_deref(),
        })?;
        return print_manifests(&objects, args.output);
    }
    let (client, config) = client(global).await?;
    let server = args
        .hub_apiserver
        .clone()
        .unwrap_or_else(|| config.cluster_url.to_string());
    let server = server.trim_end_matches('/').to_owned();
    let ca_pem = match &args.hub_ca_file {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
        None => ca_pem(&config)?,
    };
    let token = match find_token(&client).await? {
        Some(token) => token,
        None => format!("{}.{}", random_token_part(6)?, random_token_part(16)?),
    };
    let objects = hub_manifests(&Hub {
        server: &server,
        ca_pem: &ca_pem,
        token: &token,
        image: args.image.as_deref(),
    })?;
    install(&client, objects).await?;

    match &args.image {
        Some(image) => eprintln!(
            "\nThe hub is ready; `flotilla hub` runs as Deployment {}/flotilla-hub ({image}). Join clusters with:\n",
            names::HUB_NAMESPACE
        ),
        None => eprintln!("\nThe hub is ready. Run `flotilla hub` against it, then join clusters with:\n"),
    }
    println!("{}", join_command(&token, &server));
    Ok(())
}

/// The hub's server and CA without contacting it: from the flags, else the kubeconfig file.
async fn server_and_ca_offline(global: &GlobalArgs, args: &InitArgs) -> anyhow::Result<(String, String)> {
    let ca_from_file = match &args.hub_ca_file {
        Some(path) => {
            Some(std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?)
        }
        None => None,
    };
    let (server, ca) = match (&args.hub_apiserver, ca_from_file) {
        (Some(server), Some(ca)) => (server.clone(), ca),
        (server, ca) => {
            let kubeconfig = crate::kube::kubeconfig(global.kubeconfig.as_deref()).context(
                "--dry-run needs the hub's server and CA: pass --hub-apiserver and --hub-ca-file, or a kubeconfig",
            )?;
            let options = kube::config::KubeConfigOptions {
                context: global.context.clone(),
                ..Default::default()
            };
            // Reads the file only; no request reaches the hub.
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .context("load kubeconfig")?;
            let ca = match ca {
                Some(ca) => ca,
                None => ca_pem(&config)?,
            };
            (
                server.clone().unwrap_or_else(|| config.cluster_url.to_string()),
                ca,
            )
        }
    };
    Ok((server.trim_end_matches('/').to_owned(), ca))
}

/// Everything `init` creates on the hub, in the order it is applied: CRDs; the hub and
/// bootstrap namespaces; the registration ClusterRoles; the bootstrap service account, its
/// binding and token; `kube-public/cluster-info`; the admission policies; the `default` and
/// `global` cluster sets; and, with an image, deploy/hub.
fn hub_manifests(hub: &Hub<'_>) -> anyhow::Result<Vec<serde_json::Value>> {
    fn value(object: &impl serde::Serialize) -> anyhow::Result<serde_json::Value> {
        serde_json::to_value(object).context("serialise a manifest")
    }
    let mut objects = Vec::new();
    for crd in flotilla_api::crds::try_crds().context("generate CRDs")? {
        objects.push(value(&crd)?);
    }
    for name in [names::HUB_NAMESPACE, names::BOOTSTRAP_SA_NAMESPACE] {
        objects.push(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }));
    }
    for role in flotilla_registration::hub::hub_cluster_roles() {
        objects.push(value(&role)?);
    }
    objects.push(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": { "name": names::BOOTSTRAP_SA_NAME, "namespace": names::BOOTSTRAP_SA_NAMESPACE }
    }));
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": BOOTSTRAP_BINDING },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names::BOOTSTRAP_CLUSTER_ROLE },
        "subjects": [
            { "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names::BOOTSTRAP_GROUP },
            { "kind": "ServiceAccount", "name": names::BOOTSTRAP_SA_NAME, "namespace": names::BOOTSTRAP_SA_NAMESPACE },
        ]
    }));
    objects.push(token_secret(hub.token)?);
    objects.push(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "cluster-info", "namespace": "kube-public" },
        "data": { "kubeconfig": kubeconfig_without_user(hub.server, hub.ca_pem)? }
    }));
    let mut policies = flotilla_registration::admission::policies();
    policies.push(flotilla_work::admission::policy());
    for (policy, binding) in policies {
        objects.push(value(&policy)?);
        objects.push(value(&binding)?);
    }
    for (name, selector) in [
        (
            cluster_consts::DEFAULT_CLUSTER_SET,
            json!({ "selectorType": "ExclusiveClusterSetLabel" }),
        ),
        (
            cluster_consts::GLOBAL_CLUSTER_SET,
            json!({ "selectorType": "LabelSelector", "labelSelector": {} }),
        ),
    ] {
        objects.push(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
            "metadata": { "name": name }, "spec": { "clusterSelector": selector }
        }));
    }
    if let Some(image) = hub.image {
        for mut object in parse_yaml_stream(HUB_MANIFESTS).context("read deploy/hub")? {
            if objects.iter().any(|o| same_object(o, &object)) {
                continue;
            }
            if object["kind"] == "Deployment" {
                let containers = object["spec"]["template"]["spec"]["containers"]
                    .as_array_mut()
                    .context("deploy/hub's Deployment has no containers")?;
                for container in containers {
                    container["image"] = json!(image);
                }
            }
            objects.push(object);
        }
    }
    Ok(objects)
}

/// Everything `init` (with `--image`) may have created that names no secret of its own: what
/// `flotilla clean` removes. The bootstrap token Secrets are found by [`managed_by_selector`].
pub(crate) fn installed_objects() -> anyhow::Result<Vec<serde_json::Value>> {
    let objects = hub_manifests(&Hub {
        server: "https://removed.invalid",
        ca_pem: "",
        token: "000000.0000000000000000",
        image: Some("removed"),
    })?;
    Ok(objects.into_iter().filter(|o| o["kind"] != "Secret").collect())
}

/// The label selector of what `init` labels as Flotilla's (the bootstrap tokens).
pub(crate) fn managed_by_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

/// Whether two manifests name the same object.
fn same_object(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    a["apiVersion"] == b["apiVersion"]
        && a["kind"] == b["kind"]
        && a["metadata"]["namespace"] == b["metadata"]["namespace"]
        && a["metadata"]["name"] == b["metadata"]["name"]
}

/// The bootstrap token Secret of `token` (`<id>.<secret>`) in Kubernetes' bootstrap token
/// format, in group `system:bootstrappers:managedcluster`.
fn token_secret(token: &str) -> anyhow::Result<serde_json::Value> {
    let (id, secret) = token
        .split_once('.')
        .context("a bootstrap token is <id>.<secret>")?;
    let data: serde_json::Map<String, serde_json::Value> = [
        ("description", "Flotilla cluster registration"),
        ("token-id", id),
        ("token-secret", secret),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        ("auth-extra-groups", names::BOOTSTRAP_GROUP),
    ]
    .into_iter()
    .map(|(k, v)| {
        (
            k.to_owned(),
            json!(base64::engine::general_purpose::STANDARD.encode(v)),
        )
    })
    .collect();
    Ok(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": { "name": format!("bootstrap-token-{id}"), "namespace": "kube-system",
                      "labels": { MANAGED_BY.0: MANAGED_BY.1 } },
        "data": data,
    }))
}

/// Applies [`hub_manifests`]: the CRDs first, waiting until they serve; cluster sets only
/// when absent (people may change their selectors); everything else server-side applied.
async fn install(client: &Client, objects: Vec<serde_json::Value>) -> anyhow::Result<()> {
    let (crds, rest): (Vec<_>, Vec<_>) = objects
        .into_iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    step("install CRDs");
    let crds = crds
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<Vec<CustomResourceDefinition>, _>>()
        .context("read CRDs")?;
    flotilla_kube::crds::install(client, &crds, Duration::from_secs(120))
        .await
        .context("install CRDs (does the kubeconfig have cluster-admin rights on the hub?)")?;
    step("namespaces, RBAC, the bootstrap identity, cluster-info, admission policies, cluster sets");
    let mut applier = Applier::new(client.clone());
    for object in &rest {
        if object["kind"] == "ManagedClusterSet" {
            applier.create_if_absent(object).await?;
        } else {
            applier.apply(object).await?;
        }
    }
    Ok(())
}

pub async fn token(global: &GlobalArgs, args: &TokenArgs) -> anyhow::Result<()> {
    let (client, config) = client(global).await?;
    let server = args
        .hub_apiserver
        .clone()
        .unwrap_or_else(|| config.cluster_url.to_string());
    match find_token(&client).await? {
        Some(token) => {
            let server = server.trim_end_matches('/');
            let command = join_command(&token, server);
            match args.format {
                crate::output::Format::Table => println!("{command}"),
                format => crate::output::print_object(
                    format,
                    &serde_json::json!({ "hubToken": token, "hubApiserver": server, "joinCommand": command }),
                )?,
            }
            Ok(())
        }
        None => bail!("this hub has no Flotilla bootstrap token; run `flotilla init` first"),
    }
}

fn step(what: &str) {
    eprintln!("• {what}");
}

fn join_command(token: &str, server: &str) -> String {
    format!("flotilla join --hub-token {token} --hub-apiserver {server} --cluster-name <cluster-name>")
}

/// The hub's CA (PEM) from the kubeconfig in use.
fn ca_pem(config: &kube::Config) -> anyhow::Result<String> {
    let certs = config.root_cert.as_ref().filter(|c| !c.is_empty()).context(
        "the kubeconfig names no certificate authority for the hub; managed clusters need it to trust the hub",
    )?;
    let mut pem = String::new();
    for der in certs {
        pem.push_str(
            &der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der)
                .context("encode hub CA")?,
        );
    }
    Ok(pem)
}

/// A kubeconfig naming only the hub's server and CA, as published in `cluster-info`.
pub fn kubeconfig_without_user(server: &str, ca_pem: &str) -> anyhow::Result<String> {
    use base64::Engine as _;
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": "", "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "contexts": [], "users": [], "preferences": {},
    });
    serde_yaml::to_string(&config).context("render cluster-info kubeconfig")
}

/// The existing Flotilla bootstrap token (`<id>.<secret>`), if any.
async fn find_token(client: &Client) -> anyhow::Result<Option<String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let list = secrets
        .list(&ListParams::default().labels(&selector))
        .await
        .context("list bootstrap tokens")?;
    for secret in list.items {
        let data = secret.data.unwrap_or_default();
        let field = |k: &str| data.get(k).and_then(|v| String::from_utf8(v.0.clone()).ok());
        if let (Some(id), Some(token_secret)) = (field("token-id"), field("token-secret")) {
            return Ok(Some(format!("{id}.{token_secret}")));
        }
    }
    Ok(None)
}

fn random_token_part(len: usize) -> anyhow::Result<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    // Rejection sampling keeps every character equally likely: 252 is the largest multiple of
    // 36 below 256.
    let mut out = String::with_capacity(len);
    let mut buffer = [0u8; 32];
    while out.len() < len {
        getrandom::fill(&mut buffer).map_err(|e| anyhow::anyhow!("read random bytes: {e}"))?;
        for byte in buffer.iter().filter(|b| **b < 252) {
            if out.len() == len {
                break;
            }
            out.push(ALPHABET[*byte as usize % ALPHABET.len()] as char);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(image: Option<&str>) -> Vec<serde_json::Value> {
        hub_manifests(&Hub {
            server: "https://hub.example:6443",
            ca_pem: "PEM",
            token: "abcdef.0123456789abcdef",
            image,
        })
        .unwrap()
    }

    fn find<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> Option<&'a serde_json::Value> {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }

    #[test]
    fn the_hub_deployment_and_its_rbac_come_from_deploy_hub_only_with_an_image() {
        let without = hub(None);
        assert!(find(&without, "Deployment", "flotilla-hub").is_none());
        assert!(find(&without, "ClusterRole", "flotilla:hub").is_none());
        let with = hub(Some("registry.example/flotilla:v2"));
        let deployment = find(&with, "Deployment", "flotilla-hub").unwrap();
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.example/flotilla:v2"
        );
        let from_file = parse_yaml_stream(HUB_MANIFESTS).unwrap();
        assert_eq!(
            find(&with, "ClusterRole", "flotilla:hub"),
            find(&from_file, "ClusterRole", "flotilla:hub")
        );
        let namespaces = with
            .iter()
            .filter(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == names::HUB_NAMESPACE)
            .count();
        assert_eq!(namespaces, 1, "the hub namespace is listed once");
    }

    #[test]
    fn deploy_hub_installs_the_hub_wide_roles_as_init_does() {
        let from_init = hub(None);
        let from_file = parse_yaml_stream(HUB_MANIFESTS).unwrap();
        for name in names::HUB_CLUSTER_ROLES {
            let (init, file) = (
                find(&from_init, "ClusterRole", name).unwrap(),
                find(&from_file, "ClusterRole", name)
                    .unwrap_or_else(|| panic!("deploy/hub lacks ClusterRole {name}")),
            );
            assert_eq!(init["rules"], file["rules"], "rules of {name}");
            assert_eq!(
                init["metadata"]["labels"], file["metadata"]["labels"],
                "labels of {name}"
            );
        }
    }

    #[test]
    fn the_printed_crds_are_the_files_of_deploy_crds() {
        let crds: Vec<serde_json::Value> = hub(None)
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .collect();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crds");
        // Every file but the kustomization is a CRD.
        assert_eq!(crds.len() + 1, std::fs::read_dir(dir).unwrap().count());
        for crd in crds {
            let name = crd["metadata"]["name"].as_str().unwrap();
            let file = std::fs::read_to_string(format!("{dir}/{name}.yaml")).unwrap();
            assert_eq!(
                parse_yaml_stream(&file).unwrap(),
                std::slice::from_ref(&crd),
                "deploy/crds/{name}.yaml differs from what init installs: run flotilla-crdgen"
            );
        }
    }

    #[test]
    fn crds_come_first_so_the_objects_after_them_have_a_kind_to_be() {
        let objects = hub(Some("i"));
        let last_crd = objects
            .iter()
            .rposition(|o| o["kind"] == "CustomResourceDefinition")
            .unwrap();
        let first_other = objects
            .iter()
            .position(|o| o["kind"] != "CustomResourceDefinition")
            .unwrap();
        assert!(last_crd < first_other);
    }

    #[test]
    fn the_token_secret_carries_the_token_in_bootstrap_token_format() {
        let objects = hub(None);
        let secret = find(&objects, "Secret", "bootstrap-token-abcdef").unwrap();
        let field = |k: &str| {
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(secret["data"][k].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(secret["type"], "bootstrap.kubernetes.io/token");
        assert_eq!(field("token-id"), "abcdef");
        assert_eq!(field("token-secret"), "0123456789abcdef");
        assert_eq!(field("auth-extra-groups"), names::BOOTSTRAP_GROUP);
        assert!(token_secret("no-dot").is_err());
    }
}
