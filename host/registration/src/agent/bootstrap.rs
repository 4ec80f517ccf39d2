//! Getting a hub identity: reuse the one stored in `hub-kubeconfig-secret` when it is still
//! good, otherwise bootstrap with `bootstrap-hub-kubeconfig`:
//!
//! ```text
//!  names ─▶ stored identity usable? ──yes──▶ done
//!                 │ no
//!                 ▼
//!  bootstrap kubeconfig ─▶ ManagedCluster (create if absent) ─▶ CSR ─▶ approved + issued
//!                                                                       │
//!                                   hub-kubeconfig-secret ◀─────────────┘ ─▶ done
//! ```

use flotilla_api::cluster::v1::{ManagedCluster, ManagedClusterSpec};
use flotilla_core::registration::agent::{cluster as rules, lease::DEFAULT_LEASE_DURATION_SECONDS, names};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

use super::{
    Context, Names,
    csr::request_certificate,
    error::{Error, Result},
    identity::HubIdentity,
    kubeconfig::HubKubeconfig,
    progress::{Phase, Step},
    secret,
};
use crate::names::{AGENT_NAME_KEY, CLUSTER_NAME_KEY, KUBECONFIG_KEY};

/// Resolves the cluster and agent names: the options, else the names stored in
/// `hub-kubeconfig-secret`, else a random UUID and five random letters. An invalid name is
/// a terminal error.
pub(crate) async fn resolve_names(ctx: &Context) -> Result<Names> {
    let options = &ctx.options;
    let stored = secret::read(
        &ctx.agent,
        &options.agent_namespace,
        &options.hub_kubeconfig_secret,
    )
    .await?;
    let stored_text = |key| stored.as_ref().and_then(|s| secret::text(s, key));
    let cluster = options
        .cluster_name
        .clone()
        .or_else(|| stored_text(CLUSTER_NAME_KEY))
        .unwrap_or_else(|| names::uuid_from(random_bytes()));
    names::validate_cluster_name(&cluster).map_err(Error::InvalidName)?;
    let agent = options
        .agent_name
        .clone()
        .or_else(|| stored_text(AGENT_NAME_KEY))
        .unwrap_or_else(|| names::agent_name_from(random_bytes()));
    names::validate_agent_name(&agent).map_err(Error::InvalidName)?;
    Ok(Names { cluster, agent })
}

fn random_bytes<const N: usize>() -> [u8; N] {
    std::array::from_fn(|_| fastrand::u8(..))
}

/// Reads and parses the bootstrap kubeconfig.
pub(crate) async fn load_bootstrap(ctx: &Context) -> Result<HubKubeconfig> {
    let options = &ctx.options;
    let missing = |problem: &str| Error::MissingBootstrap {
        namespace: options.agent_namespace.clone(),
        name: options.bootstrap_secret.clone(),
        problem: problem.to_owned(),
    };
    let bootstrap = secret::read(&ctx.agent, &options.agent_namespace, &options.bootstrap_secret)
        .await?
        .ok_or_else(|| missing("does not exist"))?;
    let text = secret::data(&bootstrap, KUBECONFIG_KEY)
        .ok_or_else(|| missing(&format!("has no key {KUBECONFIG_KEY:?}")))?;
    let text = std::str::from_utf8(text).map_err(|e| Error::ParseKubeconfig {
        what: format!("bootstrap kubeconfig in secret {}", options.bootstrap_secret),
        message: e.to_string(),
    })?;
    HubKubeconfig::parse(text, &bootstrap_what(options))
}

/// The bootstrap kubeconfig and the secret it is read from, for errors.
fn bootstrap_what(options: &super::AgentOptions) -> String {
    format!(
        "bootstrap kubeconfig in secret {}/{}",
        options.agent_namespace, options.bootstrap_secret
    )
}

