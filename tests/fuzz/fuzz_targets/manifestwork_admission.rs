//! Fuzzes the hub's ManifestWork admission (`flotilla_webhook::review`), which answers
//! the apiserver for every ManifestWork write (`failurePolicy: Fail`). The first input byte
//! picks what the rest is:
//!
//! ```text
//!  even   an AdmissionReview body, decoded and answered as the hub's webhook does
//!  odd    one manifest (JSON), repeated in a work's spec to just under, at or just over the
//!         500 KiB limit
//! ```
//!
//! Properties: no panic; the same answer twice; the answer names its request's uid; a request
//! is denied only for the size of its manifests, and exactly when they take more than
//! `MAX_MANIFESTS_SIZE` bytes (their JSON encoding, as the apiserver stores them).

#![no_main]

use flotilla_api::work::{
    consts::MAX_MANIFESTS_SIZE,
    v1::{Manifest, ManifestWorkSpec, ManifestsTemplate},
};
use flotilla_webhook as webhook;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionReview},
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn answer(request: &AdmissionRequest<DynamicObject>) -> (bool, String) {
    let response = webhook::review(request);
    let again = webhook::review(request);
    assert_eq!(
        serde_json::to_value(&response).ok(),
        serde_json::to_value(&again).ok(),
        "two answers differ"
    );
    assert_eq!(response.uid, request.uid, "the answer names another request");
    (response.allowed, response.result.message)
}

fn check_review(body: &[u8]) {
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body) else {
        return;
    };
    let Ok(request): Result<AdmissionRequest<DynamicObject>, _> = review.try_into() else {
        return;
    };
    let (allowed, message) = answer(&request);
    if !allowed {
        assert!(message.contains("bytes"), "denied for something else: {message}");
        let spec: ManifestWorkSpec = request
            .object
            .as_ref()
            .and_then(|o| o.data.get("spec").cloned())
            .and_then(|s| serde_json::from_value(s).ok())
            .expect("a denied work has a spec");
        let size: usize = spec
            .workload
            .manifests
            .iter()
            .map(|m| serde_json::to_vec(&m.0).map_or(0, |b| b.len()))
            .sum();
        assert!(size > MAX_MANIFESTS_SIZE, "denied at {size} bytes");
    }
}

fn check_boundary(choice: u8, body: &[u8]) {
    let Ok(manifest) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let Ok(encoded) = serde_json::to_vec(&manifest) else {
        return;
    };
    let each = encoded.len();
    // Hundreds of thousands of tiny manifests would only measure the allocator.
    if each < 64 {
        return;
    }
    let fitting = MAX_MANIFESTS_SIZE / each;
    let count = match choice % 3 {
        0 => fitting,
        1 => fitting + 1,
        _ => fitting.saturating_sub(1),
    };
    let spec = ManifestWorkSpec {
        workload: ManifestsTemplate {
            manifests: vec![Manifest(manifest); count],
        },
        ..ManifestWorkSpec::default()
    };
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0df28fbd-5f5f-4b9c-9a66-7c1f1fbb0a3a",
            "kind": {"group": "work.open-cluster-management.io", "version": "v1", "kind": "ManifestWork"},
            "resource": {"group": "work.open-cluster-management.io", "version": "v1", "resource": "manifestworks"},
            "operation": "CREATE",
            "userInfo": {"username": "fuzz"},
            "object": {
                "apiVersion": "work.open-cluster-management.io/v1",
                "kind": "ManifestWork",
                "metadata": {"name": "w", "namespace": "cluster1"},
                "spec": spec,
            },
        },
    }))
    .expect("the review is well formed");
    let request: AdmissionRequest<DynamicObject> = review.try_into().expect("the review has a request");
    let (allowed, _) = answer(&request);
    assert_eq!(
        allowed,
        count * each <= MAX_MANIFESTS_SIZE,
        "{count} manifests of {each} bytes"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        check_review(rest);
    } else {
        check_boundary(mode / 2, rest);
    }
});
