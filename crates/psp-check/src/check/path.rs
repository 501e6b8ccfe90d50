//! Certification paths: from the certificate, through the intermediates presented with it, to
//! a trust-list issuer, with every signature on the way verified.
//!
//! Names and key identifiers only *propose* candidates: a certificate `C` may have been issued
//! by `P` when `P`'s subject is `C`'s issuer name and no key identifier contradicts it. Only a
//! verified signature binds `C` to `P`. A [`VerifiedPath`] ("issued by trust-list issuer N,
//! through these intermediates") can only be made by [`build`], after it verified every
//! signature on the path and every structural rule of RFC 5280 section 6.1 that applies
//! without certificate policies: CA-ness and keyCertSign of every issuer, pathLenConstraint,
//! critical extensions, the subject's own key and role. This is rustls-webpki's shape: the
//! value that says "trusted" exists only where it was proven.
//!
//! Time plays no part here: validity periods are the `notExpired` flag's business (the
//! contract's rule 8 keeps the flags independent), and [`build`] returns every verified path
//! so the caller can prefer one whose certificates are all current.
//!
//! When nothing verifies, [`PathFailure`] says what was found instead, in the order that
//! explains it best: a structurally invalid path, a trust-list issuer named whose key does not
//! verify the certificate (the contract's tampered scenario), a trust-list issuer named above
//! an intermediate whose signature it did not make (a forged intermediate), or no trust-list
//! issuer at all.

use std::collections::HashMap;
use std::fmt;

use crate::cert::{
    CertNames, NameConstraints, NcBudget, NcError, PspCertificate, SignatureError,
    has_name_constraints,
};
use crate::trust::TrustList;

/// At most this many presented intermediates are accepted with a certificate. TLS peers and
/// load balancers send the leaf and one or two CAs; EN 319 411 hierarchies have at most three
/// levels below a root. Eight leaves room for cross-certificates; more is refused, never
/// silently cut.
pub const MAX_PRESENTED_INTERMEDIATES: usize = 8;

/// At most this many intermediates between the certificate and a trust-list issuer. Real QTSP
/// hierarchies are root → issuing CA (trusted lists usually name the issuing CA itself, so the
/// path is usually empty); NIST PKITS's deepest paths in the sections we run have five.
pub const MAX_PATH_INTERMEDIATES: usize = 6;

/// At most this many signature verifications per search: the budget on attacker-controlled
/// work (rustls-webpki keeps the same kind of budget, 100 there for web PKI chains; each
/// verification is at most a few hundred microseconds of RSA-8192).
pub const MAX_SIGNATURE_CHECKS: usize = 64;

/// At most this many candidate paths (name chains that reach a trust-list issuer) are kept
/// for judging; cross-certified hierarchies give two or three.
pub const MAX_CANDIDATE_PATHS: usize = 16;

/// A certificate taking part in a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Node {
    Leaf,
    /// Index into the presented intermediates.
    Presented(usize),
    /// Index into [`TrustList::issuers`].
    Anchor(usize),
}

/// A certification path whose every signature verified and that breaks no structural rule:
/// the certificate was issued, through `intermediates` (certificate side first, indices into
/// the presented intermediates), by trust-list issuer `anchor`. Only [`build`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPath {
    anchor: usize,
    intermediates: Vec<usize>,
}

impl VerifiedPath {
    /// The trust-list issuer at the head of the path (index into [`TrustList::issuers`]).
    pub fn anchor(&self) -> usize {
        self.anchor
    }

    /// The presented intermediates on the path, certificate side first.
    pub fn intermediates(&self) -> &[usize] {
        &self.intermediates
    }
}

/// A chain of names from the certificate to a trust-list issuer, not (or not entirely)
/// verified: what a failure is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidatePath {
    /// Index into [`TrustList::issuers`].
    pub anchor: usize,
    /// Presented intermediates, certificate side first.
    pub intermediates: Vec<usize>,
}

