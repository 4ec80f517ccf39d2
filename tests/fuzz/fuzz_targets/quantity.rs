//! Fuzzes the quantity reader (`flotilla_core::registration::agent::resources::parse`), which
//! reads node capacity written by the managed cluster and `quantity('…')` in Placement CEL.
//! It must never panic (overflow included: fuzz builds check arithmetic), must read the same
//! text the same way twice, and what it reads must survive a round trip: the canonical text
//! [`resources::format`] writes reads back as the same amount, and the text settles from the
//! second writing on (as with Go's `Quantity`, a binary amount that is not a whole number of its
//! unit is written without a suffix and then reads as decimal: "62.5Ki" → "64000" → "64k"). A
//! minus sign in front of an unsigned quantity negates exactly what it reads.

#![no_main]

use flotilla_core::registration::agent::resources;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = resources::parse(text);
    assert_eq!(first, resources::parse(text), "two readings of {text:?} differ");

    if !text.starts_with(['-', '+']) && !text.starts_with(char::is_whitespace) {
        let negated = resources::parse(&format!("-{text}"));
        match (&first, &negated) {
            (Ok((nanos, format)), Ok((minus, minus_format))) => {
                assert_eq!((-nanos, format), (*minus, minus_format), "-{text:?}");
            }
            (Err(_), Err(_)) => {}
            _ => panic!("{text:?} reads as {first:?} but -{text:?} as {negated:?}"),
        }
    }

    let Ok((nanos, format)) = first else {
        return;
    };
    let written = resources::format(nanos, format);
    let (again, again_format) =
        resources::parse(&written).unwrap_or_else(|e| panic!("{text:?} written as {written:?}: {e}"));
    assert_eq!(again, nanos, "{text:?} written as {written:?}");
    let rewritten = resources::format(again, again_format);
    let (third, third_format) =
        resources::parse(&rewritten).unwrap_or_else(|e| panic!("{text:?} rewritten as {rewritten:?}: {e}"));
    assert_eq!(third, nanos, "{text:?} rewritten as {rewritten:?}");
    assert_eq!(
        resources::format(third, third_format),
        rewritten,
        "{text:?}: the canonical text does not settle"
    );
});
