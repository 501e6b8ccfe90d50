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

/// Why a checkpoint's note text does not read as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("no origin line")]
    NoOrigin,
    #[error("the second line is not a tree size")]
    NotASize,
    #[error("the third line is not a base64 SHA-256 root hash")]
    NotARoot,
    #[error("the checkpoint has more than one time line")]
    TwoTimes,
}

/// Why a key that verified a checkpoint was not alive at its time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfLifetime {
    #[error("its time `{0}` is not an RFC 3339 time")]
    NotATime(String),
    #[error("{0}")]
    Key(#[from] crate::evidence::LifetimeError),
}

/// Reads a checkpoint's note text (already verified: [`crate::evidence::note_verify`]).
pub fn parse_text(text: &str) -> Result<Checkpoint, TextError> {
    let mut lines = text.split_terminator('\n');
    let origin = lines
        .next()
        .filter(|l| !l.is_empty())
        .ok_or(TextError::NoOrigin)?;
    let size = lines
        .next()
        .and_then(|l| {
            // Decimal, no sign, no leading zero (tlog-checkpoint).
            (l == "0" || (!l.starts_with('0') && l.bytes().all(|b| b.is_ascii_digit())))
                .then(|| l.parse::<u64>().ok())
                .flatten()
        })
        .ok_or(TextError::NotASize)?;
    let root: Hash = lines
        .next()
        .and_then(|l| STANDARD.decode(l).ok())
        .and_then(|b| b.try_into().ok())
        .ok_or(TextError::NotARoot)?;
    let mut times = lines.filter_map(|l| l.strip_prefix("time "));
    let time = times.next().map(str::to_owned);
    if times.next().is_some() {
        return Err(TextError::TwoTimes);
    }
    Ok(Checkpoint {
        origin: origin.to_owned(),
        size,
        root,
        time,
    })
}

/// Whether `key`, which verified checkpoint `c`, was alive at the checkpoint's `time`: not
/// retired before it, the time not in the future; a retired key's checkpoint must say its
/// time. The reason, when not.
pub fn in_lifetime(c: &Checkpoint, key: &crate::evidence::PublicKey) -> Result<(), OutOfLifetime> {
    let at = match &c.time {
        None => None,
        Some(t) => Some(
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .map_err(|_| OutOfLifetime::NotATime(t.clone()))?
                .unix_timestamp(),
        ),
    };
    Ok(key.signed_in_lifetime(at, time::OffsetDateTime::now_utc().unix_timestamp())?)
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

/// Signs `head` and appends it to the checkpoint file, synced. Returns the line written (with
/// its line end), for the copy ([`append_copy`]).
pub(super) fn write(spec: &CheckpointSpec, head: &Head) -> io::Result<Vec<u8>> {
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
    Ok(bytes)
}

/// Appends checkpoint lines (as [`write`] returned them) to the copy, synced.
pub(super) fn append_copy(copy: &Path, bytes: &[u8]) -> io::Result<()> {
    append_synced(copy, bytes)
}

/// Brings the copy up to the checkpoint file after its writes failed: appends every
/// checkpoint of the file whose size is past the copy's last, in order. The checkpoint file
/// is not written again.
pub(super) fn catch_up_copy(spec: &CheckpointSpec, copy: &Path) -> io::Result<()> {
    let have = read_last(copy)?.map_or(0, |l| l.size);
    let mut bytes = Vec::new();
    for line in read_all(&spec.file)?.lines {
        if line.size > have {
            bytes.extend(serde_json::to_vec(&line).map_err(io::Error::other)?);
            bytes.push(b'\n');
        }
    }
    if bytes.is_empty() {
        return Ok(());
    }
    append_synced(copy, &bytes)
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

/// The checkpoints of a checkpoint file, and the lines that were cut short.
#[derive(Debug, Default)]
pub struct CheckpointFile {
    pub lines: Vec<CheckpointLine>,
    /// Torn lines (a write cut short by a crash or a full disk: JSON that ends before its
    /// end), each named with its file and line; passed over, as a torn record is.
    pub torn: Vec<String>,
}

/// Every checkpoint line of `path`, in order. A line cut short (JSON that ends before its
/// end) is torn: named in [`CheckpointFile::torn`] and passed over. Any other line that is
/// not a checkpoint is an error naming it.
pub fn read_all(path: &Path) -> io::Result<CheckpointFile> {
    let f = File::open(path)?;
    let mut out = CheckpointFile::default();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(c) => out.lines.push(c),
            Err(e) if e.is_eof() => out.torn.push(format!(
                "{} line {}: a torn checkpoint line ({} bytes, cut short by a crash or a full disk), passed over; `psp-gateway audit repair --checkpoints` sets it aside",
                path.display(),
                i + 1,
                line.len()
            )),
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} line {}: not a checkpoint ({e})", path.display(), i + 1),
                ));
            }
        }
    }
    Ok(out)
}

