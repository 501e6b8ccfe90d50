//! Loading a full-size EBA PSD2 register export: wall time and peak memory.
//!
//! Run with `cargo bench --bench eba_load`. The first run writes an EBA-shaped export of
//! 330,000 entities into the cargo target tmp dir (the mix of entity types follows the live
//! counts of 2026-08-16 in `shared/data/REGISTER-FORMATS.md`; `Properties` and `Services` have
//! the real file's shapes: lists of single-key objects, values a string or a list, bare-string
//! service lists, passporting to up to 30 countries). Then it loads the file once through
//! `RegisterSnapshot::load` and prints the wall time and the process's peak resident memory
//! (`VmHWM` from `/proc/self/status`), times lookups, and times the import into a native file
//! and the load of that. Target on a 2-core machine: under 10 s and under 1.5 GB.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use psp_cert::cert::PsdAuthNumber;
use psp_cert::country::CountryCode;
use psp_service::register::{
    DEFAULT_EBA_AUTHORITIES, RegisterConfig, RegisterFileConfig, RegisterFormat, import_eba,
};

const ENTITIES: u64 = 330_000;

/// Live counts of 2026-08-16 (REGISTER-FORMATS.md); agents fill up to `ENTITIES`.
const MIX: [(&str, u64); 8] = [
    ("PSD_EPI", 2_758),
    ("PSD_EXC", 1_659),
    ("PSD_PI", 1_011),
    ("PSD_EMI", 427),
    ("PSD_ENL", 336),
    ("PSD_BR", 244),
    ("PSD_AISP", 129),
    ("PSD_EEMI", 87),
];

const SERVICE_CODES: [&str; 14] = [
    "PS_010", "PS_020", "PS_03A", "PS_03B", "PS_03C", "PS_04A", "PS_04B", "PS_04C", "PS_05A",
    "PS_05B", "PS_060", "PS_070", "PS_080", "ES_010",
];

/// A small deterministic generator (64-bit LCG, Knuth's MMIX constants): the same file every
/// run, no dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn authorities() -> Vec<(&'static str, &'static str)> {
    let mut seen = Vec::new();
    for a in DEFAULT_EBA_AUTHORITIES {
        if !seen.iter().any(|(code, _)| *code == a.eba_code) {
            seen.push((a.eba_code, &a.nca_id[..2]));
        }
    }
    seen
}

fn services_value(rng: &mut Lcg, out: &mut impl Write) -> std::io::Result<()> {
    if rng.chance(15) {
        // A bare string instead of a list.
        return write!(out, "\"{}\"", SERVICE_CODES[rng.below(13) as usize]);
    }
    let n = 1 + rng.below(6);
    write!(out, "[")?;
    for i in 0..n {
        if i > 0 {
            write!(out, ", ")?;
        }
        write!(out, "\"{}\"", SERVICE_CODES[rng.below(14) as usize])?;
    }
    write!(out, "]")
}

fn property(out: &mut impl Write, first: &mut bool, key: &str, value: &str) -> std::io::Result<()> {
    if !*first {
        write!(out, ",")?;
    }
    *first = false;
    write!(
        out,
        "\n        {{\n          \"{key}\": {value}\n        }}"
    )
}

