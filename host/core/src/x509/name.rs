//! Reading a Name's CN, O and OU as Go's crypto/x509 reads them, under two policies:
//!
//! ```text
//!                      request subject (Plain)                certificate subject (Go)
//!  value types         UTF8String, PrintableString            + IA5String, T61String (Latin-1),
//!                                                               BMPString (UCS-2), NumericString
//!  other value types   refused                                refused (Go fails the certificate)
//!  attribute types     CN, O, OU only                         others read (validated) and ignored
//!  multi-valued RDN    only all-O or all-OU (Go writes        read in encoded order
//!                      several O or OU as one RDN)
//!  CN                  exactly one, not empty                 the last one wins ("" if none)
//! ```
//!
//! Values are read in the order they are encoded, as Go does: a SET is never re-sorted.

use super::{
    Refusal, Subject,
    craft::{oid, tag},
    walk::{Reader, dotted, single, valid_oid},
};

/// How strictly a Name is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// A request the hub decides on: only what Go itself writes for a CN/O/OU identity.
    Plain,
    /// A certificate an agent holds: everything Go reads, read as Go reads it.
    Go,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    CommonName,
    Organization,
    Unit,
    Other,
}

fn kind(oid_content: &[u8]) -> Kind {
    match oid_content {
        o if o == oid::CN => Kind::CommonName,
        o if o == oid::O => Kind::Organization,
        o if o == oid::OU => Kind::Unit,
        _ => Kind::Other,
    }
}

fn label(oid_content: &[u8]) -> String {
    match kind(oid_content) {
        Kind::CommonName => "CN".to_owned(),
        Kind::Organization => "O".to_owned(),
        Kind::Unit => "OU".to_owned(),
        Kind::Other => dotted(oid_content),
    }
}

/// The name of an ASN.1 type by its tag, for messages.
pub(crate) fn type_name(tag: u8) -> String {
    match tag {
        0x01 => "a BOOLEAN",
        0x02 => "an INTEGER",
        0x03 => "a BIT STRING",
        0x04 => "an OCTET STRING",
        0x05 => "a NULL",
        0x06 => "an OBJECT IDENTIFIER",
        0x0c => "a UTF8String",
        0x12 => "a NumericString",
        0x13 => "a PrintableString",
        0x14 => "a T61String",
        0x15 => "a VideotexString",
        0x16 => "an IA5String",
        0x17 => "a UTCTime",
        0x18 => "a GeneralizedTime",
        0x19 => "a GraphicString",
        0x1a => "a VisibleString",
        0x1b => "a GeneralString",
        0x1c => "a UniversalString",
        0x1e => "a BMPString",
        0x30 => "a SEQUENCE",
        0x31 => "a SET",
        other => return format!("a value of tag 0x{other:02x}"),
    }
    .to_owned()
}

/// Whether `b` may appear in a PrintableString that Go writes: X.680's set plus `*`, which
/// Go's encoder also puts in one. (Go's decoder also takes `&`, which it never writes.)
fn plain_printable(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b" '()+,-./:=?*".contains(&b)
}

/// Whether Go's decoders take `b` in a PrintableString.
fn go_printable(b: u8) -> bool {
    plain_printable(b) || b == b'&'
}

/// Decodes a string value as Go's crypto/x509 does (`parseASN1String`, and encoding/asn1's
/// string parsers, which agree on these types). `None`: not a type Go reads as a string.
fn go_string(value_tag: u8, value: &[u8]) -> Option<Result<String, &'static str>> {
    Some(match value_tag {
        tag::UTF8 => std::str::from_utf8(value)
            .map(str::to_owned)
            .map_err(|_| "invalid UTF-8 in a UTF8String"),
        tag::PRINTABLE => match value.iter().all(|b| go_printable(*b)) {
            true => Ok(String::from_utf8_lossy(value).into_owned()),
            false => Err("a character outside PrintableString"),
        },
        tag::IA5 => match value.is_ascii() {
            true => Ok(String::from_utf8_lossy(value).into_owned()),
            false => Err("a non-ASCII byte in an IA5String"),
        },
        tag::NUMERIC => match value.iter().all(|b| b.is_ascii_digit() || *b == b' ') {
            true => Ok(String::from_utf8_lossy(value).into_owned()),
            false => Err("a character outside NumericString"),
        },
        // T.61 read as Latin-1, as Go and BoringSSL do.
        tag::T61 => Ok(value.iter().map(|b| char::from(*b)).collect()),
        tag::BMP => bmp(value),
        _ => return None,
    })
}

