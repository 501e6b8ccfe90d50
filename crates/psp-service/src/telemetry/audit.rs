//! The audit log: one JSON line per check and per gateway decision (the `tracing` events of
//! target `audit`), chained so that a removed, reordered or edited line is detected.
//!
//! Each line is a JSON object whose first two keys are `seq` (1, 2, 3, … across files) and
//! `prev` (the SHA-256, hex, of the previous line's exact bytes, without its newline); the
//! event's fields follow in name order, `time` among them. The first line written after a rotation (SIGHUP
//! reopens the file) names the last line of the previous file, so the chain runs across
//! files. [`verify`] (`psp-gateway audit verify FILE...`) walks the files in order and names
//! the first line that breaks the chain.
//!
//! A torn final line (a write cut short) is set aside at start ([`AuditLog::open`]); a failed
//! write is counted in `psp_gateway_audit_write_failures_total`.
//!
//! What the chain alone cannot show: lines cut from the end of the last file (nothing follows
//! them), or a whole file replaced by a new, internally consistent chain. Signed checkpoints
//! close both gaps ([`checkpoint`]): the records are also the leaves of an RFC 9162 Merkle
//! tree, and every `checkpoint_records` records or `checkpoint_seconds` a C2SP signed note of
//! the tree's size and root is appended to a checkpoint file (and a copy elsewhere), so
//! `audit verify --checkpoints` finds a truncated tail or a replaced file, `audit prove`
//! gives one record's inclusion proof, and an older checkpoint proves that today's log
//! extends it ([`proof`]).
//!
//! Off the request path: a request hands its record to the log as a compact record (the
//! event's fields, unformatted, [`super::json_lines`]), and the log's writer thread
//! ([`AuditLog::start`]) formats, chains and writes the records that came meanwhile in one
//! `write` call on the file opened for appending (group commit). Under `fail_closed` the
//! request waits for that write before it is answered ([`recorded`]): no answer leaves
//! before its record reached the operating system, as when each request wrote its own.
//! At most [`MAX_QUEUED`] bytes of records wait: past that, a `fail_closed` log makes the
//! request wait for room, and a `fail_open` one counts the record lost. Another thread
//! `fsync`s what was written at most `sync_interval` later, signs the checkpoints, notices a
//! file removed while open, and finds out when a failing log can be written again. While
//! records cannot be written, [`WriteFailurePolicy`] says what requests get
//! ([`refusing_requests`]).

pub mod checkpoint;
pub mod proof;

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use self::checkpoint::{CheckpointSpec, Tree};

/// What requests get while audit records cannot be written (`[audit] on_write_failure`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteFailurePolicy {
    /// 503 with the face's error body until a record can be written again: nothing is let
    /// through that the log does not hold.
    #[default]
    FailClosed,
    /// Served; each record that cannot be written is counted
    /// (`psp_gateway_audit_write_failures_total`) and the log reports it once written again.
    FailOpen,
}

/// How an audit log is made durable and checkpointed.
#[derive(Debug, Clone)]
pub struct Options {
    /// The most time between a record's write and its `fsync`.
    pub sync_interval: Duration,
    pub on_write_failure: WriteFailurePolicy,
    /// Signed checkpoints, when configured.
    pub checkpoints: Option<CheckpointSpec>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync_interval: Duration::from_millis(100),
            on_write_failure: WriteFailurePolicy::FailClosed,
            checkpoints: None,
        }
    }
}

/// The hash of "no previous line": the chain of a brand-new log starts from it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Longest line read back when reopening or verifying (records are a few hundred bytes).
const MAX_LINE_BYTES: usize = 1 << 20;

struct State {
    path: PathBuf,
    file: File,
    seq: u64,
    prev: String,
    /// The first record written to the open file (to name what a removed file held).
    file_first_seq: u64,
    /// Records written since the last `fsync`.
    dirty: bool,
    /// Records that could not be written since the log last took one.
    failed_writes: u64,
    /// The Merkle tree over every record, when checkpoints are configured.
    tree: Option<Tree>,
}

/// Bytes of records waiting for the writer thread at which a request waits for room
/// (`fail_closed`) or its record is counted lost (`fail_open`).
pub const MAX_QUEUED: usize = 8 * 1024 * 1024;

/// Records handed over by requests, waiting for the writer thread.
#[derive(Default)]
struct Queue {
    /// The records, each as [`super::json_lines`] writes one.
    records: Vec<u8>,
    /// Records handed over since the log was opened: the last one's number.
    taken: u64,
    /// The writer thread runs: records wait for it (before, and in tests, they are written
    /// by the request that made them).
    writer: bool,
}

/// An open, chained audit log.
pub struct AuditLog {
    state: Mutex<State>,
    queue: Mutex<Queue>,
    /// Signalled when records come (for the writer) and when the writer took them (for
    /// requests waiting for room).
    queue_changed: Condvar,
    /// Held while a batch is taken and written.
    writing: Mutex<()>,
    /// The number of the last record of the batch being written.
    in_hand: std::sync::atomic::AtomicU64,
    /// Tests: the next batch's round panics after taking it.
    #[cfg(test)]
    panic_next: AtomicBool,
    /// The number of the last record the writer has written (or lost): what [`recorded`]
    /// waits for.
    written: tokio::sync::watch::Sender<u64>,
    /// Where a torn final line was moved when the log was opened.
    torn_set_aside: Option<PathBuf>,
    options: Options,
    /// Whether the last write succeeded (read without the lock by every request).
    writable: AtomicBool,
    /// Whether `checkpoint_copy` lacks checkpoints the checkpoint file has (its writes
    /// failed, its checkpoints' or its high-water mark's): it is caught up at each tick
    /// until it can be written again.
    copy_behind: AtomicBool,
    /// The last high-water mark written, to write beside the copy again when it is behind.
    last_mark: Mutex<Option<checkpoint::Mark>>,
}

/// The file's last intact record as the chain goes on from it: its `seq`, its hash, whether
/// it lacks its line end, and a torn line after it (its bytes and where the intact part
/// ends). Decided before anything is changed: a file whose end is no audit record (nor one
/// followed by a torn line) is refused as it is.
fn intact_end(path: &Path) -> io::Result<IntactEnd> {
    let Some(tail) = read_tail(path)? else {
        return Ok(IntactEnd {
            seq: 0,
            prev: GENESIS.to_owned(),
            needs_newline: false,
            torn_at: None,
        });
    };
    let found = last_record(&tail.bytes);
    let (seq, prev, needs_newline) = match found.record {
        Some((seq, line)) => (
            seq,
            crate::hex::lower(&crate::hex::sha256(line.as_bytes())),
            found.needs_newline,
        ),
        // Nothing intact in the tail: a brand-new chain only when the file held no more than
        // the torn line; anything else is not a torn line.
        None if tail.offset == 0 && tail.bytes[..found.end].iter().all(u8::is_ascii_whitespace) => {
            (0, GENESIS.to_owned(), false)
        }
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the last line is not an audit record, nor is the one before a torn line; nothing was changed",
                    path.display()
                ),
            ));
        }
    };
    let torn_at = found
        .torn
        .map(|torn| (torn, tail.offset + found.end as u64));
    Ok(IntactEnd {
        seq,
        prev,
        needs_newline,
        torn_at,
    })
}

/// What [`intact_end`] found.
struct IntactEnd {
    seq: u64,
    prev: String,
    needs_newline: bool,
    /// A torn line's bytes, and the length of the file without it.
    torn_at: Option<(Vec<u8>, u64)>,
}

impl AuditLog {
    /// Opens `path` for appending. When it already holds records, the chain continues from
    /// its last intact line. A torn final line (a write cut short: a full disk, a crash) never
    /// stops the opening: its bytes are moved to `<file>.torn-<unix time>`, the file is cut
    /// back to the last intact record, and a record saying so (`audit_torn_line_set_aside`,
    /// with the new file's name, length and SHA-256) is the next link of the chain.
    pub fn open(path: &Path) -> io::Result<AuditLog> {
        AuditLog::open_with(path, Options::default())
    }

