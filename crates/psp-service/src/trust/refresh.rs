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
//! - a document without `TSLSequenceNumber`, or issued more than
//!   [`super::MAX_CLOCK_SKEW`] in the future, is not stored ([`super::not_admissible`]);
//! - a document whose signer was not valid at its `ListIssueDateTime` is not stored
//!   ([`super::lotl::signer_valid_at_issue`]);
//! - a document whose `TSLSequenceNumber` is lower than the stored copy's, or than the
//!   highest ever accepted (`sequences.json`), is not stored (an old list replayed by whoever
//!   sits between us and the publisher).

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::cache::{Attempt, FetchLog, SourceCache};
use super::lotl::{self, LotlError, VerifiedLotl};
use super::tsl::{self, MAX_TSL_BYTES, TrustedList, TslError};
use super::{LotlSpec, TrustLoadError};
use crate::fetch::{AllowDestinations, FetchError, Fetcher, Limits};

/// Why one document of a round was not fetched or not stored. The text goes to the fetch
/// log; the last good copy stays.
#[derive(Debug, thiserror::Error)]
enum RefreshError {
    /// A location read from a list is not an `http`/`https` URL.
    #[error(
        "location {location:?} is not an http or https URL: locations read from a list are fetched, never opened as files"
    )]
    NotHttpUrl {
        /// At most 200 characters of the location.
        location: String,
    },
    /// The download failed.
    #[error("fetching {location}{}: {source}", via(.mirror))]
    Fetch {
        location: String,
        /// The mirror URL it was read from, when not the location itself.
        mirror: Option<String>,
        source: FetchError,
    },
    /// The task reading the configured LOTL file did not finish.
    #[error("{location}: {source}")]
    ReadTask {
        location: String,
        source: tokio::task::JoinError,
    },
    /// The configured LOTL file could not be read.
    #[error("{location}: {source}")]
    ReadFile {
        location: String,
        source: std::io::Error,
    },
    /// The document was not done by the round's deadline.
    #[error(
        "not done by the round's deadline ({ROUND_TIMEOUTS} download time limits); the stored copy is kept",
        ROUND_TIMEOUTS = ROUND_TIMEOUTS
    )]
    Late,
    /// No download slot could be had.
    #[error(transparent)]
    NoPermit(#[from] tokio::sync::AcquireError),
    /// The LOTL's signature does not verify.
    #[error("LOTL {0}")]
    LotlSignature(LotlError),
    /// The LOTL cannot be read as a trusted list.
    #[error("LOTL: {0}")]
    LotlUnreadable(TslError),
    /// The LOTL announces more pivots than [`lotl::MAX_PIVOTS`].
    #[error("the LOTL announces {count} pivots, more than the {max} followed", max = lotl::MAX_PIVOTS)]
    TooManyPivots {
        /// How many it announces.
        count: usize,
    },
    /// A pivot location read from the LOTL is not an `http`/`https` URL.
    #[error(
        "pivot location {location:?} is not an http or https URL: locations read from a list are fetched, never opened as files"
    )]
    PivotNotHttpUrl {
        /// At most 200 characters of the location.
        location: String,
    },
    /// A pivot location is not on the LOTL's own server.
    #[error(
        "pivot location {location:?} is not on the LOTL's own server ({}): a location read from a LOTL that has not verified yet is followed only there",
        .lotl_origin.as_deref().unwrap_or("the LOTL is a file, so none")
    )]
    PivotOffOrigin {
        /// At most 200 characters of the location.
        location: String,
        /// `scheme://authority` of the LOTL; `None` when it is a file.
        lotl_origin: Option<String>,
    },
    /// A pivot download task did not finish.
    #[error("a pivot fetch did not finish: {0}")]
    PivotFetchUnfinished(tokio::task::JoinError),
    /// The LOTL, a pivot or a national list did not verify.
    #[error(transparent)]
    Verify(#[from] LotlError),
    /// A territory the LOTL points to is not a two-letter code.
    #[error("territory {territory:?} is not a two-letter code")]
    BadTerritory { territory: String },
    /// The verification task did not finish.
    #[error("verifying {what} did not finish: {source}")]
    VerifyUnfinished {
        what: String,
        source: tokio::task::JoinError,
    },
    /// The verification took more than [`MAX_VERIFY_TIME`].
    #[error("verifying {what} took more than {} s: refused", MAX_VERIFY_TIME.as_secs())]
    VerifyTimeout { what: String },
    /// The list is not admissible ([`super::not_admissible`]).
    #[error("{why}; the stored copy is kept")]
    NotAdmissible { why: String },
    /// The list is already past its `NextUpdate` plus the grace.
    #[error(
        "sequence {sequence} is already past its NextUpdate ({next_update}); the stored copy is kept"
    )]
    PastNextUpdate {
        /// Its `TSLSequenceNumber`, or `?`.
        sequence: String,
        /// Its `NextUpdate`, RFC 3339.
        next_update: String,
    },
    /// The list has no `NextUpdate` (a closed list).
    #[error("no NextUpdate: a closed list is not stored")]
    NoNextUpdate,
    /// The list's sequence number is below the stored copy's.
    #[error(
        "sequence {new} is older than the stored sequence {stored}: refused as a replay; the stored copy is kept"
    )]
    OlderThanStored { new: u64, stored: u64 },
    /// The record of the highest sequence numbers cannot be read.
    #[error("the sequence record cannot be read ({0}); nothing is stored")]
    SequenceRecordUnreadable(std::io::Error),
    /// The list's sequence number is below the highest ever accepted ([`super::cache::rollback`]).
    #[error("{why}; the stored copy is kept")]
    BelowRecord { why: String },
    /// The list's sequence number is further above the highest ever accepted than any
    /// publisher steps ([`super::cache::implausible_step`]).
    #[error("{why}; the stored copy is kept")]
    ImplausibleStep { why: String },
}

