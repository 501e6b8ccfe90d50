//! Decoding certificate input (DER, PEM, Base64) as load balancers deliver it.
//!
//! A client certificate reaches the gateway in a header set by a TLS-terminating proxy, in a
//! JSON field, or in a file. Each hop has its own habits, and all of these are accepted:
//!
//! - raw DER (first byte `0x30`), or several DER certificates back to back;
//! - PEM with `-----BEGIN CERTIFICATE-----` armour, with `\n` or `\r\n` line ends, on one
//!   line, with spaces or tabs instead of line breaks (Apache's `SSL_CLIENT_CERT` in a header,
//!   nginx's tab-indented `$ssl_client_cert`); text around the blocks is ignored;
//! - bare Base64 of the DER, standard or URL-safe alphabet, with or without `=` padding, with
//!   line breaks or whitespace anywhere;
//! - spaces where a `+` was (a hop that form-decoded the value turned `+` into a space): a
//!   space that makes the Base64 invalid is read as `+`;
//! - percent-encoding (`%2B`, `%2F`, `%3D`, `%0A`, `%20`), for instance URL-encoded PEM as
//!   nginx's `$ssl_client_escaped_cert` and AWS ALB's mTLS header produce it.
//!
//! Whatever the route, the result is only accepted when it is DER framing of one or more
//! SEQUENCEs that spans the decoded bytes exactly; that check is also what picks between the
//! readings of an ambiguous space. Parsing the certificate itself is [`super::PspCertificate`]'s
//! job. Nothing here panics, and the work is linear in the input, which is capped at
//! [`MAX_INPUT_LEN`].

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT;

use super::CertError;
use super::der;

/// Budget: the largest input accepted, in bytes, before any decoding.
///
/// A PSD2 certificate is 1.5 to 4 KiB of DER (the largest in the corpus is 2.5 KiB; 3.4 KiB as
/// PEM). PEM adds a third, percent-encoding of PEM about a tenth more, and a `--chain` file a
/// few more certificates. 64 KiB leaves room for a chain of a dozen certificates while bounding
/// the memory and work that one request can cost; it is also above the header limits of common
/// proxies (nginx `large_client_header_buffers` 8 KiB, HAProxy `tune.bufsize` 16 KiB), so no
/// certificate a proxy can forward is refused here.
pub const MAX_INPUT_LEN: usize = 64 * 1024;

/// The PEM label of certificates (RFC 7468 section 5).
const CERTIFICATE: &str = "CERTIFICATE";
const PEM_BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
const PEM_ANY_BEGIN: &[u8] = b"-----BEGIN ";
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// Line lengths tried when spaces both separate lines and stand for `+`: 64 is PEM's
/// (RFC 7468 section 2), 76 is MIME's (RFC 2045 section 6.8).
const LINE_LENGTHS: [usize; 2] = [64, 76];

/// Decodes the certificate in `input` to DER. For a PEM bundle or several DER certificates,
/// the first is the certificate; the rest is not examined (for PEM) or only framed (for DER).
pub fn decode_certificate_input(input: &[u8]) -> Result<Vec<u8>, CertError> {
    let mut certs = decode(input, Want::First)?;
    if certs.is_empty() {
        // `decode` returns at least one certificate or an error; kept as an error, not a panic.
        return Err(CertError::Encoding("no certificate found".to_owned()));
    }
    Ok(certs.swap_remove(0))
}

/// Decodes every certificate in `input` to DER, in order: each block of a PEM bundle, each of
/// several DER certificates back to back, or the single DER or Base64 one. For `--chain`
/// files and chain headers.
pub fn decode_certificate_chain(input: &[u8]) -> Result<Vec<Vec<u8>>, CertError> {
    decode(input, Want::All)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    First,
    All,
}

