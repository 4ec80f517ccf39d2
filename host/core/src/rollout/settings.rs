//! Reading a rollout strategy's numbers the way OCM does: `progressDeadline` (`None`, empty or a
//! duration), `minSuccessTime` (a Go duration), and `maxConcurrency`/`maxFailures` (a count or a
//! percentage rounded up, where zero, negative or more than the total falls back to a default).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::SignedDuration;

use super::RolloutError;

/// How long a cluster may stay Progressing or Failed; `None` means forever.
pub(crate) type Deadline = Option<SignedDuration>;

/// Parses `progressDeadline`: `""` and `"None"` mean no deadline; anything else must start with
/// digits and a unit (`h`, `m`, `s`) — OCM's pattern `^(([0-9])+[h|m|s])|None$`, whose unanchored
/// alternatives let `5ms` or `1h30m` through — and then parse as a Go duration.
pub(crate) fn progress_deadline(value: &str) -> Result<Deadline, RolloutError> {
    if value.is_empty() || value == "None" {
        return Ok(None);
    }
    // The pattern is two fixed shapes; checking them directly avoids a regex dependency for it.
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let unit_follows = digits > 0 && matches!(value.as_bytes().get(digits), Some(b'h' | b'm' | b's' | b'|'));
    if !unit_follows && !value.ends_with("None") {
        return Err(RolloutError::ProgressDeadline {
            value: value.to_owned(),
        });
    }
    go_duration(value)
        .map(Some)
        .ok_or_else(|| RolloutError::ProgressDeadline {
            value: value.to_owned(),
        })
}

/// Parses `minSuccessTime`, a Go duration (`"0s"`, `"90s"`, `"1h30m"`); empty means zero.
pub(crate) fn min_success_time(value: &str) -> Result<SignedDuration, RolloutError> {
    if value.is_empty() {
        return Ok(SignedDuration::ZERO);
    }
    go_duration(value).ok_or_else(|| RolloutError::MinSuccessTime {
        value: value.to_owned(),
    })
}

/// A Go `time.ParseDuration` string. jiff's "friendly" duration format reads every Go duration
/// (`90s`, `1h30m`, `1.5h`, `300ms`, `-5m`); a bare `0`, which Go also accepts, is special-cased.
fn go_duration(value: &str) -> Option<SignedDuration> {
    if matches!(value, "0" | "+0" | "-0") {
        return Some(SignedDuration::ZERO);
    }
    // Go accepts `µs`/`us` and `ns`; so does jiff. jiff also accepts spaces and long unit names,
    // which a Go-written client would never send, so accepting them changes nothing observable.
    value.parse::<SignedDuration>().ok()
}

/// Checks a count-or-percentage without computing it; a string must end in `%` with a number
/// before it.
pub(crate) fn check_size(value: &IntOrString, field: &'static str) -> Result<(), RolloutError> {
    match value {
        IntOrString::Int(_) => Ok(()),
        IntOrString::String(s) => match s.strip_suffix('%') {
            Some(number) if number.parse::<f64>().is_ok() => Ok(()),
            _ => Err(RolloutError::Size {
                field,
                value: s.clone(),
            }),
        },
    }
}

/// A count or percentage of `total`, rounded up; zero, negative or more than `total` gives
/// `default` (OCM's `calculateRolloutSize`).
pub(crate) fn size(
    value: &IntOrString,
    total: usize,
    default: usize,
    field: &'static str,
) -> Result<usize, RolloutError> {
    check_size(value, field)?;
    let length: i64 = match value {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => {
            let percent = s
                .strip_suffix('%')
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or_default();
            // `as` saturates (NaN gives 0); both fall back to the default below, as in OCM.
            (percent / 100.0 * total as f64).ceil() as i64
        }
    };
    match usize::try_from(length) {
        Ok(n) if n > 0 && n <= total => Ok(n),
        _ => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::empty_is_forever("", Ok(None))]
    #[case::none_is_forever("None", Ok(None))]
    #[case::minutes("90m", Ok(Some(SignedDuration::from_mins(90))))]
    #[case::seconds("30s", Ok(Some(SignedDuration::from_secs(30))))]
    #[case::compound("1h30m", Ok(Some(SignedDuration::from_mins(90))))]
    #[case::milliseconds_pass_the_unanchored_pattern("5ms", Ok(Some(SignedDuration::from_millis(5))))]
    #[case::zero_seconds("0s", Ok(Some(SignedDuration::ZERO)))]
    #[case::fraction_is_refused("1.5h", Err(()))]
    #[case::words_are_refused("soon", Err(()))]
    #[case::no_unit_is_refused("10", Err(()))]
    fn progress_deadline_reads_as_ocm_does(#[case] value: &str, #[case] expected: Result<Deadline, ()>) {
        assert_eq!(progress_deadline(value).map_err(|_| ()), expected);
    }

    #[rstest]
    #[case::count(IntOrString::Int(2), 5, 5, 2)]
    #[case::percent_rounds_up(IntOrString::String("30%".into()), 5, 5, 2)]
    #[case::fractional_percent(IntOrString::String("12.5%".into()), 10, 10, 2)]
    #[case::zero_is_default(IntOrString::Int(0), 5, 5, 5)]
    #[case::negative_is_default(IntOrString::Int(-1), 5, 7, 7)]
    #[case::more_than_total_is_default(IntOrString::Int(6), 5, 0, 0)]
    #[case::hundred_percent(IntOrString::String("100%".into()), 4, 0, 4)]
    #[case::zero_percent_is_default(IntOrString::String("0%".into()), 4, 0, 0)]
    #[case::no_clusters(IntOrString::String("50%".into()), 0, 0, 0)]
    fn sizes_are_counts_or_percentages_rounded_up(
        #[case] value: IntOrString,
        #[case] total: usize,
        #[case] default: usize,
        #[case] expected: usize,
    ) {
        assert_eq!(
            size(&value, total, default, "maxConcurrency").ok(),
            Some(expected)
        );
    }

    #[rstest]
    #[case::number_as_string("5")]
    #[case::words("half%")]
    #[case::empty("")]
    fn a_size_that_is_neither_count_nor_percentage_is_an_error(#[case] value: &str) {
        let err = size(&IntOrString::String(value.into()), 5, 5, "maxFailures");
        assert!(
            matches!(
                err,
                Err(RolloutError::Size {
                    field: "maxFailures",
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[rstest]
    #[case("0s", SignedDuration::ZERO)]
    #[case("", SignedDuration::ZERO)]
    #[case("0", SignedDuration::ZERO)]
    #[case("2m", SignedDuration::from_mins(2))]
    #[case("1.5h", SignedDuration::from_mins(90))]
    fn min_success_time_is_a_go_duration(#[case] value: &str, #[case] expected: SignedDuration) {
        assert_eq!(min_success_time(value).ok(), Some(expected));
    }
}