/// Why a path whose signatures all verify is still not a certification path (RFC 5280
/// section 6.1, and what a PSP certificate must be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// An issuer on the path is not a CA: basicConstraints absent or cA false (RFC 5280
    /// section 6.1.4 (k)).
    IssuerNotCa {
        /// The issuer's subject name.
        subject: String,
    },
    /// An issuer's keyUsage does not allow certificate signing (section 6.1.4 (n)).
    IssuerWithoutKeyCertSign {
        /// The issuer's subject name.
        subject: String,
    },
    /// A certificate on the path is not X.509 version 3: an issuer cannot then carry
    /// basicConstraints (section 6.1.4 (k)), and a PSP certificate its QC statements.
    NotV3 {
        /// The subject name of the certificate concerned.
        subject: String,
        /// The certificate's X.509 version.
        version: u32,
    },
    /// An issuer has an empty subject name (section 4.1.2.6).
    IssuerWithEmptySubject,
    /// More non-self-issued intermediates below `subject` than its pathLenConstraint allows
    /// (section 6.1.4 (l), (m)).
    PathLengthExceeded {
        /// The subject name of the CA whose constraint is exceeded.
        subject: String,
        /// Its pathLenConstraint (RFC 5280 section 4.2.1.9).
        constraint: u32,
    },
    /// A certificate on the path has an extension that forbids using it (an unknown critical
    /// extension, section 4.2; a critical key identifier; an unreadable extension).
    Extension {
        /// The subject name of the certificate concerned.
        subject: String,
        /// What is wrong with the extension.
        fault: String,
    },
    /// The certificate is a CA certificate (basicConstraints cA true) or may sign
    /// certificates (keyUsage keyCertSign): a PSP's own certificate never is.
    CertificateIsCa,
    /// A name of `subject` is outside the name constraints of an issuer above it, or the
    /// constraints cannot be read or evaluated (RFC 5280 section 4.2.1.10).
    NameConstraints {
        /// The subject name of the certificate whose name is outside the constraints.
        subject: String,
        /// Which name or constraint fails, and how.
        error: String,
    },
    /// A public key on the path is too weak or of a refused kind (RSA under 2048 bits or not
    /// in whole bytes, EC below P-256, DSA).
    Key {
        /// The subject name of the certificate carrying the key.
        subject: String,
        /// Why the key is refused.
        why: String,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::IssuerNotCa { subject } => write!(
                f,
                "issuer {subject} is not a CA (basicConstraints cA is not true)"
            ),
            PathError::IssuerWithoutKeyCertSign { subject } => {
                write!(f, "issuer {subject} has keyUsage without keyCertSign")
            }
            PathError::NotV3 { subject, version } => write!(
                f,
                "{subject} is an X.509 version {version} certificate, not version 3"
            ),
            PathError::IssuerWithEmptySubject => write!(f, "an issuer has an empty subject name"),
            PathError::PathLengthExceeded {
                subject,
                constraint,
            } => write!(
                f,
                "the path has more intermediates below {subject} than its pathLenConstraint {constraint} allows"
            ),
            PathError::Extension { subject, fault } => write!(f, "{subject}: {fault}"),
            PathError::CertificateIsCa => write!(
                f,
                "the certificate is a CA certificate (basicConstraints cA or keyUsage keyCertSign), never a PSP's own"
            ),
            PathError::Key { subject, why } => write!(f, "the key of {subject}: {why}"),
            PathError::NameConstraints { subject, error } => {
                write!(f, "name constraints, at {subject}: {error}")
            }
        }
    }
}