fn decode(input: &[u8], want: Want) -> Result<Vec<Vec<u8>>, CertError> {
    if input.len() > MAX_INPUT_LEN {
        return Err(CertError::TooLarge {
            len: input.len(),
            max: MAX_INPUT_LEN,
        });
    }
    // The common delivery, bare standard Base64 on one line, decoded at once: the readings
    // below would try exactly this one first. Anything else (or a failure) takes them.
    if !input.is_empty()
        && input
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        && let Ok(der) = STANDARD_PAD_INDIFFERENT.decode(input)
        && let Ok(certs) = split_der(&der)
    {
        // One certificate, the whole of what was decoded (a check endpoint's `eidas`
        // header): the decoded bytes themselves, not a copy.
        if let [one] = certs[..]
            && one.len() == der.len()
        {
            return Ok(vec![der]);
        }
        return Ok(certs.into_iter().map(<[u8]>::to_vec).collect());
    }
    let input = input.strip_prefix(UTF8_BOM).unwrap_or(input);
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err(CertError::Empty);
    }

    if input.first() == Some(&der::tag::SEQUENCE) {
        match split_der(input) {
            Ok(certs) => return Ok(certs.into_iter().map(<[u8]>::to_vec).collect()),
            // Binary that is not well-framed DER: report it as such. Text that happens to
            // start with `0` goes on to be read as text (and fails there, with its reason).
            Err(e) if !is_text(input) => {
                return Err(CertError::Encoding(format!("DER input: {e}")));
            }
            Err(_) => {}
        }
    }

    let text = percent_decode_if_escaped(input);
    if !is_text(&text) {
        return Err(CertError::Encoding(
            "input is neither DER nor ASCII text".to_owned(),
        ));
    }

    if find(&text, PEM_BEGIN).is_some() {
        return decode_pem_blocks(&text, CERTIFICATE, want);
    }
    if find(&text, PEM_ANY_BEGIN).is_some() {
        return Err(CertError::Encoding(
            "PEM input holds no CERTIFICATE block".to_owned(),
        ));
    }
    let der = decode_base64_der(&text)?;
    let certs = split_der(&der).map_err(|e| CertError::Encoding(format!("Base64 content: {e}")))?;
    Ok(certs.into_iter().map(<[u8]>::to_vec).collect())
}

/// Printable ASCII and whitespace only.
fn is_text(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace() || b == 0x0b)
}

/// Percent-decodes when the input holds at least one `%XX` escape. Base64 and PEM never
/// contain `%`, so decoding cannot damage them; a lone `%` is left as it is (and later fails
/// as an invalid Base64 character).
fn percent_decode_if_escaped(input: &[u8]) -> Vec<u8> {
    let escaped = input
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
    if escaped {
        percent_encoding::percent_decode(input).collect()
    } else {
        input.to_vec()
    }
}

/// The one PEM reader (RFC 7468): a DER value labelled `label` at the start of `input`
/// (after whitespace), read with the same tolerant Base64 as certificates. `Ok(None)` when the
/// input does not start with that PEM label (the caller then takes it as DER). CRLs use it.
pub fn decode_pem(input: &[u8], label: &str) -> Result<Option<Vec<u8>>, CertError> {
    let trimmed = input.trim_ascii_start();
    let begin = format!("-----BEGIN {label}-----");
    if !trimmed.starts_with(begin.as_bytes()) {
        return Ok(None);
    }
    if !is_text(trimmed) {
        return Err(CertError::Encoding(format!(
            "PEM {label} input is not ASCII text"
        )));
    }
    Ok(decode_pem_blocks(trimmed, label, Want::First)?
        .into_iter()
        .next())
}

