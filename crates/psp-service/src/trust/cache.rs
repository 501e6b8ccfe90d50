//! The on-disk store of a LOTL trust source: the last good LOTL, the pivots that verified
//! it, each territory's last good national list, and a log of the last fetch attempts.
//!
//! ```text
//! <cache_dir>/<source name>/
//! ├─ lotl.xml             the LOTL as last accepted
//! ├─ pivots/00.xml …      the pivots that carried trust to it, oldest first
//! ├─ lists/CZ.xml …       each territory's list as last accepted
//! ├─ sequences.json       the highest TSLSequenceNumber accepted per document
//! └─ fetch-log.json       the last attempt per document: when, whether, why not
//! ```
//!
//! `sequences.json` is the memory that refuses a rollback: a document whose sequence number
//! is lower than the one recorded is refused at fetch *and at load*, so an older genuine
//! list put in place of the stored one (a restored backup, a copied file) is not used. It
//! only ever rises.
//!
//! Only [`super::refresh`] writes here, and only what verified; every file is written to a
//! temporary name in the same directory and renamed over the old one, so a reader sees the
//! old file or the new one, never a part. Every load verifies the files again (they are
//! data on a disk, not proof).

use std::collections::BTreeMap;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::tsl::MAX_TSL_BYTES;

/// One LOTL source's directory.
#[derive(Debug, Clone)]
pub struct SourceCache {
    dir: PathBuf,
}

/// The last fetch attempt of one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub ok: bool,
    /// What happened: the sequence number stored, or why nothing was.
    pub message: String,
}

/// `fetch-log.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchLog {
    pub lotl: Option<Attempt>,
    /// By territory.
    #[serde(default)]
    pub lists: BTreeMap<String, Attempt>,
}

/// The key of the LOTL in `sequences.json` (territories are two capital letters).
pub const LOTL_KEY: &str = "LOTL";

/// Why sequence `seq` of document `key` is refused as a rollback, if it is: lower than the
/// highest recorded in `record`.
pub fn rollback(record: &BTreeMap<String, u64>, key: &str, seq: Option<u64>) -> Option<String> {
    match (seq, record.get(key)) {
        (Some(n), Some(&known)) if n < known => Some(format!(
            "sequence {n} is older than sequence {known}, accepted before (sequences.json): refused as a rollback"
        )),
        _ => None,
    }
}

/// Whether `territory` is safe as a file name: what the LOTL writes is two capital letters
/// (`CZ`, `EL`, `UK`); anything else is refused rather than joined to a path.
pub fn is_territory_code(territory: &str) -> bool {
    territory.len() == 2 && territory.bytes().all(|b| b.is_ascii_uppercase())
}

