//! The PSD2 authorisation number in the subject `organizationIdentifier` (2.5.4.97).
//!
//! ETSI EN 319 412-1 section 5.1.4 defines the semantics identifier form
//! `PSD` + 2-letter ISO 3166-1 country code + `-` + NCA identifier + `-` + identifier, and
//! ETSI TS 119 495 section 5.2.1 uses it for the PSD2 authorisation number
//! (`PSDFI-FINFSA-1234567-8`).
//!
//! Parsing rules (decided here, and the same everywhere the value is read):
//! - Surrounding spaces are trimmed; [`AuthNumber::raw`] keeps the value as written.
//! - `PSD` and the country code are case-sensitive upper case, as both standards write them
//!   (ISO 3166-1 alpha-2 codes are upper case). `psdfi-…` or `PSDfi-…` is not in PSD2 form:
//!   a register key must not depend on how a QTSP happened to type it.
//! - The value is split on the first two hyphens only: the NCA identifier holds none
//!   (TS 119 495: 2-8 letters A-Z, no separator), the reference may (`1234567-8`).
//! - NCA identifier and reference must be non-empty. The 2-8 A-Z shape of the NCA identifier
//!   is not enforced here: the register lookup decides whether an NCA is known, and real
//!   certificates (`PSDGB-OB-…`) are read as written.
//!
//! - Every character must be printable ASCII or an ASCII space (TS 119 495: the identifier
//!   is ASCII). A control character (CR, LF, VT, FF, TAB) or any non-ASCII character (a
//!   no-break space, a look-alike letter) keeps `psd: None`: the register's `whitespace` rule
//!   would strip such characters and match the PSP they hide, while the raw value could not
//!   be written as a header or compared with a deny list (issue 40, docs/attacks).
//!
//! Anything else keeps `psd: None`: the value is still reported, it just yields no register key.
//!
//! One identity per PSP ([`identity_key`]): the deny and allow lists, the per-PSP upstream
//! budget and the decision cache compare auth numbers by it, so that every spelling the
//! register could match (case, whitespace, dashes, leading zeros of the reference) is one PSP.

use crate::country::CountryCode;

/// The subject organizationIdentifier as written, and its PSD2 parts when it has the form
/// `PSD` + country + `-` + NCA + `-` + reference (ETSI TS 119 495 section 5.2.1, using the
/// semantics identifier of EN 319 412-1 section 5.1.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthNumber {
    /// The value as written in the certificate.
    pub raw: String,
    /// The PSD2 parts; `None` when the value is not in PSD2 form (it then yields no register
    /// key).
    pub psd: Option<PsdAuthNumber>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsdAuthNumber {
    /// The home country from the auth number (not the subject `C`).
    pub country: crate::country::CountryCode,
    /// The NCA acronym, for example `FINFSA`, `CNB`, `TEST`.
    pub nca: String,
    /// The NCA's reference; may itself contain hyphens (`1234567-8`).
    pub reference: String,
}

impl PsdAuthNumber {
    /// The NCA id as TS 119 495 writes it in the PSD2 statement: country, hyphen, NCA
    /// (`FI-FINFSA`).
    pub fn nca_id(&self) -> String {
        format!("{}-{}", self.country, self.nca.to_ascii_uppercase())
    }
}

impl AuthNumber {
    /// Reads an organizationIdentifier value. Never fails: a value not in PSD2 form keeps
    /// `psd: None`.
    pub fn parse(raw: &str) -> AuthNumber {
        AuthNumber {
            raw: raw.to_owned(),
            psd: PsdAuthNumber::parse(raw),
        }
    }

    /// The PSD2 parts, when the value has the PSD2 form.
    pub fn psd(&self) -> Option<&PsdAuthNumber> {
        self.psd.as_ref()
    }
}

impl PsdAuthNumber {
    /// The PSD2 parts of `raw`, or `None` when it is not `PSD<CC>-<NCA>-<reference>`.
    pub fn parse(raw: &str) -> Option<PsdAuthNumber> {
        if !raw.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
            return None;
        }
        let rest = raw.trim().strip_prefix("PSD")?;
        let (head, rest) = rest.split_once('-')?;
        let (nca, reference) = rest.split_once('-')?;
        if head.len() != 2 || !head.bytes().all(|b| b.is_ascii_uppercase()) {
            return None;
        }
        if nca.is_empty() || reference.is_empty() {
            return None;
        }
        let country: CountryCode = head.parse().ok()?;
        Some(PsdAuthNumber {
            country,
            nca: nca.to_owned(),
            reference: reference.to_owned(),
        })
    }
}

impl PsdAuthNumber {
    /// The PSP's identity as every register rule would see it: country, the NCA upper-cased,
    /// and the reference without spaces and dashes, upper-cased, without leading zeros. The
    /// broadest of the register's normalisations, so that a deny list cannot be passed by a
    /// spelling the register still matches.
    pub fn identity_key(&self) -> String {
        let reference: String = self
            .reference
            .chars()
            .filter(|c| *c != ' ' && *c != '-')
            .map(|c| c.to_ascii_uppercase())
            .collect();
        let trimmed = reference.trim_start_matches('0');
        let reference = if trimmed.is_empty() { "0" } else { trimmed };
        format!(
            "PSD{}-{}-{reference}",
            self.country,
            self.nca.to_ascii_uppercase()
        )
    }
}

