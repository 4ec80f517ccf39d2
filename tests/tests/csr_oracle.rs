//! Differential test of Flotilla's certificate-request reader against Go's standard library
//! (`tests/csr-oracle`, built once with the local Go toolchain and cached like the control
//! plane): for every generated request, Flotilla either refuses it or reads exactly the CN, the
//! O list (in order), the OU list and the DNS names that Go reads, where Go also parsed it and
//! its self-signature checked. Certificates are compared the same way with `parse_certificate`.
//!
//! ```text
//!  crafted (fixed)   every ASN.1 string type in CN/O/OU, repeated CN/O/OU, multi-valued RDNs,
//!                    unknown attributes, odd characters, trailing data, PEM framing,
//!                    signatures and algorithms, request attributes and SANs
//!  mixed (seeded)    random combinations of the above
//!  Go-made           x509.CreateCertificateRequest as OCM's agents call it, several key types
//!  Flotilla-made     flotilla_core::x509::client_request, which must always be accepted
//! ```
//!
//! `cargo test -p flotilla-tests --test integration -- --ignored csr_oracle::write_fuzz_seed_corpus` writes
//! the seed corpus of `tests/fuzz` from the crafted requests; the fuzz corpus (those seeds, and
//! a grown corpus named by `FLOTILLA_FUZZ_CORPUS`) is compared with Go too.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use base64::Engine as _;
use flotilla_core::x509::{
    self, RequestInfo,
    craft::{self, P256Key, atv, name, oid, rdn, tag},
};
use flotilla_testing::binary;
use serde::Deserialize;
use serde_json::{Value, json};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Builds (once per source and Go version) and returns the oracle binary.
fn oracle() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("csr-oracle");
    let go_version = Command::new("go")
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("run `go env GOVERSION`: the oracle needs the Go toolchain on PATH");
    let salt = String::from_utf8_lossy(&go_version.stdout).trim().to_owned();
    let key = binary::source_key(&source, &salt, binary::is_go_input).unwrap();
    binary::cached_artifact("csr-oracle", &key, "csr-oracle", |partial| {
        binary::go_build(
            &source,
            partial,
            &["-s".to_owned(), "-w".to_owned()],
            "local",
            &format!("the CSR oracle ({salt})"),
        )
    })
    .unwrap()
}

/// Go's answer about one item.
#[derive(Debug, Deserialize)]
struct Answer {
    parsed: bool,
    #[serde(default)]
    error: String,
    signature_ok: bool,
    cn: String,
    o: Vec<String>,
    ou: Vec<String>,
    dns: Vec<String>,
    #[serde(default)]
    pem: String,
}

/// Asks the oracle about every item at once.
fn ask(items: &[Value]) -> Vec<Answer> {
    let mut child = Command::new(oracle())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(items).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "csr-oracle failed");
    let answers: Vec<Answer> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answers.len(), items.len());
    answers
}

/// A named input.
struct Case {
    label: String,
    bytes: Vec<u8>,
}

/// Collects the cases, signing each request with one key (a key per request adds nothing).
struct Cases {
    key: P256Key,
    list: Vec<Case>,
}

impl Cases {
    fn new() -> Self {
        Self {
            key: P256Key::generate().unwrap(),
            list: Vec::new(),
        }
    }

    fn raw(&mut self, label: impl Into<String>, bytes: Vec<u8>) {
        self.list.push(Case {
            label: label.into(),
            bytes,
        });
    }

    /// A signed request for `rdns` with `attributes`, PEM.
    fn request(&mut self, label: impl Into<String>, rdns: &[Vec<u8>], attributes: &[Vec<u8>]) {
        let der = self.key.request(&name(rdns), attributes).unwrap();
        self.raw(label, craft::pem(&der).into_bytes());
    }

    fn der(&self, rdns: &[Vec<u8>]) -> Vec<u8> {
        self.key.request(&name(rdns), &[]).unwrap()
    }
}

const AGENT: &str = "system:open-cluster-management:cluster1:agent1";
const C1: &str = "system:open-cluster-management:cluster1";
const C2: &str = "system:open-cluster-management:cluster2";
const ALL: &str = "system:open-cluster-management:managed-clusters";

/// Values with odd characters: separators, escapes, non-ASCII, a NUL, outside the BMP.
const VALUES: [&str; 22] = [
    AGENT,
    C1,
    "a,b+c=d",
    "*.example.com",
    "a&b",
    "a_b",
    "a@b",
    "quote\"s\\",
    " lead",
    "trail ",
    "#hash",
    "12 34",
    "",
    "é",
    "ÿ",
    "日本",
    "€",
    "😀",
    "nul\u{0}inside",
    "tab\tline\n",
    "DE",
    "x",
];

const BOOLEAN: u8 = 0x01;