/// UCS-2 as Go reads it: even length, one trailing NUL stripped, no surrogates or
/// non-characters.
fn bmp(value: &[u8]) -> Result<String, &'static str> {
    if !value.len().is_multiple_of(2) {
        return Err("an odd-length BMPString");
    }
    let value = value.strip_suffix(&[0, 0]).unwrap_or(value);
    value
        .chunks_exact(2)
        .map(|pair| {
            let point = u16::from_be_bytes([pair[0], pair[1]]);
            let reserved = point == 0xfffe || point == 0xffff || (0xfdd0..=0xfdef).contains(&point);
            char::from_u32(u32::from(point))
                .filter(|_| !reserved)
                .ok_or("a surrogate or non-character in a BMPString")
        })
        .collect()
}

/// Reads the Name whose whole DER encoding is `name`.
pub(crate) fn read(name: &[u8], policy: Policy) -> Result<Subject, Refusal> {
    let sequence = single(name, tag::SEQUENCE, "subject")?;
    let mut rdns = Reader::new(sequence.content);
    let mut subject = Subject::default();
    let mut common_names = 0;
    while !rdns.is_empty() {
        let set = rdns.expect(tag::SET, "subject RDN")?;
        let mut members = Reader::new(set.content);
        let mut attributes = Vec::new();
        while !members.is_empty() {
            let attribute = members.expect(tag::SEQUENCE, "subject attribute")?;
            let mut fields = Reader::new(attribute.content);
            let type_oid = fields.expect(tag::OID, "subject attribute type")?;
            let value = fields.next("subject attribute value")?;
            fields.finish("subject attribute value")?;
            if !valid_oid(type_oid.content) {
                return Err(Refusal::Der("subject attribute type: malformed OID".to_owned()));
            }
            attributes.push((type_oid.content, value));
        }
        if policy == Policy::Plain {
            check_plain_rdn(&attributes)?;
        }
        for (type_oid, value) in attributes {
            let attribute = label(type_oid);
            let kind = kind(type_oid);
            if policy == Policy::Plain && kind == Kind::Other {
                return Err(Refusal::AttributeType(attribute));
            }
            let plain_type = matches!(value.tag, tag::UTF8 | tag::PRINTABLE);
            if policy == Policy::Plain && !plain_type {
                return Err(Refusal::StringType {
                    attribute,
                    found: type_name(value.tag),
                });
            }
            let text = match go_string(value.tag, value.content) {
                Some(Ok(text)) => text,
                Some(Err(problem)) => return Err(Refusal::InvalidString { attribute, problem }),
                None => {
                    return Err(Refusal::NotAString {
                        attribute,
                        found: type_name(value.tag),
                    });
                }
            };
            if policy == Policy::Plain
                && value.tag == tag::PRINTABLE
                && !value.content.iter().all(|b| plain_printable(*b))
            {
                return Err(Refusal::InvalidString {
                    attribute,
                    problem: "a character outside PrintableString",
                });
            }
            match kind {
                Kind::CommonName => {
                    common_names += 1;
                    if policy == Policy::Plain && common_names > 1 {
                        return Err(Refusal::RepeatedCommonName);
                    }
                    subject.common_name = text;
                }
                Kind::Organization => subject.organizations.push(text),
                Kind::Unit => subject.organizational_units.push(text),
                Kind::Other => {}
            }
        }
    }
    if policy == Policy::Plain && subject.common_name.is_empty() {
        return Err(Refusal::NoCommonName);
    }
    Ok(subject)
}