impl SourceCache {
    /// The directory of source `name` under `cache_dir`.
    pub fn new(cache_dir: &Path, name: &str) -> SourceCache {
        SourceCache {
            dir: cache_dir.join(name),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn lotl_path(&self) -> PathBuf {
        self.dir.join("lotl.xml")
    }

    fn pivots_dir(&self) -> PathBuf {
        self.dir.join("pivots")
    }

    /// The file of a territory's list; `None` for a territory that is not a code.
    pub fn list_path(&self, territory: &str) -> Option<PathBuf> {
        is_territory_code(territory)
            .then(|| self.dir.join("lists").join(format!("{territory}.xml")))
    }

    fn sequences_path(&self) -> PathBuf {
        self.dir.join("sequences.json")
    }

    /// The highest sequence number accepted per document ([`LOTL_KEY`] or a territory);
    /// empty when none was recorded yet. A record that cannot be read is an error: it is what
    /// refuses rollbacks, so it is not silently forgotten.
    pub fn read_sequences(&self) -> io::Result<BTreeMap<String, u64>> {
        match read_optional(&self.sequences_path())? {
            None => Ok(BTreeMap::new()),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.sequences_path().display()),
                )
            }),
        }
    }

    /// Records that sequence `n` of document `key` was accepted (the record keeps the
    /// highest).
    pub fn raise_sequence(&self, key: &str, n: u64) -> io::Result<()> {
        let mut record = self.read_sequences()?;
        let known = record.entry(key.to_owned()).or_insert(n);
        if *known > n {
            return Ok(());
        }
        *known = n;
        let json = serde_json::to_vec_pretty(&record).map_err(io::Error::other)?;
        write_atomic(&self.sequences_path(), &json)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("fetch-log.json")
    }

    /// The stored LOTL, `None` if none was stored yet.
    pub fn read_lotl(&self) -> io::Result<Option<Vec<u8>>> {
        read_optional(&self.lotl_path())
    }

    /// The stored pivots, oldest first, each with its file path as its name.
    pub fn read_pivots(&self) -> io::Result<Vec<(String, Vec<u8>)>> {
        let dir = self.pivots_dir();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .map(|e| e.map(|e| e.path()))
                .collect::<io::Result<Vec<_>>>()?
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "xml"))
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        files.sort();
        files
            .into_iter()
            .map(|p| Ok((p.display().to_string(), read_capped(&p)?)))
            .collect()
    }

    /// The stored list of a territory, `None` if none was stored yet.
    pub fn read_list(&self, territory: &str) -> io::Result<Option<Vec<u8>>> {
        match self.list_path(territory) {
            Some(p) => read_optional(&p),
            None => Ok(None),
        }
    }

    /// Stores an accepted LOTL and the pivots that verified it (replacing the old ones).
    pub fn store_lotl(&self, lotl: &[u8], pivots: &[Vec<u8>]) -> io::Result<()> {
        let dir = self.pivots_dir();
        let staged = self.dir.join("pivots.new");
        let _ = std::fs::remove_dir_all(&staged);
        std::fs::create_dir_all(&staged)?;
        for (i, bytes) in pivots.iter().enumerate() {
            write_atomic(&staged.join(format!("{i:02}.xml")), bytes)?;
        }
        let old = self.dir.join("pivots.old");
        let _ = std::fs::remove_dir_all(&old);
        if dir.exists() {
            std::fs::rename(&dir, &old)?;
        }
        std::fs::rename(&staged, &dir)?;
        let _ = std::fs::remove_dir_all(&old);
        write_atomic(&self.lotl_path(), lotl)
    }

    /// Stores an accepted national list.
    pub fn store_list(&self, territory: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.list_path(territory).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("territory {territory:?} is not a two-letter code"),
            )
        })?;
        write_atomic(&path, bytes)
    }

    /// The fetch log; empty when none was written or it cannot be read (it is information
    /// for operators, never a reason to trust anything).
    pub fn read_log(&self) -> FetchLog {
        std::fs::read(self.log_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn write_log(&self, log: &FetchLog) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(log).map_err(io::Error::other)?;
        write_atomic(&self.log_path(), &json)
    }
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match read_capped(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads at most [`MAX_TSL_BYTES`] (and one more, to tell a file over the cap).
fn read_capped(path: &Path) -> io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    f.take(MAX_TSL_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TSL_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is over {MAX_TSL_BYTES} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn territories_that_are_not_two_capital_letters_never_become_paths() {
        let c = SourceCache::new(Path::new("/tmp/x"), "eu");
        assert!(c.list_path("CZ").is_some());
        for bad in ["../etc", "cz", "C", "CZE", "", "C/", ".."] {
            assert!(c.list_path(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_stored_lotl_replaces_the_old_one_and_its_pivots_whole() {
        let root = std::env::temp_dir().join(format!("psp-cache-test-{}", std::process::id()));
        let c = SourceCache::new(&root, "eu");
        assert_eq!(c.read_lotl().expect("read"), None);
        c.store_lotl(b"one", &[b"p0".to_vec(), b"p1".to_vec()])
            .expect("store");
        assert_eq!(c.read_lotl().expect("read").as_deref(), Some(&b"one"[..]));
        let pivots = c.read_pivots().expect("pivots");
        assert_eq!(
            pivots.iter().map(|(_, b)| b.as_slice()).collect::<Vec<_>>(),
            [&b"p0"[..], &b"p1"[..]]
        );
        c.store_lotl(b"two", &[]).expect("store again");
        assert_eq!(c.read_lotl().expect("read").as_deref(), Some(&b"two"[..]));
        assert!(c.read_pivots().expect("pivots").is_empty());
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}
