//! Which resource serves a manifest's kind on the managed cluster, and whether it is
//! namespaced: one discovery request per group/version on first use, cached afterwards. A
//! kind that is not served is not cached, so a CRD that becomes Established later is found
//! on the next reconcile.

use std::{collections::HashMap, sync::Mutex};

use kube::{
    Client,
    core::GroupVersionKind,
    discovery::{self, ApiResource, Scope},
};

/// A served kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The resource serving it.
    pub resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Cached discovery of the managed cluster.
pub struct Discovery {
    client: Client,
    cache: Mutex<HashMap<GroupVersionKind, Resolved>>,
}

impl Discovery {
    /// Discovery through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(gvk)
            .cloned()
    }

    /// The resource serving `gvk`, or a message a person can act on.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Resolved, String> {
        if let Some(resolved) = self.cached(gvk) {
            return Ok(resolved);
        }
        let api_version = gvk.api_version();
        match discovery::pinned_kind(&self.client, gvk).await {
            Ok((resource, capabilities)) => {
                let resolved = Resolved {
                    resource,
                    namespaced: capabilities.scope == Scope::Namespaced,
                };
                self.cache
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(gvk.clone(), resolved.clone());
                Ok(resolved)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
                "the managed cluster does not serve {api_version} (kind {}); install its CRD or fix apiVersion",
                gvk.kind
            )),
            Err(kube::Error::Discovery(_)) => Err(format!(
                "the managed cluster serves no kind {} in {api_version}; install or wait for its CRD, or fix kind",
                gvk.kind
            )),
            Err(error) => Err(format!("discovery of {api_version} failed: {error}")),
        }
    }
}