    /// [`AuditLog::open`] with durability and checkpoint options. With checkpoints, the
    /// Merkle tree is taken up from the last checkpoint and the records after it in the
    /// file (`checkpoint::resume`); a file that ends before the last checkpoint (records
    /// removed from its end) is refused, naming both sizes.
    pub fn open_with(path: &Path, options: Options) -> io::Result<AuditLog> {
        let IntactEnd {
            seq,
            prev,
            needs_newline,
            torn_at,
        } = intact_end(path)?;
        let set_aside = match torn_at {
            Some((torn, kept_len)) => {
                refuse_symlink(path)?;
                Some(set_torn_aside(path, &torn, kept_len)?)
            }
            None => None,
        };
        let (seq, prev, tree, found) = match &options.checkpoints {
            Some(spec) => checkpoint::resume(spec, path, seq, prev)?,
            None => (seq, prev, None, checkpoint::Found::default()),
        };
        // Records after the last checkpoint were moved aside: the file now ends at a line end.
        let needs_newline = needs_newline && found.set_aside.is_none();
        let mut file = open_append(path)?;
        if needs_newline {
            // An intact last record without its line end: end it, so the next record starts
            // a line of its own (the hash covers the line without its newline).
            file.write_all(b"\n")?;
        }
        let log = AuditLog {
            state: Mutex::new(State {
                path: path.to_owned(),
                file,
                seq,
                prev,
                file_first_seq: seq + 1,
                dirty: false,
                failed_writes: 0,
                tree,
            }),
            queue: Mutex::new(Queue::default()),
            queue_changed: Condvar::new(),
            writing: Mutex::new(()),
            in_hand: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            panic_next: AtomicBool::new(false),
            written: tokio::sync::watch::Sender::new(0),
            torn_set_aside: set_aside.as_ref().map(|a| a.file.clone()),
            options,
            writable: AtomicBool::new(true),
            copy_behind: AtomicBool::new(false),
            last_mark: Mutex::new(None),
        };
        crate::telemetry::metrics::metrics().audit_failing.set(0);
        log.record_the_opening(path, set_aside, &found)?;
        Ok(log)
    }

    /// Records what the opening found: a torn line set aside, and after a restart the record
    /// that opens the log again (signed before any other), with what it says on stderr.
    fn record_the_opening(
        &self,
        path: &Path,
        set_aside: Option<SetAside>,
        found: &checkpoint::Found,
    ) -> io::Result<()> {
        if let Some(aside) = set_aside {
            crate::telemetry::metrics::metrics().audit_torn_lines.inc();
            let mut fields = Map::new();
            fields.insert("message".into(), "audit_torn_line_set_aside".into());
            fields.insert("torn_file".into(), aside.file.display().to_string().into());
            fields.insert("torn_bytes".into(), aside.bytes.into());
            fields.insert("torn_sha256".into(), aside.sha256.into());
            fields.insert("time".into(), now_rfc3339().into());
            self.append(fields)?;
        }
        if found.restart {
            self.append(opened_record(found))?;
            if let Some(aside) = &found.set_aside {
                eprintln!(
                    "psp-gateway: audit log {}: records {} to {} were after the last checkpoint (an unclean stop): no signature covered them, so they are not taken into the log; moved as found to {}",
                    path.display(),
                    aside.first_seq,
                    aside.last_seq,
                    aside.file.display()
                );
            }
            if let Some((first, last)) = found.missing() {
                crate::telemetry::metrics::metrics()
                    .audit_records_lost
                    .inc_by(last + 1 - first);
                eprintln!(
                    "psp-gateway: audit log {}: records {first} to {last} were synced before the stop and are not in the file (cut from its end?)",
                    path.display()
                );
            }
            // The record is signed before any other: what this start found is fixed first. A
            // checkpoint that cannot be written now is counted and tried again at each tick
            // (the start goes on, as a running log does).
            if let Err(e) = self.sync_and_checkpoint(true) {
                eprintln!(
                    "psp-gateway: audit log {}: the restart's record cannot be checkpointed yet: {e}",
                    path.display()
                );
            }
        }
        Ok(())
    }

