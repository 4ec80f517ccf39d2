//! The calls a renewal makes, answered by a fake apiserver that records them.

use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

/// One request the fake apiserver received.
#[derive(Debug)]
struct Call {
    method: Method,
    path: String,
    body: Value,
}

/// A client whose requests are recorded in the returned list and answered by `answer`, called
/// with the method and the request body.
fn fake_apiserver(
    answer: impl Fn(&Method, &Value) -> (StatusCode, Value) + Send + Sync + 'static,
) -> (Client, Arc<Mutex<Vec<Call>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let recorded = calls.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |request: Request<Body>| {
        let (calls, answer) = (recorded.clone(), answer.clone());
        async move {
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let bytes = request.into_body().collect_bytes().await?;
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (status, reply) = answer(&method, &body);
            calls
                .lock()
                .expect("not poisoned")
                .push(Call { method, path, body });
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply)?))?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
        }
    });
    (Client::new(service, "default"), calls)
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
           "message": "leases.coordination.k8s.io \"my-addon\" not found"})
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/addon-ns/leases";

fn renewer(client: Client) -> LeaseRenewer {
    LeaseRenewer::new(
        client,
        "addon-ns",
        "my-addon",
        "my-agent",
        Duration::from_secs(60),
    )
}

#[tokio::test]
async fn a_missing_lease_is_created_held_by_the_agent_for_one_period() {
    let (client, calls) = fake_apiserver(|method, body| match *method {
        Method::GET => (StatusCode::NOT_FOUND, not_found()),
        _ => (StatusCode::CREATED, body.clone()),
    });
    renewer(client).renew().await.expect("created");

    let calls = calls.lock().expect("not poisoned");
    let [get, create] = calls.as_slice() else {
        panic!("a read, then a create: {calls:?}");
    };
    assert_eq!(
        (&get.method, get.path.as_str()),
        (&Method::GET, &*format!("{LEASES}/my-addon"))
    );
    assert_eq!((&create.method, create.path.as_str()), (&Method::POST, LEASES));
    assert_eq!(create.body["metadata"]["name"], "my-addon");
    assert_eq!(create.body["spec"]["holderIdentity"], "my-agent");
    assert_eq!(create.body["spec"]["leaseDurationSeconds"], 60);
    assert!(create.body["spec"]["renewTime"].is_string(), "{}", create.body);
}

#[tokio::test]
async fn an_existing_lease_is_replaced_with_a_new_renew_time_and_nothing_else_changed() {
    let existing = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "my-addon", "namespace": "addon-ns", "resourceVersion": "7"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 30,
                 "renewTime": "2020-01-01T00:00:00.000000Z"},
    });
    let (client, calls) = fake_apiserver(move |method, body| match *method {
        Method::GET => (StatusCode::OK, existing.clone()),
        _ => (StatusCode::OK, body.clone()),
    });
    renewer(client).renew().await.expect("renewed");

    let calls = calls.lock().expect("not poisoned");
    let [_, replace] = calls.as_slice() else {
        panic!("a read, then a replace: {calls:?}");
    };
    assert_eq!(
        (&replace.method, replace.path.as_str()),
        (&Method::PUT, &*format!("{LEASES}/my-addon"))
    );
    // The version read, so that a concurrent write conflicts instead of being overwritten.
    assert_eq!(replace.body["metadata"]["resourceVersion"], "7");
    assert_eq!(replace.body["spec"]["holderIdentity"], "someone-else");
    assert_eq!(replace.body["spec"]["leaseDurationSeconds"], 30);
    assert_ne!(replace.body["spec"]["renewTime"], "2020-01-01T00:00:00.000000Z");
}

#[tokio::test]
async fn a_refused_read_is_an_error_naming_the_lease_and_nothing_is_written() {
    let (client, calls) = fake_apiserver(|_, _| {
        (
            StatusCode::FORBIDDEN,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                   "code": 403, "message": "leases is forbidden"}),
        )
    });
    let error = renewer(client).renew().await.expect_err("refused");
    assert!(
        matches!(error, Error::ReadLease { ref name, .. } if name == "my-addon"),
        "{error:?}"
    );
    assert!(
        chain(&error).starts_with("read Lease my-addon: "),
        "{}",
        chain(&error)
    );
    assert_eq!(calls.lock().expect("not poisoned").len(), 1);
}

#[tokio::test]
async fn a_conflicting_renewal_is_an_error_naming_the_lease() {
    let (client, _) = fake_apiserver(|method, _| match *method {
        Method::GET => (
            StatusCode::OK,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "my-addon", "resourceVersion": "7"}, "spec": {}}),
        ),
        _ => (
            StatusCode::CONFLICT,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict",
                   "code": 409, "message": "the object has been modified"}),
        ),
    });
    let error = renewer(client).renew().await.expect_err("conflict");
    assert!(
        matches!(error, Error::RenewLease { ref name, .. } if name == "my-addon"),
        "{error:?}"
    );
}
