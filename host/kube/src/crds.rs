//! Installing CRDs: apply each server-side, then wait until the apiserver serves it.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    runtime::{conditions, wait::await_condition},
};

use crate::error::{Error, Result};

/// Applies `crds` (field manager `flotilla`) and waits up to `timeout` for each to be
/// established.
pub async fn install(client: &Client, crds: &[CustomResourceDefinition], timeout: Duration) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        crate::apply::apply(&api, crd).await?;
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
