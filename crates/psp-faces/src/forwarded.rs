//! A client certificate (and its chain) as a TLS-terminating reverse proxy forwards it in a
//! request header to an external authoriser: read by the faces that take a certificate from a
//! header (the gateway behind a trusted load balancer, ext_authz, forward-auth), over the
//! certificate decoding of `psp-cert`.
//!
//! Three shapes, each read the way its proxy writes it:
//!
//! - **Envoy's `x-forwarded-client-cert` (XFCC)**, read by [`parse_xfcc`] and [`xfcc_chain`].
//!   The grammar is the one Envoy documents (`docs/root/configuration/http/http_conn_man/headers.rst`,
//!   section x-forwarded-client-cert): elements separated by `,`, each a `;`-separated list of
//!   `key=value` pairs, keys case-insensitive, a value double-quoted when it holds `,`, `;` or
//!   `=`, and a `"` inside a quoted value written `\"`. What Envoy actually writes was read in
//!   its source: `ConnectionManagerUtility::mutateXfccRequestHeader`
//!   (`source/common/http/conn_manager_utility.cc`) builds one element as `By=` (once per URI SAN
//!   of Envoy's own certificate), `Hash=` (hex SHA-256 of the client certificate's DER), then the
//!   configured details in the order `Cert="…"`, `Chain="…"`, `Subject="…"`, `URI=` (once per
//!   URI SAN, or empty when there is none), `DNS=` (once per DNS SAN), joined by `;`;
//!   `APPEND_FORWARD` appends that element after a `,` to whatever the request carried, and
//!   `SANITIZE_SET` replaces the header with it. `urlEncodedPemEncodedPeerCertificate` (and its
//!   `…Chain` twin, leaf first) writes PEM with `\n`, space, `+`, `/`, `=` replaced by `%0A`,
//!   `%20`, `%2B`, `%2F`, `%3D`; the subject is `X509_NAME_print_ex(…, XN_FLAG_RFC2253)`, whose
//!   RFC 2253 escaping (`\"`, `\,`, `\\`, `\C3` for a byte above 0x7F) keeps it visible ASCII.
//! - **RFC 9440's `Client-Cert` and `Client-Cert-Chain`**, read strictly by
//!   [`rfc9440_certificate`] and [`rfc9440_chain`]: an RFC 8941 Byte Sequence (section 3.3.5,
//!   `:` base64 `:`), and a List of them (section 3.1) which "does not itself include the
//!   end-entity certificate" (RFC 9440 section 2.3).
//! - **Everything else**, read tolerantly by [`forwarded_chain`] through the one tolerant
//!   decoder, `psp_cert::cert::decode_certificate_input`: URL-encoded PEM (nginx `$ssl_client_escaped_cert`, which is
//!   `ngx_escape_uri(…, NGX_ESCAPE_URI_COMPONENT)`; ingress-nginx `ssl-client-cert`; Kong
//!   `X-Client-Cert`), tab-folded PEM (nginx `$ssl_client_cert`: `ngx_ssl_get_certificate` drops
//!   the last newline and puts a tab after every other), bare Base64 DER (Caddy
//!   `{http.request.tls.client.certificate_der_base64}`), Traefik's `X-Forwarded-Tls-Client-Cert`,
//!   and RFC 9440 Byte Sequences. Traefik's `passTLSClientCert`
//!   (`pkg/middlewares/passtlsclientcert/pass_tls_client_cert.go`) strips the PEM armour and the
//!   newlines of each certificate of `req.TLS.PeerCertificates` (leaf first) and joins them with
//!   `,`; before 2.9.4 it also `url.QueryEscape`d each one (Traefik 1.7's
//!   `middlewares/tlsClientHeaders.go`; traefik/traefik#9379, #9412 and #9669 record the change).
//!
//! Decisions, each of them tested:
//!
//! - **`URI=` and `DNS=` are written unquoted**, so a client certificate whose URI or DNS SAN
//!   holds `,` or `;` adds elements or pairs of its choosing to the one Envoy writes (a URI SAN
//!   `https://tpp.example/x,By=<the proxy>;Hash=<victim>;Cert=<victim>` is a valid URI). No
//!   parser can tell such a value from a real second element, so the value is held to what
//!   the configured forwarding mode can produce ([`XfccForwarding`]): with `SANITIZE_SET`
//!   exactly one element; with `APPEND_FORWARD` exactly one element whose `By` is the trusted
//!   proxy's, and it is the last (the client's own header comes first). Within an element the
//!   known keys must come in Envoy's order (`By`, `Hash`, `Cert`, `Chain`, `Subject`, `URI`,
//!   `DNS`): a `Cert=` or `Hash=` after a `URI=` can only have come from inside a SAN. A
//!   client certificate with a `,` in a URI or DNS SAN is therefore refused, never read. An
//!   earlier element (`APPEND_FORWARD`) must still parse, since where the last one starts
//!   depends on the quoting of all before it; its certificates are never decoded by
//!   [`xfcc_chain`]. A caller that receives several XFCC field lines must join them with `,`
//!   in order (RFC 9110 section 5.3) before calling, so that the last stays last.
//! - **A refusal never names the trusted proxy**: the text reaches the client through the
//!   edge, and the `By` it expects is what an attacker needs to forge an element.
//! - **Unknown XFCC keys are ignored**, as Envoy-compatible parsers do (older Envoy wrote
//!   `SAN=`); they still obey the quoting rules, so they cannot hide a separator. A known key
//!   twice in one element is refused, except `URI` and `DNS`, which repeat. That includes
//!   `By`: Envoy writes one `By` per URI SAN of its own certificate, so a proxy whose
//!   certificate has two URI SANs is refused rather than read one way or the other.
//! - **A quoted XFCC value** ends at the first `"` not preceded by a `\`; a `\` takes the next
//!   character with it. `\"` stands for `"`, as Envoy documents; any other pair is kept as
//!   written, so the RFC 2253 escapes of a `Subject` survive. After the closing quote only `;`,
//!   `,` or the end may follow: a client that leaves a quote open cannot make Envoy's appended
//!   element parse as part of its own.
//! - **XFCC `Hash=` must be the SHA-256 of the leaf** when both are present, as Envoy writes
//!   them together; a mismatch means the element is not what Envoy wrote.
//! - **RFC 9440 is strict**: padding required and non-zero pad bits refused (RFC 8941 section
//!   4.1.8 makes serialisers pad; section 4.2.7 lets parsers be lenient, which this is not),
//!   no parameters (RFC 9440 defines none), no empty list (section 4.1.1 sends no field instead).
//! - **Every certificate returned has the X.509 envelope** (`check_envelope`), and no value
//!   yields more than [`MAX_FORWARDED_CERTIFICATES`].
//!
//! Nothing here panics on hostile input, every value is capped at [`MAX_INPUT_LEN`] before it
//! is read, and the work is linear in its length.
#![warn(missing_docs)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::cert::{CertError, MAX_INPUT_LEN, check_envelope, decode_certificate_chain};

/// Budget: the most certificates one forwarded value may yield.
///
/// A TLS client sends its certificate and one or two CAs; the path builder accepts eight
/// presented intermediates (`psp_check::check::path::MAX_PRESENTED_INTERMEDIATES`). Sixteen
/// holds the leaf, those eight and a root with room to spare; more is refused here, before
/// any of it reaches the checks, never silently cut.
pub const MAX_FORWARDED_CERTIFICATES: usize = 16;

/// The longest piece of a header value quoted in an error message (a key, a `By`, a hash).
const MAX_SHOWN_CHARS: usize = 64;

/// How the trusted Envoy forwards XFCC (its `forward_client_cert_details`), which fixes the
/// shape of a genuine value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XfccForwarding<'a> {
    /// `SANITIZE_SET`: the header is Envoy's one element. With `by`, its `By` must be that.
    SanitizeSet {
        /// The URI SAN of the proxy's own certificate, which it writes as `By=`.
        by: Option<&'a str>,
    },
    /// `APPEND_FORWARD`: Envoy's element is appended to what the client sent, so it is the
    /// last, and the only one whose `By` is the proxy's.
    AppendForward {
        /// The URI SAN of the proxy's own certificate, which it writes as `By=`.
        by: &'a str,
    },
}

