//! The agent's secrets on the managed cluster, both in the agent namespace:
//! `bootstrap-hub-kubeconfig` (read) and `hub-kubeconfig-secret` (read at start, written when
//! a certificate is issued) with the keys `kubeconfig`, `tls.crt`, `tls.key`, `cluster-name`
//! and `agent-name`.

use std::collections::BTreeMap;

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

use super::error::{Error, Result};

/// Reads secret `name` in `namespace`; `None` if it does not exist.
pub(crate) async fn read(managed: &kube::Client, namespace: &str, name: &str) -> Result<Option<Secret>> {
    Api::<Secret>::namespaced(managed.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| Error::ReadSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })
}

/// The bytes under `key`, if present and not empty.
pub(crate) fn data<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
        .filter(|b| !b.is_empty())
}

/// The text under `key`, trimmed, if present, UTF-8 and not empty.
pub(crate) fn text(secret: &Secret, key: &str) -> Option<String> {
    data(secret, key)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Creates secret `name` in `namespace` with exactly `data`, or replaces the data of the
/// existing one (guarded by its `resourceVersion`, so a concurrent writer makes this fail
/// and retry rather than be overwritten).
pub(crate) async fn write(
    managed: &kube::Client,
    namespace: &str,
    name: &str,
    data: BTreeMap<String, Vec<u8>>,
) -> Result<()> {
    let api = Api::<Secret>::namespaced(managed.clone(), namespace);
    let write_error = |source| Error::WriteSecret {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let data: BTreeMap<String, ByteString> = data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
    match api.get_opt(name).await.map_err(write_error)? {
        Some(mut existing) => {
            existing.data = Some(data);
            existing.string_data = None;
            api.replace(name, &PostParams::default(), &existing)
                .await
                .map_err(write_error)?;
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some(data),
                ..Secret::default()
            };
            api.create(&PostParams::default(), &secret)
                .await
                .map_err(write_error)?;
        }
    }
    Ok(())
}