/// ` (mirror <url>)` when a document was read from a mirror.
fn via(mirror: &Option<String>) -> String {
    mirror
        .as_deref()
        .map(|url| format!(" (mirror {url})"))
        .unwrap_or_default()
}

/// How many download time limits (`fetch_timeout_secs`) one round of a source may take: the
/// LOTL, then its pivots (fetched together), then the national lists (fetched together).
pub const ROUND_TIMEOUTS: u32 = 3;

/// Most national lists downloaded at once. The LOTL points to 31 XML lists (EU and EEA);
/// eight at a time keeps a round within a few download times without opening thirty
/// connections at once.
pub const MAX_CONCURRENT_FETCHES: usize = 8;

/// Longest wait for the parse and verification of one document, done on the blocking pool.
/// The shape budgets of [`super::tsl::shape`] make that work linear: the largest real list
/// (CZ, 640 KB) verifies in well under a second in a debug build; 30 s is a backstop for a
/// loaded machine, not a figure a list should come near.
pub const MAX_VERIFY_TIME: Duration = Duration::from_secs(30);

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
    async fn get_published(&self, location: &str) -> Result<Vec<u8>, RefreshError> {
        if !is_http_url(location) {
            return Err(RefreshError::NotHttpUrl {
                location: excerpt(location),
            });
        }
        let url = self.mirrored(location);
        let limits = Limits {
            total: self.settings.timeout,
            max_bytes: MAX_TSL_BYTES as u64,
        };
        let fetched = self.fetcher.get(&url, limits).await;
        fetched
            .map(|b| b.to_vec())
            .map_err(|source| RefreshError::Fetch {
                location: location.to_owned(),
                mirror: (url != location).then_some(url),
                source,
            })
    }

    /// The bytes at the configured LOTL location: a URL as [`Self::get_published`], or, as
    /// the operator's own choice, a regular file (never a FIFO or a device), read through a
    /// bounded reader.
    async fn get_configured(&self, location: &str) -> Result<Vec<u8>, RefreshError> {
        if is_http_url(location) {
            return self.get_published(location).await;
        }
        let path = std::path::PathBuf::from(location);
        tokio::task::spawn_blocking(move || read_regular_file(&path))
            .await
            .map_err(|source| RefreshError::ReadTask {
                location: location.to_owned(),
                source,
            })?
            .map_err(|source| RefreshError::ReadFile {
                location: location.to_owned(),
                source,
            })
    }

    /// Fetches the LOTL of source `name` and the lists it points to, storing what verifies.
    /// Fails only when the pinned certificates cannot be read; everything else is in the
    /// outcome's log.
    ///
    /// The round has one deadline, [`ROUND_TIMEOUTS`] download time limits from its start:
    /// the LOTL, its pivots (all at once) and then the national lists (all at once, at most
    /// [`MAX_CONCURRENT_FETCHES`] at a time) each take at most one. A document not done by
    /// then is a failure of this round, and its last good copy stays.
    ///
    /// The steps: the LOTL fetched and stored (`store_lotl`); the LOTL that authorises the
    /// national lists chosen (`effective_lotl`); the national lists fetched
    /// (`fetch_national_lists`); the log written.
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
        let mut outcome = FetchOutcome {
            log: cache.read_log(),
            failures: 0,
            stored: 0,
        };
        let round = Round {
            cache,
            grace,
            now,
            deadline: tokio::time::Instant::now() + self.settings.timeout * ROUND_TIMEOUTS,
        };

        let fetched = tokio::time::timeout_at(
            round.deadline,
            self.fetch_lotl(spec, &pinned, &round.cache, grace, now),
        )
        .await
        .unwrap_or(Err(RefreshError::Late));
        let attempt = store_lotl(&round, &fetched);
        outcome.tally(&attempt);
        progress(Step {
            done: 1,
            total: 0,
            what: "LOTL",
            location: &spec.location,
            attempt: &attempt,
        });
        outcome.log.lotl = Some(attempt);

        if let Some(lotl) = effective_lotl(fetched, &round.cache, &pinned).await {
            self.fetch_national_lists(&round, Arc::new(lotl), spec, &mut outcome, progress)
                .await;
        }
        if let Err(e) = round.cache.write_log(&outcome.log) {
            tracing::warn!(source = name, error = %e, "cannot write the trust fetch log");
        }
        Ok(outcome)
    }

    /// The national lists `lotl` points to, fetched all at once (at most
    /// [`MAX_CONCURRENT_FETCHES`] at a time, by the round's deadline) and each stored when it
    /// verifies; as they finish, one at a time, each's sequence number is recorded, and it
    /// is counted, reported to `progress` and logged.
    async fn fetch_national_lists(
        &self,
        round: &Round,
        lotl: Arc<TrustedList>,
        spec: &LotlSpec,
        outcome: &mut FetchOutcome,
        progress: &mut (dyn FnMut(Step<'_>) + Send),
    ) {
        let now = round.now;
        let pointers = lotl::national_pointers(&lotl, spec.territories.as_deref());
        let total = pointers.len() + 1;
        let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_FETCHES));
        let mut running = tokio::task::JoinSet::new();
        for (i, pointer) in pointers.iter().enumerate() {
            let fetch = self.clone().fetch_and_store_list(
                round.clone(),
                lotl.clone(),
                pointer.territory.clone(),
                pointer.location.clone(),
                permits.clone(),
            );
            running.spawn(async move {
                let (attempt, seq) = fetch.await;
                (i, attempt, seq)
            });
        }
        let mut done = 1usize;
        while let Some(joined) = running.join_next().await {
            let Ok((i, mut attempt, seq)) = joined else {
                // A fetch task that panicked: counted, its copy stays.
                outcome.failures += 1;
                continue;
            };
            done += 1;
            // Recorded here, one at a time: the tasks run concurrently.
            if attempt.ok
                && let Err(e) = raise(&round.cache, &pointers[i].territory, seq)
            {
                attempt = failed(now, format!("stored, but the sequence record was not: {e}"));
            }
            outcome.tally(&attempt);
            let pointer = &pointers[i];
            progress(Step {
                done,
                total,
                what: &pointer.territory,
                location: &pointer.location,
                attempt: &attempt,
            });
            outcome.log.lists.insert(pointer.territory.clone(), attempt);
        }
    }

    /// One national list of a round: fetched from `location` with a download slot, by the
    /// round's deadline, verified against the LOTL for territory `t`, and stored. The attempt,
    /// with the list's sequence number when it was stored.
    async fn fetch_and_store_list(
        self,
        round: Round,
        lotl: Arc<TrustedList>,
        t: String,
        location: String,
        permits: Arc<tokio::sync::Semaphore>,
    ) -> (Attempt, Option<u64>) {
        let Round {
            cache,
            grace,
            now,
            deadline,
        } = round;
        let fetched = tokio::time::timeout_at(deadline, async {
            let _permit = permits.acquire().await?;
            self.fetch_list(&lotl, &t, &location, &cache, grace, now)
                .await
        })
        .await
        .unwrap_or(Err(RefreshError::Late));
        match fetched {
            Ok((list, bytes)) => match cache.store_list(&t, &bytes) {
                Ok(()) => (ok(now, &list, &[]), list.sequence_number),
                Err(e) => (failed(now, format!("cannot store: {e}")), None),
            },
            Err(e) => (failed(now, e.to_string()), None),
        }
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
    ) -> Result<(VerifiedLotl, Vec<u8>, Vec<Vec<u8>>), RefreshError> {
        let bytes = Arc::new(self.get_configured(&spec.location).await?);
        let pinned = pinned.to_vec();
        let b = bytes.clone();
        let p = pinned.clone();
        // Where the pivots are is read from the LOTL before it is trusted: it only says what
        // to fetch (URLs only, through the destination policy); every pivot must then verify
        // from the pinned keys on.
        let locations = off_workers("the LOTL", move || {
            let signer = lotl::signer_of(&b).map_err(RefreshError::LotlSignature)?;
            if p.contains(&signer.fingerprint_sha256) {
                return Ok(Vec::new());
            }
            let unverified = tsl::parse(&b).map_err(RefreshError::LotlUnreadable)?;
            Ok(lotl::pivot_locations(&unverified))
        })
        .await?;
        if locations.len() > lotl::MAX_PIVOTS {
            return Err(RefreshError::TooManyPivots {
                count: locations.len(),
            });
        }
        // Read from a document that has not verified, a pivot location is followed only to
        // the LOTL's own server (the Commission publishes its pivots next to the LOTL:
        // https://ec.europa.eu/tools/lotl/eu-lotl-pivot-341.xml …), and only as a URL.
        for location in &locations {
            pivot_location_allowed(&spec.location, location)?;
        }
        let mut running = tokio::task::JoinSet::new();
        for (i, location) in locations.iter().enumerate() {
            let (this, location) = (self.clone(), location.clone());
            running.spawn(async move { (i, this.get_published(&location).await) });
        }
        let mut fetched: Vec<Option<Vec<u8>>> = vec![None; locations.len()];
        while let Some(joined) = running.join_next().await {
            let (i, got) = joined.map_err(RefreshError::PivotFetchUnfinished)?;
            fetched[i] = Some(got?);
        }
        let pivots: Vec<(String, Vec<u8>)> = locations
            .into_iter()
            .zip(fetched)
            .filter_map(|(l, b)| b.map(|b| (l, b)))
            .collect();
        let cache = cache.clone();
        off_workers("the LOTL", move || {
            let verified = lotl::verify_lotl(&bytes, &pinned, &pivots)?;
            fresh(&verified.lotl.list, grace, now)?;
            if let Some(old) = cached_lotl(&cache, &pinned) {
                not_older(&verified.lotl.list, &old)?;
            }
            not_below_record(&cache, super::cache::LOTL_KEY, &verified.lotl.list)?;
            let bytes = Arc::try_unwrap(bytes).unwrap_or_else(|shared| shared.to_vec());
            Ok((
                verified,
                bytes,
                pivots.into_iter().map(|(_, b)| b).collect(),
            ))
        })
        .await
    }

    /// A national list, verified against the LOTL's pointer, fresh and not older than the
    /// stored one.
    async fn fetch_list(
        &self,
        lotl: &Arc<TrustedList>,
        territory: &str,
        location: &str,
        cache: &SourceCache,
        grace: time::Duration,
        now: OffsetDateTime,
    ) -> Result<(TrustedList, Vec<u8>), RefreshError> {
        if !super::cache::is_territory_code(territory) {
            return Err(RefreshError::BadTerritory {
                territory: territory.to_owned(),
            });
        }
        let bytes = self.get_published(location).await?;
        let (lotl, territory, cache) = (lotl.clone(), territory.to_owned(), cache.clone());
        off_workers(&format!("the list for {territory}"), move || {
            let signed = lotl::verify_national(&lotl, &territory, &bytes)?;
            fresh(&signed.list, grace, now)?;
            if let Ok(Some(old)) = cache.read_list(&territory)
                && let Ok(old) = lotl::verify_national(&lotl, &territory, &old)
            {
                not_older(&signed.list, &old.list)?;
            }
            not_below_record(&cache, &territory, &signed.list)?;
            Ok((signed.list, bytes))
        })
        .await
    }
}

