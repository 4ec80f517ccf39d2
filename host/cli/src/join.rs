//! `flotilla join` and `flotilla unjoin`: register a managed cluster with a hub, or remove it.
//!
//! Join learns the hub's CA from the token alone, as kubeadm's discovery does: it reads
//! `kube-public/cluster-info` without trusting the connection, then accepts the CA only if the
//! hub's bootstrap signer signed that config with this token's secret (HS256, detached JWS). It
//! then writes the bootstrap kubeconfig into the managed cluster and starts the klusterlet —
//! as a Deployment there, or (`--local`) as a background process on this machine, which is what
//! a cluster without nodes, like a local control plane, needs.

use std::{
    path::PathBuf,
    process::{Command as Process, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use clap::Args;
use flotilla_kube::apply::apply;
use flotilla_registration::names;
use hmac::{KeyInit, Mac};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Secret, ServiceAccount},
    rbac::v1::ClusterRoleBinding,
};
use kube::{Api, api::DeleteParams};
use serde::Deserialize;
use serde_json::json;

use crate::{
    cli::GlobalArgs,
    kube::client,
    local::{self, LocalKlusterlet},
    manifests::{ManifestFormat, print_manifests},
};

/// The klusterlet's manifests for a real managed cluster.
const KLUSTERLET_MANIFESTS: &str = include_str!("../../../deploy/klusterlet/klusterlet.yaml");

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The bootstrap token printed by `flotilla init` / `flotilla get token` (`<id>.<secret>`).
    #[arg(long)]
    pub hub_token: String,
    /// The hub apiserver URL.
    #[arg(long)]
    pub hub_apiserver: String,
    /// The name of this cluster on the hub (a namespace name).
    #[arg(long)]
    pub cluster_name: String,
    /// A PEM file with the hub's CA, instead of discovering it through cluster-info.
    #[arg(long)]
    pub hub_ca_file: Option<PathBuf>,
    /// Run the klusterlet as a background process here instead of a Deployment in the cluster.
    #[arg(long)]
    pub local: bool,
    /// The agent namespace on the managed cluster.
    #[arg(long, default_value = names::AGENT_NAMESPACE)]
    pub agent_namespace: String,
    /// `leaseDurationSeconds` of the ManagedCluster: the hub marks the cluster Unknown after
    /// five of these without a renewal.
    #[arg(long, default_value_t = 60)]
    pub lease_duration_seconds: i32,
    /// The period add-on agents renew their leases at (`--local` only): an add-on lease older
    /// than five of these makes the add-on unavailable.
    #[arg(long, default_value_t = 60)]
    pub addon_lease_duration_seconds: u64,
    /// The klusterlet image (without `--local`).
    #[arg(long, default_value = "flotilla:latest")]
    pub image: String,
    /// Print what would be created on the managed cluster instead of creating it (for GitOps);
    /// the managed cluster is not contacted.
    #[arg(long, conflicts_with = "local")]
    pub dry_run: bool,
    /// The format of `--dry-run`'s output.
    #[arg(short = 'o', long, value_enum, default_value_t = ManifestFormat::Yaml, requires = "dry_run")]
    pub output: ManifestFormat,
}

/// The namespaces and the bootstrap Secret `join` writes before the klusterlet: the agent
/// namespace, the default add-on install namespace (which OCM's klusterlet also creates: add-on
/// works write into it without creating it), and the bootstrap kubeconfig.
fn bootstrap_manifests(namespace: &str, bootstrap_kubeconfig: &str) -> Vec<serde_json::Value> {
    let mut objects: Vec<serde_json::Value> = [namespace, names::ADDON_NAMESPACE]
        .iter()
        .map(|name| json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }))
        .collect();
    objects.push(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": names::BOOTSTRAP_SECRET, "namespace": namespace },
        "stringData": { (names::KUBECONFIG_KEY): bootstrap_kubeconfig },
    }));
    objects
}

#[derive(Debug, Args)]
pub struct UnjoinArgs {
    /// The name of this cluster on the hub.
    #[arg(long)]
    pub cluster_name: String,
    /// The agent namespace on the managed cluster.
    #[arg(long, default_value = names::AGENT_NAMESPACE)]
    pub agent_namespace: String,
}