/// Every tag a test writes in an attribute value: Go's six string types, string types Go does
/// not read, non-strings, and a constructed UTF8String.
const TAGS: [u8; 15] = [
    tag::UTF8,
    tag::PRINTABLE,
    tag::IA5,
    tag::T61,
    tag::BMP,
    tag::NUMERIC,
    tag::VISIBLE,
    tag::UNIVERSAL,
    tag::GENERAL,
    0x19, // GraphicString
    tag::OCTET_STRING,
    tag::INTEGER,
    BOOLEAN,
    tag::OID,
    0x2c, // constructed UTF8String
];

/// `value`'s contents under `value_tag`: UTF-16 for BMPString, Latin-1 where it fits for
/// T61String, the UTF-8 bytes otherwise.
fn encode(value_tag: u8, value: &str) -> Vec<u8> {
    match value_tag {
        tag::BMP => craft::bmp(value),
        tag::T61 if value.chars().all(|c| u32::from(c) < 0x100) => value.chars().map(|c| c as u8).collect(),
        tag::UNIVERSAL => value.chars().flat_map(|c| u32::from(c).to_be_bytes()).collect(),
        BOOLEAN => vec![0xff],
        0x2c => craft::tlv(tag::UTF8, value.as_bytes()),
        _ => value.as_bytes().to_vec(),
    }
}

fn one(attribute: &[u8], value_tag: u8, value: &str) -> Vec<u8> {
    rdn(&[atv(attribute, value_tag, &encode(value_tag, value))])
}

fn printable(attribute: &[u8], value: &str) -> Vec<u8> {
    one(attribute, tag::PRINTABLE, value)
}

fn utf8(attribute: &[u8], value: &str) -> Vec<u8> {
    one(attribute, tag::UTF8, value)
}

