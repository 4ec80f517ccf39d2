//! The credential as the kubelet mounts a Secret: visible names linked through `..data` to a
//! timestamped directory, updated by swapping the link.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use super::*;

const KUBECONFIG: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: hub
  context:
    cluster: hub
    user: agent
current-context: hub
users:
- name: agent
  user:
    token: not-a-real-token
"#;

/// A Secret volume: `dir/<key>` → `..data/<key>`, `..data` → `..v1` holding the files.
struct Mounted {
    dir: tempfile::TempDir,
    version: usize,
}

impl Mounted {
    fn new(files: &[(&str, &str)]) -> Self {
        let mut mounted = Self {
            dir: tempfile::tempdir().expect("a temporary directory"),
            version: 0,
        };
        mounted.write(files);
        for (key, _) in files {
            std::os::unix::fs::symlink(format!("..data/{key}"), mounted.dir.path().join(key))
                .expect("a link");
        }
        mounted
    }

    /// Writes a new version and swaps `..data` to it, as the kubelet does.
    fn write(&mut self, files: &[(&str, &str)]) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.path().join(&version)).expect("a version directory");
        for (key, content) in files {
            std::fs::write(self.dir.path().join(&version).join(key), content).expect("a file");
        }
        let next = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&version, &next).expect("a link");
        std::fs::rename(&next, self.dir.path().join("..data")).expect("swap ..data");
    }

    fn credential(&self) -> HubCredential {
        HubCredential::new(self.dir.path().join("kubeconfig")).checked_every(Duration::from_millis(10))
    }
}

#[tokio::test]
async fn reading_gives_the_visible_files_sorted_and_skips_the_links_behind_them() {
    let mounted = Mounted::new(&[
        ("tls.key", "key"),
        ("kubeconfig", KUBECONFIG),
        ("tls.crt", "cert"),
    ]);
    let files = mounted.credential().read().await.expect("readable");
    let names: Vec<_> = files
        .iter()
        .map(|(path, bytes)| (path.file_name().expect("a name").to_owned(), bytes.len()))
        .collect();
    assert_eq!(
        names,
        [
            ("kubeconfig".into(), KUBECONFIG.len()),
            ("tls.crt".into(), 4),
            ("tls.key".into(), 3)
        ]
    );
}

#[tokio::test]
async fn a_missing_mount_is_an_error_naming_the_directory() {
    let credential = HubCredential::new("/nonexistent/hub/kubeconfig");
    let error = credential.read().await.expect_err("no directory");
    assert!(
        chain(&error).starts_with("list the hub credential in /nonexistent/hub: "),
        "{}",
        chain(&error)
    );
}

#[tokio::test]
async fn a_rotation_is_noticed_and_an_unchanged_credential_is_not() {
    let mut mounted = Mounted::new(&[("kubeconfig", KUBECONFIG), ("tls.crt", "cert 1")]);
    let credential = mounted.credential();
    let current = credential.read().await.expect("readable");
    let unchanged =
        tokio::time::timeout(Duration::from_millis(100), credential.until_changed(&current)).await;
    assert!(unchanged.is_err(), "nothing changed");

    mounted.write(&[("kubeconfig", KUBECONFIG), ("tls.crt", "cert 2")]);
    tokio::time::timeout(Duration::from_secs(5), credential.until_changed(&current))
        .await
        .expect("the new certificate is noticed");
}

#[tokio::test]
async fn a_kubeconfig_that_does_not_parse_is_an_error_naming_it() {
    let mounted = Mounted::new(&[("kubeconfig", "clusters: [not a kubeconfig")]);
    let path = mounted.dir.path().join("kubeconfig");
    let Err(error) = client(&path).await else {
        panic!("a client from an unparsable kubeconfig");
    };
    assert!(
        matches!(error, Error::ReadKubeconfig { path: ref p, .. } if *p == path),
        "{error:?}"
    );
}

#[tokio::test]
async fn serving_starts_the_work_again_with_a_new_client_after_a_rotation() {
    let mut mounted = Mounted::new(&[("kubeconfig", KUBECONFIG), ("tls.crt", "cert 1")]);
    let credential = mounted.credential();
    let started = Arc::new(AtomicUsize::new(0));
    let (tell, mut told) = tokio::sync::mpsc::unbounded_channel();
    let serving = {
        let started = started.clone();
        async move {
            credential
                .serve("test-agent", async |_hub| {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = tell.send(());
                    // Works until the credential changes.
                    std::future::pending::<()>().await;
                })
                .await;
        }
    };
    let rotate = async {
        told.recv().await.expect("started once");
        mounted.write(&[("kubeconfig", KUBECONFIG), ("tls.crt", "cert 2")]);
        told.recv().await.expect("started again");
    };
    tokio::select! {
        () = serving => unreachable!("serving never ends"),
        rotated = tokio::time::timeout(Duration::from_secs(5), rotate) => rotated.expect("in time"),
    }
    assert_eq!(started.load(Ordering::SeqCst), 2);
}
