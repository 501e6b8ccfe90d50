//! The EU list of the lists (LOTL, ETSI TS 119 612 clause 5.3.13 and Commission Implementing
//! Decision (EU) 2015/1505): which keys may sign the LOTL, and through it which keys may sign
//! each national trusted list.
//!
//! Trust starts from the certificates the operator pins, as the Official Journal of the EU
//! publishes them. Everything else is derived, each step by a verified signature:
//!
//! 1. **The LOTL** must be signed by a pinned certificate, or reached from one through its
//!    pivots ([`verify_lotl`]).
//! 2. **Pivots.** When the Commission changes its signing keys it publishes pivot LOTLs and
//!    lists their URLs in the LOTL's `SchemeInformationURI` (newest first). Oldest first, as
//!    EU DSS does, each pivot is verified with the keys known so far, and the certificates of
//!    its pointer to the LOTL itself become the keys for the next one. Pivots older than the
//!    pinned keys (not signed by them, before the first that is) are passed over; after the
//!    first verified pivot, a pivot that is not signed by the keys its predecessor announced
//!    breaks the chain and the LOTL is refused.
//! 3. **National lists.** Each `OtherTSLPointer` to an XML list names the territory and the
//!    certificates allowed to sign that territory's list. A national list is used only if it
//!    is signed by one of them and names the same territory ([`verify_national`]).
//!
//! Pure: bytes in, verdicts out. Fetching is `psp_service::trust::refresh`'s, storing
//! `psp_service::trust::cache`'s.

use crate::cert::PspCertificate;

use super::tsl::{self, TrustedList, TslError, TslPointer};
use super::xmlsig::{self, XmlSigError};

/// Why a list of the lists, a pivot or a national list was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LotlError {
    /// The bytes are not an XML document whose signature can be checked.
    #[error(transparent)]
    Document(XmlSigError),
    /// The XML signature did not verify.
    #[error("signature refused: {0}")]
    SignatureRefused(XmlSigError),
    /// The signature verified, but its signer is not one of the certificates allowed.
    #[error("signed by {signer}, which is not among the {allowed} certificates {whose}")]
    SignerNotAllowed {
        /// [`signer_label`] of the signer.
        signer: String,
        /// How many certificates were allowed.
        allowed: usize,
        /// Completes "not among the certificates …".
        whose: String,
    },
    /// The signed document is not a readable trusted list.
    #[error(transparent)]
    List(TslError),
    /// The list has no `ListIssueDateTime`, so its signer's validity cannot be judged.
    #[error(
        "no ListIssueDateTime (TS 119 612 clause 5.3.14): the signer's validity at issue cannot be judged"
    )]
    NoIssueDate,
    /// The signer's certificate was not valid at the list's `ListIssueDateTime`.
    #[error(
        "signed by {signer}, whose certificate was not valid at the list's ListIssueDateTime {issued} (valid from {not_before} to {not_after})"
    )]
    SignerNotValidAtIssue {
        /// [`signer_label`] of the signer.
        signer: String,
        /// The list's `ListIssueDateTime`, RFC 3339.
        issued: String,
        /// The signer certificate's validity, RFC 3339.
        not_before: String,
        /// The end of the signer certificate's validity, RFC 3339.
        not_after: String,
    },
    /// More pivot LOTLs than [`MAX_PIVOTS`].
    #[error("{count} pivot LOTLs, more than the {max} followed", max = MAX_PIVOTS)]
    TooManyPivots {
        /// How many pivots were offered.
        count: usize,
    },
    /// The LOTL itself was refused.
    #[error("LOTL {0}")]
    Lotl(Box<LotlError>),
    /// A pivot LOTL was refused.
    #[error("pivot {location}: {reason}")]
    Pivot {
        /// Where the pivot is published.
        location: String,
        /// Why it was refused.
        reason: Box<LotlError>,
    },
    /// A pivot after the first verified one is not signed by a key its predecessor announced.
    #[error(
        "pivot chain broken at {location}: signed by {signer}, which is not among the {announced} certificates announced by {keys_from}"
    )]
    PivotChainBroken {
        /// Where the pivot is published.
        location: String,
        /// [`signer_label`] of its signer.
        signer: String,
        /// How many certificates the predecessor announced.
        announced: usize,
        /// What announced them (the pinned keys or the previous pivot).
        keys_from: String,
    },
    /// A pivot announces no certificate for the next LOTL.
    #[error("pivot {location} announces no certificate for the next LOTL")]
    PivotAnnouncesNoSigner {
        /// Where the pivot is published.
        location: String,
    },
    /// Neither the LOTL nor any of its pivots is signed by a pinned certificate.
    #[error(
        "the LOTL is signed by {signer}, which is not pinned, and none of its {pivots} pivot LOTLs is signed by a pinned certificate"
    )]
    NoPinnedSigner {
        /// [`signer_label`] of the LOTL's signer.
        signer: String,
        /// How many pivots were offered.
        pivots: usize,
    },
    /// A document taken for a LOTL (or a pivot) is not a list of the lists.
    #[error("{what} is not a list of the lists (TSLType {tsl_type:?})")]
    NotListOfLists {
        /// `the LOTL` or `pivot <location>`.
        what: String,
        /// Its `TSLType`, or "absent".
        tsl_type: String,
    },
    /// The LOTL has no pointer to an XML list for the territory.
    #[error("the LOTL has no pointer to an XML list for {territory}")]
    NoPointer {
        /// The territory asked for.
        territory: String,
    },
    /// The national list names another territory than the pointer that authorised it.
    #[error(
        "the list names territory {named}, but the LOTL pointer it was authorised by is for {territory}"
    )]
    TerritoryMismatch {
        /// The territory the list names.
        named: String,
        /// The territory of the LOTL pointer.
        territory: String,
    },
    /// A list offered as a national list is a list of the lists.
    #[error("the list for {territory} is a list of the lists, not a national list")]
    NationalIsLotl {
        /// The territory it was offered for.
        territory: String,
    },
}

