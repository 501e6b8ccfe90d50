//! Trust data as the service loads it: the pure model of [`psp_check::trust`] (re-exported
//! here whole, so callers name one module), plus what reads it from files and the network:
//! the sources to load ([`SourceSpec`]), loading them into a [`TrustList`] ([`load`]), the
//! on-disk cache of fetched lists ([`cache`]) and fetching them ([`refresh`]).
//!
//! A trusted list is used only after its XML signature verifies, by a signer the
//! configuration pins for it ([`ListSigners`]); the verified tree is the one read.

pub mod cache;
pub mod refresh;

pub use psp_check::trust::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use time::OffsetDateTime;

use crate::cert::{PspCertificate, input::decode_certificate_chain};
use crate::country::CountryCode;

/// A trust source to load, as the configuration (or `check --trust`) describes it, with its
/// file paths resolved and its jurisdictions expanded. Policies left `None` take the source
/// kind's default: required QcCompliance and rejecting untyped certificates for the
/// qualified schemes (`EIDAS`, `QTSP`), the opposite for the directory schemes.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    pub name: String,
    pub qtsp_source: QtspSource,
    pub reported_jurisdiction: String,
    pub valid_for: BTreeSet<CountryCode>,
    pub qc_compliance: Option<QcCompliancePolicy>,
    pub untyped: Option<UntypedPolicy>,
    /// PEM files of CA certificates approved by the source, each with its kinds.
    pub issuers: Vec<IssuerFile>,
    /// ETSI TS 119 612 trusted-list files, each with who may have signed it.
    pub trusted_lists: Vec<TrustedListFile>,
    /// The EU list of the lists, whose national lists are read from the source's cache
    /// ([`cache`], filled by `trust fetch` and `serve`'s refresh).
    pub lotl: Option<LotlSpec>,
    /// How long after its `NextUpdate` a list is still used (clause 5.3.15; default 0).
    pub next_update_grace: time::Duration,
}

/// A list of the lists to follow, as configured.
#[derive(Debug, Clone)]
pub struct LotlSpec {
    /// Where the LOTL is fetched from: an `http(s)` URL or a local file.
    pub location: String,
    /// PEM files of the certificates pinned for the LOTL (as published in the Official
    /// Journal of the EU).
    pub signers: Vec<PathBuf>,
    /// SHA-256 fingerprints of more pinned certificates (the Official Journal prints them).
    pub signer_sha256: Vec<lotl::Fingerprint>,
    /// The territories whose lists are used (`None`: every list the LOTL points to).
    pub territories: Option<Vec<String>>,
    /// The directory under which the source's cache lives (the source's name is appended).
    pub cache_dir: PathBuf,
}

impl LotlSpec {
    /// This source's cache.
    pub fn cache(&self, source_name: &str) -> cache::SourceCache {
        cache::SourceCache::new(&self.cache_dir, source_name)
    }

    /// The pinned certificates' fingerprints: those of the PEM files, and those configured.
    pub fn pinned(&self, source_name: &str) -> Result<Vec<lotl::Fingerprint>, TrustLoadError> {
        let mut out = self.signer_sha256.clone();
        for f in &self.signers {
            let pem = read_capped(source_name, f)?;
            let ders = decode_certificate_chain(&pem).map_err(|e| TrustLoadError::Invalid {
                source_name: source_name.to_owned(),
                path: f.clone(),
                message: format!("LOTL signer file: {e}"),
            })?;
            out.extend(lotl::fingerprints(&ders));
        }
        if out.is_empty() {
            return Err(TrustLoadError::Invalid {
                source_name: source_name.to_owned(),
                path: self.signers.first().cloned().unwrap_or_default(),
                message: "no certificate pinned for the LOTL".to_owned(),
            });
        }
        Ok(out)
    }
}

/// A trusted-list file and the signers whose signature on it is accepted.
#[derive(Debug, Clone)]
pub struct TrustedListFile {
    pub path: PathBuf,
    pub signers: ListSigners,
}