/// Why no path verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathFailure {
    /// Every signature on `path` verifies, but the path breaks a structural rule.
    Invalid {
        /// The path whose signatures verify.
        path: CandidatePath,
        /// The structural rule it breaks.
        error: PathError,
    },
    /// The certificate names a trust-list issuer (directly, or through presented intermediates
    /// that verify up to it) whose key does not verify the certificate's own signature: a
    /// tampered certificate, or one forged under a look-alike issuer. `bound_by_key_id` when
    /// the certificate's authority key identifier equals that issuer's subject key identifier
    /// (who issued it is known; the contract's tampered scenario keeps `validQTSP`).
    /// `structure` is the judgement of the rest of the path.
    CertificateSignature {
        /// The path to the named trust-list issuer.
        path: CandidatePath,
        /// Whether the authority key identifier binds the certificate to that issuer.
        bound_by_key_id: bool,
        /// Why the certificate's signature does not verify.
        error: SignatureError,
        /// Whether the rest of the path keeps the structural rules.
        structure: Result<(), PathError>,
    },
    /// An intermediate names a trust-list issuer whose key does not verify the
    /// intermediate's signature: a forged intermediate under a look-alike of a trusted CA.
    IntermediateSignature {
        /// The path to the named trust-list issuer.
        path: CandidatePath,
        /// Position in `path.intermediates` of the intermediate whose signature failed.
        at: usize,
        /// Why the intermediate's signature does not verify.
        error: SignatureError,
    },
    /// No trust-list issuer is named by the certificate or its presented intermediates.
    /// `signature` tells whether the certificate verifies with the key of a presented issuer.
    NoTrustedIssuer {
        /// The certificate's signature against the presented issuers.
        signature: PresentedSignature,
    },
    /// More intermediates were presented than [`MAX_PRESENTED_INTERMEDIATES`].
    TooManyIntermediates {
        /// How many intermediates were presented.
        presented: usize,
    },
}

/// The certificate's signature against the issuers presented with it, when no trust-list
/// issuer is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresentedSignature {
    /// A presented CA's key verifies it (the CA is untrusted).
    Verified {
        /// Index into the presented intermediates of the CA whose key verifies it.
        by: usize,
    },
    /// Presented CAs carry the issuer's name, and no key among them verifies it.
    Invalid,
    /// No trust-list issuer and no presented CA carries the certificate's issuer name.
    IssuerKeyNotFound,
    /// The signature algorithm or the issuer key is outside the policy.
    NotCheckable(SignatureError),
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Paths {
    /// At least one verified path, in the order found (shorter, trust-list-first paths
    /// first).
    Verified(Vec<VerifiedPath>),
    /// No path verified, and why.
    Failed(PathFailure),
}

/// Builds every certification path from `leaf` through `presented` to an issuer of `trust`,
/// within the budgets above, verifying every signature and every structural rule.
pub fn build(leaf: &PspCertificate, presented: &[PspCertificate], trust: &TrustList) -> Paths {
    if presented.len() > MAX_PRESENTED_INTERMEDIATES {
        return Paths::Failed(PathFailure::TooManyIntermediates {
            presented: presented.len(),
        });
    }
    let mut search = Search::new(leaf, presented, trust);
    let mut intermediates = Vec::new();
    search.walk(Node::Leaf, &mut intermediates, None);

    let mut verified = Vec::new();
    let mut invalid = None;
    let mut certificate_signature = None;
    let mut intermediate_signature = None;
    for c in &search.candidates {
        match &c.failure {
            None => match structure(leaf, presented, trust, &c.path) {
                Ok(()) => verified.push(VerifiedPath {
                    anchor: c.path.anchor,
                    intermediates: c.path.intermediates.clone(),
                }),
                Err(error) => {
                    invalid.get_or_insert_with(|| PathFailure::Invalid {
                        path: c.path.clone(),
                        error,
                    });
                }
            },
            Some(Broken { at: 0, error }) => {
                let issuer = match c.path.intermediates.first() {
                    Some(&p) => &presented[p],
                    None => &trust.issuers()[c.path.anchor].certificate,
                };
                let failure = PathFailure::CertificateSignature {
                    path: c.path.clone(),
                    bound_by_key_id: bound_by_key_id(leaf, issuer),
                    error: error.clone(),
                    structure: structure(leaf, presented, trust, &c.path),
                };
                // Prefer the explanation where the issuer is bound by key identifier.
                let better = certificate_signature.is_none()
                    || matches!(
                        (&certificate_signature, &failure),
                        (
                            Some(PathFailure::CertificateSignature {
                                bound_by_key_id: false,
                                ..
                            }),
                            PathFailure::CertificateSignature {
                                bound_by_key_id: true,
                                ..
                            },
                        )
                    );
                if better {
                    certificate_signature = Some(failure);
                }
            }
            Some(Broken { at, error }) => {
                intermediate_signature.get_or_insert_with(|| PathFailure::IntermediateSignature {
                    path: c.path.clone(),
                    at: at - 1,
                    error: error.clone(),
                });
            }
        }
    }
    if !verified.is_empty() {
        return Paths::Verified(verified);
    }
    let failure = invalid
        .or(certificate_signature)
        .or(intermediate_signature)
        .unwrap_or_else(|| PathFailure::NoTrustedIssuer {
            signature: search.presented_signature(),
        });
    Paths::Failed(failure)
}

