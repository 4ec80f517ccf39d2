//! `status.capacity` and `status.allocatable` of a ManagedCluster: the sums over the managed
//! cluster's nodes, by resource name. Unschedulable nodes add to capacity but not to
//! allocatable, as in OCM. Entries other components wrote into `capacity` for names the
//! nodes do not report are kept.
//!
//! Summing needs Kubernetes quantities as numbers. They are held exactly as nano-units in an
//! `i128` (enough for exabytes) and written back in a canonical form close to
//! apimachinery's: binary suffixes (`Ki` … `Ei`) when the first addend used one and the sum
//! is a whole multiple of 1024, otherwise decimal suffixes (`n` … `E`) with an integer
//! mantissa.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity that cannot be read or summed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity.
    #[error("invalid quantity {0:?}")]
    Invalid(String),
    /// Too large to sum exactly.
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

/// How a quantity was written, which decides how a sum is written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Power-of-two suffixes: `Ki`, `Mi`, ….
    BinarySi,
    /// Power-of-ten suffixes (`m`, `k`, `M`, …), exponents or none.
    DecimalSi,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("E", 18),
    ("P", 15),
    ("T", 12),
    ("G", 9),
    ("M", 6),
    ("k", 3),
    ("", 0),
    ("m", -3),
    ("u", -6),
    ("n", -9),
];

/// Reads a quantity as nano-units (rounded up below one nano-unit) and its format.
pub fn parse(text: &str) -> Result<(i128, Format), QuantityError> {
    let invalid = || QuantityError::Invalid(text.to_owned());
    let too_large = || QuantityError::TooLarge(text.to_owned());
    let trimmed = text.trim();
    let (negative, rest) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(invalid());
    }
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    // As many digits as `i128::MAX` has, so that every sum `format` writes reads back; only
    // ASCII digits are left, so parsing fails only past `i128::MAX`.
    if digits.len() > 39 {
        return Err(too_large());
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| too_large())?
    };
    let fraction_digits = i32::try_from(fraction.len()).map_err(|_| invalid())?;

    let (binary_power, decimal_exponent, format) =
        if let Some(index) = BINARY_SUFFIXES.iter().position(|s| *s == suffix) {
            (10 * (index as u32 + 1), 0, Format::BinarySi)
        } else if let Some((_, exponent)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
            (0, *exponent, Format::DecimalSi)
        } else if let Some(exponent) = suffix.strip_prefix(['e', 'E']) {
            let exponent: i32 = exponent.parse().map_err(|_| invalid())?;
            if exponent.abs() > 40 {
                return Err(too_large());
            }
            (0, exponent, Format::DecimalSi)
        } else {
            return Err(invalid());
        };

    let scaled = mantissa
        .checked_mul(1i128 << binary_power)
        .ok_or_else(too_large)?;
    let exponent = 9 + decimal_exponent - fraction_digits;
    let nanos = if exponent >= 0 {
        10i128
            .checked_pow(exponent.unsigned_abs())
            .and_then(|p| scaled.checked_mul(p))
            .ok_or_else(too_large)?
    } else {
        match 10i128.checked_pow(exponent.unsigned_abs()) {
            // Round up to a whole nano-unit, as apimachinery does (`scaled` is not negative;
            // adding `divisor - 1` first could overflow).
            Some(divisor) => scaled / divisor + i128::from(scaled % divisor != 0),
            None => i128::from(scaled > 0),
        }
    };
    Ok((if negative { -nanos } else { nanos }, format))
}

/// Writes nano-units back as a quantity in `format` (see the module doc).
pub fn format(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".to_owned();
    }
    if format == Format::BinarySi && nanos % NANOS_PER_UNIT == 0 && nanos.abs() >= 1024 * NANOS_PER_UNIT {
        let units = nanos / NANOS_PER_UNIT;
        for (index, suffix) in BINARY_SUFFIXES.iter().enumerate().rev() {
            let base = 1i128 << (10 * (index + 1));
            if units % base == 0 {
                return format!("{}{suffix}", units / base);
            }
        }
        return units.to_string();
    }
    for (suffix, exponent) in DECIMAL_SUFFIXES {
        let divisor = 10i128.pow((exponent + 9).unsigned_abs());
        if nanos % divisor == 0 {
            return format!("{}{suffix}", nanos / divisor);
        }
    }
    // Every whole number of nano-units is divisible by 10^0.
    format!("{nanos}n")
}