/// The fixed crafted requests.
fn crafted(cases: &mut Cases) {
    // Every tag in each of CN, O, OU, with a plain CN beside an O or OU.
    for value_tag in TAGS {
        for attribute in [oid::CN, oid::O, oid::OU] {
            for value in [AGENT, "12 34", "é", "x"] {
                let mut rdns = vec![one(attribute, value_tag, value)];
                if attribute != oid::CN {
                    rdns.insert(0, printable(oid::CN, AGENT));
                }
                cases.request(
                    format!("tag {value_tag:#x} in {attribute:02x?}: {value:?}"),
                    &rdns,
                    &[],
                );
            }
        }
    }
    // The attack shapes: an extra group or a second user in a type the old reader skipped.
    for value_tag in [
        tag::IA5,
        tag::T61,
        tag::BMP,
        tag::NUMERIC,
        tag::UTF8,
        tag::PRINTABLE,
    ] {
        cases.request(
            format!("extra O {value_tag:#x}"),
            &[
                printable(oid::O, C1),
                one(oid::O, value_tag, C2),
                printable(oid::CN, AGENT),
            ],
            &[],
        );
        cases.request(
            format!("second CN {value_tag:#x}"),
            &[
                printable(oid::O, C1),
                printable(oid::CN, AGENT),
                one(
                    oid::CN,
                    value_tag,
                    "system:open-cluster-management:cluster2:agent1",
                ),
            ],
            &[],
        );
        cases.request(
            format!("first CN {value_tag:#x}"),
            &[
                one(
                    oid::CN,
                    value_tag,
                    "system:open-cluster-management:cluster2:agent1",
                ),
                printable(oid::CN, AGENT),
            ],
            &[],
        );
    }
    // Repeated O and OU, in orders Go keeps.
    cases.request(
        "repeated O and OU",
        &[
            printable(oid::O, "b"),
            utf8(oid::OU, "u2"),
            printable(oid::O, "a"),
            utf8(oid::O, "b"),
            utf8(oid::OU, "u1"),
            printable(oid::CN, AGENT),
        ],
        &[],
    );
    // Multi-valued RDNs: all O (sorted and not), all OU, and mixtures.
    let members: [(&str, Vec<Vec<u8>>); 9] = [
        (
            "O+O sorted",
            vec![
                atv(oid::O, tag::PRINTABLE, C1.as_bytes()),
                atv(oid::O, tag::PRINTABLE, ALL.as_bytes()),
            ],
        ),
        (
            "O+O unsorted",
            vec![
                atv(oid::O, tag::PRINTABLE, ALL.as_bytes()),
                atv(oid::O, tag::PRINTABLE, C1.as_bytes()),
            ],
        ),
        (
            "O+O mixed types",
            vec![atv(oid::O, tag::UTF8, b"z"), atv(oid::O, tag::PRINTABLE, b"a")],
        ),
        (
            "O+O IA5",
            vec![
                atv(oid::O, tag::PRINTABLE, C1.as_bytes()),
                atv(oid::O, tag::IA5, C2.as_bytes()),
            ],
        ),
        (
            "OU+OU",
            vec![atv(oid::OU, tag::UTF8, b"u2"), atv(oid::OU, tag::UTF8, b"u1")],
        ),
        (
            "O+OU",
            vec![atv(oid::O, tag::UTF8, b"g"), atv(oid::OU, tag::UTF8, b"u")],
        ),
        (
            "CN+O",
            vec![atv(oid::CN, tag::UTF8, b"u"), atv(oid::O, tag::UTF8, b"g")],
        ),
        (
            "CN+CN",
            vec![atv(oid::CN, tag::UTF8, b"u"), atv(oid::CN, tag::UTF8, b"v")],
        ),
        (
            "O+C",
            vec![atv(oid::O, tag::UTF8, b"g"), atv(oid::C, tag::PRINTABLE, b"DE")],
        ),
    ];
    for (label, set) in members {
        cases.request(
            format!("multi-valued {label}"),
            &[rdn(&set), printable(oid::CN, AGENT)],
            &[],
        );
    }
    cases.request("empty RDN", &[rdn(&[]), printable(oid::CN, AGENT)], &[]);
    cases.request("no CN", &[printable(oid::O, C1)], &[]);
    cases.request("empty subject", &[], &[]);
    cases.request("empty CN", &[printable(oid::CN, "")], &[]);
    // Other attribute types.
    for (label, attribute) in [
        ("C", oid::C),
        ("serialNumber", oid::SERIAL_NUMBER),
        ("UID", oid::UID),
        ("unknown", &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x01][..]),
        ("2.5.4.3 with a non-minimal arc", &[0x55, 0x80, 0x04, 0x03][..]),
    ] {
        cases.request(
            format!("attribute {label}"),
            &[printable(attribute, "x"), printable(oid::CN, AGENT)],
            &[],
        );
    }
    // Odd characters in the plain types.
    for value in VALUES {
        for value_tag in [tag::UTF8, tag::PRINTABLE, tag::IA5, tag::T61] {
            cases.request(
                format!("CN {value_tag:#x} {value:?}"),
                &[one(oid::CN, value_tag, value), one(oid::O, value_tag, value)],
                &[],
            );
        }
    }
    cases.request(
        "invalid UTF-8",
        &[rdn(&[atv(oid::CN, tag::UTF8, &[0x61, 0xff])])],
        &[],
    );
    cases.request(
        "surrogate in UTF-8",
        &[rdn(&[atv(oid::CN, tag::UTF8, &[0xed, 0xa0, 0x80])])],
        &[],
    );
    cases.request(
        "odd BMPString",
        &[rdn(&[atv(oid::CN, tag::BMP, &[0, 0x61, 0])])],
        &[],
    );
    cases.request(
        "BMPString with NUL end",
        &[rdn(&[atv(oid::CN, tag::BMP, &[0, 0x61, 0, 0])])],
        &[],
    );
    // Trailing data and PEM framing.
    let der = cases.der(&[printable(oid::O, C1), printable(oid::CN, AGENT)]);
    let pem = craft::pem(&der);
    let other = craft::pem(&cases.der(&[printable(oid::O, C2), printable(oid::CN, "other")]));
    cases.raw("plain", pem.clone().into_bytes());
    cases.raw(
        "a byte after the request",
        craft::pem(&[der.clone(), vec![0]].concat()).into_bytes(),
    );
    cases.raw(
        "a request after the request",
        craft::pem(&[der.clone(), der.clone()].concat()).into_bytes(),
    );
    cases.raw("two PEM blocks", format!("{pem}{other}").into_bytes());
    cases.raw(
        "two PEM blocks, other first",
        format!("{other}{pem}").into_bytes(),
    );
    cases.raw("text before", format!("hello\n{pem}").into_bytes());
    cases.raw("text after", format!("{pem}bye\n").into_bytes());
    cases.raw("whitespace around", format!("\n \t{pem}\n\n").into_bytes());
    cases.raw("CRLF", pem.replace('\n', "\r\n").into_bytes());
    cases.raw("one line", {
        let body = B64.encode(&der);
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{body}\n-----END CERTIFICATE REQUEST-----\n")
            .into_bytes()
    });
    cases.raw("no final newline", pem.trim_end().to_owned().into_bytes());
    cases.raw(
        "PEM headers",
        pem.replacen("-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1)
            .into_bytes(),
    );
    cases.raw(
        "NEW CERTIFICATE REQUEST",
        pem.replace("CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST")
            .into_bytes(),
    );
    cases.raw(
        "CERTIFICATE label",
        pem.replace("CERTIFICATE REQUEST", "CERTIFICATE").into_bytes(),
    );
    cases.raw("DER", der.clone());
    cases.raw("empty", Vec::new());
    cases.raw("spaces in the body", pem.replacen('\n', "\n ", 2).into_bytes());
    // Signatures.
    let subject = name(&[printable(oid::CN, AGENT)]);
    let info = craft::request_info(&subject, &cases.key.spki().unwrap(), &[]);
    let signature = cases.key.sign(&info);
    let mut flipped = signature.clone();
    let last = flipped.len() - 2;
    flipped[last] ^= 1;
    cases.raw(
        "bad signature",
        craft::pem(&craft::assemble(&info, &P256Key::algorithm(), &flipped)).into_bytes(),
    );
    let other_key = P256Key::generate().unwrap();
    cases.raw(
        "another key's signature",
        craft::pem(&craft::assemble(
            &info,
            &P256Key::algorithm(),
            &other_key.sign(&info),
        ))
        .into_bytes(),
    );
    let null_params = craft::tlv(
        tag::SEQUENCE,
        &[craft::tlv(tag::OID, oid::ECDSA_WITH_SHA256), vec![0x05, 0x00]].concat(),
    );
    cases.raw(
        "ECDSA with NULL parameters",
        craft::pem(&craft::assemble(&info, &null_params, &signature)).into_bytes(),
    );
    let sha384 = craft::tlv(
        tag::SEQUENCE,
        &craft::tlv(tag::OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03]),
    );
    cases.raw(
        "SHA-256 signature labelled SHA-384",
        craft::pem(&craft::assemble(&info, &sha384, &signature)).into_bytes(),
    );
    // Request attributes and subject alternative names.
    let cn = [printable(oid::CN, AGENT)];
    let password = craft::tlv(
        tag::SEQUENCE,
        &[
            craft::tlv(tag::OID, oid::CHALLENGE_PASSWORD),
            craft::tlv(tag::SET, &craft::tlv(tag::UTF8, b"secret")),
        ]
        .concat(),
    );
    cases.request("challengePassword", &cn, &[password]);
    cases.request(
        "SAN DNS",
        &cn,
        &[craft::extension_request(&[craft::san_dns(&[
            "a.example",
            "b.example",
        ])])],
    );
    cases.request(
        "SAN twice",
        &cn,
        &[craft::extension_request(&[
            craft::san_dns(&["a.example"]),
            craft::san_dns(&["b.example"]),
        ])],
    );
    cases.request(
        "two extension requests",
        &cn,
        &[
            craft::extension_request(&[craft::san_dns(&["a.example"])]),
            craft::extension_request(&[craft::san_dns(&["b.example"])]),
        ],
    );
    let san = |entries: &[u8]| {
        craft::extension_request(&[craft::extension(
            oid::SUBJECT_ALT_NAME,
            &craft::tlv(tag::SEQUENCE, entries),
        )])
    };
    cases.request("SAN IP", &cn, &[san(&craft::tlv(0x87, &[10, 0, 0, 1]))]);
    cases.request("SAN 5-byte IP", &cn, &[san(&craft::tlv(0x87, &[1, 2, 3, 4, 5]))]);
    cases.request("SAN e-mail", &cn, &[san(&craft::tlv(0x81, b"a@example.com"))]);
    cases.request("SAN URI", &cn, &[san(&craft::tlv(0x86, b"spiffe://example/x"))]);
    cases.request(
        "SAN non-ASCII DNS",
        &cn,
        &[san(&craft::tlv(0x82, "é.example".as_bytes()))],
    );
    cases.request("SAN empty", &cn, &[san(&[])]);
}