    /// Appends one record with `fields` (after `seq` and `prev`). A write that fails (a full
    /// disk) is counted (`psp_gateway_audit_write_failures_total`), the log is marked not
    /// writable (the write-failure policy applies until a write succeeds), and the file is cut
    /// back to its last whole record so that a part-written line cannot join the next one.
    pub fn append(&self, fields: Map<String, Value>) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.append_locked(&mut state, fields)
            .inspect_err(|_| self.record_lost(&mut state))
    }

    /// A record could not be written: counted, and the log is not writable until one is.
    fn record_lost(&self, state: &mut State) {
        crate::telemetry::metrics::metrics()
            .audit_write_failures
            .inc();
        state.failed_writes += 1;
        if self.writable.swap(false, Ordering::AcqRel) {
            crate::telemetry::metrics::metrics().audit_failing.set(1);
        }
    }

    /// Writes one record. A failure is its caller's to count: a record lost is
    /// ([`Self::record_lost`]), a failed recovery note is not (it is written again at the next
    /// tick, and counting it would make `records_lost` grow with the outage's length).
    fn append_locked(&self, state: &mut State, fields: Map<String, Value>) -> io::Result<()> {
        self.append_all_locked(state, std::iter::once(fields))
    }

    /// Writes records with one `write` call: all of them, or none (the file is cut back to
    /// where it ended, and the chain goes on from the last record written).
    fn append_all_locked(
        &self,
        state: &mut State,
        records: impl IntoIterator<Item = Map<String, Value>>,
    ) -> io::Result<()> {
        let (mut seq, mut prev) = (state.seq, state.prev.clone());
        let mut bytes = Vec::new();
        // Where each line ends in `bytes`, for the Merkle tree once they are written.
        let mut ends = Vec::new();
        for fields in records {
            seq += 1;
            let line = render(seq, &prev, fields);
            prev = crate::hex::lower(&crate::hex::sha256(line.as_bytes()));
            bytes.extend_from_slice(line.as_bytes());
            ends.push(bytes.len());
            bytes.push(b'\n');
        }
        if ends.is_empty() {
            return Ok(());
        }
        // Where a regular file ends before this record (one fstat, next to the write itself).
        let before = state
            .file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        if let Err(e) = state
            .file
            .write_all(&bytes)
            .and_then(|()| state.file.flush())
        {
            if let Some(before) = before
                && state.file.metadata().is_ok_and(|m| m.len() > before)
            {
                // Best effort: when even this fails, the torn line stays, and the next start
                // sets it aside.
                let _ = state.file.set_len(before);
            }
            return Err(e);
        }
        state.seq = seq;
        state.prev = prev;
        state.dirty = true;
        if let Some(tree) = &mut state.tree {
            let mut start = 0;
            for end in ends {
                tree.push(&bytes[start..end]);
                start = end + 1;
            }
        }
        Ok(())
    }

    /// Takes one record from a request (`record`: an event as [`super::json_lines`] writes
    /// it). With the writer thread running, it waits in the queue ([`recorded`] waits for
    /// its write); before, it is written at once.
    pub fn take(&self, record: &[u8]) {
        let mut queue = self.lock_queue();
        if !queue.writer {
            drop(queue);
            if let Err(e) = self.append_records(record) {
                self.report_failed_write(&e);
            }
            return;
        }
        while queue.records.len() >= MAX_QUEUED {
            if self.options.on_write_failure == WriteFailurePolicy::FailOpen {
                drop(queue);
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                self.record_lost(&mut state);
                return;
            }
            queue = self
                .queue_changed
                .wait(queue)
                .unwrap_or_else(|p| p.into_inner());
        }
        let was_empty = queue.records.is_empty();
        queue.records.extend_from_slice(record);
        queue.taken += 1;
        if was_empty {
            self.queue_changed.notify_all();
        }
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Formats, chains and writes `records` (each as [`super::json_lines`] writes one) in
    /// one `write`; a failure loses them all, each counted.
    fn append_records(&self, records: &[u8]) -> io::Result<()> {
        let mut fields = Vec::new();
        super::json_lines::each_record(records, |record| match record {
            // A record that does not read back is a defect, not the caller's: said in the
            // chain, not dropped silently.
            Ok(record) => {
                fields.push(record_fields(&record).unwrap_or_else(|| unreadable(record.bytes)));
            }
            Err(bytes) => fields.push(unreadable(bytes)),
        });
        let count = fields.len();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.append_all_locked(&mut state, fields).inspect_err(|_| {
            for _ in 0..count {
                self.record_lost(&mut state);
            }
        })
    }

    /// The writer thread's round: waits (at most `wait`) for records, then writes all that
    /// came with one `write` and tells the requests waiting for them. `false` when nothing
    /// came.
    fn write_queued(&self, wait: Duration) -> bool {
        {
            let queue = self.lock_queue();
            if queue.records.is_empty() {
                drop(
                    self.queue_changed
                        .wait_timeout(queue, wait)
                        .unwrap_or_else(|p| p.into_inner()),
                );
            }
        }
        // One writer at a time (the thread, and `close` at shutdown): batches are chained in
        // the order they were taken.
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let (records, last) = {
            let mut queue = self.lock_queue();
            if queue.records.is_empty() {
                return false;
            }
            let records = std::mem::take(&mut queue.records);
            self.queue_changed.notify_all();
            self.in_hand.store(queue.taken, Ordering::Release);
            (records, queue.taken)
        };
        #[cfg(test)]
        if self.panic_next.swap(false, Ordering::AcqRel) {
            panic!("a test's panic in the audit writer");
        }
        if let Err(e) = self.append_records(&records) {
            self.report_failed_write(&e);
        }
        self.mark_written(last);
        true
    }

    /// The records up to `last` are written (or lost): the requests waiting for them go on.
    /// The number only grows.
    fn mark_written(&self, last: u64) {
        self.written.send_if_modified(|done| {
            let newer = last > *done;
            *done = (*done).max(last);
            newer
        });
    }

    /// A round of the writer thread panicked (a defect): the records it had taken are lost,
    /// each counted as a failed write (so `fail_closed` refuses until a record is written
    /// again), and the requests waiting for them go on rather than wait for ever.
    fn writer_panicked(&self) {
        let taken = self.in_hand.load(Ordering::Acquire);
        let lost = taken.saturating_sub(*self.written.borrow());
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            for _ in 0..lost {
                self.record_lost(&mut state);
            }
        }
        let _ = writeln!(
            io::stderr(),
            "psp-gateway: the audit log's writer failed; {lost} record(s) lost"
        );
        self.mark_written(taken);
    }

    fn report_failed_write(&self, e: &io::Error) {
        // Not through tracing: an audit event would come back here. Nor eprintln!, which
        // panics when stderr fails.
        let _ = writeln!(
            io::stderr(),
            "psp-gateway: cannot append to the audit log {}: {e}",
            self.path().display()
        );
    }

    /// Waits until every record taken so far is written (or lost: the write-failure policy
    /// then refuses the next requests). Returns at once without the writer thread, where
    /// each record was written when it was taken.
    pub async fn recorded(&self) {
        let taken = self.lock_queue().taken;
        let mut written = self.written.subscribe();
        // The sender lives as long as the log: the wait ends only when the number is reached.
        let _ = written.wait_for(|&done| done >= taken).await;
    }

    /// Opens the file again (after a rotation moved it away); the chain goes on. With
    /// checkpoints, the records written so far are synced and checkpointed first, so that a
    /// new file always starts right after a checkpoint (a restart takes the tree up from it).
    pub fn reopen(&self) -> io::Result<()> {
        if let Err(e) = self.sync_and_checkpoint(true) {
            // The rotation goes on (the disk may be filling up); a restart before the next
            // checkpoint finds the records between in the rotated file (docs/evidence.md).
            eprintln!(
                "psp-gateway: audit log {}: no checkpoint before the rotation: {e}",
                self.path().display()
            );
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.file = open_append(&state.path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{}: {e}; the records go on in the file moved away",
                    state.path.display()
                ),
            )
        })?;
        state.file_first_seq = state.seq + 1;
        Ok(())
    }

    /// Whether the last write succeeded.
    pub fn writable(&self) -> bool {
        self.writable.load(Ordering::Acquire)
    }

    /// Whether requests are to be refused now: the log cannot be written and its policy is
    /// `fail_closed`.
    pub fn refusing(&self) -> bool {
        self.options.on_write_failure == WriteFailurePolicy::FailClosed && !self.writable()
    }

    /// Starts the thread that keeps `log` durable ([`AuditLog::tick`] every
    /// `sync_interval`); it stops when the last other reference to the log is dropped.
    pub fn start(log: &Arc<AuditLog>) -> io::Result<()> {
        let weak: Weak<AuditLog> = Arc::downgrade(log);
        std::thread::Builder::new()
            .name("psp-gateway-audit-writer".to_owned())
            .spawn(move || {
                loop {
                    let Some(log) = weak.upgrade() else { return };
                    let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        log.write_queued(Duration::from_millis(250))
                    }));
                    if round.is_err() {
                        log.writer_panicked();
                    }
                }
            })?;
        log.lock_queue().writer = true;
        let weak: Weak<AuditLog> = Arc::downgrade(log);
        let interval = log.options.sync_interval;
        std::thread::Builder::new()
            .name("psp-gateway-audit".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(interval);
                    let Some(log) = weak.upgrade() else { return };
                    log.tick();
                }
            })
            .map(drop)
    }

    /// One round of the durability thread: a failing log is tried again (a record saying
    /// how many were lost), a file removed while open is replaced (a record naming what it
    /// held), written records are `fsync`ed, and a checkpoint is signed when one is due.
    pub fn tick(&self) {
        self.replace_if_removed();
        if !self.writable() {
            self.try_recover();
        }
        if let Err(e) = self.sync_and_checkpoint(false) {
            // Not through tracing: an audit event would come back here.
            eprintln!(
                "psp-gateway: audit log {}: cannot sync or checkpoint: {e}",
                self.path().display()
            );
        }
    }

    /// Writes the record that says the log takes records again, and how many it lost. A
    /// failed attempt is no record lost: it is only tried again at the next tick.
    fn try_recover(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if removed(&state.file) {
            // Not into a file no one will read: [`Self::replace_if_removed`] first.
            return;
        }
        let lost = state.failed_writes;
        let mut fields = Map::new();
        fields.insert("message".into(), "audit_log_writable_again".into());
        fields.insert("records_lost".into(), lost.into());
        fields.insert("time".into(), now_rfc3339().into());
        if self.append_locked(&mut state, fields).is_ok() {
            state.failed_writes = 0;
            self.writable.store(true, Ordering::Release);
            crate::telemetry::metrics::metrics().audit_failing.set(0);
            eprintln!(
                "psp-gateway: audit log {} takes records again; {lost} could not be written",
                state.path.display()
            );
        }
    }

    /// A file removed while open takes records no one will read: open a new one at the
    /// path, and begin it with a record naming the records the removed file held.
    /// When no new file can be opened (a read-only or full file system), the log is not
    /// writable until one can: the records written meanwhile go to the removed file, and the
    /// record that starts the new file names them with the others.
    fn replace_if_removed(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !removed(&state.file) {
            return;
        }
        let file = match open_append(&state.path) {
            Ok(file) => file,
            Err(e) => {
                if self.writable.swap(false, Ordering::AcqRel) {
                    crate::telemetry::metrics::metrics().audit_failing.set(1);
                    eprintln!(
                        "psp-gateway: audit log {} was removed while open, and no new file can be opened there: {e}; records from {} on are in the removed file until one can",
                        state.path.display(),
                        state.file_first_seq
                    );
                }
                return;
            }
        };
        state.file = file;
        let (first, last) = (state.file_first_seq, state.seq);
        state.file_first_seq = last + 1;
        let lost = (last + 1).saturating_sub(first);
        crate::telemetry::metrics::metrics()
            .audit_records_lost
            .inc_by(lost);
        let mut fields = Map::new();
        fields.insert("message".into(), "audit_file_removed_while_open".into());
        fields.insert("first_seq_lost".into(), first.into());
        fields.insert("last_seq_lost".into(), last.into());
        fields.insert("records_lost".into(), lost.into());
        fields.insert("time".into(), now_rfc3339().into());
        if self.append_locked(&mut state, fields).is_err() {
            self.record_lost(&mut state);
        }
        eprintln!(
            "psp-gateway: audit log {} was removed while open: records {first} to {last} were in it; a new file goes on with the chain",
            state.path.display()
        );
    }

    /// `fsync`s what was written, then, when one is due (or `force`d), signs and appends a
    /// checkpoint of the records synced; then the high-water mark (`checkpoint::Mark`) names
    /// the last record synced.
    fn sync_and_checkpoint(&self, force: bool) -> io::Result<()> {
        self.sync_and_checkpoint_as(force, false)
    }

    /// [`Self::sync_and_checkpoint`]; `clean` at a clean stop, where the mark says so once
    /// the last checkpoint is written.
    fn sync_and_checkpoint_as(&self, force: bool, clean: bool) -> io::Result<()> {
        let (file, due, synced) = {
            let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let state = &mut *guard;
            let due = match (&state.tree, &self.options.checkpoints) {
                (Some(tree), Some(spec)) => tree.due(spec, force, state.seq, &state.prev),
                _ => None,
            };
            if !state.dirty && due.is_none() && !clean {
                drop(guard);
                if self.copy_behind() {
                    self.sync_copy(None, None);
                }
                return Ok(());
            }
            state.dirty = false;
            (
                state.file.try_clone()?,
                due,
                (state.seq, state.prev.clone()),
            )
        };
        // Outside the lock: requests go on writing while the disk syncs. A pipe or a device
        // (`/dev/stderr`) has nothing to sync.
        if file.metadata().is_ok_and(|m| m.is_file())
            && let Err(e) = file.sync_data()
        {
            // Written records may not be on the disk: the log is failing (fail_closed refuses
            // requests) until a record is written and synced again.
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.dirty = true;
            if self.writable.swap(false, Ordering::AcqRel) {
                crate::telemetry::metrics::metrics().audit_failing.set(1);
            }
            return Err(e);
        }
        let Some(spec) = &self.options.checkpoints else {
            return Ok(());
        };
        let mut result = Ok(());
        let mut line = None;
        if let Some(head) = due {
            let m = crate::telemetry::metrics::metrics();
            match checkpoint::write(spec, &head) {
                Ok(written) => {
                    m.audit_checkpoints.inc();
                    let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(tree) = &mut state.tree {
                        tree.checkpointed(head.size);
                    }
                    line = Some(written);
                }
                Err(e) => {
                    m.audit_checkpoint_failures.inc();
                    result = Err(e);
                }
            }
        }
        let mark = checkpoint::Mark {
            seq: synced.0,
            chain_head: synced.1,
            time: now_rfc3339(),
            clean: clean && result.is_ok(),
        };
        if let Err(e) = checkpoint::write_mark(&spec.file, &mark) {
            crate::telemetry::metrics::metrics()
                .audit_checkpoint_failures
                .inc();
            eprintln!(
                "psp-gateway: audit log {}: cannot write the high-water mark beside {}: {e}",
                self.path().display(),
                spec.file.display()
            );
        }
        self.sync_copy(line.as_deref(), Some(&mark));
        *self.last_mark.lock().unwrap_or_else(|p| p.into_inner()) = Some(mark);
        result
    }

    /// Brings `checkpoint_copy` along: appends the checkpoint `line` just written (or, when
    /// the copy is behind, catches it up from the checkpoint file) and writes the high-water
    /// mark beside it (`mark`, or the last one written). The copy is well only when both
    /// succeed ([`Self::copy_done`]).
    fn sync_copy(&self, line: Option<&[u8]>, mark: Option<&checkpoint::Mark>) {
        let Some(spec) = &self.options.checkpoints else {
            return;
        };
        let Some(copy) = &spec.copy else { return };
        let mut done = if self.copy_behind() {
            checkpoint::catch_up_copy(spec, copy)
        } else {
            line.map_or(Ok(()), |line| checkpoint::append_copy(copy, line))
        };
        let last = self
            .last_mark
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(mark) = mark.cloned().or(last) {
            let written = checkpoint::write_mark(copy, &mark);
            if done.is_ok() {
                done = written;
            }
        }
        self.copy_done(done);
    }

    /// Counts a failed write of the copy (the copy is then behind: caught up at each tick,
    /// shown by readiness), or notes that it caught up.
    fn copy_done(&self, done: io::Result<()>) {
        let m = crate::telemetry::metrics::metrics();
        match done {
            Ok(()) => {
                if self.copy_behind.swap(false, Ordering::AcqRel) {
                    m.audit_checkpoint_copy_failing.set(0);
                    eprintln!(
                        "psp-gateway: audit log {}: checkpoint_copy is written again and has every checkpoint",
                        self.path().display()
                    );
                }
            }
            Err(e) => {
                m.audit_checkpoint_copy_failures.inc();
                if !self.copy_behind.swap(true, Ordering::AcqRel) {
                    m.audit_checkpoint_copy_failing.set(1);
                    eprintln!(
                        "psp-gateway: audit log {}: checkpoint_copy cannot be written: {e}; it is caught up from the checkpoint file when it can",
                        self.path().display()
                    );
                }
            }
        }
    }

    /// Whether `checkpoint_copy` lacks checkpoints because its writes failed.
    pub fn copy_behind(&self) -> bool {
        self.copy_behind.load(Ordering::Acquire)
    }

    /// Writes what is queued, then syncs and checkpoints what was written, and marks the
    /// stop clean (at shutdown).
    pub fn close(&self) -> io::Result<()> {
        while self.write_queued(Duration::ZERO) {}
        self.sync_and_checkpoint_as(true, true)
    }

    /// The file a torn final line was moved to when the log was opened, if there was one.
    pub fn torn_set_aside(&self) -> Option<&Path> {
        self.torn_set_aside.as_deref()
    }

    pub fn path(&self) -> PathBuf {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .path
            .clone()
    }
}

