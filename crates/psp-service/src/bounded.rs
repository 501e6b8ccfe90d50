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
}

/// Reads `path` whole when it holds at most `limit` bytes; `what` names the kind of file in
/// the error (`"a certificate file"`).
pub fn read_file(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, BoundedReadError> {
    let file = std::fs::File::open(path)?;
    read_to_end(file, limit, what)
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
