//! Register configuration: which files to load, in which format, with which reference
//! normalisation and NCA id mapping. The main configuration embeds it as `registers`:
//!
//! ```toml
//! [registers]
//! normalise = ["case", "whitespace", "leading-zeros"]
//!
//! [[registers.files]]
//! path = "registers/sandbox/XX.json"
//! format = "native"
//!
//! [[registers.files]]
//! path = "/var/lib/psp-gateway/eba.json"
//! format = "eba"
//! normalise = ["case", "whitespace", "leading-zeros", "dashes"]
//! nca_map = { "LV-FCMC" = "LV_LV" }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::RegisterFormat;
use super::RegisterLoadError;
use super::{DEFAULT_RULES, NormaliseRule};
use super::{parse_eba_code, parse_nca_id};

/// The `registers` section of the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterConfig {
    /// The register files, loaded in order into one snapshot. An NCA id may be defined by one
    /// file only.
    #[serde(default)]
    pub files: Vec<RegisterFileConfig>,
    /// Reference normalisation for files that do not set their own. Default: `case`,
    /// `whitespace`, `leading-zeros`.
    #[serde(default = "default_normalise")]
    pub normalise: Vec<NormaliseRule>,
    /// How often `serve` fetches the files that have a `url` (default daily, minus up to
    /// 10 % jitter; EBA regenerates the file nightly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval_secs: Option<u64>,
    /// Time limit of one download (default 300 s: the ZIP is about 19 MB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_timeout_secs: Option<u64>,
    /// Where `serve` keeps every register content that was in force, for `check --at` and
    /// the endpoint's `at` (relative to the configuration file). No history when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_dir: Option<PathBuf>,
    /// How long a content that is no longer in force is kept (default 400 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_retention_days: Option<u64>,
    /// The UK FCA register API, consulted on demand for `PSDGB-FCA-<FRN>` PSPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fca: Option<FcaSettings>,
}

/// `[registers.fca]`: the UK FCA Financial Services Register API (docs/registers.md §10).
/// The key is never written in the configuration: it is read from `key_file` or from the
/// environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcaSettings {
    /// Default `https://register.fca.org.uk/services/V0.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The account's e-mail (`x-auth-email`); default: `PSP_GATEWAY_FCA_EMAIL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// A file holding the API key (`x-auth-key`), relative to the configuration file;
    /// default: `PSP_GATEWAY_FCA_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// How long an answer is used without asking again (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// How old an answer may be and still stand in, marked stale, while the API cannot be
    /// reached (default 86400; at least `ttl_secs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stale_secs: Option<u64>,
    /// Requests per 10 seconds (default 50, the API's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_10s: Option<u32>,
}

/// Default `history_retention_days`: a year and a month.
pub(super) const DEFAULT_HISTORY_RETENTION_DAYS: u64 = 400;

/// Default `refresh_interval_secs`: a day.
pub(super) const DEFAULT_REGISTER_REFRESH_SECS: u64 = 24 * 3600;
/// Default `fetch_timeout_secs`.
pub(super) const DEFAULT_REGISTER_FETCH_TIMEOUT_SECS: u64 = 300;

/// One register file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterFileConfig {
    /// The file; a relative path is taken from the base directory passed to the loader (the
    /// directory of the configuration file).
    pub path: PathBuf,
    pub format: RegisterFormat,
    /// For `format = "eba"` only: certificate NCA id (`FI-FINFSA`) → EBA authority code
    /// (`FI_FIN-FSA`), overriding or extending the built-in table
    /// ([`crate::register::DEFAULT_EBA_AUTHORITIES`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nca_map: BTreeMap<String, String>,
    /// Reference normalisation for this file; default: the section's `normalise`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalise: Option<Vec<NormaliseRule>>,
    /// Add this file's registers to those of the same NCA id from earlier files instead of
    /// refusing the second definition: a credit-institutions file next to the EBA payment
    /// institutions register of the same authorities. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge: bool,
    /// For `format = "eba"` only: the metadata endpoint EBA publishes
    /// (`https://euclid.eba.europa.eu/register/api/filemetadata`). `register fetch` and
    /// `serve` download the ZIP it names into `path`, verified, replacing the old file only
    /// when the new one loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The register is "too old" for `/readyz` when its file was last replaced longer ago
    /// than this. Default: 48 for a file with a `url`, none otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_hours: Option<u64>,
}

impl Default for RegisterFileConfig {
    fn default() -> Self {
        RegisterFileConfig {
            path: PathBuf::new(),
            format: RegisterFormat::Native,
            nca_map: BTreeMap::new(),
            normalise: None,
            merge: false,
            url: None,
            max_age_hours: None,
        }
    }
}

/// Default `max_age_hours` of a fetched register: two daily publications missed.
pub(super) const DEFAULT_FETCHED_MAX_AGE_HOURS: u64 = 48;

impl RegisterFileConfig {
    /// The age budget of this file, if any.
    pub fn max_age(&self) -> Option<std::time::Duration> {
        self.max_age_hours
            .or(self.url.as_ref().map(|_| DEFAULT_FETCHED_MAX_AGE_HOURS))
            .map(|h| std::time::Duration::from_secs(h.saturating_mul(3600)))
    }
}

fn default_normalise() -> Vec<NormaliseRule> {
    DEFAULT_RULES.to_vec()
}

impl Default for RegisterConfig {
    fn default() -> Self {
        RegisterConfig {
            files: Vec::new(),
            normalise: default_normalise(),
            refresh_interval_secs: None,
            fetch_timeout_secs: None,
            history_dir: None,
            history_retention_days: None,
            fca: None,
        }
    }
}