/// Seeded random mixes of the crafted features: a plain subject (one CN, some O and OU, in
/// random order, several O sometimes in one RDN, UTF8String or PrintableString values), then
/// each odd feature with a small chance, so that about half stay plain.
fn mixed(cases: &mut Cases, seed: u64, count: usize) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let value = |rng: &mut fastrand::Rng| VALUES[rng.usize(0..VALUES.len())];
    // Mostly the type Go would write for the value (PrintableString when it can), else either.
    let plain = |rng: &mut fastrand::Rng, attribute: &'static [u8]| {
        let v = value(rng);
        let go_printable = v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?*".contains(&b));
        let t = match (rng.u8(0..5), go_printable) {
            (0, _) => [tag::UTF8, tag::PRINTABLE][rng.usize(0..2)],
            (_, true) => tag::PRINTABLE,
            (_, false) => tag::UTF8,
        };
        (attribute, t, v)
    };
    for i in 0..count {
        // (attribute, tag, value) per RDN member; RDNs as lists of members.
        let mut rdns: Vec<Vec<(&[u8], u8, &str)>> = Vec::new();
        rdns.push(vec![plain(&mut rng, oid::CN)]);
        for _ in 0..rng.usize(0..4) {
            rdns.push(vec![plain(&mut rng, oid::O)]);
        }
        for _ in 0..rng.usize(0..3) {
            rdns.push(vec![plain(&mut rng, oid::OU)]);
        }
        rng.shuffle(&mut rdns);
        let chance = |rng: &mut fastrand::Rng| rng.u8(0..16) == 0;
        if chance(&mut rng) {
            // Another string type (or a non-string) somewhere.
            let at = rng.usize(0..rdns.len());
            rdns[at][0].1 = TAGS[rng.usize(0..TAGS.len())];
        }
        if chance(&mut rng) {
            let second = (oid::CN, TAGS[rng.usize(0..6)], value(&mut rng));
            rdns.insert(rng.usize(0..=rdns.len()), vec![second]);
        }
        if chance(&mut rng) {
            let other: &[u8] = [oid::C, oid::UID, oid::SERIAL_NUMBER][rng.usize(0..3)];
            rdns.insert(rng.usize(0..=rdns.len()), vec![(other, tag::PRINTABLE, "x")]);
        }
        if chance(&mut rng) && rdns.len() > 1 {
            // Two RDNs merged into one (all-O merges are what Go writes).
            let last = rdns.pop().unwrap_or_default();
            let at = rng.usize(0..rdns.len());
            rdns[at].extend(last);
        }
        if rng.u8(0..4) == 0 {
            // Several O in one RDN, as Go writes them.
            let mut group = Vec::new();
            for _ in 0..2 + rng.usize(0..2) {
                group.push(plain(&mut rng, oid::O));
            }
            rdns.insert(rng.usize(0..=rdns.len()), group);
        }
        if chance(&mut rng) {
            rdns.insert(rng.usize(0..=rdns.len()), Vec::new());
        }
        let encoded: Vec<Vec<u8>> = rdns
            .iter()
            .map(|members| {
                let atvs: Vec<Vec<u8>> = members
                    .iter()
                    .map(|(a, t, v)| atv(a, *t, &encode(*t, v)))
                    .collect();
                rdn(&atvs)
            })
            .collect();
        let attributes = if rng.u8(0..4) == 0 {
            vec![craft::extension_request(&[craft::san_dns(&[
                value(&mut rng),
                "a.example",
            ])])]
        } else {
            Vec::new()
        };
        let der = cases.key.request(&name(&encoded), &attributes).unwrap();
        let bytes = match rng.u8(0..24) {
            0 => craft::pem(&[der, vec![rng.u8(..)]].concat()).into_bytes(),
            1 => {
                let pem = craft::pem(&der);
                format!("{pem}{pem}").into_bytes()
            }
            2 => {
                let mut der = der;
                let at = rng.usize(0..der.len());
                der[at] ^= 1 << rng.u8(0..8);
                craft::pem(&der).into_bytes()
            }
            3 => format!(
                "{}{}",
                ["\n", " ", "\t\n", "x\n"][rng.usize(0..4)],
                craft::pem(&der)
            )
            .into_bytes(),
            4 => format!(
                "{}{}",
                craft::pem(&der).trim_end(),
                ["", "\r", " \n", "\r\n\r\n", "x"][rng.usize(0..5)]
            )
            .into_bytes(),
            _ => craft::pem(&der).into_bytes(),
        };
        cases.raw(format!("mixed {seed}/{i}"), bytes);
    }
}