pub async fn join(global: &GlobalArgs, args: &JoinArgs) -> anyhow::Result<()> {
    validate_cluster_name(&args.cluster_name)?;
    let (token_id, token_secret) = args
        .hub_token
        .split_once('.')
        .filter(|(id, secret)| id.len() == 6 && secret.len() == 16)
        .context("--hub-token must look like <6-character id>.<16-character secret>, as `flotilla get token` prints it")?;
    let server = args.hub_apiserver.trim_end_matches('/');
    let ca_pem = match &args.hub_ca_file {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
        None => discover_ca(server, token_id, token_secret).await?,
    };
    let bootstrap = bootstrap_kubeconfig(server, &ca_pem, &args.hub_token)?;
    if args.dry_run {
        let mut objects = bootstrap_manifests(&args.agent_namespace, &bootstrap);
        objects.extend(klusterlet_manifests(args)?);
        return print_manifests(&objects, args.output);
    }

    let (managed, managed_config) = client(global)
        .await
        .context("connect to the managed cluster (--kubeconfig)")?;
    let namespace = &args.agent_namespace;
    for object in bootstrap_manifests(namespace, &bootstrap) {
        if object["kind"] == "Namespace" {
            apply(
                &Api::<Namespace>::all(managed.clone()),
                &serde_json::from_value(object)?,
            )
            .await?;
        } else {
            apply(
                &Api::<Secret>::namespaced(managed.clone(), namespace),
                &serde_json::from_value(object)?,
            )
            .await?;
        }
    }
    eprintln!(
        "wrote {namespace}/{} on the managed cluster",
        names::BOOTSTRAP_SECRET
    );

    if args.local {
        let state = start_local(global, args, &managed_config.cluster_url.to_string())?;
        eprintln!(
            "klusterlet for {:?} runs as process {} (log: {})",
            args.cluster_name,
            state.pid,
            state.log.display()
        );
    } else {
        deploy_klusterlet(&managed, args).await?;
        eprintln!(
            "klusterlet Deployment created in {namespace} (image {})",
            args.image
        );
    }
    eprintln!("\nOn the hub, accept the cluster with:\n");
    println!("flotilla accept --clusters {}", args.cluster_name);
    Ok(())
}

pub async fn unjoin(global: &GlobalArgs, args: &UnjoinArgs) -> anyhow::Result<()> {
    if let Some(pid) = local::stop(&global.state_dir, &args.cluster_name)? {
        eprintln!("stopped the local klusterlet (process {pid})");
    }
    let (managed, _) = client(global)
        .await
        .context("connect to the managed cluster (--kubeconfig)")?;
    let binding = klusterlet_binding_name(&args.agent_namespace);
    match Api::<ClusterRoleBinding>::all(managed.clone())
        .delete(&binding, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => return Err(e).context("delete the klusterlet's ClusterRoleBinding"),
    }
    match Api::<Namespace>::all(managed)
        .delete(&args.agent_namespace, &DeleteParams::default())
        .await
    {
        Ok(_) => eprintln!("deleting namespace {} (agent, secrets)", args.agent_namespace),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            eprintln!("namespace {} is already gone", args.agent_namespace)
        }
        Err(e) => return Err(e).context("delete the agent namespace"),
    }
    eprintln!(
        "cluster {:?} unjoined; remove it from the hub with `kubectl delete managedcluster {}`",
        args.cluster_name, args.cluster_name
    );
    Ok(())
}

/// Cluster names become namespaces on the hub.
fn validate_cluster_name(name: &str) -> anyhow::Result<()> {
    if let Some(reason) = flotilla_core::names::dns_label_problem(name) {
        bail!("--cluster-name {name:?} is not a valid namespace name: it {reason}");
    }
    Ok(())
}

