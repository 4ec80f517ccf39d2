//! The run loop every Flotilla controller shares: one error policy, one way of logging what
//! a reconcile did, so a new controller writes only its watches and its reconcile.

use std::sync::Arc;

use futures::StreamExt;
use kube::{
    Resource,
    api::{ObjectMeta, PartialObjectMeta},
    runtime::{
        Controller, WatchStreamExt as _, controller,
        reflector::{self, ObjectRef},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tracing::Instrument as _;

/// Runs `controller` with `reconcile` and the shared error policy until dropped, logging what
/// went wrong: failed reconciles at trace level (the error policy already logged them),
/// requeues of deleted objects at debug level, everything else (watch or queue trouble) as a
/// warning.
pub async fn run<K, C, E, F, Fut>(
    name: &'static str,
    controller: Controller<K>,
    reconcile: F,
    context: Arc<C>,
) where
    K: Clone + Resource<DynamicType = ()> + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<controller::Action, E>> + Send + 'static,
{
    let failures = Arc::new(crate::backoff::Failures::default());
    let counted = Arc::clone(&failures);
    let error_policy = move |object: Arc<K>, error: &E, _: Arc<C>| {
        let attempt = counted.failed(&ObjectRef::from_obj(object.as_ref()).to_string());
        requeue_after_error(name, object.as_ref(), error, attempt)
    };
    let metrics = crate::metrics::global();
    let mut reconcile = reconcile;
    // Every reconcile runs in a span naming its controller and object, so its log lines (text
    // or JSON) say what they are about.
    let timed = move |object: Arc<K>, context: Arc<C>| {
        let span = tracing::info_span!("reconcile", controller = name, object = %ObjectRef::from_obj(object.as_ref()));
        let timer = metrics.reconcile_started(name);
        let outcome = span.in_scope(|| reconcile(object, context));
        async move {
            let result = outcome.await;
            let ok = result.is_ok();
            timer.finish(ok);
            tracing::debug!(ok, "reconcile finished");
            result
        }
        .instrument(span)
    };
    // Readiness: the controller's cache counts as synced once its first full list is in.
    let store = controller.store();
    metrics.cache_started(name);
    let synced = async move {
        if store.wait_until_ready().await.is_ok() {
            metrics.cache_synced(name);
        }
    };
    let running = controller
        .run(timed, error_policy, context)
        .for_each(move |result| {
            match result {
                Ok((object, _)) => {
                    failures.succeeded(&object.to_string());
                    tracing::trace!(controller = name, %object, "reconciled");
                }
                Err(controller::Error::ReconcilerFailed(error, object)) => {
                    tracing::trace!(controller = name, %object, %error, "reconcile failed");
                }
                // A requeued object that was deleted meanwhile: expected, nothing to do.
                Err(controller::Error::ObjectNotFound(object)) => {
                    tracing::debug!(controller = name, %object, "object gone before its requeue");
                }
                Err(error) => tracing::warn!(controller = name, %error, "controller trouble"),
            }
            std::future::ready(())
        });
    futures::join!(running, synced);
}

/// A controller over every `K` that `config` selects, whose cache keeps what `slim` leaves of
/// each object: fields a writer controls that this controller never reads (a ManagedCluster's
/// claims, written by its agent) then cost it nothing.
pub fn slimmed<K>(api: kube::Api<K>, config: watcher::Config, slim: fn(&mut K)) -> Controller<K>
where
    K: Clone + Resource<DynamicType = ()> + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(stream, store)
}

/// A controller over the metadata of every `K` that `config` selects, whose cache keeps of each
/// object only its name, namespace, uid, resourceVersion and the labels named in `labels`.
///
/// For kinds that requesters write at any size and rate (CertificateSigningRequests: every
/// cluster agent may create them): each object costs the cache a few hundred bytes, whatever
/// its spec, annotations or managed fields carry, and the apiserver sends no more than that.
/// Reconciles read the one object they work on, at most [`METADATA_ONLY_CONCURRENCY`] at a
/// time, so a flood of large objects is read a few at a time, not all at once.
pub fn metadata_only<K>(
    client: kube::Client,
    config: watcher::Config,
    labels: &'static [&'static str],
) -> Controller<PartialObjectMeta<K>>
where
    K: Clone + Resource<DynamicType = ()> + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(kube::Api::<PartialObjectMeta<K>>::all(client), config)
        .default_backoff()
        .modify(move |object| keep_only(object, labels))
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(stream, store)
        .with_config(controller::Config::default().concurrency(METADATA_ONLY_CONCURRENCY))
}