fn generate(path: &Path) -> std::io::Result<()> {
    let mut rng = Lcg(0x5eed);
    let authorities = authorities();
    let countries = psp_cert::country::EEA;
    let mut remaining: Vec<(&str, u64)> = MIX.to_vec();
    let others: u64 = MIX.iter().map(|(_, n)| n).sum();
    remaining.push(("PSD_AG", ENTITIES - others));
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    write!(
        out,
        "[\n  [\n    {{\n      \"__EBA_Disclaimer\": {{\n        \"line1\": \"generated for the eba_load benchmark; no real data\"\n      }}\n    }}\n  ],\n  ["
    )?;
    for i in 0..ENTITIES {
        // Draw a type in proportion to what is left, so the types interleave.
        let left: u64 = remaining.iter().map(|(_, n)| n).sum();
        let mut pick = rng.below(left);
        let slot = remaining
            .iter()
            .position(|(_, n)| {
                if pick < *n {
                    true
                } else {
                    pick -= n;
                    false
                }
            })
            .unwrap_or(remaining.len() - 1);
        remaining[slot].1 -= 1;
        let entity_type = remaining[slot].0;
        let (code, country) = authorities[rng.below(authorities.len() as u64) as usize];
        let id = 100_000 + i;
        let institution = !matches!(entity_type, "PSD_AG" | "PSD_BR");
        let entity_code = if institution {
            format!("{code}!{id}")
        } else {
            format!("PSD_PI!{code}!{}!{id}", 100_000 + rng.below(5_000))
        };
        if i > 0 {
            write!(out, ",")?;
        }
        write!(
            out,
            "\n    {{\n      \"CA_OwnerID\": \"{code}\",\n      \"EntityCode\": \"{entity_code}\",\n      \"EntityType\": \"{entity_type}\",\n      \"Properties\": ["
        )?;
        let mut first = true;
        let p = &mut out;
        property(p, &mut first, "ENT_NAT_REF_COD", &format!("\"{id}\""))?;
        if rng.chance(2) {
            property(
                p,
                &mut first,
                "ENT_NAM",
                &format!("[\"Παράδειγμα {id} Α.Ε.\", \"Example {id} S.A.\"]"),
            )?;
        } else {
            property(
                p,
                &mut first,
                "ENT_NAM",
                &format!("\"Example Entity {id} Limited\""),
            )?;
        }
        if rng.chance(2) {
            property(
                p,
                &mut first,
                "ENT_ADD",
                &format!("[\"{id} Example Street, Floor 2\", \"{id} Rue d'Exemple\"]"),
            )?;
        } else {
            property(
                p,
                &mut first,
                "ENT_ADD",
                &format!("\"{} Example Street\"", id % 300),
            )?;
        }
        property(p, &mut first, "ENT_TOW_CIT_RES", "\"EXAMPLETOWN\"")?;
        property(
            p,
            &mut first,
            "ENT_POS_COD",
            &format!("\"{}\"", 10_000 + id % 80_000),
        )?;
        property(p, &mut first, "ENT_COU_RES", &format!("\"{country}\""))?;
        if institution {
            property(p, &mut first, "ENT_COD_TYP", "\"NON_LEI\"")?;
            property(p, &mut first, "ENT_NAM_COM", &format!("\"Example {id}\""))?;
            let dates = match rng.below(10) {
                0 => "[\"2019-01-01\", \"2023-03-23\"]",
                1 => "[\"2018-07-02\", \"2020-01-01\", \"2021-05-05\"]",
                _ => "[\"2018-07-02\"]",
            };
            property(p, &mut first, "ENT_AUT", dates)?;
            if entity_type == "PSD_EXC" {
                property(p, &mut first, "ENT_EXC", "\"ENT_EXC_K_I\"")?;
                property(
                    p,
                    &mut first,
                    "ENT_DES_ACT_EXC_SCP",
                    "\"Limited network of service providers\"",
                )?;
            }
        } else {
            property(p, &mut first, "ENT_TYP_PAR_ENT", "\"PSD_PI\"")?;
            property(
                p,
                &mut first,
                "ENT_COD_PAR_ENT",
                &format!("\"{code}!{}\"", rng.below(5_000)),
            )?;
            let status = if rng.chance(60) {
                "\"Inactive\""
            } else {
                "\"Active\""
            };
            property(p, &mut first, "DER_CHI_ENT_AUT", status)?;
        }
        write!(out, "\n      ]")?;
        if institution && !matches!(entity_type, "PSD_EXC" | "PSD_ENL") {
            write!(out, ",\n      \"Services\": [")?;
            write!(out, "\n        {{\n          \"{country}\": ")?;
            services_value(&mut rng, &mut out)?;
            write!(out, "\n        }}")?;
            // A few institutions passport everywhere; most to a handful of states.
            let hosts = if rng.chance(10) { 30 } else { rng.below(5) };
            for _ in 0..hosts {
                let host = countries[rng.below(countries.len() as u64) as usize];
                if host.as_str() == country {
                    continue;
                }
                write!(out, ",\n        {{\n          \"{host}\": ")?;
                services_value(&mut rng, &mut out)?;
                write!(out, "\n        }}")?;
            }
            write!(out, "\n      ]")?;
        }
        write!(
            out,
            ",\n      \"__EBA_EntityVersion\": \"2026081422334{}\"\n    }}",
            rng.below(10_000)
        )?;
    }
    write!(out, "\n  ]\n]\n")?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// A field of `/proc/self/status` in kB (Linux only).
fn proc_status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mb(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "n/a".to_owned(),
        |kb| format!("{:.0} MB", kb as f64 / 1024.0),
    )
}