impl RegisterConfig {
    /// The sandbox registers shipped in `registers/sandbox/` (paths relative to the
    /// repository root).
    pub fn sandbox() -> Self {
        let file = |name: &str| RegisterFileConfig {
            path: PathBuf::from("registers/sandbox").join(name),
            format: RegisterFormat::Native,
            ..RegisterFileConfig::default()
        };
        RegisterConfig {
            files: vec![
                file("XX.json"),
                file("XY.json"),
                file("GB.json"),
                file("XX-OBHD.json"),
            ],
            ..RegisterConfig::default()
        }
    }

    /// Checks what serde cannot: `nca_map` only on EBA files, and each of its entries an NCA
    /// id (`CC-NCA`) mapped to an EBA authority code of the same country (`CC_CODE`).
    pub fn validate(&self) -> Result<(), RegisterLoadError> {
        for (i, file) in self.files.iter().enumerate() {
            let at = || format!("registers.files[{i}] ({})", file.path.display());
            if file.format == RegisterFormat::Native && !file.nca_map.is_empty() {
                return Err(RegisterLoadError::Config(format!(
                    "{}: nca_map applies to format = \"eba\" only",
                    at()
                )));
            }
            if let Some(url) = &file.url {
                if file.format != RegisterFormat::Eba {
                    return Err(RegisterLoadError::Config(format!(
                        "{}: url applies to format = \"eba\" only (the EBA metadata endpoint)",
                        at()
                    )));
                }
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("https://") || lower.starts_with("http://")) {
                    return Err(RegisterLoadError::Config(format!(
                        "{}: url `{url}` is not an http(s) URL",
                        at()
                    )));
                }
            }
            if self.history_retention_days == Some(0) {
                return Err(RegisterLoadError::Config(
                    "history_retention_days must be positive".to_owned(),
                ));
            }
            if file.max_age_hours == Some(0) {
                return Err(RegisterLoadError::Config(format!(
                    "{}: max_age_hours must be positive",
                    at()
                )));
            }
            for (nca_id, code) in &file.nca_map {
                let (nca_country, _) = parse_nca_id(nca_id).ok_or_else(|| {
                    RegisterLoadError::Config(format!(
                        "{}: nca_map key `{nca_id}` is not an NCA id of the form CC-NCA",
                        at()
                    ))
                })?;
                let (code_country, _) = parse_eba_code(code).ok_or_else(|| {
                    RegisterLoadError::Config(format!(
                        "{}: nca_map value `{code}` is not an EBA authority code of the form CC_CODE",
                        at()
                    ))
                })?;
                if nca_country != code_country {
                    return Err(RegisterLoadError::Config(format!(
                        "{}: nca_map maps `{nca_id}` to `{code}`, an authority of another country",
                        at()
                    )));
                }
            }
        }
        Ok(())
    }

    /// How often fetched files are fetched again.
    pub fn refresh_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.refresh_interval_secs
                .unwrap_or(DEFAULT_REGISTER_REFRESH_SECS),
        )
    }

    /// The time limit of one download.
    pub fn fetch_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.fetch_timeout_secs
                .unwrap_or(DEFAULT_REGISTER_FETCH_TIMEOUT_SECS),
        )
    }

    /// The files fetched from a URL.
    pub fn fetched_files(&self) -> impl Iterator<Item = &RegisterFileConfig> {
        self.files.iter().filter(|f| f.url.is_some())
    }

    /// The normalisation rules that apply to a file.
    pub fn rules_for<'a>(&'a self, file: &'a RegisterFileConfig) -> &'a [NormaliseRule] {
        file.normalise.as_deref().unwrap_or(&self.normalise)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        registers: RegisterConfig,
    }

    #[test]
    fn the_toml_shape_of_the_issue_parses() {
        let text = r#"
            [registers]
            normalise = ["case", "whitespace"]

            [[registers.files]]
            path = "registers/sandbox/XX.json"
            format = "native"

            [[registers.files]]
            path = "eba.json"
            format = "eba"
            nca_map = { "LV-FCMC" = "LV_LV" }
            normalise = ["case", "whitespace", "leading-zeros", "dashes"]
        "#;
        let outer: Outer = toml::from_str(text).expect("valid config");
        let cfg = outer.registers;
        assert_eq!(cfg.files.len(), 2);
        assert_eq!(cfg.files[1].format, RegisterFormat::Eba);
        assert_eq!(cfg.files[1].nca_map["LV-FCMC"], "LV_LV");
        assert_eq!(cfg.rules_for(&cfg.files[0]).len(), 2);
        assert_eq!(cfg.rules_for(&cfg.files[1]).len(), 4);
        cfg.validate().expect("consistent");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let text = r#"
            [[registers.files]]
            path = "x.json"
            format = "native"
            colour = "blue"
        "#;
        let err = toml::from_str::<Outer>(text)
            .err()
            .expect("unknown key must fail");
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn an_nca_map_on_a_native_file_or_across_countries_is_refused() {
        let mut cfg = RegisterConfig::sandbox();
        cfg.files[0]
            .nca_map
            .insert("XX-TEST".into(), "XX_TEST".into());
        assert!(cfg.validate().is_err());

        let mut cfg = RegisterConfig::default();
        cfg.files.push(RegisterFileConfig {
            path: "eba.json".into(),
            format: RegisterFormat::Eba,
            nca_map: [("FI-FINFSA".to_owned(), "SE_FINA".to_owned())].into(),
            ..RegisterFileConfig::default()
        });
        let err = cfg.validate().expect_err("country mismatch");
        assert!(err.to_string().contains("another country"), "{err}");
    }
}