impl XfccForwarding<'_> {
    /// The `By` the trusted element must carry, if one is named.
    pub fn by(&self) -> Option<&str> {
        match self {
            XfccForwarding::SanitizeSet { by } => *by,
            XfccForwarding::AppendForward { by } => Some(by),
        }
    }
}

/// One element of Envoy's `x-forwarded-client-cert` header: what one proxy said about the
/// client certificate it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XfccElement {
    /// `By`: the URI SAN of the certificate of the proxy that added the element.
    pub by: Option<String>,
    /// `Hash`: the hex SHA-256 of the client certificate's DER, as written.
    pub hash: Option<String>,
    /// `Cert`: the client certificate's DER, decoded from URL-encoded PEM.
    pub cert: Option<Vec<u8>>,
    /// `Chain`: the DER of each certificate of the client's chain, leaf first as Envoy writes it.
    pub chain: Vec<Vec<u8>>,
    /// `Subject`: the client certificate's subject as the proxy printed it (RFC 2253 for
    /// Envoy), for display only, never for matching.
    pub subject: Option<String>,
    /// `URI`: the URI SANs of the client certificate, in order (an empty `URI=` adds none).
    pub uri: Vec<String>,
    /// `DNS`: the DNS SANs of the client certificate, in order.
    pub dns: Vec<String>,
}

/// Why a forwarded header value gave no certificate chain. Every variant is the caller's
/// (or the client's) fault: the value is not what the configured proxy writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardedError {
    /// The value is empty or blank: no certificate was forwarded.
    #[error("the header value is empty")]
    Empty,
    /// The value is larger than [`MAX_INPUT_LEN`]; refused before it is read.
    #[error("the header value of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Length of the value, in bytes.
        len: usize,
        /// The limit, [`MAX_INPUT_LEN`].
        max: usize,
    },
    /// A byte the format does not allow: a control character (NUL, CR, LF…), DEL or a byte
    /// above 0x7F.
    #[error("{format}: byte 0x{byte:02X} at offset {offset} is not visible ASCII")]
    Byte {
        /// The format being read (`XFCC`, `RFC 9440`).
        format: &'static str,
        /// The byte.
        byte: u8,
        /// Its offset in the value.
        offset: usize,
    },
    /// An XFCC element with nothing in it: a `,` at either end, or two in a row.
    #[error("XFCC element {element} is empty (a comma at either end, or two in a row)")]
    EmptyElement {
        /// Index of the element, from 0.
        element: usize,
    },
    /// Where a `key=value` pair was due there is none (`;;`, a trailing `;`, a key without `=`).
    #[error("XFCC element {element}: no key=value pair at offset {offset}")]
    NotAPair {
        /// Index of the element, from 0.
        element: usize,
        /// Offset in the value where the pair was due.
        offset: usize,
    },
    /// A character that cannot be part of a key (RFC 9110 token) where a key or its `=` was due.
    #[error("XFCC element {element}: {found:?} at offset {offset} where a key or '=' was due")]
    BadKey {
        /// Index of the element, from 0.
        element: usize,
        /// Offset of the character in the value.
        offset: usize,
        /// The character.
        found: char,
    },
    /// A quoted value whose closing `"` never comes.
    #[error("XFCC element {element}: the quote opened at offset {offset} is never closed")]
    UnterminatedQuote {
        /// Index of the element, from 0.
        element: usize,
        /// Offset of the opening quote.
        offset: usize,
    },
    /// Something other than `;`, `,` or the end right after a closing quote.
    #[error(
        "XFCC element {element}: {found:?} at offset {offset} follows a closing quote, where only ';' or ',' may"
    )]
    AfterQuote {
        /// Index of the element, from 0.
        element: usize,
        /// Offset of the character.
        offset: usize,
        /// The character.
        found: char,
    },
    /// A `=`, `"` or space in an unquoted value, which Envoy's grammar requires to be quoted.
    #[error("XFCC element {element}: {found:?} at offset {offset} in an unquoted value")]
    MustBeQuoted {
        /// Index of the element, from 0.
        element: usize,
        /// Offset of the character.
        offset: usize,
        /// The character.
        found: char,
    },
    /// A key that may appear once appears again in the same element.
    #[error("XFCC element {element}: {key} appears more than once")]
    DuplicateKey {
        /// Index of the element, from 0.
        element: usize,
        /// The key, in Envoy's spelling.
        key: &'static str,
    },
    /// The last XFCC element was not added by the proxy the caller trusts. The text does not
    /// name the trusted proxy: it reaches the client.
    #[error("the last XFCC element was not added by the trusted proxy: its By is {}", shown_by(.found))]
    UntrustedHop {
        /// The last element's `By` (shortened), if it has one.
        found: Option<String>,
    },
    /// `SANITIZE_SET` writes exactly one element; more means a SAN of the client's certificate
    /// held a `,` (or the edge is not configured as this side believes).
    #[error(
        "the XFCC value has {count} elements where the proxy (SANITIZE_SET) writes one: a client certificate SAN holding ',' is refused"
    )]
    ElementCount {
        /// How many elements the value has.
        count: usize,
    },
    /// `APPEND_FORWARD` appends exactly one element with the trusted `By`; another with it
    /// came from inside the client's header or certificate.
    #[error(
        "the XFCC value has {count} elements with the trusted proxy's By where the proxy (APPEND_FORWARD) writes one"
    )]
    TrustedElementCount {
        /// How many elements carry the trusted `By`.
        count: usize,
    },
    /// A known key after one Envoy writes later in an element (`Cert=` after `URI=`): it came
    /// from inside an unquoted value.
    #[error("XFCC element {element}: {key}= after {after}=, which is not the order Envoy writes")]
    OutOfOrder {
        /// Index of the element, from 0.
        element: usize,
        /// The key out of order, in Envoy's spelling.
        key: &'static str,
        /// The later key it follows.
        after: &'static str,
    },
    /// The XFCC element used carries neither `Cert=` nor `Chain=`.
    #[error(
        "XFCC element {element} has neither Cert= nor Chain= (Envoy: set_current_client_cert_details cert: true)"
    )]
    NoCertificate {
        /// Index of the element, from 0.
        element: usize,
    },
    /// `Hash=` is not the SHA-256 of the element's certificate.
    #[error("XFCC element {element}: Hash={hash} is not the SHA-256 of its certificate, {actual}")]
    HashMismatch {
        /// Index of the element, from 0.
        element: usize,
        /// The `Hash` written (shortened).
        hash: String,
        /// The SHA-256 of the certificate, lower-case hex.
        actual: String,
    },
    /// An RFC 8941 List with no member; RFC 8941 section 4.1.1 sends no field instead.
    #[error("an empty list (RFC 8941 section 4.1.1 sends no field rather than an empty one)")]
    EmptyList,
    /// A list member with nothing in it (`a,,b`, or a `,` at either end).
    #[error("member {index} of the list is empty")]
    EmptyMember {
        /// Index of the member, from 0.
        index: usize,
    },
    /// A member that is not an RFC 8941 Byte Sequence (`:base64:`).
    #[error("member {index} is not an RFC 8941 Byte Sequence (:base64:): {reason}")]
    NotByteSequence {
        /// Index of the member, from 0.
        index: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The content of a Byte Sequence is not standard, padded Base64.
    #[error("member {index}: {reason} (RFC 8941 section 3.3.5: standard base64, padded)")]
    Base64 {
        /// Index of the member, from 0.
        index: usize,
        /// Why it does not decode.
        reason: String,
    },
    /// A Byte Sequence with RFC 8941 parameters, which RFC 9440 does not define.
    #[error("member {index} carries parameters, which RFC 9440 does not define")]
    Parameters {
        /// Index of the member, from 0.
        index: usize,
    },
    /// A place that holds one certificate holds another number of them.
    #[error("{what} holds {count} certificates, not one")]
    NotOneCertificate {
        /// Which value (`XFCC element 0 Cert=`, `Client-Cert`, `member 2`).
        what: String,
        /// How many it holds.
        count: usize,
    },
    /// More certificates than [`MAX_FORWARDED_CERTIFICATES`].
    #[error("{count} certificates exceed the limit of {max}")]
    TooManyCertificates {
        /// How many the value holds (or would hold).
        count: usize,
        /// The limit, [`MAX_FORWARDED_CERTIFICATES`].
        max: usize,
    },
    /// A value that should be a certificate does not decode to one.
    #[error("{what}: {source}")]
    Certificate {
        /// Which value (`XFCC element 0 Cert=`, `Client-Cert`, `member 2`).
        what: String,
        /// Why it is not a certificate.
        source: CertError,
    },
}

