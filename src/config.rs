//! `gateway.toml`: typed, `deny_unknown_fields`, defaults in one place, validated before any
//! port is bound. `psp-gateway config check` runs exactly this code.
//!
//! Relative paths in the file are resolved against the directory the file is in, so the
//! sandbox configuration works from any working directory.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::country::{self, CountryCode};
use crate::trust::QtspSource;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub sandbox: SandboxConfig,
    #[serde(default)]
    pub checks: ChecksConfig,
    #[serde(default)]
    pub trust: TrustConfig,
    #[serde(default)]
    pub registers: crate::register::RegisterConfig,
    /// The directory relative paths are resolved against (set by [`Config::load`]).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// Sandbox features. Off unless configured; the repository's `gateway.toml` turns it on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    #[serde(default)]
    pub enabled: bool,
}

/// Settings of the check itself, shared by every face (gateway, endpoint, CLI).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksConfig {
    /// Transaction jurisdictions a caller may ask for: country codes, `EEA` or `EU`.
    #[serde(default = "default_valid_jurisdictions")]
    pub valid_jurisdictions: Vec<JurisdictionSet>,
    /// Prefix of the `link` in error objects; the error code is appended.
    #[serde(default = "default_error_link_base")]
    pub error_link_base: String,
}

impl Default for ChecksConfig {
    fn default() -> Self {
        ChecksConfig {
            valid_jurisdictions: default_valid_jurisdictions(),
            error_link_base: default_error_link_base(),
        }
    }
}

fn default_valid_jurisdictions() -> Vec<JurisdictionSet> {
    vec![
        JurisdictionSet::Eea,
        JurisdictionSet::Country(CountryCode::from_static("GB")),
    ]
}

/// The error documentation shipped with the product (`docs/errors.md`), served relative to
/// whatever host serves the docs. Operators who publish the docs elsewhere set their URL.
fn default_error_link_base() -> String {
    "/docs/errors#".to_owned()
}

impl ChecksConfig {
    pub fn valid_jurisdictions(&self) -> BTreeSet<CountryCode> {
        expand(&self.valid_jurisdictions)
    }
}

/// A set of transaction jurisdictions as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JurisdictionSet {
    /// The 30 EEA states.
    Eea,
    /// The 27 EU member states.
    Eu,
    Country(CountryCode),
}

impl<'de> Deserialize<'de> for JurisdictionSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "EEA" => Ok(JurisdictionSet::Eea),
            "EU" => Ok(JurisdictionSet::Eu),
            other => other.parse().map(JurisdictionSet::Country).map_err(|_| {
                serde::de::Error::custom(format!(
                    "`{other}` is not a jurisdiction: expected `EEA`, `EU` or a two-letter country code"
                ))
            }),
        }
    }
}

/// Expands `EEA` and `EU` into their states.
pub fn expand(sets: &[JurisdictionSet]) -> BTreeSet<CountryCode> {
    let mut out = BTreeSet::new();
    for set in sets {
        match set {
            JurisdictionSet::Eea => out.extend(country::EEA),
            JurisdictionSet::Eu => out.extend(country::eu()),
            JurisdictionSet::Country(c) => {
                out.insert(*c);
            }
        }
    }
    out
}

/// The trust list: where approved issuers come from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    #[serde(default)]
    pub sources: Vec<TrustSourceConfig>,
}

/// One trust source: a scheme (eIDAS trusted lists, a UK directory, a hub directory) with the
/// values it reports and the jurisdictions it is approved for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSourceConfig {
    /// A name for logs and `config check` output.
    pub name: String,
    /// The `QTSPSource` value reported for certificates of this source.
    pub qtsp_source: QtspSource,
    /// The `QTSPJurisdiction` value reported: `EEA`, `EU` or a country code.
    pub qtsp_jurisdiction: String,
    /// Transaction jurisdictions the source's issuers are approved for.
    pub valid_for: Vec<JurisdictionSet>,
    /// Whether certificates must carry the QcCompliance statement (EN 319 412-5 4.2.1).
    /// Default: `required` for `EIDAS` and `QTSP`, `optional` for `OBIE` and `OBHD`.
    #[serde(default)]
    pub qc_compliance: Option<QcCompliancePolicy>,
    /// What to do with a certificate that has no QcType statement. Default: `reject` for
    /// `EIDAS` and `QTSP` (EN 319 412-5 4.2.3 reads a missing QcType as an e-signature
    /// certificate), `accept` for `OBIE` and `OBHD` (their legacy certificates have none).
    #[serde(default)]
    pub untyped: Option<UntypedPolicy>,
    /// CA certificates (PEM files), each with the kinds it may issue.
    #[serde(default)]
    pub issuers: Vec<PemIssuerConfig>,
    /// ETSI TS 119 612 trusted-list XML files. Their XML signatures are not verified yet:
    /// a file is trusted as the operator placed it.
    #[serde(default)]
    pub trusted_lists: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QcCompliancePolicy {
    Required,
    Optional,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UntypedPolicy {
    Reject,
    Accept,
}

/// A PEM file of one or more CA certificates approved by a source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PemIssuerConfig {
    pub pem: PathBuf,
    /// Certificate kinds these CAs may issue.
    pub kinds: Vec<CertKind>,
}

