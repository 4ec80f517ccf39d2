//! The add-on's hub credential: the `<addon>-hub-kubeconfig` secret the klusterlet obtains and
//! rotates, mounted as files. The agent reads the files every [`CHECK`] and reconnects when they
//! changed, as the helloworld agent does. The managed cluster's CA, which goes into every token
//! Secret, is read from its connection settings here too.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use base64::Engine as _;
use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// How often the mounted hub credential is compared with the one in use.
pub const CHECK: Duration = Duration::from_secs(20);

/// The credential's files (kubeconfig, certificate, key), read at one time.
pub type Files = Vec<(PathBuf, Vec<u8>)>;

/// The bytes of every file in the directory of `kubeconfig`.
pub async fn read(kubeconfig: &Path) -> anyhow::Result<Files> {
    let dir = kubeconfig.parent().unwrap_or(Path::new("."));
    let mut files = Vec::new();
    let mut entries = tokio::fs::read_dir(dir)
        .await
        .with_context(|| format!("list the hub credential in {}", dir.display()))?;
    while let Some(entry) = entries.next_entry().await.context("list the hub credential")? {
        // Secret volumes keep their files behind `..data` links; hidden entries are the links.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if let Ok(bytes) = tokio::fs::read(&path).await {
            files.push((path, bytes));
        }
    }
    files.sort();
    Ok(files)
}

/// Returns once the credential's files differ from `current`.
pub async fn until_changed(kubeconfig: &Path, current: Files) {
    loop {
        tokio::time::sleep(CHECK).await;
        if read(kubeconfig).await.is_ok_and(|now| now != current) {
            return;
        }
    }
}

/// A client from the kubeconfig at `path`, whose certificate paths are relative to it.
pub async fn client(path: &Path) -> anyhow::Result<Client> {
    let config = config(path).await?;
    Client::try_from(config).with_context(|| format!("build a client from {}", path.display()))
}

/// The connection settings of the kubeconfig at `path`.
pub async fn config(path: &Path) -> anyhow::Result<Config> {
    let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("read {}", path.display()))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("use {}", path.display()))
}

/// The CA bundle `config` trusts for its apiserver, as PEM: what a token's user needs to reach
/// the managed cluster (OCM takes the rest config's CA data, or its CA file).
pub fn ca_pem(config: &Config) -> anyhow::Result<Vec<u8>> {
    let certificates = config
        .root_cert
        .as_ref()
        .filter(|c| !c.is_empty())
        .context("the managed cluster's connection names no CA certificate")?;
    let mut pem = String::new();
    for der in certificates {
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Ok(pem.into_bytes())
}
