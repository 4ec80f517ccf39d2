//! Add-on credentials on the managed cluster (OCM's add-on registration on the spoke): for
//! each ManagedClusterAddOn of this cluster with `status.registrations`, the klusterlet makes
//! one CSR per registration, as OCM's agent makes it, and writes the issued certificate where
//! an OCM add-on agent (addon-framework) looks for it, in the add-on's install namespace
//! (`status.namespace`):
//!
//! ```text
//!  hub MCA status.registrations ──▶ key + CSR  generateName addon-<cluster>-<addon>-,
//!   (polled with the agent's     │            labels cluster-name + addon-name,
//!    current hub identity)       │            DNS SAN <addon>.addon.open-cluster-management.io
//!                                ▼ approved and issued on the hub
//!   kubeClient   ─▶ Secret <addon>-hub-kubeconfig            kubeconfig, tls.crt, tls.key, cluster-name
//!   customSigner ─▶ Secret <addon>-<signer "/"→"-">-client-cert          tls.crt, tls.key, cluster-name
//!   ─▶ MCA ClusterCertificateRotated True ClientCertificateUpdated
//!  certificate at 20–25 % life left (as the cluster's), subject changed or unusable ─▶ new CSR
//!  registration or add-on gone ─▶ its secret deleted
//!  add-on gone ─▶ Lease <addon> in its install namespace deleted (for a minute, at every pass,
//!                 as its agent may renew once more while its work is removed)
//! ```
//!
//! One pass every [`POLL`] ([`IN_FLIGHT_POLL`] while a fresh CSR waits for its certificate):
//! CSRs in flight are remembered between passes (the key never leaves memory until its
//! certificate is written), so one slow approval holds up nothing else. The secrets carry the label [`CREDENTIAL_LABEL`] (add-on name) so that those of removed add-ons
//! are found and deleted even after a restart.

mod kubeconfig;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flotilla_api::addon::consts::{
    ADDON_NAME_LABEL, DEFAULT_INSTALL_NAMESPACE, KUBE_APISERVER_CLIENT_SIGNER, managed_cluster_addon as mca,
};
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, RegistrationConfig};
use flotilla_api::cluster::consts::{CLUSTER_NAME_LABEL, managed_cluster as mc};
use flotilla_core::conditions::{self, NewCondition};
use flotilla_core::registration::agent::csr::{self as rules, CsrState};
use flotilla_core::registration::agent::identity::check_certificate;
use flotilla_core::registration::agent::rotation::{self, CertificateState};
use flotilla_core::x509;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use tokio::sync::watch;

use super::{Context, Names, identity::HubIdentity};
use crate::names::{CLUSTER_NAME_KEY, KUBECONFIG_KEY, TLS_CERT_KEY, TLS_KEY_KEY};

pub use kubeconfig::render as render_kubeconfig;

/// How often the add-ons are looked at.
pub const POLL: Duration = Duration::from_secs(3);
/// The pause between passes while a CSR made less than [`FAST_WINDOW`] ago is in flight: the
/// hub approves and signs within moments, and the add-on waits for nothing but its credential.
/// A CSR nobody approves goes back to [`POLL`] once the window has passed.
pub const IN_FLIGHT_POLL: Duration = Duration::from_millis(250);
/// See [`IN_FLIGHT_POLL`].
const FAST_WINDOW: Duration = Duration::from_secs(10);
/// Label on the secrets written here; its value is the add-on name.
pub const CREDENTIAL_LABEL: &str = "flotilla.dev/addon-credential";
/// Label on the secrets written here naming the writing klusterlet's agent namespace: a
/// managed cluster joined to several hubs runs one klusterlet per hub, and each cleans up only
/// the credentials it wrote.
pub const CREDENTIAL_AGENT_LABEL: &str = "flotilla.dev/addon-credential-agent";
/// Field manager of the secrets written here.
const FIELD_MANAGER: &str = "flotilla-klusterlet-addon-credentials";
/// Most pending CSRs of one add-on before no new one is made (OCM: 10 per add-on).
const MAX_PENDING: usize = 10;

