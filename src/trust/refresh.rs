//! Fetching a LOTL source: the LOTL (and its pivots when its signer is not pinned), then
//! every national list it points to, each verified before it replaces the copy in the
//! source's [`cache`](super::cache). A document that cannot be fetched or does not verify
//! leaves the last good copy in place; the reason is in the fetch log.
//!
//! Every download goes through the same client as revocation fetching
//! ([`crate::fetch`]): `http`/`https` only, the `revocation.allow_destinations` policy, no
//! redirects, a time limit, and at most [`MAX_TSL_BYTES`] per document. A location read
//! from a document (a pivot, a national list) is an `http`/`https` URL or nothing: it is
//! never opened as a file, even when the document later verifies. Only the configured LOTL
//! location, the operator's own choice, may be a (regular) file.
//!
//! Rules beyond the signatures (each refusal keeps the last good copy):
//! - a document already past its `NextUpdate` plus the grace is not stored;
//! - a document whose `TSLSequenceNumber` is lower than the stored copy's is not stored (an
//!   old list replayed by whoever sits between us and the publisher).

use std::time::Duration;

use time::OffsetDateTime;

use super::cache::{Attempt, FetchLog, SourceCache};
use super::lotl::{self, VerifiedLotl};
use super::tsl::{self, MAX_TSL_BYTES, TrustedList};
use super::{LotlSpec, TrustLoadError};
use crate::fetch::{AllowDestinations, Fetcher, Limits};

/// How lists are fetched and how often (`[trust]` in the configuration).
#[derive(Debug, Clone)]
pub struct FetchSettings {
    pub allow: AllowDestinations,
    pub connect_timeout: Duration,
    /// Time limit of one download.
    pub timeout: Duration,
    /// `(prefix, replacement)`: where to read a published URL from instead.
    pub mirrors: Vec<(String, String)>,
    /// How often `serve` fetches again.
    pub refresh_interval: Duration,
}

/// One step of a fetch, for a progress display.
#[derive(Debug, Clone)]
pub struct Step<'a> {
    /// Documents done so far, and the total (0 while unknown: the LOTL comes first and says
    /// how many lists there are).
    pub done: usize,
    pub total: usize,
    /// `LOTL`, `pivot`, or a territory.
    pub what: &'a str,
    pub location: &'a str,
    pub attempt: &'a Attempt,
}

/// What a fetch of one source did.
#[derive(Debug, Clone)]
pub struct FetchOutcome {
    pub log: FetchLog,
    /// Documents that could not be fetched or were refused this time.
    pub failures: usize,
    /// Documents stored this time.
    pub stored: usize,
}

/// Fetches trusted lists.
#[derive(Clone)]
pub struct Refresher {
    fetcher: Fetcher,
    settings: FetchSettings,
}

impl Refresher {
    pub fn new(settings: FetchSettings) -> Refresher {
        Refresher {
            fetcher: Fetcher::new(settings.allow, settings.connect_timeout),
            settings,
        }
    }

    pub fn settings(&self) -> &FetchSettings {
        &self.settings
    }

    /// The URL to read `location` from: the first mirror whose prefix starts it rewritten.
    pub fn mirrored(&self, location: &str) -> String {
        for (prefix, to) in &self.settings.mirrors {
            if let Some(rest) = location.strip_prefix(prefix.as_str()) {
                return format!("{to}{rest}");
            }
        }
        location.to_owned()
    }

    /// The bytes at a location read from a list (a pivot, a national list): an `http` or
    /// `https` URL only, through the mirrors and the fetch client (its destination policy,
    /// time and size limits). A location in a document is the document author's choice, and
    /// before the document verifies, anyone's: it is never opened as a file.
    async fn get_published(&self, location: &str) -> Result<Vec<u8>, String> {
        if !is_http_url(location) {
            return Err(format!(
                "location {:?} is not an http or https URL: locations read from a list are fetched, never opened as files",
                excerpt(location)
            ));
        }
        let url = self.mirrored(location);
        let limits = Limits {
            total: self.settings.timeout,
            max_bytes: MAX_TSL_BYTES as u64,
        };
        let via = if url == location {
            String::new()
        } else {
            format!(" (mirror {url})")
        };
        self.fetcher
            .get(&url, limits)
            .await
            .map(|b| b.to_vec())
            .map_err(|e| format!("fetching {location}{via}: {e}"))
    }

