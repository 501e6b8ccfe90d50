//! The NCA authority codes: certificate NCA ids (ETSI TS 119 495 Annex D, `FI-FINFSA`) and the
//! EBA register's authority codes (`CA_OwnerID`, `FI_FIN-FSA`), the built-in table that maps
//! one to the other ([`DEFAULT_EBA_AUTHORITIES`]), and the parsers of both forms.
//!
//! The configuration validates `nca_map` with these parsers, the native reader checks NCA ids
//! with them, and the EBA reader ([`super::eba`]) maps each entity's authority through
//! [`NcaMap`]. This file imports nothing from the other register files, so all three can
//! depend on it without a loop.

use std::collections::{BTreeMap, HashMap};

use crate::country::CountryCode;

/// One row of the built-in map from certificate NCA ids to EBA authority codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EbaAuthority {
    /// The NCA id as ETSI TS 119 495 (Annex D) writes it in certificates.
    pub nca_id: &'static str,
    /// The EBA register's `CA_OwnerID`.
    pub eba_code: &'static str,
    /// The authority's name.
    pub name: &'static str,
    /// True when the EBA code was seen in public material quoting the live register; false
    /// when it is this project's best reading and must be checked against a live file (a
    /// load reports any code in the file that this table does not map).
    pub verified: bool,
}

const fn row(
    nca_id: &'static str,
    eba_code: &'static str,
    name: &'static str,
    verified: bool,
) -> EbaAuthority {
    EbaAuthority {
        nca_id,
        eba_code,
        name,
        verified,
    }
}

/// Certificate NCA id → EBA authority code, one row per EEA NCA (ETSI TS 119 495 Annex D ids).
///
/// Verified codes come from public material quoting the live register (2026-08: the eufinreg
/// README's authority table, `shared/data/REGISTER-FORMATS.md`, scripts querying the EBA API
/// for `BE_NBB`, EBA entity codes such as `PSD_PI!PT_BP!8709`). Unverified rows follow the
/// pattern of the verified ones (country, underscore, the authority's usual acronym) and say
/// what else the code might be.
pub const DEFAULT_EBA_AUTHORITIES: &[EbaAuthority] = &[
    row(
        "AT-FMA",
        "AT_FMA",
        "Austrian Financial Market Authority",
        true,
    ),
    row("BE-NBB", "BE_NBB", "National Bank of Belgium", true),
    // Unverified: Bulgarian National Bank.
    row("BG-BNB", "BG_BNB", "Bulgarian National Bank", false),
    // Unverified: the Croatian National Bank is HNB in Croatian; the EBA code may be `HR_HNB`.
    row("HR-CNB", "HR_CNB", "Croatian National Bank", false),
    // Unverified: Central Bank of Cyprus.
    row("CY-CBC", "CY_CBC", "Central Bank of Cyprus", false),
    row("CZ-CNB", "CZ_CNB", "Czech National Bank", true),
    row(
        "DK-DFSA",
        "DK_DFSA",
        "Danish Financial Supervisory Authority",
        true,
    ),
    // Unverified: Finantsinspektsioon; the EBA code may be `EE_FSA`.
    row(
        "EE-FI",
        "EE_FI",
        "Estonian Financial Supervision Authority",
        false,
    ),
    row(
        "FI-FINFSA",
        "FI_FIN-FSA",
        "Finnish Financial Supervisory Authority",
        true,
    ),
    row(
        "FR-ACPR",
        "FR_ACPR",
        "Autorité de contrôle prudentiel et de résolution",
        true,
    ),
    row(
        "DE-BAFIN",
        "DE_BAFIN",
        "Federal Financial Supervisory Authority (BaFin)",
        true,
    ),
    // Unverified: Bank of Greece; the EBA may use the EU prefix (`EL_BOG`), which the reader
    // takes as GR anyway.
    row("GR-BOG", "GR_BOG", "Bank of Greece", false),
    // Unverified: the Central Bank of Hungary is the Magyar Nemzeti Bank (MNB).
    row("HU-CBH", "HU_MNB", "Central Bank of Hungary", false),
    // Unverified: the FME merged into the Central Bank of Iceland in 2020; the code may be
    // `IS_CBI` or `IS_SI`.
    row(
        "IS-FME",
        "IS_FME",
        "Financial Supervisory Authority of Iceland",
        false,
    ),
    row("IE-CBI", "IE_CBI", "Central Bank of Ireland", true),
    row("IT-BI", "IT_BI", "Bank of Italy", true),
    // Unverified: Financial Market Authority Liechtenstein.
    row(
        "LI-FMA",
        "LI_FMA",
        "Financial Market Authority Liechtenstein",
        false,
    ),
    // `LV_LV` is seen on Latvian institutions in 2026 (eufinreg); the FCMC merged into
    // Latvijas Banka in 2023, so certificates may carry `LV-FCMC` or a newer id (`LV-LB` is
    // an assumption).
    row("LV-FCMC", "LV_LV", "Latvijas Banka", true),
    row("LV-LB", "LV_LV", "Latvijas Banka", false),
    row("LT-BL", "LT_BL", "Bank of Lithuania", true),
    // Unverified: Commission de Surveillance du Secteur Financier.
    row(
        "LU-CSSF",
        "LU_CSSF",
        "Commission de Surveillance du Secteur Financier",
        false,
    ),
    row(
        "MT-MFSA",
        "MT_MFSA",
        "Malta Financial Services Authority",
        true,
    ),
    row("NL-DNB", "NL_DNB", "De Nederlandsche Bank", true),
    // Unverified: Finanstilsynet; the code may be `NO_FT`.
    row(
        "NO-FSA",
        "NO_FSA",
        "Financial Supervisory Authority of Norway",
        false,
    ),
    row(
        "PL-PFSA",
        "PL_PFSA",
        "Polish Financial Supervision Authority",
        true,
    ),
    row("PT-BP", "PT_BP", "Banco de Portugal", true),
    // Unverified: National Bank of Romania (BNR in Romanian; the code may be `RO_BNR`).
    row("RO-NBR", "RO_NBR", "National Bank of Romania", false),
    // Unverified: National Bank of Slovakia.
    row("SK-NBS", "SK_NBS", "National Bank of Slovakia", false),
    // Unverified: Bank of Slovenia.
    row("SI-BS", "SI_BS", "Bank of Slovenia", false),
    row("ES-BE", "ES_BE", "Banco de España", true),
    row("SE-FINA", "SE_FINA", "Finansinspektionen", true),
];

