//! `flotilla plugin run|inspect|push`: work with add-on plugins outside a hub (`register`, which
//! talks to the hub, lives in `register.rs`).
//!
//! * `run` loads a component into the same runtime the hub uses, with the same default limits an
//!   `AddOnPlugin` gets, and calls one hook with inputs read from Kubernetes YAML (the objects the
//!   add-on manager would pass: `ManagedCluster`, `ManagedClusterAddOn`, config objects, a
//!   `CertificateSigningRequest`). A fault or a plugin error is printed and exits non-zero.
//! * `inspect` shows what a file (or an OCI artifact) is without compiling it.
//! * `push` publishes a component in the CNCF Wasm OCI layout the hub pulls.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand, ValueEnum};
use flotilla_core::addon::permissions::Permission;
use flotilla_plugin_loader::fetch::oci::{self, RegistryAuth};
use flotilla_wasm::inspect::Inspection;
use flotilla_wasm::types::{CsrDecision, FeedbackField, FeedbackValue, HealthStatus, ResourceIdentifier};
use flotilla_wasm::{Limits, Runtime, RuntimeConfig, inputs};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::GlobalArgs;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one hook of a plugin through the host runtime, with production limits, and print the
    /// result.
    Run(RunArgs),
    /// Show a plugin's contract version, exports, imports, digest and size (a file or an OCI
    /// reference).
    Inspect(InspectArgs),
    /// Publish a plugin to an OCI registry in the CNCF Wasm artifact layout.
    Push(PushArgs),
    /// Register a plugin with the hub: an `AddOnPlugin` that drives the add-on of the same name.
    Register(crate::register::RegisterArgs),
}

/// The hooks of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Hook {
    /// The add-on's options (registrations, health, configs, install namespace).
    Describe,
    /// The objects to deploy on the cluster.
    Manifests,
    /// The verdict on an agent's CSR (needs --csr).
    ApproveCsr,
    /// Roles and RoleBindings in the cluster namespace on the hub.
    HubPermissions,
    /// Health from probe feedback (--feedback).
    ProbeHealth,
}

/// Output formats of `run` and `inspect`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// YAML.
    #[default]
    Yaml,
    /// JSON.
    Json,
    /// Text for people (`inspect` only; `run` prints YAML).
    Text,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plugin component (.wasm).
    pub file: PathBuf,
    /// The hook to call.
    #[arg(value_enum)]
    pub hook: Hook,
    /// A ManagedCluster (YAML or JSON). Required for every hook but describe.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// A ManagedClusterAddOn (YAML or JSON). Required for every hook but describe.
    #[arg(long)]
    pub addon: Option<PathBuf>,
    /// A config object resolved for the add-on (AddOnDeploymentConfig, ConfigMap, ...);
    /// repeatable, and a file may hold several YAML documents. Later configs win.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// A CertificateSigningRequest (for approve-csr).
    #[arg(long)]
    pub csr: Option<PathBuf>,
    /// Status feedback for probe-health: a YAML list of {resource: {group, resource, name,
    /// namespace}, name, value} where value is an integer, string, boolean or JSON object.
    #[arg(long)]
    pub feedback: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The `AddOnPlugin` `spec.limits`, defaulting to the same safe values.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Wall-clock limit of the call, in milliseconds (AddOnPlugin default 5000).
    #[arg(long)]
    pub timeout_millis: Option<u64>,
    /// Memory limit of the instance, in MiB (AddOnPlugin default 64).
    #[arg(long = "memory-mib")]
    pub memory_mib: Option<u64>,
    /// Most bytes the call may return (AddOnPlugin default 1048576).
    #[arg(long)]
    pub max_output_bytes: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Talk plain HTTP to the registry (loopback test registries).
    #[arg(long)]
    pub insecure: bool,
    /// Registry user; the password comes from --password, --password-stdin or
    /// $FLOTILLA_REGISTRY_PASSWORD. Without it, credentials come from the docker config.
    #[arg(long, short)]
    pub username: Option<String>,
    /// Registry password (prefer --password-stdin).
    #[arg(long, short, env = "FLOTILLA_REGISTRY_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Read the registry password from standard input.
    #[arg(long, conflicts_with = "password")]
    pub password_stdin: bool,
    /// Docker config with registry credentials (default: $DOCKER_CONFIG/config.json, then
    /// ~/.docker/config.json).
    #[arg(long)]
    pub docker_config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A component file, or an OCI reference (registry/repository:tag or @sha256:...).
    pub target: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The plugin component (.wasm).
    pub file: PathBuf,
    /// Where to push: registry/repository:tag.
    pub reference: String,
    /// Also sign the pushed manifest with this PEM private key (ECDSA P-256, PKCS#8 or SEC1)
    /// and push the signature in cosign's layout (tag `sha256-<hex>.sig`), for AddOnPlugins
    /// whose `spec.verification.publicKey` is the matching public key.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Register(args) => crate::register::register(global, &args).await,
            Command::Run(args) => run(args).await,
            Command::Inspect(args) => inspect(args).await,
            Command::Push(args) => push(args).await,
        }
    }
}

