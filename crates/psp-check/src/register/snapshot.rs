//! The immutable snapshot of every loaded register. Loading it from files is the service's
//! (`psp_service::register::load`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::model::{Register, RegisterFormat};
use super::report::RegisterLoadError;
use crate::country::CountryCode;

/// Every loaded register, immutable, with O(1) lookups: by NCA id (and alias), and by country
/// for host lookups. `generation` counts successful loads (set by whoever swaps snapshots in).
#[derive(Debug, Default)]
pub struct RegisterSnapshot {
    generation: u64,
    registers: Vec<Register>,
    /// Upper-case NCA id or alias → index into `registers`.
    by_nca_id: HashMap<String, usize>,
    /// Country → indexes into `registers`, sorted by NCA id.
    by_country: HashMap<CountryCode, Vec<usize>>,
    /// The files the snapshot was loaded from, with their age budgets.
    files: Vec<LoadedFile>,
}

/// A register file as loaded: when it was last replaced, and how old it may get.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// The file's path.
    pub path: PathBuf,
    /// The file's format.
    pub format: RegisterFormat,
    /// Where it is fetched from, if it is.
    pub url: Option<String>,
    /// The file's modification time: when `register fetch` (or the operator) last replaced it.
    pub modified: Option<SystemTime>,
    /// `max_age_hours`, when it has one.
    pub max_age: Option<Duration>,
}

impl LoadedFile {
    /// How old the file is at `now`.
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        self.modified.and_then(|m| now.duration_since(m).ok())
    }

    /// Why the file is too old at `now`, if it is.
    pub fn staleness(&self, now: SystemTime) -> Option<String> {
        let (max, age) = (self.max_age?, self.age(now)?);
        (age > max).then(|| {
            format!(
                "register file {} is {} h old, over its {} h budget (max_age_hours){}",
                self.path.display(),
                age.as_secs() / 3600,
                max.as_secs() / 3600,
                if self.url.is_some() {
                    "; the last fetches failed or did not run"
                } else {
                    ""
                }
            )
        })
    }
}

impl RegisterSnapshot {
    /// A snapshot with no register: every lookup finds nothing.
    pub fn empty() -> Self {
        RegisterSnapshot::default()
    }

    /// A snapshot of the registers of one native file's bytes (`docs/registers.md`), with
    /// references normalised by the default rules ([`super::DEFAULT_RULES`], as `serve`
    /// does); `path` names the file in errors and as the registers' source.
    pub fn from_native(bytes: &[u8], path: &std::path::Path) -> Result<Self, RegisterLoadError> {
        let normalisation = super::Normalisation::from_rules(&super::DEFAULT_RULES);
        let (registers, _merged) =
            super::native::NativeFile::parse(bytes, path)?.build(path, normalisation)?;
        Self::from_registers(registers)
    }

    /// Builds a snapshot from registers; an NCA id (or alias) defined twice is an error naming
    /// both source files.
    pub fn from_registers(registers: Vec<Register>) -> Result<Self, RegisterLoadError> {
        let mut by_nca_id: HashMap<String, usize> = HashMap::new();
        let mut by_country: HashMap<CountryCode, Vec<usize>> = HashMap::new();
        for (i, register) in registers.iter().enumerate() {
            for id in std::iter::once(&register.nca_id).chain(register.aliases.iter()) {
                if let Some(&j) = by_nca_id.get(id) {
                    return Err(RegisterLoadError::DuplicateNca {
                        nca_id: id.clone(),
                        first: registers[j].source.clone(),
                        second: register.source.clone(),
                    });
                }
                by_nca_id.insert(id.clone(), i);
            }
            by_country.entry(register.country).or_default().push(i);
        }
        for list in by_country.values_mut() {
            list.sort_by(|&a, &b| registers[a].nca_id.cmp(&registers[b].nca_id));
        }
        Ok(RegisterSnapshot {
            generation: 0,
            registers,
            by_nca_id,
            by_country,
            files: Vec::new(),
        })
    }

    /// The same snapshot, recording the files it was loaded from.
    pub fn with_files(mut self, files: Vec<LoadedFile>) -> Self {
        self.files = files;
        self
    }

    /// The files the snapshot was loaded from.
    pub fn files(&self) -> &[LoadedFile] {
        &self.files
    }

    /// Why each file that is over its age budget at `now` is.
    pub fn stale_files(&self, now: SystemTime) -> Vec<String> {
        self.files.iter().filter_map(|f| f.staleness(now)).collect()
    }

    /// The same snapshot with another generation number.
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// How many successful loads came before this snapshot (set when it is swapped in).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every loaded register.
    pub fn registers(&self) -> &[Register] {
        &self.registers
    }

    /// The register known by this NCA id or alias (case-insensitive).
    pub fn register(&self, nca_id: &str) -> Option<&Register> {
        let i = match self.by_nca_id.get(nca_id) {
            Some(&i) => i,
            None => *self.by_nca_id.get(&nca_id.to_ascii_uppercase())?,
        };
        Some(&self.registers[i])
    }

    /// The registers of a country, sorted by NCA id.
    pub fn registers_of(&self, country: CountryCode) -> impl Iterator<Item = &Register> {
        self.by_country
            .get(&country)
            .into_iter()
            .flatten()
            .map(|&i| &self.registers[i])
    }
}
