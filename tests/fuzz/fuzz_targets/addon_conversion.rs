//! Fuzzes the add-on CRDs' conversion (`flotilla_api::addon::conversion`), which answers the
//! apiserver's ConversionReviews for every read and write of a ClusterManagementAddOn or
//! ManagedClusterAddOn. The first input byte picks what the rest is:
//!
//! ```text
//!  even   a ConversionReview body, decoded and answered as the hub's webhook does
//!  odd    one object (JSON), converted to both versions and back
//! ```
//!
//! Properties: no panic; the same answer twice; a review answers its own uid, converts every
//! object into the desired version or fails without a half-converted list, and agrees with
//! converting each object alone. An object already in the desired version is returned as it is;
//! a converted object converts back, and a second round trip changes nothing. A v1beta1 object
//! (the served version) survives storage as v1alpha1: converting it there and back gives what
//! reading and writing it as v1beta1 gives, when each registration's type matches its settings
//! and no default config is the reserved "no default" name (both have no v1alpha1 form).

#![no_main]

use flotilla_api::addon::{
    consts::{KUBE_APISERVER_CLIENT_SIGNER, RESERVED_NO_DEFAULT_CONFIG_NAME},
    conversion::{self, V1ALPHA1, V1BETA1},
    v1beta1 as b1,
};
use kube::core::conversion::ConversionReview;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn api_version(object: &Value) -> Option<&str> {
    object.get("apiVersion").and_then(Value::as_str)
}

fn check_review(body: &[u8]) {
    let Ok(review) = serde_json::from_slice::<ConversionReview>(body) else {
        return;
    };
    let answer = conversion::review(review.clone());
    let again = conversion::review(review.clone());
    assert_eq!(
        serde_json::to_value(&answer).ok(),
        serde_json::to_value(&again).ok(),
        "two answers differ"
    );
    let response = answer.response.expect("a review is answered");
    let Some(request) = review.request else {
        assert!(
            response.result.is_failure(),
            "a review without a request is refused"
        );
        return;
    };
    assert_eq!(response.uid, request.uid, "the answer names another request");
    let alone: Result<Vec<Value>, _> = request
        .objects
        .iter()
        .map(|o| conversion::convert(o.clone(), &request.desired_api_version))
        .collect();
    if response.result.is_success() {
        assert_eq!(Ok(response.converted_objects.clone()), alone.map_err(|_| ()));
        for object in &response.converted_objects {
            assert_eq!(api_version(object), Some(request.desired_api_version.as_str()));
        }
    } else {
        assert!(response.converted_objects.is_empty(), "a failure carries objects");
        assert!(
            alone.is_err(),
            "the review failed yet every object converts alone"
        );
    }
}

/// Whether each of the object's registrations is of the kind its settings describe, as the
/// v1beta1 schema's writers make them: `kubeClient` with no custom signer, `customSigner` with
/// a custom signer other than the kube-apiserver client signer (v1alpha1 has one record for
/// both, so a registration that is neither cannot survive storage as it was written).
fn registrations_consistent(object: &Value) -> bool {
    let registrations = object.pointer("/status/registrations").and_then(Value::as_array);
    registrations.into_iter().flatten().all(|r| {
        let signer = r.pointer("/customSigner/signerName").and_then(Value::as_str);
        match r.get("type").and_then(Value::as_str) {
            Some("kubeClient") => {
                r.get("kubeClient").is_some_and(Value::is_object) && r.get("customSigner").is_none()
            }
            Some("customSigner") => {
                r.get("kubeClient").is_none()
                    && r.pointer("/customSigner/subject").is_some_and(Value::is_object)
                    && signer.is_some_and(|s| !s.is_empty() && s != KUBE_APISERVER_CLIENT_SIGNER)
            }
            _ => false,
        }
    })
}

/// Whether no default config is the reserved "no default" name, which stands for a supported
/// config without a default in v1alpha1: anything else written beside it has nowhere to go.
fn defaults_meaningful(object: &Value) -> bool {
    let defaults = object.pointer("/spec/defaultConfigs").and_then(Value::as_array);
    defaults
        .into_iter()
        .flatten()
        .all(|d| d.get("name").and_then(Value::as_str) != Some(RESERVED_NO_DEFAULT_CONFIG_NAME))
}

/// `object` read and written back as `K`, if it reads.
fn normalized<K: DeserializeOwned + Serialize>(object: &Value) -> Option<Value> {
    serde_json::from_value::<K>(object.clone())
        .ok()
        .and_then(|k| serde_json::to_value(k).ok())
}

fn check_object(body: &[u8]) {
    let Ok(object) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    for desired in [V1ALPHA1, V1BETA1] {
        let converted = conversion::convert(object.clone(), desired);
        assert_eq!(
            converted,
            conversion::convert(object.clone(), desired),
            "two answers differ"
        );
        let Ok(converted) = converted else {
            continue;
        };
        assert_eq!(api_version(&converted), Some(desired));
        let Some(from) = api_version(&object) else {
            continue;
        };
        if from == desired {
            assert_eq!(converted, object, "an object already in {desired} changed");
            continue;
        }
        let back = conversion::convert(converted.clone(), from)
            .unwrap_or_else(|e| panic!("converted to {desired}, not back to {from}: {e}"));
        let there_again = conversion::convert(back.clone(), desired).expect("converts again");
        assert_eq!(
            there_again, converted,
            "a second round trip through {from} changed the object"
        );
        if from == V1BETA1 && registrations_consistent(&object) && defaults_meaningful(&object) {
            let kind = object.get("kind").and_then(Value::as_str);
            let read = match kind {
                Some("ClusterManagementAddOn") => normalized::<b1::ClusterManagementAddOn>(&object),
                Some("ManagedClusterAddOn") => normalized::<b1::ManagedClusterAddOn>(&object),
                _ => None,
            };
            assert_eq!(Some(back), read, "a v1beta1 object lost something in storage");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        check_review(rest);
    } else {
        check_object(rest);
    }
});
