//! `flotilla join` and `flotilla unjoin`: register a managed cluster with a hub, or remove it.
//!
//! Join learns the hub's CA from the token alone, as kubeadm's discovery does: it reads
//! `kube-public/cluster-info` without trusting the connection, then accepts the CA only if the
//! hub's bootstrap signer signed that config with this token's secret (HS256, detached JWS). It
//! then writes the bootstrap kubeconfig into the managed cluster and starts the klusterlet —
//! as a Deployment there, or (`--local`) as a background process on this machine, which is what
//! a cluster without nodes, like a local control plane, needs.
//!
//! Behind a forward proxy (`--proxy-url`, and `--proxy-ca` for an https proxy), discovery goes
//! through the proxy and the bootstrap kubeconfig carries `proxy-url` (and the proxy's CA after
//! the hub's), so every hub connection the klusterlet makes is a CONNECT tunnel through it.
//!
//! One cluster may be joined to several hubs, one klusterlet and agent namespace per hub: join
//! refuses an agent namespace whose kubeconfig secrets name another hub, and says which
//! `--agent-namespace` to use. With `--mode hosted` the klusterlet's objects go to the cluster
//! of `--hosting-kubeconfig`, with a self-contained kubeconfig of the managed cluster in Secret
//! `external-managed-kubeconfig` for it to reach that cluster through.