/// The record a restart opens the log with (`audit_log_opened`): what it found, so that the
/// checkpoint signed right after commits to it. `audit verify --checkpoints` reports each.
fn opened_record(found: &checkpoint::Found) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("message".into(), "audit_log_opened".into());
    fields.insert("clean_stop".into(), found.clean_stop().into());
    fields.insert("checkpoint".into(), found.checkpoint.into());
    fields.insert("found_last_seq".into(), found.last_seq.into());
    fields.insert(
        "synced_seq".into(),
        found.mark.as_ref().map(|m| m.seq).into(),
    );
    if let Some(matches) = found.mark_matches {
        fields.insert("synced_record_matches".into(), matches.into());
    }
    if let Some((first, last)) = found.missing() {
        fields.insert("missing_first_seq".into(), first.into());
        fields.insert("missing_last_seq".into(), last.into());
    }
    if let Some(aside) = &found.set_aside {
        fields.insert(
            "set_aside_file".into(),
            aside.file.display().to_string().into(),
        );
        fields.insert("set_aside_first_seq".into(), aside.first_seq.into());
        fields.insert("set_aside_last_seq".into(), aside.last_seq.into());
        fields.insert("set_aside_bytes".into(), aside.bytes.into());
        fields.insert("set_aside_sha256".into(), aside.sha256.clone().into());
    }
    fields.insert("time".into(), now_rfc3339().into());
    fields
}