/// The resources one node contributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeResources<'a> {
    /// `status.capacity`.
    pub capacity: Option<&'a BTreeMap<String, Quantity>>,
    /// `status.allocatable`.
    pub allocatable: Option<&'a BTreeMap<String, Quantity>>,
    /// `spec.unschedulable`: such a node's allocatable resources are not counted.
    pub unschedulable: bool,
}

/// Sums over a cluster's nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Summed capacity by resource name.
    pub capacity: BTreeMap<String, Quantity>,
    /// Summed allocatable resources of schedulable nodes by resource name.
    pub allocatable: BTreeMap<String, Quantity>,
}

/// Sums capacity over all nodes and allocatable over schedulable ones.
pub fn sum_nodes<'a>(nodes: impl IntoIterator<Item = NodeResources<'a>>) -> Result<Totals, QuantityError> {
    let mut capacity = Sums::default();
    let mut allocatable = Sums::default();
    for node in nodes {
        capacity.add_all(node.capacity)?;
        if !node.unschedulable {
            allocatable.add_all(node.allocatable)?;
        }
    }
    Ok(Totals {
        capacity: capacity.finish(),
        allocatable: allocatable.finish(),
    })
}

/// Adds to `computed` the entries of `existing` whose names the nodes did not report, so
/// capacity written by other components survives.
pub fn keep_foreign_capacity(
    computed: &mut BTreeMap<String, Quantity>,
    existing: &BTreeMap<String, Quantity>,
) {
    for (name, value) in existing {
        computed.entry(name.clone()).or_insert_with(|| value.clone());
    }
}

#[derive(Default)]
struct Sums(BTreeMap<String, (i128, Format)>);

