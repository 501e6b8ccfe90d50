//! The on-disk store of a LOTL trust source: the last good LOTL, the pivots that verified
//! it, each territory's last good national list, and a log of the last fetch attempts.
//!
//! ```text
//! <cache_dir>/<source name>/
//! ├─ lotl.xml             the LOTL as last accepted
//! ├─ pivots/<id>/00.xml … the pivots that carried trust to it, oldest first, where <id>
//! │                       is the first 16 hex digits of the SHA-256 of that lotl.xml
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
//! Only [`super::refresh`] writes here, and only what verified; every file is replaced whole
//! ([`crate::durable`]), so a reader sees the old file or the new one, never a part. Every
//! load verifies the files again (they are data on a disk, not proof).
//!
//! A LOTL and its pivots are one unit: the pivots are written first, under the new LOTL's
//! id, then `lotl.xml` is replaced (the one step that switches), then the other ids are
//! removed. A process killed at any point leaves a `lotl.xml` whose pivots are complete
//! (`tests/faults_refresh.rs` kills `trust fetch` at random points). Pivots directly under
//! `pivots/` (the layout before ids) are read for a LOTL without an id directory.

use std::collections::BTreeMap;
use std::io::{self, Read as _};
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

/// The largest step above the recorded sequence number accepted at once. Publishers raise a
/// list's `TSLSequenceNumber` by one per issue (ETSI TS 119 612 clause 5.3.2; the EU LOTL is
/// in the hundreds after a decade); a list signed with a sequence number far above the last
/// (a publisher's mistake, or a signing key misused) would otherwise be accepted and, since the
/// record only rises, refuse every genuine list after it for good (issue 40 finding 8: a
/// sequence of `u64::MAX`).
pub const MAX_SEQUENCE_STEP: u64 = 1_000;

/// The largest sequence number accepted for a document with no record yet.
pub const MAX_FIRST_SEQUENCE: u64 = 1_000_000;