/// What the reader before this check read (UTF8String and PrintableString values only, the
/// others skipped; the last CN), to show that the cases include requests it misread.
fn old_reading(bytes: &[u8]) -> Option<(String, Vec<String>, Vec<String>)> {
    use der::{
        Decode as _, DecodePem as _,
        asn1::{PrintableStringRef, Utf8StringRef},
    };
    use x509_cert::request::CertReq;
    let request = CertReq::from_pem(bytes)
        .or_else(|_| CertReq::from_der(bytes))
        .ok()?;
    let (mut cn, mut o, mut ou) = (String::new(), Vec::new(), Vec::new());
    for rdn in request.info.subject.iter_rdn() {
        for attribute in rdn.iter() {
            let value = &attribute.value;
            let Some(text) = value
                .decode_as::<Utf8StringRef<'_>>()
                .map(|s| s.as_str().to_owned())
                .or_else(|_| {
                    value
                        .decode_as::<PrintableStringRef<'_>>()
                        .map(|s| s.as_str().to_owned())
                })
                .ok()
            else {
                continue;
            };
            match attribute.oid.as_bytes() {
                b if b == oid::CN => cn = text,
                b if b == oid::O => o.push(text),
                b if b == oid::OU => ou.push(text),
                _ => {}
            }
        }
    }
    Some((cn, o, ou))
}

/// Flotilla's reading equals Go's, or Flotilla refused. Returns whether Flotilla accepted.
fn agree(label: &str, flotilla: &Result<RequestInfo, x509::X509Error>, go: &Answer) -> bool {
    let Ok(info) = flotilla else {
        return false;
    };
    assert!(
        go.parsed && go.signature_ok,
        "{label}: Flotilla read {info:?}, Go did not ({} / signature ok: {})",
        go.error,
        go.signature_ok
    );
    let read = (
        &info.subject.common_name,
        &info.subject.organizations,
        &info.subject.organizational_units,
        &info.dns_names,
    );
    assert_eq!(
        read,
        (&go.cn, &go.o, &go.ou, &go.dns),
        "{label}: Flotilla's reading (left) is not Go's (right)"
    );
    true
}