/// Reads the hub's cluster-info without trusting the connection and returns its CA once the
/// token's signature over it checks out.
async fn discover_ca(server: &str, token_id: &str, token_secret: &str) -> anyhow::Result<String> {
    let url: http::Uri = server
        .parse()
        .with_context(|| format!("--hub-apiserver {server:?} is not a URL"))?;
    let mut config = kube::Config::new(url);
    // Deliberately unverified: the CA is what we are learning; the signature check below is
    // what makes the answer trustworthy.
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(format!("{token_id}.{token_secret}").into());
    config.connect_timeout = Some(Duration::from_secs(10));
    let hub = kube::Client::try_from(config).context("build discovery client")?;
    let info = Api::<ConfigMap>::namespaced(hub, "kube-public")
        .get("cluster-info")
        .await
        .with_context(|| format!("read kube-public/cluster-info from {server} (is the hub up, initialised with `flotilla init`, and the token right?)"))?;
    let data = info.data.unwrap_or_default();
    let kubeconfig = data
        .get("kubeconfig")
        .context("cluster-info has no kubeconfig; run `flotilla init` on the hub")?;
    let signature = data.get(&format!("jws-kubeconfig-{token_id}")).with_context(|| {
        format!("the hub has not signed cluster-info for token {token_id}: the token is unknown, expired, or just created (retry in a few seconds)")
    })?;
    verify_detached_jws(signature, kubeconfig, token_id, token_secret)?;
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).context("parse cluster-info kubeconfig")?;
    let ca = parsed
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .context("cluster-info names no CA")?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca.trim())
        .context("decode the hub CA")?;
    String::from_utf8(pem).context("the hub CA is not PEM text")
}

/// Checks a compact JWS with detached payload (`header..signature`), HS256 keyed by the token
/// secret, as Kubernetes' bootstrap signer writes it.
fn verify_detached_jws(jws: &str, payload: &str, token_id: &str, token_secret: &str) -> anyhow::Result<()> {
    let (header_b64, signature_b64) = jws
        .split_once("..")
        .context("cluster-info signature is not a detached JWS")?;
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header_b64).context("decode JWS header")?)
            .context("parse JWS header")?;
    if header["alg"] != "HS256" || header["kid"] != token_id {
        bail!("cluster-info signature has an unexpected header {header}");
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .context("decode JWS signature")?;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token_secret.as_bytes())
        .map_err(|e| anyhow::anyhow!("HMAC key: {e}"))?;
    mac.update(format!("{header_b64}.{}", URL_SAFE_NO_PAD.encode(payload)).as_bytes());
    mac.verify_slice(&signature).map_err(|_| {
        anyhow::anyhow!(
            "cluster-info is not signed with this token's secret: wrong token, or not the hub you meant"
        )
    })
}

/// The kubeconfig the agent bootstraps with: the hub's server and CA, the token as user.
fn bootstrap_kubeconfig(server: &str, ca_pem: &str, token: &str) -> anyhow::Result<String> {
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": "hub", "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "users": [{ "name": "bootstrap", "user": { "token": token } }],
        "contexts": [{ "name": "bootstrap", "context": { "cluster": "hub", "user": "bootstrap" } }],
        "current-context": "bootstrap",
        "preferences": {},
    });
    serde_yaml::to_string(&config).context("render bootstrap kubeconfig")
}

