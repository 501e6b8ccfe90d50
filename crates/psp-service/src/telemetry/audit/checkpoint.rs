//! Signed checkpoints of the audit log: the records are the leaves of an RFC 9162 Merkle
//! tree (leaf = the record's line without its line end), and a checkpoint is a C2SP
//! `tlog-checkpoint` of that tree (origin, size, base64 root hash, and one extension line
//! with the time), signed as a C2SP signed note by the `[evidence]` key.
//!
//! The checkpoint file holds one JSON object per line:
//! `{"size":…,"time":…,"chain_head":…,"frontier":[…],"note":"…"}`. `note` is the signed
//! note, the part an auditor keeps and checks with any signed-note verifier; `chain_head` is
//! the hash of record `size` (the chain's `prev` of the next record) and `frontier` the
//! roots of the tree's perfect subtrees, unsigned, which let a restart take the tree and the
//! chain up without rereading every file (both are checked against the signed root before
//! use).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::evidence::SigningKey;
use crate::telemetry::merkle::{self, Frontier, Hash};

/// Where and how often checkpoints are written (`[audit] checkpoints`, …).
#[derive(Clone)]
pub struct CheckpointSpec {
    pub file: PathBuf,
    /// A second file every checkpoint is also appended to.
    pub copy: Option<PathBuf>,
    pub every_records: u64,
    pub every: Duration,
    /// The origin line and the note's key name.
    pub origin: String,
    pub key: Arc<SigningKey>,
    /// Earlier keys (`[evidence] previous_keys`): the last checkpoint, signed before a
    /// rotation, is taken up when one of them verifies it.
    pub previous: Vec<crate::evidence::PublicKey>,
}

impl std::fmt::Debug for CheckpointSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointSpec")
            .field("file", &self.file)
            .field("copy", &self.copy)
            .field("every_records", &self.every_records)
            .field("every", &self.every)
            .field("origin", &self.origin)
            .field("key", &self.key.kid())
            .finish()
    }
}

/// One line of the checkpoint file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointLine {
    pub size: u64,
    pub time: String,
    /// The hash (hex) of record `size`'s line: the `prev` of record `size + 1`.
    pub chain_head: String,
    /// The tree's perfect-subtree roots (hex), largest first.
    pub frontier: Vec<String>,
    /// The signed note.
    pub note: String,
}

/// What a checkpoint states, read from its note text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
    /// The `time` extension line, when there is one.
    pub time: Option<String>,
}

/// The note text of a checkpoint (tlog-checkpoint: origin, size, root, extension lines).
pub fn note_text(origin: &str, size: u64, root: &Hash, time: &str) -> String {
    format!("{origin}\n{size}\n{}\ntime {time}\n", STANDARD.encode(root))
}

/// Reads a checkpoint's note text (already verified: [`crate::evidence::note_verify`]).
pub fn parse_text(text: &str) -> Result<Checkpoint, String> {
    let mut lines = text.split_terminator('\n');
    let origin = lines
        .next()
        .filter(|l| !l.is_empty())
        .ok_or("no origin line")?;
    let size = lines
        .next()
        .and_then(|l| {
            // Decimal, no sign, no leading zero (tlog-checkpoint).
            (l == "0" || (!l.starts_with('0') && l.bytes().all(|b| b.is_ascii_digit())))
                .then(|| l.parse::<u64>().ok())
                .flatten()
        })
        .ok_or("the second line is not a tree size")?;
    let root: Hash = lines
        .next()
        .and_then(|l| STANDARD.decode(l).ok())
        .and_then(|b| b.try_into().ok())
        .ok_or("the third line is not a base64 SHA-256 root hash")?;
    let time = lines
        .find_map(|l| l.strip_prefix("time "))
        .map(str::to_owned);
    Ok(Checkpoint {
        origin: origin.to_owned(),
        size,
        root,
        time,
    })
}

/// The log's tree as the writer keeps it.
pub struct Tree {
    frontier: Frontier,
    /// The size of the last checkpoint written.
    checkpointed: u64,
    /// When the last checkpoint was written (or the tree taken up).
    checkpointed_at: Instant,
}