/// How many cases Flotilla read (alike), refused although Go reads them, and the reader
/// before this check would have read otherwise than Go.
#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    go_only: usize,
    old_misread: usize,
}

fn compare(cases: &[Case]) -> Tally {
    let items: Vec<Value> = cases
        .iter()
        .map(|c| json!({ "csr": B64.encode(&c.bytes) }))
        .collect();
    let answers = ask(&items);
    let mut tally = Tally::default();
    for (case, go) in cases.iter().zip(&answers) {
        let flotilla = x509::parse_request(&case.bytes);
        if agree(&case.label, &flotilla, go) {
            tally.accepted += 1;
        } else if go.parsed && go.signature_ok {
            tally.go_only += 1;
        }
        if go.parsed
            && old_reading(&case.bytes).is_some_and(|old| old != (go.cn.clone(), go.o.clone(), go.ou.clone()))
        {
            tally.old_misread += 1;
        }
    }
    tally
}

#[test]
fn crafted_requests_are_refused_or_read_as_go_reads_them() {
    let mut cases = Cases::new();
    crafted(&mut cases);
    let count = cases.list.len();
    assert!(count > 300, "{count} crafted requests");
    let tally = compare(&cases.list);
    eprintln!("{count} crafted requests: {tally:?}");
    assert!(
        tally.accepted > 50 && tally.go_only > 50,
        "the cases cover both sides: {tally:?}"
    );
    assert!(
        tally.old_misread > 10,
        "the cases include the old reader's misreadings: {tally:?}"
    );
}

#[test]
fn mixed_requests_are_refused_or_read_as_go_reads_them() {
    let mut cases = Cases::new();
    for seed in [1, 2, 3] {
        mixed(&mut cases, seed, 200);
    }
    let tally = compare(&cases.list);
    eprintln!("{} mixed requests: {tally:?}", cases.list.len());
    assert!(tally.accepted > 150 && tally.go_only > 50, "{tally:?}");
}

/// A subject as an agent asks for it.
struct Identity {
    user: String,
    groups: Vec<String>,
    units: Vec<String>,
    dns: Vec<String>,
}

fn identity(user: &str, groups: &[&str], units: &[&str], dns: &[&str]) -> Identity {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    Identity {
        user: user.to_owned(),
        groups: owned(groups),
        units: owned(units),
        dns: owned(dns),
    }
}

/// Subjects as agents of OCM or Flotilla name themselves, and some with odd values.
fn identities() -> Vec<Identity> {
    let mut list = vec![
        identity(AGENT, &[C1, ALL], &[], &[]),
        identity(AGENT, &[C1], &[], &[]),
        identity(
            "system:open-cluster-management:cluster1:addon:helloworld:agent:helloworld-agent",
            &[
                "system:open-cluster-management:cluster:cluster1:addon:helloworld",
                "system:open-cluster-management:addon:helloworld",
                "system:authenticated",
            ],
            &[],
            &[],
        ),
        identity("custom", &["g2", "g1"], &["u2", "u1"], &["a.example"]),
    ];
    for (i, value) in VALUES.iter().enumerate() {
        if value.is_empty() {
            continue;
        }
        let next = VALUES[(i + 7) % VALUES.len()];
        list.push(identity(value, &[value, next], &[next], &[]));
    }
    list
}

#[test]
fn requests_flotillas_agents_make_are_accepted_and_read_as_go_reads_them() {
    let mut cases = Vec::new();
    for Identity {
        user,
        groups,
        units,
        dns,
    } in identities()
    {
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let units: Vec<&str> = units.iter().map(String::as_str).collect();
        let dns: Vec<&str> = dns.iter().map(String::as_str).collect();
        let made = x509::client_request(&user, &groups, &units, &dns)
            .unwrap_or_else(|e| panic!("client_request({user:?}, {groups:?}): {e}"));
        cases.push(Case {
            label: format!("client_request({user:?}, {groups:?}, {units:?}, {dns:?})"),
            bytes: made.request_pem.into_bytes(),
        });
    }
    assert!(cases.len() > 20, "{} requests made", cases.len());
    let items: Vec<Value> = cases
        .iter()
        .map(|c| json!({ "csr": B64.encode(&c.bytes) }))
        .collect();
    for (case, go) in cases.iter().zip(ask(&items)) {
        let flotilla = x509::parse_request(&case.bytes);
        assert!(flotilla.is_ok(), "{}: refused: {flotilla:?}", case.label);
        agree(&case.label, &flotilla, &go);
    }
}

