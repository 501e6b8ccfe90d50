//! Native register files on disk: read bounded as a regular file, written whole. The format
//! and its reader are psp-check's ([`psp_check::register::native`]).

use std::io::{BufWriter, Read, Write};
use std::path::Path;

use super::RegisterLoadError;
pub use psp_check::register::native::*;

/// Opens a register file, which must be a regular file ([`crate::bounded::open_regular`]).
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    crate::bounded::open_regular(path, "a register file").map_err(|e| match e {
        crate::bounded::BoundedReadError::Io(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
    })
}

/// Reads a native file ([`NativeFile::parse`]).
pub fn read_native_file(path: &Path) -> Result<NativeFile, RegisterLoadError> {
    let read = |source| RegisterLoadError::Read {
        path: path.to_owned(),
        source,
    };
    let mut bytes = Vec::new();
    open_regular(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(read)?;
    NativeFile::parse(&bytes, path)
}

/// Writes a native file whole ([`crate::durable`]): a reader never sees half a file.
pub fn write_native_file(path: &Path, native: &NativeFile) -> Result<(), RegisterLoadError> {
    crate::durable::write_atomic_with(path, |file| {
        let mut out = BufWriter::new(file);
        serde_json::to_writer_pretty(&mut out, native).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()
    })
    .map_err(|source| RegisterLoadError::Write {
        path: path.to_owned(),
        source,
    })
}