impl Sums {
    fn add_all(&mut self, resources: Option<&BTreeMap<String, Quantity>>) -> Result<(), QuantityError> {
        for (name, quantity) in resources.into_iter().flatten() {
            let (nanos, format) = parse(&quantity.0)?;
            match self.0.get_mut(name) {
                Some((sum, _)) => {
                    *sum = sum
                        .checked_add(nanos)
                        .ok_or_else(|| QuantityError::TooLarge(quantity.0.clone()))?;
                }
                None => {
                    self.0.insert(name.clone(), (nanos, format));
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> BTreeMap<String, Quantity> {
        self.0
            .into_iter()
            .map(|(name, (nanos, f))| (name, Quantity(format(nanos, f))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::plain("4", 4 * NANOS_PER_UNIT, Format::DecimalSi)]
    #[case::milli("1500m", 1_500_000_000, Format::DecimalSi)]
    #[case::fraction("1.5", 1_500_000_000, Format::DecimalSi)]
    #[case::kilo("2k", 2_000 * NANOS_PER_UNIT, Format::DecimalSi)]
    #[case::kibi("16Ki", 16_384 * NANOS_PER_UNIT, Format::BinarySi)]
    #[case::gibi("8Gi", 8 * (1 << 30) * NANOS_PER_UNIT, Format::BinarySi)]
    #[case::exponent("1e3", 1_000 * NANOS_PER_UNIT, Format::DecimalSi)]
    #[case::negative("-2", -2 * NANOS_PER_UNIT, Format::DecimalSi)]
    #[case::tiny_rounds_up("0.0000000001", 1, Format::DecimalSi)]
    #[case::exbi("1Ei", (1i128 << 60) * NANOS_PER_UNIT, Format::BinarySi)]
    fn quantities_are_read_exactly(#[case] text: &str, #[case] nanos: i128, #[case] format: Format) {
        assert_eq!(parse(text), Ok((nanos, format)));
    }

    #[rstest]
    #[case::empty("")]
    #[case::word("lots")]
    #[case::bad_suffix("5Xi")]
    #[case::two_dots("1.2.3")]
    #[case::dot_only(".")]
    fn garbage_is_an_error(#[case] text: &str) {
        assert!(matches!(parse(text), Err(QuantityError::Invalid(_))));
    }

    #[rstest]
    #[case::whole_kibi(16_384 * NANOS_PER_UNIT, Format::BinarySi, "16Ki")]
    #[case::mebi_not_gibi(1536 * (1 << 20) * NANOS_PER_UNIT, Format::BinarySi, "1536Mi")]
    #[case::small_binary(100 * NANOS_PER_UNIT, Format::BinarySi, "100")]
    #[case::kilo(2_000 * NANOS_PER_UNIT, Format::DecimalSi, "2k")]
    #[case::not_kilo(1_500 * NANOS_PER_UNIT, Format::DecimalSi, "1500")]
    #[case::milli(1_500_000_000, Format::DecimalSi, "1500m")]
    #[case::zero(0, Format::BinarySi, "0")]
    fn sums_are_written_canonically(#[case] nanos: i128, #[case] format_: Format, #[case] text: &str) {
        assert_eq!(format(nanos, format_), text);
    }

    /// Found by the `quantity` fuzz target: a binary amount that is not a whole number of its
    /// unit is written without a suffix, which reads back as decimal and is then written with a
    /// decimal suffix, as Go's `Quantity.String()` does ("62.5Ki" → "64000" → "64k"): the
    /// amount is kept; the text settles from the second writing on.
    #[test]
    fn a_fractional_binary_amount_is_written_as_go_writes_it() {
        let (nanos, format_) = parse("62.5Ki").unwrap();
        assert_eq!(format(nanos, format_), "64000");
        let (again, again_format) = parse("64000").unwrap();
        assert_eq!((again, again_format), (nanos, Format::DecimalSi));
        assert_eq!(format(again, again_format), "64k");
        assert_eq!(parse("64k").map(|(n, f)| format(n, f)), Ok("64k".to_owned()));
    }

    /// Issue 25 (found by the `quantity` fuzz target): 30 digits with a fraction read, but their
    /// canonical form has 31 and was refused as too large.
    #[test]
    fn a_quantity_read_reads_again_once_written() {
        let (nanos, format_) = parse("1111111111111111111111111111.5").unwrap();
        let written = format(nanos, format_);
        assert_eq!(written, "1111111111111111111111111111500m");
        assert_eq!(parse(&written), Ok((nanos, format_)));
        let largest = format(i128::MAX, Format::DecimalSi);
        assert_eq!(parse(&largest), Ok((i128::MAX, Format::DecimalSi)));
        assert!(matches!(
            parse(&format!("{}0n", i128::MAX)),
            Err(QuantityError::TooLarge(_))
        ));
    }

    /// Issue 25: rounding a value within a nano-unit of `i128::MAX` up to whole nano-units
    /// overflowed (a panic in debug builds, a negative capacity in release builds).
    #[test]
    fn rounding_up_near_the_largest_value_does_not_overflow() {
        let mantissa = i128::MAX >> 30;
        let text = "15845632502.8528675187087900671Gi";
        assert_eq!(
            text.bytes().filter(u8::is_ascii_digit).count(),
            mantissa.to_string().len()
        );
        let scaled = mantissa << 30;
        let divisor = 10i128.pow(10);
        assert_eq!(parse(text), Ok((scaled / divisor + 1, Format::BinarySi)));
    }

    fn resources(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    #[test]
    fn unschedulable_nodes_count_for_capacity_only() {
        let a = resources(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
        let b = resources(&[("cpu", "2500m"), ("memory", "4Gi"), ("pods", "110")]);
        let c = resources(&[("cpu", "8"), ("memory", "16Gi")]);
        let totals = sum_nodes([
            NodeResources {
                capacity: Some(&a),
                allocatable: Some(&a),
                unschedulable: false,
            },
            NodeResources {
                capacity: Some(&b),
                allocatable: Some(&b),
                unschedulable: false,
            },
            NodeResources {
                capacity: Some(&c),
                allocatable: Some(&c),
                unschedulable: true,
            },
        ])
        .unwrap();
        assert_eq!(
            totals.capacity,
            resources(&[("cpu", "14500m"), ("memory", "28Gi"), ("pods", "220")])
        );
        assert_eq!(
            totals.allocatable,
            resources(&[("cpu", "6500m"), ("memory", "12Gi"), ("pods", "220")])
        );
    }

    #[test]
    fn no_nodes_means_empty_totals() {
        assert_eq!(sum_nodes([]).unwrap(), Totals::default());
    }

    #[test]
    fn capacity_from_other_writers_is_kept_but_node_values_win() {
        let mut computed = resources(&[("cpu", "4")]);
        keep_foreign_capacity(
            &mut computed,
            &resources(&[("cpu", "1"), ("example.com/gpu", "2")]),
        );
        assert_eq!(computed, resources(&[("cpu", "4"), ("example.com/gpu", "2")]));
    }
}