/// Why sequence `seq` of document `key` is refused as an implausible step, if it is: more than
/// [`MAX_SEQUENCE_STEP`] above the recorded one, or over [`MAX_FIRST_SEQUENCE`] with none
/// recorded. The recovery, when a publisher did jump on purpose, is in docs/trusted-lists.md.
pub fn implausible_step(
    record: &BTreeMap<String, u64>,
    key: &str,
    seq: Option<u64>,
) -> Option<String> {
    match (seq, record.get(key)) {
        (Some(n), Some(&known)) if n > known.saturating_add(MAX_SEQUENCE_STEP) => Some(format!(
            "sequence {n} is more than {MAX_SEQUENCE_STEP} above sequence {known}, accepted before (sequences.json): refused as implausible"
        )),
        (Some(n), None) if n > MAX_FIRST_SEQUENCE => Some(format!(
            "sequence {n} is over {MAX_FIRST_SEQUENCE} with none accepted before: refused as implausible"
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

    /// The directory of the pivots that verified `lotl`.
    fn pivots_of(&self, lotl: &[u8]) -> PathBuf {
        let id = crate::hex::lower(&crate::hex::sha256(lotl));
        self.pivots_dir().join(&id[..16])
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

    /// The stored LOTL and the pivots that verified it (oldest first, each named by its file
    /// path); `None` if no LOTL was stored yet. Read again when a refresh replaced the LOTL
    /// between the two reads.
    pub fn read_lotl_and_pivots(&self) -> io::Result<Option<(Vec<u8>, Pivots)>> {
        let mut attempts = 0;
        loop {
            let Some(lotl) = self.read_lotl()? else {
                return Ok(None);
            };
            let dir = self.pivots_of(&lotl);
            if dir.is_dir() {
                let pivots = read_xml_files(&dir)?;
                // Still the LOTL those pivots belong to (not replaced, and its pivots removed,
                // while they were read)?
                if dir.is_dir() {
                    return Ok(Some((lotl, pivots)));
                }
            } else if self.read_lotl()?.as_deref() == Some(lotl.as_slice()) {
                // No id directory: stored before ids, or without pivots.
                return Ok(Some((lotl, read_xml_files(&self.pivots_dir())?)));
            }
            attempts += 1;
            if attempts == 3 {
                return Err(io::Error::other(format!(
                    "{} changed three times while it was read",
                    self.lotl_path().display()
                )));
            }
        }
    }

    /// The stored list of a territory, `None` if none was stored yet.
    pub fn read_list(&self, territory: &str) -> io::Result<Option<Vec<u8>>> {
        match self.list_path(territory) {
            Some(p) => read_optional(&p),
            None => Ok(None),
        }
    }

    /// Stores an accepted LOTL and the pivots that verified it (replacing the old ones): the
    /// pivots under the new LOTL's id, then `lotl.xml`, then the old pivots removed (see the
    /// module documentation).
    ///
    /// The LOTL stored already with these same pivots (a refresh that found nothing new) is
    /// left as it is: rewriting its pivots in place would open a window where a kill leaves
    /// it without them. Only pivots that differ (a file damaged on the disk) are rewritten.
    pub fn store_lotl(&self, lotl: &[u8], pivots: &[Vec<u8>]) -> io::Result<()> {
        let stored = self.pivots_of(lotl);
        if stored.is_dir()
            && self.read_lotl()?.as_deref() == Some(lotl)
            && read_xml_files(&stored)?
                .into_iter()
                .map(|(_, bytes)| bytes)
                .eq(pivots.iter().map(Vec::as_slice))
        {
            self.remove_pivots_except(&stored);
            return Ok(());
        }
        let generation = self.write_pivots(lotl, pivots)?;
        write_atomic(&self.lotl_path(), lotl)?;
        self.remove_pivots_except(&generation);
        Ok(())
    }

    /// Step 1 of [`SourceCache::store_lotl`]: `pivots` written and synced under `lotl`'s id
    /// (anything there before, a part left by a process killed while writing it, removed
    /// first). Returns the directory.
    fn write_pivots(&self, lotl: &[u8], pivots: &[Vec<u8>]) -> io::Result<PathBuf> {
        let generation = self.pivots_of(lotl);
        match std::fs::remove_dir_all(&generation) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::create_dir_all(&generation)?;
        for (i, bytes) in pivots.iter().enumerate() {
            write_atomic(&generation.join(format!("{i:02}.xml")), bytes)?;
        }
        crate::durable::sync_dir(&generation)?;
        crate::durable::sync_dir(&self.pivots_dir())?;
        Ok(generation)
    }

    /// Step 3 of [`SourceCache::store_lotl`]: every other entry of `pivots/` removed (older
    /// LOTLs' pivots, parts left by killed writers, pivots stored before ids). Best effort:
    /// what is left is never read for the stored LOTL.
    fn remove_pivots_except(&self, generation: &Path) {
        let Ok(entries) = std::fs::read_dir(self.pivots_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path == generation {
                continue;
            }
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
        let _ = crate::durable::sync_dir(&self.pivots_dir());
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

/// Pivots: each one's file path and bytes.
pub type Pivots = Vec<(String, Vec<u8>)>;

/// The `*.xml` files of `dir` in name order, read; none if `dir` does not exist.
fn read_xml_files(dir: &Path) -> io::Result<Pivots> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
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

/// [`crate::durable::write_atomic`], creating the cache's directories as needed.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::durable::write_atomic(path, bytes)
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
    fn a_sequence_far_above_the_record_is_implausible_and_one_within_the_step_is_not() {
        let record: BTreeMap<String, u64> = [("CZ".to_owned(), 100)].into();
        assert!(implausible_step(&record, "CZ", Some(u64::MAX)).is_some());
        assert!(implausible_step(&record, "CZ", Some(1_101)).is_some());
        assert_eq!(implausible_step(&record, "CZ", Some(1_100)), None);
        assert_eq!(implausible_step(&record, "CZ", Some(101)), None);
        assert!(implausible_step(&record, "SK", Some(u64::MAX)).is_some());
        assert_eq!(implausible_step(&record, "SK", Some(350)), None);
    }

    #[test]
    fn territories_that_are_not_two_capital_letters_never_become_paths() {
        let c = SourceCache::new(Path::new("/tmp/x"), "eu");
        assert!(c.list_path("CZ").is_some());
        for bad in ["../etc", "cz", "C", "CZE", "", "C/", ".."] {
            assert!(c.list_path(bad).is_none(), "{bad:?}");
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("psp-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        root
    }

    /// The stored LOTL with its pivots' contents.
    fn stored(c: &SourceCache) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
        c.read_lotl_and_pivots()
            .expect("read")
            .map(|(lotl, pivots)| (lotl, pivots.into_iter().map(|(_, b)| b).collect()))
    }

    fn unit(lotl: &[u8], pivots: &[&[u8]]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
        Some((lotl.to_vec(), pivots.iter().map(|p| p.to_vec()).collect()))
    }

    #[test]
    fn a_stored_lotl_replaces_the_old_one_and_its_pivots_whole() {
        let root = scratch("replace");
        let c = SourceCache::new(&root, "eu");
        assert_eq!(stored(&c), None);
        c.store_lotl(b"one", &[b"p0".to_vec(), b"p1".to_vec()])
            .expect("store");
        assert_eq!(stored(&c), unit(b"one", &[b"p0", b"p1"]));
        c.store_lotl(b"two", &[]).expect("store again");
        assert_eq!(stored(&c), unit(b"two", &[]));
        // Only the stored LOTL's pivots are left.
        let left: Vec<_> = std::fs::read_dir(c.pivots_dir())
            .expect("pivots")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(left, [c.pivots_of(b"two")]);
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    /// A process killed at each point of `store_lotl` leaves a LOTL with its own pivots:
    /// after step 1 (the new pivots written) the old unit, after step 2 (`lotl.xml`
    /// replaced) the new one, before the old pivots are removed. A part of a pivot directory
    /// left by a killed writer is replaced by the next store of that LOTL.
    #[test]
    fn a_store_cut_short_at_any_step_leaves_a_lotl_with_its_own_pivots() {
        let root = scratch("steps");
        let c = SourceCache::new(&root, "eu");
        c.store_lotl(b"old", &[b"k0 to k1".to_vec()])
            .expect("store");

        // Killed after step 1.
        c.write_pivots(b"new", &[b"k1 to k2".to_vec(), b"k2 to k3".to_vec()])
            .expect("step 1");
        assert_eq!(stored(&c), unit(b"old", &[b"k0 to k1"]));

        // Killed after step 2.
        write_atomic(&c.lotl_path(), b"new").expect("step 2");
        assert_eq!(stored(&c), unit(b"new", &[b"k1 to k2", b"k2 to k3"]));

        // A writer of "newer" killed half-way through its pivots: the stored unit is
        // unchanged, and storing "newer" again replaces the part.
        let part = c.pivots_of(b"newer");
        std::fs::create_dir_all(&part).expect("part");
        std::fs::write(part.join("00.xml"), b"half of a piv").expect("part");
        std::fs::write(part.join("07.xml"), b"stray").expect("part");
        assert_eq!(stored(&c), unit(b"new", &[b"k1 to k2", b"k2 to k3"]));
        c.store_lotl(b"newer", &[b"whole".to_vec()]).expect("store");
        assert_eq!(stored(&c), unit(b"newer", &[b"whole"]));
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    /// Storing the LOTL that is stored already leaves its pivots' files as they are (the same
    /// inodes): a kill during a refresh that found nothing new cannot cost the pivots.
    #[test]
    fn storing_the_stored_lotl_again_rewrites_nothing_unless_a_pivot_was_damaged() {
        use std::os::unix::fs::MetadataExt as _;
        let root = scratch("again");
        let c = SourceCache::new(&root, "eu");
        c.store_lotl(b"same", &[b"p0".to_vec()]).expect("store");
        let inode = |p: &Path| std::fs::metadata(p).expect("metadata").ino();
        let pivot = c.pivots_of(b"same").join("00.xml");
        let (lotl_before, pivot_before) = (inode(&c.lotl_path()), inode(&pivot));
        c.store_lotl(b"same", &[b"p0".to_vec()])
            .expect("store again");
        assert_eq!(inode(&c.lotl_path()), lotl_before);
        assert_eq!(inode(&pivot), pivot_before);
        assert_eq!(stored(&c), unit(b"same", &[b"p0"]));
        // A pivot damaged on the disk is not kept for being under the right name: the next
        // store of the same LOTL writes it again.
        std::fs::write(&pivot, b"damaged").expect("damage");
        c.store_lotl(b"same", &[b"p0".to_vec()])
            .expect("store to repair");
        assert_eq!(stored(&c), unit(b"same", &[b"p0"]));
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    /// Pivots stored before ids (directly in `pivots/`) are still read for a LOTL stored
    /// then, and removed by the next store.
    #[test]
    fn pivots_stored_before_ids_are_read_then_replaced() {
        let root = scratch("legacy");
        let c = SourceCache::new(&root, "eu");
        std::fs::create_dir_all(c.pivots_dir()).expect("dir");
        std::fs::write(c.pivots_dir().join("00.xml"), b"p0").expect("write");
        std::fs::write(c.pivots_dir().join("01.xml"), b"p1").expect("write");
        std::fs::write(c.lotl_path(), b"stored before ids").expect("write");
        assert_eq!(stored(&c), unit(b"stored before ids", &[b"p0", b"p1"]));
        c.store_lotl(b"next", &[]).expect("store");
        assert_eq!(stored(&c), unit(b"next", &[]));
        assert!(!c.pivots_dir().join("00.xml").exists());
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}