fn decode_pem_blocks(text: &[u8], label: &str, want: Want) -> Result<Vec<Vec<u8>>, CertError> {
    let begin = format!("-----BEGIN {label}-----");
    let end_line = format!("-----END {label}-----");
    let (begin, end_line) = (begin.as_bytes(), end_line.as_bytes());
    let mut certs = Vec::new();
    let mut rest = text;
    while let Some(start) = find(rest, begin) {
        let after_begin = &rest[start + begin.len()..];
        let end = find(after_begin, end_line).ok_or_else(|| {
            CertError::Encoding(format!("PEM {label} block has no END line (truncated?)"))
        })?;
        let body = &after_begin[..end];
        let der = decode_base64_der(body)?;
        let mut framed = split_der(&der)
            .map_err(|e| CertError::Encoding(format!("PEM block {}: {e}", certs.len() + 1)))?;
        if framed.len() != 1 {
            return Err(CertError::Encoding(format!(
                "PEM block {} holds {} DER values, not one {label}",
                certs.len() + 1,
                framed.len()
            )));
        }
        certs.push(framed.swap_remove(0).to_vec());
        if want == Want::First {
            break;
        }
        rest = &after_begin[end + end_line.len()..];
    }
    Ok(certs)
}

/// Decodes a Base64 body (what lies between PEM armour, or a bare value) to bytes that are
/// well-framed DER.
///
/// Line breaks and tabs are dropped. Spaces are ambiguous: a line separator (PEM on one line)
/// or a `+` that a hop form-decoded. The readings are tried in this order, and the first whose
/// result is well-framed DER wins: spaces dropped; spaces as `+`; spaces at the end of a
/// 64- or 76-character line dropped and the others read as `+`. Each reading is linear, so the
/// whole is at most a few passes over the input.
fn decode_base64_der(body: &[u8]) -> Result<Vec<u8>, CertError> {
    if let Some(bad) = body
        .iter()
        .find(|&&b| !(is_base64_symbol(b) || b.is_ascii_whitespace() || b == 0x0b))
    {
        return Err(CertError::Encoding(format!(
            "invalid character {:?} in Base64 text",
            char::from(*bad)
        )));
    }
    let has_space = body.contains(&b' ');

    let first = decode_reading(&reading_spaces_dropped(body));
    if first.is_ok() {
        return first;
    }
    if has_space {
        if let Ok(der) = decode_reading(&reading_spaces_as_plus(body)) {
            return Ok(der);
        }
        for line_len in LINE_LENGTHS {
            if let Ok(der) = decode_reading(&reading_line_aware(body, line_len)) {
                return Ok(der);
            }
        }
    }
    // A value that ended in `+`, turned into a space by a hop, loses that space to header
    // trimming (HTTP strips leading and trailing whitespace). The DER header says how long
    // the certificate is: when the text is short of it by one to four symbols and has no
    // padding, the missing symbols were `+` (a run of five is a chance of 1 in 64^5). At most
    // the last 3 bytes of the signature are restored, so a certificate damaged otherwise
    // still fails its signature check.
    if let Ok(der) = decode_reading(&restore_trimmed_plus(&reading_spaces_as_plus(body))) {
        return Ok(der);
    }
    first
}

/// `symbols` with the `+` signs header trimming removed from its end, when the DER length
/// in its first symbols shows one to [`MAX_TRIMMED_PLUS`] are missing; unchanged otherwise.
const MAX_TRIMMED_PLUS: usize = 4;

fn restore_trimmed_plus(symbols: &[u8]) -> Vec<u8> {
    let mut out = symbols.to_vec();
    if symbols.last() == Some(&b'=') || symbols.len() < 8 {
        return out;
    }
    let Ok(head) = STANDARD_PAD_INDIFFERENT.decode(&symbols[..8]) else {
        return out;
    };
    // SEQUENCE, then a short or long-form length (X.690 8.1.3).
    let (len, header) = match head.as_slice() {
        [0x30, l, ..] if *l < 0x80 => (usize::from(*l), 2),
        [0x30, 0x81, a, ..] => (usize::from(*a), 3),
        [0x30, 0x82, a, b, ..] => ((usize::from(*a) << 8) | usize::from(*b), 4),
        [0x30, 0x83, a, b, c, ..] => (
            (usize::from(*a) << 16) | (usize::from(*b) << 8) | usize::from(*c),
            5,
        ),
        _ => return out,
    };
    let total = len + header;
    let expected = (total * 4).div_ceil(3);
    let missing = expected.saturating_sub(symbols.len());
    if (1..=MAX_TRIMMED_PLUS).contains(&missing) {
        out.extend(std::iter::repeat_n(b'+', missing));
    }
    out
}