/// What the next checkpoint states.
pub struct Head {
    pub size: u64,
    pub root: Hash,
    pub chain_head: String,
    pub frontier: Vec<String>,
}

impl Tree {
    fn new(frontier: Frontier) -> Tree {
        let checkpointed = frontier.size();
        Tree {
            frontier,
            checkpointed,
            checkpointed_at: Instant::now(),
        }
    }

    /// Adds a record's line.
    pub fn push(&mut self, line: &[u8]) {
        self.frontier.push(merkle::leaf_hash(line));
    }

    /// The checkpoint due now, if one is: `every_records` records since the last, or some
    /// records and `every` since it, or `force` (a rotation, the shutdown) with any.
    pub(super) fn due(
        &self,
        spec: &CheckpointSpec,
        force: bool,
        seq: u64,
        chain_head: &str,
    ) -> Option<Head> {
        let pending = self.frontier.size().saturating_sub(self.checkpointed);
        let due = pending >= spec.every_records
            || (pending > 0 && (force || self.checkpointed_at.elapsed() >= spec.every));
        debug_assert_eq!(self.frontier.size(), seq, "one leaf per record");
        due.then(|| Head {
            size: seq,
            root: self.frontier.root(),
            chain_head: chain_head.to_owned(),
            frontier: self.frontier.to_hex(),
        })
    }

    /// A checkpoint of `size` was written.
    pub(super) fn checkpointed(&mut self, size: u64) {
        self.checkpointed = self.checkpointed.max(size);
        self.checkpointed_at = Instant::now();
    }
}

/// Signs `head` and appends it to the checkpoint file and its copy, each synced.
pub(super) fn write(spec: &CheckpointSpec, head: &Head) -> io::Result<()> {
    let time = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let text = note_text(&spec.origin, head.size, &head.root, &time);
    let line = CheckpointLine {
        size: head.size,
        time,
        chain_head: head.chain_head.clone(),
        frontier: head.frontier.clone(),
        note: crate::evidence::note_sign(&spec.key, &spec.origin, &text)
            .map_err(io::Error::other)?,
    };
    let mut bytes = serde_json::to_vec(&line).map_err(io::Error::other)?;
    bytes.push(b'\n');
    append_synced(&spec.file, &bytes)?;
    if let Some(copy) = &spec.copy {
        append_synced(copy, &bytes)?;
    }
    Ok(())
}

fn append_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    // A line cut short by a crash (no line end): the next checkpoint starts a line of its
    // own instead of being joined to it (and lost with it).
    let len = f.metadata()?.len();
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            f.write_all(b"\n")?;
        }
    }
    f.write_all(bytes)?;
    f.sync_data()
}

/// Every checkpoint line of `path`, in order; a line that is not one is an error naming it.
pub fn read_all(path: &Path) -> io::Result<Vec<CheckpointLine>> {
    let f = File::open(path)?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} line {}: not a checkpoint ({e})", path.display(), i + 1),
            )
        })?);
    }
    Ok(out)
}

/// The last checkpoint of `path` (its last complete line; a torn last line, cut short by a
/// crash, is passed over), or `None` when there is no file or no checkpoint yet.
fn read_last(path: &Path) -> io::Result<Option<CheckpointLine>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let window = 1 << 20;
    f.seek(SeekFrom::Start(len.saturating_sub(window)))?;
    let mut tail = Vec::new();
    f.take(window).read_to_end(&mut tail)?;
    let last = tail
        .split(|&b| b == b'\n')
        .rev()
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .find_map(|l| serde_json::from_slice::<CheckpointLine>(l).ok());
    Ok(last)
}