/// Moves every torn line of the checkpoint file `path` ([`read_all`]) to
/// `<path>.torn-<unix time>` and writes the file again without them (to a new file, renamed
/// into place). Returns the file the torn lines went to and how many, or `None` when there
/// were none.
pub fn set_torn_lines_aside(path: &Path) -> io::Result<Option<(PathBuf, usize)>> {
    let text = std::fs::read(path)?;
    let mut kept = Vec::new();
    let mut torn = Vec::new();
    for line in text.split_inclusive(|&b| b == b'\n') {
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        match serde_json::from_slice::<CheckpointLine>(content) {
            Err(e) if e.is_eof() && !content.iter().all(u8::is_ascii_whitespace) => {
                torn.extend_from_slice(content);
                torn.push(b'\n');
            }
            _ => {
                kept.extend_from_slice(content);
                kept.push(b'\n');
            }
        }
    }
    if torn.is_empty() {
        return Ok(None);
    }
    let count = torn.iter().filter(|&&b| b == b'\n').count();
    let (aside, mut out) = super::create_beside(path, "torn")?;
    out.write_all(&torn)?;
    out.sync_all()?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(&kept)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(Some((aside, count)))
}

/// The checkpoint of `path` with the largest size among its last MiB of lines (lines that
/// are not checkpoints, a torn one among them, are passed over), or `None` when there is no
/// file or no checkpoint yet.
fn read_last(path: &Path) -> io::Result<Option<CheckpointLine>> {
    Ok(read_tail_lines(path)?.into_iter().max_by_key(|l| l.size))
}

/// The checkpoint lines among the last MiB of `path` (none when there is no file).
fn read_tail_lines(path: &Path) -> io::Result<Vec<CheckpointLine>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let window = 1 << 20;
    f.seek(SeekFrom::Start(len.saturating_sub(window)))?;
    let mut tail = Vec::new();
    f.take(window).read_to_end(&mut tail)?;
    Ok(tail
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .filter_map(|l| serde_json::from_slice::<CheckpointLine>(l).ok())
        .collect())
}

/// The log's high-water mark, kept apart from it (`<checkpoints>.synced`, and beside the
/// copy): the last record synced to disk and its hash, rewritten (to a new file, then renamed
/// into place) after each sync, and at a clean stop marked `clean` after the last checkpoint.
/// A restart compares the log with it: records synced before the stop that the file no
/// longer holds (cut from its end) are named in the restart's record, which the next
/// checkpoint signs. A mark lost with a crash is an older mark, never a higher one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub seq: u64,
    pub chain_head: String,
    pub time: String,
    /// Written at a clean stop, after the last checkpoint.
    #[serde(default)]
    pub clean: bool,
}

/// Where the mark of a checkpoint file is kept: beside it, named after it.
pub fn mark_path(checkpoints: &Path) -> PathBuf {
    let mut name = checkpoints.as_os_str().to_owned();
    name.push(".synced");
    PathBuf::from(name)
}

/// Writes `mark` beside the checkpoint file `file` (or its copy).
pub(super) fn write_mark(file: &Path, mark: &Mark) -> io::Result<()> {
    replace_synced(&mark_path(file), mark)
}

fn replace_synced(path: &Path, mark: &Mark) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut bytes = serde_json::to_vec(mark).map_err(io::Error::other)?;
    bytes.push(b'\n');
    let mut f = File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)
}