/// Whether `file` was removed (unlinked) while open.
fn removed(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 0)
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// One record as a line: `seq`, `prev`, then the fields (in the map's order).
fn render(seq: u64, prev: &str, fields: Map<String, Value>) -> String {
    let mut out = String::from("{");
    out.push_str(&format!("\"seq\":{seq},\"prev\":\"{prev}\""));
    for (k, v) in fields {
        if k == "seq" || k == "prev" {
            continue;
        }
        out.push(',');
        out.push_str(&Value::String(k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}

fn open_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

/// The end of an audit file: its last bytes, and where they start.
struct Tail {
    bytes: Vec<u8>,
    offset: u64,
}

/// The last `2 * MAX_LINE_BYTES` of `path` (room for a torn line and the record before it);
/// `None` when it does not exist, is empty, or is not a regular file (a FIFO or a device
/// such as `/dev/stderr` is written to, never read back).
fn read_tail(path: &Path) -> io::Result<Option<Tail>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(None);
    }
    let window = 2 * MAX_LINE_BYTES as u64;
    let offset = meta.len().saturating_sub(window);
    f.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    f.take(window).read_to_end(&mut bytes)?;
    Ok(Some(Tail { bytes, offset }))
}

/// What the end of a file holds.
#[derive(Debug, PartialEq, Eq)]
struct LastRecord {
    /// The last intact record's `seq` and line (without its line end).
    record: Option<(u64, String)>,
    /// The bytes after it that are no record (a torn line), if any.
    torn: Option<Vec<u8>>,
    /// Where the torn bytes start in the tail (its length when there are none).
    end: usize,
    /// The intact record is the very end of the file, without its newline.
    needs_newline: bool,
}

/// Reads a line as a record: JSON with a numeric `seq` and a string `prev`.
fn as_record(line: &[u8]) -> Option<(u64, String)> {
    let text = std::str::from_utf8(line).ok()?;
    let record: Value = serde_json::from_str(text).ok()?;
    let seq = record["seq"].as_u64()?;
    record["prev"].as_str()?;
    Some((seq, text.to_owned()))
}

/// Finds the last intact record of `tail`, and the torn final line after it: at most one
/// line (with or without its newline) is taken as torn, and only when it is the last.
fn last_record(tail: &[u8]) -> LastRecord {
    // Lines with their end offsets (after the newline, if any); blank lines are skipped.
    let mut lines: Vec<(usize, usize, bool)> = Vec::new(); // (start, end, has newline)
    let mut start = 0;
    while start < tail.len() {
        let (end, nl) = match memchr::memchr(b'\n', &tail[start..]) {
            Some(i) => (start + i + 1, true),
            None => (tail.len(), false),
        };
        lines.push((start, end, nl));
        start = end;
    }
    // The bytes hashed are the line up to its LF, a CR included (a converted file does not
    // continue the chain it was signed as).
    let content = |&(s, e, nl): &(usize, usize, bool)| &tail[s..if nl { e - 1 } else { e }];
    let mut it = lines
        .iter()
        .rev()
        .filter(|l| !content(l).iter().all(u8::is_ascii_whitespace));
    let Some(last) = it.next() else {
        return LastRecord {
            record: None,
            torn: None,
            end: tail.len(),
            needs_newline: false,
        };
    };
    if let Some(record) = as_record(content(last)) {
        return LastRecord {
            record: Some(record),
            torn: None,
            end: tail.len(),
            needs_newline: !last.2 && last.1 == tail.len(),
        };
    }
    let torn = tail[last.0..].to_vec();
    LastRecord {
        record: it.next().and_then(|l| as_record(content(l))),
        torn: Some(torn),
        end: last.0,
        needs_newline: false,
    }
}

/// The torn bytes, kept as evidence.
struct SetAside {
    file: PathBuf,
    bytes: u64,
    sha256: String,
}

/// A file the log changes at start (a torn line or records set aside) must be the file
/// itself: cutting the target of a symbolic link would cut whatever file it names.
pub(crate) fn refuse_symlink(path: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link: a file the audit log changes at start (a torn line or records set aside) must be the file itself; nothing was changed",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Copies `torn` to `<path>.torn-<unix time>` (synced), then cuts `path` back to `kept_len`.
fn set_torn_aside(path: &Path, torn: &[u8], kept_len: u64) -> io::Result<SetAside> {
    let (aside, mut out) = create_beside(path, "torn")?;
    out.write_all(torn)?;
    out.sync_all()?;
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(kept_len)?;
    f.sync_all()?;
    Ok(SetAside {
        file: aside,
        bytes: torn.len() as u64,
        sha256: crate::hex::lower(&crate::hex::sha256(torn)),
    })
}

/// Creates a new file beside `path` for bytes set aside: `<path>.<kind>-<unix time>`, or
/// `…-2`, `…-3` when that exists (never overwritten).
pub(crate) fn create_beside(path: &Path, kind: &str) -> io::Result<(PathBuf, File)> {
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut n = 1;
    loop {
        let mut name = path.as_os_str().to_owned();
        if n == 1 {
            name.push(format!(".{kind}-{stamp}"));
        } else {
            name.push(format!(".{kind}-{stamp}-{n}"));
        }
        let aside = PathBuf::from(name);
        match OpenOptions::new().write(true).create_new(true).open(&aside) {
            Ok(f) => return Ok((aside, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Where a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: line {line}: {why}", file.display())]
pub struct Broken {
    pub file: PathBuf,
    pub line: usize,
    pub why: String,
}

/// What a verified chain covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// The hash of the last line: compare it with the one kept off the host.
    pub last_hash: String,
    /// Whether the first record continues a chain not given here (`prev` is not
    /// [`GENESIS`]).
    pub starts_mid_chain: bool,
    /// The records saying a torn final line was set aside at start (a write was cut short,
    /// its record is lost), each described with its file, line and the torn bytes' file.
    pub torn_lines_set_aside: Vec<String>,
    /// What restarts found and set aside (`audit_log_opened`): records after the last
    /// checkpoint at an unclean stop, which no signature covers in their true form.
    pub set_aside_at_restart: Vec<String>,
    /// What restarts found missing or changed: records synced before the stop that the file
    /// no longer held, or held with other bytes. `audit verify --checkpoints` fails on these
    /// unless told to accept them.
    pub losses: Vec<String>,
    /// Request records that do not stand with the signed decision their `decision_id`
    /// names: no such signed decision in the files (from record 1), or another verdict; and
    /// signed decisions whose `decision_id` is not their JWS's hash. `audit verify` fails on
    /// these.
    pub decisions_unmatched: Vec<String>,
    /// Request records naming a decision no record signed, after the log recorded a loss
    /// (its record may be what was lost): said, not a failure.
    pub decisions_unknown_after_loss: Vec<String>,
}

/// What a signed decision states, as far as a request record must agree with it.
struct SignedDecision {
    verdict: String,
    certificate: Option<String>,
    site: Option<String>,
}

/// The signed decisions met so far (`decision_id` → what it states), to hold each request
/// record to the decision it names; with `keys`, each decision's JWS is verified too.
struct Decisions<'k> {
    signed: std::collections::HashMap<String, SignedDecision>,
    keys: Option<&'k crate::evidence::Jwks>,
    /// A record before says records were lost (a full disk, a removed file, a torn line, a
    /// restart's set-aside or missing records): a signed decision may have been among them.
    after_loss: bool,
    /// Request records naming a decision no record before them signed.
    unknown: Vec<String>,
}

impl Decisions<'_> {
    /// At the end of the files: a record naming an unknown decision fails the verification,
    /// unless the log recorded a loss of records anywhere (under `fail_open` the record saying
    /// so comes after the records lost), when the decision's own record may be what was lost:
    /// then it is said, not a failure.
    fn finish(self, out: &mut Verified) {
        if self.after_loss {
            out.decisions_unknown_after_loss
                .extend(self.unknown.into_iter().map(|u| {
                    format!("{u}; the log records a loss of records, which may have held it")
                }));
        } else {
            out.decisions_unmatched.extend(self.unknown);
        }
    }

    /// Notes a signed decision, or checks a request record against the one it names.
    fn see(&mut self, out: &mut Verified, at: &dyn Fn() -> String, record: &Value) {
        match record["message"].as_str() {
            Some("audit_file_removed_while_open" | "audit_torn_line_set_aside") => {
                self.after_loss = true;
            }
            Some("audit_log_writable_again") if record["records_lost"].as_u64() > Some(0) => {
                self.after_loss = true;
            }
            Some("audit_log_opened")
                if record.get("set_aside_file").is_some()
                    || record.get("missing_first_seq").is_some() =>
            {
                self.after_loss = true;
            }
            Some("gateway decision signed") => self.signed_record(out, at, record),
            Some("gateway decision") => {
                let Some(id) = record["decision_id"].as_str().filter(|id| !id.is_empty()) else {
                    return;
                };
                let said = record["decision"].as_str().unwrap_or("");
                let Some(signed) = self.signed.get(id) else {
                    // Only a log read from record 1 holds every decision signed before; after
                    // a recorded loss, the decision's own record may be what was lost.
                    if !out.starts_mid_chain {
                        self.unknown.push(format!(
                            "{}: it names decision {id}, which no record before it signed",
                            at()
                        ));
                    }
                    return;
                };
                let mut differs = Vec::new();
                if signed.verdict != said {
                    differs.push(format!(
                        "the record says {said}, the signed decision {id} it names says {}",
                        signed.verdict
                    ));
                }
                for (member, theirs) in
                    [("fingerprint", &signed.certificate), ("site", &signed.site)]
                {
                    let ours = record[member].as_str();
                    if theirs.is_some() && ours != theirs.as_deref() {
                        differs.push(format!(
                            "the record's {member} is {}, the signed decision {id} is about {}",
                            ours.unwrap_or("(none)"),
                            theirs.as_deref().unwrap_or("(none)")
                        ));
                    }
                }
                if !differs.is_empty() {
                    out.decisions_unmatched
                        .push(format!("{}: {}", at(), differs.join("; ")));
                }
            }
            _ => {}
        }
    }

    /// A `gateway decision signed` record: its id must be its JWS's hash; its JWS verify
    /// with the keys, when given; what it states is kept for the records naming it.
    fn signed_record(&mut self, out: &mut Verified, at: &dyn Fn() -> String, record: &Value) {
        let (Some(id), Some(jws)) = (
            record["decision_id"].as_str(),
            record["decision_jws"].as_str(),
        ) else {
            out.decisions_unmatched
                .push(format!("{}: a signed decision without its id or JWS", at()));
            return;
        };
        let hashed = crate::hex::lower(&crate::hex::sha256(jws.as_bytes())[..16]);
        if hashed != id {
            out.decisions_unmatched.push(format!(
                "{}: decision_id {id} is not the hash of its JWS ({hashed})",
                at()
            ));
            return;
        }
        let payload = match self.keys {
            Some(keys) => match crate::evidence::verify_compact(keys, jws) {
                Ok((_, payload)) => Some(payload),
                Err(e) => {
                    out.decisions_unmatched.push(format!(
                        "{}: the signed decision {id} does not verify with the keys given: {e}",
                        at()
                    ));
                    return;
                }
            },
            None => jws
                .split('.')
                .nth(1)
                .and_then(crate::evidence::b64url_decode_pub),
        };
        let payload: Value = payload
            .and_then(|p| serde_json::from_slice(&p).ok())
            .unwrap_or(Value::Null);
        let verdict = record["signed_decision"].as_str().unwrap_or("").to_owned();
        if payload["decision"].as_str().is_some_and(|d| d != verdict) {
            out.decisions_unmatched.push(format!(
                "{}: the record says the decision {id} is {verdict}, its JWS says {}",
                at(),
                payload["decision"]
            ));
        }
        self.signed.insert(
            id.to_owned(),
            SignedDecision {
                verdict,
                certificate: payload["psp"]["certificateSha256"]
                    .as_str()
                    .map(str::to_owned),
                site: payload["site"].as_str().map(str::to_owned),
            },
        );
    }
}

/// Checks the chain through `files`, in order (oldest first). Each line, in turn: read within
/// the line limit (`read_record_line`), parsed as a record with its `seq` and `prev`
/// (`parse_record`), linked to the record before it (`check_link`), a torn-line record noted,
/// and hashed for the next.
pub fn verify(files: &[PathBuf]) -> Result<Verified, Broken> {
    verify_with(files, |_, _| {})
}

/// [`verify`], handing each record's `seq` and line (without its line end) to `each`.
pub fn verify_with(files: &[PathBuf], each: impl FnMut(u64, &str)) -> Result<Verified, Broken> {
    verify_with_keys(files, None, each)
}

/// [`verify_with`]; with `keys`, the JWS of every signed decision in the log is verified too.
pub fn verify_with_keys(
    files: &[PathBuf],
    keys: Option<&crate::evidence::Jwks>,
    mut each: impl FnMut(u64, &str),
) -> Result<Verified, Broken> {
    let mut out = Verified {
        records: 0,
        first_seq: None,
        last_seq: None,
        last_hash: GENESIS.to_owned(),
        starts_mid_chain: false,
        torn_lines_set_aside: Vec::new(),
        set_aside_at_restart: Vec::new(),
        losses: Vec::new(),
        decisions_unmatched: Vec::new(),
        decisions_unknown_after_loss: Vec::new(),
    };
    let mut decisions = Decisions {
        signed: std::collections::HashMap::new(),
        keys,
        after_loss: false,
        unknown: Vec::new(),
    };
    let mut expected: Option<(u64, String)> = None;
    for file in files {
        let broken = |line: usize, why: String| Broken {
            file: file.clone(),
            line,
            why,
        };
        let f = File::open(file).map_err(|e| broken(0, format!("cannot read: {e}")))?;
        let mut reader = BufReader::new(f);
        let mut n = 0;
        loop {
            n += 1;
            let Some((line, ended)) = read_record_line(&mut reader, n, &broken)? else {
                break;
            };
            let (record, seq, prev) = parse_record(&line, ended, n, &broken)?;
            check_link(&mut out, expected.as_ref(), seq, prev, n, &broken)?;
            if record["message"] == "audit_torn_line_set_aside" {
                out.torn_lines_set_aside.push(format!(
                    "{} line {n} (seq {seq}): a torn line was set aside at start in {} ({} bytes, SHA-256 {})",
                    file.display(),
                    record["torn_file"].as_str().unwrap_or("?"),
                    record["torn_bytes"],
                    record["torn_sha256"].as_str().unwrap_or("?"),
                ));
            }
            if record["message"] == "audit_log_opened" {
                restart_findings(&mut out, file, n, seq, &record);
            }
            decisions.see(
                &mut out,
                &|| format!("{} line {n} (seq {seq})", file.display()),
                &record,
            );
            each(seq, &line);
            let hash = crate::hex::lower(&crate::hex::sha256(line.as_bytes()));
            expected = Some((seq + 1, hash.clone()));
            out.records += 1;
            out.last_seq = Some(seq);
            out.last_hash = hash;
        }
    }
    decisions.finish(&mut out);
    Ok(out)
}

/// What the restart record `record` (line `n`, `seq`, of `file`) says was set aside, missing
/// or changed, into `out`. A set-aside file is looked for where the record names it and
/// beside `file`, and its SHA-256 compared with the record's.
fn restart_findings(out: &mut Verified, file: &Path, n: usize, seq: u64, record: &Value) {
    let at = format!(
        "{} line {n} (seq {seq}), the start at {}",
        file.display(),
        record["time"].as_str().unwrap_or("?")
    );
    if let (Some(first), Some(last)) = (
        record["missing_first_seq"].as_u64(),
        record["missing_last_seq"].as_u64(),
    ) {
        out.losses.push(format!(
            "{at}: records {first} to {last} were synced to disk before the stop and are not in the file (cut from its end); the high-water mark kept beside the checkpoints named them"
        ));
    }
    if record["synced_record_matches"] == false {
        out.losses.push(format!(
            "{at}: record {} as found is not the record synced before the stop (its hash is not the high-water mark's): records were rewritten after they were synced",
            record["synced_seq"]
        ));
    }
    let Some(named) = record["set_aside_file"].as_str() else {
        return;
    };
    let named = Path::new(named);
    let beside = named
        .file_name()
        .map(|name| file.parent().unwrap_or(Path::new("")).join(name));
    let sha256 = record["set_aside_sha256"].as_str().unwrap_or("?");
    let found = [Some(named.to_owned()), beside]
        .into_iter()
        .flatten()
        .find_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes)));
    let state = match found {
        None => "the file is not here".to_owned(),
        Some((p, bytes)) if crate::hex::lower(&crate::hex::sha256(&bytes)) == sha256 => {
            format!("{} holds them, SHA-256 as recorded", p.display())
        }
        Some((p, _)) => format!(
            "{} is there but its SHA-256 is not the one recorded: it was changed since",
            p.display()
        ),
    };
    out.set_aside_at_restart.push(format!(
        "{at}: records {} to {} were after the last checkpoint (an unclean stop); they were not taken into the log and no signature covers them in their true form; moved as found to {} ({} bytes, SHA-256 {sha256}): {state}",
        record["set_aside_first_seq"],
        record["set_aside_last_seq"],
        named.display(),
        record["set_aside_bytes"],
    ));
}

/// Line `n` of an audit file as text, without its line end, and whether it had one (`None`
/// at the end of the file). One line at a time, never more than [`MAX_LINE_BYTES`] of it in
/// memory: a file with no line ends (a device, a pipe, a corrupted file) is refused at the
/// limit.
fn read_record_line(
    reader: &mut impl BufRead,
    n: usize,
    broken: &impl Fn(usize, String) -> Broken,
) -> Result<Option<(String, bool)>, Broken> {
    let mut bytes = Vec::new();
    let read = reader
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', &mut bytes)
        .map_err(|e| broken(n, format!("cannot read: {e}")))?;
    if read == 0 {
        return Ok(None);
    }
    let ended = bytes.last() == Some(&b'\n');
    if ended {
        bytes.pop();
        // The bytes hashed and signed are the line up to its LF: a CR before it is no part of
        // any record the log wrote (a file converted to CRLF is not the file signed).
        if bytes.last() == Some(&b'\r') {
            return Err(broken(
                n,
                "the line ends in CR LF: the log writes LF line ends, and the bytes hashed and signed are the line up to its LF (was the file converted?)".to_owned(),
            ));
        }
    } else if bytes.len() > MAX_LINE_BYTES {
        return Err(broken(
            n,
            format!("the line is over the {MAX_LINE_BYTES}-byte limit, too long to be a record"),
        ));
    }
    let line =
        String::from_utf8(bytes).map_err(|_| broken(n, "the line is not UTF-8 text".to_owned()))?;
    Ok(Some((line, ended)))
}

/// Line `n` as a record: not empty, JSON (a last line without a line end is torn), with its
/// `seq` and `prev`.
fn parse_record(
    line: &str,
    ended: bool,
    n: usize,
    broken: &impl Fn(usize, String) -> Broken,
) -> Result<(Value, u64, String), Broken> {
    if line.trim().is_empty() {
        return Err(broken(n, "an empty line".to_owned()));
    }
    let record: Value = serde_json::from_str(line).map_err(|e| {
        if ended {
            broken(n, format!("not a JSON record ({e})"))
        } else {
            broken(
                n,
                format!(
                    "the last line is torn (cut short, no line end: a write that failed, a full disk?); `serve` sets it aside at start ({e})"
                ),
            )
        }
    })?;
    let seq = record["seq"]
        .as_u64()
        .ok_or_else(|| broken(n, "no seq".to_owned()))?;
    let prev = record["prev"]
        .as_str()
        .ok_or_else(|| broken(n, "no prev".to_owned()))?
        .to_owned();
    Ok((record, seq, prev))
}

/// The record `seq`, `prev` on line `n` continues the chain: the first one starts it (at seq 1
/// after [`GENESIS`], or mid-chain), each next one has the next seq and the previous line's
/// hash as `prev`.
fn check_link(
    out: &mut Verified,
    expected: Option<&(u64, String)>,
    seq: u64,
    prev: String,
    n: usize,
    broken: &impl Fn(usize, String) -> Broken,
) -> Result<(), Broken> {
    match expected {
        None => {
            out.first_seq = Some(seq);
            out.starts_mid_chain = prev != GENESIS;
            if !out.starts_mid_chain && seq != 1 {
                return Err(broken(
                    n,
                    format!("seq {seq} starts a new chain, which starts at 1"),
                ));
            }
        }
        Some((want_seq, want_prev)) => {
            if seq != *want_seq {
                return Err(broken(
                    n,
                    format!(
                        "seq {seq} where {want_seq} was expected: a record is missing or out of order"
                    ),
                ));
            }
            if prev != *want_prev {
                return Err(broken(
                    n,
                    "prev is not the hash of the record before it: that record was edited, removed or replaced".to_owned(),
                ));
            }
        }
    }
    Ok(())
}

/// The process's audit log, when `[audit] file` is configured (for SIGHUP).
static GLOBAL: OnceLock<Arc<AuditLog>> = OnceLock::new();

/// Makes `log` the process's audit log; a second call does nothing.
pub fn install(log: Arc<AuditLog>) {
    let _ = GLOBAL.set(log);
}

/// Reopens the process's audit log, if there is one (SIGHUP, after a rotation).
pub fn reopen() -> io::Result<()> {
    match GLOBAL.get() {
        Some(log) => log.reopen(),
        None => Ok(()),
    }
}

/// Whether requests are to be refused now because the process's audit log cannot take their
/// records (`fail_closed`; [`AuditLog::refusing`]). `false` without an audit log.
pub fn refusing_requests() -> bool {
    GLOBAL.get().is_some_and(|log| log.refusing())
}

/// The process's audit log, if there is one.
pub fn global() -> Option<Arc<AuditLog>> {
    GLOBAL.get().cloned()
}

/// Under `fail_closed`, waits until the records taken so far by the process's audit log are
/// written ([`AuditLog::recorded`]); a request calls it after its audit record, before its
/// answer leaves. At once without an audit log, or under `fail_open`.
pub async fn recorded() {
    if let Some(log) = GLOBAL.get()
        && log.options.on_write_failure == WriteFailurePolicy::FailClosed
    {
        log.recorded().await;
    }
}

/// A record's fields as the chain holds them: the event's fields by name, values as
/// `tracing` gave them (numbers and booleans as such, a float as its `Debug` text), and
/// `time`, when the event was logged (RFC 3339).
fn record_fields(record: &super::json_lines::Decoded<'_>) -> Option<Map<String, Value>> {
    use super::json_lines::FieldValue;
    let mut fields = Map::new();
    record.each_field(|name, value| {
        let value = match value {
            FieldValue::Str(s) => Value::String(s.to_owned()),
            FieldValue::U64(n) => n.into(),
            FieldValue::I64(n) => n.into(),
            FieldValue::Bool(b) => b.into(),
            FieldValue::F64(x) => Value::String(format!("{x:?}")),
        };
        fields.insert(name.to_owned(), value);
    })?;
    fields.insert(
        "time".to_owned(),
        Value::String(
            super::json_lines::datetime(record.secs, record.nanos)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        ),
    );
    Some(fields)
}

/// The record standing for one that did not read back (`bytes` long).
fn unreadable(bytes: usize) -> Map<String, Value> {
    let mut note = Map::new();
    note.insert("message".into(), "audit_record_unreadable".into());
    note.insert("bytes".into(), bytes.into());
    note.insert("time".into(), now_rfc3339().into());
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests that make audit writes fail, or read `audit_write_failures`, run one at a time:
    /// the counter is the process's, and one test's failures would change another's count.
    fn failure_counter_lock() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LOCK.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    use serde_json::json;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("audit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    fn record(i: u64) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("message".into(), json!("check"));
        m.insert("auth_number".into(), json!(format!("PSDXX-TEST-{i:06}")));
        m
    }

    fn write(path: &Path, n: u64) {
        let log = AuditLog::open(path).expect("open");
        for i in 0..n {
            log.append(record(i)).expect("append");
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn an_untouched_log_verifies_and_reopening_continues_the_chain() {
        let dir = scratch("ok");
        let path = dir.join("audit.jsonl");
        write(&path, 3);
        write(&path, 2); // a restart: the chain continues from the last line
        let v = verify(std::slice::from_ref(&path)).expect("verifies");
        assert_eq!((v.records, v.first_seq, v.last_seq), (5, Some(1), Some(5)));
        assert!(!v.starts_mid_chain);
        assert!(lines(&path)[0].starts_with(&format!("{{\"seq\":1,\"prev\":\"{GENESIS}\"")));
    }

    #[test]
    fn a_removed_reordered_or_edited_line_is_named() {
        let dir = scratch("tamper");
        let path = dir.join("audit.jsonl");
        write(&path, 5);
        let original = lines(&path);
        let check = |l: Vec<String>| {
            std::fs::write(&path, l.join("\n") + "\n").expect("write");
            verify(std::slice::from_ref(&path)).unwrap_err()
        };
        let mut removed = original.clone();
        removed.remove(2);
        let e = check(removed);
        assert_eq!(e.line, 3);
        assert!(e.why.contains("seq 4 where 3 was expected"), "{e}");

        let mut swapped = original.clone();
        swapped.swap(1, 2);
        assert_eq!(check(swapped).line, 2);

        let mut edited = original.clone();
        edited[1] = edited[1].replace("PSDXX-TEST-000001", "PSDXX-TEST-000099");
        let e = check(edited);
        assert_eq!(e.line, 3, "the line after the edited one names it: {e}");
        assert!(e.why.contains("was edited, removed or replaced"), "{e}");

        // A forged line with the right seq but a made-up prev.
        let mut forged = original.clone();
        forged[4] = forged[4].replace(&forged[4][17..81], GENESIS);
        assert_eq!(check(forged).line, 5);
    }

    #[test]
    fn rotation_keeps_the_chain_across_files() {
        let dir = scratch("rotate");
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).expect("open");
        log.append(record(1)).expect("append");
        log.append(record(2)).expect("append");
        std::fs::rename(&path, dir.join("audit.jsonl.1")).expect("rotate");
        log.reopen().expect("reopen");
        log.append(record(3)).expect("append");
        let v = verify(&[dir.join("audit.jsonl.1"), path.clone()]).expect("verifies");
        assert_eq!(v.records, 3);
        // The new file alone continues a chain that is not given.
        let alone = verify(std::slice::from_ref(&path)).expect("verifies");
        assert!(alone.starts_mid_chain);
        // Files given in the wrong order break it.
        let e = verify(&[path.clone(), dir.join("audit.jsonl.1")]).unwrap_err();
        assert!(e.why.contains("seq 1 where 4 was expected"), "{e}");
    }
    #[test]
    fn a_torn_final_line_is_set_aside_and_the_chain_goes_on_from_the_last_intact_record() {
        let dir = scratch("torn");
        let path = dir.join("audit.jsonl");
        write(&path, 2);
        let mut bytes = std::fs::read(&path).expect("read");
        let intact_len = bytes.len();
        bytes.extend_from_slice(b"{\"seq\":3,\"pr");
        std::fs::write(&path, &bytes).expect("write");
        let e = verify(std::slice::from_ref(&path)).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.why.contains("torn"), "{e}");

        let log = AuditLog::open(&path).expect("a torn line does not stop the opening");
        let aside = log.torn_set_aside().expect("set aside").to_owned();
        assert_eq!(std::fs::read(&aside).expect("kept"), b"{\"seq\":3,\"pr");
        log.append(record(9)).expect("append");
        let l = lines(&path);
        assert_eq!(l.len(), 4);
        assert_eq!(
            std::fs::read(&path).expect("read")[..intact_len],
            bytes[..intact_len]
        );
        let v = verify(std::slice::from_ref(&path)).expect("verifies");
        assert_eq!((v.records, v.last_seq), (4, Some(4)));
        assert_eq!(
            v.torn_lines_set_aside.len(),
            1,
            "{:?}",
            v.torn_lines_set_aside
        );
    }

    /// A subscriber handing every event to `log` as the gateway's audit layer does.
    struct Taker(Arc<AuditLog>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Taker {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            crate::telemetry::json_lines::with_record(event, |r| self.0.take(r));
        }
    }

    /// `log` with its writer and durability threads running.
    fn started(log: AuditLog) -> Arc<AuditLog> {
        let log = Arc::new(log);
        AuditLog::start(&log).expect("threads");
        log
    }

    /// [`AuditLog::recorded`], from a test's thread.
    fn wait_recorded(log: &AuditLog) {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(log.recorded());
    }

    fn taking(log: &Arc<AuditLog>) -> impl tracing::Subscriber + Send + Sync {
        use tracing_subscriber::layer::SubscriberExt;
        tracing_subscriber::registry().with(Taker(Arc::clone(log)))
    }

    #[test]
    fn records_taken_from_many_threads_are_formatted_chained_and_written_by_the_writer() {
        let dir = scratch("writer");
        let path = dir.join("audit.jsonl");
        let log = started(AuditLog::open(&path).expect("open"));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    tracing::subscriber::with_default(taking(&log), || {
                        for i in 0..500u64 {
                            tracing::info!(target: "audit", n = t * 1000 + i, quote = "a\"b\n",
                                ok = true, neg = -1i64, ratio = 0.5f64, "check");
                        }
                    });
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        log.close().expect("close");
        let verified = verify(std::slice::from_ref(&path)).expect("an unbroken chain");
        assert_eq!(verified.records, 2000);
        let mut seen: Vec<u64> = lines(&path)
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("JSON");
                assert_eq!(v["message"], "check");
                assert_eq!(v["quote"], "a\"b\n");
                assert_eq!(
                    (&v["ok"], &v["neg"], &v["ratio"]),
                    (&json!(true), &json!(-1), &json!("0.5"))
                );
                time::OffsetDateTime::parse(
                    v["time"].as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .expect("time");
                v["n"].as_u64().unwrap()
            })
            .collect();
        seen.sort_unstable();
        let want: Vec<u64> = (0..4u64)
            .flat_map(|t| (0..500).map(move |i| t * 1000 + i))
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn no_request_goes_on_before_its_record_is_in_the_file() {
        // What `recorded` promises a fail_closed request: when it returns, the record it
        // logged is in the file (read by another handle), for each of 300 requests in turn.
        let dir = scratch("recorded");
        let path = dir.join("audit.jsonl");
        let log = started(AuditLog::open(&path).expect("open"));
        tracing::subscriber::with_default(taking(&log), || {
            for i in 0..300u64 {
                tracing::info!(target: "audit", n = i, "check");
                wait_recorded(&log);
                let text = std::fs::read_to_string(&path).expect("read");
                let last: Value =
                    serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
                assert_eq!(
                    last["n"], i,
                    "request {i} went on before its record was written"
                );
            }
        });
    }

    #[test]
    fn a_failed_batch_loses_its_records_counted_and_a_fail_closed_log_refuses() {
        let _serial = failure_counter_lock();
        let log =
            started(AuditLog::open_with(Path::new("/dev/full"), Options::default()).expect("open"));
        let failures = crate::telemetry::metrics::metrics()
            .audit_write_failures
            .get();
        tracing::subscriber::with_default(taking(&log), || {
            for i in 0..3u64 {
                tracing::info!(target: "audit", n = i, "check");
            }
            wait_recorded(&log);
        });
        assert!(log.refusing(), "the records were not written");
        assert!(
            crate::telemetry::metrics::metrics()
                .audit_write_failures
                .get()
                >= failures + 3
        );
    }

    #[test]
    fn a_record_that_does_not_read_back_is_named_in_the_chain_not_dropped() {
        let dir = scratch("unreadable");
        let path = dir.join("audit.jsonl");
        let log = Arc::new(AuditLog::open(&path).expect("open"));
        // Queued, not written: the record's bytes as a request hands them over.
        log.lock_queue().writer = true;
        tracing::subscriber::with_default(taking(&log), || {
            tracing::info!(target: "audit", n = 1u64, "check");
        });
        let good = std::mem::take(&mut log.lock_queue().records);
        // The last field, `n`: kind, name, eight bytes. An unknown kind.
        let mut bad = good.clone();
        let at = bad.len() - (1 + 8 + 1 + 8);
        bad[at] = 9;
        log.append_records(&[&good[..], &bad, &good].concat())
            .expect("written");
        let lines = lines(&path);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        let second: Value = serde_json::from_str(&lines[1]).expect("JSON");
        assert_eq!(second["message"], "audit_record_unreadable");
        assert_eq!(second["bytes"], good.len() - 8);
        for i in [0, 2] {
            let v: Value = serde_json::from_str(&lines[i]).expect("JSON");
            assert_eq!(v["n"], 1);
        }
        verify(std::slice::from_ref(&path)).expect("an unbroken chain");
    }

    #[test]
    fn a_writer_that_panics_loses_its_batch_counted_and_leaves_no_request_waiting() {
        let _serial = failure_counter_lock();
        let dir = scratch("writer-panic");
        let path = dir.join("audit.jsonl");
        let log = started(AuditLog::open(&path).expect("open"));
        let failures = crate::telemetry::metrics::metrics()
            .audit_write_failures
            .get();
        log.panic_next.store(true, Ordering::Release);
        tracing::subscriber::with_default(taking(&log), || {
            for i in 0..3u64 {
                tracing::info!(target: "audit", n = i, "check");
            }
            // Returns: the waiting request is not left waiting for ever.
            wait_recorded(&log);
            // Counted as failed writes, which make a fail_closed log refuse until the
            // durability thread writes again (it may have by now).
            let now = crate::telemetry::metrics::metrics()
                .audit_write_failures
                .get();
            assert!(now > failures, "{now} failed writes, {failures} before");
            // The thread goes on: the next record is written.
            tracing::info!(target: "audit", n = 3u64, "check");
            wait_recorded(&log);
        });
        let text = std::fs::read_to_string(&path).expect("read");
        let ns: Vec<u64> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["n"].as_u64())
            .collect();
        assert!(ns.ends_with(&[3]), "{text}");
        assert!(
            !ns.contains(&0),
            "the lost batch is not in the file: {text}"
        );
    }

    #[test]
    fn a_full_queue_makes_fail_closed_requests_wait_and_fail_open_ones_count_the_loss() {
        let _serial = failure_counter_lock();
        let record = {
            let mut one = Vec::new();
            let log = Arc::new(AuditLog::open(&scratch("queue-probe").join("a")).expect("open"));
            log.lock_queue().writer = true;
            tracing::subscriber::with_default(taking(&log), || {
                tracing::info!(target: "audit", pad = %"x".repeat(64 * 1024), "check");
            });
            one.extend_from_slice(&log.lock_queue().records);
            one
        };
        let fill = MAX_QUEUED / record.len() + 1;
        for policy in [WriteFailurePolicy::FailOpen, WriteFailurePolicy::FailClosed] {
            let dir = scratch(&format!("queue-{policy:?}"));
            let options = Options {
                on_write_failure: policy,
                ..Options::default()
            };
            let log =
                Arc::new(AuditLog::open_with(&dir.join("audit.jsonl"), options).expect("open"));
            // The writer "runs" but takes nothing until told to.
            log.lock_queue().writer = true;
            for _ in 0..fill {
                log.take(&record);
            }
            assert!(log.lock_queue().records.len() >= MAX_QUEUED);
            let extra = {
                let log = Arc::clone(&log);
                let record = record.clone();
                std::thread::spawn(move || log.take(&record))
            };
            std::thread::sleep(Duration::from_millis(200));
            match policy {
                WriteFailurePolicy::FailOpen => {
                    assert!(extra.is_finished(), "a fail_open request does not wait");
                    assert!(!log.writable(), "its record is counted lost");
                    assert_eq!(log.lock_queue().taken, fill as u64);
                }
                WriteFailurePolicy::FailClosed => {
                    assert!(!extra.is_finished(), "a fail_closed request waits for room");
                    assert!(log.write_queued(Duration::ZERO));
                    extra.join().unwrap();
                    assert_eq!(log.lock_queue().taken, fill as u64 + 1);
                    assert!(log.write_queued(Duration::ZERO));
                    assert!(log.writable());
                    let held = log.lock_queue().records.len();
                    assert_eq!(held, 0);
                }
            }
        }
    }

    #[test]
    fn a_failed_write_makes_a_fail_closed_log_refuse_and_a_fail_open_one_not() {
        let _serial = failure_counter_lock();
        for (policy, refusing) in [
            (WriteFailurePolicy::FailClosed, true),
            (WriteFailurePolicy::FailOpen, false),
        ] {
            let options = Options {
                on_write_failure: policy,
                ..Options::default()
            };
            let log = AuditLog::open_with(Path::new("/dev/full"), options).expect("open");
            assert!(log.writable() && !log.refusing());
            assert!(log.append(record(1)).is_err());
            assert!(!log.writable());
            assert_eq!(log.refusing(), refusing, "{policy:?}");
            // The durability thread's attempts fail too, and count no record.
            let failures = crate::telemetry::metrics::metrics()
                .audit_write_failures
                .get();
            log.tick();
            assert!(!log.writable());
            assert_eq!(
                crate::telemetry::metrics::metrics()
                    .audit_write_failures
                    .get(),
                failures
            );
        }
    }

    #[test]
    fn a_last_record_without_its_line_end_is_ended_not_joined_to_the_next() {
        let dir = scratch("no-newline");
        let path = dir.join("audit.jsonl");
        write(&path, 2);
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.trim_end()).expect("write");
        write(&path, 1);
        let v = verify(std::slice::from_ref(&path)).expect("verifies");
        assert_eq!(v.records, 3);
        assert!(v.torn_lines_set_aside.is_empty());
    }

    #[test]
    fn a_failed_write_is_counted_and_the_chain_goes_on_from_the_last_written_record() {
        let _serial = failure_counter_lock();
        let dir = scratch("full");
        let path = dir.join("audit.jsonl");
        write(&path, 1);
        let log = AuditLog::open(&path).expect("open");
        let failures = crate::telemetry::metrics::metrics()
            .audit_write_failures
            .get();
        // A full disk, for one record.
        let real = std::mem::replace(
            &mut log.state.lock().expect("lock").file,
            OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full"),
        );
        assert!(log.append(record(2)).is_err());
        assert!(
            crate::telemetry::metrics::metrics()
                .audit_write_failures
                .get()
                > failures
        );
        log.state.lock().expect("lock").file = real;
        log.append(record(3)).expect("append");
        let v = verify(std::slice::from_ref(&path)).expect("verifies");
        assert_eq!((v.records, v.last_seq), (2, Some(2)));
    }

    #[test]
    fn failed_recovery_attempts_are_not_counted_as_lost_records() {
        let _serial = failure_counter_lock();
        let dir = scratch("recovery");
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).expect("open");
        log.append(record(1)).expect("append");
        let real = std::mem::replace(
            &mut log.state.lock().expect("lock").file,
            OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full"),
        );
        assert!(log.append(record(2)).is_err());
        assert!(!log.writable());
        // The disk stays full for three ticks: the recovery note fails each time.
        for _ in 0..3 {
            log.tick();
        }
        assert!(!log.writable());
        assert_eq!(log.state.lock().expect("lock").failed_writes, 1);
        log.state.lock().expect("lock").file = real;
        log.tick();
        assert!(log.writable());
        let last: Value = serde_json::from_str(lines(&path).last().expect("a line")).expect("JSON");
        assert_eq!(last["message"], "audit_log_writable_again");
        assert_eq!(
            last["records_lost"], 1,
            "the one lost record, not the attempts"
        );
    }
}
