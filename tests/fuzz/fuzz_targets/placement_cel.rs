//! Fuzzes a Placement's `celSelector` expressions (`flotilla_core::placement::cel`): compiled
//! (with the static cost estimate) by the hub's scheduler, then run against a ManagedCluster
//! under a [`Meter`].
//!
//! Properties: no panic; compiling is deterministic and refuses sources over the length limit;
//! soundness of the budget: every expression that compiles returns (true, false or an overrun)
//! within its deadline plus a margin, so no accepted expression can hold the scheduler; two
//! runs within their budget agree.

#![no_main]

use std::{
    sync::{Arc, LazyLock},
    time::{Duration, Instant},
};

use cel::Value;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::placement::cel::{
    self as placement_cel, CelError, CelProgram, MAX_EXPRESSION_LENGTH, Meter, Overrun, ScoreLists,
};
use libfuzzer_sys::fuzz_target;

/// The deadline each run gets, and how far past it a run may return (the clock is read every
/// 256 steps, and the sanitizers slow each step down).
const DEADLINE: Duration = Duration::from_millis(100);
const MARGIN: Duration = Duration::from_secs(2);

static CLUSTER: LazyLock<Value> = LazyLock::new(|| {
    let cluster: ManagedCluster = serde_saphyr::from_str(include_str!(
        "../../../host/api/tests/fixtures/managedcluster.yaml"
    ))
    .expect("the ManagedCluster fixture reads");
    placement_cel::cluster_value(&cluster).expect("the fixture converts to CEL")
});

static SCORES: LazyLock<Arc<ScoreLists>> = LazyLock::new(|| {
    let mut scores = ScoreLists::new();
    scores.insert(
        ("cluster1".into(), "usage".into()),
        vec![("cpuAvailable".into(), 40), ("memAvailable".into(), -3)],
    );
    Arc::new(scores)
});

fn run(program: &CelProgram) -> Result<bool, Overrun> {
    let meter = Arc::new(Meter::new(DEADLINE));
    let started = Instant::now();
    let answer = placement_cel::all_true(std::slice::from_ref(program), &CLUSTER, &SCORES, &meter);
    let took = started.elapsed();
    assert!(
        took <= DEADLINE + MARGIN,
        "{:?} compiled but ran {took:?} ({answer:?}), past its deadline of {DEADLINE:?}",
        program.source()
    );
    answer
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let compiled = placement_cel::compile(source);
    match (&compiled, placement_cel::compile(source)) {
        (Ok(first), Ok(again)) => assert_eq!(first.source(), again.source()),
        (Err(first), Err(again)) => assert_eq!(first, &again),
        (first, again) => panic!("{source:?} compiled as {first:?}, then as {again:?}"),
    }
    if source.len() > MAX_EXPRESSION_LENGTH {
        assert_eq!(compiled.as_ref().err(), Some(&CelError::TooLong(source.len())));
    }
    let Ok(program) = compiled else {
        return;
    };
    let first = run(&program);
    let again = run(&program);
    if first != Err(Overrun::Deadline) && again != Err(Overrun::Deadline) {
        assert_eq!(first, again, "{source:?}: two runs differ");
    }
});
