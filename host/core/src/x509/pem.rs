//! PEM framing. A request must be exactly one block, which Go's `pem.Decode` (Kubernetes'
//! `ParseCSR` reads the first block and ignores what follows) reads the same way; a
//! certificate is the first `CERTIFICATE` block of a bundle, as client-go's TLS loading uses.

use base64::Engine as _;

use super::Refusal;

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The DER of the only `label` block of `input`: whitespace may surround it; inside, only
/// base64 lines (no headers, no second block, no other text).
///
/// Go's decoder finds a BEGIN line only at the start of the input or right after a `\n`, and
/// takes an END line only if it ends the line (spaces or tabs, then `\n`, `\r\n` or the end);
/// what may stand around the block here is a subset of that: whitespace ending in `\n` before
/// it, and after it a line end, then whitespace.
pub(crate) fn only_block(input: &[u8], label: &str) -> Result<Vec<u8>, Refusal> {
    let refuse = |why: String| Refusal::Pem(why);
    let text = std::str::from_utf8(input).map_err(|_| refuse("not text".to_owned()))?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let space = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let start = text
        .find(&begin)
        .ok_or_else(|| refuse(format!("no {begin} line")))?;
    let (head, block) = text.split_at(start);
    if !head.chars().all(space) || !(head.is_empty() || head.ends_with('\n')) {
        return Err(refuse(format!("text before the {begin} line")));
    }
    // Searched for after the BEGIN line: the two may share their dashes.
    let block = &block[begin.len()..];
    let stop = block.find(&end).ok_or_else(|| refuse(format!("no {end} line")))?;
    let (body, tail) = block.split_at(stop);
    let tail = &tail[end.len()..];
    let after_line = tail
        .strip_prefix("\r\n")
        .or_else(|| tail.strip_prefix('\n'))
        .unwrap_or(tail);
    if !after_line.chars().all(space) || (after_line.len() == tail.len() && !tail.is_empty()) {
        return Err(refuse(format!(
            "text after the {end} line (a second block, or anything but whitespace)"
        )));
    }
    let body = body
        .strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))
        .ok_or_else(|| refuse(format!("no line break after {begin}")))?;
    if !body.ends_with('\n') {
        return Err(refuse(format!("no line break before {end}")));
    }
    if let Some(other) = body
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '\r' | '\n')))
    {
        return Err(refuse(format!(
            "{other:?} inside the block: only base64 lines may stand between its BEGIN and END \
             lines (no headers, no second block)"
        )));
    }
    let joined: String = body.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    BASE64.decode(joined).map_err(|e| refuse(format!("base64: {e}")))
}

/// The DER of the first `CERTIFICATE` block of `input`, or `None` when `input` holds no
/// `-----BEGIN CERTIFICATE-----` line (it may then be DER).
pub(crate) fn first_certificate(input: &[u8]) -> Option<Result<Vec<u8>, Refusal>> {
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let start = find(input, BEGIN)? + BEGIN.len();
    let Some(len) = find(&input[start..], END) else {
        return Some(Err(Refusal::Pem("no -----END CERTIFICATE----- line".to_owned())));
    };
    let body: Vec<u8> = input[start..start + len]
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    Some(
        BASE64
            .decode(body)
            .map_err(|e| Refusal::Pem(format!("base64: {e}"))),
    )
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL: &str = "CERTIFICATE REQUEST";

    #[test]
    fn one_block_with_whitespace_around_is_read() {
        let der = only_block(
            b"\n \n-----BEGIN CERTIFICATE REQUEST-----\r\nMAMC\r\nAQA=\r\n-----END CERTIFICATE REQUEST-----\n\t\n",
            LABEL,
        )
        .unwrap();
        assert_eq!(der, [0x30, 0x03, 0x02, 0x01, 0x00]);
    }

    #[test]
    fn anything_more_or_less_is_refused() {
        let block = "-----BEGIN CERTIFICATE REQUEST-----\nMAMCAQA=\n-----END CERTIFICATE REQUEST-----\n";
        let cases = [
            format!("{block}{block}"),
            format!("text\n{block}"),
            format!("{block}text"),
            block.replace("MAMCAQA=", "Proc-Type: 4,ENCRYPTED\n\nMAMCAQA="),
            block.replace("MAMCAQA=", "MAMC AQA="),
            block.replace("MAMCAQA=\n", "MAMCAQA="),
            block.replace("CERTIFICATE REQUEST-----\n", "CERTIFICATE REQUEST-----"),
            block.replace("MAMCAQA=", "MAMCAQA"),
            block.replace("MAMCAQA=", "MAMCAQB="),
            // Go finds no BEGIN line that does not start a line, nor an END line followed by
            // more than spaces or tabs before the line end.
            format!(" {block}"),
            format!("\n\t{block}"),
            format!("{}\r", block.trim_end()),
            format!("{}\x0c\n", block.trim_end()),
            block.replace("REQUEST", "REQUESTS"),
            block.replace("-----END CERTIFICATE REQUEST-----", "-----END CERTIFICATE-----"),
            "-----BEGIN NEW CERTIFICATE REQUEST-----\nMAMCAQA=\n-----END NEW CERTIFICATE REQUEST-----\n"
                .to_owned(),
            String::new(),
        ];
        for case in cases {
            assert!(
                matches!(only_block(case.as_bytes(), LABEL), Err(Refusal::Pem(_))),
                "{case:?}"
            );
        }
        assert!(only_block(&[0xff, 0xfe], LABEL).is_err());
    }

    #[test]
    fn begin_and_end_lines_sharing_their_dashes_are_refused_not_a_panic() {
        // Found by the csr_request fuzz target: END was found inside BEGIN's trailing dashes.
        for case in [
            "-----BEGIN CERTIFICATE REQUEST-----END CERTIFICATE REQUEST-----\n",
            "-----BEGIN CERTIFICATE REQUEST-----END CERTIFICATE REQUEST-----",
            "-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n",
        ] {
            assert!(
                matches!(only_block(case.as_bytes(), LABEL), Err(Refusal::Pem(_))),
                "{case:?}"
            );
        }
    }

    #[test]
    fn the_first_certificate_of_a_bundle_is_taken() {
        let bundle = b"junk\n-----BEGIN CERTIFICATE-----\nMAMC\nAQA=\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";
        assert_eq!(first_certificate(bundle).unwrap().unwrap(), [0x30, 3, 2, 1, 0]);
        assert!(first_certificate(&[0x30, 0x00]).is_none());
        assert!(
            first_certificate(b"-----BEGIN CERTIFICATE-----\nMAA=\n")
                .unwrap()
                .is_err()
        );
    }
}
