//! A strict DER walker over raw bytes: one-byte tags, definite minimal lengths, every element
//! consumed. The subject and the signed bytes are read from the bytes as received, never from
//! a re-encoding (a decoder that sorts a SET, as `der`'s `SetOfVec` does, would change the
//! order Go reads).

use super::Refusal;

/// One element: its tag byte, contents, and the whole encoding (tag, length, contents).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub whole: &'a [u8],
}

/// Reads consecutive elements of one level.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next element, whatever its tag.
    pub fn next(&mut self, what: &str) -> Result<Tlv<'a>, Refusal> {
        let malformed = |why: &str| Refusal::Der(format!("{what}: {why}"));
        let input = self.rest;
        let (&tag, after_tag) = input.split_first().ok_or_else(|| malformed("missing"))?;
        if tag & 0x1f == 0x1f {
            return Err(malformed("multi-byte tag"));
        }
        let (&first, mut after_len) = after_tag
            .split_first()
            .ok_or_else(|| malformed("truncated length"))?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 {
                return Err(malformed("indefinite length"));
            }
            if count > 4 {
                return Err(malformed("length too large"));
            }
            let (bytes, rest) = after_len
                .split_at_checked(count)
                .ok_or_else(|| malformed("truncated length"))?;
            if bytes[0] == 0 {
                return Err(malformed("non-minimal length"));
            }
            let len = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
            if len < 0x80 {
                return Err(malformed("non-minimal length"));
            }
            after_len = rest;
            len
        };
        let (content, rest) = after_len
            .split_at_checked(len)
            .ok_or_else(|| malformed("truncated contents"))?;
        let header = input.len() - after_len.len();
        self.rest = rest;
        Ok(Tlv {
            tag,
            content,
            whole: &input[..header + len],
        })
    }

    /// The next element, which must have tag `tag`.
    pub fn expect(&mut self, tag: u8, what: &str) -> Result<Tlv<'a>, Refusal> {
        let element = self.next(what)?;
        if element.tag != tag {
            return Err(Refusal::Der(format!(
                "{what}: tag 0x{:02x} where 0x{tag:02x} belongs",
                element.tag
            )));
        }
        Ok(element)
    }

    /// Fails when anything is left.
    pub fn finish(&self, what: &'static str) -> Result<(), Refusal> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Refusal::TrailingData(what))
        }
    }
}

/// The one element `bytes` holds, which must have tag `tag` (nothing may follow it).
pub(crate) fn single<'a>(bytes: &'a [u8], tag: u8, what: &'static str) -> Result<Tlv<'a>, Refusal> {
    let mut reader = Reader::new(bytes);
    let element = reader.expect(tag, what)?;
    reader.finish(what)?;
    Ok(element)
}

/// Whether `content` is a valid OBJECT IDENTIFIER encoding as Go reads one: not empty, each
/// arc minimal and fitting 31 bits, the last byte ending an arc.
pub(crate) fn valid_oid(content: &[u8]) -> bool {
    if content.is_empty() || content[content.len() - 1] & 0x80 != 0 {
        return false;
    }
    let mut arc_len = 0;
    for (i, b) in content.iter().enumerate() {
        let starts_arc = i == 0 || content[i - 1] & 0x80 == 0;
        if starts_arc && *b == 0x80 {
            return false;
        }
        arc_len = if starts_arc { 1 } else { arc_len + 1 };
        if arc_len > 4 {
            return false;
        }
    }
    true
}

/// The dotted form of an OID's contents, for messages.
pub(crate) fn dotted(content: &[u8]) -> String {
    const_oid::ObjectIdentifier::from_bytes(content)
        .map(|oid| oid.to_string())
        .unwrap_or_else(|_| format!("(OID bytes {content:02x?})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_must_be_definite_and_minimal() {
        assert!(Reader::new(&[0x04, 0x01, 0xaa]).next("x").is_ok());
        for bad in [
            &[0x04, 0x80, 0x00, 0x00][..],
            &[0x04, 0x81, 0x01, 0xaa],
            &[0x04, 0x82, 0x00, 0x81],
            &[0x04, 0x85, 1, 1, 1, 1, 1],
            &[0x04, 0x02, 0xaa],
            &[0x1f, 0x01, 0x00],
            &[0x04],
            &[],
        ] {
            assert!(Reader::new(bad).next("x").is_err(), "{bad:02x?}");
        }
        let long = [vec![0x04, 0x81, 0x80], vec![0; 0x80]].concat();
        let element = Reader::new(&long).next("x").unwrap();
        assert_eq!(element.content.len(), 0x80);
        assert_eq!(element.whole.len(), long.len());
    }

    #[test]
    fn oids_are_checked_as_go_reads_them() {
        assert!(valid_oid(&[0x55, 0x04, 0x03]));
        assert!(!valid_oid(&[]));
        assert!(!valid_oid(&[0x55, 0x84]));
        assert!(!valid_oid(&[0x55, 0x80, 0x03]));
        assert!(!valid_oid(&[0x55, 0x81, 0x82, 0x83, 0x84, 0x05]));
        assert_eq!(dotted(&[0x55, 0x04, 0x03]), "2.5.4.3");
    }
}
