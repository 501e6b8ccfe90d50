//! The immutable snapshot of every loaded register, how it is loaded, and the holder that
//! swaps a new snapshot in atomically.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use super::config::RegisterConfig;
use super::model::{Register, RegisterFormat};
use super::native::{NativeFile, build_register, read_native_file};
use super::normalise::Normalisation;
use super::report::{FileLoadReport, LoadReport, RegisterLoadError, RegisterSummary};
use crate::country::CountryCode;

/// Every loaded register, immutable, with O(1) lookups: by NCA id (and alias), and by country
/// for host lookups. `generation` counts successful loads into a [`RegisterHolder`].
#[derive(Debug, Default)]
pub struct RegisterSnapshot {
    pub(crate) generation: u64,
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
    pub path: PathBuf,
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

    /// Loads every file of the configuration (relative paths from `base_dir`) into a complete
    /// new snapshot. Nothing is half-loaded: any failure returns the error and no snapshot.
    pub fn load(
        config: &RegisterConfig,
        base_dir: &Path,
    ) -> Result<(RegisterSnapshot, LoadReport), RegisterLoadError> {
        config.validate()?;
        let mut registers = Vec::new();
        let mut report = LoadReport::default();
        let mut loaded = Vec::new();
        for file in &config.files {
            let path = base_dir.join(&file.path);
            let normalisation = Normalisation::from_rules(config.rules_for(file));
            let (native, eba) = match file.format {
                RegisterFormat::Native => (read_native_file(&path)?, None),
                RegisterFormat::Eba => {
                    let (native, eba) = super::eba::read_eba(&path, &file.nca_map, false)?;
                    (native, Some(eba))
                }
            };
            let (built, merged) = build_registers(&path, native, normalisation)?;
            report.files.push(FileLoadReport {
                path: path.clone(),
                format: file.format,
                registers: built.iter().map(summarise).collect(),
                merged_references: merged,
                eba,
            });
            for register in built {
                let existing = file
                    .merge
                    .then(|| {
                        registers
                            .iter_mut()
                            .find(|r: &&mut Register| r.nca_id == register.nca_id)
                    })
                    .flatten();
                match existing {
                    Some(r) => r
                        .merge(register)
                        .map_err(|message| RegisterLoadError::invalid(&path, message))?,
                    None => registers.push(register),
                }
            }
            loaded.push(LoadedFile {
                modified: std::fs::metadata(&path).and_then(|m| m.modified()).ok(),
                path,
                format: file.format,
                url: file.url.clone(),
                max_age: file.max_age(),
            });
        }
        let mut snapshot = RegisterSnapshot::from_registers(registers)?;
        snapshot.files = loaded;
        Ok((snapshot, report))
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

    pub fn generation(&self) -> u64 {
        self.generation
    }

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

/// Builds the registers of one file.
pub(crate) fn build_registers(
    path: &Path,
    native: NativeFile,
    normalisation: Normalisation,
) -> Result<(Vec<Register>, u64), RegisterLoadError> {
    let mut merged = 0;
    let mut out = Vec::with_capacity(native.registers.len());
    for r in native.registers {
        let (register, m) = build_register(path, r, normalisation)?;
        merged += m;
        out.push(register);
    }
    Ok((out, merged))
}

pub(crate) fn summarise(r: &Register) -> RegisterSummary {
    RegisterSummary {
        nca_id: r.nca_id.clone(),
        country: r.country,
        entities: r.entities.len(),
        category_entries: r.entities.iter().map(|e| e.entries.len()).sum(),
        passport_in: r.passport_in_len(),
    }
}

/// Holds the snapshot in use and swaps in a new one atomically (`arc-swap`): readers take an
/// `Arc` and keep a consistent snapshot for as long as they hold it; a reload that fails
/// leaves the snapshot in use untouched.
#[derive(Debug)]
pub struct RegisterHolder {
    current: ArcSwap<RegisterSnapshot>,
    /// Serialises reloads so generations increase one by one.
    reload_lock: Mutex<()>,
}

impl RegisterHolder {
    /// Holds `snapshot` as generation 1.
    pub fn new(snapshot: RegisterSnapshot) -> Self {
        RegisterHolder {
            current: ArcSwap::from_pointee(snapshot.with_generation(1)),
            reload_lock: Mutex::new(()),
        }
    }

    /// Loads the configuration into a new holder.
    pub fn load(
        config: &RegisterConfig,
        base_dir: &Path,
    ) -> Result<(Self, LoadReport), RegisterLoadError> {
        let (snapshot, report) = RegisterSnapshot::load(config, base_dir)?;
        Ok((RegisterHolder::new(snapshot), report))
    }

    /// The snapshot in use.
    pub fn snapshot(&self) -> Arc<RegisterSnapshot> {
        self.current.load_full()
    }

    /// Loads the configuration again. On success the new snapshot (next generation) replaces
    /// the old one; on failure the old one stays in use and the error says which file failed
    /// and where.
    pub fn reload(
        &self,
        config: &RegisterConfig,
        base_dir: &Path,
    ) -> Result<LoadReport, RegisterLoadError> {
        // A poisoned lock only means an earlier reload panicked; the snapshot it guards was
        // never touched by it, so going on is sound.
        let _guard = self
            .reload_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (snapshot, report) = RegisterSnapshot::load(config, base_dir)?;
        let generation = self.current.load().generation + 1;
        self.current
            .store(Arc::new(snapshot.with_generation(generation)));
        Ok(report)
    }

    /// Paths of every file a configuration loads, for file watching.
    pub fn watched_paths(config: &RegisterConfig, base_dir: &Path) -> Vec<PathBuf> {
        config
            .files
            .iter()
            .map(|f| base_dir.join(&f.path))
            .collect()
    }
}
