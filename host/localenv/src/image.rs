//! Container images built here and pushed to the local registry, for nodes that have no other
//! registry to pull from: the sandbox (pause) image every pod needs, the Flotilla image the
//! hub and klusterlet pods run, the add-ons' agents ([`AGENT_IMAGES`]), and test workloads.
//!
//! ```text
//!   files (path, bytes, mode) ──tar──gzip──▶ one layer ─┐
//!   ImageConfig (entrypoint, user, env) ──────▶ config ──┼─▶ OCI manifest ──push──▶ 127.0.0.1:<port>/<repo>:<tag>
//! ```
//!
//! One layer per image: these images are rebuilt whole when their inputs change, so layer
//! sharing would buy nothing. The tar and OCI encodings are the `tar` and `oci-client` crates'.

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Once,
};

use flate2::{Compression, write::GzEncoder};
use oci_client::{
    Client, Reference,
    client::{ClientConfig, ClientProtocol, Config, ImageLayer},
    manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest},
    secrets::RegistryAuth,
};
use sha2::{Digest as _, Sha256};

use crate::{
    binary,
    error::{Error, Result},
    registry::Registry,
};

/// The user the Flotilla image runs as (distroless's `nonroot`): no process in it needs root.
pub const NONROOT: &str = "65532:65532";
/// Where the Flotilla image keeps the CA bundle, as Debian does (rustls-native-certs and Go read it).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The gzip level of layers: these images go to a loopback registry, where time matters more
/// than bytes.
const LAYER_COMPRESSION: Compression = Compression::fast();
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// One file of an image.
#[derive(Clone, Debug)]
pub struct ImageFile {
    /// Absolute path inside the image.
    pub path: String,
    /// Its contents.
    pub bytes: Vec<u8>,
    /// Its permission bits.
    pub mode: u32,
}

impl ImageFile {
    /// An executable at `path`.
    pub fn executable(path: &str, bytes: Vec<u8>) -> Self {
        Self {
            path: path.to_owned(),
            bytes,
            mode: 0o755,
        }
    }

    /// A read-only data file at `path`.
    pub fn data(path: &str, bytes: Vec<u8>) -> Self {
        Self {
            path: path.to_owned(),
            bytes,
            mode: 0o644,
        }
    }
}

/// What the runtime needs besides the files.
#[derive(Clone, Debug, Default)]
pub struct ImageConfig {
    /// The command (`Entrypoint`); pods may add arguments.
    pub entrypoint: Vec<String>,
    /// `uid:gid`, root when empty.
    pub user: Option<String>,
    /// `NAME=value` entries.
    pub env: Vec<String>,
}

/// Builds a one-layer image of `files` and pushes it to `registry` as `<repository>:<tag>`;
/// returns the reference by digest (`127.0.0.1:<port>/<repository>@sha256:…`), which a node
/// pulls exactly, whatever the tag points to later.
pub async fn push(
    registry: &Registry,
    repository: &str,
    tag: &str,
    files: &[ImageFile],
    config: &ImageConfig,
) -> Result<String> {
    let reference = registry.reference(repository, tag);
    let fail = |what: &str, e: String| Error::Image(format!("{what} {reference}: {e}"));
    let layer_tar = layer(files).map_err(|e| fail("build the layer of", e))?;
    let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&layer_tar)));
    let mut gzip = GzEncoder::new(Vec::new(), LAYER_COMPRESSION);
    gzip.write_all(&layer_tar)
        .map_err(|e| fail("compress the layer of", e.to_string()))?;
    let compressed = gzip
        .finish()
        .map_err(|e| fail("compress the layer of", e.to_string()))?;
    let config_bytes = serde_json::to_vec(&image_config(config, &diff_id))
        .map_err(|e| fail("encode the config of", e.to_string()))?;

    let layer = ImageLayer::new(compressed, LAYER_MEDIA_TYPE.to_owned(), None);
    let config = Config::new(config_bytes, CONFIG_MEDIA_TYPE.to_owned(), None);
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    let parsed: Reference = reference
        .parse()
        .map_err(|e: oci_client::ParseError| fail("parse", e.to_string()))?;
    let auth = match registry.credentials() {
        Some((user, password)) => RegistryAuth::Basic(user.to_owned(), password.to_owned()),
        None => RegistryAuth::Anonymous,
    };
    let client = client();
    client
        .push(&parsed, &[layer], config, &auth, Some(manifest))
        .await
        .map_err(|e| fail("push", e.to_string()))?;
    let digest = client
        .fetch_manifest_digest(&parsed, &auth)
        .await
        .map_err(|e| fail("read the digest of", e.to_string()))?;
    Ok(format!("{}/{repository}@{digest}", registry.host()))
}

