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
//! What the chain cannot show: lines cut from the end of the last file (nothing follows
//! them), or from the start of the first file given. Ship the file off the host as it grows
//! (the usual log pipeline) and keep the last `seq` and hash seen to close both gaps.
//!
//! Every record is written with one `write` call on a file opened for appending, so it
//! reaches the operating system at once.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

/// The hash of "no previous line": the chain of a brand-new log starts from it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Longest line read back when reopening or verifying (records are a few hundred bytes).
const MAX_LINE_BYTES: usize = 1 << 20;

struct State {
    path: PathBuf,
    file: File,
    seq: u64,
    prev: String,
}

/// An open, chained audit log.
pub struct AuditLog {
    state: Mutex<State>,
}

impl AuditLog {
    /// Opens `path` for appending. When it already holds records, the chain continues from
    /// its last line.
    pub fn open(path: &Path) -> io::Result<AuditLog> {
        let (seq, prev) = match last_line(path)? {
            Some(line) => {
                let record: Value = serde_json::from_str(&line).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: the last line is not an audit record: {e}",
                            path.display()
                        ),
                    )
                })?;
                let seq = record["seq"].as_u64().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: the last line has no seq", path.display()),
                    )
                })?;
                (seq, crate::hex::lower(&crate::hex::sha256(line.as_bytes())))
            }
            None => (0, GENESIS.to_owned()),
        };
        Ok(AuditLog {
            state: Mutex::new(State {
                path: path.to_owned(),
                file: open_append(path)?,
                seq,
                prev,
            }),
        })
    }

    /// Appends one record with `fields` (after `seq` and `prev`).
    pub fn append(&self, fields: Map<String, Value>) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let seq = state.seq + 1;
        let line = render(seq, &state.prev, fields);
        let mut bytes = line.clone().into_bytes();
        bytes.push(b'\n');
        state.file.write_all(&bytes)?;
        state.file.flush()?;
        state.seq = seq;
        state.prev = crate::hex::lower(&crate::hex::sha256(line.as_bytes()));
        Ok(())
    }

    /// Opens the file again (after a rotation moved it away); the chain goes on.
    pub fn reopen(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.file = open_append(&state.path)?;
        Ok(())
    }

    pub fn path(&self) -> PathBuf {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .path
            .clone()
    }
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

/// The last non-empty line of `path`, if it exists and has one.
fn last_line(path: &Path) -> io::Result<Option<String>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(MAX_LINE_BYTES as u64);
    f.seek(SeekFrom::Start(start))?;
    let mut tail = String::new();
    f.take(MAX_LINE_BYTES as u64).read_to_string(&mut tail)?;
    Ok(tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned))
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
}

/// Checks the chain through `files`, in order (oldest first).
pub fn verify(files: &[PathBuf]) -> Result<Verified, Broken> {
    let mut out = Verified {
        records: 0,
        first_seq: None,
        last_seq: None,
        last_hash: GENESIS.to_owned(),
        starts_mid_chain: false,
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
            // One line at a time, never more than MAX_LINE_BYTES of it in memory: a file with
            // no line ends (a device, a pipe, a corrupted file) is refused at the limit.
            let mut bytes = Vec::new();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut bytes)
                .map_err(|e| broken(n, format!("cannot read: {e}")))?;
            if read == 0 {
                break;
            }
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
                // As `BufRead::lines`: a CRLF line end is a line end.
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
            } else if bytes.len() > MAX_LINE_BYTES {
                return Err(broken(
                    n,
                    format!(
                        "the line is over the {MAX_LINE_BYTES}-byte limit, too long to be a record"
                    ),
                ));
            }
            let line = String::from_utf8(bytes)
                .map_err(|_| broken(n, "the line is not UTF-8 text".to_owned()))?;
            if line.trim().is_empty() {
                return Err(broken(n, "an empty line".to_owned()));
            }
            let record: Value = serde_json::from_str(&line)
                .map_err(|e| broken(n, format!("not a JSON record ({e})")))?;
            let seq = record["seq"]
                .as_u64()
                .ok_or_else(|| broken(n, "no seq".to_owned()))?;
            let prev = record["prev"]
                .as_str()
                .ok_or_else(|| broken(n, "no prev".to_owned()))?;
            match &expected {
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
                    if prev != want_prev {
                        return Err(broken(
                            n,
                            "prev is not the hash of the record before it: that record was edited, removed or replaced".to_owned(),
                        ));
                    }
                }
            }
            let hash = crate::hex::lower(&crate::hex::sha256(line.as_bytes()));
            expected = Some((seq + 1, hash.clone()));
            out.records += 1;
            out.last_seq = Some(seq);
            out.last_hash = hash;
        }
    }
    Ok(out)
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

/// The process's audit log, if there is one.
pub fn global() -> Option<Arc<AuditLog>> {
    GLOBAL.get().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