use std::{
    path::PathBuf,
    process::{Command as Process, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use clap::Args;
use flotilla_core::registration::agent::join::{self as join_rules, NamespaceUse};
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

use flotilla_localenv::klusterlets::{self, LocalKlusterlet};

use crate::{
    cli::GlobalArgs,
    kube::client,
    manifests::{ManifestFormat, print_manifests},
    run::KlusterletMode,
};

/// The klusterlet's manifests for a real managed cluster.
pub(crate) const KLUSTERLET_MANIFESTS: &str = include_str!("../../../deploy/klusterlet/klusterlet.yaml");

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
    /// A forward proxy (`http://host:port` or `https://host:port`) through which the klusterlet
    /// reaches the hub with HTTP CONNECT: written as `proxy-url` of the bootstrap kubeconfig
    /// (and so of every hub kubeconfig the klusterlet writes). CA discovery goes through it too.
    #[arg(long)]
    pub proxy_url: Option<String>,
    /// A PEM file with the CA of an `https://` proxy: appended to `certificate-authority-data`,
    /// which then verifies both the proxy and the hub. `--proxy-ca-file` is clusteradm's name.
    #[arg(long, visible_alias = "proxy-ca-file", requires = "proxy_url")]
    pub proxy_ca: Option<PathBuf>,
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
    /// `default`: the klusterlet and its objects on the managed cluster (`--kubeconfig`).
    /// `hosted`: the klusterlet and its objects (agent namespace, secrets) on the cluster of
    /// `--hosting-kubeconfig`, reaching the managed cluster through a kubeconfig of it that
    /// join stores there in Secret `external-managed-kubeconfig`.
    #[arg(long, value_enum, default_value_t = KlusterletMode::Default)]
    pub mode: KlusterletMode,
    /// The hosting cluster's kubeconfig (its current context), for `--mode hosted`.
    #[arg(long, required_if_eq("mode", "hosted"))]
    pub hosting_kubeconfig: Option<PathBuf>,
    /// The klusterlet image (without `--local`).
    #[arg(long, default_value = "flotilla:latest")]
    pub image: String,
    /// Print what would be created on the managed cluster instead of creating it (for GitOps);
    /// the managed cluster is not contacted.
    #[arg(long, conflicts_with_all = ["local", "hosting_kubeconfig"])]
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
    /// The agent namespace on the managed cluster (on the hosting cluster in hosted mode).
    #[arg(long, default_value = names::AGENT_NAMESPACE)]
    pub agent_namespace: String,
    /// The hosting cluster's kubeconfig, for a klusterlet joined with `--mode hosted`: its
    /// objects are removed there.
    #[arg(long)]
    pub hosting_kubeconfig: Option<PathBuf>,
}

pub async fn join(global: &GlobalArgs, args: &JoinArgs) -> anyhow::Result<()> {
    validate_cluster_name(&args.cluster_name)?;
    if args.hosting_kubeconfig.is_some() && args.mode != KlusterletMode::Hosted {
        bail!(
            "--hosting-kubeconfig is for --mode hosted; add --mode hosted, or drop it to run the klusterlet on the managed cluster"
        );
    }
    let (token_id, token_secret) = args
        .hub_token
        .split_once('.')
        .filter(|(id, secret)| id.len() == 6 && secret.len() == 16)
        .context("--hub-token must look like <6-character id>.<16-character secret>, as `flotilla get token` prints it")?;
    let server = args.hub_apiserver.trim_end_matches('/');
    let proxy = proxy_settings(args)?;
    let hub_ca = match &args.hub_ca_file {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
        None => discover_ca(server, proxy.as_ref().map(|p| &p.url), token_id, token_secret).await?,
    };
    let ca_pem = match proxy.as_ref().and_then(|p| p.ca_pem.as_deref()) {
        Some(proxy_ca) => ca_bundle(&hub_ca, proxy_ca),
        None => hub_ca,
    };
    let proxy_url = args.proxy_url.as_deref().map(|u| u.trim_end_matches('/'));
    let bootstrap = bootstrap_kubeconfig(server, &ca_pem, &args.hub_token, proxy_url)?;
    if args.dry_run {
        let mut objects = bootstrap_manifests(&args.agent_namespace, &bootstrap);
        objects.extend(klusterlet_manifests(args)?);
        return print_manifests(&objects, args.output);
    }

    let (managed, managed_config) = client(global)
        .await
        .context("connect to the managed cluster (--kubeconfig)")?;
    // Where the klusterlet's objects go: the managed cluster, or in hosted mode the hosting one.
    let (agent, place) = match &args.hosting_kubeconfig {
        Some(path) => (hosting_client(path).await?, "hosting cluster"),
        None => (managed.clone(), "managed cluster"),
    };
    let namespace = &args.agent_namespace;
    refuse_another_hub(&agent, namespace, server, place).await?;
    let mut objects = bootstrap_manifests(namespace, &bootstrap);
    if args.hosting_kubeconfig.is_some() {
        objects.push(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": names::EXTERNAL_MANAGED_KUBECONFIG_SECRET, "namespace": namespace },
            "stringData": { (names::KUBECONFIG_KEY): standalone_kubeconfig(global)? },
        }));
    }
    for object in objects {
        if object["kind"] == "Namespace" {
            apply(
                &Api::<Namespace>::all(agent.clone()),
                &serde_json::from_value(object)?,
            )
            .await?;
        } else {
            apply(
                &Api::<Secret>::namespaced(agent.clone(), namespace),
                &serde_json::from_value(object)?,
            )
            .await?;
        }
    }
    eprintln!("wrote {namespace}/{} on the {place}", names::BOOTSTRAP_SECRET);

    if args.local {
        let state = start_local(global, args, &managed_config.cluster_url.to_string())?;
        eprintln!(
            "klusterlet for {:?} runs as process {} (log: {})",
            args.cluster_name,
            state.pid,
            state.log.display()
        );
    } else {
        deploy_klusterlet(&agent, args).await?;
        eprintln!(
            "klusterlet Deployment created in {namespace} on the {place} (image {})",
            args.image
        );
    }
    eprintln!("\nOn the hub, accept the cluster with:\n");
    println!("flotilla accept --clusters {}", args.cluster_name);
    Ok(())
}

