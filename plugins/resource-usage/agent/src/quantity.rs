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

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `quantity` as a number of base units (cores, bytes, devices); `None` when it does not
/// parse or is not finite (the API server validates quantities, so neither should happen).
pub fn to_f64(quantity: &Quantity) -> Option<f64> {
    parse(&quantity.0)
}

/// The text of a quantity as a number of base units; see [`to_f64`].
pub fn parse(text: &str) -> Option<f64> {
    let (sign, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (-1.0, &text[1..]),
        Some(b'+') => (1.0, &text[1..]),
        _ => (1.0, text),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
        return None;
    }
    // Digits with at most one dot and at least one digit: always a valid Rust float.
    let mantissa: f64 = number.parse().ok()?;
    let value = sign * mantissa * multiplier(suffix)?;
    value.is_finite().then_some(value)
}

/// The factor a suffix stands for.
fn multiplier(suffix: &str) -> Option<f64> {
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            // `i32::from_str` takes an optional sign and digits only, as the grammar does.
            let power: i32 = digits.parse().ok()?;
            10f64.powi(power)
        }
    };
    Some(factor)
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

    #[test]
    fn quantities_beyond_f64_are_refused_rather_than_infinite() {
        assert_eq!(parse("1e400"), None);
        assert_eq!(parse(&format!("{}Ei", "9".repeat(400))), None);
    }

    #[test]
    fn a_quantity_value_is_read_through_its_text() {
        assert_eq!(to_f64(&Quantity("250m".into())), Some(0.25));
    }
}