/// The OCI image configuration: linux/amd64, one layer, the runtime settings.
fn image_config(config: &ImageConfig, diff_id: &str) -> serde_json::Value {
    let mut runtime = serde_json::json!({
        "Entrypoint": config.entrypoint,
        "Env": config.env,
    });
    if let Some(user) = &config.user {
        runtime["User"] = user.clone().into();
    }
    serde_json::json!({
        "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        "os": "linux",
        "config": runtime,
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
    })
}

/// A tar of `files`, with an entry for every parent directory (runtimes resolve paths through
/// them) and fixed owners and times, so equal inputs give equal layers.
fn layer(files: &[ImageFile]) -> std::result::Result<Vec<u8>, String> {
    let mut directories = BTreeSet::new();
    for file in files {
        if !file.path.starts_with('/') || file.path.split('/').any(|part| part == "..") {
            return Err(format!("{} is not an absolute path inside the image", file.path));
        }
        let mut parent = Path::new(&file.path).parent();
        while let Some(dir) = parent.filter(|d| *d != Path::new("/")) {
            directories.insert(dir.to_path_buf());
            parent = dir.parent();
        }
    }
    let mut builder = tar::Builder::new(Vec::new());
    for dir in &directories {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_size(0);
        header.set_mtime(0);
        let path = dir.strip_prefix("/").unwrap_or(dir);
        builder
            .append_data(&mut header, path, std::io::empty())
            .map_err(|e| format!("add {}: {e}", dir.display()))?;
    }
    for file in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(file.mode);
        header.set_size(file.bytes.len() as u64);
        header.set_mtime(0);
        builder
            .append_data(
                &mut header,
                file.path.trim_start_matches('/'),
                file.bytes.as_slice(),
            )
            .map_err(|e| format!("add {}: {e}", file.path))?;
    }
    builder.into_inner().map_err(|e| format!("finish the tar: {e}"))
}