/// A usable hub identity: the stored one, or a new one through bootstrap.
pub(crate) async fn obtain_identity(ctx: &Context, names: &Names) -> Result<HubIdentity> {
    ctx.options.status.phase(Phase::Bootstrapping);
    let bootstrap = load_bootstrap(ctx).await;
    if let Some(identity) = HubIdentity::stored(ctx, names, bootstrap.as_ref().ok()).await? {
        tracing::info!(cluster = %names.cluster, agent = %names.agent, "reusing the stored hub identity");
        return Ok(identity);
    }
    let bootstrap = bootstrap?;
    let hub = bootstrap
        .client(&bootstrap_what(&ctx.options), ctx.options.request_timeout)
        .await?;
    ensure_managed_cluster(ctx, &hub, names).await?;
    let issued = request_certificate(ctx, &hub, names, |csr| {
        // The bootstrap identity works: what failed before is over.
        ctx.options.status.succeeded(Step::Registration);
        ctx.options
            .status
            .phase(Phase::WaitingForCertificate { csr: csr.to_owned() });
    })
    .await?;
    let identity = HubIdentity::new(ctx, bootstrap, issued.cert_pem, issued.key_pem, issued.info).await?;
    identity.save(ctx, names).await?;
    tracing::info!(cluster = %names.cluster, csr = %issued.csr, "wrote the hub kubeconfig secret");
    Ok(identity)
}

/// Creates the agent's ManagedCluster again if it is gone from the hub, through the bootstrap
/// identity (the agent's own may not create it). Best-effort: without a usable bootstrap
/// kubeconfig the agent keeps waiting, and says why at debug level.
pub(crate) async fn recreate_managed_cluster(ctx: &Context, names: &Names) {
    let outcome = async {
        let bootstrap = load_bootstrap(ctx).await?;
        let hub = bootstrap
            .client(&bootstrap_what(&ctx.options), ctx.options.request_timeout)
            .await?;
        ensure_managed_cluster(ctx, &hub, names).await
    };
    if let Err(error) = outcome.await {
        tracing::debug!(cluster = %names.cluster, %error, "could not check for the ManagedCluster through the bootstrap identity");
    }
}

/// Creates the agent's ManagedCluster if absent (not accepted, lease duration and client
/// configs from the options, only `agent.open-cluster-management.io/` annotations); on an
/// existing one, adds client configs whose URL it lacks, as far as the bootstrap identity
/// is allowed to.
async fn ensure_managed_cluster(ctx: &Context, hub: &kube::Client, names: &Names) -> Result<()> {
    let api: Api<ManagedCluster> = Api::all(hub.clone());
    let options = &ctx.options;
    let existing = api
        .get_opt(&names.cluster)
        .await
        .map_err(|source| Error::GetManagedCluster {
            cluster: names.cluster.clone(),
            source,
        })?;
    let Some(mut existing) = existing else {
        let annotations = rules::agent_annotations(&options.cluster_annotations);
        let cluster = ManagedCluster {
            metadata: ObjectMeta {
                name: Some(names.cluster.clone()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..ObjectMeta::default()
            },
            spec: ManagedClusterSpec {
                managed_cluster_client_configs: options.cluster_client_configs.clone(),
                hub_accepts_client: false,
                lease_duration_seconds: if options.lease_duration_seconds > 0 {
                    options.lease_duration_seconds
                } else {
                    DEFAULT_LEASE_DURATION_SECONDS
                },
                taints: Vec::new(),
            },
            status: None,
        };
        return match api.create(&PostParams::default(), &cluster).await {
            Ok(_) => {
                tracing::info!(cluster = %names.cluster, "created ManagedCluster on the hub");
                Ok(())
            }
            // Someone (another agent start, or the hub admin) was first.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(Error::CreateManagedCluster {
                cluster: names.cluster.clone(),
                source,
            }),
        };
    };
    let Some(merged) = rules::merge_by_key(
        &existing.spec.managed_cluster_client_configs,
        &options.cluster_client_configs,
        |c| c.url.as_str(),
    ) else {
        return Ok(());
    };
    existing.spec.managed_cluster_client_configs = merged;
    match api
        .replace(&names.cluster, &PostParams::default(), &existing)
        .await
    {
        Ok(_) => Ok(()),
        // OCM's bootstrap role may not update ManagedClusters; the client configs then stay
        // as the hub admin set them.
        Err(kube::Error::Api(status)) if status.code == 401 || status.code == 403 => {
            tracing::debug!(cluster = %names.cluster, "not allowed to update client configs");
            Ok(())
        }
        Err(source) => Err(Error::UpdateManagedCluster {
            cluster: names.cluster.clone(),
            source,
        }),
    }
}
