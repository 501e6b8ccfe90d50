//! Fetching the EBA register from where EBA publishes it: the metadata endpoint names the
//! day's ZIP, its size and its SHA-256; the ZIP is downloaded through the shared fetch client
//! ([`crate::fetch`]: destination policy, no redirects, time and size limits), checked against
//! the metadata, loaded in full from a temporary file (which checks the JSON member against
//! the ZIP's `.sha256`), and only then renamed over the configured file. Anything that fails
//! leaves the file, and so the register in use, as it was.
//!
//! ```text
//! GET <url>  →  {"golden_copy_path_context": ".../PSDMD/",
//!                "latest_version_relative_zip_path": "20260816/download-PSDMD-202608160000.zip",
//!                "latest_version_relative_zip_size": "19817208",
//!                "sha256_hash": "…", "timestamp": "Sun Aug 16 00:00:16 UTC 2026"}
//! GET <context><relative path>  →  the ZIP
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::RegisterLoadError;
use super::config::{RegisterConfig, RegisterFileConfig};
use crate::fetch::{FetchError, Fetcher, Limits};

/// Largest metadata answer read (the real one is about 300 bytes).
const MAX_METADATA_BYTES: u64 = 64 * 1024;

/// Largest ZIP downloaded: the real one is about 19 MB.
pub const MAX_ZIP_BYTES: u64 = 256 * 1024 * 1024;

/// The metadata endpoint's answer (only what is used).
#[derive(Debug, Deserialize)]
struct Metadata {
    golden_copy_path_context: String,
    latest_version_relative_zip_path: String,
    /// A number in a string.
    latest_version_relative_zip_size: Option<String>,
    sha256_hash: String,
    timestamp: Option<String>,
}

/// Why a register fetch stored nothing (the file in place stays).
#[derive(Debug, thiserror::Error)]
pub enum FetchEbaError {
    /// The configured file has no `url`.
    #[error("{}: no url to fetch from", path.display())]
    NoUrl { path: PathBuf },
    /// The metadata could not be downloaded.
    #[error("metadata {url}: {source}")]
    Metadata { url: String, source: FetchError },
    /// The metadata is not the EBA file metadata JSON.
    #[error("metadata {url}: not the EBA file metadata ({source})")]
    NotMetadata {
        url: String,
        source: serde_json::Error,
    },
    /// The metadata's ZIP path is absolute, escapes, is a URL or does not name a `.zip`.
    #[error(
        "metadata {url}: latest_version_relative_zip_path {relative:?} is not a relative path to a .zip"
    )]
    BadZipPath { url: String, relative: String },
    /// The metadata's `sha256_hash` is not 64 hex digits.
    #[error("metadata {url}: sha256_hash {hash:?} is not a SHA-256 hex digest")]
    BadHash { url: String, hash: String },
    /// The metadata's `latest_version_relative_zip_size` is not a number.
    #[error("metadata {url}: latest_version_relative_zip_size {size:?} is not a number")]
    BadSize { url: String, size: String },
    /// The announced ZIP is larger than [`MAX_ZIP_BYTES`].
    #[error(
        "metadata {url}: the ZIP is announced at {announced} bytes, over the {MAX_ZIP_BYTES}-byte limit"
    )]
    TooLarge { url: String, announced: u64 },
    /// The ZIP could not be downloaded.
    #[error("ZIP {zip_url}: {source}")]
    Zip { zip_url: String, source: FetchError },
    /// The ZIP's size differs from the announced one.
    #[error("ZIP {zip_url}: {received} bytes received, the metadata announced {announced}")]
    SizeMismatch {
        zip_url: String,
        received: u64,
        announced: u64,
    },
    /// The ZIP's SHA-256 differs from the metadata's.
    #[error("ZIP {zip_url}: SHA-256 {actual}, the metadata says {expected}: not stored")]
    HashMismatch {
        zip_url: String,
        actual: String,
        expected: String,
    },
    /// The temporary file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The downloaded register does not load.
    #[error("downloaded ZIP refused: {0}")]
    Refused(RegisterLoadError),
    /// The temporary file could not be renamed over the configured one.
    #[error("cannot replace {}: {source}", path.display())]
    Replace {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The blocking check task panicked or was cancelled.
    #[error("the check of the download did not finish: {0}")]
    CheckTask(tokio::task::JoinError),
}

/// What a fetch stored.
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub path: PathBuf,
    pub zip_url: String,
    pub bytes: u64,
    /// The metadata's `timestamp`, as published.
    pub published: Option<String>,
    pub entities: usize,
}

/// Downloads the register `file` names by its `url` into its `path` (relative to
/// `base_dir`), verified; see the module documentation. `timeout` bounds each request.
pub async fn fetch_eba(
    fetcher: &Fetcher,
    register: &RegisterConfig,
    file: &RegisterFileConfig,
    base_dir: &Path,
    timeout: Duration,
) -> Result<Downloaded, FetchEbaError> {
    let url = file.url.as_deref().ok_or_else(|| FetchEbaError::NoUrl {
        path: file.path.clone(),
    })?;
    let meta = fetch_metadata(fetcher, url, timeout).await?;
    let announced = announced_zip(url, &meta)?;
    let zip = fetch_zip(fetcher, &announced, timeout).await?;
    let bytes = zip.len() as u64;
    let (target, entities) = store_checked(register, file, base_dir, zip).await?;
    Ok(Downloaded {
        path: target,
        zip_url: announced.zip_url,
        bytes,
        published: meta.timestamp,
        entities,
    })
}

/// The ZIP the metadata announces, its validated SHA-256 and size.
struct AnnouncedZip {
    zip_url: String,
    /// Lower-case hex.
    expected_hash: String,
    /// The announced size, if the metadata gives one.
    declared: Option<u64>,
}

