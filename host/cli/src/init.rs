//! `flotilla init` and `flotilla get token`: prepare a hub and print the command that joins a
//! cluster to it.
//!
//! A hub gets the CRDs, the registration ClusterRoles, a bootstrap identity (a bootstrap token
//! in group `system:bootstrappers:managedcluster`, and the `agent-registration-bootstrap`
//! service account), the admission policies and the `default`/`global` cluster sets. It also
//! publishes `kube-public/cluster-info` — the server and CA that the controller manager's
//! bootstrap signer signs with each token — so `flotilla join` can learn the hub's CA from the
//! token alone and verify it, as kubeadm's discovery does.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::cluster::{consts as cluster_consts, v1beta2::ManagedClusterSet};
use flotilla_kube::apply::apply;
use flotilla_registration::names;
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{ConfigMap, Namespace, Secret, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client};

/// Label on the bootstrap tokens Flotilla creates.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flotilla");
/// Binding of the bootstrap identities to the bootstrap ClusterRole.
const BOOTSTRAP_BINDING: &str = "open-cluster-management:bootstrap";

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The hub apiserver URL managed clusters reach (default: the kubeconfig's server).
    #[arg(long)]
    pub hub_apiserver: Option<String>,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The hub apiserver URL managed clusters reach (default: the kubeconfig's server).
    #[arg(long)]
    pub hub_apiserver: Option<String>,
}

pub async fn init(global: &GlobalArgs, args: &InitArgs) -> anyhow::Result<()> {
    let (client, config) = client(global).await?;
    let server = args
        .hub_apiserver
        .clone()
        .unwrap_or_else(|| config.cluster_url.to_string());
    let server = server.trim_end_matches('/').to_owned();
    step("install CRDs");
    flotilla_kube::crds::install(&client, &flotilla_api::crds::crds(), Duration::from_secs(120))
        .await
        .context("install CRDs (does the kubeconfig have cluster-admin rights on the hub?)")?;

    step("namespaces, ClusterRoles and the bootstrap identity");
    for name in [names::HUB_NAMESPACE, names::BOOTSTRAP_SA_NAMESPACE] {
        apply(
            &Api::<Namespace>::all(client.clone()),
            &object(json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
            }))?,
        )
        .await?;
    }
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for role in flotilla_registration::hub::hub_cluster_roles() {
        apply(&roles, &role).await?;
    }
    apply(
        &Api::<ServiceAccount>::namespaced(client.clone(), names::BOOTSTRAP_SA_NAMESPACE),
        &object(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": names::BOOTSTRAP_SA_NAME, "namespace": names::BOOTSTRAP_SA_NAMESPACE }
        }))?,
    )
    .await?;
    apply(&Api::<ClusterRoleBinding>::all(client.clone()), &object(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": BOOTSTRAP_BINDING },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names::BOOTSTRAP_CLUSTER_ROLE },
        "subjects": [
            { "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names::BOOTSTRAP_GROUP },
            { "kind": "ServiceAccount", "name": names::BOOTSTRAP_SA_NAME, "namespace": names::BOOTSTRAP_SA_NAMESPACE },
        ]
    }))?)
    .await?;
    let token = ensure_token(&client).await?;

    step("cluster-info for join discovery");
    let ca_pem = ca_pem(&config)?;
    let cluster_info = kubeconfig_without_user(&server, &ca_pem)?;
    apply(
        &Api::<ConfigMap>::namespaced(client.clone(), "kube-public"),
        &object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "cluster-info", "namespace": "kube-public" },
            "data": { "kubeconfig": cluster_info }
        }))?,
    )
    .await?;

    step("admission policies");
    flotilla_registration::admission::install(&client)
        .await
        .context("install admission policies")?;
    flotilla_work::admission::install(&client)
        .await
        .context("install the ManifestWork admission policy")?;

    step("default cluster sets");
    let sets: Api<ManagedClusterSet> = Api::all(client.clone());
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
        if sets.get_opt(name).await?.is_none() {
            apply(
                &sets,
                &object(json!({
                    "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
                    "metadata": { "name": name }, "spec": { "clusterSelector": selector }
                }))?,
            )
            .await?;
        }
    }

    eprintln!("\nThe hub is ready. Run `flotilla hub` against it, then join clusters with:\n");
    println!("{}", join_command(&token, &server));
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
            println!("{}", join_command(&token, server.trim_end_matches('/')));
            Ok(())
        }
        None => bail!("this hub has no Flotilla bootstrap token; run `flotilla init` first"),
    }
}

fn step(what: &str) {
    eprintln!("• {what}");
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<T> {
    serde_json::from_value(value).context("build object")
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

/// Returns the Flotilla bootstrap token, creating one if the hub has none.
async fn ensure_token(client: &Client) -> anyhow::Result<String> {
    if let Some(token) = find_token(client).await? {
        return Ok(token);
    }
    // Token ids are 6 and secrets 16 characters of [a-z0-9] (Kubernetes' bootstrap token format).
    let id = random_token_part(6)?;
    let secret = random_token_part(16)?;
    let data: BTreeMap<String, ByteString> = [
        ("description", "Flotilla cluster registration"),
        ("token-id", id.as_str()),
        ("token-secret", secret.as_str()),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        ("auth-extra-groups", names::BOOTSTRAP_GROUP),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let token: Secret = object(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": { "name": format!("bootstrap-token-{id}"), "namespace": "kube-system",
                      "labels": { MANAGED_BY.0: MANAGED_BY.1 } },
    }))
    .map(|mut s: Secret| {
        s.data = Some(data);
        s
    })?;
    apply(&Api::<Secret>::namespaced(client.clone(), "kube-system"), &token).await?;
    Ok(format!("{id}.{secret}"))
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