    /// The bytes at the configured LOTL location: a URL as [`Self::get_published`], or, as
    /// the operator's own choice, a regular file (never a FIFO or a device), read through a
    /// bounded reader.
    async fn get_configured(&self, location: &str) -> Result<Vec<u8>, String> {
        if is_http_url(location) {
            return self.get_published(location).await;
        }
        let path = std::path::PathBuf::from(location);
        let shown = location.to_owned();
        tokio::task::spawn_blocking(move || read_regular_file(&path))
            .await
            .map_err(|e| format!("{shown}: {e}"))?
            .map_err(|e| format!("{shown}: {e}"))
    }

    /// Fetches the LOTL of source `name` and the lists it points to, storing what verifies.
    /// Fails only when the pinned certificates cannot be read; everything else is in the
    /// outcome's log.
    pub async fn fetch_source(
        &self,
        name: &str,
        spec: &LotlSpec,
        grace: time::Duration,
        now: OffsetDateTime,
        progress: &mut (dyn FnMut(Step<'_>) + Send),
    ) -> Result<FetchOutcome, TrustLoadError> {
        let pinned = spec.pinned(name)?;
        let cache = spec.cache(name);
        let mut log = cache.read_log();
        let (mut failures, mut stored) = (0usize, 0usize);

        let fetched = self.fetch_lotl(spec, &pinned, &cache, grace, now).await;
        let attempt = match &fetched {
            Ok((v, bytes, pivots)) => match cache.store_lotl(bytes, pivots) {
                Ok(()) => {
                    stored += 1;
                    ok(now, &v.lotl.list, &v.pivots_followed)
                }
                Err(e) => failed(
                    now,
                    format!("cannot store in {}: {e}", cache.dir().display()),
                ),
            },
            Err(e) => failed(now, e.clone()),
        };
        if !attempt.ok {
            failures += 1;
        }
        progress(Step {
            done: 1,
            total: 0,
            what: "LOTL",
            location: &spec.location,
            attempt: &attempt,
        });
        log.lotl = Some(attempt);

        // The LOTL that authorises the national lists: the new one, or the last good one.
        let effective = match fetched {
            Ok((v, _, _)) => Some(v.lotl.list),
            Err(_) => cached_lotl(&cache, &pinned),
        };
        if let Some(lotl) = effective {
            let pointers = lotl::national_pointers(&lotl, spec.territories.as_deref());
            let total = pointers.len() + 1;
            for (i, pointer) in pointers.iter().enumerate() {
                let t = pointer.territory.as_str();
                let attempt = match self
                    .fetch_list(&lotl, t, &pointer.location, &cache, grace, now)
                    .await
                {
                    Ok((list, bytes)) => match cache.store_list(t, &bytes) {
                        Ok(()) => {
                            stored += 1;
                            ok(now, &list, &[])
                        }
                        Err(e) => failed(now, format!("cannot store: {e}")),
                    },
                    Err(e) => failed(now, e),
                };
                if !attempt.ok {
                    failures += 1;
                }
                progress(Step {
                    done: i + 2,
                    total,
                    what: t,
                    location: &pointer.location,
                    attempt: &attempt,
                });
                log.lists.insert(t.to_owned(), attempt);
            }
        }
        if let Err(e) = cache.write_log(&log) {
            tracing::warn!(source = name, error = %e, "cannot write the trust fetch log");
        }
        Ok(FetchOutcome {
            log,
            failures,
            stored,
        })
    }

    /// The LOTL, verified (with its pivots when needed), fresh and not older than the stored
    /// one: the verdict, the LOTL's bytes and the pivots' bytes.
    async fn fetch_lotl(
        &self,
        spec: &LotlSpec,
        pinned: &[lotl::Fingerprint],
        cache: &SourceCache,
        grace: time::Duration,
        now: OffsetDateTime,
    ) -> Result<(VerifiedLotl, Vec<u8>, Vec<Vec<u8>>), String> {
        let bytes = self.get_configured(&spec.location).await?;
        let signer = lotl::signer_of(&bytes).map_err(|e| format!("LOTL {e}"))?;
        let mut pivots: Vec<(String, Vec<u8>)> = Vec::new();
        if !pinned.contains(&signer.fingerprint_sha256) {
            // Where the pivots are is read from the LOTL before it is trusted: it only says
            // what to fetch; every pivot must then verify from the pinned keys on.
            let unverified = tsl::parse(&bytes).map_err(|e| format!("LOTL: {e}"))?;
            let locations = lotl::pivot_locations(&unverified);
            if locations.len() > lotl::MAX_PIVOTS {
                return Err(format!(
                    "the LOTL announces {} pivots, more than the {} followed",
                    locations.len(),
                    lotl::MAX_PIVOTS
                ));
            }
            for location in locations {
                let pivot = self.get_published(&location).await?;
                pivots.push((location, pivot));
            }
        }
        let verified = lotl::verify_lotl(&bytes, pinned, &pivots)?;
        fresh(&verified.lotl.list, grace, now)?;
        if let Some(old) = cached_lotl(cache, pinned) {
            not_older(&verified.lotl.list, &old)?;
        }
        Ok((
            verified,
            bytes,
            pivots.into_iter().map(|(_, b)| b).collect(),
        ))
    }

    /// A national list, verified against the LOTL's pointer, fresh and not older than the
    /// stored one.
    async fn fetch_list(
        &self,
        lotl: &TrustedList,
        territory: &str,
        location: &str,
        cache: &SourceCache,
        grace: time::Duration,
        now: OffsetDateTime,
    ) -> Result<(TrustedList, Vec<u8>), String> {
        if !super::cache::is_territory_code(territory) {
            return Err(format!("territory {territory:?} is not a two-letter code"));
        }
        let bytes = self.get_published(location).await?;
        let signed = lotl::verify_national(lotl, territory, &bytes)?;
        fresh(&signed.list, grace, now)?;
        if let Ok(Some(old)) = cache.read_list(territory)
            && let Ok(old) = lotl::verify_national(lotl, territory, &old)
        {
            not_older(&signed.list, &old.list)?;
        }
        Ok((signed.list, bytes))
    }
}

/// The stored LOTL, if it still verifies against the pinned keys and its stored pivots.
fn cached_lotl(cache: &SourceCache, pinned: &[lotl::Fingerprint]) -> Option<TrustedList> {
    let bytes = cache.read_lotl().ok()??;
    let pivots = cache.read_pivots().ok()?;
    lotl::verify_lotl(&bytes, pinned, &pivots)
        .ok()
        .map(|v| v.lotl.list)
}

/// Whether `location` starts with `http://` or `https://` (any case).
fn is_http_url(location: &str) -> bool {
    let lower = location.get(..8).unwrap_or(location).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// At most 200 characters of a location, for a message.
fn excerpt(location: &str) -> String {
    location.chars().take(200).collect()
}

/// A regular file of at most [`MAX_TSL_BYTES`], read through a bounded reader. A FIFO, a
/// device or a directory is refused before it is opened (opening a FIFO would wait for a
/// writer), and again on the open file (the path may have changed in between).
fn read_regular_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let not_regular = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, a device or a directory is never read as a list)",
        )
    };
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.take(MAX_TSL_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TSL_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("over the {MAX_TSL_BYTES}-byte limit"),
        ));
    }
    Ok(bytes)
}