fn shown_by(found: &Option<String>) -> String {
    match found {
        Some(by) => format!("`{by}`"),
        None => "absent".to_owned(),
    }
}

/// Parses a whole XFCC value into its elements, in order, decoding every `Cert=` and `Chain=`.
///
/// Refused: a value over [`MAX_INPUT_LEN`], a byte outside visible ASCII and space, an empty
/// element, a pair without `=`, an unterminated quote, text after a closing quote, a `=`, `"`
/// or space in an unquoted value, a known key twice in one element (but `URI` and `DNS`), and a
/// `Cert=` or `Chain=` that does not decode to certificates. Unknown keys are ignored.
pub fn parse_xfcc(value: &[u8]) -> Result<Vec<XfccElement>, ForwardedError> {
    split_xfcc(value)?
        .into_iter()
        .enumerate()
        .map(|(index, raw)| raw.decode(index))
        .collect()
}

/// The client's chain, leaf first, from the XFCC element the operator's trusted hop added:
/// the last one, in a value of the shape `forwarding` produces ([`XfccForwarding`]: one
/// element for `SANITIZE_SET`, one element with the trusted `By` for `APPEND_FORWARD`). When
/// a `By` is named, the last element's must equal it exactly. The leaf is `Cert=` (or,
/// without it, the first of `Chain=`), followed by `Chain=`'s certificates that are not the
/// leaf itself; `Hash=`, when present, must be the leaf's SHA-256. Elements before the last
/// must parse but are otherwise never used.
pub fn xfcc_chain(
    value: &[u8],
    forwarding: XfccForwarding<'_>,
) -> Result<Vec<Vec<u8>>, ForwardedError> {
    let mut raw = split_xfcc(value)?;
    match forwarding {
        XfccForwarding::SanitizeSet { .. } if raw.len() != 1 => {
            return Err(ForwardedError::ElementCount { count: raw.len() });
        }
        XfccForwarding::AppendForward { by } => {
            let count = raw
                .iter()
                .filter(|element| element.by.as_deref() == Some(by))
                .count();
            if count > 1 {
                return Err(ForwardedError::TrustedElementCount { count });
            }
        }
        XfccForwarding::SanitizeSet { .. } => {}
    }
    let last = raw.pop().ok_or(ForwardedError::Empty)?;
    let index = raw.len();
    if let Some(expected) = forwarding.by()
        && last.by.as_deref() != Some(expected)
    {
        return Err(ForwardedError::UntrustedHop {
            found: last.by.as_deref().map(shown),
        });
    }
    let element = last.decode(index)?;
    let mut rest = element.chain.into_iter();
    let leaf = match element.cert {
        Some(cert) => cert,
        None => rest
            .next()
            .ok_or(ForwardedError::NoCertificate { element: index })?,
    };
    if let Some(hash) = &element.hash {
        let actual = crate::hex::lower(&crate::hex::sha256(&leaf));
        if !hash.eq_ignore_ascii_case(&actual) {
            return Err(ForwardedError::HashMismatch {
                element: index,
                hash: shown(hash),
                actual,
            });
        }
    }
    let issuers: Vec<Vec<u8>> = rest.filter(|cert| *cert != leaf).collect();
    within_budget(1 + issuers.len())?;
    let mut chain = Vec::with_capacity(1 + issuers.len());
    chain.push(leaf);
    chain.extend(issuers);
    Ok(chain)
}

/// RFC 9440 section 2.2: `Client-Cert` is one RFC 8941 Byte Sequence, `:` standard padded
/// Base64 of the certificate's DER `:`, with optional spaces around it. Anything else, a list
/// or parameters included, is an error.
pub fn rfc9440_certificate(value: &[u8]) -> Result<Vec<u8>, ForwardedError> {
    let members = sf_members(value)?;
    match members.as_slice() {
        [] => Err(ForwardedError::Empty),
        [one] => byte_sequence(one, 0, "Client-Cert"),
        more => Err(ForwardedError::NotOneCertificate {
            what: "Client-Cert".to_owned(),
            count: more.len(),
        }),
    }
}

/// RFC 9440 section 2.3: `Client-Cert-Chain` is an RFC 8941 List of Byte Sequences (members
/// separated by `,` with optional spaces or tabs), in TLS order, without the end-entity
/// certificate (which is in `Client-Cert`). Strict like [`rfc9440_certificate`]; an empty list
/// is an error.
pub fn rfc9440_chain(value: &[u8]) -> Result<Vec<Vec<u8>>, ForwardedError> {
    byte_sequence_list(value, "Client-Cert-Chain")
}

/// The one tolerant decoder of forward-auth certificate headers, leaf first: whatever
/// [`decode_certificate_chain`] reads (URL-encoded PEM from nginx, ingress-nginx and Kong,
/// tab-folded PEM from nginx's `$ssl_client_cert`, bare Base64 DER from Caddy, PEM bundles),
/// Traefik's comma-joined bare Base64 DER (URL-escaped before Traefik 2.9.4), and RFC 8941
/// Byte Sequences, one or a comma-separated list (read as strictly as [`rfc9440_chain`]).
pub fn forwarded_chain(value: &[u8]) -> Result<Vec<Vec<u8>>, ForwardedError> {
    check_len(value)?;
    let trimmed = value.trim_ascii();
    if trimmed.is_empty() {
        return Err(ForwardedError::Empty);
    }
    if trimmed.starts_with(b":") {
        return byte_sequence_list(trimmed, "the forwarded list");
    }
    // Neither PEM, percent-encoding nor Base64 has a literal comma, so a comma in text that
    // is not PEM (whose comments could hold one) separates Traefik's certificates.
    let is_text = trimmed
        .iter()
        .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace());
    if is_text && trimmed.contains(&b',') && !contains(trimmed, b"-----BEGIN") {
        let members: Vec<&[u8]> = trimmed.split(|&b| b == b',').collect();
        within_budget(members.len())?;
        return members
            .iter()
            .enumerate()
            .map(|(index, member)| {
                if member.trim_ascii().is_empty() {
                    return Err(ForwardedError::EmptyMember { index });
                }
                one_certificate(member, format!("member {index}"))
            })
            .collect();
    }
    certificates(value, "the forwarded certificate")
}

/// What one XFCC element says, its `Cert=` and `Chain=` still as written.
#[derive(Default)]
struct RawElement {
    by: Option<String>,
    hash: Option<String>,
    cert: Option<String>,
    chain: Option<String>,
    subject: Option<String>,
    uri: Vec<String>,
    dns: Vec<String>,
    /// The known key read last, by its place in Envoy's order ([`ENVOY_ORDER`]).
    last_known: Option<usize>,
}

/// The keys Envoy writes, in the order it writes them in one element
/// (`mutateXfccRequestHeader`: `By`, `Hash`, then the details as its configuration lists
/// them, `Cert`, `Chain`, `Subject`, `URI`, `DNS`).
const ENVOY_ORDER: [&str; 7] = ["By", "Hash", "Cert", "Chain", "Subject", "URI", "DNS"];

impl RawElement {
    /// Records one pair; `key` is matched without regard to case. A known key must not come
    /// after one Envoy writes later.
    fn set(&mut self, key: &str, value: String, element: usize) -> Result<(), ForwardedError> {
        if let Some(place) = ENVOY_ORDER
            .iter()
            .position(|known| known.eq_ignore_ascii_case(key))
        {
            if let Some(last) = self.last_known
                && last > place
            {
                return Err(ForwardedError::OutOfOrder {
                    element,
                    key: ENVOY_ORDER[place],
                    after: ENVOY_ORDER[last],
                });
            }
            self.last_known = Some(place);
        }
        let (slot, name) = match key.to_ascii_lowercase().as_str() {
            "by" => (&mut self.by, "By"),
            "hash" => (&mut self.hash, "Hash"),
            "cert" => (&mut self.cert, "Cert"),
            "chain" => (&mut self.chain, "Chain"),
            "subject" => (&mut self.subject, "Subject"),
            // Envoy writes `URI=` even when the certificate has no URI SAN.
            "uri" => {
                if !value.is_empty() {
                    self.uri.push(value);
                }
                return Ok(());
            }
            "dns" => {
                if !value.is_empty() {
                    self.dns.push(value);
                }
                return Ok(());
            }
            // Unknown keys (older Envoy's `SAN`, anything newer) are ignored, as Envoy's own
            // documentation lists the keys it writes, not a closed set.
            _ => return Ok(()),
        };
        if slot.is_some() {
            return Err(ForwardedError::DuplicateKey { element, key: name });
        }
        *slot = Some(value);
        Ok(())
    }