/// The marks kept beside the checkpoint file and beside its copy, those that read (a cut on
/// one volume shows from the other; a mark that does not read is passed over).
pub(super) fn read_marks(spec: &CheckpointSpec) -> Vec<Mark> {
    let read = |p: &Path| {
        std::fs::read(mark_path(p))
            .ok()
            .and_then(|b| serde_json::from_slice::<Mark>(&b).ok())
    };
    std::iter::once(read(&spec.file))
        .chain(std::iter::once(spec.copy.as_deref().and_then(read)))
        .flatten()
        .collect()
}

/// What a restart found, for the record that opens the log again
/// (`audit_log_opened`, [`super::AuditLog::open_with`]).
#[derive(Debug, Default)]
pub struct Found {
    /// Whether anything was there: a checkpoint, a record, a mark. A brand-new log opens
    /// without a record.
    pub restart: bool,
    /// The size of the last checkpoint.
    pub checkpoint: u64,
    /// The last intact record of the file.
    pub last_seq: u64,
    /// The highest of the marks kept beside the checkpoint file and its copy.
    pub mark: Option<Mark>,
    /// Whether every mark's record, as found, has the hash the mark names (`None` when the
    /// file holds none of them). Two marks that name the same record with different hashes
    /// are never both right.
    pub mark_matches: Option<bool>,
    /// The records after the last checkpoint, moved aside.
    pub set_aside: Option<Uncovered>,
}

/// Records found after the last checkpoint at a restart: never taken into the log as its
/// own (no signature covered them, and anyone who can write the file could have rewritten
/// and re-chained them), but moved as found to a file of their own.
#[derive(Debug)]
pub struct Uncovered {
    pub file: PathBuf,
    pub first_seq: u64,
    pub last_seq: u64,
    pub bytes: u64,
    pub sha256: String,
}

impl Found {
    /// The stop before this start was clean: the mark says so, and the file ends at the
    /// last checkpoint, which is the mark's record.
    pub fn clean_stop(&self) -> bool {
        self.mark.as_ref().is_some_and(|m| {
            m.clean && m.seq == self.checkpoint && self.last_seq == self.checkpoint
        }) && self.set_aside.is_none()
    }

    /// The records synced before the stop that the file does not hold: cut from its end.
    pub fn missing(&self) -> Option<(u64, u64)> {
        let mark = self.mark.as_ref()?;
        (mark.seq > self.last_seq).then_some((self.last_seq + 1, mark.seq))
    }
}