fn anchor_copies(presented: &[PspCertificate], trust: &TrustList) -> Vec<bool> {
    presented
        .iter()
        .map(|p| trust.issuers().iter().any(|t| t.certificate.der == p.der))
        .collect()
}

/// Certification paths of CRL signers (RFC 5280 section 6.3.3 (f)): a CRL signed by another
/// key of the certificate's issuer is usable only when a path from that key's certificate to
/// the same trust-list issuer verifies. The searches share one signature budget
/// ([`MAX_SIGNATURE_CHECKS`]) and one cache of verdicts, whatever the number of candidates.
pub struct SignerPaths<'a> {
    search: Search<'a>,
}

impl<'a> SignerPaths<'a> {
    /// A search for CRL signer paths of `leaf`, through `presented`, to issuers of `trust`.
    pub fn new(
        leaf: &'a PspCertificate,
        presented: &'a [PspCertificate],
        trust: &'a TrustList,
    ) -> SignerPaths<'a> {
        SignerPaths {
            search: Search::new(leaf, presented, trust),
        }
    }

    /// A verified path from presented certificate `signer` to trust-list issuer `anchor`:
    /// the presented intermediates above `signer`, signer side first. Every signature
    /// verified and every structural rule holds, `signer` being the path's target (it may be
    /// a CA: a CA's own other key). `None` when there is none within the budgets.
    pub fn path(&mut self, signer: usize, anchor: usize) -> Option<Vec<usize>> {
        let s = &mut self.search;
        if s.is_anchor_copy.get(signer).copied().unwrap_or(true) {
            return None;
        }
        s.start = Node::Presented(signer);
        s.candidates.clear();
        s.walk(Node::Presented(signer), &mut Vec::new(), None);
        let found = std::mem::take(&mut s.candidates);
        found
            .into_iter()
            .filter(|c| c.failure.is_none() && c.path.anchor == anchor)
            .find(|c| {
                structure_of(
                    &s.presented[signer],
                    Target::CrlSigner,
                    s.presented,
                    s.trust,
                    &c.path,
                )
                .is_ok()
            })
            .map(|c| c.path.intermediates)
    }
}

/// Where a candidate's chain of signatures first breaks: link `at` (0: the certificate's own
/// signature; `k`: the signature of the `k`-th intermediate, certificate side first).
#[derive(Debug, Clone)]
struct Broken {
    at: usize,
    error: SignatureError,
}

#[derive(Debug, Clone)]
struct Candidate {
    path: CandidatePath,
    failure: Option<Broken>,
}

struct Search<'a> {
    leaf: &'a PspCertificate,
    presented: &'a [PspCertificate],
    trust: &'a TrustList,
    signatures_left: usize,
    /// Signature verdicts already computed, by (signed, signer).
    verdicts: HashMap<(Node, Node), Result<(), SignatureError>>,
    candidates: Vec<Candidate>,
    /// Presented intermediates that are byte for byte a trust-list issuer: the path goes to
    /// the trust-list issuer itself instead.
    is_anchor_copy: Vec<bool>,
    /// Where the search starts: the certificate, or a CRL signer among the presented
    /// certificates (never its own issuer).
    start: Node,
}