impl LotlError {
    /// This error, as the LOTL's ("LOTL …").
    fn of_lotl(self) -> Self {
        Self::Lotl(Box::new(self))
    }

    /// This error, as the pivot at `location`'s ("pivot <location>: …").
    fn of_pivot(self, location: &str) -> Self {
        Self::Pivot {
            location: location.to_owned(),
            reason: Box::new(self),
        }
    }
}

/// A certificate as the LOTL rules know it: the SHA-256 of its DER. Pinning a fingerprint
/// pins the certificate: the signature must verify with the `KeyInfo` certificate, and that
/// certificate must hash to a pinned value.
pub type Fingerprint = [u8; 32];

/// The fingerprints of DER certificates.
pub fn fingerprints(ders: &[Vec<u8>]) -> Vec<Fingerprint> {
    ders.iter().map(|d| crate::hex::sha256(d)).collect()
}

/// Most pivot LOTLs followed. The Commission had published four by 2024 (282, 300, 335, 341);
/// a LOTL announcing more than this is refused rather than followed without end.
pub const MAX_PIVOTS: usize = 16;

/// A list whose signature verified, by a signer it was checked against, read from the tree
/// that was verified.
#[derive(Debug, Clone)]
pub struct SignedList {
    /// The list as read from the verified tree.
    pub list: TrustedList,
    /// The certificate whose key signed the list.
    pub signer: PspCertificate,
}

impl SignedList {
    /// `subject (SHA-256 fingerprint)`, for status output and logs.
    pub fn signer_label(&self) -> String {
        signer_label(&self.signer)
    }
}

/// `subject (SHA-256 fingerprint)` of a list signer.
pub fn signer_label(signer: &PspCertificate) -> String {
    format!(
        "{} (SHA-256 {})",
        signer.subject,
        crate::hex::upper(&signer.fingerprint_sha256)
    )
}

/// A verified LOTL and how it was reached.
#[derive(Debug, Clone)]
pub struct VerifiedLotl {
    /// The LOTL, verified.
    pub lotl: SignedList,
    /// The pivots whose signatures carried trust from the pinned keys to the LOTL's signer,
    /// oldest first (empty when a pinned certificate signed the LOTL itself).
    pub pivots_followed: Vec<String>,
}

