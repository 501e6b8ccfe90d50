//! The XML Schema datatypes a trusted list uses (`xsd:dateTime`, `xsd:base64Binary`,
//! `xsd:integer`), read leniently where that is safe, and text positions for error messages.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// The four characters XML counts as white space (XML 1.0 production `S`).
pub(super) fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// At most 64 characters of `s`, for quoting hostile input in an error message.
pub(super) fn excerpt(s: &str) -> String {
    const MAX_CHARS: usize = 64;
    let mut out: String = s.chars().take(MAX_CHARS).collect();
    if s.chars().nth(MAX_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// 1-based line and column of the end of `prefix` (the column counts characters, not bytes).
pub(super) fn line_col(prefix: &[u8]) -> (u32, u32) {
    let line_start = prefix
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let lines = prefix.iter().filter(|&&b| b == b'\n').count();
    // Count UTF-8 lead bytes only, so a multi-byte character is one column.
    let cols = prefix[line_start..]
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count();
    (saturating_u32(lines + 1), saturating_u32(cols + 1))
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Why a text value is not of its XML Schema type (the text, shortened, is in the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ValueError {
    #[error("empty Base64 content")]
    EmptyBase64,
    #[error("not Base64: {0}")]
    Base64(base64::DecodeError),
    #[error("`{0}` is not a non-negative integer")]
    NotUnsigned(String),
    #[error("`{0}` does not fit in 64 bits")]
    TooLarge(String),
    #[error("`{0}` is not an xsd:dateTime (expected YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm])")]
    NotDateTime(String),
}

/// Standard alphabet; padding optional (some lists drop it), trailing bits strict.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// `xsd:base64Binary`: white space anywhere (trusted lists wrap certificates at 64 or 76
/// columns, or indent them) is dropped before decoding. Empty content is an error.
pub(super) fn base64(text: &str) -> Result<Vec<u8>, ValueError> {
    let compact: Vec<u8> = text
        .bytes()
        .filter(|&b| !is_xml_space(char::from(b)))
        .collect();
    if compact.is_empty() {
        return Err(ValueError::EmptyBase64);
    }
    BASE64.decode(&compact).map_err(ValueError::Base64)
}

/// `xsd:nonNegativeInteger` into a `u64` (a leading `+` is allowed, as in XML Schema).
pub(super) fn unsigned(text: &str) -> Result<u64, ValueError> {
    let t = text.trim_matches(is_xml_space);
    let digits = t.strip_prefix('+').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotUnsigned(excerpt(t)));
    }
    digits
        .parse::<u64>()
        .map_err(|_| ValueError::TooLarge(excerpt(t)))
}

/// `xsd:dateTime`, returned in UTC.
///
/// TS 119 612 clause 5.1.3 wants `YYYY-MM-DDThh:mm:ssZ` (UTC, no fraction); lists in the wild
/// also carry fractions of a second and numeric offsets, which XML Schema allows, so this reads
/// `YYYY-MM-DDThh:mm:ss[.f+][Z|(+|-)hh:mm]`. Without a zone designator the time is taken as
/// UTC, the only zone clause 5.1.3 permits. `24:00:00` (XML Schema's end of day) is the next
/// day's midnight. Years are four digits (0000–9999); anything else is an error, never a
/// panic.
pub(super) fn date_time(text: &str) -> Result<OffsetDateTime, ValueError> {
    let t = text.trim_matches(is_xml_space);
    parse_date_time(t).ok_or_else(|| ValueError::NotDateTime(excerpt(t)))
}

/// The lexical form `YYYY-MM-DDThh:mm:ss`, then the fraction of a second (`fraction`) and
/// the zone (`zone`), nothing after; then the value, `24:00:00` as the next day's midnight.
fn parse_date_time(t: &str) -> Option<OffsetDateTime> {
    let mut c = Cursor { b: t.as_bytes() };
    let year = c.digits(4)?;
    c.expect(b'-')?;
    let month = c.digits(2)?;
    c.expect(b'-')?;
    let day = c.digits(2)?;
    c.expect(b'T')?;
    let hour = c.digits(2)?;
    c.expect(b':')?;
    let minute = c.digits(2)?;
    c.expect(b':')?;
    let second = c.digits(2)?;
    let (nanos, fraction_is_zero) = fraction(&mut c)?;
    let offset = zone(&mut c)?;
    if !c.b.is_empty() {
        return None;
    }

    let year = i32::try_from(year).ok()?;
    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    let mut date = Date::from_calendar_date(year, month, u8::try_from(day).ok()?).ok()?;
    let time = if hour == 24 {
        // End of day: only 24:00:00 exactly, which is the next day's 00:00:00.
        if minute != 0 || second != 0 || !fraction_is_zero {
            return None;
        }
        date = date.next_day()?;
        Time::MIDNIGHT
    } else {
        Time::from_hms_nano(
            u8::try_from(hour).ok()?,
            u8::try_from(minute).ok()?,
            u8::try_from(second).ok()?,
            nanos,
        )
        .ok()?
    };
    // `checked_to_offset`: near year 0 or 9999 an offset can push the instant out of range.
    PrimitiveDateTime::new(date, time)
        .assume_offset(offset)
        .checked_to_offset(UtcOffset::UTC)
}

/// The optional fraction of a second, `.` and one or more digits: as nanoseconds (further
/// digits dropped, truncation), and whether it is zero (which `24:00:00` requires).
fn fraction(c: &mut Cursor<'_>) -> Option<(u32, bool)> {
    let mut nanos: u32 = 0;
    let mut fraction_is_zero = true;
    if c.eat(b'.') {
        let frac = c.take_while(|b| b.is_ascii_digit());
        if frac.is_empty() {
            return None;
        }
        // Keep nanosecond precision; further digits are dropped (truncation).
        for (i, &d) in frac.iter().enumerate() {
            let d = u32::from(d - b'0');
            if d != 0 {
                fraction_is_zero = false;
            }
            if i < 9 {
                nanos = nanos * 10 + d;
            }
        }
        for _ in frac.len()..9 {
            nanos *= 10;
        }
    }
    Some((nanos, fraction_is_zero))
}

/// The optional zone designator: none or `Z` is UTC; `(+|-)hh:mm` an offset within ±14:00,
/// as XML Schema allows.
fn zone(c: &mut Cursor<'_>) -> Option<UtcOffset> {
    Some(match c.next() {
        None => UtcOffset::UTC,
        Some(b'Z') => UtcOffset::UTC,
        Some(sign @ (b'+' | b'-')) => {
            let oh = c.digits(2)?;
            c.expect(b':')?;
            let om = c.digits(2)?;
            // XML Schema: offsets lie within ±14:00.
            if oh > 14 || om > 59 || (oh == 14 && om != 0) {
                return None;
            }
            let (oh, om) = (i8::try_from(oh).ok()?, i8::try_from(om).ok()?);
            if sign == b'-' {
                UtcOffset::from_hms(-oh, -om, 0).ok()?
            } else {
                UtcOffset::from_hms(oh, om, 0).ok()?
            }
        }
        Some(_) => return None,
    })
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn next(&mut self) -> Option<u8> {
        let (&first, rest) = self.b.split_first()?;
        self.b = rest;
        Some(first)
    }

    fn eat(&mut self, want: u8) -> bool {
        if self.b.first() == Some(&want) {
            self.b = &self.b[1..];
            true
        } else {
            false
        }
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        self.eat(want).then_some(())
    }

    /// Exactly `n` ASCII digits.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let head = self.b.get(..n)?;
        if !head.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.b = &self.b[n..];
        Some(
            head.iter()
                .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0')),
        )
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> &'a [u8] {
        let n = self.b.iter().take_while(|&&b| keep(b)).count();
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn date_times_in_the_form_ts_119_612_prescribes_parse_as_utc() {
        assert_eq!(
            date_time("2016-06-30T22:00:00Z"),
            Ok(datetime!(2016-06-30 22:00:00 UTC))
        );
        assert_eq!(
            date_time("\n  2016-06-30T22:00:00Z \t"),
            Ok(datetime!(2016-06-30 22:00:00 UTC))
        );
    }

    #[test]
    fn date_times_with_fractions_and_offsets_are_normalised_to_utc() {
        assert_eq!(
            date_time("2016-06-30T22:00:00.5Z"),
            Ok(datetime!(2016-06-30 22:00:00.5 UTC))
        );
        assert_eq!(
            date_time("2016-06-30T22:00:00.123456789123Z"),
            Ok(datetime!(2016-06-30 22:00:00.123456789 UTC))
        );
        assert_eq!(
            date_time("2016-07-01T00:00:00+02:00"),
            Ok(datetime!(2016-06-30 22:00:00 UTC))
        );
        assert_eq!(
            date_time("2016-06-30T12:30:00-09:30"),
            Ok(datetime!(2016-06-30 22:00:00 UTC))
        );
        assert_eq!(
            date_time("2016-06-30T22:00:00"),
            Ok(datetime!(2016-06-30 22:00:00 UTC)),
            "no zone designator is read as UTC"
        );
        assert_eq!(
            date_time("2016-06-30T24:00:00Z"),
            Ok(datetime!(2016-07-01 00:00:00 UTC))
        );
    }

    #[test]
    fn malformed_date_times_are_errors_not_panics() {
        for bad in [
            "",
            "2016",
            "2016-06-30",
            "2016-06-30 22:00:00Z",
            "2016-6-30T22:00:00Z",
            "2016-06-31T22:00:00Z",
            "2016-13-01T22:00:00Z",
            "2016-06-30T25:00:00Z",
            "2016-06-30T24:00:01Z",
            "2016-06-30T24:00:00.1Z",
            "2016-06-30T22:60:00Z",
            "2016-06-30T22:00:61Z",
            "2016-06-30T22:00:00.Z",
            "2016-06-30T22:00:00+15:00",
            "2016-06-30T22:00:00+0200",
            "2016-06-30T22:00:00ZZ",
            "2016-06-30T22:00:00z",
            "-2016-06-30T22:00:00Z",
            "12016-06-30T22:00:00Z",
            "9999-12-31T24:00:00Z",
            "9999-12-31T23:59:59-14:00",
            "２０１６-06-30T22:00:00Z",
        ] {
            assert!(date_time(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn base64_ignores_line_breaks_and_indentation_and_optional_padding() {
        assert_eq!(base64("AAEC\n  AwQ=\r\n"), Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(base64("AAECAwQ"), Ok(vec![0, 1, 2, 3, 4]));
        assert!(base64("  \n ").is_err());
        assert!(base64("AAEC*wQ=").is_err());
    }

    #[test]
    fn unsigned_integers_allow_surrounding_space_and_a_plus_sign() {
        assert_eq!(unsigned(" 77\n"), Ok(77));
        assert_eq!(unsigned("+5"), Ok(5));
        assert!(unsigned("-5").is_err());
        assert!(unsigned("7 7").is_err());
        assert!(unsigned("99999999999999999999999").is_err());
        assert!(unsigned("").is_err());
    }

    #[test]
    fn line_col_counts_lines_and_characters() {
        assert_eq!(line_col(b""), (1, 1));
        assert_eq!(line_col(b"ab\ncd"), (2, 3));
        assert_eq!(line_col("é\nčx".as_bytes()), (2, 3));
    }

    #[test]
    fn excerpt_shortens_long_text() {
        assert_eq!(excerpt("short"), "short");
        let long = "x".repeat(100);
        assert_eq!(excerpt(&long).chars().count(), 65);
    }
}
