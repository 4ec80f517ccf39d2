//! `flotilla hub`: every replica serves the webhook and the metrics and health endpoint; only
//! the elected leader writes (admission objects, the webhook registrations, the controllers).
//! The registration, placement, work and add-on controllers and the plugin host run side by
//! side; a failure of any stops the process. With a cluster-proxy tunnel server beside it,
//! every replica also serves the cluster gateway (the leader registers its APIService).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use flotilla_kube::leader::LeaderElection;
use flotilla_plugin_loader::controller::ControllerConfig;
use flotilla_registration::{hub, names};
use flotilla_wasm::{PluginRegistry, Runtime, RuntimeConfig};
use futures::FutureExt as _;

/// Name of the hub replicas' leader lease.
pub const HUB_LEASE: &str = "flotilla-hub";

/// What a hub runs with.
pub struct HubSettings {
    /// The plugin runtime's engine-wide settings; `None`: no plugin host and no add-on manager.
    pub plugins: Option<RuntimeConfig>,
    /// The `AddOnPlugin` controller's settings.
    pub loader: ControllerConfig,
    /// The one namespace whose Secrets plugins and templates may name.
    pub plugin_secrets_namespace: String,
    /// Where the HTTPS webhook server listens.
    pub webhook_bind: SocketAddr,
    /// The host the apiserver reaches the webhook at (default: the bind address).
    pub webhook_host: Option<String>,
    /// The Service (namespace, name) in front of the replicas, when the hub runs in-cluster.
    pub webhook_service: Option<(String, String)>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub ops_bind: SocketAddr,
    /// The election among replicas for lease [`HUB_LEASE`]; `None`: act at once.
    pub election: Option<LeaderElection>,
    /// The cluster gateway; `None`: not served.
    pub gateway: Option<super::gateway::GatewaySettings>,
}

/// Runs the hub on `client` until `shutdown` resolves or a part of it stops.
pub async fn run(
    client: kube::Client,
    settings: HubSettings,
    shutdown: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let endpoint = webhook_endpoint(&settings);
    let host = endpoint.service_host().unwrap_or_else(|| {
        settings
            .webhook_host
            .clone()
            .unwrap_or_else(|| settings.webhook_bind.ip().to_string())
    });
    // Every replica serves the one certificate kept in the hub namespace, so the registered
    // caBundle holds whichever replica leads.
    let certificate = flotilla_webhook::shared_certificate(
        &client,
        names::HUB_NAMESPACE,
        flotilla_webhook::CERTIFICATE_SECRET,
        std::slice::from_ref(&host),
    )
    .await
    .context("get the webhook's serving certificate")?;
    let webhook = flotilla_webhook::serve(settings.webhook_bind, &certificate)
        .await
        .context("start the webhook server")?;
    eprintln!("flotilla hub: webhook server at https://{}", webhook.addr);
    // A URL endpoint names each path; a Service reference takes the path beside it.
    let at = |path: &str| match &endpoint {
        flotilla_webhook::Endpoint::Url(_) => {
            flotilla_webhook::Endpoint::Url(format!("https://{host}:{}{path}", webhook.addr.port()))
        }
        service => service.clone(),
    };
    let conversion_endpoint = at(flotilla_webhook::CONVERT_PATH);
    let endpoint = at(flotilla_webhook::VALIDATE_PATH);
    let plugin_host = match &settings.plugins {
        None => None,
        Some(config) => {
            let runtime = Runtime::new(config.clone()).context("start the plugin runtime")?;
            Some(Arc::new(PluginRegistry::new(runtime)))
        }
    };
    super::serve_ops(settings.ops_bind, &client, plugin_host.as_deref(), "hub").await?;
    let gateway = match &settings.gateway {
        Some(gateway) => Some(super::gateway::serve(&client, gateway).await?),
        None => None,
    };
    let controllers = async {
        if let Some(gateway) = &gateway {
            gateway.register(&client).await?;
        }
        flotilla_registration::admission::install(&client)
            .await
            .context("install admission policies")?;
        flotilla_work::admission::install(&client)
            .await
            .context("install the ManifestWork admission policy")?;
        flotilla_webhook::register_endpoint(&client, &endpoint, &webhook.ca_pem)
            .await
            .context("register the ManifestWork webhook")?;
        match &endpoint {
            flotilla_webhook::Endpoint::Url(url) => {
                eprintln!("flotilla hub: ManifestWork webhook at {url}")
            }
            flotilla_webhook::Endpoint::Service { namespace, name } => {
                eprintln!("flotilla hub: ManifestWork webhook through Service {namespace}/{name}")
            }
        }
        flotilla_webhook::register_conversion(&client, &conversion_endpoint, &webhook.ca_pem)
            .await
            .context("register the add-on conversion webhook")?;
        let conversion = flotilla_webhook::keep_conversion(
            client.clone(),
            conversion_endpoint.clone(),
            webhook.ca_pem.clone(),
        );
        tokio::select! {
            result = controllers(client.clone(), &settings, plugin_host) => result,
            () = conversion => Ok(()),
        }
    };
    let until_stopped = async {
        tokio::select! {
            result = controllers => result,
            result = shutdown => result,
        }
    };
    leading(&client, settings.election.clone(), until_stopped).await
}

