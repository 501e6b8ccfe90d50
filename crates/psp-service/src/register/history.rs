//! The registers that were in force, kept for audits ("was this PSP allowed on 3 March?").
//!
//! Every time `serve` loads its reference data, each register file is hashed; a file whose
//! content changed since the last load is copied into the history directory under its
//! SHA-256 and recorded as in force from that moment, and the previous content of that file
//! as in force until then:
//!
//! ```text
//! <history_dir>/index.json          [{file, sha256, copy, from, until}, …]
//! <history_dir>/<sha256>.zip|json   one copy per distinct content
//! ```
//!
//! [`History::as_of`] gives the register configuration in force at a past time: each file
//! replaced by the copy that was in force then, and the files no copy covers, which an answer
//! must then say it could not use. Entries that ended more than the retention ago are pruned
//! with their copies.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::config::RegisterConfig;

/// One register file's content and when it was in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The file as the configuration names it, resolved.
    pub file: PathBuf,
    pub sha256: String,
    /// The copy's name in the history directory.
    pub copy: String,
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    /// `None` while it is still in force.
    #[serde(with = "time::serde::rfc3339::option")]
    pub until: Option<OffsetDateTime>,
}

impl Entry {
    /// Whether this content was in force at `at`.
    pub fn covers(&self, at: OffsetDateTime) -> bool {
        self.from <= at && self.until.is_none_or(|u| at < u)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    entries: Vec<Entry>,
}

/// The registers as of a past time.
#[derive(Debug, Clone)]
pub struct AsOf {
    /// The configuration with each covered file replaced by its copy.
    pub config: RegisterConfig,
    /// The entries used, one per covered file.
    pub used: Vec<Entry>,
    /// Files no entry covers: their registers are not in `config`.
    pub uncovered: Vec<PathBuf>,
}

/// The history directory.
#[derive(Debug, Clone)]
pub struct History {
    dir: PathBuf,
    retention: Duration,
}

impl History {
    pub fn new(dir: PathBuf, retention: Duration) -> History {
        History { dir, retention }
    }

    /// The history `config` names (`history_dir` relative to `base_dir`), if any.
    pub fn of(config: &RegisterConfig, base_dir: &Path) -> Option<History> {
        config.history_dir.as_ref().map(|dir| {
            History::new(
                base_dir.join(dir),
                Duration::from_secs(
                    config
                        .history_retention_days
                        .unwrap_or(super::config::DEFAULT_HISTORY_RETENTION_DAYS)
                        .saturating_mul(86_400),
                ),
            )
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn read_index(&self) -> io::Result<Index> {
        match std::fs::read(self.index_path()) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.index_path().display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index::default()),
            Err(e) => Err(e),
        }
    }

    /// The recorded entries, oldest first.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        Ok(self.read_index()?.entries)
    }

    /// Records that the files of `config` (relative to `base_dir`) are in force from `now`:
    /// a file whose content differs from its last entry gets a copy and a new entry, and the
    /// last entry is closed at `now`. Then prunes what ended before the retention.
    pub fn record(
        &self,
        config: &RegisterConfig,
        base_dir: &Path,
        now: OffsetDateTime,
    ) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut index = self.read_index()?;
        let mut changed = false;
        for file in &config.files {
            let path = base_dir.join(&file.path);
            let sha256 = hash_file(&path)?;
            let last = index
                .entries
                .iter_mut()
                .filter(|e| e.file == path)
                .max_by_key(|e| e.from);
            if let Some(last) = last {
                if last.sha256 == sha256 && last.until.is_none() {
                    continue;
                }
                if last.until.is_none() {
                    last.until = Some(now);
                }
            }
            let extension = path
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .filter(|e| e == "zip" || e == "json")
                .unwrap_or_else(|| "json".to_owned());
            let copy = format!("{sha256}.{extension}");
            let target = self.dir.join(&copy);
            if !target.exists() {
                crate::durable::copy_atomic(&path, &target)?;
            }
            index.entries.push(Entry {
                file: path,
                sha256,
                copy,
                from: now,
                until: None,
            });
            changed = true;
        }
        let horizon = now - time::Duration::try_from(self.retention).unwrap_or(time::Duration::MAX);
        let before = index.entries.len();
        index
            .entries
            .retain(|e| e.until.is_none_or(|u| u >= horizon));
        if index.entries.len() != before {
            changed = true;
            let live: Vec<&str> = index.entries.iter().map(|e| e.copy.as_str()).collect();
            for entry in std::fs::read_dir(&self.dir)? {
                let name = entry?.file_name().to_string_lossy().into_owned();
                let is_copy = name.ends_with(".zip") || name.ends_with(".json");
                if is_copy && name != "index.json" && !live.contains(&name.as_str()) {
                    let _ = std::fs::remove_file(self.dir.join(&name));
                }
            }
        }
        if changed {
            let json = serde_json::to_vec_pretty(&index).map_err(io::Error::other)?;
            crate::durable::write_atomic(&self.index_path(), &json)?;
        }
        Ok(())
    }

    /// The configuration in force at `at` (see [`AsOf`]).
    pub fn as_of(
        &self,
        config: &RegisterConfig,
        base_dir: &Path,
        at: OffsetDateTime,
    ) -> io::Result<AsOf> {
        let index = self.read_index()?;
        let mut out = AsOf {
            config: RegisterConfig {
                files: Vec::new(),
                ..config.clone()
            },
            used: Vec::new(),
            uncovered: Vec::new(),
        };
        for file in &config.files {
            let path = base_dir.join(&file.path);
            match index
                .entries
                .iter()
                .find(|e| e.file == path && e.covers(at))
            {
                Some(entry) => {
                    let mut f = file.clone();
                    f.path = self.dir.join(&entry.copy);
                    out.config.files.push(f);
                    out.used.push(entry.clone());
                }
                None => out.uncovered.push(path),
            }
        }
        Ok(out)
    }
}

/// The SHA-256 of a file, hex, read in 1 MiB blocks.
fn hash_file(path: &Path) -> io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        context.update(&buf[..n]);
    }
    Ok(crate::hex::lower(context.finish().as_ref()))
}