fn config(path: PathBuf, format: RegisterFormat) -> RegisterConfig {
    RegisterConfig {
        files: vec![RegisterFileConfig {
            path,
            format,
            nca_map: BTreeMap::new(),
            normalise: None,
            ..RegisterFileConfig::default()
        }],
        ..RegisterConfig::default()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("eba-bench");
    std::fs::create_dir_all(&dir)?;
    let export = dir.join(format!("eba_{ENTITIES}.json"));
    if !export.exists() {
        let t = Instant::now();
        let partial = dir.join("eba.partial");
        generate(&partial)?;
        std::fs::rename(&partial, &export)?;
        println!("generated {} in {:.1?}", export.display(), t.elapsed());
    }
    let size = std::fs::metadata(&export)?.len();
    println!(
        "export: {} ({:.0} MB, {ENTITIES} entities)",
        export.display(),
        size as f64 / 1e6
    );
    println!("peak RSS before loading: {}", mb(proc_status_kb("VmHWM:")));

    let t = Instant::now();
    let (snapshot, report) =
        psp_service::register::load(&config(export.clone(), RegisterFormat::Eba), &dir)?;
    let load_time = t.elapsed();
    println!("EBA load: {load_time:.2?} wall");
    println!(
        "peak RSS after loading: {} (VmHWM); now {} (VmRSS)",
        mb(proc_status_kb("VmHWM:")),
        mb(proc_status_kb("VmRSS:"))
    );
    println!("{report}");

    // Lookups: every kept institution, home and cross-border, many times over.
    let keys: Vec<(PsdAuthNumber, CountryCode)> = snapshot
        .registers()
        .iter()
        .flat_map(|r| {
            let (country, nca) = r
                .nca_id()
                .split_once('-')
                .map(|(c, n)| (c.to_owned(), n.to_owned()))
                .unwrap_or_default();
            r.entities().iter().map(move |e| {
                (
                    PsdAuthNumber {
                        country: country.parse().unwrap_or(CountryCode::from_static("XX")),
                        nca: nca.clone(),
                        reference: e.reference.clone(),
                    },
                    country.parse().unwrap_or(CountryCode::from_static("XX")),
                )
            })
        })
        .collect();
    let rounds = 1_000_000 / keys.len().max(1) + 1;
    let de = CountryCode::from_static("DE");
    let t = Instant::now();
    let mut found = 0usize;
    for _ in 0..rounds {
        for (auth, _home) in &keys {
            let r = snapshot.lookup(Some(auth), de);
            found += r.home.category_entries.len();
        }
    }
    let lookups = rounds * keys.len();
    println!(
        "lookups: {lookups} in {:.2?} ({:.0} ns each, {found} entries found)",
        t.elapsed(),
        t.elapsed().as_nanos() as f64 / lookups as f64
    );
    drop(snapshot);

    let native = dir.join("eba_native.json");
    let t = Instant::now();
    let summary = import_eba(&export, &native, false)?;
    println!(
        "import to native: {:.2?} ({} registers, {:.1} MB)",
        t.elapsed(),
        summary.registers.len(),
        std::fs::metadata(&native)?.len() as f64 / 1e6
    );
    let t = Instant::now();
    let (native_snapshot, _) =
        psp_service::register::load(&config(native, RegisterFormat::Native), &dir)?;
    println!(
        "native load: {:.2?} ({} registers)",
        t.elapsed(),
        native_snapshot.registers().len()
    );
    println!("peak RSS at the end: {}", mb(proc_status_kb("VmHWM:")));
    Ok(())
}