/// Starts `flotilla klusterlet` for this cluster in the background, in its own process group
/// so a terminal's hang-up does not reach it.
fn start_local(global: &GlobalArgs, args: &JoinArgs, server: &str) -> anyhow::Result<LocalKlusterlet> {
    use std::os::unix::process::CommandExt as _;

    let dir = local::dir(&global.state_dir, &args.cluster_name);
    if let Some(old) = local::read(&global.state_dir, &args.cluster_name) {
        local::stop_process(old.pid, &old.exe);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let kubeconfig = match &global.kubeconfig {
        Some(path) => std::path::absolute(path).with_context(|| format!("resolve {}", path.display()))?,
        None => {
            bail!("--local needs --kubeconfig for the managed cluster (the background klusterlet uses it)")
        }
    };
    let exe = std::env::current_exe().context("find the flotilla binary")?;
    let log = std::path::absolute(dir.join("klusterlet.log")).context("resolve log path")?;
    let out = std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone().context("clone log handle")?;
    let mut command = Process::new(&exe);
    command
        .args([
            "klusterlet",
            "--cluster-name",
            &args.cluster_name,
            "--agent-namespace",
            &args.agent_namespace,
        ])
        .arg(format!(
            "--lease-duration-seconds={}",
            args.lease_duration_seconds
        ))
        .arg(format!(
            "--addon-lease-duration-seconds={}",
            args.addon_lease_duration_seconds
        ))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    if let Some(context) = &global.context {
        command.args(["--context", context]);
    }
    let child = command.spawn().context("start the klusterlet")?;
    let state = LocalKlusterlet {
        pid: child.id(),
        exe,
        log,
        server: Some(server.to_owned()),
    };
    local::write(&global.state_dir, &args.cluster_name, &state)?;
    Ok(state)
}

fn klusterlet_binding_name(namespace: &str) -> String {
    format!("flotilla-klusterlet:{namespace}")
}

/// deploy/klusterlet/klusterlet.yaml adjusted to this cluster, namespace and image: what
/// `join` applies, and prints with `--dry-run`.
fn klusterlet_manifests(args: &JoinArgs) -> anyhow::Result<Vec<serde_json::Value>> {
    let namespace = &args.agent_namespace;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(KLUSTERLET_MANIFESTS) {
        let mut object = serde_json::Value::deserialize(document).context("parse klusterlet manifests")?;
        if object.is_null() {
            continue;
        }
        if object["metadata"].get("namespace").is_some() {
            object["metadata"]["namespace"] = json!(namespace);
        }
        match object["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => {}
            "ClusterRoleBinding" => {
                object["metadata"]["name"] = json!(klusterlet_binding_name(namespace));
                object["subjects"][0]["namespace"] = json!(namespace);
            }
            "Deployment" => {
                let container = &mut object["spec"]["template"]["spec"]["containers"][0];
                container["image"] = json!(args.image);
                container["args"] = json!([
                    "klusterlet",
                    "--cluster-name",
                    args.cluster_name,
                    "--agent-namespace",
                    namespace,
                    format!("--lease-duration-seconds={}", args.lease_duration_seconds),
                    // The probes and the metrics port of deploy/klusterlet.
                    "--ops-bind",
                    "0.0.0.0:8080",
                ]);
            }
            other => bail!("unexpected kind {other:?} in the klusterlet manifests"),
        }
        objects.push(object);
    }
    Ok(objects)
}

/// Applies [`klusterlet_manifests`].
async fn deploy_klusterlet(managed: &kube::Client, args: &JoinArgs) -> anyhow::Result<()> {
    let namespace = &args.agent_namespace;
    for object in klusterlet_manifests(args)? {
        match object["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => {
                apply(
                    &Api::<ServiceAccount>::namespaced(managed.clone(), namespace),
                    &serde_json::from_value(object)?,
                )
                .await?;
            }
            "ClusterRoleBinding" => {
                apply(
                    &Api::<ClusterRoleBinding>::all(managed.clone()),
                    &serde_json::from_value(object)?,
                )
                .await?;
            }
            _ => {
                apply(
                    &Api::<Deployment>::namespaced(managed.clone(), namespace),
                    &serde_json::from_value(object)?,
                )
                .await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_jws_verifies_only_with_the_right_secret_and_payload() {
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","kid":"abcdef"}"#);
        let payload = "apiVersion: v1\nkind: Config\n";
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"0123456789abcdef").unwrap();
        mac.update(format!("{header}.{}", URL_SAFE_NO_PAD.encode(payload)).as_bytes());
        let jws = format!(
            "{header}..{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        );
        verify_detached_jws(&jws, payload, "abcdef", "0123456789abcdef").unwrap();
        assert!(verify_detached_jws(&jws, payload, "abcdef", "0123456789abcdeX").is_err());
        assert!(verify_detached_jws(&jws, "tampered", "abcdef", "0123456789abcdef").is_err());
        assert!(verify_detached_jws(&jws, payload, "zzzzzz", "0123456789abcdef").is_err());
        assert!(verify_detached_jws("garbage", payload, "abcdef", "0123456789abcdef").is_err());
    }

    #[test]
    fn cluster_names_must_be_namespace_names() {
        assert!(validate_cluster_name("cluster1").is_ok());
        for bad in ["", "Cluster1", "a.b", "-a", &"x".repeat(64)] {
            assert!(validate_cluster_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_klusterlet_manifests_parse() {
        let kinds: Vec<String> = serde_yaml::Deserializer::from_str(KLUSTERLET_MANIFESTS)
            .map(|d| serde_json::Value::deserialize(d).unwrap())
            .filter(|v| !v.is_null())
            .map(|v| v["kind"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(kinds, ["ServiceAccount", "ClusterRoleBinding", "Deployment"]);
    }
}
