//! Country codes and the jurisdictions built from them.

use std::fmt;
use std::str::FromStr;

/// A two-letter upper-case country code (ISO 3166-1 alpha-2 shape, plus the sandbox's
/// fictitious `XX` and `XY`). Parsing upper-cases, so `xx` and `XX` are the same code.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    pub fn as_str(&self) -> &str {
        // Both bytes are ASCII upper-case letters by construction.
        std::str::from_utf8(&self.0).expect("country code bytes are ASCII")
    }

    pub const fn from_static(code: &'static str) -> Self {
        let b = code.as_bytes();
        assert!(b.len() == 2 && b[0].is_ascii_uppercase() && b[1].is_ascii_uppercase());
        CountryCode([b[0], b[1]])
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a two-letter country code")]
pub struct InvalidCountryCode(pub String);

impl FromStr for CountryCode {
    type Err = InvalidCountryCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        if b.len() == 2 && b.iter().all(u8::is_ascii_alphabetic) {
            Ok(CountryCode([
                b[0].to_ascii_uppercase(),
                b[1].to_ascii_uppercase(),
            ]))
        } else {
            Err(InvalidCountryCode(s.to_owned()))
        }
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountryCode({})", self.as_str())
    }
}

impl serde::Serialize for CountryCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for CountryCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The 30 states of the European Economic Area: the 27 EU member states plus Iceland,
/// Liechtenstein and Norway. Greece is `GR` (ISO 3166), not the EU's `EL`: the contract's
/// changelog records that the service moved to ISO codes.
pub const EEA: [CountryCode; 30] = [
    CountryCode::from_static("AT"),
    CountryCode::from_static("BE"),
    CountryCode::from_static("BG"),
    CountryCode::from_static("HR"),
    CountryCode::from_static("CY"),
    CountryCode::from_static("CZ"),
    CountryCode::from_static("DK"),
    CountryCode::from_static("EE"),
    CountryCode::from_static("FI"),
    CountryCode::from_static("FR"),
    CountryCode::from_static("DE"),
    CountryCode::from_static("GR"),
    CountryCode::from_static("HU"),
    CountryCode::from_static("IE"),
    CountryCode::from_static("IT"),
    CountryCode::from_static("LV"),
    CountryCode::from_static("LT"),
    CountryCode::from_static("LU"),
    CountryCode::from_static("MT"),
    CountryCode::from_static("NL"),
    CountryCode::from_static("PL"),
    CountryCode::from_static("PT"),
    CountryCode::from_static("RO"),
    CountryCode::from_static("SK"),
    CountryCode::from_static("SI"),
    CountryCode::from_static("ES"),
    CountryCode::from_static("SE"),
    CountryCode::from_static("IS"),
    CountryCode::from_static("LI"),
    CountryCode::from_static("NO"),
];

/// The 27 EU member states (the EEA without Iceland, Liechtenstein and Norway).
pub fn eu() -> impl Iterator<Item = CountryCode> {
    EEA.into_iter()
        .filter(|c| !matches!(c.as_str(), "IS" | "LI" | "NO"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_upper_cases_and_rejects_other_shapes() {
        assert_eq!("xx".parse::<CountryCode>().unwrap().as_str(), "XX");
        assert!("X".parse::<CountryCode>().is_err());
        assert!("X1".parse::<CountryCode>().is_err());
        assert!("XXX".parse::<CountryCode>().is_err());
    }

    #[test]
    fn eea_has_thirty_distinct_states_and_eu_twenty_seven() {
        let mut v = EEA.to_vec();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), 30);
        assert_eq!(eu().count(), 27);
    }
}