/// Kinds of PSD2 certificate an issuer may be approved for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CertKind {
    /// Website authentication (QWAC; QcType web).
    Web,
    /// Electronic seals (QSealC; QcType eseal).
    Seal,
}

impl fmt::Display for CertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CertKind::Web => "website authentication",
            CertKind::Seal => "electronic seals",
        })
    }
}

/// Why a configuration could not be used. Each message names the file, and for syntax and
/// unknown keys the line and column.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// Reads, parses and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Config::from_toml(&text, path, base_dir)
    }

    /// Parses and validates configuration text; `path` is only used in messages.
    pub fn from_toml(text: &str, path: &Path, base_dir: PathBuf) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.base_dir = base_dir;
        config.validate().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        Ok(config)
    }

    /// A configuration with no trust sources and the defaults, for ad-hoc CLI checks.
    pub fn empty() -> Config {
        Config {
            sandbox: SandboxConfig::default(),
            checks: ChecksConfig::default(),
            trust: TrustConfig::default(),
            registers: crate::register::RegisterConfig::default(),
            base_dir: PathBuf::new(),
        }
    }

    /// A path from the file, resolved against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.base_dir.join(p)
        }
    }

    fn validate(&self) -> Result<(), String> {
        self.registers.validate().map_err(|e| e.to_string())?;
        if self.checks.valid_jurisdictions.is_empty() {
            return Err("checks.valid_jurisdictions must name at least one jurisdiction".into());
        }
        let mut names = BTreeSet::new();
        for s in &self.trust.sources {
            if !names.insert(s.name.as_str()) {
                return Err(format!("trust source name `{}` is used twice", s.name));
            }
            if s.valid_for.is_empty() {
                return Err(format!("trust source `{}`: valid_for is empty", s.name));
            }
            if s.issuers.is_empty() && s.trusted_lists.is_empty() {
                return Err(format!(
                    "trust source `{}` names neither issuers nor trusted_lists",
                    s.name
                ));
            }
            if let Some(i) = s.issuers.iter().find(|i| i.kinds.is_empty()) {
                return Err(format!(
                    "trust source `{}`: issuer {} has no kinds (expected `web`, `seal` or both)",
                    s.name,
                    i.pem.display()
                ));
            }
            if !is_reported_jurisdiction(&s.qtsp_jurisdiction) {
                return Err(format!(
                    "trust source `{}`: qtsp_jurisdiction `{}` is not `EEA`, `EU` or an upper-case country code",
                    s.name, s.qtsp_jurisdiction
                ));
            }
        }
        Ok(())
    }
}

fn is_reported_jurisdiction(s: &str) -> bool {
    matches!(s, "EEA" | "EU") || (s.len() == 2 && s.bytes().all(|b| b.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"), PathBuf::new())
    }

    const MINIMAL: &str = r#"
[[trust.sources]]
name = "s"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA", "XX"]
trusted_lists = ["tl.xml"]
"#;

    #[test]
    fn minimal_configuration_takes_the_defaults() {
        let c = parse(MINIMAL).unwrap();
        let j = c.checks.valid_jurisdictions();
        assert_eq!(j.len(), 31, "EEA plus GB");
        assert!(j.contains(&"GB".parse().unwrap()));
        assert_eq!(
            expand(&c.trust.sources[0].valid_for).len(),
            31,
            "EEA plus XX"
        );
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name_and_line() {
        let text = format!("{MINIMAL}colour = \"blue\"\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        assert!(e.contains("line"), "{e}");
        assert!(e.starts_with("test.toml"), "{e}");
    }

    #[test]
    fn unknown_qtsp_source_value_is_rejected() {
        let e = parse(&MINIMAL.replace("\"EIDAS\"", "\"FOO\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("FOO"), "{e}");
    }

    #[test]
    fn a_source_without_issuers_is_rejected() {
        let e = parse(&MINIMAL.replace("trusted_lists = [\"tl.xml\"]", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither issuers nor trusted_lists"), "{e}");
    }

    #[test]
    fn a_bad_jurisdiction_is_named() {
        let e = parse(&MINIMAL.replace("\"XX\"]", "\"Europe\"]"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Europe"), "{e}");
    }
}
