//! Fuzzes the resource-usage add-on agent's quantity reader
//! (`resource_usage_agent::quantity::parse`), which reads Node allocatable and Pod requests
//! from the managed cluster's API, and the sums its scores make of what it reads
//! (`resource_usage_agent::score::compute`). The first input byte picks what the rest is:
//!
//! ```text
//!  even   one quantity
//!  odd    a cluster, one quantity per line: the first is one node's allocatable of every
//!         scored resource, each other line one pod's request of every scored resource on it
//! ```
//!
//! Properties of a quantity: no panic; the same reading twice; never NaN nor −0; a nonzero
//! reading is at least 1n in magnitude, and at most 2^63 with a binary suffix (apimachinery's
//! cap of `Ki` … `Ei` amounts at 2^63 − 1); a leading `-` negates exactly and a leading `+`
//! changes nothing. Against flotilla-core's exact reader (`registration::agent::resources`,
//! i128 nano-units, whitespace trimmed): what it refuses as malformed is refused, and what it
//! reads is read to within 1n plus the rounding of an `f64`, the binary cap applied.
//!
//! Properties of a cluster: no panic; ten scores, each in −100..=100; the node's free amount is
//! never negative nor NaN; adding a pod whose request reads as at least 0 never raises a score,
//! and adding one whose request does not read changes none.

#![no_main]

use std::collections::BTreeMap;

use flotilla_core::registration::agent::resources::{self, Format, QuantityError};
use k8s_openapi::{
    api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};
use libfuzzer_sys::fuzz_target;
use resource_usage_agent::{
    quantity,
    score::{self, MAX_SCORE, MIN_SCORE, RESOURCES},
};

/// The largest binary amount, as an `f64` (2^63 − 1 rounds to 2^63).
const BINARY_CAP: f64 = 9_223_372_036_854_775_808.0;
/// The smallest nonzero magnitude: one nano-unit.
const NANO: f64 = 1e-9;

fn check_quantity(text: &str) {
    let read = quantity::parse(text);
    assert_eq!(
        read.map(f64::to_bits),
        quantity::parse(text).map(f64::to_bits),
        "two readings of {text:?} differ"
    );
    if let Some(value) = read {
        assert!(!value.is_nan(), "{text:?} reads as NaN");
        assert!(value != 0.0 || value.is_sign_positive(), "{text:?} reads as -0");
        assert!(
            value == 0.0 || value.abs() >= NANO,
            "{text:?} reads as {value}, below 1n"
        );
    }

    if !text.starts_with(['-', '+']) {
        let negated = quantity::parse(&format!("-{text}"));
        assert_eq!(
            negated.map(f64::to_bits),
            read.map(|v| if v == 0.0 { 0.0 } else { -v }).map(f64::to_bits),
            "-{text:?} is not {text:?} negated ({read:?})"
        );
        let plus = quantity::parse(&format!("+{text}"));
        assert_eq!(plus.map(f64::to_bits), read.map(f64::to_bits), "+{text:?}");
    }

    if text.trim() != text {
        return; // flotilla-core trims what the agent refuses
    }
    match resources::parse(text) {
        Ok((nanos, format)) => {
            let value = read.unwrap_or_else(|| panic!("{text:?} reads as {nanos}n in core, not here"));
            let mut expected = nanos as f64 / 1e9;
            if format == Format::BinarySi {
                expected = expected.clamp(-BINARY_CAP, BINARY_CAP);
            }
            let tolerance = NANO + 4.0 * f64::EPSILON * expected.abs();
            assert!(
                (value - expected).abs() <= tolerance,
                "{text:?} reads as {value}, expected {expected} ({nanos}n)"
            );
            if format == Format::BinarySi {
                assert!(
                    value.abs() <= BINARY_CAP,
                    "{text:?} reads as {value}, past the cap"
                );
            }
        }
        Err(QuantityError::Invalid(_)) => assert_eq!(read, None, "{text:?} is malformed"),
        // Past i128 nano-units: only the properties above.
        Err(QuantityError::TooLarge(_)) => {}
    }
}

fn quantities(text: &str) -> BTreeMap<String, Quantity> {
    RESOURCES
        .iter()
        .map(|r| (r.name.to_owned(), Quantity(text.to_owned())))
        .collect()
}

fn node(allocatable: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node".into()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            allocatable: Some(quantities(allocatable)),
            ..NodeStatus::default()
        }),
    }
}

fn pod(requests: &str) -> Pod {
    Pod {
        metadata: ObjectMeta::default(),
        spec: Some(PodSpec {
            node_name: Some("node".into()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(requests)),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn check_cluster(text: &str) {
    let mut lines = text.split('\n');
    let node = node(lines.next().unwrap_or_default());
    let requests: Vec<&str> = lines.take(16).collect();
    let pods: Vec<Pod> = requests.iter().map(|r| pod(r)).collect();
    let mut previous: Option<Vec<score::Score>> = None;
    for count in 0..=pods.len() {
        let computed = score::compute([&node], &pods[..count]);
        assert_eq!(computed.scores.len(), 2 * RESOURCES.len() + 2);
        for s in &computed.scores {
            assert!(
                (MIN_SCORE..=MAX_SCORE).contains(&s.value),
                "{} is {}",
                s.name,
                s.value
            );
        }
        for (resource, free) in RESOURCES.iter().zip(&computed.available) {
            assert!(
                free.node >= 0.0,
                "{} free on the node: {}",
                resource.name,
                free.node
            );
        }
        if let Some(previous) = previous.as_ref()
            && let Some(added) = count.checked_sub(1).map(|i| requests[i])
        {
            match quantity::parse(added) {
                None => assert_eq!(&computed.scores, previous, "a request of {added:?} counted"),
                Some(value) if value >= 0.0 => {
                    for (before, after) in previous.iter().zip(&computed.scores) {
                        assert!(
                            after.value <= before.value,
                            "{}: {} then {} with a pod requesting {added:?}",
                            after.name,
                            before.value,
                            after.value
                        );
                    }
                }
                Some(_) => {} // a negative request, which the apiserver refuses
            }
        }
        previous = Some(computed.scores);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if mode % 2 == 0 {
        check_quantity(text);
    } else {
        check_cluster(text);
    }
});