impl<'a> Search<'a> {
    /// A search from `leaf` with the full signature budget.
    fn new(
        leaf: &'a PspCertificate,
        presented: &'a [PspCertificate],
        trust: &'a TrustList,
    ) -> Search<'a> {
        Search {
            leaf,
            presented,
            trust,
            signatures_left: MAX_SIGNATURE_CHECKS,
            verdicts: HashMap::new(),
            candidates: Vec::new(),
            is_anchor_copy: anchor_copies(presented, trust),
            start: Node::Leaf,
        }
    }

    fn cert(&self, node: Node) -> &PspCertificate {
        match node {
            Node::Leaf => self.leaf,
            Node::Presented(i) => &self.presented[i],
            Node::Anchor(i) => &self.trust.issuers()[i].certificate,
        }
    }

    /// Whether `signer`'s key verifies `signed`; `None` when the budget is spent.
    fn verify(&mut self, signed: Node, signer: Node) -> Option<Result<(), SignatureError>> {
        if let Some(v) = self.verdicts.get(&(signed, signer)) {
            return Some(v.clone());
        }
        if self.signatures_left == 0 {
            return None;
        }
        self.signatures_left -= 1;
        let verdict = self.cert(signed).verify_signed_by(&self.cert(signer).spki);
        self.verdicts.insert((signed, signer), verdict.clone());
        Some(verdict)
    }

    /// Depth-first from `child` (the leaf or a presented intermediate) to the trust list.
    /// `intermediates` is the path so far; `failure` the first broken link on it.
    fn walk(&mut self, child: Node, intermediates: &mut Vec<usize>, failure: Option<Broken>) {
        let level = intermediates.len();
        let anchors: Vec<usize> = (0..self.trust.issuers().len())
            .filter(|&a| names_issuer(self.cert(child), &self.trust.issuers()[a].certificate))
            .collect();
        for a in anchors {
            if self.candidates.len() >= MAX_CANDIDATE_PATHS {
                return;
            }
            let Some(verdict) = self.verify(child, Node::Anchor(a)) else {
                return;
            };
            let failure = match (&failure, verdict) {
                (Some(f), _) => Some(f.clone()),
                (None, Ok(())) => None,
                (None, Err(error)) => Some(Broken { at: level, error }),
            };
            self.candidates.push(Candidate {
                path: CandidatePath {
                    anchor: a,
                    intermediates: intermediates.clone(),
                },
                failure,
            });
        }
        if level >= MAX_PATH_INTERMEDIATES {
            return;
        }
        let issuers: Vec<usize> = (0..self.presented.len())
            .filter(|p| !intermediates.contains(p) && !self.is_anchor_copy[*p])
            .filter(|&p| Node::Presented(p) != self.start)
            .filter(|&p| {
                let next = &self.presented[p];
                next.der != self.leaf.der && names_issuer(self.cert(child), next)
            })
            .collect();
        for p in issuers {
            if self.candidates.len() >= MAX_CANDIDATE_PATHS {
                return;
            }
            let Some(verdict) = self.verify(child, Node::Presented(p)) else {
                return;
            };
            let next_failure = match (&failure, verdict) {
                (Some(f), _) => Some(f.clone()),
                (None, Ok(())) => None,
                // Only the certificate's own signature may be broken below a path that is
                // followed further: that is the tampered certificate whose issuer is still
                // identified through verified intermediates. Above it, an intermediate that
                // its named issuer did not sign leads nowhere trustworthy.
                (None, Err(error)) if level == 0 => Some(Broken { at: 0, error }),
                (None, Err(_)) => continue,
            };
            intermediates.push(p);
            self.walk(Node::Presented(p), intermediates, next_failure);
            intermediates.pop();
        }
    }

    /// The certificate's signature against the presented CAs that carry its issuer name.
    fn presented_signature(&mut self) -> PresentedSignature {
        let named: Vec<usize> = (0..self.presented.len())
            .filter(|&p| {
                let c = &self.presented[p];
                c.der != self.leaf.der && is_ca(c) && names_issuer(self.leaf, c)
            })
            .collect();
        if named.is_empty() {
            return PresentedSignature::IssuerKeyNotFound;
        }
        let mut refusal = None;
        for p in named {
            match self.verify(Node::Leaf, Node::Presented(p)) {
                Some(Ok(())) => return PresentedSignature::Verified { by: p },
                Some(Err(e)) if e.is_algorithm_problem() => refusal = Some(e),
                Some(Err(_)) | None => {}
            }
        }
        refusal.map_or(
            PresentedSignature::Invalid,
            PresentedSignature::NotCheckable,
        )
    }
}