/// A country code as the EBA file writes it. The contract's changelog records the move from
/// `UK`, `EL`, `SL` to the ISO codes `GB`, `GR`, `SI`; the old forms are read as the new.
pub fn eba_country(code: &str) -> Option<CountryCode> {
    let cc: CountryCode = code.trim().parse().ok()?;
    Some(match cc.as_str() {
        "EL" => CountryCode::from_static("GR"),
        "UK" => CountryCode::from_static("GB"),
        "SL" => CountryCode::from_static("SI"),
        _ => cc,
    })
}

/// Splits an NCA id `CC-NCA` (NCA: ASCII letters and digits).
pub fn parse_nca_id(id: &str) -> Option<(CountryCode, &str)> {
    let (cc, nca) = id.split_once('-')?;
    let country: CountryCode = cc.parse().ok()?;
    (!nca.is_empty() && nca.bytes().all(|b| b.is_ascii_alphanumeric())).then_some((country, nca))
}

/// Splits an EBA authority code `CC_CODE`.
pub fn parse_eba_code(code: &str) -> Option<(CountryCode, &str)> {
    let (cc, rest) = code.split_once('_')?;
    let country = eba_country(cc)?;
    (!rest.is_empty() && !rest.contains(char::is_whitespace)).then_some((country, rest))
}

/// An EBA authority code with its country written as ISO (`EL_BOG` → `GR_BOG`), the form the
/// NCA table and the per-code registers are keyed by.
pub fn canonical_code(code: &str) -> Option<(CountryCode, String)> {
    let (country, rest) = parse_eba_code(code)?;
    Some((country, format!("{country}_{rest}")))
}

/// The NCA id used for an EBA code that no table maps: country, hyphen, the code's letters
/// and digits upper-cased (`LV_LV` → `LV-LV`, `FI_FIN-FSA` → `FI-FINFSA`).
pub fn derived_nca_id(country: CountryCode, rest: &str) -> Option<String> {
    let nca: String = rest
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (!nca.is_empty()).then(|| format!("{country}-{nca}"))
}

/// EBA code → (NCA ids, first canonical; authority name).
pub struct NcaMap {
    /// Canonical EBA authority code → (the NCA ids that map to it, the authority's name).
    pub by_code: HashMap<String, (Vec<String>, String)>,
}

impl NcaMap {
    /// The built-in table with `overrides` (NCA id → EBA code) applied, indexed by canonical code.
    pub fn new(overrides: &BTreeMap<String, String>) -> Self {
        let mut rows: Vec<(String, String, String)> = DEFAULT_EBA_AUTHORITIES
            .iter()
            .map(|a| {
                (
                    a.nca_id.to_owned(),
                    a.eba_code.to_owned(),
                    a.name.to_owned(),
                )
            })
            .collect();
        for (id, code) in overrides {
            let id = id.to_ascii_uppercase();
            match rows.iter_mut().find(|(known, _, _)| *known == id) {
                Some(row) => row.1 = code.clone(),
                None => rows.push((id, code.clone(), code.clone())),
            }
        }
        let mut by_code: HashMap<String, (Vec<String>, String)> = HashMap::new();
        for (id, code, name) in rows {
            let code = canonical_code(&code).map_or(code, |(_, c)| c);
            by_code
                .entry(code)
                .or_insert_with(|| (Vec::new(), name))
                .0
                .push(id);
        }
        NcaMap { by_code }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_eea_state_has_an_nca_in_the_default_table_with_a_code_of_its_country() {
        for state in crate::country::EEA {
            assert!(
                DEFAULT_EBA_AUTHORITIES
                    .iter()
                    .any(|a| a.nca_id.starts_with(state.as_str())),
                "{state} has no row"
            );
        }
        for a in DEFAULT_EBA_AUTHORITIES {
            let (nca_country, _) = parse_nca_id(a.nca_id).expect("table NCA ids are CC-NCA");
            let (code_country, _) = parse_eba_code(a.eba_code).expect("table codes are CC_CODE");
            assert_eq!(nca_country, code_country, "{}", a.nca_id);
        }
    }

    #[test]
    fn unmapped_codes_get_an_nca_id_derived_from_their_letters() {
        let (cc, rest) = parse_eba_code("FI_FIN-FSA").expect("valid");
        assert_eq!(derived_nca_id(cc, rest).as_deref(), Some("FI-FINFSA"));
        let (cc, rest) = parse_eba_code("EL_BOG").expect("valid");
        assert_eq!(derived_nca_id(cc, rest).as_deref(), Some("GR-BOG"));
    }
}