/// A request's RDN holds one attribute, or several O, or several OU (how Go's
/// `pkix.Name.ToRDNSequence` writes several organizations or units).
fn check_plain_rdn(attributes: &[(&[u8], super::walk::Tlv<'_>)]) -> Result<(), Refusal> {
    match attributes {
        [] => Err(Refusal::MultiValuedRdn("an empty RDN".to_owned())),
        [_] => Ok(()),
        [(first, _), rest @ ..] => {
            let same = rest.iter().all(|(other, _)| other == first);
            if same && matches!(kind(first), Kind::Organization | Kind::Unit) {
                Ok(())
            } else {
                let types: Vec<String> = attributes.iter().map(|(o, _)| label(o)).collect();
                Err(Refusal::MultiValuedRdn(format!(
                    "one RDN holds {}",
                    types.join(" + ")
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x509::craft::{atv, bmp as to_bmp, name, rdn};

    fn one(oid: &[u8], value_tag: u8, value: &[u8]) -> Vec<u8> {
        rdn(&[atv(oid, value_tag, value)])
    }

    #[test]
    fn go_reads_every_string_type_it_knows() {
        let cases: [(u8, &[u8], &str); 7] = [
            (tag::UTF8, "é:ü".as_bytes(), "é:ü"),
            (tag::PRINTABLE, b"a:b *&", "a:b *&"),
            (tag::IA5, b"a@b_c", "a@b_c"),
            (tag::NUMERIC, b"12 3", "12 3"),
            (tag::T61, &[0x61, 0xe9], "aé"),
            (tag::BMP, &to_bmp("aé€"), "aé€"),
            (tag::BMP, &[0, 0x61, 0, 0], "a"),
        ];
        for (value_tag, value, read_as) in cases {
            assert_eq!(
                go_string(value_tag, value),
                Some(Ok(read_as.to_owned())),
                "{value_tag:#x}"
            );
        }
        for (value_tag, value) in [
            (tag::UTF8, &[0xff][..]),
            (tag::PRINTABLE, b"a_b"),
            (tag::PRINTABLE, b"a@b"),
            (tag::IA5, &[0x80]),
            (tag::NUMERIC, b"1a"),
            (tag::BMP, &[0, 0x61, 0]),
            (tag::BMP, &[0xd8, 0x00]),
            (tag::BMP, &[0xff, 0xfe]),
            (tag::BMP, &[0xfd, 0xd0]),
        ] {
            assert!(
                matches!(go_string(value_tag, value), Some(Err(_))),
                "{value_tag:#x} {value:02x?}"
            );
        }
        assert_eq!(go_string(tag::VISIBLE, b"a"), None);
        assert_eq!(
            go_string(0x2c, b"a"),
            None,
            "a constructed UTF8String is no string to Go"
        );
    }

    #[test]
    fn certificates_are_read_as_go_reads_them() {
        let subject = name(&[
            one(oid::C, tag::PRINTABLE, b"DE"),
            rdn(&[atv(oid::O, tag::PRINTABLE, b"g2"), atv(oid::O, tag::IA5, b"g1")]),
            one(oid::CN, tag::PRINTABLE, b"first"),
            one(oid::OU, tag::BMP, &to_bmp("u")),
            one(oid::CN, tag::T61, b"last"),
        ]);
        let got = read_go(&subject);
        assert_eq!(got.common_name, "last");
        assert_eq!(got.organizations, ["g2", "g1"], "encoded order, not sorted");
        assert_eq!(got.organizational_units, ["u"]);
        let no_cn = name(&[one(oid::O, tag::UTF8, b"g")]);
        assert_eq!(read_go(&no_cn).common_name, "");
        let integer = name(&[one(oid::SERIAL_NUMBER, tag::INTEGER, &[1])]);
        assert!(matches!(
            read(&integer, Policy::Go),
            Err(Refusal::NotAString { .. })
        ));
    }

    fn read_go(subject: &[u8]) -> Subject {
        read(subject, Policy::Go).unwrap()
    }
}
