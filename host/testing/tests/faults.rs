//! The fault harness on a real control plane: etcd stopped under a running apiserver, a
//! frozen apiserver, and the black-holing proxy, each shown to break requests the way the
//! fault does in production and to leave the same objects served once it is over.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::time::Duration;

use flotilla_testing::{ControlPlane, blackhole::Blackhole, kubeconfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt as _,
    api::{ObjectMeta, PostParams},
};
use tokio::{io::AsyncReadExt as _, net::TcpStream, time::timeout};

async fn config_map(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_owned(), "v".to_owned())].into()),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &object).await.unwrap()
}

#[tokio::test]
async fn etcd_stopped_alone_fails_requests_and_its_return_serves_the_same_objects() {
    let mut cp = ControlPlane::start("etcd-fault").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cp.admin_client().await.unwrap(), "default");
    let before = config_map(&api, "kept").await;

    cp.stop_etcd().unwrap();
    // The apiserver still accepts connections, but cannot answer from storage.
    TcpStream::connect(("127.0.0.1", cp.port())).await.unwrap();
    let read = timeout(Duration::from_secs(10), api.get("kept")).await;
    assert!(
        !matches!(read, Ok(Ok(_))),
        "a read succeeded with etcd down: {read:?}"
    );

    cp.start_etcd().await.unwrap();
    let after = api.get("kept").await.unwrap();
    assert_eq!(after.uid(), before.uid());
    assert_eq!(after.resource_version(), before.resource_version());
    config_map(&api, "written-after").await;

    // A frozen apiserver holds the connection and never answers; thawed, it serves again.
    cp.pause("kube-apiserver").unwrap();
    let fresh: Api<ConfigMap> = Api::namespaced(cp.admin_client().await.unwrap(), "default");
    let frozen = timeout(Duration::from_secs(3), fresh.get("kept")).await;
    assert!(frozen.is_err(), "a paused apiserver answered: {frozen:?}");
    cp.resume("kube-apiserver").unwrap();
    assert_eq!(fresh.get("kept").await.unwrap().uid(), before.uid());
}

#[tokio::test]
async fn a_black_holed_proxy_hangs_requests_with_the_connection_open_until_restored() {
    let cp = ControlPlane::start("blackhole").await.unwrap();
    let proxy = Blackhole::start(([127, 0, 0, 1], cp.port()).into())
        .await
        .unwrap();
    let yaml = std::fs::read_to_string(cp.admin_kubeconfig())
        .unwrap()
        .replace(cp.server(), &proxy.url());
    assert!(
        yaml.contains(&proxy.url()),
        "the kubeconfig names {}",
        cp.server()
    );
    let client = kubeconfig::client_from_yaml(&yaml).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let made = config_map(&api, "through-the-proxy").await;

    proxy.blackhole();
    let hung = timeout(Duration::from_secs(4), api.get("through-the-proxy")).await;
    assert!(
        hung.is_err(),
        "a request through the black hole finished: {hung:?}"
    );
    // A new connection is accepted and then silent: no bytes, no close, no reset.
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut byte = [0u8; 1];
    let read = timeout(Duration::from_secs(2), raw.read(&mut byte)).await;
    assert!(read.is_err(), "the black hole answered or closed: {read:?}");
    assert!(proxy.held() >= 2, "held {}", proxy.held());

    proxy.restore();
    let client = kubeconfig::client_from_yaml(&yaml).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(api.get("through-the-proxy").await.unwrap().uid(), made.uid());
}