/// Who may have signed a trusted list (ETSI TS 119 612 clause 5.7; [`xmlsig`]).
#[derive(Debug, Clone)]
pub enum ListSigners {
    /// PEM files of the certificates the operator authorises to sign the list (for a
    /// national list: the ones the EU list of lists names for its territory).
    Pinned(Vec<PathBuf>),
    /// Any signer whose signature verifies, reported at load: `check --trust`, the
    /// operator's explicit choice for an ad-hoc audit.
    AnyVerified,
    /// No signature required: `[danger] unsigned_trusted_lists`, logged at every load.
    Unsigned,
    /// The signers a list of the lists authorises for the list's territory; the LOTL
    /// `file` must be signed by one of the `signers` (PEM files) pinned for it
    /// (`check --lotl FILE --lotl-signer CERT`).
    Lotl {
        file: PathBuf,
        signers: Vec<PathBuf>,
    },
}

/// A PEM file of CA certificates and the kinds they are approved for.
#[derive(Debug, Clone)]
pub struct IssuerFile {
    pub path: PathBuf,
    pub kinds: Vec<CertKind>,
}

/// Why the trust list could not be loaded. Nothing is half-loaded: any error rejects the
/// whole snapshot.
#[derive(Debug, thiserror::Error)]
pub enum TrustLoadError {
    #[error("trust source `{source_name}`: cannot read {path}: {error}")]
    Read {
        source_name: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("trust source `{source_name}`: {path}: {message}")]
    Invalid {
        source_name: String,
        path: PathBuf,
        message: String,
    },
}

/// Upper bound on one trust file read into memory: the largest national trusted list is a few
/// MiB (the 2019 CZ list is 640 KB); 32 MiB leaves room without letting a wrong path (a disk
/// image, say) exhaust memory.
const MAX_TRUST_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Loads every source, judging the lists' freshness at `at` (now, or the time an audit
/// asks about). A configuration error (a file that cannot be read, a list whose signature
/// fails) refuses the whole load; a list that is stale, or a LOTL national list not
/// fetched or refused, is recorded in [`TrustList::lists`] and not used.
pub fn load(sources: &[SourceSpec], at: OffsetDateTime) -> Result<TrustList, TrustLoadError> {
    let mut list = TrustList::default();
    for source in sources {
        add_source(&mut list, source, at)?;
    }
    for status in list.lists() {
        if let Some(problem) = &status.problem {
            tracing::warn!(
                source = %status.source,
                list = %status.location,
                territory = status.territory.as_deref().unwrap_or(""),
                %problem,
                "trusted list not used"
            );
        }
    }
    Ok(list)
}

/// One configured source: its policies, then its parts in order — the issuers it approves
/// directly, the trusted-list files it names, and the list of the lists it follows.
fn add_source(
    trust: &mut TrustList,
    sc: &SourceSpec,
    at: OffsetDateTime,
) -> Result<(), TrustLoadError> {
    let index = trust.add_source(source_of(sc));
    for issuer in &sc.issuers {
        add_configured_issuer(trust, index, sc, issuer)?;
    }
    for tl in &sc.trusted_lists {
        add_configured_list(trust, index, sc, tl, at)?;
    }
    if let Some(lotl) = &sc.lotl {
        add_lotl(trust, index, sc, lotl, at)?;
    }
    Ok(())
}

/// The source as the trust list keeps it, its policies left `None` taking the source kind's
/// default (see [`SourceSpec`]).
fn source_of(sc: &SourceSpec) -> Source {
    let (qc_compliance, untyped) = sc.qtsp_source.default_policies();
    Source {
        name: sc.name.clone(),
        qtsp_source: sc.qtsp_source,
        reported_jurisdiction: sc.reported_jurisdiction.clone(),
        valid_for: sc.valid_for.clone(),
        qc_compliance: sc.qc_compliance.unwrap_or(qc_compliance),
        untyped: sc.untyped.unwrap_or(untyped),
    }
}