pub async fn unjoin(global: &GlobalArgs, args: &UnjoinArgs) -> anyhow::Result<()> {
    let key = klusterlets::key(&args.cluster_name, &args.agent_namespace);
    if let Some(pid) = klusterlets::stop(&global.state_dir, &key)? {
        eprintln!("stopped the local klusterlet (process {pid})");
    }
    // Only this klusterlet's own objects go: another hub's klusterlet on the same cluster keeps
    // its namespace, and cluster-wide objects (the add-on namespace, ClusterClaims, CRDs,
    // AppliedManifestWorks) are left to their owners.
    let managed = match &args.hosting_kubeconfig {
        Some(path) => hosting_client(path).await?,
        None => {
            client(global)
                .await
                .context("connect to the managed cluster (--kubeconfig)")?
                .0
        }
    };
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

/// A client of the hosting cluster (the current context of its kubeconfig).
async fn hosting_client(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let config = kube::Config::from_custom_kubeconfig(
        crate::kube::kubeconfig(Some(path))?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("load --hosting-kubeconfig {}", path.display()))?;
    kube::Client::try_from(config).context("connect to the hosting cluster (--hosting-kubeconfig)")
}

/// Refuses to point an agent namespace that serves another hub (its bootstrap or hub
/// kubeconfig secret names another server) at `server`: that would move its klusterlet, and
/// everything it applied, to this hub. Joining the same hub again is fine.
async fn refuse_another_hub(
    agent: &kube::Client,
    namespace: &str,
    server: &str,
    place: &str,
) -> anyhow::Result<()> {
    let secrets = Api::<Secret>::namespaced(agent.clone(), namespace);
    let mut joined = Vec::new();
    for name in [names::BOOTSTRAP_SECRET, names::HUB_KUBECONFIG_SECRET] {
        let secret = secrets
            .get_opt(name)
            .await
            .with_context(|| format!("read secret {namespace}/{name} on the {place}"))?;
        if let Some(server) = secret.as_ref().and_then(kubeconfig_server) {
            joined.push((name, server));
        }
    }
    match join_rules::namespace_use(namespace, server, joined.iter().map(|(_, s)| s.as_str())) {
        NamespaceUse::Fresh | NamespaceUse::SameHub => Ok(()),
        NamespaceUse::OtherHub {
            joined: other,
            suggestion,
        } => {
            let secret = joined
                .iter()
                .find(|(_, s)| *s == other)
                .map_or(names::BOOTSTRAP_SECRET, |(name, _)| *name);
            bail!(
                "agent namespace {namespace:?} on the {place} already serves hub {other} (secret {namespace}/{secret}); \
                 a cluster joined to several hubs needs one agent namespace per hub: run join again with \
                 `--agent-namespace {suggestion}` (or `flotilla unjoin --agent-namespace {namespace}` first to leave that hub)"
            )
        }
    }
}

/// The server of the current (else first) cluster of the kubeconfig under key `kubeconfig`.
fn kubeconfig_server(secret: &Secret) -> Option<String> {
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(names::KUBECONFIG_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())?;
    let config = kube::config::Kubeconfig::from_yaml(&text).ok()?;
    let current = config
        .current_context
        .as_ref()
        .and_then(|name| config.contexts.iter().find(|c| &c.name == name))
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    config
        .clusters
        .iter()
        .find(|c| current.as_ref().is_none_or(|name| &c.name == name))
        .or(config.clusters.first())
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
}

/// The managed cluster's kubeconfig (`--kubeconfig`, `--context`) reduced to the one context
/// join uses, with every file it names read in, so that it works from a Secret on another
/// cluster (hosted mode's `external-managed-kubeconfig`).
fn standalone_kubeconfig(global: &GlobalArgs) -> anyhow::Result<String> {
    use base64::engine::general_purpose::STANDARD;
    use kube::config::Kubeconfig;

    let read =
        |path: &str| std::fs::read(path).with_context(|| format!("read {path} (named in the kubeconfig)"));
    let full = crate::kube::kubeconfig(global.kubeconfig.as_deref())?;
    let name = global
        .context
        .clone()
        .or_else(|| full.current_context.clone())
        .context("the managed cluster's kubeconfig has no current context; pass --context")?;
    let named = full
        .contexts
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .with_context(|| format!("the managed cluster's kubeconfig has no context {name:?}"))?;
    let context = named
        .context
        .clone()
        .with_context(|| format!("context {name:?} of the managed cluster's kubeconfig is empty"))?;
    let mut cluster = full
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .cloned()
        .with_context(|| {
            format!(
                "the managed cluster's kubeconfig has no cluster {:?}",
                context.cluster
            )
        })?;
    if let Some(c) = cluster.cluster.as_mut()
        && let Some(path) = c.certificate_authority.take()
    {
        c.certificate_authority_data = Some(STANDARD.encode(read(&path)?));
    }
    let mut user = full
        .auth_infos
        .iter()
        .find(|u| Some(&u.name) == context.user.as_ref())
        .cloned();
    if let Some(auth) = user.as_mut().and_then(|u| u.auth_info.as_mut()) {
        if let Some(path) = auth.client_certificate.take() {
            auth.client_certificate_data = Some(STANDARD.encode(read(&path)?));
        }
        if let Some(path) = auth.client_key.take() {
            auth.client_key_data = Some(STANDARD.encode(read(&path)?).into());
        }
        if let Some(path) = auth.token_file.take() {
            auth.token = Some(String::from_utf8_lossy(&read(&path)?).trim().to_owned().into());
        }
    }
    let standalone = Kubeconfig {
        clusters: vec![cluster],
        auth_infos: user.into_iter().collect(),
        contexts: vec![named],
        current_context: Some(name),
        ..Kubeconfig::default()
    };
    serde_yaml::to_string(&standalone).context("render the managed cluster's kubeconfig")
}

/// Cluster names become namespaces on the hub.
fn validate_cluster_name(name: &str) -> anyhow::Result<()> {
    if let Some(reason) = flotilla_core::names::dns_label_problem(name) {
        bail!("--cluster-name {name:?} is not a valid namespace name: it {reason}");
    }
    Ok(())
}

/// `--proxy-url` and `--proxy-ca`, checked.
#[derive(Debug)]
struct ProxySettings {
    url: http::Uri,
    ca_pem: Option<String>,
}

fn proxy_settings(args: &JoinArgs) -> anyhow::Result<Option<ProxySettings>> {
    let Some(text) = &args.proxy_url else {
        return Ok(None);
    };
    let url: http::Uri = text
        .parse()
        .with_context(|| format!("--proxy-url {text:?} is not a URL"))?;
    match url.scheme_str() {
        Some("http" | "https") if url.host().is_some() => {}
        _ => {
            bail!("--proxy-url {text:?} must be http://host:port or https://host:port (HTTP CONNECT proxies)")
        }
    }
    let ca_pem = match &args.proxy_ca {
        None => None,
        Some(_) if url.scheme_str() == Some("http") => {
            bail!(
                "--proxy-ca is for https:// proxies; --proxy-url {text:?} is http://, whose connection is not TLS"
            )
        }
        Some(path) => {
            let pem = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
            if !pem.contains("-----BEGIN CERTIFICATE-----") {
                bail!("--proxy-ca {} holds no PEM certificate", path.display());
            }
            Some(pem)
        }
    };
    Ok(Some(ProxySettings { url, ca_pem }))
}

/// The hub's CA followed by the proxy's, as OCM documents for an https proxy: one bundle
/// verifies both.
fn ca_bundle(hub_ca: &str, proxy_ca: &str) -> String {
    format!("{}\n{}\n", hub_ca.trim_end(), proxy_ca.trim())
}

/// Reads the hub's cluster-info without trusting the connection and returns its CA once the
/// token's signature over it checks out.
///
/// With a proxy, discovery goes through it, because that is what a user behind a proxy
/// expects: where the hub is reachable only through the proxy, a direct read would fail and
/// `--hub-ca-file` would be needed for no reason. The proxy's certificate is not verified
/// here either (the same TLS settings apply to both legs); the token's signature over the
/// answer is what makes it trustworthy, wherever it came through.
async fn discover_ca(
    server: &str,
    proxy_url: Option<&http::Uri>,
    token_id: &str,
    token_secret: &str,
) -> anyhow::Result<String> {
    let url: http::Uri = server
        .parse()
        .with_context(|| format!("--hub-apiserver {server:?} is not a URL"))?;
    let mut config = kube::Config::new(url);
    // Deliberately unverified: the CA is what we are learning; the signature check below is
    // what makes the answer trustworthy.
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(format!("{token_id}.{token_secret}").into());
    config.proxy_url = proxy_url.cloned();
    let hub = flotilla_registration::agent::kubeconfig::hub_client(config, Some(Duration::from_secs(10)))
        .context("build discovery client")?;
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

/// The kubeconfig the agent bootstraps with: the hub's server and CA (with the proxy's CA
/// appended for an https proxy), the proxy if any, the token as user.
fn bootstrap_kubeconfig(
    server: &str,
    ca_pem: &str,
    token: &str,
    proxy_url: Option<&str>,
) -> anyhow::Result<String> {
    let mut cluster = json!({
        "server": server,
        "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
    });
    if let Some(proxy_url) = proxy_url {
        cluster["proxy-url"] = json!(proxy_url);
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": "hub", "cluster": cluster }],
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

    let key = klusterlets::key(&args.cluster_name, &args.agent_namespace);
    let dir = klusterlets::dir(&global.state_dir, &key);
    if let Some(old) = klusterlets::read(&global.state_dir, &key) {
        klusterlets::stop_process(old.pid, &old.exe);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    // The klusterlet talks to the cluster holding its objects: in hosted mode the hosting one.
    let kubeconfig = match (&args.hosting_kubeconfig, &global.kubeconfig) {
        (Some(path), _) | (None, Some(path)) => {
            std::path::absolute(path).with_context(|| format!("resolve {}", path.display()))?
        }
        (None, None) => {
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
    if args.hosting_kubeconfig.is_some() {
        command.args(["--mode", "hosted"]);
    } else if let Some(context) = &global.context {
        command.args(["--context", context]);
    }
    let child = command.spawn().context("start the klusterlet")?;
    let state = LocalKlusterlet {
        pid: child.id(),
        exe,
        log,
        server: Some(server.to_owned()),
    };
    klusterlets::write(&global.state_dir, &key, &state)?;
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
            // The namespaces come from `bootstrap_manifests`, under the names given to `join`.
            "Namespace" => continue,
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
                    format!(
                        "--mode={}",
                        match args.mode {
                            KlusterletMode::Default => "default",
                            KlusterletMode::Hosted => "hosted",
                        }
                    ),
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
    fn the_bootstrap_kubeconfig_carries_the_proxy_and_a_bundle_of_both_cas() {
        let bundle = ca_bundle("HUB-CA\n", "PROXY-CA");
        let text = bootstrap_kubeconfig(
            "https://hub:6443",
            &bundle,
            "abcdef.0123456789abcdef",
            Some("https://proxy:3129"),
        )
        .unwrap();
        let parsed = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.proxy_url.as_deref(), Some("https://proxy:3129"));
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster.certificate_authority_data.as_deref().unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(ca).unwrap(), "HUB-CA\nPROXY-CA\n");
        let without = bootstrap_kubeconfig("https://hub:6443", "HUB-CA", "t", None).unwrap();
        assert!(!without.contains("proxy-url"), "{without}");
    }

    fn join_args(extra: &[&str]) -> JoinArgs {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            join: JoinArgs,
        }
        let mut argv = vec![
            "join",
            "--hub-token",
            "t",
            "--hub-apiserver",
            "https://h",
            "--cluster-name",
            "c",
        ];
        argv.extend_from_slice(extra);
        Wrapper::try_parse_from(argv).unwrap().join
    }

    #[test]
    fn proxy_flags_that_cannot_work_are_refused_with_the_reason() {
        let error = |extra: &[&str]| proxy_settings(&join_args(extra)).unwrap_err().to_string();
        assert!(
            error(&["--proxy-url", "socks5://p:1080"])
                .contains("must be http://host:port or https://host:port")
        );
        assert!(error(&["--proxy-url", "p:3128"]).contains("must be http://"));
        assert!(
            error(&["--proxy-url", "http://p:3128", "--proxy-ca", "/nonexistent"])
                .contains("--proxy-ca is for https:// proxies")
        );
        assert!(
            error(&["--proxy-url", "https://p:3129", "--proxy-ca", "/nonexistent"])
                .contains("read /nonexistent")
        );
        assert!(proxy_settings(&join_args(&[])).unwrap().is_none());
        assert_eq!(
            proxy_settings(&join_args(&["--proxy-url", "http://p:3128"]))
                .unwrap()
                .unwrap()
                .url
                .host(),
            Some("p")
        );
    }

    #[test]
    fn cluster_names_must_be_namespace_names() {
        assert!(validate_cluster_name("cluster1").is_ok());
        for bad in ["", "Cluster1", "a.b", "-a", &"x".repeat(64)] {
            assert!(validate_cluster_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_external_managed_kubeconfig_is_the_chosen_context_alone_with_its_files_read_in() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("ca.pem", "CA"),
            ("cert.pem", "CERT"),
            ("key.pem", "KEY"),
            ("token", "TOKEN\n"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: other\n\
             clusters:\n\
             - {name: managed, cluster: {server: 'https://managed:6443', certificate-authority: ca.pem}}\n\
             - {name: other, cluster: {server: 'https://other:6443'}}\n\
             users:\n\
             - {name: admin, user: {client-certificate: cert.pem, client-key: key.pem}}\n\
             - {name: robot, user: {tokenFile: token}}\n\
             contexts:\n\
             - {name: managed, context: {cluster: managed, user: admin}}\n\
             - {name: robot, context: {cluster: managed, user: robot}}\n\
             - {name: other, context: {cluster: other, user: admin}}\n",
        )
        .unwrap();
        let global = |context: &str| GlobalArgs {
            kubeconfig: Some(path.clone()),
            context: Some(context.to_owned()),
            log_format: crate::cli::LogFormat::Text,
            verbose: false,
            state_dir: dir.path().to_owned(),
        };
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);

        let parse = |context: &str| -> serde_json::Value {
            serde_yaml::from_str(&standalone_kubeconfig(&global(context)).unwrap()).unwrap()
        };
        let admin = parse("managed");
        assert_eq!(admin["current-context"], "managed");
        assert_eq!(admin["contexts"].as_array().unwrap().len(), 1);
        assert_eq!(admin["clusters"].as_array().unwrap().len(), 1);
        let cluster = &admin["clusters"][0]["cluster"];
        assert_eq!(cluster["server"], "https://managed:6443");
        assert_eq!(cluster.get("certificate-authority"), None);
        assert_eq!(cluster["certificate-authority-data"], b64("CA"));
        let user = &admin["users"][0]["user"];
        assert_eq!(
            (user.get("client-certificate"), user.get("client-key")),
            (None, None)
        );
        assert_eq!(user["client-certificate-data"], b64("CERT"));
        assert_eq!(user["client-key-data"], b64("KEY"));

        let robot = parse("robot");
        let user = &robot["users"][0]["user"];
        assert_eq!(user.get("tokenFile"), None);
        assert_eq!(user["token"], "TOKEN");

        assert!(standalone_kubeconfig(&global("missing")).is_err());
    }

    #[test]
    fn a_hosted_klusterlet_deployment_runs_in_hosted_mode_and_a_default_one_does_not() {
        #[derive(clap::Parser)]
        struct Join {
            #[command(flatten)]
            args: JoinArgs,
        }
        let args = |extra: &[&str]| {
            let base = [
                "join",
                "--hub-token",
                "t",
                "--hub-apiserver",
                "https://hub",
                "--cluster-name",
                "c1",
            ];
            <Join as clap::Parser>::try_parse_from(base.iter().chain(extra)).map(|j| j.args)
        };
        let deployment_args = |args: &JoinArgs| {
            let objects = klusterlet_manifests(args).unwrap();
            let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
            deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()
        };
        let hosted = args(&["--mode", "hosted", "--hosting-kubeconfig", "hosting.kubeconfig"]).unwrap();
        assert!(
            deployment_args(&hosted)
                .as_array()
                .unwrap()
                .contains(&json!("--mode=hosted"))
        );
        let default = args(&[]).unwrap();
        assert!(
            deployment_args(&default)
                .as_array()
                .unwrap()
                .contains(&json!("--mode=default"))
        );
        assert!(
            args(&["--mode", "hosted"]).is_err(),
            "hosted mode needs --hosting-kubeconfig"
        );
    }

    #[test]
    fn the_klusterlet_manifests_parse() {
        let kinds: Vec<String> = serde_yaml::Deserializer::from_str(KLUSTERLET_MANIFESTS)
            .map(|d| serde_json::Value::deserialize(d).unwrap())
            .filter(|v| !v.is_null())
            .map(|v| v["kind"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "Namespace",
                "ServiceAccount",
                "ClusterRoleBinding",
                "Deployment"
            ]
        );
        // The namespaces of a `kubectl apply -k deploy/klusterlet` are join's defaults.
        let namespaces: Vec<String> = serde_yaml::Deserializer::from_str(KLUSTERLET_MANIFESTS)
            .map(|d| serde_json::Value::deserialize(d).unwrap())
            .filter(|v| v["kind"] == "Namespace")
            .map(|v| v["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(namespaces, [names::AGENT_NAMESPACE, names::ADDON_NAMESPACE]);
    }
}
