//! The path a route is chosen on, and the path the upstream receives: one value, so the two can
//! never disagree (docs/design.md section 5, "Routes match the normalised path").
//!
//! [`normalise`] is a pure function of the request target's path. It applies the RFC 3986
//! section 6.2.2 normalisations that every receiver agrees on, and refuses every path whose
//! meaning depends on the receiver's decoder:
//!
//! - RFC 3986 section 6.2.2.2, percent-encoding normalisation: "URIs should be normalized by
//!   decoding any percent-encoded octet that corresponds to an unreserved character"
//!   (`ALPHA / DIGIT / "-" / "." / "_" / "~"`); the remaining percent-encodings keep their
//!   octet and are written with uppercase hexadecimal digits (section 6.2.2.1). Octets that may
//!   not appear raw in a path segment (section 3.3, `pchar`), non-ASCII ones included, are
//!   percent-encoded once: the upstream never sees a raw non-ASCII byte, whose meaning would
//!   depend on the charset its parser assumes (ISO-8859-1 turns `é` into `Ã©`).
//! - RFC 3986 section 6.2.2.3, path segment normalisation: dot segments removed as in section
//!   5.2.4, after decoding, so `%2e%2e` is `..`. Repeated slashes are merged (an empty segment
//!   means nothing to a route, and `//host` at the start reads as an authority to some URL
//!   parsers). A dot segment that would climb above the root is refused, not clamped: a
//!   receiver that does not clamp resolves it differently.
//!
//! Refused ([`PathRefusal`]), because decoders disagree on them: an encoded `/` or `\`, a raw
//! `\` (a separator on Windows receivers), a `;` path parameter raw or encoded (stripped by
//! servlet containers before routing, kept by others), a double encoding (`%25` followed by two
//! hex digits: a second decoding makes a new percent-encoding), control characters, invalid
//! percent-encoding, octets that are not UTF-8 once decoded (overlong forms such as `%C0%AE`
//! for `.`), characters that Unicode compatibility normalisation (NFKC) turns into a
//! separator, and segments made only of dots and spaces other than `.` and `..` (Windows
//! receivers strip trailing dots and spaces, so `..%20` is `..` there).

use std::fmt;

/// A path in normal form: starts with `/`, printable ASCII only, every octet outside
/// `pchar` percent-encoded with uppercase hex, no dot segments, no empty segments (a single
/// trailing slash is kept). What the route is chosen on, and exactly what the upstream gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalisedPath(String);

impl NormalisedPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NormalisedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a path is refused: each variant names the problem. A refused path is never forwarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    /// The target is not an absolute path (`*`, an authority, an empty path).
    #[error("the request target is not an absolute path")]
    NotAbsolute,
    /// `%` not followed by two hexadecimal digits.
    #[error("invalid percent-encoding at byte {at} of the path")]
    InvalidPercentEncoding { at: usize },
    /// `%2F` or `%5C`: a separator to some receivers, data to others.
    #[error("the path contains an encoded `/` or `\\`")]
    EncodedSeparator,
    /// A raw `\`: a separator to Windows receivers.
    #[error("the path contains a backslash")]
    Backslash,
    /// `;` raw or as `%3B`: servlet containers strip path parameters before routing.
    #[error("the path contains a `;` path parameter")]
    PathParameter,
    /// `%25` followed by two hex digits: a second decoding makes a new percent-encoding.
    #[error("the path is percent-encoded twice (`%25` followed by hex digits)")]
    DoubleEncoding,
    /// An octet `0x00`-`0x1F` or `0x7F`, raw or percent-encoded.
    #[error("the path contains a control character")]
    ControlCharacter,
    /// A `..` segment with nothing left to remove.
    #[error("a `..` segment climbs above the root")]
    AboveRoot,
    /// A segment of dots and spaces only, other than `.` and `..`.
    #[error("a segment of dots and spaces only")]
    DotLikeSegment,
    /// The decoded octets are not UTF-8 (for example the overlong `%C0%AE` for `.`).
    #[error("the decoded path is not UTF-8")]
    InvalidUtf8,
    /// A `#` in the request target: a fragment is never sent in a request (RFC 9110 section
    /// 7.1). A parser drops it before the path is decided on, while a proxy in front may
    /// forward the whole target (`/v1/accounts#/../../v1/payments`) to the bank's API.
    #[error("the request target contains a `#` fragment")]
    Fragment,
    /// A character that NFKC normalisation turns into a separator or `%`.
    #[error("the path contains U+{:04X}, which Unicode normalisation turns into a separator", *.0 as u32)]
    CompatibilitySeparator(char),
}