/// The error for a file of source `sc` that is read but refused.
fn invalid_in<'a>(sc: &'a SourceSpec, path: &'a Path) -> impl Fn(String) -> TrustLoadError + 'a {
    move |message| TrustLoadError::Invalid {
        source_name: sc.name.clone(),
        path: path.to_owned(),
        message,
    }
}

/// A configured issuer file: every certificate in it must be a CA certificate; each is
/// approved, for the file's kinds, by the configuration.
fn add_configured_issuer(
    trust: &mut TrustList,
    index: usize,
    sc: &SourceSpec,
    issuer: &IssuerFile,
) -> Result<(), TrustLoadError> {
    let path = issuer.path.clone();
    let bytes = read_capped(&sc.name, &path)?;
    trust
        .add_pem_issuers(index, &bytes, &issuer.kinds, &path.display().to_string())
        .map_err(|e| invalid_in(sc, &path)(e.to_string()))?;
    Ok(())
}

/// How a configured list's signature was accepted, by the kind of its [`ListSigners`].
struct ListSignature {
    /// The signer line of the list's status (and of the load notes).
    label: String,
    /// The signer verified, whose validity at the list's issue is judged next.
    verified_signer: Option<PspCertificate>,
    /// For a list authorised through a LOTL: whether that LOTL is usable at `at` (its
    /// problem if not), and until when (a stale LOTL disables its lists, as for a LOTL
    /// source).
    through_lotl: Option<(Option<String>, Option<ListDeadline>)>,
}

/// A configured trusted-list file: its signature accepted as its signers' kind says, the
/// signer valid when the list was issued, then the list used (unless the LOTL that
/// authorises it is not).
fn add_configured_list(
    trust: &mut TrustList,
    index: usize,
    sc: &SourceSpec,
    tl: &TrustedListFile,
    at: OffsetDateTime,
) -> Result<(), TrustLoadError> {
    let path = tl.path.clone();
    let bytes = read_capped(&sc.name, &path)?;
    let invalid = invalid_in(sc, &path);
    // One tree: the document whose signature is verified is the one read.
    let doc = xmlsig::parse_document(&bytes).map_err(|e| invalid(e.to_string()))?;
    let ListSignature {
        label: signer,
        verified_signer,
        through_lotl,
    } = match &tl.signers {
        ListSigners::Unsigned => unsigned_signature(&path),
        ListSigners::Pinned(signer_files) => {
            let verified =
                xmlsig::verify(&doc).map_err(|e| invalid(format!("signature refused: {e}")))?;
            pinned_signature(sc, &path, verified, signer_files)?
        }
        ListSigners::Lotl { file, signers } => {
            let territory = || {
                tsl::read_document(&doc)
                    .map(|list| list.territory)
                    .map_err(|e| invalid(e.to_string()))
            };
            lotl_authorised_signature(trust, sc, &path, territory, &bytes, file, signers, at)?
        }
        ListSigners::AnyVerified => {
            let verified =
                xmlsig::verify(&doc).map_err(|e| invalid(format!("signature refused: {e}")))?;
            any_verified_signature(verified)
        }
    };
    trust.note(format!("{}: {signer}", path.display()));
    let list = tsl::read_document(&doc).map_err(|e| invalid(e.to_string()))?;
    if let Some(signer) = &verified_signer {
        lotl::signer_valid_at_issue(&list, signer).map_err(|e| invalid(e.to_string()))?;
    }
    let mut status = ListStatus::new(
        &sc.name,
        ListRole::Configured,
        Some(&list.territory),
        path.display().to_string(),
    );
    status.signer = Some(signer);
    let lotl_deadline = match through_lotl {
        Some((Some(problem), _)) => {
            status.problem = Some(format!(
                "the LOTL that authorises it is not used: {problem}"
            ));
            None
        }
        Some((None, deadline)) => deadline,
        None => None,
    };
    trust.use_list(
        index,
        status,
        &list,
        sc.next_update_grace,
        at,
        lotl_deadline.as_ref(),
    );
    Ok(())
}

