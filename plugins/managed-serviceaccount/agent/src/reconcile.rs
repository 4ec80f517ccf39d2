//! One pass over one ManagedServiceAccount name: the reads and writes around the decisions of
//! [`crate::token`], in the order of OCM's `TokenReconciler.Reconcile`.
//!
//! ```text
//!  ManagedServiceAccount <n> gone from the hub ─▶ delete ServiceAccount <n>, if labelled ours
//!  ManagedServiceAccount <n> present:
//!    1. ServiceAccount <n> in the install namespace: created (labelled) if missing; one
//!       without the label is not ours and gets no token
//!    2. Secret <n> on the hub ─▶ token::judge ─▶ TokenReview ─▶ token::judge_review
//!    3. if a refresh is due: TokenRequest (expirationSeconds = validity), Secret <n> created or
//!       replaced {token, ca.crt}, labelled, owned by the ManagedServiceAccount
//!    4. status (token::reported / token::failed) replaced through /status if it changed
//! ```
//!
//! The Secret is never deleted here: it goes with the ManagedServiceAccount, by its owner
//! reference, through the hub's garbage collector (as in OCM).

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec},
        core::v1::{Secret, ServiceAccount},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};

use crate::{
    msa::{self, ManagedServiceAccount},
    token::{self, Issued, Refresh, Verdict},
};

/// The clients and fixed facts one pass needs.
pub struct Context {
    /// ManagedServiceAccounts in the cluster namespace on the hub.
    pub msas: Api<ManagedServiceAccount>,
    /// Secrets in the cluster namespace on the hub.
    pub secrets: Api<Secret>,
    /// ServiceAccounts in the install namespace on the managed cluster.
    pub service_accounts: Api<ServiceAccount>,
    /// TokenReviews on the managed cluster.
    pub reviews: Api<TokenReview>,
    /// The install namespace.
    pub namespace: String,
    /// The managed cluster's CA bundle, PEM: `ca.crt` of every Secret.
    pub ca: Vec<u8>,
}

impl Context {
    /// A context for cluster namespace `cluster` on `hub` and install namespace `namespace` on
    /// `managed`.
    pub fn new(hub: Client, cluster: &str, managed: Client, namespace: &str, ca: Vec<u8>) -> Self {
        Self {
            msas: Api::namespaced(hub.clone(), cluster),
            secrets: Api::namespaced(hub, cluster),
            service_accounts: Api::namespaced(managed.clone(), namespace),
            reviews: Api::all(managed),
            namespace: namespace.to_owned(),
            ca,
        }
    }
}

/// What a pass did, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The token was replaced, for this reason.
    Refreshed(Refresh),
    /// The token was good; the status was written only if it was not already right.
    Kept,
    /// The ManagedServiceAccount is gone and so is (now) its ServiceAccount.
    Removed,
    /// The ManagedServiceAccount is gone; no ServiceAccount of ours was left.
    Nothing,
}

/// Brings ServiceAccount, token Secret and status of `name` in line with `msa`, the
/// ManagedServiceAccount as the agent's store has it (`None`: not there).
pub async fn reconcile(
    name: &str,
    msa: Option<&ManagedServiceAccount>,
    ctx: &Context,
) -> anyhow::Result<Outcome> {
    let Some(msa) = msa else {
        return remove(name, ctx).await;
    };
    let old = msa.status.as_ref();
    // Unlike OCM, a ServiceAccount that cannot be had is reported in the status too (OCM only
    // logs it), so that the hub sees why no token comes.
    let synced = match ensure_service_account(name, ctx).await {
        Ok(()) => sync(msa, ctx).await,
        Err(error) => Err(error),
    };
    let (status, outcome) = match synced {
        Ok(Some((issued, why))) => (
            token::reported(old, name, Some(issued), Timestamp::now()),
            Ok(Outcome::Refreshed(why)),
        ),
        Ok(None) => (
            token::reported(old, name, None, Timestamp::now()),
            Ok(Outcome::Kept),
        ),
        Err(error) => (
            token::failed(old, &format!("{error:#}"), Timestamp::now()),
            Err(error),
        ),
    };
    if Some(&status) != old {
        let mut updated = msa.clone();
        updated.status = Some(status);
        msa::API_VERSION.clone_into(&mut updated.api_version);
        msa::KIND.clone_into(&mut updated.kind);
        // A replace carries the resource version read: a status someone else wrote meanwhile
        // is a conflict, and the pass is retried on the newer object.
        ctx.msas
            .replace_status(name, &PostParams::default(), &updated)
            .await
            .with_context(|| format!("write the status of ManagedServiceAccount {name}"))?;
    }
    outcome
}