/// Reconciles a [`metadata_only`] controller runs at once.
pub const METADATA_ONLY_CONCURRENCY: u16 = 8;

/// Drops everything of `object`'s metadata but its identity and the `labels` named.
fn keep_only<K>(object: &mut PartialObjectMeta<K>, labels: &[&str]) {
    let metadata = std::mem::take(&mut object.metadata);
    object.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        labels: metadata.labels.map(|found| {
            found
                .into_iter()
                .filter(|(key, _)| labels.contains(&key.as_str()))
                .collect()
        }),
        ..ObjectMeta::default()
    };
}

/// Runs `work`, CPU-bound for up to a deadline of its own (CEL evaluation), so that the
/// runtime moves this worker's other tasks (lease renewals among them) to other threads
/// meanwhile; on a runtime with one thread (tests), in place.
pub fn off_the_async_workers<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// The error policy of every controller: log, then back off with [`crate::backoff`]. Conflicts
/// are routine where several writers share an object (an agent and several hub controllers
/// write a ManagedCluster), so they are logged at debug level only.
fn requeue_after_error<K, E>(
    controller_name: &'static str,
    object: &K,
    error: &E,
    attempt: u32,
) -> controller::Action
where
    K: Resource<DynamicType = ()>,
    E: std::error::Error + 'static,
{
    let object = ObjectRef::from_obj(object);
    if crate::backoff::status_code(error) == Some(409) {
        tracing::debug!(controller = controller_name, %object, %error, "conflict; retrying");
    } else {
        tracing::warn!(controller = controller_name, %object, %error, "reconcile failed; retrying");
    }
    crate::backoff::requeue_after(error, attempt)
}

/// Whether `store` holds its first full list, checked without waiting. A reconcile must not
/// await [`Store::wait_until_ready`](kube::runtime::reflector::Store::wait_until_ready):
/// kube-runtime's readiness future keeps the waker of the last task that polled it only, so of
/// two reconciles awaiting it side by side the first was never woken and its object never
/// reconciled again. A reconcile that finds a cache not ready requeues instead.
pub fn cache_ready<K>(store: &kube::runtime::reflector::Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    use futures::FutureExt as _;
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{StreamExt as _, stream::FuturesUnordered};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{reflector, watcher};

    use super::{cache_ready, keep_only};

    /// Reconciles run side by side in one `FuturesUnordered`, each woken on its own: all of
    /// them must go on once the cache fills (awaiting its readiness, only the last one did).
    #[tokio::test]
    async fn every_reconcile_waiting_side_by_side_sees_the_cache_fill() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        assert!(!cache_ready(&store));
        let mut waiting: FuturesUnordered<_> = (0..3)
            .map(|_| {
                let store = store.clone();
                async move {
                    while !cache_ready(&store) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
            .collect();
        assert!(futures::poll!(waiting.next()).is_pending());
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let finished = tokio::time::timeout(Duration::from_secs(30), waiting.count()).await;
        assert_eq!(finished.ok(), Some(3), "every waiter went on");
    }

    #[test]
    fn the_metadata_cache_keeps_identity_and_the_named_labels_only() {
        use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
        use kube::api::PartialObjectMeta;
        let big = "x".repeat(256 * 1024);
        let mut object: PartialObjectMeta<CertificateSigningRequest> = serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {
                "name": "csr-1", "uid": "u1", "resourceVersion": "7",
                "labels": {"open-cluster-management.io/cluster-name": "c1", "junk": "y"},
                "annotations": {"a": big},
                "finalizers": ["f"],
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsV1": {"f:metadata": {}}}],
            }
        }))
        .unwrap();
        keep_only(&mut object, &["open-cluster-management.io/cluster-name"]);
        let kept = serde_json::to_string(&object.metadata).unwrap();
        assert_eq!(
            kept,
            r#"{"labels":{"open-cluster-management.io/cluster-name":"c1"},"name":"csr-1","resourceVersion":"7","uid":"u1"}"#
        );
    }
}