/// Why the log is not opened at a restart: what was found.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error(
        "no checkpoint in {} verifies with the signing key or a previous key ([evidence] previous_keys) within its life (not after its retirement, not in the future) with its tree matching its signed root",
        file.display()
    )]
    NoneVerifies { file: PathBuf },
    #[error(
        "the high-water mark says the last stop was clean after record {mark}, but the latest checkpoint found covers {from}: checkpoints were removed from {} (and its copy)",
        file.display()
    )]
    CheckpointsRemoved { mark: u64, from: u64, file: PathBuf },
    #[error(
        "the file is empty or new, but records {} to {synced} were synced after checkpoint {from} before the stop: they are in a file moved away while the service was down (put it back at this path, start, then rotate), or were removed",
        from + 1
    )]
    SyncedRecordsMissing { from: u64, synced: u64 },
    #[error(
        "the file ends at record {seq}, but checkpoint {from} in {} was signed: records were removed from its end, or the file was replaced",
        file.display()
    )]
    TailRemoved { seq: u64, from: u64, file: PathBuf },
    #[error(
        "record {seq} is not the record checkpoint {from} was signed over: the file was replaced"
    )]
    Replaced { seq: u64, from: u64 },
    #[error(
        "there is no checkpoint yet and the file starts at record {first}: the tree needs every record from 1 (start checkpoints with a new file)"
    )]
    NotFromOne { first: u64 },
    #[error(
        "the file's records after checkpoint {from} start at record {first}, which does not follow it: the records between are in no file here"
    )]
    Gap { from: u64, first: u64 },
    #[error(
        "the records after checkpoint {from} could not be followed to the file's last record {seq}"
    )]
    NotFollowed { from: u64, seq: u64 },
    #[error("cannot read: {0}")]
    Read(#[source] io::Error),
    #[error("{0}")]
    Broken(#[from] super::Broken),
}

/// Takes the tree up when the log is opened: from the last checkpoint, whose record `size`
/// must be the one the file holds (or the file must start right after it). Records after
/// it are never adopted: they are moved, as found, to `<file>.uncovered-<unix time>`, and
/// the file is cut back to the checkpoint ([`Found::set_aside`]). `seq` and `prev` are the
/// file's last intact record (`0`/genesis when it is empty or new). Returns the chain's
/// position to go on from, the tree, and what was found.
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
) -> io::Result<(u64, String, Option<Tree>, Found)> {
    let refused = |why: Refusal| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {why}; see docs/evidence.md (\"When the log does not open\")",
                path.display()
            ),
        )
    };
    let marks = read_marks(spec);
    let mark = marks.iter().max_by_key(|m| m.seq).cloned();
    let mut found = Found {
        restart: mark.is_some() || seq > 0,
        last_seq: seq,
        mark,
        ..Found::default()
    };
    let mut candidates = read_tail_lines(&spec.file)?;
    if let Some(copy) = &spec.copy {
        candidates.extend(read_tail_lines(copy)?);
    }
    found.restart |= !candidates.is_empty();
    let (from, head, frontier) = match (latest_verified(spec, &candidates), candidates.is_empty()) {
        (Some(v), _) => v,
        (None, true) => (0, super::GENESIS.to_owned(), Frontier::new()),
        (None, false) => {
            return Err(refused(Refusal::NoneVerifies {
                file: spec.file.clone(),
            }));
        }
    };
    found.checkpoint = from;
    let walk = file_against_checkpoint(spec, from, &head, (seq, &prev), &marks, &mut found)
        .map_err(refused)?;
    if !walk {
        return Ok((from, head, Some(Tree::new(frontier)), found));
    }
    // Records after the checkpoint (an unclean stop).
    let after = after_checkpoint(path, from, &head, &marks).map_err(refused)?;
    for (m, h) in marks.iter().zip(&after.at_marks) {
        if let Some(h) = h {
            found.mark_matches = Some(found.mark_matches.unwrap_or(true) && m.chain_head == *h);
        }
    }
    let Some(offset) = after.cut else {
        return Err(refused(Refusal::NotFollowed { from, seq }));
    };
    let (file, bytes, sha256) = set_uncovered_aside(path, offset)?;
    found.set_aside = Some(Uncovered {
        file,
        first_seq: from + 1,
        last_seq: seq,
        bytes,
        sha256,
    });
    Ok((from, head, Some(Tree::new(frontier)), found))
}

/// Compares the file's last record (`seq`, whose hash is `prev`) and the marks with the
/// latest checkpoint (`from`, over the record whose hash is `head`): whether records after
/// the checkpoint are to be walked, or the refusal. Sets what it finds in `found`.
fn file_against_checkpoint(
    spec: &CheckpointSpec,
    from: u64,
    head: &str,
    (seq, prev): (u64, &str),
    marks: &[Mark],
    found: &mut Found,
) -> Result<bool, Refusal> {
    // A clean stop ends with a checkpoint of every record: a mark saying so with more records
    // than the checkpoint found means checkpoints were removed.
    if let Some(m) = marks.iter().find(|m| m.clean && m.seq > from) {
        return Err(Refusal::CheckpointsRemoved {
            mark: m.seq,
            from,
            file: spec.file.clone(),
        });
    }
    if seq == 0 {
        // A new or empty file (after a rotation): the chain and the tree go on from the
        // checkpoint, the last record known, unless records after it were synced: those are
        // in a file moved away while the service was down, or were removed.
        if let Some(m) = found.mark.as_ref().filter(|m| m.seq > from) {
            return Err(Refusal::SyncedRecordsMissing {
                from,
                synced: m.seq,
            });
        }
        found.last_seq = from;
        return Ok(false);
    }
    if seq < from {
        return Err(Refusal::TailRemoved {
            seq,
            from,
            file: spec.file.clone(),
        });
    }
    if seq == from && prev != head {
        return Err(Refusal::Replaced { seq, from });
    }
    if seq == from {
        // The file ends at the checkpoint (a clean stop): nothing to walk. A mark of that
        // record is compared with its hash directly.
        for m in marks.iter().filter(|m| m.seq == seq) {
            found.mark_matches = Some(found.mark_matches.unwrap_or(true) && m.chain_head == prev);
        }
        return Ok(false);
    }
    Ok(true)
}