/// [`ListSigners::Unsigned`]: no signature checked, which is logged at every load.
fn unsigned_signature(path: &Path) -> ListSignature {
    tracing::warn!(
        path = %path.display(),
        "trusted list loaded WITHOUT signature verification ([danger] unsigned_trusted_lists)"
    );
    ListSignature {
        label: "NOT VERIFIED ([danger] unsigned_trusted_lists)".to_owned(),
        verified_signer: None,
        through_lotl: None,
    }
}

/// [`ListSigners::Pinned`]: the signature `verified` is by a certificate of the signer files.
fn pinned_signature(
    sc: &SourceSpec,
    path: &Path,
    verified: xmlsig::VerifiedList,
    signer_files: &[PathBuf],
) -> Result<ListSignature, TrustLoadError> {
    let invalid = invalid_in(sc, path);
    let mut pinned = Vec::new();
    for f in signer_files {
        let pem = read_capped(&sc.name, f)?;
        pinned.extend(
            decode_certificate_chain(&pem)
                .map_err(|e| invalid(format!("signer file {}: {e}", f.display())))?,
        );
    }
    if !pinned.contains(&verified.signer.der) {
        return Err(invalid(format!(
            "signed by {} (SHA-256 {}), which is not among the signers configured for it",
            verified.signer.subject,
            verified.signer.fingerprint_hex()
        )));
    }
    let label = format!(
        "signature verified, signer {} (SHA-256 {}) pinned",
        verified.signer.subject,
        verified.signer.fingerprint_hex()
    );
    Ok(ListSignature {
        label,
        verified_signer: Some(verified.signer),
        through_lotl: None,
    })
}

/// [`ListSigners::Lotl`]: the LOTL `file`, signed by one of its pinned `signers`, authorises
/// the list's signer for the list's `territory` (read from the list once the LOTL verifies).
/// The LOTL's own status is recorded, and whether it is usable at `at` returned with the
/// signature.
#[allow(clippy::too_many_arguments)]
fn lotl_authorised_signature(
    trust: &mut TrustList,
    sc: &SourceSpec,
    path: &Path,
    territory: impl FnOnce() -> Result<String, TrustLoadError>,
    bytes: &[u8],
    file: &Path,
    signers: &[PathBuf],
    at: OffsetDateTime,
) -> Result<ListSignature, TrustLoadError> {
    let invalid = invalid_in(sc, path);
    let spec = LotlSpec {
        location: file.display().to_string(),
        signers: signers.to_vec(),
        signer_sha256: Vec::new(),
        territories: None,
        cache_dir: PathBuf::new(),
    };
    let pinned = spec.pinned(&sc.name)?;
    let lotl_bytes = read_capped(&sc.name, file)?;
    let lotl = lotl::verify_lotl(&lotl_bytes, &pinned, &[])
        .map_err(|e| invalid_in(sc, file)(e.to_string()))?;
    let territory = territory()?;
    let signed = lotl::verify_national(&lotl.lotl.list, &territory, bytes)
        .map_err(|e| invalid(e.to_string()))?;
    let mut lotl_status = ListStatus::new(
        &sc.name,
        ListRole::Lotl,
        Some("EU"),
        file.display().to_string(),
    );
    lotl_status.signer = Some(format!("{}, pinned", lotl.lotl.signer_label()));
    lotl_status.judge(&lotl.lotl.list, sc.next_update_grace, at);
    let through_lotl = Some((lotl_status.problem.clone(), ListDeadline::of(&lotl_status)));
    trust.record_list(lotl_status);
    let label = format!(
        "signature verified, signer {}, authorised for {territory} by the LOTL {} (sequence {}, signed by {})",
        signed.signer_label(),
        file.display(),
        lotl.lotl
            .list
            .sequence_number
            .map(|n| n.to_string())
            .unwrap_or_default(),
        lotl.lotl.signer_label()
    );
    Ok(ListSignature {
        label,
        verified_signer: None,
        through_lotl,
    })
}