/// The secret an OCM add-on agent reads for `registration` of `addon`.
pub fn secret_name(addon: &str, registration: &RegistrationConfig) -> String {
    if registration.signer_name == KUBE_APISERVER_CLIENT_SIGNER {
        format!("{addon}-hub-kubeconfig")
    } else {
        format!(
            "{addon}-{}-client-cert",
            registration.signer_name.replace('/', "-")
        )
    }
}

/// One credential: an add-on's registration on this cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    addon: String,
    namespace: String,
    secret: String,
}

/// A CSR in flight and the key it was made with.
struct Pending {
    csr: String,
    key_pem: Vec<u8>,
    /// When the CSR was made.
    made: std::time::Instant,
}

/// What the loop remembers between passes.
#[derive(Default)]
struct State {
    pending: HashMap<Key, Pending>,
    /// Renewal share per credential, drawn once (20–25 %, as the cluster certificate's).
    thresholds: HashMap<Key, f64>,
    /// Add-ons gone from the hub whose agent leases are still being removed: (add-on, install
    /// namespace) and since when.
    gone: HashMap<(String, String), std::time::Instant>,
    /// The add-ons of the last pass and their install namespaces, to see which went away.
    known: BTreeMap<String, String>,
}

/// How long the leases of a removed add-on are deleted again at every pass: its agent, being
/// removed with its ManifestWork at the same time, may renew its lease once more before it stops.
const GONE_LEASE_WINDOW: Duration = Duration::from_secs(60);

/// Keeps every add-on's credentials in place; runs for the whole session.
pub(crate) async fn run(
    ctx: &Context,
    names: &Names,
    identity: watch::Receiver<Arc<HubIdentity>>,
) -> std::convert::Infallible {
    let mut state = State::default();
    loop {
        let current = identity.borrow().clone();
        if let Err(error) = pass(ctx, names, &current, &mut state).await {
            tracing::warn!(%error, "add-on credentials");
        }
        let fresh = state.pending.values().any(|p| p.made.elapsed() < FAST_WINDOW);
        tokio::time::sleep(if fresh { IN_FLIGHT_POLL } else { POLL }).await;
    }
}

/// A failure of one pass; the next pass starts afresh.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error("list ManagedClusterAddOns of {cluster} on the hub: {source}")]
    ListAddons {
        cluster: String,
        #[source]
        source: kube::Error,
    },
    #[error("list add-on credential secrets: {0}")]
    ListSecrets(#[source] kube::Error),
}

async fn pass(ctx: &Context, names: &Names, hub: &HubIdentity, state: &mut State) -> Result<(), PassError> {
    let addons = Api::<ManagedClusterAddOn>::namespaced(hub.client.clone(), &names.cluster)
        .list(&ListParams::default())
        .await
        .map_err(|source| PassError::ListAddons {
            cluster: names.cluster.clone(),
            source,
        })?;
    let mut wanted: BTreeSet<Key> = BTreeSet::new();
    let present: BTreeMap<String, String> = addons
        .items
        .iter()
        .filter(|a| a.metadata.deletion_timestamp.is_none())
        // Where the klusterlet judges its lease.
        .map(|a| (a.name_any(), flotilla_core::addon::health::install_namespace(a)))
        .collect();
    for addon in &addons.items {
        if addon.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(status) = &addon.status else { continue };
        let namespace = if status.namespace.is_empty() {
            DEFAULT_INSTALL_NAMESPACE.to_owned()
        } else {
            status.namespace.clone()
        };
        for registration in &status.registrations {
            let key = Key {
                addon: addon.name_any(),
                namespace: namespace.clone(),
                secret: secret_name(&addon.name_any(), registration),
            };
            wanted.insert(key.clone());
            if let Err(error) = credential(ctx, names, hub, addon, registration, &key, state).await {
                tracing::warn!(addon = %key.addon, secret = %key.secret, %error, "add-on credential");
            }
        }
    }
    state.pending.retain(|k, _| wanted.contains(k));
    state.thresholds.retain(|k, _| wanted.contains(k));
    // Add-ons gone since the last pass, and (after a restart) those whose credentials remain.
    let now = std::time::Instant::now();
    let mut gone: Vec<(String, String)> = std::mem::replace(&mut state.known, present.clone())
        .into_iter()
        .collect();
    gone.extend(remove_unwanted(ctx, &wanted).await?);
    for gone in gone {
        if !present.contains_key(&gone.0) {
            state.gone.entry(gone).or_insert(now);
        }
    }
    state
        .gone
        .retain(|(addon, _), since| !present.contains_key(addon) && since.elapsed() < GONE_LEASE_WINDOW);
    for (addon, namespace) in state.gone.keys() {
        remove_lease(ctx, addon, namespace).await;
    }
    Ok(())
}