/// The ManagedServiceAccount is gone: deletes ServiceAccount `name` if it is ours, after
/// checking with the hub that the store is not merely behind.
async fn remove(name: &str, ctx: &Context) -> anyhow::Result<Outcome> {
    if ctx
        .msas
        .get_opt(name)
        .await
        .with_context(|| format!("read ManagedServiceAccount {name}"))?
        .is_some()
    {
        // Just created; its own event brings it back here.
        return Ok(Outcome::Nothing);
    }
    let Some(account) = ctx
        .service_accounts
        .get_opt(name)
        .await
        .with_context(|| format!("read ServiceAccount {name}"))?
    else {
        return Ok(Outcome::Nothing);
    };
    if !is_ours(&account.metadata) {
        return Ok(Outcome::Nothing);
    }
    // Preconditioned on its uid: one recreated meanwhile (by whom?) is left alone.
    let params = DeleteParams {
        preconditions: account.metadata.uid.clone().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match ctx.service_accounts.delete(name, &params).await {
        Ok(_) => Ok(Outcome::Removed),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Outcome::Nothing),
        Err(error) => Err(error).with_context(|| format!("delete ServiceAccount {name}")),
    }
}

/// Creates ServiceAccount `name`, labelled ours, unless it exists; refuses one that exists
/// without the label (it is someone else's, perhaps the agent's own).
async fn ensure_service_account(name: &str, ctx: &Context) -> anyhow::Result<()> {
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                msa::IS_MANAGED_LABEL.to_owned(),
                msa::IS_MANAGED_VALUE.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match ctx
        .service_accounts
        .create(&PostParams::default(), &account)
        .await
    {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error).with_context(|| format!("create ServiceAccount {name}")),
    }
    let existing = ctx
        .service_accounts
        .get(name)
        .await
        .with_context(|| format!("read ServiceAccount {name}"))?;
    if !is_ours(&existing.metadata) {
        bail!(
            "ServiceAccount {name} in {} exists without label {}={}; it is not a managed service account",
            ctx.namespace,
            msa::IS_MANAGED_LABEL,
            msa::IS_MANAGED_VALUE
        );
    }
    Ok(())
}

/// Whether an object carries the label of the objects the agent owns.
fn is_ours(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(msa::IS_MANAGED_LABEL))
        .is_some_and(|v| v == msa::IS_MANAGED_VALUE)
}

/// Replaces the token in the hub Secret if [`token::judge`] or the TokenReview says so;
/// returns the new token's times and why, or `None` if the token was kept.
async fn sync(msa: &ManagedServiceAccount, ctx: &Context) -> anyhow::Result<Option<(Issued, Refresh)>> {
    let name = msa.metadata.name.as_deref().unwrap_or_default();
    let validity = token::go_duration(&msa.spec.rotation.validity)
        .map_err(|why| anyhow::anyhow!("spec.rotation.validity: {why}"))?;
    let secret = ctx
        .secrets
        .get_opt(name)
        .await
        .with_context(|| format!("read Secret {name}"))?;
    let subject = token::subject(&ctx.namespace, name);
    let why = match token::judge(&token::Current {
        subject: &subject,
        validity,
        status: msa.status.as_ref(),
        secret: secret.as_ref(),
        now: Timestamp::now(),
    }) {
        Verdict::Refresh(why) => why,
        Verdict::Review(token) => {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token),
                    ..TokenReviewSpec::default()
                },
                ..TokenReview::default()
            };
            let reviewed = ctx
                .reviews
                .create(&PostParams::default(), &review)
                .await
                .with_context(|| format!("review the token of ServiceAccount {name}"))?;
            match token::judge_review(reviewed.status.as_ref(), &subject) {
                Some(why) => why,
                None => return Ok(None),
            }
        }
    };

    let at = Timestamp::now();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(i64::try_from(validity.as_secs()).unwrap_or(i64::MAX)),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = ctx
        .service_accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("request a token for ServiceAccount {name}"))?;
    let issued_status = issued
        .status
        .with_context(|| format!("the token request for ServiceAccount {name} has no status"))?;
    let written = token_secret(msa, secret, issued_status.token.into_bytes(), &ctx.ca);
    if written.metadata.resource_version.is_some() {
        ctx.secrets
            .replace(name, &PostParams::default(), &written)
            .await
            .with_context(|| format!("replace Secret {name}"))?;
    } else {
        ctx.secrets
            .create(&PostParams::default(), &written)
            .await
            .with_context(|| format!("create Secret {name}"))?;
    }
    Ok(Some((
        Issued {
            at,
            expires: issued_status.expiration_timestamp.0,
        },
        why,
    )))
}

