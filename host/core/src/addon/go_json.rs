//! JSON text byte-identical to Go's `encoding/json.Marshal` of the same value decoded the way
//! Kubernetes' dynamic clients decode it (objects as `map[string]interface{}`, integers that fit
//! `int64` as integers, every other number as `float64`).
//!
//! OCM hashes this text for config spec hashes and writes it into the
//! `open-cluster-management.io/config-spec-hash` annotation, so Flotilla must produce the same
//! bytes. serde_json alone differs from Go in three ways, each handled here:
//!
//! - object keys: Go sorts map keys bytewise; serde_json keeps insertion order when its
//!   `preserve_order` feature is on anywhere in the build, so [`GoValue`] sorts explicitly;
//! - strings: Go escapes `<`, `>`, `&`, U+2028 and U+2029 (`\u003c`, ...), which serde_json
//!   never does — serde_json offers no option for it, hence the custom [`GoFormatter`], which only
//!   adds those escapes and keeps serde_json's own escaping of quotes, backslashes and control
//!   characters (the same as Go's since Go 1.22: `\b`, `\f`, `\n`, `\r`, `\t`, else `\u00xx`);
//! - numbers: Go prints `float64` with `strconv.FormatFloat(f, 'f', -1, 64)` (shortest digits,
//!   no exponent) unless `|f| < 1e-6` or `|f| >= 1e21`, where it uses the exponent form with a
//!   sign and at least two exponent digits for positive exponents (`1e+21`, `1e-7`); serde_json
//!   prints ryu's form (`1e21`, `1.2345678901234567e19`). [`go_float`] rebuilds Go's form from
//!   the shortest round-trip digits that Rust's `{:e}` formatting gives.

use std::io;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
use serde_json::ser::Formatter;

/// A [`Value`] serialized the way Go's `json.Marshal` prints it after a dynamic-client decode:
/// keys sorted bytewise, integers outside `int64` as `float64`.
pub struct GoValue<'a>(pub &'a Value);

impl Serialize for GoValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => serializer.serialize_i64(i),
                // u64 above i64::MAX and every non-integer become float64 in Go.
                None => serializer.serialize_f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&GoValue(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut out = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    out.serialize_entry(key, &GoValue(value))?;
                }
                out.end()
            }
        }
    }
}

/// serde_json's compact formatter plus Go's HTML escaping and float format (see the module
/// docs for why serde_json's own output cannot be used).
#[derive(Clone, Copy, Debug, Default)]
pub struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escape = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(escape.as_bytes())?;
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }
}

/// Why a value cannot be printed as Go would.
#[derive(Debug, thiserror::Error)]
pub enum GoJsonError {
    /// serde_json refused the value (a non-finite float, which Go refuses too).
    #[error("encoding JSON the way Go does: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The bytes Go's `json.Marshal` produces for `value`.
pub fn to_vec(value: &Value) -> Result<Vec<u8>, GoJsonError> {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    GoValue(value).serialize(&mut serializer)?;
    Ok(out)
}

/// How many bytes Go's `json.Marshal` produces for `value`, counted as they are written rather
/// than kept: the size checks of every plugin answer need only this.
pub fn encoded_len(value: &Value) -> Result<usize, GoJsonError> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let mut serializer = serde_json::Serializer::with_formatter(&mut count, GoFormatter);
    GoValue(value).serialize(&mut serializer)?;
    Ok(count.0)
}