/// Deletes the Lease `addon`'s agent renewed in its install namespace on the managed cluster:
/// nothing of a removed add-on stays behind (a lease in the cluster namespace on the hub is
/// owned by its add-on and goes with it). Failures are only logged; the next pass tries again.
async fn remove_lease(ctx: &Context, addon: &str, namespace: &str) {
    use k8s_openapi::api::coordination::v1::Lease;
    let api = Api::<Lease>::namespaced(ctx.managed.clone(), namespace);
    match api.delete(addon, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(%addon, %namespace, "lease of a removed add-on deleted"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(error) => {
            tracing::warn!(%addon, %namespace, %error, "could not delete the lease of a removed add-on")
        }
    }
}

/// Why one credential could not be brought up to date.
#[derive(Debug, thiserror::Error)]
enum CredentialError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("make a request: {0}")]
    Request(#[from] flotilla_core::x509::X509Error),
    #[error("render the kubeconfig: {0}")]
    Kubeconfig(String),
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CredentialError {
    let what = what.into();
    move |source| CredentialError::Kube { what, source }
}

/// Checks one credential and moves it on: nothing to do, a CSR to make, or an issued
/// certificate to write.
async fn credential(
    ctx: &Context,
    names: &Names,
    hub: &HubIdentity,
    addon: &ManagedClusterAddOn,
    registration: &RegistrationConfig,
    key: &Key,
    state: &mut State,
) -> Result<(), CredentialError> {
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    if let Some(pending) = state.pending.get(key) {
        let current = csrs
            .get_opt(&pending.csr)
            .await
            .map_err(kube_error(format!("get CSR {}", pending.csr)))?;
        match current.map(|c| rules::state(c.status.as_ref())) {
            None => {
                state.pending.remove(key);
            }
            Some(CsrState::Pending | CsrState::Approved) => return Ok(()),
            Some(CsrState::Denied { reason, message } | CsrState::Failed { reason, message }) => {
                let csr = pending.csr.clone();
                state.pending.remove(key);
                report_failed(
                    hub,
                    addon,
                    format!("CSR {csr} was not issued ({reason}): {message}"),
                )
                .await;
                // A new request waits for the next pass.
                return Ok(());
            }
            Some(CsrState::Issued(cert_pem)) => {
                let (csr, key_pem) = (pending.csr.clone(), pending.key_pem.clone());
                let user = &registration.subject.user;
                let info = match check_certificate(&cert_pem, &key_pem, user, SystemTime::now()) {
                    Ok(info) => info,
                    Err(problem) => {
                        state.pending.remove(key);
                        report_failed(
                            hub,
                            addon,
                            format!("CSR {csr} issued an unusable certificate: {problem}"),
                        )
                        .await;
                        return Ok(());
                    }
                };
                // Kept pending until written: a write that fails (the install namespace may not
                // exist yet) is retried with the same certificate on the next pass.
                write_secret(ctx, names, hub, registration, key, &cert_pem, &key_pem).await?;
                state.pending.remove(key);
                let message = format!(
                    "client certificate rotated starting from {} to {}",
                    timestamp(info.not_before),
                    timestamp(info.not_after)
                );
                tracing::info!(addon = %key.addon, secret = %key.secret, %message);
                report(
                    hub,
                    addon,
                    conditions::TRUE,
                    mc::REASON_CLIENT_CERTIFICATE_UPDATED,
                    message,
                )
                .await;
                return Ok(());
            }
        }
    }

    let threshold = *state
        .thresholds
        .entry(key.clone())
        .or_insert_with(|| rotation::threshold(fastrand::f64()));
    if current_is_good(ctx, key, registration, threshold).await? {
        return Ok(());
    }
    let mine = format!(
        "{CLUSTER_NAME_LABEL}={},{ADDON_NAME_LABEL}={}",
        names.cluster, key.addon
    );
    let existing = csrs
        .list(&ListParams::default().labels(&mine))
        .await
        .map_err(kube_error("list add-on CSRs"))?;
    let open = existing
        .items
        .iter()
        .filter(|c| {
            matches!(
                rules::state(c.status.as_ref()),
                CsrState::Pending | CsrState::Approved
            )
        })
        .count();
    if open >= MAX_PENDING {
        tracing::warn!(addon = %key.addon, open, "too many open add-on CSRs; not making another");
        return Ok(());
    }
    let subject = &registration.subject;
    let groups: Vec<&str> = subject.groups.iter().map(String::as_str).collect();
    let units: Vec<&str> = subject.organization_units.iter().map(String::as_str).collect();
    let dns = format!("{}.addon.open-cluster-management.io", key.addon);
    let made = x509::client_request(&subject.user, &groups, &units, &[&dns])?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(format!("addon-{}-{}-", names.cluster, key.addon)),
            labels: Some(BTreeMap::from([
                (CLUSTER_NAME_LABEL.to_owned(), names.cluster.clone()),
                (ADDON_NAME_LABEL.to_owned(), key.addon.clone()),
            ])),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(made.request_pem.into_bytes()),
            signer_name: registration.signer_name.clone(),
            usages: Some(rules::CLIENT_USAGES.iter().map(|u| (*u).to_owned()).collect()),
            expiration_seconds: ctx.options.expiration_seconds,
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let created = csrs
        .create(&PostParams::default(), &csr)
        .await
        .map_err(kube_error(format!("create a CSR for add-on {}", key.addon)))?;
    tracing::info!(addon = %key.addon, csr = %created.name_any(), signer = %registration.signer_name, "add-on CSR created");
    state.pending.insert(
        key.clone(),
        Pending {
            csr: created.name_any(),
            key_pem: made.key_pem.into_bytes(),
            made: std::time::Instant::now(),
        },
    );
    Ok(())
}

/// Whether the secret holds a certificate for the registration's subject that is not yet due
/// for renewal.
async fn current_is_good(
    ctx: &Context,
    key: &Key,
    registration: &RegistrationConfig,
    threshold: f64,
) -> Result<bool, CredentialError> {
    let secret = Api::<Secret>::namespaced(ctx.agent.clone(), &key.namespace)
        .get_opt(&key.secret)
        .await
        .map_err(kube_error(format!(
            "read Secret {}/{}",
            key.namespace, key.secret
        )))?;
    let Some(secret) = secret else { return Ok(false) };
    let (Some(cert), Some(tls_key)) = (
        super::secret::data(&secret, TLS_CERT_KEY),
        super::secret::data(&secret, TLS_KEY_KEY),
    ) else {
        return Ok(false);
    };
    let now = SystemTime::now();
    let Ok(info) = check_certificate(cert, tls_key, &registration.subject.user, now) else {
        return Ok(false);
    };
    let same_groups = info.subject.organizations.iter().collect::<BTreeSet<_>>()
        == registration.subject.groups.iter().collect::<BTreeSet<_>>();
    let state = rotation::assess(&info, &registration.subject.user, now, threshold);
    Ok(same_groups && matches!(state, CertificateState::Valid { .. }))
}

/// Writes the credential's secret (server-side apply, labelled for clean-up).
async fn write_secret(
    ctx: &Context,
    names: &Names,
    hub: &HubIdentity,
    registration: &RegistrationConfig,
    key: &Key,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<(), CredentialError> {
    let mut data = BTreeMap::from([
        (TLS_CERT_KEY.to_owned(), ByteString(cert_pem.to_vec())),
        (TLS_KEY_KEY.to_owned(), ByteString(key_pem.to_vec())),
        (
            CLUSTER_NAME_KEY.to_owned(),
            ByteString(names.cluster.clone().into_bytes()),
        ),
    ]);
    if registration.signer_name == KUBE_APISERVER_CLIENT_SIGNER {
        let text = kubeconfig::render(&hub.endpoint).map_err(CredentialError::Kubeconfig)?;
        data.insert(KUBECONFIG_KEY.to_owned(), ByteString(text.into_bytes()));
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(key.secret.clone()),
            namespace: Some(key.namespace.clone()),
            labels: Some(BTreeMap::from([
                (CREDENTIAL_LABEL.to_owned(), key.addon.clone()),
                (
                    CREDENTIAL_AGENT_LABEL.to_owned(),
                    ctx.options.agent_namespace.clone(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(ctx.agent.clone(), &key.namespace)
        .patch(
            &key.secret,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(kube_error(format!(
            "write Secret {}/{}",
            key.namespace, key.secret
        )))?;
    Ok(())
}

/// Deletes the credential secrets no add-on registration wants any more; returns the
/// (add-on, install namespace) of each.
async fn remove_unwanted(ctx: &Context, wanted: &BTreeSet<Key>) -> Result<Vec<(String, String)>, PassError> {
    let mut removed = Vec::new();
    let api: Api<Secret> = Api::all(ctx.agent.clone());
    // Only this klusterlet's: another hub's klusterlet on the same cluster keeps its own.
    let mine = format!(
        "{CREDENTIAL_LABEL},{CREDENTIAL_AGENT_LABEL}={}",
        ctx.options.agent_namespace
    );
    let written = api
        .list_metadata(&ListParams::default().labels(&mine))
        .await
        .map_err(PassError::ListSecrets)?;
    for secret in written.items {
        let key = Key {
            addon: secret.labels().get(CREDENTIAL_LABEL).cloned().unwrap_or_default(),
            namespace: secret.namespace().unwrap_or_default(),
            secret: secret.name_any(),
        };
        if wanted.contains(&key) {
            continue;
        }
        removed.push((key.addon.clone(), key.namespace.clone()));
        let result = Api::<Secret>::namespaced(ctx.agent.clone(), &key.namespace)
            .delete(&key.secret, &DeleteParams::default())
            .await;
        match result {
            Ok(_) => {
                tracing::info!(addon = %key.addon, namespace = %key.namespace, secret = %key.secret, "add-on credential removed")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(error) => {
                tracing::warn!(secret = %key.secret, %error, "could not remove an add-on credential")
            }
        }
    }
    Ok(removed)
}

/// Sets `ClusterCertificateRotated` on the add-on; failures are only logged (the condition is
/// informational, and the next rotation writes it again).
/// [`report`]s `ClusterCertificateRotated` False, `ClientCertificateUpdateFailed`.
async fn report_failed(hub: &HubIdentity, addon: &ManagedClusterAddOn, message: String) {
    report(
        hub,
        addon,
        conditions::FALSE,
        mc::REASON_CLIENT_CERTIFICATE_UPDATE_FAILED,
        message,
    )
    .await;
}

async fn report(hub: &HubIdentity, addon: &ManagedClusterAddOn, status: &str, reason: &str, message: String) {
    let api: Api<ManagedClusterAddOn> =
        Api::namespaced(hub.client.clone(), &addon.namespace().unwrap_or_default());
    for _ in 0..3 {
        let Ok(Some(current)) = api.get_opt(&addon.name_any()).await else {
            return;
        };
        let mut desired = current.status.clone().unwrap_or_default();
        conditions::set(
            &mut desired.conditions,
            NewCondition {
                type_: mca::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
                status,
                reason,
                message: message.clone(),
                observed_generation: None,
            },
            Timestamp::now(),
        );
        match flotilla_kube::status::patch_if_changed(&api, &current, current.status.as_ref(), &desired).await
        {
            Ok(_) => return,
            Err(error) => tracing::debug!(%error, "ClusterCertificateRotated; retrying from a fresh read"),
        }
    }
}

fn timestamp(time: SystemTime) -> String {
    Timestamp::try_from(time).map_or_else(|_| format!("{time:?}"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::v1alpha1::Subject;

    use super::*;

    #[test]
    fn secret_names_are_ocms() {
        let registration = |signer: &str| RegistrationConfig {
            signer_name: signer.into(),
            subject: Subject::default(),
        };
        assert_eq!(
            secret_name("helloworld", &registration(KUBE_APISERVER_CLIENT_SIGNER)),
            "helloworld-hub-kubeconfig"
        );
        assert_eq!(
            secret_name("cs", &registration("example.com/custom-signer")),
            "cs-example.com-custom-signer-client-cert"
        );
    }
}