fn fresh(list: &TrustedList, grace: time::Duration, now: OffsetDateTime) -> Result<(), String> {
    match list.next_update {
        Some(next) if next + grace < now => Err(format!(
            "sequence {} is already past its NextUpdate ({}); the stored copy is kept",
            seq(list),
            super::rfc3339(next)
        )),
        Some(_) => Ok(()),
        None => Err("no NextUpdate: a closed list is not stored".to_owned()),
    }
}

fn not_older(new: &TrustedList, old: &TrustedList) -> Result<(), String> {
    match (new.sequence_number, old.sequence_number) {
        (Some(n), Some(o)) if n < o => Err(format!(
            "sequence {n} is older than the stored sequence {o}: refused as a replay; the stored copy is kept"
        )),
        _ => Ok(()),
    }
}

fn seq(list: &TrustedList) -> String {
    list.sequence_number
        .map(|n| n.to_string())
        .unwrap_or_else(|| "?".to_owned())
}

fn ok(now: OffsetDateTime, list: &TrustedList, pivots: &[String]) -> Attempt {
    let through = if pivots.is_empty() {
        String::new()
    } else {
        format!(", verified through {} pivots", pivots.len())
    };
    Attempt {
        at: now,
        ok: true,
        message: format!(
            "sequence {} stored{through}; next update {}",
            seq(list),
            list.next_update
                .map(super::rfc3339)
                .unwrap_or_else(|| "none".to_owned())
        ),
    }
}

fn failed(now: OffsetDateTime, message: String) -> Attempt {
    Attempt {
        at: now,
        ok: false,
        message,
    }
}