    /// Decodes `Cert=` (one certificate) and `Chain=` (any number, within the budget).
    fn decode(self, element: usize) -> Result<XfccElement, ForwardedError> {
        let cert = self
            .cert
            .map(|text| one_certificate(text.as_bytes(), format!("XFCC element {element} Cert=")))
            .transpose()?;
        let chain = match self.chain {
            Some(text) => certificates(text.as_bytes(), &format!("XFCC element {element} Chain="))?,
            None => Vec::new(),
        };
        Ok(XfccElement {
            by: self.by,
            hash: self.hash,
            cert,
            chain,
            subject: self.subject,
            uri: self.uri,
            dns: self.dns,
        })
    }
}

/// Splits an XFCC value into its elements (see the module's decisions for the quoting).
// Whole: one pass over the bytes whose states (key, quoted value, unquoted value, separator)
// share the position; split into functions, each would pass the same four variables around.
fn split_xfcc(value: &[u8]) -> Result<Vec<RawElement>, ForwardedError> {
    check_len(value)?;
    if value.is_empty() {
        return Err(ForwardedError::Empty);
    }
    check_bytes(value, "XFCC", |b| (0x20..=0x7e).contains(&b))?;

    let mut elements = Vec::new();
    let mut current = RawElement::default();
    let mut element_start = true;
    let mut pos = 0;
    loop {
        let element = elements.len();
        let key_start = pos;
        while value.get(pos).is_some_and(|&b| is_tchar(b)) {
            pos += 1;
        }
        match value.get(pos) {
            Some(b'=') if pos > key_start => {}
            None | Some(b',') if pos == key_start && element_start => {
                return Err(ForwardedError::EmptyElement { element });
            }
            None | Some(b',' | b';') => {
                return Err(ForwardedError::NotAPair {
                    element,
                    offset: key_start,
                });
            }
            Some(&other) => {
                return Err(ForwardedError::BadKey {
                    element,
                    offset: pos,
                    found: char::from(other),
                });
            }
        }
        let key = String::from_utf8_lossy(&value[key_start..pos]).into_owned();
        pos += 1; // the '='

        let text = if value.get(pos) == Some(&b'"') {
            let open = pos;
            pos += 1;
            let mut text = String::new();
            loop {
                match value.get(pos) {
                    None => {
                        return Err(ForwardedError::UnterminatedQuote {
                            element,
                            offset: open,
                        });
                    }
                    Some(b'"') => {
                        pos += 1;
                        break;
                    }
                    Some(b'\\') => {
                        match value.get(pos + 1) {
                            None => {
                                return Err(ForwardedError::UnterminatedQuote {
                                    element,
                                    offset: open,
                                });
                            }
                            Some(b'"') => text.push('"'),
                            Some(&other) => {
                                text.push('\\');
                                text.push(char::from(other));
                            }
                        }
                        pos += 2;
                    }
                    Some(&other) => {
                        text.push(char::from(other));
                        pos += 1;
                    }
                }
            }
            if let Some(&other) = value.get(pos)
                && other != b';'
                && other != b','
            {
                return Err(ForwardedError::AfterQuote {
                    element,
                    offset: pos,
                    found: char::from(other),
                });
            }
            text
        } else {
            let start = pos;
            while let Some(&b) = value.get(pos)
                && b != b';'
                && b != b','
            {
                if matches!(b, b'=' | b'"' | b' ') {
                    return Err(ForwardedError::MustBeQuoted {
                        element,
                        offset: pos,
                        found: char::from(b),
                    });
                }
                pos += 1;
            }
            String::from_utf8_lossy(&value[start..pos]).into_owned()
        };
        current.set(&key, text, element)?;

        match value.get(pos) {
            Some(b';') => element_start = false,
            Some(b',') => {
                elements.push(std::mem::take(&mut current));
                element_start = true;
            }
            // Both value readers stop only at ';', ',' or the end.
            _ => {
                elements.push(current);
                return Ok(elements);
            }
        }
        pos += 1;
    }
}

/// RFC 9110 section 5.6.2 `tchar`: the characters of a token, which an XFCC key is.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The members of an RFC 8941 List, each trimmed of the optional whitespace around it
/// (section 3.1: `OWS "," OWS`); none when the value is blank. Counted against the budget
/// before any is decoded.
fn sf_members(value: &[u8]) -> Result<Vec<&[u8]>, ForwardedError> {
    check_len(value)?;
    check_bytes(value, "RFC 9440", |b| {
        (0x20..=0x7e).contains(&b) || b == b'\t'
    })?;
    let value = trim_ows(value);
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let members: Vec<&[u8]> = value.split(|&b| b == b',').map(trim_ows).collect();
    within_budget(members.len())?;
    if let Some(index) = members.iter().position(|m| m.is_empty()) {
        return Err(ForwardedError::EmptyMember { index });
    }
    Ok(members)
}

/// An RFC 8941 List of Byte Sequences, each a certificate; `field` names it in errors.
fn byte_sequence_list(value: &[u8], field: &str) -> Result<Vec<Vec<u8>>, ForwardedError> {
    let members = sf_members(value)?;
    if members.is_empty() {
        return Err(ForwardedError::EmptyList);
    }
    members
        .iter()
        .enumerate()
        .map(|(index, member)| byte_sequence(member, index, &format!("{field} member {index}")))
        .collect()
}

fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |p| p + 1);
    &bytes[start..end]
}

