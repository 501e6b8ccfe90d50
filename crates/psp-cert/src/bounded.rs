//! Reading a named file into memory, never more than a budget, whatever the file is.
//!
//! A size taken from `metadata` is no bound: a pipe, a FIFO, `/dev/zero` or `/proc` file
//! reports 0 bytes and then never ends. Every input file a command reads whole goes through
//! [`read_file`], which reads at most one byte more than the limit (`Read::take`) and refuses
//! the file when that byte came.

use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// Opening or reading failed (it does not exist, permissions, an I/O error).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The file holds more than the limit (or, for a pipe or device, would go on past it).
    #[error("more than the {limit}-byte limit for {what}")]
    TooLarge { limit: u64, what: &'static str },
    /// A regular file was required and this is not one (a FIFO, a device, a directory).
    #[error("not a regular file ({what} is read whole; a FIFO or device is refused)")]
    NotRegular { what: &'static str },
}

/// Reads `path` whole when it holds at most `limit` bytes; `what` names the kind of file in
/// the error (`"a certificate file"`).
pub fn read_file(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, BoundedReadError> {
    let file = std::fs::File::open(path)?;
    read_to_end(file, limit, what)
}

/// Opens `path` when it is a regular file: a FIFO would block the open until something wrote
/// to it (a load, and every reload after it, waited with no sign), and a device never ends.
/// The check and the open are two steps: a file swapped between them is not caught.
pub fn open_regular(path: &Path, what: &'static str) -> Result<std::fs::File, BoundedReadError> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(BoundedReadError::NotRegular { what });
    }
    Ok(std::fs::File::open(path)?)
}

/// As [`read_file`], for a file that must be a regular one ([`open_regular`]): a setting's
/// secret or CA file, read whole at start.
pub fn read_regular_file(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, BoundedReadError> {
    read_to_end(open_regular(path, what)?, limit, what)
}

/// As [`read_file`], for a reader already open.
pub fn read_to_end(
    reader: impl Read,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, BoundedReadError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(BoundedReadError::TooLarge { limit, what });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/attacks/proxy-and-data.md B5 and docs/attacks/replicas.md B2: a FIFO where a
    /// setting names a file blocked the open (and every reload after it); a device never ended.
    #[test]
    fn a_fifo_or_a_device_is_refused_where_a_regular_file_is_required() {
        let dir = std::env::temp_dir().join(format!("psp-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        for path in [
            fifo.as_path(),
            Path::new("/dev/zero"),
            Path::new("/dev/urandom"),
        ] {
            let e = read_regular_file(path, 1024, "a test file").expect_err("refused");
            assert!(
                matches!(e, BoundedReadError::NotRegular { .. }),
                "{}: {e}",
                path.display()
            );
        }
        std::fs::write(dir.join("plain"), b"ok").expect("write");
        assert_eq!(
            read_regular_file(&dir.join("plain"), 1024, "a test file").expect("read"),
            b"ok"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_endless_device_is_refused_at_the_limit_not_read_to_the_end() {
        let e = read_file(Path::new("/dev/zero"), 1024, "a test file").expect_err("refused");
        assert!(
            matches!(e, BoundedReadError::TooLarge { limit: 1024, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("1024-byte limit"), "{e}");
    }

    #[test]
    fn a_reader_of_exactly_the_limit_is_read_and_one_byte_more_is_not() {
        assert_eq!(
            read_to_end(&[7u8; 16][..], 16, "x")
                .expect("at the limit")
                .len(),
            16
        );
        assert!(matches!(
            read_to_end(&[7u8; 17][..], 16, "x"),
            Err(BoundedReadError::TooLarge { .. })
        ));
    }
}
