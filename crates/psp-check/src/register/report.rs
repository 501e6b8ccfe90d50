//! Load errors and load reports.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::RegisterFormat;
use crate::country::CountryCode;

/// Why a register snapshot could not be built. Every variant names the file; parse errors name
/// the line and column too. A failed load never replaces the snapshot in use.
#[derive(Debug, thiserror::Error)]
pub enum RegisterLoadError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Bad JSON or a value of the wrong type or shape, at a position in the file.
    #[error("{}: line {line}, column {column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line of the error, from 1.
        line: usize,
        /// The column of the error, from 1.
        column: usize,
        /// What is wrong, without the position.
        message: String,
    },
    /// Well-formed JSON whose content breaks a rule of the format.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The rule broken and where.
        message: String,
    },
    /// Two registers (or a register and an alias) claim the same NCA id.
    #[error("NCA id {nca_id} is defined twice: in {} and in {}", first.display(), second.display())]
    DuplicateNca {
        /// The NCA id defined twice.
        nca_id: String,
        /// The file that defined it first.
        first: PathBuf,
        /// The file that defined it again.
        second: PathBuf,
    },
    /// The register configuration is wrong; the message says how.
    #[error("register configuration: {0}")]
    Config(String),
}

impl RegisterLoadError {
    /// A serde_json error in `path`, with its position split out of the message.
    pub fn from_json(path: &Path, err: serde_json::Error) -> Self {
        let (line, column) = (err.line(), err.column());
        let full = err.to_string();
        let suffix = format!(" at line {line} column {column}");
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        RegisterLoadError::Parse {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    }

    /// An `Invalid` error in `path` with this message.
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        RegisterLoadError::Invalid {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// What a successful load read: per file, the registers it defined and, for EBA files, the
/// counts of what was kept, skipped and not understood.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// One report per file read, in load order.
    pub files: Vec<FileLoadReport>,
}

/// What one register file defined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileLoadReport {
    /// The file.
    pub path: PathBuf,
    /// The file's format.
    pub format: RegisterFormat,
    /// The registers the file defined.
    pub registers: Vec<RegisterSummary>,
    /// Entities whose normalised reference equalled another's in the same register; their
    /// category entries were merged into one entity.
    pub merged_references: u64,
    /// For EBA files, the counts of what was kept, skipped and not understood.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eba: Option<EbaReport>,
}

/// The size of one register a file defined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegisterSummary {
    /// The register's NCA id.
    pub nca_id: String,
    /// The register's country.
    pub country: CountryCode,
    /// How many entities the register holds.
    pub entities: usize,
    /// How many category entries those entities hold in all.
    pub category_entries: usize,
    /// How many passport-in (inbound) entries the register publishes.
    pub passport_in: usize,
    /// How many entities list one category twice with different statuses (after references
    /// were merged by normalisation): for them the most restrictive status decides.
    pub contradicting: usize,
}

/// Bounded count of distinct unknown codes kept by name in an [`EbaReport`]; past it, further
/// new codes are added to one `…` bucket. The EBA data dictionary has 14 service codes and 9
/// entity types, so 64 leaves room for a format change while a hostile file cannot grow the
/// report without bound.
pub const MAX_DISTINCT_CODES: usize = 64;

/// The bucket that collects codes past [`MAX_DISTINCT_CODES`].
pub const OTHER_CODES: &str = "…";