/// The identity key of an auth number as written ([`PsdAuthNumber::identity_key`]), or the
/// value itself, trimmed, when it is not in PSD2 form.
pub fn identity_key(raw: &str) -> String {
    PsdAuthNumber::parse(raw).map_or_else(|| raw.trim().to_owned(), |p| p.identity_key())
}

impl std::fmt::Display for PsdAuthNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PSD{}-{}-{}", self.country, self.nca, self.reference)
    }
}

impl serde::Serialize for PsdAuthNumber {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for PsdAuthNumber {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PsdAuthNumber::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{s}` is not an auth number of the form PSDCC-NCA-reference"
            ))
        })
    }
}

impl std::fmt::Display for AuthNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    /// The fresh-eyes attack of issue 40 (docs/attacks/proxy-and-data.md B2, B3): spellings
    /// the register matches to one PSP are one identity; control and non-ASCII characters are
    /// not in PSD2 form.
    #[test]
    fn every_spelling_the_register_matches_is_one_identity_and_control_characters_are_refused() {
        let key = super::identity_key("PSDXX-TEST-000001");
        for spelling in [
            "PSDXX-TEST-0000000001",
            "PSDXX-test-000001",
            "PSDXX-TEST-000001 ",
            " PSDXX-TEST-1",
            "PSDXX-TEST-000 001",
        ] {
            assert_eq!(super::identity_key(spelling), key, "{spelling:?}");
        }
        for hidden in [
            "PSDXX-TEST-000001\r\n",
            "PSDXX-TEST-000001\u{b}\u{c}",
            "PSDXX-TEST-000\u{a0}001",
            "PSDXX-TEST-00000\u{130}",
            "PSDXX-TEST-000001\t",
        ] {
            assert_eq!(super::PsdAuthNumber::parse(hidden), None, "{hidden:?}");
            assert_ne!(super::identity_key(hidden), key, "{hidden:?}");
        }
    }

    use super::*;

    fn psd(raw: &str) -> Option<(String, String, String)> {
        AuthNumber::parse(raw)
            .psd
            .map(|p| (p.country.to_string(), p.nca, p.reference))
    }

    fn parts(c: &str, n: &str, r: &str) -> Option<(String, String, String)> {
        Some((c.to_owned(), n.to_owned(), r.to_owned()))
    }

    #[test]
    fn the_reference_keeps_hyphens_after_the_first_two() {
        assert_eq!(
            psd("PSDFI-FINFSA-1234567-8"),
            parts("FI", "FINFSA", "1234567-8")
        );
    }

    #[test]
    fn an_obie_style_number_splits_into_country_nca_and_reference() {
        assert_eq!(
            psd("PSDGB-OB-Unknown0015800001HQQrZAAX"),
            parts("GB", "OB", "Unknown0015800001HQQrZAAX")
        );
        assert_eq!(psd("PSDCZ-CNB-63492555"), parts("CZ", "CNB", "63492555"));
        assert_eq!(
            psd("PSDXX-OB-TEST-000001"),
            parts("XX", "OB", "TEST-000001")
        );
    }

    #[test]
    fn the_nca_id_joins_country_and_nca() {
        let n = AuthNumber::parse("PSDFI-FINFSA-1234567-8");
        assert_eq!(
            n.psd().map(PsdAuthNumber::nca_id).as_deref(),
            Some("FI-FINFSA")
        );
    }

    #[test]
    fn a_plain_number_is_kept_without_psd2_parts() {
        let n = AuthNumber::parse("12345987");
        assert_eq!(n.raw, "12345987");
        assert_eq!(n.psd, None);
        assert_eq!(psd("NTRCZ-26439395"), None);
    }

    #[test]
    fn surrounding_spaces_are_trimmed_but_raw_is_kept_and_control_characters_refused() {
        let n = AuthNumber::parse("  PSDDE-BAFIN-104114 ");
        assert_eq!(n.raw, "  PSDDE-BAFIN-104114 ");
        assert_eq!(
            n.psd.map(|p| (p.country.to_string(), p.nca, p.reference)),
            parts("DE", "BAFIN", "104114")
        );
        // A line end is no space: such a value is not in PSD2 form (it hid the PSP it names
        // from the deny list and from the header the bank receives).
        assert_eq!(AuthNumber::parse("PSDDE-BAFIN-104114\n").psd, None);
    }

    #[test]
    fn prefix_and_country_are_case_sensitive() {
        assert_eq!(psd("psdFI-FINFSA-1"), None);
        assert_eq!(psd("PsdFI-FINFSA-1"), None);
        assert_eq!(psd("PSDfi-FINFSA-1"), None);
    }

    #[test]
    fn empty_parts_and_bad_countries_are_not_psd2_form() {
        assert_eq!(psd(""), None);
        assert_eq!(psd("PSD"), None);
        assert_eq!(psd("PSDFI"), None);
        assert_eq!(psd("PSDFI-FINFSA"), None);
        assert_eq!(psd("PSDFI--123"), None);
        assert_eq!(psd("PSDFI-FINFSA-"), None);
        assert_eq!(psd("PSDF-FINFSA-1"), None);
        assert_eq!(psd("PSDFIN-FINFSA-1"), None);
        assert_eq!(psd("PSD1I-FINFSA-1"), None);
        assert_eq!(psd("PSDÉI-FINFSA-1"), None);
        assert_eq!(psd("PSD-FI-FINFSA-1"), None);
    }
}