/// Verifies the signature of `bytes` and reads the same tree; the signer must be one of
/// `allowed`. `whose` completes "not among the certificates …" in the error.
pub fn verify_signed_by(
    bytes: &[u8],
    allowed: &[Fingerprint],
    whose: &str,
) -> Result<SignedList, LotlError> {
    let doc = xmlsig::parse_document(bytes).map_err(LotlError::Document)?;
    let verified = xmlsig::verify(&doc).map_err(LotlError::SignatureRefused)?;
    if !allowed.contains(&verified.signer.fingerprint_sha256) {
        return Err(LotlError::SignerNotAllowed {
            signer: signer_label(&verified.signer),
            allowed: allowed.len(),
            whose: whose.to_owned(),
        });
    }
    let list = tsl::read_document(&doc).map_err(LotlError::List)?;
    signer_valid_at_issue(&list, &verified.signer)?;
    Ok(SignedList {
        list,
        signer: verified.signer,
    })
}

/// Whether `signer` was within its validity at the list's `ListIssueDateTime` (TS 119 612
/// clause 5.3.14), the time the scheme operator says it signed. Judged at the issue date, not
/// now: a list is bounded in time by its `NextUpdate`, and signer certificates outlive
/// neither (40 of the 151 certificates in the pointers of the real 2024 LOTL had expired by
/// its issue date, as the Commission keeps the old keys listed; a signature made with one of
/// them after its expiry is refused here). A list without `ListIssueDateTime` is refused: the
/// rule cannot be applied.
pub fn signer_valid_at_issue(list: &TrustedList, signer: &PspCertificate) -> Result<(), LotlError> {
    let Some(issued) = list.issue_date else {
        return Err(LotlError::NoIssueDate);
    };
    if issued < signer.not_before || issued > signer.not_after {
        return Err(LotlError::SignerNotValidAtIssue {
            signer: signer_label(signer),
            issued: super::rfc3339(issued),
            not_before: super::rfc3339(signer.not_before),
            not_after: super::rfc3339(signer.not_after),
        });
    }
    Ok(())
}

/// The signer of `bytes`, if its signature verifies (to decide whether pivots are needed).
pub fn signer_of(bytes: &[u8]) -> Result<PspCertificate, LotlError> {
    xmlsig::verify_bytes(bytes)
        .map(|v| v.signer)
        .map_err(LotlError::SignatureRefused)
}

/// The pivot LOTLs a LOTL announces, oldest first: the `SchemeInformationURI` values that
/// name an XML document (the others are the Official Journal notice and legal notices).
/// Duplicates are dropped.
pub fn pivot_locations(lotl: &TrustedList) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for uri in lotl.scheme_information_uris.iter().rev() {
        let path = uri.split(['?', '#']).next().unwrap_or_default();
        if path.to_ascii_lowercase().ends_with(".xml") && !out.contains(uri) {
            out.push(uri.clone());
        }
    }
    out
}

/// The certificates a LOTL announces for the next LOTL: those of its pointers to a list of
/// the lists (its pointer to itself).
pub fn announced_lotl_signers(lotl: &TrustedList) -> Vec<Fingerprint> {
    lotl.pointers
        .iter()
        .filter(|p| p.is_list_of_lists())
        .flat_map(|p| fingerprints(&p.certificates))
        .collect()
}