/// What every fetch of one round of [`Refresher::fetch_source`] shares: the source's cache,
/// the grace after `NextUpdate`, the round's time and its deadline.
#[derive(Clone)]
struct Round {
    cache: SourceCache,
    grace: time::Duration,
    now: OffsetDateTime,
    deadline: tokio::time::Instant,
}

/// A LOTL fetched and verified: the verdict, the LOTL's bytes and the pivots' bytes.
type FetchedLotl = (VerifiedLotl, Vec<u8>, Vec<Vec<u8>>);

impl FetchOutcome {
    /// Counts one document's attempt: stored, or a failure.
    fn tally(&mut self, attempt: &Attempt) {
        if attempt.ok {
            self.stored += 1;
        } else {
            self.failures += 1;
        }
    }
}

/// The LOTL step's attempt: the fetched LOTL and its pivots stored, and its sequence number
/// recorded; or why not.
fn store_lotl(round: &Round, fetched: &Result<FetchedLotl, RefreshError>) -> Attempt {
    let (cache, now) = (&round.cache, round.now);
    match fetched {
        Ok((v, bytes, pivots)) => match cache
            .store_lotl(bytes, pivots)
            .and_then(|()| raise(cache, super::cache::LOTL_KEY, v.lotl.list.sequence_number))
        {
            Ok(()) => ok(now, &v.lotl.list, &v.pivots_followed),
            Err(e) => failed(
                now,
                format!("cannot store in {}: {e}", cache.dir().display()),
            ),
        },
        Err(e) => failed(now, e.to_string()),
    }
}