/// Downloads the metadata at `url` and parses it.
async fn fetch_metadata(
    fetcher: &Fetcher,
    url: &str,
    timeout: Duration,
) -> Result<Metadata, FetchEbaError> {
    let body = fetcher
        .get(
            url,
            Limits {
                total: timeout,
                max_bytes: MAX_METADATA_BYTES,
            },
        )
        .await
        .map_err(|source| FetchEbaError::Metadata {
            url: url.to_owned(),
            source,
        })?;
    serde_json::from_slice(&body).map_err(|source| FetchEbaError::NotMetadata {
        url: url.to_owned(),
        source,
    })
}

/// Validates the metadata's ZIP path, SHA-256 and size (against [`MAX_ZIP_BYTES`]), and
/// names the ZIP's URL.
fn announced_zip(url: &str, meta: &Metadata) -> Result<AnnouncedZip, FetchEbaError> {
    let relative = meta.latest_version_relative_zip_path.trim();
    if relative.is_empty()
        || relative.starts_with('/')
        || relative.contains("..")
        || relative.contains("://")
        || !relative.to_ascii_lowercase().ends_with(".zip")
    {
        return Err(FetchEbaError::BadZipPath {
            url: url.to_owned(),
            relative: relative.to_owned(),
        });
    }
    let expected_hash = meta.sha256_hash.trim().to_ascii_lowercase();
    if expected_hash.len() != 64 || !expected_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(FetchEbaError::BadHash {
            url: url.to_owned(),
            hash: meta.sha256_hash.clone(),
        });
    }
    let declared: Option<u64> = match &meta.latest_version_relative_zip_size {
        Some(s) => Some(s.trim().parse().map_err(|_| FetchEbaError::BadSize {
            url: url.to_owned(),
            size: s.clone(),
        })?),
        None => None,
    };
    if declared.is_some_and(|d| d > MAX_ZIP_BYTES) {
        return Err(FetchEbaError::TooLarge {
            url: url.to_owned(),
            announced: declared.unwrap_or_default(),
        });
    }
    Ok(AnnouncedZip {
        zip_url: format!("{}{relative}", meta.golden_copy_path_context),
        expected_hash,
        declared,
    })
}

/// Downloads the announced ZIP and checks its size and SHA-256 against the metadata.
async fn fetch_zip(
    fetcher: &Fetcher,
    announced: &AnnouncedZip,
    timeout: Duration,
) -> Result<bytes::Bytes, FetchEbaError> {
    let zip_url = &announced.zip_url;
    let zip = fetcher
        .get(
            zip_url,
            Limits {
                total: timeout,
                max_bytes: announced.declared.unwrap_or(MAX_ZIP_BYTES),
            },
        )
        .await
        .map_err(|source| FetchEbaError::Zip {
            zip_url: zip_url.clone(),
            source,
        })?;
    if let Some(d) = announced.declared
        && d != zip.len() as u64
    {
        return Err(FetchEbaError::SizeMismatch {
            zip_url: zip_url.clone(),
            received: zip.len() as u64,
            announced: d,
        });
    }
    let actual = crate::hex::lower(&crate::hex::sha256(&zip));
    if actual != announced.expected_hash {
        return Err(FetchEbaError::HashMismatch {
            zip_url: zip_url.clone(),
            actual,
            expected: announced.expected_hash.clone(),
        });
    }
    Ok(zip)
}

/// Writes the verified ZIP to a temporary file next to the target, loads it in full, and
/// only then renames it over the target (on a blocking task); returns the target and the
/// number of entities loaded.
async fn store_checked(
    register: &RegisterConfig,
    file: &RegisterFileConfig,
    base_dir: &Path,
    zip: bytes::Bytes,
) -> Result<(PathBuf, usize), FetchEbaError> {
    // Loaded in full from a temporary file next to the target before it replaces anything.
    let target = base_dir.join(&file.path);
    let tmp = target
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| crate::durable::temporary(&target))
        .map_err(|source| FetchEbaError::Write {
            path: target.clone(),
            source,
        })?;
    let check_config = RegisterConfig {
        files: vec![RegisterFileConfig {
            path: tmp.clone(),
            url: None,
            ..file.clone()
        }],
        ..register.clone()
    };
    let target_for_task = target.clone();
    let entities = tokio::task::spawn_blocking(move || {
        write_load_replace(&zip, &tmp, &target_for_task, &check_config)
    })
    .await
    .map_err(FetchEbaError::CheckTask)??;
    Ok((target, entities))
}

/// Blocking: writes `zip` to `tmp`, loads the register `check_config` names (that file),
/// and renames `tmp` over `target`; a refused or unrenamable `tmp` is removed. Returns the
/// number of entities loaded.
fn write_load_replace(
    zip: &[u8],
    tmp: &Path,
    target: &Path,
    check_config: &RegisterConfig,
) -> Result<usize, FetchEbaError> {
    let write = || -> std::io::Result<()> {
        let mut f = crate::durable::create(tmp)?;
        std::io::Write::write_all(&mut f, zip)?;
        f.sync_all()
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(tmp);
        FetchEbaError::Write {
            path: tmp.to_owned(),
            source,
        }
    })?;
    let loaded = crate::register::load(check_config, Path::new("/"));
    let entities = match loaded {
        Ok((snapshot, _)) => snapshot
            .registers()
            .iter()
            .map(|r| r.entities().len())
            .sum(),
        Err(e) => {
            let _ = std::fs::remove_file(tmp);
            return Err(FetchEbaError::Refused(e));
        }
    };
    crate::durable::commit(tmp, target).map_err(|source| FetchEbaError::Replace {
        path: target.to_owned(),
        source,
    })?;
    Ok(entities)
}