/// Where the apiserver reaches the webhook: the Service, else a URL (its port known once the
/// server listens).
fn webhook_endpoint(settings: &HubSettings) -> flotilla_webhook::Endpoint {
    match &settings.webhook_service {
        Some((namespace, name)) => flotilla_webhook::Endpoint::Service {
            namespace: namespace.clone(),
            name: name.clone(),
        },
        None => flotilla_webhook::Endpoint::Url(String::new()),
    }
}

/// The hub's controllers, until one stops.
async fn controllers(
    client: kube::Client,
    settings: &HubSettings,
    plugin_host: Option<Arc<PluginRegistry>>,
) -> anyhow::Result<()> {
    match &plugin_host {
        None => eprintln!(
            "flotilla hub: running registration, placement and work controllers (plugin host and add-on manager disabled)"
        ),
        Some(registry) => eprintln!(
            "flotilla hub: running registration, placement and work controllers, the plugin host ({:?} allocator) and the add-on manager",
            registry.runtime().allocator()
        ),
    }
    // One watch and one cache per kind for the whole hub: every part subscribes now, before
    // the feeds run, so none misses the first list.
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let registration = hub::start(&mut feeds, client.clone(), hub::HubOptions::default());
    let placement = flotilla_placement::start(
        &mut feeds,
        client.clone(),
        flotilla_placement::PlacementOptions::default(),
    );
    let work = flotilla_work::hub::start(
        &mut feeds,
        client.clone(),
        flotilla_work::hub::HubOptions::default(),
    );
    // The add-on manager calls the plugins the AddOnPlugin controller loads into the registry.
    let (plugins, addons) = match plugin_host {
        Some(registry) => {
            let plugins = flotilla_plugin_loader::controller::start(
                &mut feeds,
                client.clone(),
                Arc::clone(&registry),
                settings.loader.clone(),
            );
            let options = flotilla_addon_manager::Options {
                plugin_secrets_namespace: settings.plugin_secrets_namespace.clone(),
                ..flotilla_addon_manager::Options::default()
            };
            let addons = flotilla_addon_manager::start(&mut feeds, client.clone(), registry, options);
            (plugins.boxed(), addons.boxed())
        }
        None => (std::future::pending().boxed(), std::future::pending().boxed()),
    };
    // Each on the heap: together they are too large a future for a thread's stack in debug builds.
    tokio::select! {
        result = registration.boxed() => result.context("hub controllers stopped"),
        () = feeds.run().boxed() => anyhow::bail!("the hub's watches stopped"),
        () = placement.boxed() => anyhow::bail!("placement controller stopped"),
        () = work.boxed() => anyhow::bail!("hub work controllers stopped"),
        () = plugins => anyhow::bail!("the AddOnPlugin controller stopped"),
        () = addons => anyhow::bail!("the add-on manager stopped"),
    }
}

/// Runs `work` under `election` (or directly when there is none), reporting leadership in
/// metrics.
async fn leading<F: Future<Output = anyhow::Result<()>>>(
    client: &kube::Client,
    election: Option<LeaderElection>,
    work: F,
) -> anyhow::Result<()> {
    let Some(election) = election else {
        return work.await;
    };
    struct Gauge(String);
    impl flotilla_kube::leader::LeaderObserver for Gauge {
        fn leading(&self, leading: bool) {
            flotilla_kube::metrics::global().set_leader(&self.0, leading);
        }
    }
    ensure_namespace(client, &election.namespace).await?;
    let api = kube::Api::namespaced(client.clone(), &election.namespace);
    eprintln!(
        "flotilla: waiting to lead lease {}/{} as {}",
        election.namespace, election.name, election.identity
    );
    election
        .run(api, &Gauge(election.name.clone()), work)
        .await
        .context("leader election")?
}

/// Creates the lease's namespace when missing (the hub's own namespace, which `flotilla init`
/// and deploy/hub create too), so a hub started on a bare cluster does not wait forever.
async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    if namespaces
        .get_opt(name)
        .await
        .with_context(|| format!("read namespace {name}"))?
        .is_some()
    {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces
        .create(&kube::api::PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error).with_context(|| format!("create the leader lease namespace {name}")),
    }
}