/// Verifies the LOTL `current` against the `pinned` certificates, following `pivots`
/// (location and bytes, oldest first; see [`pivot_locations`]) when a pinned certificate did
/// not sign it (module documentation, step 2).
pub fn verify_lotl(
    current: &[u8],
    pinned: &[Fingerprint],
    pivots: &[(String, Vec<u8>)],
) -> Result<VerifiedLotl, LotlError> {
    if pivots.len() > MAX_PIVOTS {
        return Err(LotlError::TooManyPivots {
            count: pivots.len(),
        });
    }
    let signer = signer_of(current).map_err(LotlError::of_lotl)?;
    if pinned.contains(&signer.fingerprint_sha256) {
        let lotl = verify_signed_by(current, pinned, "pinned for the LOTL")?;
        check_is_lotl(&lotl.list, "the LOTL")?;
        return Ok(VerifiedLotl {
            lotl,
            pivots_followed: Vec::new(),
        });
    }
    let mut keys: Vec<Fingerprint> = pinned.to_vec();
    let mut keys_from = "pinned for the LOTL".to_owned();
    let mut followed: Vec<String> = Vec::new();
    for (location, bytes) in pivots {
        let pivot_signer = signer_of(bytes).map_err(|e| e.of_pivot(location))?;
        if !keys.contains(&pivot_signer.fingerprint_sha256) {
            if followed.is_empty() {
                // Older than the pinned keys: trust starts at a later pivot.
                continue;
            }
            return Err(LotlError::PivotChainBroken {
                location: location.clone(),
                signer: signer_label(&pivot_signer),
                announced: keys.len(),
                keys_from,
            });
        }
        let pivot = verify_signed_by(bytes, &keys, &keys_from).map_err(|e| e.of_pivot(location))?;
        check_is_lotl(&pivot.list, &format!("pivot {location}"))?;
        keys = announced_lotl_signers(&pivot.list);
        if keys.is_empty() {
            return Err(LotlError::PivotAnnouncesNoSigner {
                location: location.clone(),
            });
        }
        keys_from = format!("pivot {location}");
        followed.push(location.clone());
    }
    if followed.is_empty() {
        return Err(LotlError::NoPinnedSigner {
            signer: signer_label(&signer),
            pivots: pivots.len(),
        });
    }
    let lotl = verify_signed_by(current, &keys, &format!("announced by {keys_from}"))
        .map_err(LotlError::of_lotl)?;
    check_is_lotl(&lotl.list, "the LOTL")?;
    Ok(VerifiedLotl {
        lotl,
        pivots_followed: followed,
    })
}

fn check_is_lotl(list: &TrustedList, what: &str) -> Result<(), LotlError> {
    if !list.is_list_of_lists() {
        return Err(LotlError::NotListOfLists {
            what: what.to_owned(),
            tsl_type: list.tsl_type.as_deref().unwrap_or("absent").to_owned(),
        });
    }
    Ok(())
}

/// A national list the LOTL points to: its territory, where it is published, and who may
/// sign it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NationalPointer {
    /// The territory (`SchemeTerritory` of the pointer, e.g. `CZ`).
    pub territory: String,
    /// Where the list is published (the pointer's `TSLLocation`).
    pub location: String,
    /// SHA-256 fingerprints of the certificates that may sign it, from its pointers.
    pub signers: Vec<Fingerprint>,
}

/// The national lists the LOTL points to, one per territory, restricted to `territories`
/// when given. Pointers to a PDF rendering and to lists of the lists are passed over; a
/// territory with several XML pointers takes the first location and the certificates of all.
pub fn national_pointers(
    lotl: &TrustedList,
    territories: Option<&[String]>,
) -> Vec<NationalPointer> {
    let mut out: Vec<NationalPointer> = Vec::new();
    let wanted = |t: &str| territories.is_none_or(|ts| ts.iter().any(|w| w == t));
    for p in lotl.pointers.iter().filter(|p| is_national_xml(p)) {
        let Some(territory) = p.territory.as_deref().filter(|t| wanted(t)) else {
            continue;
        };
        match out.iter_mut().find(|n| n.territory == territory) {
            Some(n) => n.signers.extend(fingerprints(&p.certificates)),
            None => out.push(NationalPointer {
                territory: territory.to_owned(),
                location: p.location.clone(),
                signers: fingerprints(&p.certificates),
            }),
        }
    }
    out
}

fn is_national_xml(p: &TslPointer) -> bool {
    p.is_xml() && !p.is_list_of_lists() && !p.certificates.is_empty()
}

/// Verifies a national list against what the LOTL says of `territory`: signed by one of the
/// certificates of its pointer, naming that territory, and not a list of the lists.
pub fn verify_national(
    lotl: &TrustedList,
    territory: &str,
    bytes: &[u8],
) -> Result<SignedList, LotlError> {
    let pointer = national_pointers(lotl, Some(&[territory.to_owned()]))
        .into_iter()
        .next()
        .ok_or_else(|| LotlError::NoPointer {
            territory: territory.to_owned(),
        })?;
    let signed = verify_signed_by(
        bytes,
        &pointer.signers,
        &format!("the LOTL authorises for {territory}"),
    )?;
    if signed.list.territory != territory {
        return Err(LotlError::TerritoryMismatch {
            named: signed.list.territory,
            territory: territory.to_owned(),
        });
    }
    if signed.list.is_list_of_lists() {
        return Err(LotlError::NationalIsLotl {
            territory: territory.to_owned(),
        });
    }
    Ok(signed)
}

#[cfg(test)]
mod tests;