#[test]
fn requests_go_makes_as_ocm_agents_do_are_accepted_and_read_alike() {
    // Go writes several O (or OU) as one multi-valued RDN, PrintableString where it can and
    // UTF8String otherwise: the reader must take that shape.
    let mut items = Vec::new();
    for Identity {
        user,
        groups,
        units,
        dns,
    } in identities()
    {
        items.push(json!({ "make": { "cn": user, "o": groups, "ou": units, "dns": dns } }));
    }
    let keys = ["p256", "p384", "rsa2048", "ed25519", "p521", "rsapss"];
    for key in keys {
        items.push(json!({ "make": { "cn": AGENT, "o": [C1, ALL], "ou": [], "dns": [], "key": key } }));
    }
    let made: Vec<Vec<u8>> = ask(&items).into_iter().map(|a| a.pem.into_bytes()).collect();
    let reads: Vec<Value> = made.iter().map(|pem| json!({ "csr": B64.encode(pem) })).collect();
    let answers = ask(&reads);
    for (i, (pem, go)) in made.iter().zip(&answers).enumerate() {
        let label = items[i].to_string();
        let flotilla = x509::parse_request(pem);
        let key = items[i]["make"]["key"].as_str().unwrap_or("p256");
        // P-521 and RSA-PSS are not among the algorithms Flotilla verifies.
        if matches!(key, "p521" | "rsapss") {
            assert!(flotilla.is_err(), "{label}");
            continue;
        }
        assert!(flotilla.is_ok(), "{label}: refused: {flotilla:?}");
        agree(&label, &flotilla, go);
    }
}

#[test]
fn certificates_are_refused_or_read_as_go_reads_them() {
    let key = P256Key::generate().unwrap();
    let mut cases = Cases::new();
    crafted(&mut cases);
    mixed(&mut cases, 7, 200);
    // The same subjects in certificates: take each request's subject back out of its DER.
    let mut certificates = Vec::new();
    for case in &cases.list {
        let Some(subject) = subject_of(&case.bytes) else {
            continue;
        };
        let der = key.certificate(&subject).unwrap();
        certificates.push((
            case.label.clone(),
            craft::pem_block("CERTIFICATE", &der).into_bytes(),
        ));
    }
    assert!(certificates.len() > 300);
    let items: Vec<Value> = certificates
        .iter()
        .map(|(_, pem)| json!({ "cert": B64.encode(pem) }))
        .collect();
    let mut accepted = 0;
    for ((label, pem), go) in certificates.iter().zip(ask(&items)) {
        let Ok(info) = x509::parse_certificate(pem) else {
            continue;
        };
        accepted += 1;
        assert!(
            go.parsed,
            "{label}: Flotilla read {info:?}, Go did not: {}",
            go.error
        );
        let read = (
            &info.subject.common_name,
            &info.subject.organizations,
            &info.subject.organizational_units,
        );
        assert_eq!(
            read,
            (&go.cn, &go.o, &go.ou),
            "{label}: certificate read (left) is not Go's (right)"
        );
    }
    eprintln!("{} certificates: {accepted} read alike", certificates.len());
    assert!(accepted > 200);
}

/// The subject TLV of a crafted request PEM (None for the framing and DER cases).
fn subject_of(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let body: String = text
        .strip_prefix("-----BEGIN CERTIFICATE REQUEST-----\n")?
        .strip_suffix("-----END CERTIFICATE REQUEST-----\n")?
        .lines()
        .collect();
    let der = B64.decode(body).ok()?;
    // CertificationRequest { info { version, subject, ... }, ... }
    let info = contents(contents(&der)?)?;
    let (_version, rest) = split_whole(info)?;
    let (subject, _) = split_whole(rest)?;
    Some(subject.to_vec())
}

/// The contents of the first element of `bytes`.
fn contents(bytes: &[u8]) -> Option<&[u8]> {
    let (whole, _) = split_whole(bytes)?;
    let header = if whole[1] < 0x80 {
        2
    } else {
        2 + usize::from(whole[1] & 0x7f)
    };
    whole.get(header..)
}

/// The first element of `bytes`, whole, and what follows it.
fn split_whole(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let first = *bytes.get(1)?;
    let (header, len) = if first < 0x80 {
        (2, usize::from(first))
    } else {
        let n = usize::from(first & 0x7f);
        let len = bytes
            .get(2..2 + n)?
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        (2 + n, len)
    };
    let end = header.checked_add(len)?;
    (end <= bytes.len()).then(|| bytes.split_at(end))
}

/// The inputs of the `csr_request` fuzz target: its committed seeds, and the files of the
/// directory `FLOTILLA_FUZZ_CORPUS` names (a corpus a fuzzing run grew), if set.
fn fuzz_corpus() -> Vec<(String, Vec<u8>)> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/csr_request")];
    dirs.extend(std::env::var_os("FLOTILLA_FUZZ_CORPUS").map(PathBuf::from));
    let mut files = Vec::new();
    for dir in dirs {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.is_file())
            .collect();
        paths.sort();
        for path in paths {
            files.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    files
}