/// The LOTL that authorises the national lists: the new one, or the last good one (the
/// stored LOTL, verified again off the async workers).
async fn effective_lotl(
    fetched: Result<FetchedLotl, RefreshError>,
    cache: &SourceCache,
    pinned: &[lotl::Fingerprint],
) -> Option<TrustedList> {
    match fetched {
        Ok((v, _, _)) => Some(v.lotl.list),
        Err(_) => {
            let (cache, pinned) = (cache.clone(), pinned.to_vec());
            off_workers("the stored LOTL", move || Ok(cached_lotl(&cache, &pinned)))
                .await
                .ok()
                .flatten()
        }
    }
}

/// Runs `verify` (parsing and verifying documents: CPU, not I/O) on the blocking pool, so
/// that the async workers keep answering, and gives up waiting after [`MAX_VERIFY_TIME`].
async fn off_workers<T: Send + 'static>(
    what: &str,
    verify: impl FnOnce() -> Result<T, RefreshError> + Send + 'static,
) -> Result<T, RefreshError> {
    match tokio::time::timeout(MAX_VERIFY_TIME, tokio::task::spawn_blocking(verify)).await {
        Ok(Ok(result)) => result,
        Ok(Err(source)) => Err(RefreshError::VerifyUnfinished {
            what: what.to_owned(),
            source,
        }),
        Err(_) => Err(RefreshError::VerifyTimeout {
            what: what.to_owned(),
        }),
    }
}