fn is_base64_symbol(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')
}

fn is_line_break(b: u8) -> bool {
    matches!(b, b'\r' | b'\n' | b'\t' | 0x0b | 0x0c)
}

/// All whitespace dropped.
fn reading_spaces_dropped(body: &[u8]) -> Vec<u8> {
    body.iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace() && *b != 0x0b)
        .collect()
}

/// Line breaks dropped, spaces between symbols read as `+` (spaces at either end are the
/// separators next to the armour, or padding of a header value).
fn reading_spaces_as_plus(body: &[u8]) -> Vec<u8> {
    let compact: Vec<u8> = body
        .iter()
        .copied()
        .filter(|&b| !is_line_break(b))
        .collect();
    let start = compact
        .iter()
        .position(|&b| b != b' ')
        .unwrap_or(compact.len());
    let end = compact
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(start, |p| p + 1);
    compact
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|&b| if b == b' ' { b'+' } else { b })
        .collect()
}

/// A space right after `line_len` symbols since the last separator is a separator; any other
/// space between symbols is a `+` (including one that starts a line: a `+` there became a
/// space too). Spaces at either end are separators.
fn reading_line_aware(body: &[u8], line_len: usize) -> Vec<u8> {
    let is_sep = |b: &u8| b.is_ascii_whitespace() || *b == 0x0b;
    let start = body.iter().position(|b| !is_sep(b)).unwrap_or(body.len());
    let end = body
        .iter()
        .rposition(|b| !is_sep(b))
        .map_or(start, |p| p + 1);
    let mut out = Vec::with_capacity(body.len());
    let mut run = 0usize;
    for &b in body.get(start..end).unwrap_or_default() {
        if is_line_break(b) {
            run = 0;
        } else if b == b' ' {
            if run == line_len {
                run = 0;
            } else {
                out.push(b'+');
                run += 1;
            }
        } else {
            out.push(b);
            run += 1;
        }
    }
    out
}

/// Decodes one reading: URL-safe symbols mapped to the standard ones, padding optional, and
/// non-zero trailing bits refused (they mean a misread, not a certificate).
fn decode_reading(symbols: &[u8]) -> Result<Vec<u8>, CertError> {
    if symbols.is_empty() {
        return Err(CertError::Encoding("no Base64 content".to_owned()));
    }
    let standard: Vec<u8> = symbols
        .iter()
        .map(|&b| match b {
            b'-' => b'+',
            b'_' => b'/',
            other => other,
        })
        .collect();
    let bytes = STANDARD_PAD_INDIFFERENT
        .decode(&standard)
        .map_err(|e| CertError::Encoding(format!("invalid Base64: {e}")))?;
    split_der(&bytes).map_err(|e| CertError::Encoding(format!("Base64 content: {e}")))?;
    Ok(bytes)
}

/// Why input is not well-framed DER (the text goes into the caller's `CertError::Encoding`).
#[derive(Debug, thiserror::Error)]
enum FramingError {
    #[error("no DER value")]
    Empty,
    #[error("not DER ({0})")]
    NotDer(der::DerError),
    #[error("a {0} where a certificate SEQUENCE was due")]
    NotSequence(String),
}

