//! Files replaced whole: a process killed at any instant (`kill -9`, an OOM kill, a power
//! cut once the data is on the disk) leaves the old file or the new one under the name,
//! never a part of one. Every file the service writes for itself goes through here: trusted
//! lists and their LOTL (`trust::cache`), downloaded and converted registers
//! (`register::download`, `register::native`), the register history (`register::history`).
//!
//! The steps (POSIX `rename(2)` replaces a name atomically):
//! 1. the new content is written to a temporary file in the same directory,
//!    `.<name>.<pid>-<n>.tmp`, and `fsync`ed;
//! 2. the temporary file is renamed over the name;
//! 3. the directory is `fsync`ed, so the rename itself survives a power cut.
//!
//! A temporary file is created new (`O_CREAT | O_EXCL`): a name someone planted in the
//! directory beforehand, a symbolic link to another file included, is removed and never
//! written through.
//!
//! A process killed between 1 and 2 leaves its temporary file behind. Readers never open
//! one (they open the name), and the next write of the same name removes the temporaries of
//! processes that no longer run (the process id in the name, looked up in `/proc`); a
//! temporary file of a running process, this one's or another's, is left alone.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` whole (see the module documentation).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes what `write` writes to `path` whole: `write` is given the temporary file (wrap it
/// in a `BufWriter` for many small writes, and flush it). On any error the temporary file is
/// removed and `path` is untouched.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary(path)?;
    let written = (|| {
        let mut f = create(&tmp)?;
        write(&mut f)?;
        f.sync_all()
    })();
    match written {
        Ok(()) => commit(&tmp, path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Copies `from` to `to` whole.
pub fn copy_atomic(from: &Path, to: &Path) -> io::Result<()> {
    write_atomic_with(to, |f| {
        let mut source = File::open(from)?;
        io::copy(&mut source, f).map(|_| ())
    })
}

/// A fresh temporary name next to `path`, after removing the temporaries of `path` left by
/// processes that no longer run. The directory must exist (a missing one is the caller's
/// error to report, as for any file it names). For a caller that must do
/// something with the written file before it replaces `path` (a downloaded register is
/// loaded first): write it, `sync_all` it, then [`commit`] it or remove it.
pub fn temporary(path: &Path) -> io::Result<PathBuf> {
    let dir = parent(path);
    let name = file_name(path);
    remove_stale(dir, &name);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(dir.join(format!(".{name}.{}-{n}.tmp", std::process::id())))
}

/// Creates the temporary file `tmp`, new: whatever already has its name (a link someone
/// planted, a file left by an earlier process with the same id) is removed first, once; it is
/// never opened, so never written through.
pub fn create(tmp: &Path) -> io::Result<File> {
    let open = || OpenOptions::new().write(true).create_new(true).open(tmp);
    match open() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(tmp)?;
            open()
        }
        other => other,
    }
}

/// Renames the written and synced `tmp` over `path`, then syncs the directory; on failure
/// `tmp` is removed.
pub fn commit(tmp: &Path, path: &Path) -> io::Result<()> {
    if let Err(e) = std::fs::rename(tmp, path) {
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    sync_dir(parent(path))
}

/// `fsync` of a directory: what makes the names created, renamed or removed in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Numbers the temporary files of this process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Removes `.<name>.<pid>-<n>.tmp` in `dir` for every `pid` that is not a running process.
/// Without `/proc` (not Linux) nothing is removed. Best effort: a failure only leaves a file.
fn remove_stale(dir: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("psp-durable-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = scratch("replace");
        let path = dir.join("lotl.xml");
        write_atomic(&path, b"old").expect("write");
        write_atomic(&path, b"new").expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(names(&dir), ["lotl.xml"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_removes_its_temporary() {
        let dir = scratch("failed");
        let path = dir.join("register.json");
        write_atomic(&path, b"old").expect("write");
        let failed = write_atomic_with(&path, |f| {
            f.write_all(b"half of the new")?;
            Err(io::Error::other("the source broke off"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        assert_eq!(names(&dir), ["register.json"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Someone who can write to the directory plants symbolic links under the temporary
    /// names the next writes will use, pointing at a file of theirs' choosing: a write replaces
    /// the name whole and the file they point at is untouched.
    #[test]
    fn a_link_planted_under_a_temporary_name_is_never_written_through() {
        let dir = scratch("planted");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"not yours").expect("write");
        let next = COUNTER.load(Ordering::Relaxed);
        // Other tests in this binary take numbers too: plant the next hundred.
        for n in next..next + 100 {
            let name = dir.join(format!(".CZ.xml.{}-{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, name).expect("plant a link");
        }
        let path = dir.join("CZ.xml");
        write_atomic(&path, b"the list").expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"the list");
        assert!(!std::fs::symlink_metadata(&path).expect("stat").is_symlink());
        assert_eq!(std::fs::read(&victim).expect("read"), b"not yours");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a killed writer leaves: a temporary with a process id that no longer runs is
    /// removed by the next write of that name; one of a running process (this one), one of
    /// another name and a file that only looks like one are kept.
    #[test]
    fn temporaries_of_dead_processes_are_removed_and_live_ones_kept() {
        let dir = scratch("stale");
        // Beyond the largest pid Linux hands out (2^22): never a running process.
        let dead = dir.join(".CZ.xml.4194305-0.tmp");
        let live = dir.join(format!(".CZ.xml.{}-99.tmp", std::process::id()));
        let other = dir.join(".SK.xml.4194305-0.tmp");
        let odd = dir.join(".CZ.xml.not-a-pid.tmp");
        for p in [&dead, &live, &other, &odd] {
            std::fs::write(p, b"half").expect("write");
        }
        write_atomic(&dir.join("CZ.xml"), b"list").expect("write");
        let left = names(&dir);
        assert!(
            !left.contains(&".CZ.xml.4194305-0.tmp".to_owned()),
            "{left:?}"
        );
        for kept in [&live, &other, &odd] {
            assert!(kept.exists(), "{} removed: {left:?}", kept.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
