//! Installing CRDs: apply each server-side, then wait until the apiserver serves it.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    runtime::{conditions, wait::await_condition},
};

use crate::error::{Error, Result};

/// Applies `crds` (field manager `flotilla`) and waits up to `timeout` for each to be
/// established. A CRD whose conversion a running hub has pointed at its webhook keeps that
/// conversion (see [`keep_live_conversion`]).
pub async fn install(client: &Client, crds: &[CustomResourceDefinition], timeout: Duration) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let live = api.get_opt(&crd.name_any()).await.map_err(|source| Error::Get {
            kind: "CustomResourceDefinition".into(),
            name: crd.name_any(),
            source,
        })?;
        crate::apply::apply(&api, &keep_live_conversion(crd, live.as_ref())).await?;
    }
    for crd in crds {
        let name = crd.name_any();
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::Wait {
                    what: format!("CRD {name} established"),
                    message: e.to_string(),
                });
            }
            Err(_) => {
                return Err(Error::Wait {
                    what: format!("CRD {name} established"),
                    message: format!("not established after {timeout:?}"),
                });
            }
        }
    }
    Ok(())
}

/// `crd` as it should be applied over `live`: when the hub has switched the live conversion to
/// its webhook and `crd` says `None` (as installed), the live conversion is kept. Applying
/// `None` would leave the webhook settings the hub wrote, which the apiserver refuses next to
/// `None`, so re-running an installer beside a running hub would fail; and the hub would point
/// the conversion back at once anyway.
pub fn keep_live_conversion(
    crd: &CustomResourceDefinition,
    live: Option<&CustomResourceDefinition>,
) -> CustomResourceDefinition {
    let mut crd = crd.clone();
    let live_conversion = live.and_then(|l| l.spec.conversion.as_ref());
    let installs_none = crd.spec.conversion.as_ref().is_none_or(|c| c.strategy == "None");
    if let Some(conversion) = live_conversion.filter(|c| c.strategy == "Webhook" && installs_none) {
        crd.spec.conversion = Some(conversion.clone());
    }
    crd
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, WebhookClientConfig, WebhookConversion,
    };

    use super::*;

    fn with_conversion(strategy: &str, webhook: bool) -> CustomResourceDefinition {
        let mut crd = CustomResourceDefinition::default();
        crd.spec.conversion = Some(CustomResourceConversion {
            strategy: strategy.into(),
            webhook: webhook.then(|| WebhookConversion {
                client_config: Some(WebhookClientConfig {
                    url: Some("https://hub/convert".into()),
                    ..WebhookClientConfig::default()
                }),
                conversion_review_versions: vec!["v1".into()],
            }),
        });
        crd
    }

    #[test]
    fn a_hub_webhook_conversion_survives_reinstalling() {
        let installed = with_conversion("None", false);
        let live = with_conversion("Webhook", true);
        assert_eq!(
            keep_live_conversion(&installed, Some(&live)).spec.conversion,
            live.spec.conversion
        );
        // A first install, or a live CRD without a webhook, applies what is installed.
        assert_eq!(keep_live_conversion(&installed, None), installed);
        let plain = with_conversion("None", false);
        assert_eq!(keep_live_conversion(&installed, Some(&plain)), installed);
    }
}