/// Splits well-framed DER into its top-level values, each of which must be a SEQUENCE, and
/// which together must span the input exactly.
fn split_der(bytes: &[u8]) -> Result<Vec<&[u8]>, FramingError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    if rest.is_empty() {
        return Err(FramingError::Empty);
    }
    while !rest.is_empty() {
        let (tlv, used) = der::read_tlv(rest).map_err(FramingError::NotDer)?;
        if tlv.tag != der::tag::SEQUENCE {
            return Err(FramingError::NotSequence(der::tag_name(tlv.tag)));
        }
        let (one, after) = rest.split_at(used);
        out.push(one);
        rest = after;
    }
    Ok(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    // The first byte first: comparing whole windows called memcmp at every position, 10 % of
    // an ext_authz Check's time on its 2 KB certificate (benches/load-ext-authz.sh).
    let first = needle[0];
    haystack
        .windows(needle.len())
        .position(|w| w[0] == first && w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

    const CORPUS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/psd2-certs"
    );

    fn pem(name: &str) -> String {
        std::fs::read_to_string(format!("{CORPUS}/{name}")).expect("corpus file is readable")
    }

    /// The DER of a corpus certificate, decoded independently of the code under test.
    fn der_of(name: &str) -> Vec<u8> {
        let text = pem(name);
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD
            .decode(body.trim())
            .expect("corpus PEM is valid Base64")
    }

    /// A certificate whose Base64 has `+` and `/` and needs padding, so that the alphabet,
    /// padding and space-for-plus cases are all exercised.
    const CERT: &str = "ica_creditas_cz_qwac_psdcz_cnb.pem";

    fn cert() -> (String, Vec<u8>) {
        let der = der_of(CERT);
        let b64 = STANDARD.encode(&der);
        assert!(b64.contains('+') && b64.contains('/') && b64.ends_with('='));
        (b64, der)
    }

    fn wrap(b64: &str, width: usize, sep: &str) -> String {
        b64.as_bytes()
            .chunks(width)
            .map(|c| std::str::from_utf8(c).expect("Base64 is ASCII"))
            .collect::<Vec<_>>()
            .join(sep)
    }

    #[test]
    fn raw_der_is_returned_as_is() {
        let (_, der) = cert();
        assert_eq!(decode_certificate_input(&der).unwrap(), der);
    }

    #[test]
    fn pem_file_decodes() {
        let (_, der) = cert();
        assert_eq!(decode_certificate_input(pem(CERT).as_bytes()).unwrap(), der);
    }

    #[test]
    fn pem_on_one_line_with_spaces_or_nothing_between_lines_decodes() {
        let (b64, der) = cert();
        let spaced = format!(
            "-----BEGIN CERTIFICATE----- {} -----END CERTIFICATE-----",
            wrap(&b64, 64, " ")
        );
        assert_eq!(decode_certificate_input(spaced.as_bytes()).unwrap(), der);
        let glued = format!("-----BEGIN CERTIFICATE-----{b64}-----END CERTIFICATE-----");
        assert_eq!(decode_certificate_input(glued.as_bytes()).unwrap(), der);
    }

    #[test]
    fn pem_with_crlf_and_tab_indents_decodes() {
        let (b64, der) = cert();
        let crlf = format!(
            "-----BEGIN CERTIFICATE-----\r\n{}\r\n-----END CERTIFICATE-----\r\n",
            wrap(&b64, 64, "\r\n")
        );
        assert_eq!(decode_certificate_input(crlf.as_bytes()).unwrap(), der);
        // nginx's $ssl_client_cert: every line but the first starts with a tab.
        let tabbed = pem(CERT).replace('\n', "\n\t");
        assert_eq!(decode_certificate_input(tabbed.as_bytes()).unwrap(), der);
    }

    #[test]
    fn bare_base64_standard_url_safe_padded_or_not_decodes() {
        let (b64, der) = cert();
        assert_eq!(decode_certificate_input(b64.as_bytes()).unwrap(), der);
        let unpadded = b64.trim_end_matches('=');
        assert_eq!(decode_certificate_input(unpadded.as_bytes()).unwrap(), der);
        let url = URL_SAFE_NO_PAD.encode(&der);
        assert_eq!(decode_certificate_input(url.as_bytes()).unwrap(), der);
        let url_padded = format!("{url}=");
        assert_eq!(
            decode_certificate_input(url_padded.as_bytes()).unwrap(),
            der
        );
    }

    #[test]
    fn line_breaks_and_whitespace_anywhere_are_ignored() {
        let (b64, der) = cert();
        let messy = format!("\n  {}\n\n", wrap(&b64, 17, "\n\t"));
        assert_eq!(decode_certificate_input(messy.as_bytes()).unwrap(), der);
    }

    #[test]
    fn spaces_that_were_plus_signs_are_read_as_plus() {
        let (b64, der) = cert();
        let mangled = b64.replace('+', " ");
        assert_eq!(decode_certificate_input(mangled.as_bytes()).unwrap(), der);
        // In PEM with real line breaks too.
        let pem_mangled = pem(CERT).replace('+', " ");
        assert_eq!(
            decode_certificate_input(pem_mangled.as_bytes()).unwrap(),
            der
        );
    }

    #[test]
    fn a_trailing_plus_lost_to_header_trimming_is_restored() {
        // Well-framed DER of 300 bytes (no Base64 padding) whose last three bytes encode as
        // `++++` (0xFB 0xEF 0xBE: 111110 x 4).
        let mut der = vec![0x30, 0x82, 0x01, 0x28];
        der.resize(297, 0x41);
        der.extend([0xFB, 0xEF, 0xBE]);
        let text = base64::engine::general_purpose::STANDARD.encode(&der);
        assert!(text.ends_with("++++"));
        // A hop turned `+` into spaces; the header's trailing spaces were trimmed.
        let mangled = text.replace('+', " ");
        let trimmed = mangled.trim_end();
        assert_eq!(decode_certificate_input(trimmed.as_bytes()).unwrap(), der);
        // One to four missing symbols are restored; five are truncation and stay an error.
        for cut in [1, 2, 3, 4] {
            let short = &text[..text.len() - cut];
            assert_eq!(
                restore_trimmed_plus(short.as_bytes()).len(),
                text.len(),
                "{cut} missing"
            );
        }
        let short5 = &text[..text.len() - 5];
        assert_eq!(restore_trimmed_plus(short5.as_bytes()), short5.as_bytes());
        assert!(decode_certificate_input(short5.as_bytes()).is_err());
    }

    #[test]
    fn spaces_as_both_line_separators_and_plus_signs_are_told_apart() {
        let (b64, der) = cert();
        let one_line = format!(
            "-----BEGIN CERTIFICATE----- {} -----END CERTIFICATE-----",
            wrap(&b64, 64, " ").replace('+', " ")
        );
        assert_eq!(decode_certificate_input(one_line.as_bytes()).unwrap(), der);
    }

    #[test]
    fn percent_encoded_pem_as_nginx_escapes_it_decodes() {
        let (_, der) = cert();
        // nginx $ssl_client_escaped_cert: ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT).
        let escaped: String = pem(CERT)
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect();
        assert!(escaped.contains("%0A") && escaped.contains("%2B") && escaped.contains("%2F"));
        assert!(escaped.contains("%3D") && escaped.contains("%20"));
        assert_eq!(decode_certificate_input(escaped.as_bytes()).unwrap(), der);
    }

    #[test]
    fn percent_encoded_bare_base64_decodes() {
        let (b64, der) = cert();
        let escaped = b64
            .replace('+', "%2B")
            .replace('/', "%2f")
            .replace('=', "%3D");
        assert_eq!(decode_certificate_input(escaped.as_bytes()).unwrap(), der);
    }

    #[test]
    fn a_utf8_byte_order_mark_is_skipped() {
        let (_, der) = cert();
        let mut with_bom = UTF8_BOM.to_vec();
        with_bom.extend_from_slice(pem(CERT).as_bytes());
        assert_eq!(decode_certificate_input(&with_bom).unwrap(), der);
    }

    #[test]
    fn only_the_first_certificate_of_a_bundle_is_the_certificate() {
        let leaf = der_of("ica_creditas_cz_qwac_psdcz_cnb.pem");
        let ca = der_of("ica_ssl_ev_ca_rsa_10_2017.pem");
        let bundle = format!(
            "subject=CN = creditas.cz\n{}\n{}",
            pem("ica_creditas_cz_qwac_psdcz_cnb.pem"),
            pem("ica_ssl_ev_ca_rsa_10_2017.pem")
        );
        assert_eq!(decode_certificate_input(bundle.as_bytes()).unwrap(), leaf);
        assert_eq!(
            decode_certificate_chain(bundle.as_bytes()).unwrap(),
            vec![leaf.clone(), ca.clone()]
        );
        let mut two_der = leaf.clone();
        two_der.extend_from_slice(&ca);
        assert_eq!(decode_certificate_input(&two_der).unwrap(), leaf);
        assert_eq!(decode_certificate_chain(&two_der).unwrap(), vec![leaf, ca]);
    }

    #[test]
    fn a_single_certificate_is_a_chain_of_one() {
        let (b64, der) = cert();
        assert_eq!(
            decode_certificate_chain(b64.as_bytes()).unwrap(),
            vec![der.clone()]
        );
        assert_eq!(decode_certificate_chain(&der).unwrap(), vec![der]);
    }

    #[test]
    fn empty_and_blank_input_is_empty() {
        assert_eq!(decode_certificate_input(b""), Err(CertError::Empty));
        assert_eq!(decode_certificate_input(b" \r\n\t"), Err(CertError::Empty));
        assert!(
            decode_certificate_input(b"-----BEGIN CERTIFICATE----------END CERTIFICATE-----")
                .is_err()
        );
    }

    #[test]
    fn garbage_is_an_encoding_error() {
        for garbage in [
            &b"hello world"[..],
            b"not a certificate!",
            b"\x00\x01\x02\xff",
            b"%%%%",
            b"MIIB",
            b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----",
            "é".as_bytes(),
        ] {
            assert!(
                matches!(
                    decode_certificate_input(garbage),
                    Err(CertError::Encoding(_))
                ),
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn truncated_input_is_an_error() {
        let (b64, der) = cert();
        assert!(decode_certificate_input(&der[..der.len() - 1]).is_err());
        assert!(decode_certificate_input(&der[..4]).is_err());
        assert!(decode_certificate_input(&b64.as_bytes()[..b64.len() - 8]).is_err());
        let pem_text = pem(CERT);
        let cut = &pem_text[..pem_text.len() - 40];
        assert!(decode_certificate_input(cut.as_bytes()).is_err());
    }

    #[test]
    fn trailing_bytes_after_der_are_an_error() {
        let (_, mut der) = cert();
        der.extend_from_slice(b"\x00\x00");
        assert!(matches!(
            decode_certificate_input(&der),
            Err(CertError::Encoding(_))
        ));
    }

    #[test]
    fn oversized_input_is_refused_before_decoding() {
        let big = vec![b'A'; MAX_INPUT_LEN + 1];
        assert_eq!(
            decode_certificate_input(&big),
            Err(CertError::TooLarge {
                len: MAX_INPUT_LEN + 1,
                max: MAX_INPUT_LEN
            })
        );
    }

    #[test]
    fn every_prefix_of_a_pem_input_is_decoded_or_refused_without_panic() {
        let text = pem(CERT);
        let complete = text
            .find("-----END CERTIFICATE-----")
            .expect("PEM has an END line")
            + "-----END CERTIFICATE-----".len();
        for end in 0..=text.len() {
            let result = decode_certificate_chain(&text.as_bytes()[..end]);
            // Only prefixes that keep the whole END line can decode.
            assert_eq!(result.is_ok(), end >= complete, "prefix of {end} bytes");
        }
    }
}