// === run ===

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let bytes = read(&args.file)?;
    let limits = Limits::from_spec(
        args.limits.timeout_millis,
        args.limits.memory_mib,
        args.limits.max_output_bytes,
    );
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(flotilla_localenv::binary::cache_dir().join("plugin-artifacts")),
        ..RuntimeConfig::default()
    })
    .context("start the plugin runtime")?;

    let addon_object = args.addon.as_deref().map(read_object).transpose()?;
    let addon_name = addon_object
        .as_ref()
        .and_then(|a| a.pointer("/metadata/name").and_then(Value::as_str))
        .unwrap_or("cli")
        .to_owned();
    let plugin = runtime
        .load(&addon_name, bytes, limits)
        .await
        .with_context(|| format!("load {}", args.file.display()))?;

    if args.hook == Hook::Describe {
        return print(
            args.output,
            &json!({
                "digest": plugin.digest().to_string(),
                "witVersion": plugin.wit_version().to_string(),
                "options": plugin.options(),
            }),
        );
    }

    let mut configs = Vec::new();
    for path in &args.configs {
        for object in read_objects(path)? {
            configs.push(inputs::resolved_config(&object, None).with_context(|| path.display().to_string())?);
        }
    }
    let cluster_path = args
        .cluster
        .as_deref()
        .context("--cluster (a ManagedCluster YAML) is required for this hook")?;
    let cluster = inputs::cluster_from_value(&read_object(cluster_path)?)
        .with_context(|| cluster_path.display().to_string())?;
    let addon_object =
        addon_object.context("--addon (a ManagedClusterAddOn YAML) is required for this hook")?;
    let addon = inputs::addon_from_value(
        &addon_object,
        &configs,
        plugin.options().default_install_namespace.as_deref(),
    )?;

    match args.hook {
        Hook::Describe => unreachable!("handled above"),
        Hook::Manifests => {
            let manifests = plugin.manifests(&cluster, &addon, &configs).await?;
            let objects: Vec<&Value> = manifests.iter().map(|m| &m.object).collect();
            print(args.output, &objects)
        }
        Hook::HubPermissions => {
            let permissions = plugin.hub_permissions(&cluster, &addon).await?;
            let objects: Vec<Value> = permissions.iter().map(Permission::to_value).collect();
            print(args.output, &objects)
        }
        Hook::ApproveCsr => {
            let path = args
                .csr
                .as_deref()
                .context("--csr (a CertificateSigningRequest YAML) is required for approve-csr")?;
            let csr = inputs::csr(&read_object(path)?).with_context(|| path.display().to_string())?;
            let answer = match plugin.try_approve_csr(&cluster, &addon, &csr).await? {
                CsrDecision::Approve => json!({"decision": "approve"}),
                CsrDecision::Deny(reason) => json!({"decision": "deny", "reason": reason}),
            };
            print(args.output, &answer)
        }
        Hook::ProbeHealth => {
            let fields = match &args.feedback {
                Some(path) => feedback(path)?,
                None => Vec::new(),
            };
            let result = plugin.try_probe_health(&cluster, &addon, &fields).await?;
            let status = match result.status {
                HealthStatus::Available => "available",
                HealthStatus::Unavailable => "unavailable",
                HealthStatus::Unknown => "unknown",
            };
            print(args.output, &json!({"status": status, "message": result.message}))
        }
    }
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("read {}", path.display()))
}

/// Every YAML (or JSON) document in `path`, skipping empty ones.
fn read_objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)
            .with_context(|| format!("parse {} as YAML", path.display()))?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

fn read_object(path: &Path) -> anyhow::Result<Value> {
    let mut objects = read_objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        n => bail!("{}: want one object, found {n}", path.display()),
    }
}

fn feedback(path: &Path) -> anyhow::Result<Vec<FeedbackField>> {
    let list = read_object(path)?;
    let items = list
        .as_array()
        .with_context(|| format!("{}: want a YAML list", path.display()))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = |p: &str| {
                item.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let value = match item.get("value") {
                Some(Value::Number(n)) if n.is_i64() => {
                    FeedbackValue::Integer(n.as_i64().unwrap_or_default())
                }
                Some(Value::Bool(b)) => FeedbackValue::Boolean(*b),
                Some(Value::String(s)) => FeedbackValue::Text(s.clone()),
                Some(v @ (Value::Object(_) | Value::Array(_))) => FeedbackValue::Json(v.to_string()),
                other => bail!(
                    "{} item {i}: value {other:?} is not an integer, string, boolean or JSON",
                    path.display()
                ),
            };
            Ok(FeedbackField {
                resource: ResourceIdentifier {
                    group: text("/resource/group"),
                    resource: text("/resource/resource"),
                    name: text("/resource/name"),
                    namespace: text("/resource/namespace"),
                },
                name: text("/name"),
                value,
            })
        })
        .collect()
}

fn print<T: Serialize + ?Sized>(format: Format, value: &T) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml | Format::Text => print!("{}", serde_yaml::to_string(value)?),
    }
    Ok(())
}

