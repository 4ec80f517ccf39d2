//! The add-ons' agent images: every one the plugins name builds from its program and reaches a
//! real registry on loopback, from which nodes pull them as `flotilla.local/<image>`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use flotilla_testing::{image, registry::Registry};

#[tokio::test]
async fn every_agent_image_is_built_and_pushed_by_digest() {
    let registry = Registry::start().await.unwrap();
    let pushed = [
        image::push_helloworld_agent(&registry).await.unwrap(),
        image::push_resource_usage_agent(&registry).await.unwrap(),
        image::push_managed_serviceaccount_agent(&registry).await.unwrap(),
        image::push_cluster_proxy_agent(&registry).await.unwrap(),
    ];
    for (agent, reference) in image::AGENT_IMAGES.iter().zip(&pushed) {
        let (repository, _) = agent.image;
        let prefix = format!("{}/{repository}@sha256:", registry.host());
        assert!(reference.starts_with(&prefix), "{reference} is not {prefix}…");
    }
}