/// The stored LOTL, if it still verifies against the pinned keys and its stored pivots.
fn cached_lotl(cache: &SourceCache, pinned: &[lotl::Fingerprint]) -> Option<TrustedList> {
    let (bytes, pivots) = cache.read_lotl_and_pivots().ok()??;
    lotl::verify_lotl(&bytes, pinned, &pivots)
        .ok()
        .map(|v| v.lotl.list)
}

/// Whether a pivot `location`, read from the LOTL at `lotl_location` before it verified, may
/// be fetched: an `http`/`https` URL on the same origin (scheme, host and port) as the LOTL.
fn pivot_location_allowed(lotl_location: &str, location: &str) -> Result<(), RefreshError> {
    if !is_http_url(location) {
        return Err(RefreshError::PivotNotHttpUrl {
            location: excerpt(location),
        });
    }
    match (origin(lotl_location), origin(location)) {
        (Some(lotl), Some(pivot)) if lotl == pivot => Ok(()),
        (lotl_origin, _) => Err(RefreshError::PivotOffOrigin {
            location: excerpt(location),
            lotl_origin,
        }),
    }
}

/// `scheme://authority` of an http(s) URL, lowercased; `None` for anything else.
fn origin(url: &str) -> Option<String> {
    if !is_http_url(url) {
        return None;
    }
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    Some(format!("{scheme}://{authority}").to_ascii_lowercase())
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
    file.take(MAX_TSL_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TSL_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("over the {MAX_TSL_BYTES}-byte limit"),
        ));
    }
    Ok(bytes)
}

