//! The managed service account tokens the gateway sends, read one Secret at a time.
//!
//! The hub may `get` Secrets of one name only (deploy/hub), never list or watch Secrets: a
//! watch would hold every Secret of every namespace in its memory. Each token is therefore read
//! with a GET and kept for [`FRESH_FOR`], long enough that a list of many ClusterGateways or a
//! burst of proxied requests costs one read per cluster, short enough that a rotated or revoked
//! token is followed within seconds (the agent rotates well before the old token expires).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use flotilla_api::authentication::consts::{
    IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE, TOKEN_SECRET_CA_KEY,
    TOKEN_SECRET_TOKEN_KEY,
};
use k8s_openapi::api::core::v1::Secret;

/// How long a token read (or its absence) is used before it is read again.
pub const FRESH_FOR: Duration = Duration::from_secs(5);
/// Entries kept at most: one per cluster, and stale ones are dropped first.
const MAX_ENTRIES: usize = 16_384;

/// What a managed service account's Secret gives the gateway.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The bearer token.
    pub token: String,
    /// The managed cluster's CA, as the agent read it from its own service account: what
    /// verifies the cluster's apiserver when its ManagedCluster names none.
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for Credential {
    /// Leaves the token out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("ca_pem", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// A cluster's credential, as last read.
pub type Read = Result<Option<Credential>, String>;

/// When each cluster's credential (or its absence) was read, and what it was.
type Kept = HashMap<String, (Instant, Option<Credential>)>;

/// Reads and briefly keeps the token Secret `<cluster>/<name>` of each cluster.
#[derive(Clone)]
pub struct Tokens {
    client: kube::Client,
    name: String,
    fresh_for: Duration,
    kept: Arc<Mutex<Kept>>,
}

impl Tokens {
    /// Tokens of Secret `name` in each cluster's namespace, read with `client`.
    pub fn new(client: kube::Client, name: &str) -> Self {
        Self::with_freshness(client, name, FRESH_FOR)
    }

    /// [`Tokens::new`], keeping each read for `fresh_for`.
    pub fn with_freshness(client: kube::Client, name: &str, fresh_for: Duration) -> Self {
        Self {
            client,
            name: name.to_owned(),
            fresh_for,
            kept: Arc::default(),
        }
    }

    /// The Secret's name in each cluster namespace.
    pub fn secret_name(&self) -> &str {
        &self.name
    }

    /// The usable credential of `cluster`: `Ok(None)` when there is none, `Err` when it could
    /// not be read (not kept, so the next request reads again).
    pub async fn get(&self, cluster: &str) -> Read {
        if let Some(token) = self.kept(cluster) {
            return Ok(token);
        }
        let secrets: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), cluster);
        let secret = secrets
            .get_opt(&self.name)
            .await
            .map_err(|e| format!("read Secret {cluster}/{}: {e}", self.name))?;
        let credential = secret.as_ref().and_then(credential_of);
        self.keep(cluster, credential.clone());
        Ok(credential)
    }

    fn kept(&self, cluster: &str) -> Option<Option<Credential>> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (read, token) = kept.get(cluster)?;
        (read.elapsed() < self.fresh_for).then(|| token.clone())
    }

    fn keep(&self, cluster: &str, credential: Option<Credential>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_ENTRIES {
            let fresh_for = self.fresh_for;
            kept.retain(|_, (read, _)| read.elapsed() < fresh_for);
            if kept.len() >= MAX_ENTRIES {
                kept.clear();
            }
        }
        kept.insert(cluster.to_owned(), (Instant::now(), credential));
    }
}

/// The credential a managed-serviceaccount agent's Secret holds, if it is one: the Secret
/// carries the agent's label (a Secret of that name made for anything else is not sent to a
/// cluster), and the token could be a bearer token.
pub fn credential_of(secret: &Secret) -> Option<Credential> {
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(IS_MANAGED_SERVICE_ACCOUNT_LABEL))
        .is_some_and(|v| v == IS_MANAGED_SERVICE_ACCOUNT_VALUE);
    if !labelled {
        return None;
    }
    let data = secret.data.as_ref()?;
    Some(Credential {
        token: usable_token(&data.get(TOKEN_SECRET_TOKEN_KEY)?.0)?,
        ca_pem: data
            .get(TOKEN_SECRET_CA_KEY)
            .map(|ca| ca.0.clone())
            .filter(|ca| !ca.is_empty()),
    })
}

/// The token in a Secret an add-on agent wrote, if it can be a bearer token: visible ASCII
/// only, so it can never add a header line or split the request.
fn usable_token(bytes: &[u8]) -> Option<String> {
    let token = std::str::from_utf8(bytes).ok()?.trim();
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())).then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(labelled: bool, token: &[u8]) -> Secret {
        let mut secret = Secret::default();
        if labelled {
            secret.metadata.labels = Some(
                [(
                    IS_MANAGED_SERVICE_ACCOUNT_LABEL.to_owned(),
                    IS_MANAGED_SERVICE_ACCOUNT_VALUE.to_owned(),
                )]
                .into(),
            );
        }
        secret.data = Some([(TOKEN_SECRET_TOKEN_KEY.to_owned(), ByteString(token.to_vec()))].into());
        secret
    }

    #[test]
    fn a_token_that_could_smuggle_a_header_is_no_token() {
        assert_eq!(
            usable_token(b"eyJhbGc.iOi.JSUzI1\n"),
            Some("eyJhbGc.iOi.JSUzI1".to_owned())
        );
        for hostile in [
            &b"abc\r\nImpersonate-User: admin"[..],
            b"abc def",
            b"abc\x00",
            b"\xff\xfe",
            b"",
            b"  \n",
            "jeton\u{e9}".as_bytes(),
        ] {
            assert_eq!(usable_token(hostile), None, "{hostile:?}");
        }
    }

    #[test]
    fn only_a_managed_service_accounts_secret_holds_a_credential() {
        let token = |s: &Secret| credential_of(s).map(|c| c.token);
        assert_eq!(token(&secret(true, b"t0k3n")), Some("t0k3n".to_owned()));
        assert_eq!(token(&secret(false, b"t0k3n")), None);
        assert_eq!(token(&secret(true, b"t0k3n\r\nX: y")), None);
        let mut with_ca = secret(true, b"t0k3n");
        with_ca
            .data
            .as_mut()
            .unwrap()
            .insert(TOKEN_SECRET_CA_KEY.to_owned(), ByteString(b"PEM".to_vec()));
        assert_eq!(
            credential_of(&with_ca).unwrap().ca_pem.as_deref(),
            Some(&b"PEM"[..])
        );
        assert_eq!(credential_of(&secret(true, b"t0k3n")).unwrap().ca_pem, None);
    }
}
