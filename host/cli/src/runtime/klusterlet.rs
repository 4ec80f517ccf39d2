//! `flotilla klusterlet`: the registration agent and the work agent side by side. The work
//! agent uses the hub credential the registration agent writes (and rotates) into the hub
//! kubeconfig secret of the same agent namespace.

use std::net::SocketAddr;

use anyhow::Context as _;
use flotilla_registration::{agent, names};

/// What a klusterlet runs with.
pub struct KlusterletSettings {
    /// The registration agent's settings.
    pub registration: agent::AgentOptions,
    /// The work agent's settings.
    pub work: flotilla_work::agent::AgentOptions,
    /// Hosted mode: the client is the hosting cluster's, and the managed cluster is reached
    /// through the kubeconfig in Secret `external-managed-kubeconfig` of the agent namespace.
    pub hosted: bool,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub ops_bind: SocketAddr,
}

/// Runs the klusterlet on `client` until `shutdown` resolves or an agent stops.
pub async fn run(
    client: kube::Client,
    settings: KlusterletSettings,
    shutdown: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    super::serve_ops(settings.ops_bind, &client, None, "klusterlet").await?;
    let KlusterletSettings {
        registration, work, ..
    } = settings;
    if !settings.hosted {
        eprintln!("flotilla klusterlet: running the registration agent and the work agent");
        let clients = agent::Clients::same(client);
        return tokio::select! {
            result = agent::run_with(clients.clone(), registration) => result.context("registration agent stopped"),
            result = flotilla_work::agent::run_with(clients, work) => result.context("work agent stopped"),
            result = &mut shutdown => result,
        };
    }
    // Hosted: the agents run on a client made from the external-managed-kubeconfig secret,
    // and start again on a new client when the secret changes.
    let secret = format!(
        "{}/{}",
        registration.agent_namespace,
        names::EXTERNAL_MANAGED_KUBECONFIG_SECRET
    );
    loop {
        eprintln!("flotilla klusterlet: hosted mode; reading the managed cluster's kubeconfig from {secret}");
        let managed = tokio::select! {
            managed = agent::hosted::managed_client(&client, &registration) => managed,
            result = &mut shutdown => return result,
        };
        let clients = agent::Clients {
            agent: client.clone(),
            managed: managed.client,
        };
        eprintln!("flotilla klusterlet: running the registration agent and the work agent");
        tokio::select! {
            result = agent::run_with(clients.clone(), registration.clone()) => return result.context("registration agent stopped"),
            result = flotilla_work::agent::run_with(clients, work.clone()) => return result.context("work agent stopped"),
            result = &mut shutdown => return result,
            () = agent::hosted::wait_for_change(&client, &registration.agent_namespace, &managed.kubeconfig) => {
                eprintln!("flotilla klusterlet: {secret} changed; restarting the agents on the new kubeconfig");
            }
        }
    }
}