/// RFC 8941 section 4.2.7 (parsing a Byte Sequence), strictly: `:`, standard Base64 with its
/// padding and zero pad bits, `:`, nothing after; the content must be a certificate.
fn byte_sequence(member: &[u8], index: usize, what: &str) -> Result<Vec<u8>, ForwardedError> {
    if member.contains(&b';') {
        return Err(ForwardedError::Parameters { index });
    }
    let inner = member
        .strip_prefix(b":")
        .ok_or(ForwardedError::NotByteSequence {
            index,
            reason: "it does not start with ':'",
        })?;
    let inner = inner
        .strip_suffix(b":")
        .ok_or(ForwardedError::NotByteSequence {
            index,
            reason: "it has no closing ':'",
        })?;
    if let Some(&bad) = inner
        .iter()
        .find(|&&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')))
    {
        return Err(ForwardedError::Base64 {
            index,
            reason: format!("{:?} is not in the standard alphabet", char::from(bad)),
        });
    }
    let der = STANDARD.decode(inner).map_err(|e| ForwardedError::Base64 {
        index,
        reason: e.to_string(),
    })?;
    certificate(der, what)
}

/// `der` if it is a certificate's DER (the RFC 5280 envelope, nothing after it).
fn certificate(der: Vec<u8>, what: &str) -> Result<Vec<u8>, ForwardedError> {
    let checked = if der.is_empty() {
        Err(CertError::Empty)
    } else {
        check_envelope(&der)
    };
    checked.map_err(|source| ForwardedError::Certificate {
        what: what.to_owned(),
        source,
    })?;
    Ok(der)
}

/// Every certificate in `text`, read by the tolerant decoder, within the budget.
fn certificates(text: &[u8], what: &str) -> Result<Vec<Vec<u8>>, ForwardedError> {
    let certs = decode_certificate_chain(text).map_err(|source| ForwardedError::Certificate {
        what: what.to_owned(),
        source,
    })?;
    within_budget(certs.len())?;
    certs
        .into_iter()
        .map(|der| certificate(der, what))
        .collect()
}

/// The one certificate in `text`.
fn one_certificate(text: &[u8], what: String) -> Result<Vec<u8>, ForwardedError> {
    let mut certs = certificates(text, &what)?;
    if certs.len() != 1 {
        return Err(ForwardedError::NotOneCertificate {
            what,
            count: certs.len(),
        });
    }
    Ok(certs.swap_remove(0))
}

fn within_budget(count: usize) -> Result<(), ForwardedError> {
    if count > MAX_FORWARDED_CERTIFICATES {
        return Err(ForwardedError::TooManyCertificates {
            count,
            max: MAX_FORWARDED_CERTIFICATES,
        });
    }
    Ok(())
}

fn check_len(value: &[u8]) -> Result<(), ForwardedError> {
    if value.len() > MAX_INPUT_LEN {
        return Err(ForwardedError::TooLarge {
            len: value.len(),
            max: MAX_INPUT_LEN,
        });
    }
    Ok(())
}

fn check_bytes(
    value: &[u8],
    format: &'static str,
    allowed: impl Fn(u8) -> bool,
) -> Result<(), ForwardedError> {
    match value.iter().position(|&b| !allowed(b)) {
        Some(offset) => Err(ForwardedError::Byte {
            format,
            byte: value[offset],
            offset,
        }),
        None => Ok(()),
    }
}

/// A piece of a header value for an error message: at most [`MAX_SHOWN_CHARS`] characters.
/// The values quoted are visible ASCII already (checked before parsing).
fn shown(text: &str) -> String {
    if text.chars().count() <= MAX_SHOWN_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    cut.push('…');
    cut
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    const CORPUS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/psd2-certs"
    );

    /// The URI SAN of the trusted Envoy's own certificate, as it writes it in `By=`.
    const PROXY: &str = "spiffe://psp-gateway.example/ns/edge/sa/envoy";

    /// Envoy with `SANITIZE_SET` and the trusted proxy named.
    const SET: XfccForwarding<'static> = XfccForwarding::SanitizeSet { by: Some(PROXY) };
    /// Envoy with `SANITIZE_SET`, no proxy named.
    const SET_ANY: XfccForwarding<'static> = XfccForwarding::SanitizeSet { by: None };
    /// Envoy with `APPEND_FORWARD`.
    const APPEND: XfccForwarding<'static> = XfccForwarding::AppendForward { by: PROXY };

    /// The real QWAC's subject as `X509_NAME_print_ex(…, XN_FLAG_RFC2253)` prints it (here by
    /// `openssl x509 -subject -nameopt RFC2253`): commas between attributes, `\,` inside one,
    /// `\C3\A1` for UTF-8.
    const QWAC_SUBJECT: &str = r"jurisdictionC=CZ,businessCategory=Private Organization,organizationIdentifier=PSDCZ-CNB-63492555,postalCode=18600,street=Sokolovsk\C3\A1,O=Banka CREDITAS a.s.,C=CZ,ST=Hlavn\C3\AD m\C4\9Bsto Praha,L=Praha 8\, Karl\C3\ADn,serialNumber=63492555,CN=creditas.cz";

    /// The DER of a PEM file, decoded here independently of the code under test.
    fn der_of(path: &str) -> Vec<u8> {
        let text = std::fs::read_to_string(path).expect("test certificate is readable");
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD
            .decode(body.trim())
            .expect("test PEM is valid Base64")
    }

    /// The sandbox PSP's certificate and its issuing CA.
    fn sandbox_leaf() -> Vec<u8> {
        der_of(&format!("{REPO}/certs/psp/valid.pem"))
    }

    fn sandbox_issuer() -> Vec<u8> {
        der_of(&format!("{REPO}/certs/ca/qtsp-issuing.pem"))
    }

    /// A certificate the attacker holds: issued by a CA nobody trusts.
    fn stranger() -> Vec<u8> {
        der_of(&format!("{REPO}/certs/psp/untrusted.pem"))
    }

    /// A real production QWAC (Banka CREDITAS) and its issuing CA.
    fn qwac() -> Vec<u8> {
        der_of(&format!("{CORPUS}/ica_creditas_cz_qwac_psdcz_cnb.pem"))
    }

    fn qwac_issuer() -> Vec<u8> {
        der_of(&format!("{CORPUS}/ica_ssl_ev_ca_rsa_10_2017.pem"))
    }

    /// PEM as OpenSSL's `PEM_write_bio_X509` writes it, which every proxy here starts from:
    /// 64-column lines, each ending in LF.
    fn pem(der: &[u8]) -> String {
        let b64 = STANDARD.encode(der);
        let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("Base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }

    /// nginx `$ssl_client_escaped_cert`: `ngx_escape_uri(…, NGX_ESCAPE_URI_COMPONENT)`
    /// (`src/core/ngx_string.c`, table `uri_component`) escapes every byte but ALPHA, DIGIT and
    /// `-._~!'()*` as `%XX`, upper-case. Older nginx also escaped `!'()*`; PEM has none of them.
    fn ngx_escaped(text: &str) -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~!'()*".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    /// nginx `$ssl_client_cert` (`ngx_ssl_get_certificate`, `src/event/ngx_event_openssl.c`):
    /// the PEM without its last byte, a tab after every remaining LF.
    fn ngx_tab_folded(pem: &str) -> String {
        pem[..pem.len() - 1].replace('\n', "\n\t")
    }

    /// Envoy's `urlEncodedPemEncodedPeerCertificate`: `\n`, space, `+`, `/`, `=` replaced.
    fn envoy_url_encoded(pem: &str) -> String {
        pem.replace('\n', "%0A")
            .replace(' ', "%20")
            .replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    }

    /// Traefik's `sanitize`: the PEM armour and the newlines removed.
    fn traefik_sanitized(der: &[u8]) -> String {
        pem(der)
            .replace("-----BEGIN CERTIFICATE-----", "")
            .replace("-----END CERTIFICATE-----", "")
            .replace('\n', "")
    }

    /// Traefik's `X-Forwarded-Tls-Client-Cert` (2.9.4 and later): the sanitized certificates
    /// joined with `,`, leaf first.
    fn traefik(chain: &[&[u8]]) -> String {
        chain
            .iter()
            .map(|der| traefik_sanitized(der))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Go's `url.QueryEscape` on Base64 text (the only characters it changes there).
    fn go_query_escape(b64: &str) -> String {
        b64.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    }

    /// An RFC 8941 Byte Sequence.
    fn sf(der: &[u8]) -> String {
        format!(":{}:", STANDARD.encode(der))
    }

    fn sha256_hex(der: &[u8]) -> String {
        crate::hex::lower(&crate::hex::sha256(der))
    }

    /// One element as Envoy writes it with `set_current_client_cert_details` cert, chain,
    /// subject, uri and dns: `By`, `Hash`, then the details in Envoy's order.
    fn envoy_element(leaf: &[u8], chain: &[&[u8]], subject: &str, dns: &str) -> String {
        let chain_pem: String = chain.iter().map(|der| pem(der)).collect();
        format!(
            "By={PROXY};Hash={};Cert=\"{}\";Chain=\"{}\";Subject=\"{subject}\";URI=;DNS={dns}",
            sha256_hex(leaf),
            envoy_url_encoded(&pem(leaf)),
            envoy_url_encoded(&chain_pem),
        )
    }

    #[test]
    fn nginx_escaped_cert_of_the_sandbox_psp_decodes_to_its_certificate() {
        // Also ingress-nginx's `ssl-client-cert` and Kong's `X-Client-Cert`: the same bytes.
        let leaf = sandbox_leaf();
        let header = ngx_escaped(&pem(&leaf));
        assert!(header.starts_with("-----BEGIN%20CERTIFICATE-----%0A"));
        assert_eq!(forwarded_chain(header.as_bytes()), Ok(vec![leaf]));
    }

    #[test]
    fn nginx_tab_folded_ssl_client_cert_of_a_real_qwac_decodes() {
        let leaf = qwac();
        let header = ngx_tab_folded(&pem(&leaf));
        assert!(header.contains("\n\t") && !header.ends_with('\n'));
        assert_eq!(forwarded_chain(header.as_bytes()), Ok(vec![leaf]));
    }

    #[test]
    fn caddy_base64_der_of_a_real_qwac_decodes() {
        let leaf = qwac();
        let header = STANDARD.encode(&leaf);
        assert_eq!(forwarded_chain(header.as_bytes()), Ok(vec![leaf]));
    }

    #[test]
    fn traefik_comma_joined_chain_decodes_leaf_first() {
        for (leaf, issuer) in [(sandbox_leaf(), sandbox_issuer()), (qwac(), qwac_issuer())] {
            let header = traefik(&[&leaf, &issuer]);
            assert!(!header.contains("-----") && !header.contains('\n'));
            assert_eq!(header.matches(',').count(), 1);
            assert_eq!(forwarded_chain(header.as_bytes()), Ok(vec![leaf, issuer]));
        }
    }

    #[test]
    fn traefik_before_2_9_4_url_escaped_members_decode() {
        let (leaf, issuer) = (qwac(), qwac_issuer());
        let header = format!(
            "{},{}",
            go_query_escape(&traefik_sanitized(&leaf)),
            go_query_escape(&traefik_sanitized(&issuer))
        );
        assert!(header.contains("%2B") || header.contains("%2F"));
        assert_eq!(forwarded_chain(header.as_bytes()), Ok(vec![leaf, issuer]));
    }

    #[test]
    fn envoy_element_with_a_quoted_rfc2253_subject_parses_field_by_field() {
        let (leaf, issuer) = (qwac(), qwac_issuer());
        let header = envoy_element(&leaf, &[&leaf, &issuer], QWAC_SUBJECT, "creditas.cz");
        assert_eq!(
            parse_xfcc(header.as_bytes()),
            Ok(vec![XfccElement {
                by: Some(PROXY.to_owned()),
                hash: Some(sha256_hex(&leaf)),
                cert: Some(leaf.clone()),
                chain: vec![leaf.clone(), issuer.clone()],
                subject: Some(QWAC_SUBJECT.to_owned()),
                uri: vec![],
                dns: vec!["creditas.cz".to_owned()],
            }])
        );
    }

    #[test]
    fn envoy_sanitize_set_element_gives_the_leaf_then_its_issuers_once() {
        let (leaf, issuer) = (qwac(), qwac_issuer());
        // Chain= repeats the leaf (Envoy: "including the leaf certificate"); it is not doubled.
        let header = envoy_element(&leaf, &[&leaf, &issuer], QWAC_SUBJECT, "creditas.cz");
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET),
            Ok(vec![leaf.clone(), issuer.clone()])
        );
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET_ANY),
            Ok(vec![leaf, issuer])
        );
    }

    #[test]
    fn an_xfcc_chain_without_cert_gives_its_first_certificate_as_the_leaf() {
        let (leaf, issuer) = (sandbox_leaf(), sandbox_issuer());
        let header = format!(
            "By={PROXY};Chain=\"{}\"",
            envoy_url_encoded(&(pem(&leaf) + &pem(&issuer)))
        );
        assert_eq!(xfcc_chain(header.as_bytes(), SET), Ok(vec![leaf, issuer]));
    }

    #[test]
    fn xfcc_keys_are_case_insensitive_and_unknown_keys_are_ignored() {
        let leaf = sandbox_leaf();
        // `SAN=` is what older Envoy wrote; the future key's quoted value holds separators.
        let header = format!(
            "by={PROXY};HASH={};cert=\"{}\";SAN=spiffe://old;X-Future=\"a,b;c=d\"",
            sha256_hex(&leaf),
            envoy_url_encoded(&pem(&leaf))
        );
        let elements = parse_xfcc(header.as_bytes()).expect("parses");
        assert_eq!(elements.len(), 1);
        assert_eq!(elements[0].by.as_deref(), Some(PROXY));
        assert_eq!(elements[0].cert.as_ref(), Some(&leaf));
        assert_eq!(xfcc_chain(header.as_bytes(), SET), Ok(vec![leaf]));
    }

    #[test]
    fn an_escaped_backslash_before_the_closing_quote_ends_the_subject() {
        // A CN ending in `\` is `CN=a\\` in RFC 2253; the quote after it closes the value.
        let leaf = sandbox_leaf();
        let header = format!(
            r#"By={PROXY};Cert="{}";Subject="CN=a\\";URI=spiffe://tpp"#,
            envoy_url_encoded(&pem(&leaf))
        );
        let elements = parse_xfcc(header.as_bytes()).expect("parses");
        assert_eq!(elements[0].subject.as_deref(), Some(r"CN=a\\"));
        assert_eq!(elements[0].cert.as_ref(), Some(&leaf));
        assert_eq!(elements[0].uri, vec!["spiffe://tpp".to_owned()]);
    }

    #[test]
    fn rfc9440_client_cert_and_chain_of_a_real_qwac_decode() {
        let (leaf, issuer) = (qwac(), qwac_issuer());
        assert_eq!(rfc9440_certificate(sf(&leaf).as_bytes()), Ok(leaf.clone()));
        assert_eq!(
            rfc9440_certificate(format!("  {}  ", sf(&leaf)).as_bytes()),
            Ok(leaf)
        );
        assert_eq!(
            rfc9440_chain(sf(&issuer).as_bytes()),
            Ok(vec![issuer.clone()])
        );
        // RFC 9440 Appendix A writes the list with ", ".
        let list = format!("{}, {}", sf(&issuer), sf(&sandbox_issuer()));
        assert_eq!(
            rfc9440_chain(list.as_bytes()),
            Ok(vec![issuer, sandbox_issuer()])
        );
    }

    #[test]
    fn forwarded_chain_reads_rfc9440_byte_sequences() {
        let (leaf, issuer) = (sandbox_leaf(), sandbox_issuer());
        let header = format!("{}, {}", sf(&leaf), sf(&issuer));
        assert_eq!(
            forwarded_chain(header.as_bytes()),
            Ok(vec![leaf.clone(), issuer])
        );
        assert_eq!(forwarded_chain(sf(&leaf).as_bytes()), Ok(vec![leaf]));
        // Read as strictly as Client-Cert-Chain, with errors naming what was read.
        assert!(matches!(
            forwarded_chain(b":MAA=:"),
            Err(ForwardedError::Certificate { what, source: CertError::Der(_) })
                if what == "the forwarded list member 0"
        ));
    }

    #[test]
    fn a_client_element_before_the_proxys_is_never_used_and_never_accepted_by_sanitize_set() {
        let (leaf, issuer, attacker) = (sandbox_leaf(), sandbox_issuer(), stranger());
        // The client sends an element of its own; Envoy (APPEND_FORWARD) appends its own.
        let injected = format!(
            "By=spiffe://client;Hash={};Cert=\"{}\"",
            sha256_hex(&attacker),
            envoy_url_encoded(&pem(&attacker))
        );
        let header = format!(
            "{injected},{}",
            envoy_element(
                &leaf,
                &[&leaf, &issuer],
                "CN=valid.psp.sandbox,C=XX",
                "valid.psp.sandbox"
            )
        );
        let elements = parse_xfcc(header.as_bytes()).expect("parses");
        assert_eq!(elements[0].cert.as_ref(), Some(&attacker));
        assert_eq!(
            xfcc_chain(header.as_bytes(), APPEND),
            Ok(vec![leaf.clone(), issuer.clone()])
        );
        // SANITIZE_SET never writes two elements: the value is not what the edge wrote.
        for forwarding in [SET, SET_ANY] {
            assert_eq!(
                xfcc_chain(header.as_bytes(), forwarding),
                Err(ForwardedError::ElementCount { count: 2 })
            );
        }
    }

    #[test]
    fn a_client_element_claiming_the_proxys_by_is_refused_under_append_forward() {
        let (leaf, attacker) = (sandbox_leaf(), stranger());
        let injected = format!(
            "By={PROXY};Hash={};Cert=\"{}\"",
            sha256_hex(&attacker),
            envoy_url_encoded(&pem(&attacker))
        );
        let proxys = envoy_element(&leaf, &[&leaf], "CN=valid.psp.sandbox", "valid.psp.sandbox");
        let header = format!("{injected},{proxys}");
        assert_eq!(
            xfcc_chain(header.as_bytes(), APPEND),
            Err(ForwardedError::TrustedElementCount { count: 2 })
        );
    }

    #[test]
    fn a_last_element_from_another_hop_is_refused_when_by_names_the_proxy() {
        let (leaf, attacker) = (sandbox_leaf(), stranger());
        let proxys = envoy_element(&leaf, &[&leaf], "CN=valid.psp.sandbox", "valid.psp.sandbox");
        let cert = envoy_url_encoded(&pem(&attacker));
        // A proxy that forwards the client's header unchanged leaves the client's element last.
        let with_other_by = format!("{proxys},By=spiffe://attacker;Cert=\"{cert}\"");
        assert_eq!(
            xfcc_chain(with_other_by.as_bytes(), APPEND),
            Err(ForwardedError::UntrustedHop {
                found: Some("spiffe://attacker".to_owned()),
            })
        );
        let without_by = format!("{proxys},Cert=\"{cert}\"");
        assert_eq!(
            xfcc_chain(without_by.as_bytes(), APPEND),
            Err(ForwardedError::UntrustedHop { found: None })
        );
        // One element from another hop, under SANITIZE_SET.
        let alone = format!("By=spiffe://attacker;Cert=\"{cert}\"");
        let refused = xfcc_chain(alone.as_bytes(), SET);
        assert_eq!(
            refused,
            Err(ForwardedError::UntrustedHop {
                found: Some("spiffe://attacker".to_owned()),
            })
        );
        // The text the edge relays to the client never names the trusted proxy.
        let text = refused.expect_err("refused").to_string();
        assert!(!text.contains(PROXY), "{text}");
    }

    /// What Envoy writes for a client certificate whose URI SAN is `uri_san`, exactly as
    /// `mutateXfccRequestHeader` builds it (`By`, `Hash`, `Cert`, `Subject`, `URI` unquoted).
    fn envoy_writes_for(client: &[u8], uri_san: &str) -> String {
        format!(
            "By={PROXY};Hash={};Cert=\"{}\";Subject=\"CN=tpp.example\";URI={uri_san}",
            sha256_hex(client),
            envoy_url_encoded(&pem(client))
        )
    }

    #[test]
    fn a_uri_san_that_smuggles_an_element_never_becomes_the_victims_identity() {
        // The attacker's own certificate carries a URI SAN that closes Envoy's element and
        // opens one naming the proxy, the victim's hash and the victim's public certificate.
        let (victim, attacker) = (sandbox_leaf(), stranger());
        let smuggled = format!(
            "https://tpp.example/x,By={PROXY};Hash={};Cert={}",
            sha256_hex(&victim),
            envoy_url_encoded(&pem(&victim))
        );
        let header = envoy_writes_for(&attacker, &smuggled);
        // It parses as two elements, the last one the victim's: the shape is the attack.
        let elements = parse_xfcc(header.as_bytes()).expect("parses");
        assert_eq!(elements.len(), 2);
        assert_eq!(elements[1].cert.as_ref(), Some(&victim));
        for forwarding in [SET, SET_ANY] {
            assert_eq!(
                xfcc_chain(header.as_bytes(), forwarding),
                Err(ForwardedError::ElementCount { count: 2 })
            );
        }
        assert_eq!(
            xfcc_chain(header.as_bytes(), APPEND),
            Err(ForwardedError::TrustedElementCount { count: 2 })
        );
        // Without `By=` in the smuggled element, the last element is not the proxy's.
        let without_by = format!(
            "https://tpp.example/x,Hash={};Cert={}",
            sha256_hex(&victim),
            envoy_url_encoded(&pem(&victim))
        );
        let header = envoy_writes_for(&attacker, &without_by);
        assert_eq!(
            xfcc_chain(header.as_bytes(), APPEND),
            Err(ForwardedError::UntrustedHop { found: None })
        );
    }

    #[test]
    fn a_uri_san_that_smuggles_a_pair_into_envoys_element_is_refused() {
        // `;Cert=` inside the URI SAN adds a pair to Envoy's own element: where Envoy was
        // configured to send no Cert, it would be the only one.
        let (victim, attacker) = (sandbox_leaf(), stranger());
        let smuggled = format!(
            "https://tpp.example/x;Cert={}",
            envoy_url_encoded(&pem(&victim))
        );
        let header = format!(
            "By={PROXY};Hash={};Subject=\"CN=tpp.example\";URI={smuggled}",
            sha256_hex(&attacker)
        );
        let refused = Err(ForwardedError::OutOfOrder {
            element: 0,
            key: "Cert",
            after: "URI",
        });
        assert_eq!(xfcc_chain(header.as_bytes(), SET), refused);
        assert_eq!(
            parse_xfcc(header.as_bytes()).map(|_| ()),
            refused.clone().map(|_| ())
        );
        // The same through a DNS SAN, and a Hash smuggled after the URI.
        let header = format!(
            "By={PROXY};Hash={};Cert=\"{}\";URI=;DNS=tpp.example;Hash={}",
            sha256_hex(&attacker),
            envoy_url_encoded(&pem(&attacker)),
            sha256_hex(&victim)
        );
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET),
            Err(ForwardedError::OutOfOrder {
                element: 0,
                key: "Hash",
                after: "DNS",
            })
        );
    }

    #[test]
    fn envoys_own_element_with_every_detail_in_its_order_is_read() {
        let leaf = sandbox_leaf();
        let header = format!(
            "{};URI=spiffe://tpp/a;URI=spiffe://tpp/b;DNS=a.example;DNS=b.example",
            envoy_writes_for(&leaf, "https://tpp.example/x")
        );
        assert_eq!(xfcc_chain(header.as_bytes(), SET), Ok(vec![leaf.clone()]));
        assert_eq!(xfcc_chain(header.as_bytes(), APPEND), Ok(vec![leaf]));
    }

    #[test]
    fn a_quote_injected_in_the_subject_cannot_add_a_cert() {
        // A certificate whose subject holds `",Cert="…`: RFC 2253 prints the quote as `\"`.
        let cert = envoy_url_encoded(&pem(&stranger()));
        let header = format!(r#"By={PROXY};Subject="a\",Cert={cert}""#);
        let elements = parse_xfcc(header.as_bytes()).expect("parses");
        assert_eq!(elements.len(), 1);
        assert_eq!(elements[0].subject, Some(format!("a\",Cert={cert}")));
        assert_eq!(elements[0].cert, None);
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET),
            Err(ForwardedError::NoCertificate { element: 0 })
        );
    }

    #[test]
    fn a_key_twice_in_one_element_is_refused() {
        let (leaf, attacker) = (sandbox_leaf(), stranger());
        let header = format!(
            "By={PROXY};Cert=\"{}\";cert=\"{}\"",
            envoy_url_encoded(&pem(&leaf)),
            envoy_url_encoded(&pem(&attacker))
        );
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET),
            Err(ForwardedError::DuplicateKey {
                element: 0,
                key: "Cert"
            })
        );
        // Envoy writes one By per URI SAN of its own certificate: two are refused, not chosen.
        assert_eq!(
            parse_xfcc(format!("By={PROXY};By=spiffe://other").as_bytes()),
            Err(ForwardedError::DuplicateKey {
                element: 0,
                key: "By"
            })
        );
    }

    #[test]
    fn an_unterminated_quote_is_refused() {
        let header = format!("By={PROXY};Subject=\"CN=a,O=b");
        let open = header.find('"').expect("has a quote");
        assert_eq!(
            parse_xfcc(header.as_bytes()),
            Err(ForwardedError::UnterminatedQuote {
                element: 0,
                offset: open
            })
        );
    }

    #[test]
    fn a_quote_the_client_leaves_open_cannot_swallow_the_proxys_element() {
        // The client sends `Subject="x`; Envoy appends `,` and its element. The client's quote
        // closes at Envoy's `Cert="`, and the PEM after it is refused rather than read.
        let leaf = sandbox_leaf();
        let header = format!(
            "Subject=\"x,{}",
            envoy_element(&leaf, &[&leaf], "CN=valid.psp.sandbox", "valid.psp.sandbox")
        );
        let offset = header.find("Cert=\"").expect("has Cert") + "Cert=\"".len();
        let refused = Err(ForwardedError::AfterQuote {
            element: 0,
            offset,
            found: '-',
        });
        assert_eq!(xfcc_chain(header.as_bytes(), SET), refused);
        assert_eq!(xfcc_chain(header.as_bytes(), SET_ANY), refused);
    }

    #[test]
    fn a_cert_that_is_not_a_certificate_is_refused() {
        let garbage = format!("By={PROXY};Cert=\"hello\"");
        assert!(matches!(
            xfcc_chain(garbage.as_bytes(), SET),
            Err(ForwardedError::Certificate { what, source: CertError::Encoding(_) })
                if what == "XFCC element 0 Cert="
        ));
        // Well-framed DER in a CERTIFICATE block that is no certificate: SEQUENCE { INTEGER 5 }.
        let not_x509 = format!(
            "By={PROXY};Cert=\"{}\"",
            envoy_url_encoded(&pem(&[0x30, 0x03, 0x02, 0x01, 0x05]))
        );
        assert!(matches!(
            xfcc_chain(not_x509.as_bytes(), SET),
            Err(ForwardedError::Certificate {
                source: CertError::Der(_),
                ..
            })
        ));
    }

    #[test]
    fn a_hash_that_is_not_the_certificates_is_refused() {
        let (leaf, attacker) = (sandbox_leaf(), stranger());
        let header = format!(
            "By={PROXY};Hash={};Cert=\"{}\"",
            sha256_hex(&attacker),
            envoy_url_encoded(&pem(&leaf))
        );
        assert_eq!(
            xfcc_chain(header.as_bytes(), SET),
            Err(ForwardedError::HashMismatch {
                element: 0,
                hash: sha256_hex(&attacker),
                actual: sha256_hex(&leaf),
            })
        );
    }

    #[test]
    fn seventy_kib_is_refused_before_it_is_read() {
        let big = vec![b'A'; 70 * 1024];
        let refused = ForwardedError::TooLarge {
            len: 70 * 1024,
            max: MAX_INPUT_LEN,
        };
        assert_eq!(parse_xfcc(&big), Err(refused.clone()));
        assert_eq!(xfcc_chain(&big, SET), Err(refused.clone()));
        assert_eq!(rfc9440_certificate(&big), Err(refused.clone()));
        assert_eq!(rfc9440_chain(&big), Err(refused.clone()));
        assert_eq!(forwarded_chain(&big), Err(refused));
    }

    #[test]
    fn nul_cr_and_lf_bytes_are_refused() {
        for byte in [0x00, b'\r', b'\n'] {
            let mut xfcc = b"By=a".to_vec();
            xfcc.push(byte);
            xfcc.extend_from_slice(b";Hash=b");
            assert_eq!(
                parse_xfcc(&xfcc),
                Err(ForwardedError::Byte {
                    format: "XFCC",
                    byte,
                    offset: 4
                })
            );
            let mut sf_value = sf(&sandbox_leaf()).into_bytes();
            sf_value.insert(1, byte);
            assert_eq!(
                rfc9440_certificate(&sf_value),
                Err(ForwardedError::Byte {
                    format: "RFC 9440",
                    byte,
                    offset: 1
                })
            );
        }
        // The tolerant decoder takes line breaks (nginx's folded PEM) but not a NUL.
        let mut b64 = STANDARD.encode(sandbox_leaf()).into_bytes();
        b64.insert(10, 0x00);
        assert!(matches!(
            forwarded_chain(&b64),
            Err(ForwardedError::Certificate {
                source: CertError::Encoding(_),
                ..
            })
        ));
    }

    #[test]
    fn not_base64_between_the_colons_is_refused() {
        assert!(matches!(
            rfc9440_certificate(b":notbase64:"),
            Err(ForwardedError::Base64 { index: 0, .. })
        ));
        // Strict: the URL-safe alphabet and missing padding are both refused.
        let der = qwac();
        let url_safe = format!(
            ":{}:",
            base64::engine::general_purpose::URL_SAFE.encode(&der)
        );
        assert_eq!(
            rfc9440_certificate(url_safe.as_bytes()),
            Err(ForwardedError::Base64 {
                index: 0,
                reason: "'-' is not in the standard alphabet".to_owned(),
            })
        );
        let unpadded = sf(&der).replace('=', "");
        assert!(matches!(
            rfc9440_certificate(unpadded.as_bytes()),
            Err(ForwardedError::Base64 { index: 0, .. })
        ));
    }

    #[test]
    fn a_byte_sequence_without_its_colons_is_refused() {
        let b64 = STANDARD.encode(sandbox_leaf());
        assert_eq!(
            rfc9440_certificate(b64.as_bytes()),
            Err(ForwardedError::NotByteSequence {
                index: 0,
                reason: "it does not start with ':'",
            })
        );
        assert_eq!(
            rfc9440_chain(format!(":{b64}").as_bytes()),
            Err(ForwardedError::NotByteSequence {
                index: 0,
                reason: "it has no closing ':'",
            })
        );
    }

    #[test]
    fn an_empty_list_is_refused() {
        assert_eq!(rfc9440_chain(b""), Err(ForwardedError::EmptyList));
        assert_eq!(rfc9440_chain(b" \t "), Err(ForwardedError::EmptyList));
        assert_eq!(rfc9440_certificate(b""), Err(ForwardedError::Empty));
        assert_eq!(forwarded_chain(b" "), Err(ForwardedError::Empty));
        assert_eq!(parse_xfcc(b""), Err(ForwardedError::Empty));
        // A trailing comma leaves an empty member (RFC 8941 section 4.2.1 fails it).
        let trailing = format!("{},", sf(&sandbox_issuer()));
        assert_eq!(
            rfc9440_chain(trailing.as_bytes()),
            Err(ForwardedError::EmptyMember { index: 1 })
        );
    }

    #[test]
    fn a_traefik_list_with_an_empty_member_is_refused() {
        let header = format!(
            "{},,{}",
            traefik_sanitized(&sandbox_leaf()),
            traefik_sanitized(&sandbox_issuer())
        );
        assert_eq!(
            forwarded_chain(header.as_bytes()),
            Err(ForwardedError::EmptyMember { index: 1 })
        );
    }

    #[test]
    fn an_empty_xfcc_element_is_refused() {
        let element = format!("By={PROXY};Hash=00");
        for (header, index) in [
            (format!(",{element}"), 0),
            (format!("{element},"), 1),
            (format!("{element},,{element}"), 1),
        ] {
            assert_eq!(
                parse_xfcc(header.as_bytes()),
                Err(ForwardedError::EmptyElement { element: index }),
                "{header}"
            );
        }
    }

    #[test]
    fn an_unquoted_value_holding_a_separator_character_is_refused() {
        assert_eq!(
            parse_xfcc(b"By=a=b"),
            Err(ForwardedError::MustBeQuoted {
                element: 0,
                offset: 4,
                found: '='
            })
        );
        assert_eq!(
            parse_xfcc(b"URI=a b"),
            Err(ForwardedError::MustBeQuoted {
                element: 0,
                offset: 5,
                found: ' '
            })
        );
        assert_eq!(
            parse_xfcc(b"By=a;;Hash=b"),
            Err(ForwardedError::NotAPair {
                element: 0,
                offset: 5
            })
        );
    }

    #[test]
    fn byte_sequence_parameters_are_refused() {
        let header = format!("{};a=1", sf(&sandbox_leaf()));
        assert_eq!(
            rfc9440_certificate(header.as_bytes()),
            Err(ForwardedError::Parameters { index: 0 })
        );
    }

    #[test]
    fn more_certificates_than_the_budget_are_refused() {
        let leaf = sandbox_leaf();
        let copies = vec![leaf.as_slice(); MAX_FORWARDED_CERTIFICATES + 1];
        let refused = Err(ForwardedError::TooManyCertificates {
            count: MAX_FORWARDED_CERTIFICATES + 1,
            max: MAX_FORWARDED_CERTIFICATES,
        });
        assert_eq!(forwarded_chain(traefik(&copies).as_bytes()), refused);
        let list: Vec<String> = copies.iter().map(|der| sf(der)).collect();
        assert_eq!(rfc9440_chain(list.join(",").as_bytes()), refused);
        // Cert= and a Chain= of sixteen others: seventeen in all.
        let mut others = vec![sandbox_issuer(); MAX_FORWARDED_CERTIFICATES - 1];
        others.push(qwac_issuer());
        let chain_pem: String = others.iter().map(|der| pem(der)).collect();
        let xfcc = format!(
            "By={PROXY};Cert=\"{}\";Chain=\"{}\"",
            envoy_url_encoded(&pem(&leaf)),
            envoy_url_encoded(&chain_pem)
        );
        assert_eq!(xfcc_chain(xfcc.as_bytes(), SET), refused);
        // The budget itself is accepted.
        let at_budget = traefik(&copies[1..]);
        assert_eq!(
            forwarded_chain(at_budget.as_bytes()).map(|chain| chain.len()),
            Ok(MAX_FORWARDED_CERTIFICATES)
        );
    }
}
