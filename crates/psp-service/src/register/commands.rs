//! The `register import` and `register stats` commands, as functions (the CLI calls them).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::Normalisation;
use super::native_file::{read_native_file, write_native_file};
use super::summarise;
use super::{AuthStatus, Category, Register, RegisterFormat};
use super::{EbaReport, RegisterLoadError, RegisterSummary};
use crate::country::CountryCode;

/// What an import wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    pub input: PathBuf,
    pub output: PathBuf,
    pub registers: Vec<RegisterSummary>,
    pub report: EbaReport,
}

impl fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "imported {} into {}: {} registers, {} institutions",
            self.input.display(),
            self.output.display(),
            self.registers.len(),
            self.registers.iter().map(|r| r.entities).sum::<usize>()
        )?;
        write!(f, "{}", self.report)
    }
}

/// `register import --format eba FILE --out FILE`: converts an EBA export into one native
/// file holding one register per competent authority, using the built-in NCA id table.
/// Progress goes to stderr when `progress` is true (the caller passes
/// `std::io::stderr().is_terminal()`).
pub fn import_eba(
    input: &Path,
    out: &Path,
    progress: bool,
) -> Result<ImportSummary, RegisterLoadError> {
    import_eba_with(input, out, progress, &BTreeMap::new())
}

/// [`import_eba`] with `nca_map` overrides (certificate NCA id → EBA authority code).
pub fn import_eba_with(
    input: &Path,
    out: &Path,
    progress: bool,
    nca_map: &BTreeMap<String, String>,
) -> Result<ImportSummary, RegisterLoadError> {
    let (native, report) = super::eba::read_eba(input, nca_map, progress)?;
    // Build once as the loader will, so a file that would not load is never written.
    let (registers, _) = native.clone().build(input, Normalisation::NONE)?;
    write_native_file(out, &native)?;
    Ok(ImportSummary {
        input: input.to_owned(),
        output: out.to_owned(),
        registers: registers.iter().map(summarise).collect(),
        report,
    })
}

/// Whether a file is a native file (a JSON object) or an EBA export (a JSON array), by its
/// first non-blank byte.
fn sniff_format(path: &Path) -> Result<RegisterFormat, RegisterLoadError> {
    let read_err = |source| RegisterLoadError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(read_err)?;
    let mut buf = [0u8; 4096];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            return Err(RegisterLoadError::invalid(path, "the file is empty"));
        }
        // A UTF-8 byte order mark and whitespace may come first.
        let start = buf[..n].strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&buf[..n]);
        if let Some(&b) = start.iter().find(|b| !b.is_ascii_whitespace()) {
            return match b {
                b'{' => Ok(RegisterFormat::Native),
                b'[' => Ok(RegisterFormat::Eba),
                _ => Err(RegisterLoadError::invalid(
                    path,
                    "neither a native register file (a JSON object) nor an EBA export (a JSON array)",
                )),
            };
        }
    }
}

/// `register stats FILE`: entity counts per country, category entries per category and per
/// status, for a native file or an EBA export (recognised by content).
pub fn stats(path: &Path) -> Result<String, RegisterLoadError> {
    let format = sniff_format(path)?;
    let (native, eba) = match format {
        RegisterFormat::Native => (read_native_file(path)?, None),
        RegisterFormat::Eba => {
            let (native, report) = super::eba::read_eba(path, &BTreeMap::new(), false)?;
            (native, Some(report))
        }
    };
    let (registers, merged) = native.build(path, Normalisation::NONE)?;
    Ok(render_stats(path, format, &registers, merged, eba.as_ref()))
}

fn render_stats(
    path: &Path,
    format: RegisterFormat,
    registers: &[Register],
    merged: u64,
    eba: Option<&EbaReport>,
) -> String {
    let mut by_country: BTreeMap<CountryCode, (usize, usize, usize)> = BTreeMap::new();
    let mut by_category: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_status: BTreeMap<AuthStatus, usize> = BTreeMap::new();
    for r in registers {
        let row = by_country.entry(r.country()).or_default();
        row.0 += 1;
        row.1 += r.entities().len();
        row.2 += r.passport_in_len();
        for e in r.entities() {
            for entry in &e.entries {
                *by_category
                    .entry(entry.category.as_str().to_owned())
                    .or_default() += 1;
                *by_status.entry(entry.status).or_default() += 1;
            }
        }
    }
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "{} ({})", path.display(), format.as_str());
    let _ = writeln!(
        s,
        "\n{:<8} {:>9} {:>9} {:>11}",
        "country", "registers", "entities", "passport-in"
    );
    for (country, (regs, entities, inbound)) in &by_country {
        let _ = writeln!(
            s,
            "{:<8} {regs:>9} {entities:>9} {inbound:>11}",
            country.as_str()
        );
    }
    let _ = writeln!(s, "\n{:<40} {:>9}", "category", "entries");
    // Contract categories first in the contract's order, then the others by name.
    let order = |name: &str| match Category::from_name(name) {
        Some(Category::Other(_)) | None => 6,
        Some(Category::PaymentInstitution) => 0,
        Some(Category::ExemptPaymentInstitution) => 1,
        Some(Category::EMoneyInstitution) => 2,
        Some(Category::ExemptEMoneyInstitution) => 3,
        Some(Category::Aisp) => 4,
        Some(Category::CreditInstitution) => 5,
    };
    let mut categories: Vec<_> = by_category.into_iter().collect();
    categories.sort_by(|a, b| order(&a.0).cmp(&order(&b.0)).then(a.0.cmp(&b.0)));
    for (category, n) in categories {
        let _ = writeln!(s, "{category:<40} {n:>9}");
    }
    let _ = writeln!(s, "\n{:<14} {:>9}", "status", "entries");
    for (status, n) in &by_status {
        let _ = writeln!(s, "{:<14} {n:>9}", status.as_str());
    }
    if merged > 0 {
        let _ = writeln!(
            s,
            "\n{merged} entities share a reference with another in their register"
        );
    }
    if let Some(eba) = eba {
        let _ = writeln!(s, "\n{eba}");
    }
    s
}