/// Replays the `csr_request` fuzz corpus through both readers. The target's first byte picks
/// what the rest is (`tests/fuzz/fuzz_targets/csr_request.rs`), and each input is rebuilt as
/// the target builds it: `0 mod 3`, the whole input (mode byte included) is the request;
/// `1 mod 3`, the rest is a subject DER signed into a request, here with this test's key
/// rather than the target's (both are fresh P-256 keys, and the key does not change what is
/// read); `2 mod 3`, the rest is a subject in a certificate for `parse_certificate`. Requests
/// are compared as the crafted ones are (Flotilla refuses, or reads what Go reads from a request
/// whose signature Go checked), certificates as in
/// `certificates_are_refused_or_read_as_go_reads_them`. The target's `parse_certificate` of
/// raw inputs only guards against panics and is not compared.
#[test]
fn the_fuzz_corpus_is_refused_or_read_as_go_reads_it() {
    let key = P256Key::generate().unwrap();
    let mut requests = Vec::new();
    let mut certificates = Vec::new();
    for (label, bytes) in fuzz_corpus() {
        let Some((mode, rest)) = bytes.split_first() else {
            continue;
        };
        match mode % 3 {
            0 => requests.push(Case { label, bytes }),
            1 => {
                // A subject the signer cannot encode is no input the target checks either.
                if let Ok(der) = key.request(rest, &[]) {
                    requests.push(Case {
                        label,
                        bytes: craft::pem(&der).into_bytes(),
                    });
                }
            }
            _ => {
                if let Ok(der) = key.certificate(rest) {
                    certificates.push((label, craft::pem_block("CERTIFICATE", &der).into_bytes()));
                }
            }
        }
    }
    assert!(
        !requests.is_empty() && !certificates.is_empty(),
        "the corpus has requests and certificates"
    );
    let tally = compare(&requests);
    let items: Vec<Value> = certificates
        .iter()
        .map(|(_, pem)| json!({ "cert": B64.encode(pem) }))
        .collect();
    let mut read = 0;
    for ((label, pem), go) in certificates.iter().zip(ask(&items)) {
        let Ok(info) = x509::parse_certificate(pem) else {
            continue;
        };
        read += 1;
        assert!(
            go.parsed,
            "{label}: Flotilla read {info:?}, Go did not: {}",
            go.error
        );
        assert_eq!(
            (
                &info.subject.common_name,
                &info.subject.organizations,
                &info.subject.organizational_units
            ),
            (&go.cn, &go.o, &go.ou),
            "{label}: certificate read (left) is not Go's (right)"
        );
    }
    eprintln!(
        "fuzz corpus: {} requests {tally:?}; {} certificates, {read} read alike",
        requests.len(),
        certificates.len()
    );
    assert!(
        tally.accepted > 0 && read > 0,
        "the seeds include inputs both read"
    );
}

#[test]
#[ignore = "writes tests/fuzz/corpus/csr_request; run by hand to refresh the seed corpus"]
fn write_fuzz_seed_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/csr_request");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = Cases::new();
    crafted(&mut cases);
    let picks = [
        "plain",
        "repeated O and OU",
        "multi-valued O+O sorted",
        "extra O 0x16",
        "second CN 0x16",
        "SAN DNS",
        "two PEM blocks",
        "bad signature",
        "CN 0xc \"é\"",
        "attribute C",
    ];
    for (i, pick) in picks.iter().enumerate() {
        let case = cases
            .list
            .iter()
            .find(|c| c.label == *pick)
            .unwrap_or_else(|| panic!("no case {pick}"));
        std::fs::write(dir.join(format!("seed-{i:02}")), &case.bytes).unwrap();
    }
    let made = x509::client_request(AGENT, &[C1, ALL], &["unit"], &["a.example"]).unwrap();
    std::fs::write(dir.join("seed-client-request"), made.request_pem).unwrap();
    // Subjects alone, after the target's mode byte: 1 signs them into a request, 2 puts them
    // in a certificate.
    let subjects = [
        vec![
            printable(oid::O, C1),
            printable(oid::O, ALL),
            printable(oid::CN, AGENT),
        ],
        vec![
            rdn(&[
                atv(oid::O, tag::PRINTABLE, C1.as_bytes()),
                atv(oid::O, tag::PRINTABLE, ALL.as_bytes()),
            ]),
            utf8(oid::OU, "é"),
            printable(oid::CN, AGENT),
        ],
        vec![
            printable(oid::O, C1),
            one(oid::O, tag::IA5, C2),
            printable(oid::CN, AGENT),
        ],
        vec![
            printable(oid::CN, AGENT),
            one(oid::CN, tag::BMP, "other"),
            one(oid::C, tag::T61, "DE"),
        ],
    ];
    for (i, rdns) in subjects.iter().enumerate() {
        for mode in [1u8, 2] {
            let bytes = [vec![mode], name(rdns)].concat();
            std::fs::write(dir.join(format!("subject-{mode}-{i}")), bytes).unwrap();
        }
    }
}
