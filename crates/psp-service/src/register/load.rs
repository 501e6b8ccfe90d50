//! Loading registers from the files a configuration names into a complete new
//! [`RegisterSnapshot`]: native files and EBA exports, merged and indexed.

use std::path::Path;

use super::config::RegisterConfig;
use super::native_file::read_native_file;
use psp_check::register::{
    FileLoadReport, LoadReport, LoadedFile, Normalisation, Register, RegisterFormat,
    RegisterLoadError, RegisterSnapshot, RegisterSummary,
};

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
        let (built, merged) = native.build(&path, normalisation)?;
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
                        .find(|r: &&mut Register| r.nca_id() == register.nca_id())
                })
                .flatten();
            match existing {
                Some(r) => r
                    .merge(register)
                    .map_err(|e| RegisterLoadError::invalid(&path, e.to_string()))?,
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
    let snapshot = RegisterSnapshot::from_registers(registers)?.with_files(loaded);
    Ok((snapshot, report))
}

pub fn summarise(r: &Register) -> RegisterSummary {
    RegisterSummary {
        nca_id: r.nca_id().to_owned(),
        country: r.country(),
        entities: r.entities().len(),
        category_entries: r.entities().iter().map(|e| e.entries.len()).sum(),
        passport_in: r.passport_in_len(),
        contradicting: r
            .entities()
            .iter()
            .filter(|e| {
                e.entries.iter().any(|a| {
                    e.entries
                        .iter()
                        .any(|b| a.category == b.category && a.status != b.status)
                })
            })
            .count(),
    }
}