impl PathRefusal {
    /// A short code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            PathRefusal::NotAbsolute => "not_absolute",
            PathRefusal::InvalidPercentEncoding { .. } => "invalid_percent_encoding",
            PathRefusal::EncodedSeparator => "encoded_separator",
            PathRefusal::Backslash => "backslash",
            PathRefusal::PathParameter => "path_parameter",
            PathRefusal::DoubleEncoding => "double_encoding",
            PathRefusal::ControlCharacter => "control_character",
            PathRefusal::AboveRoot => "above_root",
            PathRefusal::DotLikeSegment => "dot_like_segment",
            PathRefusal::InvalidUtf8 => "invalid_utf8",
            PathRefusal::CompatibilitySeparator(_) => "compatibility_separator",
            PathRefusal::Fragment => "fragment",
        }
    }
}

/// Characters whose Unicode compatibility decomposition (UAX #15, NFKC) contains `/`, `\`,
/// `.`, `%`, `;`, `?` or `#`: a receiver that normalises Unicode before routing would see a
/// separator, a dot segment or a new percent-encoding the gateway did not.
const COMPATIBILITY_SEPARATORS: [char; 20] = [
    '\u{037E}', // GREEK QUESTION MARK → ;
    '\u{2024}', // ONE DOT LEADER → .
    '\u{2025}', // TWO DOT LEADER → ..
    '\u{2026}', // HORIZONTAL ELLIPSIS → ...
    '\u{2100}', // ACCOUNT OF → a/c
    '\u{2101}', // ADDRESSED TO THE SUBJECT → a/s
    '\u{2105}', // CARE OF → c/o
    '\u{2106}', // CADA UNA → c/u
    '\u{FE52}', // SMALL FULL STOP → .
    '\u{FE54}', // SMALL SEMICOLON → ;
    '\u{FE56}', // SMALL QUESTION MARK → ?
    '\u{FE5F}', // SMALL NUMBER SIGN → #
    '\u{FE68}', // SMALL REVERSE SOLIDUS → \
    '\u{FE6A}', // SMALL PERCENT SIGN → %
    '\u{FF03}', // FULLWIDTH NUMBER SIGN → #
    '\u{FF05}', // FULLWIDTH PERCENT SIGN → %
    '\u{FF0E}', // FULLWIDTH FULL STOP → .
    '\u{FF0F}', // FULLWIDTH SOLIDUS → /
    '\u{FF1B}', // FULLWIDTH SEMICOLON → ;
    '\u{FF3C}', // FULLWIDTH REVERSE SOLIDUS → \
];

/// One octet of the path after percent-decoding of unreserved characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Octet {
    /// Written as itself: an unreserved character (decoded or not), a sub-delim, `:`, `@`, or
    /// the separator `/`.
    Plain(u8),
    /// Written percent-encoded, uppercase hex.
    Encoded(u8),
}

impl Octet {
    fn value(self) -> u8 {
        match self {
            Octet::Plain(b) | Octet::Encoded(b) => b,
        }
    }
}

/// RFC 3986 section 2.3: `unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"`.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 section 3.3: `pchar = unreserved / pct-encoded / sub-delims / ":" / "@"`, with
/// `sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="` (`;` is
/// refused before this is asked).
fn is_plain_pchar(b: u8) -> bool {
    is_unreserved(b)
        || matches!(
            b,
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b'=' | b':' | b'@'
        )
}

