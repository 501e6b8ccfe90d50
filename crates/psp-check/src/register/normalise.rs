//! Normalising national references so that the reference in a certificate's auth number and
//! the reference a register publishes meet.
//!
//! Registers and certificates disagree in small ways: Lithuania publishes `LB000417 ` with a
//! trailing space, the sandbox writes `000001` where a register may write `1`, Finland's
//! business ids are written `1234567-8` in certificates and may appear as `12345678`. Each
//! rule below removes one such difference; which rules apply is configuration
//! ([`super::RegisterConfig::normalise`]), and both sides of a lookup go through the same
//! rules of the register being searched.

use serde::{Deserialize, Serialize};

/// One normalisation step, as written in configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NormaliseRule {
    /// Upper-case ASCII letters, so `c58301` meets `C58301`. Only ASCII: authorisation numbers
    /// and national references are ASCII (ETSI TS 119 495), and Unicode upper-casing makes
    /// look-alikes meet (`ı` and `ſ` upper-case to `I` and `S`, so `ıſ0001` would meet
    /// `IS0001`).
    Case,
    /// Remove every whitespace character, leading, trailing and inner.
    Whitespace,
    /// Remove leading `0`s (keeping one character), so `000001` meets `1`.
    LeadingZeros,
    /// Remove hyphens and Unicode dashes, so `1234567-8` meets `12345678`.
    Dashes,
}

/// The default rules: case, whitespace and leading zeros. Dash removal is off by default
/// because a dash can separate parts that mean something (a check digit), and turning it on
/// can make two published references collide.
pub const DEFAULT_RULES: [NormaliseRule; 3] = [
    NormaliseRule::Case,
    NormaliseRule::Whitespace,
    NormaliseRule::LeadingZeros,
];

/// A set of [`NormaliseRule`]s, applied in a fixed order: whitespace, dashes, case, leading
/// zeros (so `" 00-12 "` with all rules on becomes `12`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Normalisation {
    case: bool,
    whitespace: bool,
    leading_zeros: bool,
    dashes: bool,
}

/// Characters the `dashes` rule removes: hyphen-minus and the Unicode hyphens and dashes that
/// copy-and-paste from documents brings in (U+2010 to U+2015, U+2212 minus sign).
fn is_dash(c: char) -> bool {
    matches!(c, '-' | '\u{2010}'..='\u{2015}' | '\u{2212}')
}

impl Normalisation {
    /// No rule: references must match exactly.
    pub const NONE: Normalisation = Normalisation {
        case: false,
        whitespace: false,
        leading_zeros: false,
        dashes: false,
    };

    /// The normalisation that applies the given rules (duplicates are harmless).
    pub fn from_rules(rules: &[NormaliseRule]) -> Self {
        let mut n = Normalisation::NONE;
        for rule in rules {
            match rule {
                NormaliseRule::Case => n.case = true,
                NormaliseRule::Whitespace => n.whitespace = true,
                NormaliseRule::LeadingZeros => n.leading_zeros = true,
                NormaliseRule::Dashes => n.dashes = true,
            }
        }
        n
    }

    /// The rules in effect, in application order.
    pub fn rules(&self) -> Vec<NormaliseRule> {
        let mut out = Vec::new();
        if self.whitespace {
            out.push(NormaliseRule::Whitespace);
        }
        if self.dashes {
            out.push(NormaliseRule::Dashes);
        }
        if self.case {
            out.push(NormaliseRule::Case);
        }
        if self.leading_zeros {
            out.push(NormaliseRule::LeadingZeros);
        }
        out
    }

    /// The lookup key for a reference.
    pub fn normalise(&self, reference: &str) -> String {
        let mut s: String = reference
            .chars()
            .filter(|&c| !(self.whitespace && c.is_whitespace() || self.dashes && is_dash(c)))
            .collect();
        if self.case {
            s.make_ascii_uppercase();
        }
        if self.leading_zeros {
            let trimmed = s.trim_start_matches('0');
            if trimmed.is_empty() && !s.is_empty() {
                s = "0".to_owned();
            } else if trimmed.len() != s.len() {
                s = trimmed.to_owned();
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_in_the_documented_order() {
        let all = Normalisation::from_rules(&[
            NormaliseRule::LeadingZeros,
            NormaliseRule::Case,
            NormaliseRule::Dashes,
            NormaliseRule::Whitespace,
        ]);
        assert_eq!(all.normalise(" 00-12 "), "12");
        assert_eq!(
            all.rules(),
            vec![
                NormaliseRule::Whitespace,
                NormaliseRule::Dashes,
                NormaliseRule::Case,
                NormaliseRule::LeadingZeros
            ]
        );
    }

    #[test]
    fn no_unicode_character_whose_upper_case_is_ascii_meets_an_ascii_reference() {
        let n = Normalisation::from_rules(&DEFAULT_RULES);
        let mut found = 0;
        for c in (0x80..=0x10FFFF).filter_map(char::from_u32) {
            let upper: String = c.to_uppercase().collect();
            if !upper.is_ascii() {
                continue;
            }
            found += 1;
            // The look-alike in a reference, against the ASCII spelling a register publishes.
            let look_alike = format!("PSD{c}0001");
            let ascii = format!("PSD{upper}0001");
            assert_ne!(
                n.normalise(&look_alike),
                n.normalise(&ascii),
                "U+{:04X}",
                c as u32
            );
        }
        // ı (U+0131), ſ (U+017F), K (U+212A) and ﬀ-like ligatures at least.
        assert!(found >= 3, "{found}");
    }

    #[test]
    fn a_reference_of_only_zeros_keeps_one_zero() {
        let n = Normalisation::from_rules(&[NormaliseRule::LeadingZeros]);
        assert_eq!(n.normalise("0000"), "0");
        assert_eq!(n.normalise(""), "");
    }
}