/// The text Go's `json.Marshal` produces for `value`.
pub fn to_string(value: &Value) -> Result<String, GoJsonError> {
    let bytes = to_vec(value)?;
    // The serializer only writes valid UTF-8 (input strings plus ASCII escapes).
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `f` as Go's `encoding/json` prints a `float64` (finite values only; Go refuses NaN and
/// infinities, and serde_json cannot hold them).
pub fn go_float(f: f64) -> String {
    // `{:e}` gives the shortest digits that round-trip, like Go's precision -1: "1.5e0".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // strconv 'e' form: d[.ddd]e±dd, then encoding/json trims "e-0d" to "e-d".
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp = if exponent < 0 {
            format!("e-{}", -exponent)
        } else {
            format!("e+{exponent:02}")
        };
        return format!("{sign}{first}{fraction}{exp}");
    }
    // strconv 'f' form with the same digits and no exponent.
    let n = digits.len() as i32;
    let body = if exponent >= n - 1 {
        format!("{digits}{}", "0".repeat((exponent - (n - 1)) as usize))
    } else if exponent < 0 {
        format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize))
    } else {
        let (int, frac) = digits.split_at((exponent + 1) as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    #[rstest]
    #[case::zero(0.0, "0")]
    #[case::negative_zero(-0.0, "-0")]
    #[case::whole(1.0, "1")]
    #[case::half(1.5, "1.5")]
    #[case::third(1.0 / 3.0, "0.3333333333333333")]
    #[case::smallest_plain(0.000001, "0.000001")]
    #[case::below_plain(1e-7, "1e-7")]
    #[case::tiny_with_digits(1.25e-10, "1.25e-10")]
    #[case::three_digit_negative_exponent(5e-324, "5e-324")]
    #[case::beyond_int64(12345678901234567890.0, "12345678901234567000")]
    #[case::just_under_exponent(999999999999999900000.0, "999999999999999900000")]
    #[case::exponent_form(1e21, "1e+21")]
    #[case::exponent_with_digits(-1.5e300, "-1.5e+300")]
    #[case::negative_fraction(-0.25, "-0.25")]
    fn floats_print_as_go_prints_them(#[case] f: f64, #[case] expected: &str) {
        assert_eq!(go_float(f), expected);
    }

    #[test]
    fn numbers_parse_to_the_nearest_float_as_go_parses_them() {
        // Needs serde_json's float_roundtrip: its fast path rounds this one to 1e21.
        let value: Value = serde_json::from_str("999999999999999900000").unwrap();
        assert_eq!(to_string(&value).unwrap(), "999999999999999900000");
    }

    #[rstest]
    #[case::html(json!("<a href=\"x\">&</a>"), r#""\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e""#)]
    #[case::line_separators(json!("a\u{2028}b\u{2029}c"), r#""a\u2028b\u2029c""#)]
    #[case::controls(json!("\u{8}\u{c}\n\r\t\u{1}\u{7f}"), r#""\b\f\n\r\t\u0001\u{7f}""#)]
    #[case::sorted_keys(json!({"b": 1, "a": {"d": [], "c": null}}), r#"{"a":{"c":null,"d":[]},"b":1}"#)]
    #[case::big_unsigned(json!(18446744073709551615u64), "18446744073709552000")]
    #[case::html_in_keys(json!({"<k>": "&"}), r#"{"\u003ck\u003e":"\u0026"}"#)]
    fn values_print_as_go_prints_them(#[case] value: Value, #[case] expected: &str) {
        let expected = expected.replace("\\u{7f}", "\u{7f}");
        assert_eq!(to_string(&value).unwrap(), expected);
        assert_eq!(encoded_len(&value).unwrap(), expected.len());
    }

    proptest::proptest! {
        #[test]
        fn go_floats_read_back_as_the_same_number_in_the_form_go_picks(
            f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO
        ) {
            let text = go_float(f);
            proptest::prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), f.to_bits(), "{}", text);
            let abs = f.abs();
            let exponent_form = abs != 0.0 && !(1e-6..1e21).contains(&abs);
            proptest::prop_assert_eq!(text.contains('e'), exponent_form, "{}", text);
            if let Some((_, exp)) = text.split_once('e') {
                let digits = exp.trim_start_matches(['+', '-']);
                proptest::prop_assert!(exp.starts_with('+') || exp.starts_with('-'), "{}", text);
                proptest::prop_assert!(!digits.starts_with('0'), "{}", text);
            }
        }
    }
}
