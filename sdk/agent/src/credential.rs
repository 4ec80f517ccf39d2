//! The add-on's hub credential: Secret `<addon>-hub-kubeconfig`, which the klusterlet obtains
//! (a CSR signed by the hub) and rotates before it expires, mounted into the agent's pod as
//! files (`kubeconfig`, `tls.crt`, `tls.key`; the kubeconfig names the other two by relative
//! path).
//!
//! The kubelet updates a mounted Secret in place, by swapping a hidden `..data` link, so a
//! rotated credential appears under the same paths without a restart; but a client built from
//! the old files keeps presenting the old certificate. [`HubCredential::serve`] therefore
//! rereads the files every [`CHECK`] and, when they changed, drops the client and the work done
//! with it, and starts again with a new one:
//!
//! ```text
//!   loop:  read files ─▶ client ─▶ work(client) ─────────────┐ whichever ends first
//!            │ error      │ error    until_changed(files) ───┘   (then: loop again)
//!            └────────────┴─▶ log, wait CHECK, loop again
//! ```
//!
//! [`config`] and [`client`] also serve for other kubeconfig files (a `--kubeconfig` for the
//! managed cluster, say).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{Error, Result, chain};

/// How often the mounted hub credential is compared with the one in use, and how long a failed
/// connection waits before the next try.
pub const CHECK: Duration = Duration::from_secs(20);

/// The credential's files (kubeconfig, certificate, key) with their bytes, read at one time and
/// sorted by path.
pub type Files = Vec<(PathBuf, Vec<u8>)>;

/// The hub credential mounted at the directory of a kubeconfig.
#[derive(Clone, Debug)]
pub struct HubCredential {
    /// The kubeconfig; its directory is the mounted Secret.
    kubeconfig: PathBuf,
    /// Time between comparisons of the files, and between connection attempts.
    check: Duration,
}

// === impl HubCredential ===

impl HubCredential {
    /// The credential whose kubeconfig is `kubeconfig` (`--hub-kubeconfig`), checked every
    /// [`CHECK`].
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Self {
        Self {
            kubeconfig: kubeconfig.into(),
            check: CHECK,
        }
    }

    /// The same, checked every `check` instead.
    pub fn checked_every(self, check: Duration) -> Self {
        Self { check, ..self }
    }

    /// The kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The bytes of every file in the kubeconfig's directory. Hidden entries are skipped: in a
    /// Secret volume they are the `..data` link and the timestamped directory it points to,
    /// while the visible names are links through `..data` to the current files. A file that
    /// cannot be read is left out.
    pub async fn read(&self) -> Result<Files> {
        let dir = self.kubeconfig.parent().unwrap_or(Path::new("."));
        let listing = |source| Error::ListCredential {
            dir: dir.to_owned(),
            source,
        };
        let mut files = Vec::new();
        let mut entries = tokio::fs::read_dir(dir).await.map_err(listing)?;
        while let Some(entry) = entries.next_entry().await.map_err(listing)? {
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

    /// Returns once the files differ from `current` (a read that fails counts as no change).
    pub async fn until_changed(&self, current: &Files) {
        loop {
            tokio::time::sleep(self.check).await;
            if self.read().await.is_ok_and(|now| now != *current) {
                return;
            }
        }
    }

    /// The files as they are now, and a client built from them.
    pub async fn connect(&self) -> Result<(Client, Files)> {
        let files = self.read().await?;
        let client = client(&self.kubeconfig).await?;
        Ok((client, files))
    }

    /// Runs `work` with a client of the current credential for as long as it is polled: again
    /// with a new client whenever the files change (the running `work` is dropped) or `work`
    /// returns. A credential that cannot be read or used is logged to stderr as
    /// `<agent>: <error and its causes>` and tried again after a check period; a change is
    /// logged as `<agent>: the hub credential changed; reconnecting`.
    pub async fn serve(&self, agent: &str, mut work: impl AsyncFnMut(Client)) {
        loop {
            let (hub, files) = match self.connect().await {
                Ok(connected) => connected,
                Err(error) => {
                    eprintln!("{agent}: {}", chain(&error));
                    tokio::time::sleep(self.check).await;
                    continue;
                }
            };
            tokio::select! {
                () = work(hub) => {}
                () = self.until_changed(&files) => {
                    eprintln!("{agent}: the hub credential changed; reconnecting");
                }
            }
        }
    }
}

/// The connection settings of the kubeconfig at `path` (its current context), whose
/// certificate paths are relative to it.
pub async fn config(path: &Path) -> Result<Config> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|source| Error::ReadKubeconfig {
        path: path.to_owned(),
        source,
    })?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| Error::UseKubeconfig {
            path: path.to_owned(),
            source,
        })
}

/// A client from the kubeconfig at `path`, whose certificate paths are relative to it.
pub async fn client(path: &Path) -> Result<Client> {
    let config = config(path).await?;
    Client::try_from(config).map_err(|source| Error::BuildClient {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests;