fn fresh(
    list: &TrustedList,
    grace: time::Duration,
    now: OffsetDateTime,
) -> Result<(), RefreshError> {
    if let Some(why) = super::not_admissible(list, now) {
        return Err(RefreshError::NotAdmissible { why });
    }
    match list.next_update {
        Some(next) if next + grace < now => Err(RefreshError::PastNextUpdate {
            sequence: seq(list),
            next_update: super::rfc3339(next),
        }),
        Some(_) => Ok(()),
        None => Err(RefreshError::NoNextUpdate),
    }
}

fn not_older(new: &TrustedList, old: &TrustedList) -> Result<(), RefreshError> {
    match (new.sequence_number, old.sequence_number) {
        (Some(n), Some(o)) if n < o => Err(RefreshError::OlderThanStored { new: n, stored: o }),
        _ => Ok(()),
    }
}

/// Refuses `new` if its sequence number is below the highest recorded for `key` (a stored
/// copy replaced by an older one since must not lower the bar); a record that cannot be
/// read refuses too.
fn not_below_record(cache: &SourceCache, key: &str, new: &TrustedList) -> Result<(), RefreshError> {
    let record = cache
        .read_sequences()
        .map_err(RefreshError::SequenceRecordUnreadable)?;
    if let Some(why) = super::cache::rollback(&record, key, new.sequence_number) {
        return Err(RefreshError::BelowRecord { why });
    }
    match super::cache::implausible_step(&record, key, new.sequence_number) {
        Some(why) => Err(RefreshError::ImplausibleStep { why }),
        None => Ok(()),
    }
}

/// Records an accepted document's sequence number.
fn raise(cache: &SourceCache, key: &str, seq: Option<u64>) -> std::io::Result<()> {
    match seq {
        Some(n) => cache.raise_sequence(key, n),
        None => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pivots_are_followed_only_as_urls_on_the_lotls_own_server() {
        let lotl = "https://ec.europa.eu/tools/lotl/eu-lotl.xml";
        assert!(
            pivot_location_allowed(
                lotl,
                "https://ec.europa.eu/tools/lotl/eu-lotl-pivot-341.xml"
            )
            .is_ok()
        );
        assert!(pivot_location_allowed(lotl, "HTTPS://EC.EUROPA.EU/x/p.xml").is_ok());
        for refused in [
            "https://ec.europa.eu.attacker.example/p.xml",
            "https://ec.europa.eu:8443/p.xml",
            "http://ec.europa.eu/tools/lotl/p.xml",
            "https://user@ec.europa.eu/p.xml",
            "https://169.254.169.254/latest/meta-data.xml",
            "/etc/passwd.xml",
            "file:///etc/p.xml",
        ] {
            assert!(pivot_location_allowed(lotl, refused).is_err(), "{refused}");
        }
        // A LOTL read from a file has no server: its pivots are not followed.
        let e = pivot_location_allowed("/srv/lotl.xml", "https://ec.europa.eu/p.xml")
            .expect_err("refused")
            .to_string();
        assert!(e.contains("the LOTL is a file"), "{e}");
    }
}