fn is_control(b: u8) -> bool {
    b < 0x20 || b == 0x7F
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Normalises the path of a request target (without its query), or says why it is refused.
pub fn normalise(path: &str) -> Result<NormalisedPath, PathRefusal> {
    let octets = decode(path.as_bytes())?;
    check_double_encoding(&octets)?;
    check_characters(&octets)?;
    let (segments, trailing_slash) = remove_dot_segments(&octets)?;
    Ok(serialise(&segments, trailing_slash))
}

/// Percent-decoding of unreserved characters, refusing separators, parameters and control
/// characters in either form.
fn decode(bytes: &[u8]) -> Result<Vec<Octet>, PathRefusal> {
    if bytes.first() != Some(&b'/') {
        return Err(PathRefusal::NotAbsolute);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex_value);
            let lo = bytes.get(i + 2).copied().and_then(hex_value);
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(PathRefusal::InvalidPercentEncoding { at: i });
            };
            let d = (hi << 4) | lo;
            out.push(match d {
                b'/' | b'\\' => return Err(PathRefusal::EncodedSeparator),
                b';' => return Err(PathRefusal::PathParameter),
                d if is_control(d) => return Err(PathRefusal::ControlCharacter),
                d if is_unreserved(d) => Octet::Plain(d),
                d => Octet::Encoded(d),
            });
            i += 3;
        } else {
            out.push(match b {
                b'\\' => return Err(PathRefusal::Backslash),
                b';' => return Err(PathRefusal::PathParameter),
                b if is_control(b) => return Err(PathRefusal::ControlCharacter),
                b'/' => Octet::Plain(b'/'),
                b if is_plain_pchar(b) => Octet::Plain(b),
                b => Octet::Encoded(b),
            });
            i += 1;
        }
    }
    Ok(out)
}

/// `%25` followed by two hex digits (in any form: `%25%32%65` decodes to `%252e`).
fn check_double_encoding(octets: &[Octet]) -> Result<(), PathRefusal> {
    for w in octets.windows(3) {
        if w[0] == Octet::Encoded(b'%')
            && hex_value(w[1].value()).is_some()
            && hex_value(w[2].value()).is_some()
        {
            return Err(PathRefusal::DoubleEncoding);
        }
    }
    Ok(())
}

/// The fully decoded path is UTF-8 and has no compatibility separator.
fn check_characters(octets: &[Octet]) -> Result<(), PathRefusal> {
    let decoded: Vec<u8> = octets.iter().map(|o| o.value()).collect();
    let text = std::str::from_utf8(&decoded).map_err(|_| PathRefusal::InvalidUtf8)?;
    match text.chars().find(|c| COMPATIBILITY_SEPARATORS.contains(c)) {
        Some(c) => Err(PathRefusal::CompatibilitySeparator(c)),
        None => Ok(()),
    }
}

/// RFC 3986 section 5.2.4 on segments, with empty segments merged and a climb above the root
/// refused. Returns the segments and whether the path ends with a slash.
fn remove_dot_segments(octets: &[Octet]) -> Result<(Vec<&[Octet]>, bool), PathRefusal> {
    // `decode` guarantees the leading `/`.
    let parts: Vec<&[Octet]> = octets[1..].split(|o| *o == Octet::Plain(b'/')).collect();
    let mut out: Vec<&[Octet]> = Vec::new();
    let mut trailing_slash = false;
    for segment in parts {
        // "If the input buffer ends with a dot segment, the output ends with a slash".
        trailing_slash = true;
        let dots = segment.iter().filter(|o| **o == Octet::Plain(b'.')).count();
        let only_dots = dots == segment.len();
        if segment.is_empty() || (only_dots && dots == 1) {
            continue;
        }
        if only_dots && dots == 2 {
            if out.pop().is_none() {
                return Err(PathRefusal::AboveRoot);
            }
            continue;
        }
        let dots_and_spaces = segment
            .iter()
            .all(|o| matches!(o, Octet::Plain(b'.') | Octet::Encoded(b' ')));
        if dots > 0 && dots_and_spaces {
            return Err(PathRefusal::DotLikeSegment);
        }
        trailing_slash = false;
        out.push(segment);
    }
    Ok((out, trailing_slash))
}

