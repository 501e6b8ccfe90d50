//! Reference normalisation: each rule, and the defaults.

use psp_service::register::{DEFAULT_RULES, Normalisation, NormaliseRule};

fn with(rules: &[NormaliseRule]) -> Normalisation {
    Normalisation::from_rules(rules)
}

#[test]
fn a_finnish_business_id_with_a_dash_meets_the_plain_form_only_when_dashes_are_removed() {
    let defaults = with(&DEFAULT_RULES);
    assert_ne!(
        defaults.normalise("1234567-8"),
        defaults.normalise("12345678")
    );

    let mut rules = DEFAULT_RULES.to_vec();
    rules.push(NormaliseRule::Dashes);
    let dashes = with(&rules);
    assert_eq!(dashes.normalise("1234567-8"), "12345678");
    assert_eq!(dashes.normalise("1234567-8"), dashes.normalise("12345678"));
    // Unicode hyphens pasted from documents count as dashes too.
    assert_eq!(dashes.normalise("1234567\u{2010}8"), "12345678");
}

#[test]
fn leading_zeros_are_removed_so_000001_meets_1() {
    let n = with(&[NormaliseRule::LeadingZeros]);
    assert_eq!(n.normalise("000001"), "1");
    assert_eq!(n.normalise("1"), "1");
    assert_eq!(n.normalise("100"), "100", "only leading zeros go");
    assert_eq!(n.normalise("0C58301"), "C58301");
    assert_eq!(Normalisation::NONE.normalise("000001"), "000001");
}

#[test]
fn case_is_folded_to_upper_case() {
    let n = with(&[NormaliseRule::Case]);
    assert_eq!(n.normalise("c58301"), "C58301");
    assert_eq!(n.normalise("lb000417"), "LB000417");
    assert_ne!(Normalisation::NONE.normalise("c58301"), "C58301");
}

#[test]
fn whitespace_anywhere_is_removed() {
    let n = with(&[NormaliseRule::Whitespace]);
    // Lithuania publishes references with a trailing space.
    assert_eq!(n.normalise("LB000417 "), "LB000417");
    assert_eq!(n.normalise(" 12 34\t56\u{00A0}"), "123456");
}

#[test]
fn the_defaults_are_case_whitespace_and_leading_zeros_without_dashes() {
    let n = with(&DEFAULT_RULES);
    assert_eq!(n.normalise(" lb000417 "), "LB000417");
    assert_eq!(n.normalise(" 000001"), "1");
    assert_eq!(n.normalise("1234567-8"), "1234567-8");
    assert_eq!(
        n.rules(),
        vec![
            NormaliseRule::Whitespace,
            NormaliseRule::Case,
            NormaliseRule::LeadingZeros
        ]
    );
}

#[test]
fn rules_read_from_configuration_in_kebab_case() {
    let rules: Vec<NormaliseRule> =
        serde_json::from_str(r#"["case", "whitespace", "leading-zeros", "dashes"]"#)
            .expect("valid rule names");
    assert_eq!(with(&rules).normalise(" 00-12-a "), "12A");
    assert!(serde_json::from_str::<Vec<NormaliseRule>>(r#"["zeros"]"#).is_err());
}