/// Secret `<name>` holding `token` and the CA: `current` with its data, owner and label
/// replaced (other labels and annotations kept), or a new Opaque one.
fn token_secret(msa: &ManagedServiceAccount, current: Option<Secret>, token: Vec<u8>, ca: &[u8]) -> Secret {
    let name = msa.metadata.name.clone().unwrap_or_default();
    let mut secret = current.unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: msa.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        type_: Some(msa::SECRET_TYPE.to_owned()),
        ..Secret::default()
    });
    secret
        .metadata
        .labels
        .get_or_insert_default()
        .insert(msa::IS_MANAGED_LABEL.to_owned(), msa::IS_MANAGED_VALUE.to_owned());
    secret.metadata.annotations.get_or_insert_default().insert(
        token::VALIDITY_ANNOTATION.to_owned(),
        msa.spec.rotation.validity.clone(),
    );
    secret.metadata.owner_references = Some(vec![OwnerReference {
        api_version: msa::API_VERSION.to_owned(),
        kind: msa::KIND.to_owned(),
        name,
        uid: msa.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }]);
    secret.data = Some(BTreeMap::from([
        (msa::CA_KEY.to_owned(), ByteString(ca.to_vec())),
        (msa::TOKEN_KEY.to_owned(), ByteString(token)),
    ]));
    secret.string_data = None;
    secret
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msa(validity: &str) -> ManagedServiceAccount {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "robot", "namespace": "cluster1", "uid": "u1"},
            "spec": {"rotation": {"validity": validity}},
        }))
        .expect("a ManagedServiceAccount")
    }

    #[test]
    fn a_new_secret_is_opaque_labelled_owned_and_holds_token_and_ca() {
        let secret = token_secret(&msa("720h0m0s"), None, b"t0k".to_vec(), b"PEM");
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        assert_eq!(secret.metadata.name.as_deref(), Some("robot"));
        assert_eq!(secret.metadata.namespace.as_deref(), Some("cluster1"));
        assert!(is_ours(&secret.metadata));
        let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str()
            ),
            (
                "authentication.open-cluster-management.io/v1beta1",
                "ManagedServiceAccount",
                "robot",
                "u1"
            )
        );
        assert_eq!(owner.controller, None);
        let data = secret.data.as_ref().unwrap();
        assert_eq!(data["token"].0, b"t0k");
        assert_eq!(data["ca.crt"].0, b"PEM");
        assert_eq!(
            secret.metadata.annotations.as_ref().unwrap()[token::VALIDITY_ANNOTATION],
            "720h0m0s"
        );
    }

    #[test]
    fn an_existing_secret_keeps_its_other_labels_and_loses_stale_keys() {
        let current = Secret {
            metadata: ObjectMeta {
                name: Some("robot".into()),
                resource_version: Some("9".into()),
                labels: Some(BTreeMap::from([("team".to_owned(), "a".to_owned())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("stale".to_owned(), ByteString(b"x".to_vec()))])),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        let secret = token_secret(&msa("1h"), Some(current), b"new".to_vec(), b"PEM");
        assert_eq!(secret.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(secret.metadata.labels.as_ref().unwrap()["team"], "a");
        assert!(is_ours(&secret.metadata));
        let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
        assert_eq!(keys, ["ca.crt", "token"]);
    }
}