/// Counts from reading one EBA export. Unknown codes never stop a load: they are counted here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EbaReport {
    /// Entity records seen (objects with an `EntityType`).
    pub records: u64,
    /// Records per `EntityType`, as written.
    pub by_entity_type: BTreeMap<String, u64>,
    /// Institutions kept as register entries.
    pub kept: u64,
    /// Of the kept, those whose `ENT_AUT` history ends in a withdrawal (even length), or that
    /// have none: status `Unauthorised`.
    pub withdrawn: u64,
    /// Of the withdrawn, those with no `ENT_AUT` at all.
    pub missing_authorisation_dates: u64,
    /// `PSD_EXC` and `PSD_ENL`: not authorisations, skipped.
    pub skipped_not_authorisations: u64,
    /// `PSD_AG`: agents, skipped (they provide their principal's services).
    pub skipped_agents: u64,
    /// `PSD_BR`: branches, skipped (the principal's passport-out covers the host country).
    pub skipped_branches: u64,
    /// Institutions skipped for want of a reference (`ENT_NAT_REF_COD` or an `EntityCode`
    /// with a `!`-separated tail).
    pub missing_reference: u64,
    /// Institutions skipped for want of a legal name (`ENT_NAM`).
    pub missing_name: u64,
    /// Institutions skipped for want of a usable `CA_OwnerID`.
    pub missing_authority: u64,
    /// Objects in the document that are not entity records (the disclaimer, a new block).
    pub other_objects: u64,
    /// Records whose `EntityType` is not one the reader knows, per type.
    pub unknown_entity_types: BTreeMap<String, u64>,
    /// Service codes the reader does not know, per code.
    pub unknown_service_codes: BTreeMap<String, u64>,
    /// `Services` keys that are not two-letter country codes.
    pub unknown_countries: BTreeMap<String, u64>,
    /// EBA authority codes with no NCA id in the table; their registers were loaded under an
    /// NCA id derived from the code (`LV_LV` → `LV-LV`), shown here as code → derived id.
    pub unmapped_authorities: BTreeMap<String, String>,
}

impl EbaReport {
    /// Counts `code` in `map`, keeping at most `MAX_DISTINCT_CODES` names (the rest under `…`).
    pub fn count(map: &mut BTreeMap<String, u64>, code: &str) {
        if let Some(n) = map.get_mut(code) {
            *n += 1;
        } else if map.len() < MAX_DISTINCT_CODES {
            map.insert(code.to_owned(), 1);
        } else {
            *map.entry(OTHER_CODES.to_owned()).or_insert(0) += 1;
        }
    }
}

fn write_counts(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    map: &BTreeMap<String, u64>,
) -> fmt::Result {
    if map.is_empty() {
        return Ok(());
    }
    write!(f, "\n  {label}:")?;
    for (code, n) in map {
        write!(f, " {code}={n}")?;
    }
    Ok(())
}

impl fmt::Display for EbaReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} records; kept {} institutions ({} withdrawn or without dates); skipped {} agents, {} branches, {} not authorisations; {} without reference, {} without name, {} without authority; {} other objects",
            self.records,
            self.kept,
            self.withdrawn,
            self.skipped_agents,
            self.skipped_branches,
            self.skipped_not_authorisations,
            self.missing_reference,
            self.missing_name,
            self.missing_authority,
            self.other_objects,
        )?;
        write_counts(f, "entity types", &self.by_entity_type)?;
        write_counts(f, "unknown entity types", &self.unknown_entity_types)?;
        write_counts(f, "unknown service codes", &self.unknown_service_codes)?;
        write_counts(f, "unknown countries", &self.unknown_countries)?;
        if !self.unmapped_authorities.is_empty() {
            write!(
                f,
                "\n  unmapped authorities (loaded under a derived NCA id):"
            )?;
            for (code, id) in &self.unmapped_authorities {
                write!(f, " {code}->{id}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, file) in self.files.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(
                f,
                "{} ({}): {} register(s)",
                file.path.display(),
                file.format.as_str(),
                file.registers.len()
            )?;
            for r in &file.registers {
                write!(
                    f,
                    "\n  {} [{}]: {} entities, {} category entries, {} passport-in",
                    r.nca_id, r.country, r.entities, r.category_entries, r.passport_in
                )?;
                if r.contradicting > 0 {
                    write!(
                        f,
                        "\n  warning: {} entities list one category with different statuses; the most restrictive decides",
                        r.contradicting
                    )?;
                }
            }
            if file.merged_references > 0 {
                write!(
                    f,
                    "\n  {} references merged after normalisation",
                    file.merged_references
                )?;
            }
            if let Some(eba) = &file.eba {
                write!(f, "\n  {eba}")?;
            }
        }
        Ok(())
    }
}