/// [`ListSigners::AnyVerified`]: any signer whose signature `verified`, reported.
fn any_verified_signature(verified: xmlsig::VerifiedList) -> ListSignature {
    let label = format!(
        "signature verified, signer {} (SHA-256 {}) accepted as the operator's explicit choice (no LOTL authorises it here)",
        verified.signer.subject,
        verified.signer.fingerprint_hex()
    );
    ListSignature {
        label,
        verified_signer: Some(verified.signer),
        through_lotl: None,
    }
}

/// A LOTL source: the LOTL from the cache, verified against the pinned certificates
/// (through the stored pivots when needed), then each national list it points to, from
/// the cache, verified against its pointer. What is missing or refused is recorded,
/// not used, and does not stop the rest.
fn add_lotl(
    trust: &mut TrustList,
    index: usize,
    sc: &SourceSpec,
    spec: &LotlSpec,
    at: OffsetDateTime,
) -> Result<(), TrustLoadError> {
    let cache = spec.cache(&sc.name);
    let Some(accepted) = accept_cached_lotl(trust, sc, spec, &cache, at)? else {
        return Ok(());
    };
    let lotl = &accepted.verified.lotl.list;
    for pointer in lotl::national_pointers(lotl, spec.territories.as_deref()) {
        add_national_list(trust, index, sc, &cache, &accepted, &pointer, at);
    }
    if let Some(wanted) = &spec.territories {
        record_unpointed_territories(trust, sc, wanted);
    }
    Ok(())
}

/// The cached LOTL, verified, with what its national lists are judged by.
struct AcceptedLotl {
    verified: lotl::VerifiedLotl,
    /// The highest sequence numbers accepted so far: a stored document below them is an
    /// older genuine one put in place of the last accepted (cache::rollback).
    record: std::collections::BTreeMap<String, u64>,
    /// Whether the LOTL is used at `at` (fresh, not rolled back).
    usable: bool,
    /// Until when the LOTL's lists may be used.
    deadline: Option<ListDeadline>,
}

/// The LOTL of a LOTL source: read from the cache, verified against the pinned certificates
/// (through the cached pivots), checked against the sequence record and judged at `at`; its
/// status is recorded. `None` when there is none to verify, it is refused, or the sequence
/// record cannot be read (then no list of the source is used).
fn accept_cached_lotl(
    trust: &mut TrustList,
    sc: &SourceSpec,
    spec: &LotlSpec,
    cache: &cache::SourceCache,
    at: OffsetDateTime,
) -> Result<Option<AcceptedLotl>, TrustLoadError> {
    let pinned = spec.pinned(&sc.name)?;
    let cache_err = |path: PathBuf, error: std::io::Error| TrustLoadError::Read {
        source_name: sc.name.clone(),
        path,
        error,
    };
    let mut status = ListStatus::new(
        &sc.name,
        ListRole::Lotl,
        Some("EU"),
        cache.lotl_path().display().to_string(),
    );
    let Some((bytes, pivots)) = cache
        .read_lotl_and_pivots()
        .map_err(|e| cache_err(cache.dir().to_owned(), e))?
    else {
        status.problem = Some(format!(
            "no LOTL fetched yet from {} (run `psp-gateway trust fetch`, or wait for serve's first refresh)",
            spec.location
        ));
        trust.record_list(status);
        return Ok(None);
    };
    let verified = match lotl::verify_lotl(&bytes, &pinned, &pivots) {
        Ok(v) => v,
        Err(e) => {
            status.problem = Some(e.to_string());
            trust.record_list(status);
            return Ok(None);
        }
    };
    let record = match cache.read_sequences() {
        Ok(r) => r,
        Err(e) => {
            status.problem = Some(format!(
                "the sequence record cannot be read ({e}); no list of this source is used"
            ));
            trust.record_list(status);
            return Ok(None);
        }
    };
    status.problem = cache::rollback(&record, cache::LOTL_KEY, verified.lotl.list.sequence_number);
    status.signer = Some(if verified.pivots_followed.is_empty() {
        format!("{}, pinned", verified.lotl.signer_label())
    } else {
        format!(
            "{}, through pivots {}",
            verified.lotl.signer_label(),
            verified.pivots_followed.join(", ")
        )
    });
    status.judge(&verified.lotl.list, sc.next_update_grace, at);
    let usable = status.problem.is_none();
    let deadline = ListDeadline::of(&status);
    trust.record_list(status);
    Ok(Some(AcceptedLotl {
        verified,
        record,
        usable,
        deadline,
    }))
}