// === registry access ===

fn registry_auth(args: &RegistryArgs, registry: &str) -> anyhow::Result<RegistryAuth> {
    if let Some(user) = &args.username {
        let password = if args.password_stdin {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("read the password from standard input")?;
            text.trim_end_matches(['\r', '\n']).to_owned()
        } else {
            args.password
                .clone()
                .context("--username needs --password, --password-stdin or $FLOTILLA_REGISTRY_PASSWORD")?
        };
        return Ok(RegistryAuth::Basic(user.clone(), password));
    }
    let path = args.docker_config.clone().or_else(|| {
        let candidates = [
            std::env::var_os("DOCKER_CONFIG").map(|d| PathBuf::from(d).join("config.json")),
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")),
        ];
        candidates.into_iter().flatten().find(|p| p.is_file())
    });
    let Some(path) = path else {
        return Ok(RegistryAuth::Anonymous);
    };
    let config = read(&path)?;
    let found = oci::credentials_for(&config, registry)
        .map_err(anyhow::Error::msg)
        .with_context(|| path.display().to_string())?;
    Ok(found.unwrap_or(RegistryAuth::Anonymous))
}

// === inspect ===

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inspected {
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(flatten)]
    inspection: Inspection,
}

async fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let path = Path::new(&args.target);
    let (bytes, source) = if path.exists() {
        (read(path)?, None)
    } else if looks_like_reference(&args.target) {
        let registry = oci::registry_of(&args.target)?;
        let auth = registry_auth(&args.registry, &registry)?;
        let fetched = oci::pull(
            &args.target,
            &auth,
            args.registry.insecure,
            flotilla_plugin_loader::fetch::DEFAULT_MAX_BYTES,
            None,
        )
        .await
        .with_context(|| format!("pull {}", args.target))?;
        (fetched.component.into_bytes(), Some(fetched.origin))
    } else {
        bail!(
            "{}: no such file, and not an OCI reference (registry/repository:tag)",
            args.target
        );
    };
    let out = Inspected {
        source,
        inspection: flotilla_wasm::inspect::inspect(&bytes),
    };
    match args.output {
        Format::Text => print_inspection(&out),
        other => print(other, &out),
    }
}

/// `host[:port]/repo...`: a reference names a registry host (with a dot or a port, or
/// `localhost`) and a repository.
fn looks_like_reference(s: &str) -> bool {
    let Some((host, rest)) = s.split_once('/') else {
        return false;
    };
    !rest.is_empty() && (host.contains('.') || host.contains(':') || host == "localhost")
}

fn print_inspection(out: &Inspected) -> anyhow::Result<()> {
    let i = &out.inspection;
    if let Some(source) = &out.source {
        println!("source:      {source}");
    }
    println!("digest:      {}", i.digest);
    println!("size:        {} bytes", i.size);
    println!(
        "kind:        {}",
        serde_json::to_value(i.kind)?.as_str().unwrap_or_default()
    );
    println!(
        "wit version: {} (this host runs {})",
        i.wit_version.as_deref().unwrap_or("none"),
        i.supported_wit
    );
    println!("exports:");
    for e in &i.exports {
        println!("  {e}");
    }
    println!("imports:");
    for e in &i.imports {
        println!("  {e}");
    }
    match &i.refusal {
        None => println!("verdict:     accepted by the host's import and version checks"),
        Some(reason) => println!("verdict:     refused: {reason}"),
    }
    Ok(())
}

// === push ===

async fn push(args: PushArgs) -> anyhow::Result<()> {
    let bytes = read(&args.file)?;
    // Read the key first: a bad key path fails before anything is uploaded.
    let key = args
        .sign
        .as_deref()
        .map(|path| std::fs::read_to_string(path).with_context(|| format!("read {}", path.display())))
        .transpose()?;
    let registry = oci::registry_of(&args.reference)?;
    let auth = registry_auth(&args.registry, &registry)?;
    let pushed = tokio::time::timeout(
        Duration::from_secs(600),
        oci::push(&bytes, &args.reference, &auth, args.registry.insecure),
    )
    .await
    .context("push timed out after 10 minutes")?
    .with_context(|| format!("push {} to {}", args.file.display(), args.reference))?;
    let repository = args
        .reference
        .rsplit_once(':')
        .filter(|(repo, tag)| !tag.contains('/') && repo.contains('/'))
        .map_or(args.reference.as_str(), |(repo, _)| repo);
    println!("pushed {} ({} bytes)", pushed.reference, pushed.size);
    println!("manifest: {repository}@{}", pushed.manifest_digest);
    println!("digest:   {}   (spec.digest of the AddOnPlugin)", pushed.digest);
    if let Some(key) = key {
        let signature = oci::push_signature(
            &args.reference,
            &pushed.manifest_digest,
            &key,
            &auth,
            args.registry.insecure,
        )
        .await
        .with_context(|| format!("sign {}", args.reference))?;
        println!("signed:   {signature}");
    }
    Ok(())
}
