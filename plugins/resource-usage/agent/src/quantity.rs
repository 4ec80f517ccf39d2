//! Kubernetes quantities (`500m`, `1.5`, `1Gi`, `2e3`) as approximate `f64`s, the figure OCM's
//! agent takes from every quantity (`resource.Quantity.AsApproximateFloat64`).
//!
//! Written here rather than taken from a crate: k8s-openapi's `Quantity` is only the string,
//! and of the parsers on crates.io `kube_quantity` 0.9 rejects the exa suffixes `E` and `Ei`
//! (its float parser reads the `E` as an exponent marker) and values beyond about 8e28 (its
//! decimal type), both of which the API server accepts and may return in canonical form, while
//! `k8s_quantity_parser` 0.1 is integer-only and built on k8s-openapi 0.14. The grammar is
//! small (apimachinery's `resource.ParseQuantity`):
//!
//! ```text
//!   quantity ::= [+-] number suffix
//!   number   ::= digits | digits "." digits | digits "." | "." digits
//!   suffix   ::= "" | n | u | m | k | M | G | T | P | E        (decimal SI)
//!              | Ki | Mi | Gi | Ti | Pi | Ei                  (binary SI)
//!              | (e | E) [+-] digits                          (decimal exponent)
//! ```
//!
//! What apimachinery does with the amount, and so what it reads as here:
//! - A nonzero magnitude below one nano-unit is rounded up to 1n (whatever is requested is not
//!   nothing). Apimachinery rounds every amount up to whole nano-units; beyond the smallest,
//!   that changes a reading by less than 1n, which no score can tell, and is not done here.
//! - A binary amount (`Ki` … `Ei`) is capped at 2^63 − 1 base units; a decimal one is not.
//! - A decimal amount past `f64`'s range reads as ±infinity, as OCM's `AsApproximateFloat64`
//!   gives it (the scores count an infinite allocatable as all free, an infinite request as
//!   nothing left).
//!
//! What is refused although apimachinery accepts it, none of which the API server ever writes
//! (it writes every quantity back in canonical form, which has a digit and a small exponent):
//! - A sign, a dot or a suffix without any digit (`-`, `.`, `Gi`), which it reads as 0.
//! - An exponent outside 32 bits, or one whose scale (the exponent less the fraction's digits)
//!   is: it truncates or wraps them, so that `1e4294967296` reads there as 1.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Smallest nonzero magnitude: one nano-unit.
const NANO: f64 = 1e-9;

/// Largest magnitude of a binary amount, `i64::MAX` base units (2^63 as an `f64`).
#[expect(
    clippy::cast_precision_loss,
    reason = "2^63 − 1 has no f64; it rounds to 2^63"
)]
const BINARY_CAP: f64 = i64::MAX as f64;

/// `quantity` as a number of base units (cores, bytes, devices); `None` when it does not parse
/// (see [`parse`]).
pub fn to_f64(quantity: &Quantity) -> Option<f64> {
    parse(&quantity.0)
}

/// The text of a quantity as a number of base units, as apimachinery reads it, rounded to the
/// nearest `f64` (see the module doc): never NaN nor −0; 0, or at least 1e-9 in magnitude; at
/// most 2^63 in magnitude with a binary suffix; ±infinity past `f64`'s range. `None` for what
/// apimachinery refuses and for the forms the module doc lists.
pub fn parse(text: &str) -> Option<f64> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let (exponent, binary_power) = scale_of(suffix)?;
    // The amount is `whole fraction` × 10^scale (× 2^binary_power); apimachinery computes the
    // scale in 32 bits, and where that wraps its reading is not this one.
    let scale = i64::from(exponent) - i64::try_from(fraction.len()).ok()?;
    if scale <= i64::from(i32::MIN) || scale > i64::from(i32::MAX) {
        return None;
    }
    // ASCII digits and an exponent: Rust's reading is the nearest f64 (0 or infinity past its
    // range), and multiplying by a power of two is exact.
    let decimal: f64 = format!("{whole}{fraction}e{scale}").parse().ok()?;
    let mut magnitude = decimal * 2f64.powi(binary_power);
    if binary_power > 0 {
        magnitude = magnitude.min(BINARY_CAP);
    }
    if !number.bytes().any(|b| matches!(b, b'1'..=b'9')) {
        return Some(0.0);
    }
    magnitude = magnitude.max(NANO);
    Some(if negative { -magnitude } else { magnitude })
}