/// Takes the tree up when the log is opened: from the last checkpoint and the records after
/// it in `path`, whose last record is `seq` with hash `prev` (`0`/genesis when the file is
/// empty or new). Returns the chain's position to go on from and the tree.
///
/// Refused, naming what was found: a file whose records end before the last checkpoint (its
/// tail was removed) or disagree with it (replaced); a file that does not reach back to the
/// checkpoint (records between are in no file); a log without checkpoints that does not
/// start at seq 1 (the tree needs every record).
pub(super) fn resume(
    spec: &CheckpointSpec,
    path: &Path,
    seq: u64,
    prev: String,
) -> io::Result<(u64, String, Option<Tree>)> {
    let refused = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {why}; see docs/evidence.md (\"When the log does not open\")",
                path.display()
            ),
        )
    };
    let refuse = |why: String| Err(refused(why));
    let last = read_last(&spec.file)?;
    let (from, head, frontier) = match last {
        None => (0, super::GENESIS.to_owned(), Frontier::new()),
        Some(line) => {
            let frontier = Frontier::from_hex(line.size, &line.frontier).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: last checkpoint: {e}", spec.file.display()),
                )
            })?;
            let signed = std::iter::once(spec.key.public())
                .chain(spec.previous.iter().cloned())
                .find_map(|key| crate::evidence::note_verify(&line.note, &spec.origin, &key).ok())
                .and_then(|text| parse_text(&text).ok());
            match signed {
                Some(c) if c.size == line.size && c.root == frontier.root() => {}
                _ => {
                    return refuse(format!(
                        "the last checkpoint in {} does not verify with the signing key or a previous key ([evidence] previous_keys), or its tree does not match its signed root",
                        spec.file.display()
                    ));
                }
            }
            (line.size, line.chain_head, frontier)
        }
    };
    if seq == 0 {
        // A new or empty file (after a rotation): the chain and the tree go on from the
        // checkpoint.
        return Ok((from, head, Some(Tree::new(frontier))));
    }
    if seq < from {
        return refuse(format!(
            "the file ends at record {seq}, but checkpoint {from} in {} was signed: records were removed from its end, or the file was replaced",
            spec.file.display()
        ));
    }
    if seq == from {
        if prev != head {
            return refuse(format!(
                "record {seq} is not the record checkpoint {from} was signed over: the file was replaced"
            ));
        }
        return Ok((seq, prev, Some(Tree::new(frontier))));
    }
    let mut tree = Tree::new(frontier);
    let mut expected = (from + 1, head);
    let mut started = false;
    for_each_record(path, |line, rseq, rprev| {
        if rseq <= from {
            return Ok(());
        }
        if !started && (rseq != expected.0 || rprev != expected.1) && from == 0 {
            return Err(format!(
                "there is no checkpoint yet and the file starts at record {rseq}: the tree needs every record from 1 (start checkpoints with a new file)"
            ));
        }
        if !started && (rseq != expected.0 || rprev != expected.1) {
            return Err(format!(
                "the file's records after checkpoint {from} start at record {rseq}, which does not follow it: the records between are in no file here"
            ));
        }
        started = true;
        if rseq != expected.0 || rprev != expected.1 {
            return Err(format!(
                "record {rseq} does not follow record {}: the chain is broken (psp-gateway audit verify names where)",
                expected.0 - 1
            ));
        }
        tree.push(line.as_bytes());
        expected = (
            rseq + 1,
            crate::hex::lower(&crate::hex::sha256(line.as_bytes())),
        );
        Ok(())
    })
    .map_err(refused)?;
    if !started || expected.0 != seq + 1 {
        return refuse(format!(
            "the records after checkpoint {from} could not be followed to the file's last record {seq}"
        ));
    }
    tree.checkpointed = from;
    Ok((seq, prev, Some(tree)))
}

/// Calls `each` with every record line of `path` (without its line end), its `seq` and its
/// `prev`; a line that is not a record stops the walk (a torn last line was set aside
/// before this is called).
fn for_each_record(
    path: &Path,
    mut each: impl FnMut(&str, u64, String) -> Result<(), String>,
) -> Result<(), String> {
    let f = File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut reader = BufReader::new(f);
    let mut n = 0;
    loop {
        n += 1;
        let broken = |line: usize, why: String| super::Broken {
            file: path.to_owned(),
            line,
            why,
        };
        let Some((line, ended)) =
            super::read_record_line(&mut reader, n, &broken).map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        let (_, seq, prev) =
            super::parse_record(&line, ended, n, &broken).map_err(|e| e.to_string())?;
        each(&line, seq, prev)?;
    }
}