/// An OCI client for the loopback registry (plain HTTP).
fn client() -> Client {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // oci-client is built without a default provider; another part of the process may
        // have installed one already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

/// The sandbox image every pod of a node starts with: a static `pause` that sleeps until
/// signalled and reaps orphans. Built here from `pause.c` (no public registry is reachable).
pub async fn push_pause(registry: &Registry) -> Result<String> {
    let binary = tokio::task::spawn_blocking(pause_binary)
        .await
        .map_err(|e| Error::Binary(format!("build task: {e}")))??;
    let bytes = std::fs::read(&binary).map_err(crate::error::io("read the pause binary"))?;
    push(
        registry,
        PAUSE.0,
        PAUSE.1,
        &[ImageFile::executable("/pause", bytes)],
        &ImageConfig {
            entrypoint: vec!["/pause".into()],
            ..ImageConfig::default()
        },
    )
    .await
}

/// The pause program, compiled once with the machine's C compiler (static, so the image needs
/// no libc) and cached by its source.
pub fn pause_binary() -> Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("pause");
    let key = binary::source_key(&source, "cc -static -Os", |name| name.ends_with(".c"))?;
    binary::cached_artifact("pause", &key, "pause", |out| {
        let output = Command::new("cc")
            .args(["-static", "-Os", "-s", "-o"])
            .arg(out)
            .arg(source.join("pause.c"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Binary(format!("run `cc` (a C compiler builds the pause image): {e}")))?;
        if !output.status.success() {
            return Err(Error::Binary(format!(
                "`cc` failed to build pause: {}",
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(())
    })
}

/// The registry host nodes resolve to the local registry (`certs.d/flotilla.local`), so that
/// manifests can name images built here independently of the registry's port.
pub const LOCAL_IMAGE_HOST: &str = "flotilla.local";
/// The pause image's repository and tag (every node's sandbox image, and a do-nothing workload).
pub const PAUSE: (&str, &str) = ("flotilla/pause", "3.10");
/// The helloworld agent's repository and tag; the helloworld plugin names
/// `flotilla.local/addons/helloworld-agent:0.1.0`.
pub const HELLOWORLD_AGENT: (&str, &str) = ("addons/helloworld-agent", "0.1.0");
/// The resource-usage-collect agent's repository and tag (plugins/resource-usage).
pub const RESOURCE_USAGE_AGENT: (&str, &str) = ("addons/resource-usage-agent", "0.1.0");
/// The managed-serviceaccount agent's repository and tag (plugins/managed-serviceaccount).
pub const MANAGED_SERVICEACCOUNT_AGENT: (&str, &str) = ("addons/managed-serviceaccount-agent", "0.1.0");
/// The cluster-proxy agent's repository and tag (plugins/cluster-proxy): the reverse tunnel.
pub const CLUSTER_PROXY_AGENT: (&str, &str) = ("addons/cluster-proxy-agent", "0.1.0");

/// What an agent image's program is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentProgram {
    /// A package of the root workspace, built by [`crate::plugins::agent`].
    Package(&'static str),
    /// The static reverse-tunnel binary of [`crate::tunnel::tunnel_binary`].
    Tunnel,
}

impl AgentProgram {
    /// The program, built if needed (blocking: it may run cargo or go).
    pub fn build(self) -> Result<PathBuf> {
        match self {
            Self::Package(package) => crate::plugins::agent(package),
            Self::Tunnel => crate::tunnel::tunnel_binary(),
        }
    }
}

/// An add-on agent image that a plugin of `plugins/` names as `flotilla.local/<image>`.
#[derive(Clone, Copy, Debug)]
pub struct AgentImage {
    /// Repository and tag.
    pub image: (&'static str, &'static str),
    /// Where the program is in the image, the plugin's command (and the image's entrypoint).
    pub path: &'static str,
    /// What the program is built from.
    pub program: AgentProgram,
}

/// Every agent image the plugins name: one table, so that adding an add-on is one entry.
pub const AGENT_IMAGES: [AgentImage; 4] = [
    AgentImage {
        image: HELLOWORLD_AGENT,
        path: "/helloworld-agent",
        program: AgentProgram::Package(crate::plugins::HELLOWORLD_AGENT),
    },
    AgentImage {
        image: RESOURCE_USAGE_AGENT,
        path: "/resource-usage-agent",
        program: AgentProgram::Package("resource-usage-agent"),
    },
    AgentImage {
        image: MANAGED_SERVICEACCOUNT_AGENT,
        path: "/managed-serviceaccount-agent",
        program: AgentProgram::Package("managed-serviceaccount-agent"),
    },
    AgentImage {
        image: CLUSTER_PROXY_AGENT,
        path: "/flotilla-tunnel",
        program: AgentProgram::Tunnel,
    },
];

/// The name nodes pull an image pushed here by: `flotilla.local/<repository>:<tag>`.
pub fn local_name((repository, tag): (&str, &str)) -> String {
    format!("{LOCAL_IMAGE_HOST}/{repository}:{tag}")
}

/// Pushes the Flotilla image: `binary` (debug sections stripped, the result cached by the
/// binary's contents), the shared libraries it links, the static reverse-tunnel binary at
/// [`TUNNEL_PROGRAM`] (deploy/hub's tunnel server runs it) and the host's CA bundle so that
/// HTTPS plugin pulls work inside it: the layout `deploy/Containerfile` builds, from the binary
/// at hand instead of a fresh release build. Runs as [`NONROOT`], with the plugin cache on the
/// volume `deploy/hub` mounts. Returns the reference by digest.
pub async fn push_flotilla(registry: &Registry, binary: &Path) -> Result<String> {
    push_flotilla_trusting(registry, binary, "").await
}

/// [`push_flotilla`] with `ca_pem` added to the image's CA bundle, as an operator adds a private
/// registry's CA: plugin pulls over HTTPS verify with the bundle in the image.
pub async fn push_flotilla_trusting(registry: &Registry, binary: &Path, ca_pem: &str) -> Result<String> {
    let tunnel = tokio::task::spawn_blocking(crate::tunnel::tunnel_binary)
        .await
        .map_err(|e| Error::Binary(format!("build task: {e}")))??;
    push_program(
        registry,
        ("flotilla/flotilla", "local"),
        binary,
        "/flotilla",
        vec!["FLOTILLA_CACHE_DIR=/var/cache/flotilla".into()],
        ca_pem,
        &[(tunnel, TUNNEL_PROGRAM)],
    )
    .await
}

/// Where the Flotilla image holds the reverse-tunnel binary.
pub const TUNNEL_PROGRAM: &str = "/flotilla-tunnel";

/// Pushes agent image `image` (an entry of [`AGENT_IMAGES`]), building its program first if
/// needed. Returns the reference by digest.
pub async fn push_agent(registry: &Registry, image: (&str, &str)) -> Result<String> {
    let agent = agent_image(image)?;
    let binary = tokio::task::spawn_blocking(move || agent.program.build())
        .await
        .map_err(|e| Error::Binary(format!("build task: {e}")))??;
    push_agent_binary(registry, image, &binary).await
}

/// Pushes agent image `image` (an entry of [`AGENT_IMAGES`]) of the program `binary`.
pub async fn push_agent_binary(registry: &Registry, image: (&str, &str), binary: &Path) -> Result<String> {
    let agent = agent_image(image)?;
    push_program(registry, agent.image, binary, agent.path, Vec::new(), "", &[]).await
}

/// The entry of [`AGENT_IMAGES`] for `image`.
fn agent_image(image: (&str, &str)) -> Result<&'static AgentImage> {
    AGENT_IMAGES
        .iter()
        .find(|agent| agent.image == image)
        .ok_or_else(|| Error::Image(format!("{}:{} is no agent image", image.0, image.1)))
}

/// Pushes the helloworld agent image ([`HELLOWORLD_AGENT`]), building the agent if needed.
pub async fn push_helloworld_agent(registry: &Registry) -> Result<String> {
    push_agent(registry, HELLOWORLD_AGENT).await
}

/// Pushes the helloworld agent image ([`HELLOWORLD_AGENT`]) of the agent program `binary`.
pub async fn push_helloworld_agent_binary(registry: &Registry, binary: &Path) -> Result<String> {
    push_agent_binary(registry, HELLOWORLD_AGENT, binary).await
}

/// Pushes the resource-usage-collect agent image ([`RESOURCE_USAGE_AGENT`]), building the agent
/// if needed.
pub async fn push_resource_usage_agent(registry: &Registry) -> Result<String> {
    push_agent(registry, RESOURCE_USAGE_AGENT).await
}

/// Pushes the managed-serviceaccount agent image ([`MANAGED_SERVICEACCOUNT_AGENT`]), building
/// the agent if needed.
pub async fn push_managed_serviceaccount_agent(registry: &Registry) -> Result<String> {
    push_agent(registry, MANAGED_SERVICEACCOUNT_AGENT).await
}

/// Pushes the cluster-proxy agent image ([`CLUSTER_PROXY_AGENT`]): the static tunnel binary,
/// built if needed.
pub async fn push_cluster_proxy_agent(registry: &Registry) -> Result<String> {
    push_agent(registry, CLUSTER_PROXY_AGENT).await
}

/// Pushes an image of one program: `binary` at `path` (debug sections stripped, cached by
/// contents), the libraries it links (none for a static one) and the host's CA bundle followed by
/// `extra_ca_pem`, and the static programs `companions` at their paths, run as [`NONROOT`] with
/// `env` (plus `SSL_CERT_FILE`). Returns the reference by digest.
async fn push_program(
    registry: &Registry,
    (repository, tag): (&str, &str),
    binary: &Path,
    path: &str,
    mut env: Vec<String>,
    extra_ca_pem: &str,
    companions: &[(PathBuf, &str)],
) -> Result<String> {
    let binary = binary.to_path_buf();
    let in_image = path.to_owned();
    let extra_ca_pem = extra_ca_pem.to_owned();
    let companions: Vec<(PathBuf, String)> = companions
        .iter()
        .map(|(program, path)| (program.clone(), (*path).to_owned()))
        .collect();
    let files = tokio::task::spawn_blocking(move || {
        let mut files = program_files(&binary, &in_image, &extra_ca_pem)?;
        for (program, path) in &companions {
            let bytes =
                std::fs::read(program).map_err(crate::error::io(format!("read {}", program.display())))?;
            files.push(ImageFile::executable(path, bytes));
        }
        Ok::<_, Error>(files)
    })
    .await
    .map_err(|e| Error::Binary(format!("image task: {e}")))??;
    env.push(format!("SSL_CERT_FILE={CA_BUNDLE}"));
    push(
        registry,
        repository,
        tag,
        &files,
        &ImageConfig {
            entrypoint: vec![path.to_owned()],
            user: Some(NONROOT.into()),
            env,
        },
    )
    .await
}

fn program_files(binary: &Path, path: &str, extra_ca_pem: &str) -> Result<Vec<ImageFile>> {
    let read =
        |path: &Path| std::fs::read(path).map_err(crate::error::io(format!("read {}", path.display())));
    let bytes = read(binary)?;
    let key = hex::encode(Sha256::digest(&bytes));
    let name = Path::new(path)
        .file_name()
        .map_or_else(|| "program".to_owned(), |n| n.to_string_lossy().into_owned());
    let stripped = binary::cached_artifact("program-image", &key, &name, |out| {
        let status = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(out)
            .arg(binary)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::Binary(format!("run `strip`: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Binary(format!("`strip` failed with {status}")))
        }
    })?;
    let mut files = vec![ImageFile::executable(path, read(&stripped)?)];
    for library in linked_libraries(binary)? {
        let path = library.to_string_lossy().into_owned();
        files.push(ImageFile::executable(&path, read(&library)?));
    }
    let mut bundle = read(Path::new(CA_BUNDLE))?;
    if !extra_ca_pem.is_empty() {
        if !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        bundle.extend_from_slice(extra_ca_pem.as_bytes());
    }
    files.push(ImageFile::data(CA_BUNDLE, bundle));
    Ok(files)
}

/// The shared libraries `binary` loads, and its loader, as `ldd` resolves them on this host.
pub fn linked_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Binary(format!("run `ldd`: {e}")))?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(parse_ldd(&text))
}

/// The absolute paths in `ldd` output: `libc.so.6 => /lib/…/libc.so.6 (0x…)` and the loader
/// line `/lib64/ld-linux-x86-64.so.2 (0x…)`; `linux-vdso.so.1` has none.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let target = line.split("=>").last()?.trim();
            let path = target.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_loader_but_not_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn layer_holds_every_parent_directory_before_the_files() {
        let tar = layer(&[ImageFile::data("/etc/ssl/certs/ca.crt", b"x".to_vec())]).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, bool)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().entry_type().is_dir(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("etc".into(), true),
                ("etc/ssl".into(), true),
                ("etc/ssl/certs".into(), true),
                ("etc/ssl/certs/ca.crt".into(), false)
            ]
        );
    }

    /// The plugins name these images and run these programs: a renamed image or program on
    /// either side would leave the agents' pods unable to pull or start.
    #[test]
    fn every_agent_image_is_the_one_its_plugin_names_with_the_program_it_runs() {
        for agent in AGENT_IMAGES {
            let addon = agent
                .image
                .0
                .trim_start_matches("addons/")
                .trim_end_matches("-agent");
            let plugin = crate::plugins::source_dir().join(addon).join("src/lib.rs");
            let source = std::fs::read_to_string(&plugin).unwrap();
            let name = format!("\"{}\"", local_name(agent.image));
            let path = format!("\"{}\"", agent.path);
            assert!(source.contains(&name), "{} names no {name}", plugin.display());
            assert!(source.contains(&path), "{} runs no {path}", plugin.display());
        }
    }

    #[test]
    fn layer_refuses_paths_that_leave_the_image() {
        assert!(layer(&[ImageFile::data("relative", Vec::new())]).is_err());
        assert!(layer(&[ImageFile::data("/a/../../b", Vec::new())]).is_err());
    }
}