/// The decimal exponent and the power of two a suffix stands for.
fn scale_of(suffix: &str) -> Option<(i32, i32)> {
    let scale = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            // `i32::from_str` takes an optional sign and digits only, as the grammar does, and
            // refuses what does not fit in 32 bits.
            (digits.parse().ok()?, 0)
        }
    };
    Some(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(text: &str, expected: f64) {
        let parsed = parse(text).unwrap_or_else(|| panic!("{text:?} did not parse"));
        let tolerance = expected.abs() * 1e-12;
        assert!(
            (parsed - expected).abs() <= tolerance,
            "{text:?} parsed as {parsed}, expected {expected}"
        );
    }

    #[test]
    fn plain_and_fractional_numbers_are_base_units() {
        close("1", 1.0);
        close("16", 16.0);
        close("1.5", 1.5);
        close(".5", 0.5);
        close("5.", 5.0);
        close("0", 0.0);
        close("+2", 2.0);
        close("-2", -2.0);
    }

    #[test]
    fn decimal_si_suffixes_scale_by_powers_of_ten() {
        close("500m", 0.5);
        close("100u", 1e-4);
        close("3n", 3e-9);
        close("2k", 2e3);
        close("1M", 1e6);
        close("64G", 64e9);
        close("1T", 1e12);
        close("1P", 1e15);
        close("1E", 1e18);
        close("0.1m", 1e-4);
    }

    #[test]
    fn binary_si_suffixes_scale_by_powers_of_1024() {
        close("1Ki", 1024.0);
        close("128Mi", 128.0 * 1024.0 * 1024.0);
        close("1Gi", 1073741824.0);
        close("1.5Gi", 1610612736.0);
        close("1Ti", 1024f64.powi(4));
        close("1Pi", 1024f64.powi(5));
        close("2Ei", 2.0 * 1024f64.powi(6));
    }

    #[test]
    fn decimal_exponents_are_read_after_the_number() {
        close("1e3", 1e3);
        close("1E3", 1e3);
        close("1.5e-3", 1.5e-3);
        close("2e+2", 200.0);
        close("1e30", 1e30);
    }

    #[test]
    fn malformed_quantities_do_not_parse() {
        for text in [
            "", "+", "-", ".", "abc", "1K", "1 Gi", " 1", "1m5", "0x10", "1e", "1e3.5", "1..2", "inf", "NaN",
            "1Gib", "Gi", "--1",
        ] {
            assert_eq!(parse(text), None, "{text:?} parsed");
        }
    }

    /// Found by the `resource_usage_quantity` fuzz target: `-0` read as −0, which is not the
    /// 0 apimachinery reads (and which `-` of 0 is not).
    #[test]
    fn zero_reads_as_zero_whatever_its_sign_and_suffix() {
        for text in [
            "0", "-0", "+0", "-00", "-0m", "-0e35", "-.0", "-0.", "0Ei", "-0Ki",
        ] {
            let read = parse(text).unwrap_or_else(|| panic!("{text:?} did not parse"));
            assert_eq!(read.to_bits(), 0f64.to_bits(), "{text:?} read as {read:?}");
        }
    }

    /// Found by the `resource_usage_quantity` fuzz target: `6e-651` read as 0 (10^-651 is no
    /// f64), while apimachinery rounds a nonzero amount below 1n up to 1n, so that a request
    /// is never nothing.
    #[test]
    fn a_nonzero_amount_below_one_nano_unit_reads_as_one_nano_unit() {
        for text in ["6e-651", "0.1n", "1e-10", "0.0000000001", "1e-2147483647"] {
            assert_eq!(parse(text), Some(NANO), "{text:?}");
        }
        assert_eq!(parse("-1e-400"), Some(-NANO));
        assert_eq!(parse("1n"), Some(1e-9));
        close("0.0000000001Ki", 1.024e-7);
    }

    /// Apimachinery caps a binary amount at `i64::MAX` base units (`16Ei` is 2^64 written, and
    /// 2^63 − 1 stored); a decimal amount is kept whole.
    #[test]
    fn binary_amounts_are_capped_at_i64_max_and_decimal_ones_are_not() {
        let cap = 2f64.powi(63);
        assert_eq!(parse("7Ei"), Some(7.0 * 2f64.powi(60)));
        for text in ["8Ei", "16Ei", "8192Pi", "8796093022208.5Mi"] {
            assert_eq!(parse(text), Some(cap), "{text:?}");
        }
        assert_eq!(parse(&format!("{}Ei", "9".repeat(400))), Some(cap));
        assert_eq!(parse("-16Ei"), Some(-cap));
        assert_eq!(parse("16E"), Some(16e18));
        assert_eq!(parse("1e30"), Some(1e30));
    }

    /// Before this reader built one decimal number, `1` followed by 400 zeros was infinite and
    /// 10^-400 zero, so their product (a valid 1) was NaN and refused, and every value was the
    /// product of two roundings.
    #[test]
    fn a_long_mantissa_and_a_far_exponent_are_read_together() {
        assert_eq!(parse(&format!("1{}e-400", "0".repeat(400))), Some(1.0));
        assert_eq!(parse(&format!("0.{}1e400", "0".repeat(399))), Some(1.0));
        assert_eq!(parse(&format!("{}5m", "0".repeat(1000))), Some(0.005));
        assert_eq!(parse("1.1e-5"), Some(1.1e-5));
        assert_eq!(
            parse("123456789.123456789e-7"),
            "12.3456789123456789".parse().ok()
        );
    }

    /// Apimachinery takes decimal amounts of any size; OCM reads those past f64 as infinite.
    #[test]
    fn decimal_amounts_past_f64_read_as_infinity() {
        assert_eq!(parse("1e400"), Some(f64::INFINITY));
        assert_eq!(parse("-1e400"), Some(f64::NEG_INFINITY));
        assert_eq!(parse("1.5e2147483647"), Some(f64::INFINITY));
        assert_eq!(parse(&format!("{}E", "9".repeat(400))), Some(f64::INFINITY));
    }

    /// Apimachinery parses an exponent as 64 bits and keeps 32 (`1e4294967296` is 1 there), and
    /// computes the scale, the exponent less the fraction's digits, in 32 bits (`1.5e-2147483648`
    /// is 15 × 10^2147483647 there): neither reading is the written one, so both are refused.
    #[test]
    fn exponents_apimachinery_truncates_or_wraps_are_refused() {
        for text in [
            "1e4294967296",
            "1e-4294967297",
            "1.5e-2147483648",
            "1e-2147483648",
            "1.25e-2147483647",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        assert_eq!(parse("1.5e-2147483646"), Some(NANO));
        assert_eq!(parse("1e2147483647"), Some(f64::INFINITY));
    }

    /// The forms apimachinery reads as 0 but never writes: a sign, a dot or a suffix alone.
    #[test]
    fn signs_dots_and_suffixes_without_digits_are_refused() {
        for text in ["-", "+", ".", "-.", "+.", "m", "Gi", "-Ki", ".G", "e3", "E"] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn suffixes_apimachinery_refuses_are_refused() {
        for text in [
            "1Ee3", "1e+-3", "1e+", "1e-", "1Ki3", "1i", "1.5.5", "1k3", "1KiB", "1e3k", "1 ", "1\n",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_quantity_value_is_read_through_its_text() {
        assert_eq!(to_f64(&Quantity("250m".into())), Some(0.25));
    }
}