/// The latest checkpoint that verifies, of the checkpoint file and its copy (`candidates`):
/// its size, chain head and frontier. The largest signed size, not the last line: an old
/// line appended or the lines reordered must not make a restart set signed records aside.
fn latest_verified(
    spec: &CheckpointSpec,
    candidates: &[CheckpointLine],
) -> Option<(u64, String, Frontier)> {
    let mut candidates: Vec<&CheckpointLine> = candidates.iter().collect();
    candidates.sort_by_key(|l| std::cmp::Reverse(l.size));
    candidates.into_iter().find_map(|line| {
        let frontier = Frontier::from_hex(line.size, &line.frontier).ok()?;
        let signed = std::iter::once(spec.key.public())
            .chain(spec.previous.iter().cloned())
            .find_map(|key| {
                let text = crate::evidence::note_verify(&line.note, &spec.origin, &key).ok()?;
                let c = parse_text(&text).ok()?;
                in_lifetime(&c, &key).ok().map(|()| c)
            })?;
        (signed.size == line.size && signed.root == frontier.root())
            .then(|| (line.size, line.chain_head.clone(), frontier))
    })
}

/// What the records after checkpoint `from` are, read once: where the first of them starts
/// in the file (`None`: none follows the checkpoint), and the hash of each mark's record.
struct AfterCheckpoint {
    cut: Option<u64>,
    at_marks: Vec<Option<String>>,
}

/// Walks the file's records to find where those after checkpoint `from` (whose record's
/// hash is `head`) start, that they start right after it, and the records the marks name.
fn after_checkpoint(
    path: &Path,
    from: u64,
    head: &str,
    marks: &[Mark],
) -> Result<AfterCheckpoint, Refusal> {
    let mut after = AfterCheckpoint {
        cut: None,
        at_marks: vec![None; marks.len()],
    };
    let mut first = true;
    for_each_record(path, |line, offset, rseq, rprev| {
        let hash = || crate::hex::lower(&crate::hex::sha256(line.as_bytes()));
        for (i, m) in marks.iter().enumerate() {
            if m.seq == rseq {
                after.at_marks[i] = Some(hash());
            }
        }
        if first {
            first = false;
            if from == 0 && rseq != 1 {
                return Err(Refusal::NotFromOne { first: rseq });
            }
            if rseq > from + 1 || (rseq == from + 1 && rprev != head) {
                return Err(Refusal::Gap { from, first: rseq });
            }
        }
        if rseq == from && hash() != head {
            return Err(Refusal::Replaced { seq: rseq, from });
        }
        if rseq == from + 1 && after.cut.is_none() {
            after.cut = Some(offset);
        }
        Ok(())
    })?;
    Ok(after)
}

/// Moves the bytes of `path` from `offset` on to `<path>.uncovered-<unix time>` (synced),
/// then cuts `path` back to `offset`. Returns the new file, its length and its SHA-256.
fn set_uncovered_aside(path: &Path, offset: u64) -> io::Result<(PathBuf, u64, String)> {
    super::refuse_symlink(path)?;
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let (aside, mut out) = super::create_beside(path, "uncovered")?;
    out.write_all(&bytes)?;
    out.sync_all()?;
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(offset)?;
    f.sync_all()?;
    Ok((
        aside,
        bytes.len() as u64,
        crate::hex::lower(&crate::hex::sha256(&bytes)),
    ))
}

/// Calls `each` with every record line of `path` (without its line end), where it starts in
/// the file, its `seq` and its `prev`; a line that is not a record stops the walk (a torn
/// last line was set aside before this is called).
fn for_each_record(
    path: &Path,
    mut each: impl FnMut(&str, u64, u64, String) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    let f = File::open(path).map_err(Refusal::Read)?;
    let mut reader = BufReader::new(f);
    let mut n = 0;
    let mut offset = 0u64;
    loop {
        n += 1;
        let broken = |line: usize, why: String| super::Broken {
            file: path.to_owned(),
            line,
            why,
        };
        let start = offset;
        let Some((line, ended)) = super::read_record_line(&mut reader, n, &broken)? else {
            return Ok(());
        };
        offset += line.len() as u64 + u64::from(ended);
        let (_, seq, prev) = super::parse_record(&line, ended, n, &broken)?;
        each(&line, start, seq, prev)?;
    }
}
