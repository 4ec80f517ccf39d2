//! Fuzzes the hub's strict certificate-request reader (`flotilla_core::x509::parse_request`).
//! It must never panic, must read the same bytes the same way twice, and whatever it accepts
//! must hold, read independently with `x509-cert`'s typed decoder: exactly one CN, equal to the
//! CN read; the same O and OU values; only CN, O and OU attributes, each a UTF8String or
//! PrintableString (X.680's set and `*`). The canonical re-encoding of an accepted PEM reads
//! the same.
//!
//! The first byte picks what the rest is, so that mutations reach the subject reader past the
//! signature check (a mutated request seldom verifies):
//!
//! ```text
//!  0 mod 3   the whole input is the request (PEM framing, DER, signature)
//!  1 mod 3   the rest is a subject Name's DER, put in a request signed with a fixed key
//!  2 mod 3   the rest is a subject Name's DER, put in a certificate for parse_certificate
//! ```

#![no_main]

use std::sync::OnceLock;

use base64::Engine as _;
use der::{Decode as _, Tag, Tagged as _};
use flotilla_core::x509::{
    self,
    craft::{self, P256Key},
};
use libfuzzer_sys::fuzz_target;
use x509_cert::request::CertReq;

fn key() -> &'static P256Key {
    static KEY: OnceLock<P256Key> = OnceLock::new();
    KEY.get_or_init(|| P256Key::generate().expect("generate a key"))
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let _ = x509::parse_certificate(data);
            check_request(data);
        }
        1 => {
            let der = key().request(rest, &[]).expect("sign");
            check_request(craft::pem(&der).as_bytes());
        }
        _ => {
            let der = key().certificate(rest).expect("sign");
            let pem = craft::pem_block("CERTIFICATE", &der);
            let first = x509::parse_certificate(pem.as_bytes());
            let again = x509::parse_certificate(pem.as_bytes());
            assert_eq!(format!("{first:?}"), format!("{again:?}"));
        }
    }
});

fn check_request(data: &[u8]) {
    let first = x509::parse_request(data);
    let again = x509::parse_request(data);
    assert_eq!(
        format!("{first:?}"),
        format!("{again:?}"),
        "two readings of the same bytes differ"
    );
    let Ok(info) = first else {
        return;
    };

    // An accepted input is one PEM block: its base64 lines, decoded here without the reader.
    let text = std::str::from_utf8(data).expect("accepted input is text");
    let body: String = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN "))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END "))
        .flat_map(str::chars)
        .filter(|c| *c != '\r')
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("accepted body is base64");
    let request = CertReq::from_der(&der).expect("accepted request decodes");

    let mut common_names = Vec::new();
    let mut organizations = Vec::new();
    let mut units = Vec::new();
    for rdn in request.info.subject.iter_rdn() {
        for attribute in rdn.iter() {
            let value = &attribute.value;
            let text = match value.tag() {
                Tag::Utf8String | Tag::PrintableString => {
                    String::from_utf8(value.value().to_vec()).expect("accepted value is UTF-8")
                }
                other => panic!("accepted a value of tag {other:?}"),
            };
            if value.tag() == Tag::PrintableString {
                // X.680's PrintableString, and `*`, which Go writes in one.
                assert!(
                    text.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?*".contains(&b)),
                    "accepted PrintableString {text:?}"
                );
            }
            match attribute.oid.as_bytes() {
                b if b == craft::oid::CN => common_names.push(text),
                b if b == craft::oid::O => organizations.push(text),
                b if b == craft::oid::OU => units.push(text),
                other => panic!("accepted attribute type {other:02x?}"),
            }
        }
    }
    assert_eq!(
        common_names,
        [info.subject.common_name.clone()],
        "exactly one CN, the one read"
    );
    // x509-cert sorts each RDN's members; the reader keeps their encoded order (as Go does).
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(organizations), sorted(info.subject.organizations.clone()));
    assert_eq!(sorted(units), sorted(info.subject.organizational_units.clone()));

    let canonical = craft::pem(&der);
    let reread = x509::parse_request(canonical.as_bytes()).expect("the canonical PEM is accepted");
    assert_eq!(reread, info, "the canonical PEM reads the same");
}