/// `candidate` carries `cert`'s issuer name, and no key identifier contradicts it: a
/// proposal, never a binding.
fn names_issuer(cert: &PspCertificate, candidate: &PspCertificate) -> bool {
    if !same_name(cert, candidate) {
        return false;
    }
    match (&cert.authority_key_id, &candidate.subject_key_id) {
        (Some(aki), Some(ski)) => aki == ski,
        _ => true,
    }
}

/// The key identifiers on both sides are present and equal.
pub(crate) fn bound_by_key_id(cert: &PspCertificate, issuer: &PspCertificate) -> bool {
    matches!((&cert.authority_key_id, &issuer.subject_key_id), (Some(a), Some(s)) if a == s)
}

/// `cert`'s issuer name is `candidate`'s subject name, compared as RFC 5280 section 7.1
/// says (case, whitespace and string type do not matter: a QTSP's CA rollover that
/// re-encodes its name still chains), or byte for byte when a name cannot be normalised.
pub(crate) fn same_name(cert: &PspCertificate, candidate: &PspCertificate) -> bool {
    match (&cert.issuer_name, &candidate.subject_name) {
        (Some(issuer), Some(subject)) => issuer == subject,
        _ => cert.issuer_raw == candidate.subject_raw,
    }
}

/// Issuer and subject are the same name (RFC 5280 section 6.1: self-issued).
fn is_self_issued(c: &PspCertificate) -> bool {
    same_name(c, c)
}

fn is_ca(c: &PspCertificate) -> bool {
    c.is_ca == Some(true)
}

/// The structural rules of RFC 5280 section 6.1 (without certificate policies) on a path
/// whose signatures were verified, plus what a PSP certificate must be.
fn structure(
    leaf: &PspCertificate,
    presented: &[PspCertificate],
    trust: &TrustList,
    path: &CandidatePath,
) -> Result<(), PathError> {
    structure_of(leaf, Target::Psp, presented, trust, path)
}

/// What the certificate at the foot of a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A PSP's certificate: never a CA, no name constraints of its own.
    Psp,
    /// A CRL signer (RFC 5280 section 6.3.3 (f)): a CA's other key, which may be a CA.
    CrlSigner,
}

fn structure_of(
    leaf: &PspCertificate,
    target: Target,
    presented: &[PspCertificate],
    trust: &TrustList,
    path: &CandidatePath,
) -> Result<(), PathError> {
    if let Some(fault) = leaf.extension_faults.first() {
        return Err(PathError::Extension {
            subject: leaf.subject.clone(),
            fault: fault.clone(),
        });
    }
    if target == Target::Psp && (is_ca(leaf) || leaf.key_usage.is_some_and(|ku| ku.key_cert_sign)) {
        return Err(PathError::CertificateIsCa);
    }
    if leaf.version != 3 {
        return Err(PathError::NotV3 {
            subject: leaf.subject.clone(),
            version: leaf.version,
        });
    }
    if let Some(why) = leaf.key_problem() {
        return Err(PathError::Key {
            subject: leaf.subject.clone(),
            why,
        });
    }

    let anchor = &trust.issuers()[path.anchor].certificate;
    // Issuers from the head down: the trust-list issuer, then the intermediates.
    let issuers =
        std::iter::once(anchor).chain(path.intermediates.iter().rev().map(|&i| &presented[i]));
    // RFC 5280 section 6.1.2 (k) and 6.1.4 (l), (m): max_path_length, starting from the
    // trust-list issuer's own constraint (as OpenSSL and x509-limbo apply it), with the
    // issuer whose constraint binds, for the error.
    let mut remaining: Option<(u32, &PspCertificate)> = None;
    for (depth, ca) in issuers.enumerate() {
        check_issuer(ca)?;
        if depth > 0
            && !is_self_issued(ca)
            && let Some((n, by)) = remaining
        {
            if n == 0 {
                return Err(PathError::PathLengthExceeded {
                    subject: by.subject.clone(),
                    constraint: by.path_len_constraint.unwrap_or(0),
                });
            }
            remaining = Some((n - 1, by));
        }
        if let Some(q) = ca.path_len_constraint
            && remaining.is_none_or(|(n, _)| q < n)
        {
            remaining = Some((q, ca));
        }
    }
    name_constraints(leaf, target, presented, anchor, path)
}