/// One national list the LOTL points to: from the cache, verified against its pointer,
/// checked against the sequence record, then used; or recorded with why it is not.
fn add_national_list(
    trust: &mut TrustList,
    index: usize,
    sc: &SourceSpec,
    cache: &cache::SourceCache,
    accepted: &AcceptedLotl,
    pointer: &lotl::NationalPointer,
    at: OffsetDateTime,
) {
    let t = pointer.territory.as_str();
    let path = cache.list_path(t);
    let mut status = ListStatus::new(
        &sc.name,
        ListRole::National,
        Some(t),
        path.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| pointer.location.clone()),
    );
    if !accepted.usable {
        status.problem = Some("the LOTL that authorises it is not used".to_owned());
        trust.record_list(status);
        return;
    }
    let bytes = match cache.read_list(t) {
        Ok(Some(b)) => b,
        Ok(None) if path.is_none() => {
            status.problem = Some(format!("territory {t:?} is not a two-letter code"));
            trust.record_list(status);
            return;
        }
        Ok(None) => {
            status.problem = Some(format!("not fetched yet from {}", pointer.location));
            trust.record_list(status);
            return;
        }
        Err(e) => {
            status.problem = Some(format!("cannot read the cached list: {e}"));
            trust.record_list(status);
            return;
        }
    };
    match lotl::verify_national(&accepted.verified.lotl.list, t, &bytes) {
        Ok(signed) => {
            status.signer = Some(format!(
                "{}, authorised by the LOTL for {t}",
                signed.signer_label()
            ));
            status.problem = cache::rollback(&accepted.record, t, signed.list.sequence_number);
            trust.use_list(
                index,
                status,
                &signed.list,
                sc.next_update_grace,
                at,
                accepted.deadline.as_ref(),
            );
        }
        Err(e) => {
            status.problem = Some(e.to_string());
            trust.record_list(status);
        }
    }
}

/// The territories configured for a LOTL source that the LOTL points to no XML list for:
/// each recorded as such.
fn record_unpointed_territories(trust: &mut TrustList, sc: &SourceSpec, wanted: &[String]) {
    for t in wanted {
        if !trust.lists().iter().any(|l| {
            l.source == sc.name && l.role == ListRole::National && l.territory.as_deref() == Some(t)
        }) {
            let mut status = ListStatus::new(&sc.name, ListRole::National, Some(t), String::new());
            status.problem = Some(format!("the LOTL points to no XML list for {t}"));
            trust.record_list(status);
        }
    }
}

/// Reads a trust file (a list, a LOTL, a pinned signer) through a bounded reader; it must be a
/// regular file (a FIFO blocked `config check` and every reload, docs/attacks/proxy-and-data.md).
fn read_capped(source_name: &str, path: &Path) -> Result<Vec<u8>, TrustLoadError> {
    use crate::bounded::{BoundedReadError, read_regular_file};
    read_regular_file(path, MAX_TRUST_FILE_BYTES, "a trust file").map_err(|e| match e {
        BoundedReadError::Io(error) => TrustLoadError::Read {
            source_name: source_name.to_owned(),
            path: path.to_owned(),
            error,
        },
        refused @ (BoundedReadError::TooLarge { .. } | BoundedReadError::NotRegular { .. }) => {
            TrustLoadError::Invalid {
                source_name: source_name.to_owned(),
                path: path.to_owned(),
                message: refused.to_string(),
            }
        }
    })
}
