//! Operational metrics of the controllers and their API clients, and the readiness of their
//! caches.
//!
//! One process-wide set: every controller goes through [`crate::controller::run`] and every
//! client can carry [`CountRequestsLayer`], so a global reached from there spares threading a
//! handle through each controller's constructor. Tests that read figures read a process's
//! `/metrics`, never this global across tests.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `flotilla_controller_reconciles_total` | controller, result | reconciles by outcome (success, error) |
//! | `flotilla_controller_reconcile_errors_total` | controller | failed reconciles |
//! | `flotilla_controller_reconcile_duration_seconds` | controller | reconcile latency |
//! | `flotilla_controller_queue_depth` | controller | reconciles running now (kube-runtime's scheduler does not expose its queue; this is what waits on the apiserver) |
//! | `flotilla_controller_cache_synced` | controller | 1 once the controller's cache has listed everything |
//! | `flotilla_apiserver_requests_total` | verb, group, resource, code | API requests of the instrumented clients |
//! | `flotilla_leader_election_is_leader` | lease | 1 while this process leads |

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-controller series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// Labels of reconcile counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    controller: String,
    result: String,
}

/// Labels of API request counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    /// The API group (empty for the core group), so RBAC rules can be matched exactly.
    group: String,
    resource: String,
    code: String,
}

/// Labels of the leader gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    lease: String,
}

/// The process's controller, client and leader-election series.
pub struct Metrics {
    reconciles: Family<OutcomeLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
    queue_depth: Family<ControllerLabels, Gauge>,
    synced: Family<ControllerLabels, Gauge>,
    requests: Family<RequestLabels, Counter>,
    leader: Family<LeaseLabels, Gauge>,
    /// Controllers started and not yet synced, by name (a name may run more than once).
    unsynced: Mutex<BTreeMap<&'static str, usize>>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| Metrics {
        reconciles: Family::default(),
        errors: Family::default(),
        duration: Family::new_with_constructor(latency_histogram),
        queue_depth: Family::default(),
        synced: Family::default(),
        requests: Family::default(),
        leader: Family::default(),
        unsynced: Mutex::new(BTreeMap::new()),
    })
}

impl Metrics {
    /// Registers the series (sharing them) in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("flotilla");
        r.register(
            "controller_reconciles",
            "Reconciles by controller and outcome",
            self.reconciles.clone(),
        );
        r.register(
            "controller_reconcile_errors",
            "Failed reconciles by controller",
            self.errors.clone(),
        );
        r.register(
            "controller_reconcile_duration_seconds",
            "Reconcile latency by controller",
            self.duration.clone(),
        );
        r.register(
            "controller_queue_depth",
            "Reconciles running now, by controller",
            self.queue_depth.clone(),
        );
        r.register(
            "controller_cache_synced",
            "1 once the controller's cache has listed everything",
            self.synced.clone(),
        );
        r.register(
            "apiserver_requests",
            "API requests by verb, resource and response code",
            self.requests.clone(),
        );
        r.register(
            "leader_election_is_leader",
            "1 while this process holds the lease",
            self.leader.clone(),
        );
    }

    /// A controller's reconcile starts; the guard records its outcome and latency.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        self.queue_depth.get_or_create(&labels).inc();
        ReconcileTimer {
            controller,
            started: Instant::now(),
        }
    }

    /// A controller's cache starts listing.
    pub fn cache_started(&self, controller: &'static str) {
        self.synced
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .set(0);
        if let Ok(mut unsynced) = self.unsynced.lock() {
            *unsynced.entry(controller).or_default() += 1;
        }
    }

    /// A controller's cache has listed everything.
    pub fn cache_synced(&self, controller: &'static str) {
        let mut still = 0;
        if let Ok(mut unsynced) = self.unsynced.lock()
            && let Some(count) = unsynced.get_mut(controller)
        {
            *count = count.saturating_sub(1);
            still = *count;
            if still == 0 {
                unsynced.remove(controller);
            }
        }
        if still == 0 {
            self.synced
                .get_or_create(&ControllerLabels {
                    controller: controller.to_owned(),
                })
                .set(1);
        }
    }

    /// The controllers whose caches have not synced yet.
    pub fn unsynced_caches(&self) -> Vec<&'static str> {
        self.unsynced
            .lock()
            .map(|u| u.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Records whether this process leads `lease`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                lease: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    fn request(&self, verb: &str, group: String, resource: String, code: String) {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.to_owned(),
                group,
                resource,
                code,
            })
            .inc();
    }
}

/// Records one reconcile's outcome and latency; see [`Metrics::reconcile_started`].
pub struct ReconcileTimer {
    controller: &'static str,
    started: Instant,
}

impl ReconcileTimer {
    /// The reconcile ended, successfully or not.
    pub fn finish(self, ok: bool) {
        let metrics = global();
        let labels = ControllerLabels {
            controller: self.controller.to_owned(),
        };
        metrics.queue_depth.get_or_create(&labels).dec();
        metrics
            .duration
            .get_or_create(&labels)
            .observe(self.started.elapsed().as_secs_f64());
        let result = if ok { "success" } else { "error" };
        metrics
            .reconciles
            .get_or_create(&OutcomeLabels {
                controller: self.controller.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if !ok {
            metrics.errors.get_or_create(&labels).inc();
        }
    }
}

/// A tower layer for a kube client's stack that counts its requests in
/// `flotilla_apiserver_requests_total`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountRequestsLayer;

impl<S> tower::Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests { inner }
    }
}

/// The service of [`CountRequestsLayer`].
#[derive(Clone, Debug)]
pub struct CountRequests<S> {
    inner: S,
}

impl<S, B, R> tower::Service<http::Request<B>> for CountRequests<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (verb, group, resource) = classify(request.method(), request.uri());
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "error".to_owned(),
            };
            global().request(verb, group, resource, code);
            result
        })
    }
}

/// The Kubernetes verb, API group and resource (`managedclusters`, `leases`,
/// `managedclusters/status`) of a request; paths outside the resource API (`/version`) are
/// their own resource.
fn classify(method: &http::Method, uri: &http::Uri) -> (&'static str, String, String) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return (verb(method, false, false), String::new(), uri.path().to_owned()),
    };
    let rest = match rest {
        ["namespaces", _namespace, inner @ ..] if !inner.is_empty() => inner,
        other => other,
    };
    let resource = match rest {
        [] => String::new(),
        [resource] | [resource, _] => (*resource).to_owned(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    };
    let named = rest.len() >= 2;
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    (verb(method, named, watch), group.to_owned(), resource)
}

fn verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_by_kubernetes_verb_group_and_resource() {
        let cases = [
            ("GET", "/api/v1/namespaces", "list", "", "namespaces"),
            ("GET", "/api/v1/namespaces/cluster1", "get", "", "namespaces"),
            (
                "POST",
                "/api/v1/namespaces/c/configmaps",
                "create",
                "",
                "configmaps",
            ),
            (
                "PATCH",
                "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1/status",
                "patch",
                "cluster.open-cluster-management.io",
                "managedclusters/status",
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/hub/leases/flotilla-hub",
                "update",
                "coordination.k8s.io",
                "leases",
            ),
            (
                "GET",
                "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks?watch=true&resourceVersion=5",
                "watch",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/c/secrets/s",
                "delete",
                "",
                "secrets",
            ),
            ("GET", "/version", "list", "", "/version"),
        ];
        for (method, uri, verb, group, resource) in cases {
            let method: http::Method = method.parse().unwrap();
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(
                classify(&method, &uri),
                (verb, group.to_owned(), resource.to_owned()),
                "{uri}"
            );
        }
    }
}