fn serialise(segments: &[&[Octet]], trailing_slash: bool) -> NormalisedPath {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::new();
    for segment in segments {
        s.push('/');
        for o in segment.iter() {
            match *o {
                Octet::Plain(b) => s.push(char::from(b)),
                Octet::Encoded(b) => {
                    s.push('%');
                    s.push(char::from(HEX[usize::from(b >> 4)]));
                    s.push(char::from(HEX[usize::from(b & 0xF)]));
                }
            }
        }
    }
    if s.is_empty() || trailing_slash {
        s.push('/');
    }
    NormalisedPath(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(path: &str) -> String {
        normalise(path)
            .unwrap_or_else(|e| panic!("{path} refused: {e}"))
            .as_str()
            .to_owned()
    }

    fn refused(path: &str) -> PathRefusal {
        match normalise(path) {
            Ok(p) => panic!("{path} was accepted as {p}"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_path_in_normal_form_is_unchanged() {
        for p in [
            "/",
            "/v1/accounts",
            "/v1/accounts/",
            "/v1/accounts/123/balances",
            "/v1/accounts/a-b_c.d~e",
            "/v1/x/!$&'()*+,=:@",
            "/v1/accounts/%3F%23%25zz",
            "/v1/accounts/caf%C3%A9",
            "/v1/accounts/.well",
            "/v1/accounts/a..b",
            "/v1/accounts/...x",
        ] {
            assert_eq!(ok(p), p);
        }
    }

    #[test]
    fn unreserved_characters_are_decoded_and_other_encodings_uppercased() {
        assert_eq!(ok("/v1/accounts/%7Euser"), "/v1/accounts/~user");
        assert_eq!(ok("/v1/%61%63counts/%41%2d%5F"), "/v1/accounts/A-_");
        assert_eq!(ok("/v1/accounts/caf%c3%a9"), "/v1/accounts/caf%C3%A9");
        assert_eq!(ok("/v1/accounts/a%3fb%40c"), "/v1/accounts/a%3Fb%40c");
        assert_eq!(ok("/v1/accounts/a%20b"), "/v1/accounts/a%20b");
    }

    #[test]
    fn non_ascii_and_other_octets_outside_pchar_are_encoded_once() {
        assert_eq!(ok("/v1/accounts/café"), "/v1/accounts/caf%C3%A9");
        assert_eq!(
            ok("/v1/a\"b<c>{d}|^`[e]"),
            "/v1/a%22b%3Cc%3E%7Bd%7D%7C%5E%60%5Be%5D"
        );
        // Already encoded stays encoded once: normalising twice changes nothing.
        let once = ok("/v1/accounts/café/%e2%82%ac");
        assert_eq!(once, "/v1/accounts/caf%C3%A9/%E2%82%AC");
        assert_eq!(ok(&once), once);
    }

    #[test]
    fn dot_segments_are_removed_after_decoding() {
        assert_eq!(ok("/v1/accounts/../payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/%2e%2e/payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/%2E%2E/payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/.%2e/payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/%2E./payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/./../payments"), "/v1/payments");
        assert_eq!(ok("/v1/accounts/%2e/123"), "/v1/accounts/123");
        assert_eq!(ok("/v1/./accounts/."), "/v1/accounts/");
        assert_eq!(ok("/v1/accounts/123/.."), "/v1/accounts/");
        assert_eq!(ok("/v1/accounts/.."), "/v1/");
        assert_eq!(ok("/."), "/");
        assert_eq!(ok("/v1/.."), "/");
    }

    #[test]
    fn repeated_slashes_are_merged() {
        assert_eq!(ok("/v1//accounts/./123"), "/v1/accounts/123");
        assert_eq!(ok("//v1/accounts"), "/v1/accounts");
        assert_eq!(ok("///evil.example/v1"), "/evil.example/v1");
        assert_eq!(ok("/v1/accounts//"), "/v1/accounts/");
        assert_eq!(ok("//"), "/");
    }

    #[test]
    fn a_climb_above_the_root_is_refused() {
        for p in [
            "/..",
            "/../v1/accounts",
            "/v1/../../x",
            "/%2e%2e/v1",
            "/v1/accounts/../../..",
        ] {
            assert_eq!(refused(p), PathRefusal::AboveRoot, "{p}");
        }
    }

    #[test]
    fn encoded_separators_and_backslashes_are_refused() {
        for p in [
            "/v1/accounts%2f..%2fpayments",
            "/v1/accounts%2F..%2Fpayments",
            "/v1/accounts/..%5cpayments",
            "/v1/accounts/..%5Cpayments",
            "/%2F/v1",
        ] {
            assert_eq!(refused(p), PathRefusal::EncodedSeparator, "{p}");
        }
        assert_eq!(refused("/v1/accounts/..\\payments"), PathRefusal::Backslash);
    }

    #[test]
    fn path_parameters_are_refused() {
        for p in [
            "/v1/accounts;x=1",
            "/v1/accounts/..;/payments",
            "/v1/a%3Bb",
            "/v1/a%3bb",
        ] {
            assert_eq!(refused(p), PathRefusal::PathParameter, "{p}");
        }
    }

    #[test]
    fn double_encoding_is_refused() {
        for p in [
            "/v1/accounts/%252e%252e/payments",
            "/v1/accounts%252fpayments",
            "/v1/%25%32%65",
            "/v1/%25%32e",
            "/v1/%2541",
        ] {
            assert_eq!(refused(p), PathRefusal::DoubleEncoding, "{p}");
        }
        // A percent sign that a second decoding would not turn into anything is data.
        assert_eq!(ok("/v1/100%25"), "/v1/100%25");
        assert_eq!(ok("/v1/%25zz"), "/v1/%25zz");
    }

    #[test]
    fn control_characters_are_refused_raw_or_encoded() {
        for p in [
            "/v1/a%00b",
            "/v1/a%0d%0aHost:x",
            "/v1/a%1F",
            "/v1/a%7f",
            "/v1/a\u{0}b",
            "/v1/a\tb",
            "/v1/a\u{7f}",
            "/v1/..%00/x",
        ] {
            assert_eq!(refused(p), PathRefusal::ControlCharacter, "{p:?}");
        }
    }

    #[test]
    fn invalid_percent_encoding_is_refused() {
        assert_eq!(
            refused("/v1/%zz"),
            PathRefusal::InvalidPercentEncoding { at: 4 }
        );
        for p in [
            "/v1/%4",
            "/v1/%",
            "/v1/%u002e%u002e",
            "/v1/%g0",
            "/v1/%%32%65",
        ] {
            assert!(
                matches!(refused(p), PathRefusal::InvalidPercentEncoding { .. }),
                "{p}"
            );
        }
    }

    #[test]
    fn only_absolute_paths_are_accepted() {
        for p in ["", "*", "v1/accounts", "%2F", "localhost:443"] {
            assert!(
                matches!(
                    refused(p),
                    PathRefusal::NotAbsolute | PathRefusal::EncodedSeparator
                ),
                "{p}"
            );
        }
    }

    #[test]
    fn overlong_and_invalid_utf8_is_refused() {
        for p in ["/v1/%C0%AE%C0%AE/x", "/v1/%C0%AF", "/v1/%FF", "/v1/%C3"] {
            assert_eq!(refused(p), PathRefusal::InvalidUtf8, "{p}");
        }
    }

    #[test]
    fn characters_that_unicode_normalisation_makes_separators_are_refused() {
        for (p, c) in [
            ("/v1/accounts/%EF%BC%8E%EF%BC%8E/payments", '\u{FF0E}'),
            ("/v1/accounts%EF%BC%8Fpayments", '\u{FF0F}'),
            ("/v1/accounts/\u{2025}/payments", '\u{2025}'),
            ("/v1/a\u{FF3C}b", '\u{FF3C}'),
            ("/v1/\u{2100}", '\u{2100}'),
            ("/v1/a\u{FF05}2e", '\u{FF05}'),
        ] {
            assert_eq!(refused(p), PathRefusal::CompatibilitySeparator(c), "{p}");
        }
    }

    #[test]
    fn segments_of_dots_and_spaces_are_refused() {
        for p in [
            "/v1/accounts/..%20/payments",
            "/v1/.%20/x",
            "/v1/...",
            "/v1/. .",
        ] {
            assert_eq!(refused(p), PathRefusal::DotLikeSegment, "{p}");
        }
        // Spaces alone, and dots with other characters, are data.
        assert_eq!(ok("/v1/%20"), "/v1/%20");
        assert_eq!(ok("/v1/a.."), "/v1/a..");
    }

    #[test]
    fn every_refusal_has_a_distinct_code() {
        let all = [
            PathRefusal::NotAbsolute,
            PathRefusal::InvalidPercentEncoding { at: 0 },
            PathRefusal::EncodedSeparator,
            PathRefusal::Backslash,
            PathRefusal::PathParameter,
            PathRefusal::DoubleEncoding,
            PathRefusal::ControlCharacter,
            PathRefusal::AboveRoot,
            PathRefusal::DotLikeSegment,
            PathRefusal::InvalidUtf8,
            PathRefusal::CompatibilitySeparator('\u{FF0F}'),
        ];
        let codes: std::collections::BTreeSet<&str> = all.iter().map(PathRefusal::code).collect();
        assert_eq!(codes.len(), all.len());
    }
}

/// Properties over generated paths (proptest): the pieces below exercise every rule, in every
/// spelling, and arbitrary strings fill the gaps.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    const PIECES: &[&str] = &[
        "v1", "accounts", "a b", "..", ".", "%2e", "%2E%2e", ".%2e", "%2f", "%5C", "\\", ";",
        "%3b", "%25", "%2541", "%41", "%7E", "%00", "%7f", "\u{ff0e}", "\u{ff0f}", "\u{e9}",
        "%C3%A9", "%C0%AE", " .", "", ".. ", "?", "#", "%",
    ];

    fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::collection::vec(prop::sample::select(PIECES), 0..8)
                .prop_map(|segments| format!("/{}", segments.join("/"))),
            "/\\PC{0,40}",
        ]
    }

    /// What a receiver that percent-decodes the whole path sees, split at `/`.
    fn decoded_segments(path: &str) -> Vec<String> {
        percent_encoding::percent_decode_str(path)
            .decode_utf8_lossy()
            .split('/')
            .map(str::to_owned)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn normalising_twice_changes_nothing(p in path()) {
            if let Ok(n) = normalise(&p) {
                let again = normalise(n.as_str()).map(|m| m.as_str().to_owned());
                prop_assert_eq!(again, Ok(n.as_str().to_owned()), "from {:?}", p);
            }
        }

        #[test]
        fn a_normalised_path_never_climbs_and_decodes_to_the_same_segments(p in path()) {
            if let Ok(n) = normalise(&p) {
                let n = n.as_str();
                prop_assert!(n.starts_with('/'), "{:?} from {:?}", n, p);
                let decoded = decoded_segments(n);
                prop_assert_eq!(
                    n.split('/').count(),
                    decoded.len(),
                    "a decoding receiver sees other segments in {:?} (from {:?})", n, p
                );
                for s in &decoded {
                    prop_assert!(
                        s != "." && s != "..",
                        "a dot segment in {:?} (from {:?})", n, p
                    );
                }
            }
        }
    }
}