/// RFC 5280 sections 6.1.3 (b), (c) and 6.1.4 (g): the name constraints of the trust-list
/// issuer and of every intermediate hold for every certificate below it, except self-issued
/// intermediates; the PSP's certificate is always checked, and may not carry name
/// constraints itself (section 4.2.1.10: CA certificates only). One comparison budget for the
/// whole path ([`NcBudget`]).
fn name_constraints(
    leaf: &PspCertificate,
    target: Target,
    presented: &[PspCertificate],
    anchor: &PspCertificate,
    path: &CandidatePath,
) -> Result<(), PathError> {
    let fault = |c: &PspCertificate, e: NcError| PathError::NameConstraints {
        subject: c.subject.clone(),
        error: e.to_string(),
    };
    if target == Target::Psp && has_name_constraints(&leaf.der).map_err(|e| fault(leaf, e))? {
        return Err(PathError::NameConstraints {
            subject: leaf.subject.clone(),
            error: "name constraints in a certificate that is not a CA (RFC 5280 section 4.2.1.10)"
                .to_owned(),
        });
    }
    let mut budget = NcBudget::default();
    let mut in_force: Vec<NameConstraints> = Vec::new();
    let below_anchor = path
        .intermediates
        .iter()
        .rev()
        .map(|&i| &presented[i])
        .chain(std::iter::once(leaf));
    if let Some(nc) =
        NameConstraints::from_certificate_der(&anchor.der).map_err(|e| fault(anchor, e))?
    {
        in_force.push(nc);
    }
    for c in below_anchor {
        let is_leaf = std::ptr::eq(c, leaf);
        if !in_force.is_empty() && (is_leaf || !is_self_issued(c)) {
            let names = CertNames::from_certificate_der(&c.der).map_err(|e| fault(c, e))?;
            for nc in &in_force {
                nc.check_with_budget(&names, &mut budget)
                    .map_err(|e| fault(c, e))?;
            }
        }
        if !is_leaf
            && let Some(nc) =
                NameConstraints::from_certificate_der(&c.der).map_err(|e| fault(c, e))?
        {
            in_force.push(nc);
        }
    }
    Ok(())
}

/// What every issuer on a path must be: an X.509 v3 CA certificate with basicConstraints cA
/// true, keyCertSign when keyUsage is present, an acceptable key, a subject name, and no
/// extension that forbids its use. basicConstraints need not be marked critical: RFC 5280
/// puts that duty on the issuing CA (section 4.2.1.9), the validation algorithm (section
/// 6.1.4 (k)) does not check it, and NIST PKITS 4.6.4 expects such a path to validate.
fn check_issuer(ca: &PspCertificate) -> Result<(), PathError> {
    let subject = || ca.subject.clone();
    if ca.version != 3 {
        return Err(PathError::NotV3 {
            subject: subject(),
            version: ca.version,
        });
    }
    if !is_ca(ca) {
        return Err(PathError::IssuerNotCa { subject: subject() });
    }
    if let Some(why) = ca.key_problem() {
        return Err(PathError::Key {
            subject: subject(),
            why,
        });
    }
    if ca.key_usage.is_some_and(|ku| !ku.key_cert_sign) {
        return Err(PathError::IssuerWithoutKeyCertSign { subject: subject() });
    }
    if is_empty_name(&ca.subject_raw) {
        return Err(PathError::IssuerWithEmptySubject);
    }
    if let Some(fault) = ca.extension_faults.first() {
        return Err(PathError::Extension {
            subject: subject(),
            fault: fault.clone(),
        });
    }
    Ok(())
}

/// An empty `Name` is the DER `SEQUENCE {}`: `30 00`.
fn is_empty_name(raw: &[u8]) -> bool {
    raw.len() <= 2
}
