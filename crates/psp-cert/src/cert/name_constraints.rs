//! Name constraints: RFC 5280 section 4.2.1.10, applied as section 6.1.3 (b)-(c) and
//! section 6.1.4 (g) describe.
//!
//! ```text
//! id-ce-nameConstraints OBJECT IDENTIFIER ::=  { id-ce 30 }
//!
//! NameConstraints ::= SEQUENCE {
//!      permittedSubtrees       [0]     GeneralSubtrees OPTIONAL,
//!      excludedSubtrees        [1]     GeneralSubtrees OPTIONAL }
//!
//! GeneralSubtrees ::= SEQUENCE SIZE (1..MAX) OF GeneralSubtree
//!
//! GeneralSubtree ::= SEQUENCE {
//!      base                    GeneralName,
//!      minimum         [0]     BaseDistance DEFAULT 0,
//!      maximum         [1]     BaseDistance OPTIONAL }
//!
//! GeneralName ::= CHOICE {
//!      otherName                       [0]     OtherName,
//!      rfc822Name                      [1]     IA5String,
//!      dNSName                         [2]     IA5String,
//!      x400Address                     [3]     ORAddress,
//!      directoryName                   [4]     Name,
//!      ediPartyName                    [5]     EDIPartyName,
//!      uniformResourceIdentifier       [6]     IA5String,
//!      iPAddress                       [7]     OCTET STRING,
//!      registeredID                    [8]     OBJECT IDENTIFIER }
//! ```
//!
//! [`NameConstraints`] is read from a CA certificate; [`CertNames`] collects the names of a
//! later certificate in the path; [`NameConstraints::check`] decides. How the path
//! validator uses them (RFC 5280 section 6.1.3 (b)-(c), section 6.1.4 (g)):
//!
//! - The constraints of **every** CA in the path (the trust anchor's included) apply to
//!   **every later** certificate, each CA's independently (that is the intersection of
//!   section 6.1.4 (g) without computing it; a later CA cannot widen an earlier one's).
//! - A self-issued intermediate (issuer and subject are the same name, compared with
//!   [`NormalizedName`]) is not checked: "Name constraints are not applied to self-issued
//!   certificates (unless the certificate is the final certificate in the path)" (section
//!   4.2.1.10). The leaf is always checked, self-issued or not (PKITS 4.13.20).
//! - The extension "MUST be used only in a CA certificate": an end-entity certificate that
//!   carries one is the caller's error to raise ([`has_name_constraints`]).
//!
//! Choices where the references disagree (each one is tested):
//!
//! - A non-critical extension is refused ([`NcError::NotCritical`]), as RFC 5280 requires
//!   ("Conforming CAs MUST mark this extension as critical"); x509-limbo
//!   `rfc5280::nc::permitted-dns-match-noncritical` expects that. The CA/Browser Forum
//!   allows non-critical (limbo `webpki::nc::permitted-dns-match-noncritical`); PSD2 QWACs
//!   and QSealCs are RFC 5280 profiles, so the RFC wins here.
//! - A dNSName constraint with a leading period is malformed (RFC 5280 allows the period for
//!   URI and rfc822Name constraints only; limbo `rfc5280::nc::invalid-dnsname-leading-period`).
//! - A uniformResourceIdentifier constraint without a leading period names one host exactly,
//!   with one it names the subdomains only (section 4.2.1.10; PKITS 4.13.36 checks that
//!   `testserver.invalidcertificates.gov` is not excluded by `invalidcertificates.gov`).
//! - A wildcard dNSName (`*.example.com`) is checked as the set of names it can match: it is
//!   permitted only when every such name is, and excluded when any is (CVE-2025-61727).
//! - A name form we do not evaluate (otherName, x400Address, ediPartyName, registeredID)
//!   fails closed when the CA constrains that form ("the application MUST either process
//!   the constraint or reject the certificate"), and is ignored when it does not.
//! - A name that is malformed for its form (a dNSName `.example.com`, an 8-octet iPAddress,
//!   a mailbox with two `@`) fails when the CA constrains that form.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use x509_parser::prelude::{FromDer, X509Certificate};

use super::der::{self, Tlv, tag};
use super::dn::{DnError, NormalizedName};

/// OID content octets of id-ce-nameConstraints (2.5.29.30).
const OID_NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x1e];
/// OID content octets of id-ce-subjectAltName (2.5.29.17).
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// Most comparisons of a name with a subtree one path may cost. An attacker who controls a
/// CA certificate and a leaf can otherwise make the check quadratic in the certificate sizes
/// (x509-limbo `pathological::nc-dos-*`: 2048 subtrees × 4096 names). The number is Go's
/// crypto/x509 default (`maxConstraintComparisons`, the fix for CVE-2018-16875), which
/// rustls-webpki adopted too (`Budget::name_constraint_comparisons`).
pub const MAX_NAME_CONSTRAINT_COMPARISONS: usize = 250_000;

/// Longest name or constraint quoted in an error message, in characters.
const MAX_SHOWN_CHARS: usize = 128;

/// The name forms of `GeneralName`, in tag order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NameKind {
    OtherName,
    Rfc822,
    Dns,
    X400Address,
    Directory,
    EdiParty,
    Uri,
    IpAddress,
    RegisteredId,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::OtherName => "otherName",
            NameKind::Rfc822 => "rfc822Name",
            NameKind::Dns => "dNSName",
            NameKind::X400Address => "x400Address",
            NameKind::Directory => "directoryName",
            NameKind::EdiParty => "ediPartyName",
            NameKind::Uri => "uniformResourceIdentifier",
            NameKind::IpAddress => "iPAddress",
            NameKind::RegisteredId => "registeredID",
        })
    }
}

/// Why name constraints could not be read, or why a certificate's names break them.
///
/// The first group means the check could not be performed (bytes that are not what RFC 5280
/// allows); the second ([`NcError::is_violation`]) is the outcome "this path is not
/// allowed".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcError {
    #[error("certificate does not parse: {0}")]
    Certificate(String),
    #[error("nameConstraints is not valid DER: {0}")]
    Der(String),
    #[error("subjectAltName is not valid DER: {0}")]
    SubjectAltName(String),
    #[error("subject: {0}")]
    Subject(DnError),
    #[error("{0} appears more than once")]
    DuplicateExtension(&'static str),
    /// RFC 5280 section 4.2.1.10: "Conforming CAs MUST mark this extension as critical".
    #[error("nameConstraints is not marked critical (RFC 5280 section 4.2.1.10)")]
    NotCritical,
    /// Neither subtree list present, or one present but empty (`SIZE (1..MAX)`).
    #[error("nameConstraints has an empty or absent subtree list")]
    Empty,
    /// RFC 5280 section 4.2.1.10: "the minimum MUST be zero, and maximum MUST be absent".
    #[error("GeneralSubtree has a minimum other than 0 or a maximum")]
    SubtreeBounds,
    #[error("malformed {kind} constraint {value:?}")]
    MalformedConstraint { kind: NameKind, value: String },

    /// A name of a constrained form that is not valid for that form.
    #[error("{kind} {name:?} is malformed, so it cannot be shown to meet the constraints")]
    MalformedName { kind: NameKind, name: String },
    /// A name of a form the CA constrains but this module does not evaluate.
    #[error("the CA constrains {kind} names, which are not evaluated, and the certificate has one")]
    UnsupportedNameForm { kind: NameKind },
    #[error("{kind} {name:?} is not within any permitted subtree")]
    NotPermitted { kind: NameKind, name: String },
    #[error("{kind} {name:?} is within the excluded subtree {subtree:?}")]
    Excluded {
        kind: NameKind,
        name: String,
        subtree: String,
    },
    #[error("more than {limit} name-constraint comparisons")]
    BudgetExceeded { limit: usize },
}

impl NcError {
    /// True when the constraints were read and a name breaks them (or the work budget ran
    /// out, which is refused like a violation); false when the inputs were unreadable.
    pub fn is_violation(&self) -> bool {
        match self {
            NcError::Certificate(_)
            | NcError::Der(_)
            | NcError::SubjectAltName(_)
            | NcError::Subject(_)
            | NcError::DuplicateExtension(_)
            | NcError::NotCritical
            | NcError::Empty
            | NcError::SubtreeBounds
            | NcError::MalformedConstraint { .. } => false,
            NcError::MalformedName { .. }
            | NcError::UnsupportedNameForm { .. }
            | NcError::NotPermitted { .. }
            | NcError::Excluded { .. }
            | NcError::BudgetExceeded { .. } => true,
        }
    }
}

/// The work left for name-constraint comparisons on one path. Share one across every
/// [`NameConstraints::check_with_budget`] call of a path, so the limit is per path.
#[derive(Debug, Clone)]
pub struct NcBudget {
    remaining: usize,
}

impl Default for NcBudget {
    fn default() -> Self {
        NcBudget {
            remaining: MAX_NAME_CONSTRAINT_COMPARISONS,
        }
    }
}

impl NcBudget {
    fn consume(&mut self) -> Result<(), NcError> {
        self.remaining = self
            .remaining
            .checked_sub(1)
            .ok_or(NcError::BudgetExceeded {
                limit: MAX_NAME_CONSTRAINT_COMPARISONS,
            })?;
        Ok(())
    }
}

/// A CA's name constraints. Subtrees are kept sorted by name form, so a name is compared
/// only with the subtrees of its own form.
#[derive(Debug, Clone)]
pub struct NameConstraints {
    /// `None`: no permittedSubtrees (every name permitted unless excluded).
    permitted: Option<Vec<Subtree>>,
    excluded: Vec<Subtree>,
}

/// One `GeneralSubtree`'s base, validated.
#[derive(Debug, Clone)]
pub struct Subtree {
    base: Base,
}

#[derive(Debug, Clone)]
enum Base {
    Directory(NormalizedName),
    Rfc822(MailConstraint),
    /// Lowercase; empty matches every name.
    Dns(String),
    /// Lowercase host; `subdomains_only` for the leading-period form.
    Uri {
        host: String,
        subdomains_only: bool,
    },
    /// 4 or 16 octets each.
    Ip {
        network: Vec<u8>,
        mask: Vec<u8>,
    },
    /// otherName, x400Address, ediPartyName, registeredID: never evaluated.
    Unsupported(NameKind),
}

/// RFC 5280 section 4.2.1.10: "a constraint may specify a particular mailbox, all
/// addresses at a particular host, or all mailboxes in a domain".
#[derive(Debug, Clone)]
enum MailConstraint {
    /// `local@host`: the local part case-sensitive, the host lowercase.
    Mailbox { local: String, host: String },
    /// `host`: mailboxes at exactly that host.
    Host(String),
    /// `.domain` (stored without the period): mailboxes at any host below the domain.
    Subdomains(String),
}

impl Subtree {
    /// The name form this subtree constrains.
    pub fn kind(&self) -> NameKind {
        match &self.base {
            Base::Directory(_) => NameKind::Directory,
            Base::Rfc822(_) => NameKind::Rfc822,
            Base::Dns(_) => NameKind::Dns,
            Base::Uri { .. } => NameKind::Uri,
            Base::Ip { .. } => NameKind::IpAddress,
            Base::Unsupported(kind) => *kind,
        }
    }
}

impl fmt::Display for Subtree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.base {
            Base::Directory(name) => write!(f, "{name}"),
            Base::Rfc822(MailConstraint::Mailbox { local, host }) => write!(f, "{local}@{host}"),
            Base::Rfc822(MailConstraint::Host(host)) => f.write_str(host),
            Base::Rfc822(MailConstraint::Subdomains(domain)) => write!(f, ".{domain}"),
            Base::Dns(name) => f.write_str(name),
            Base::Uri {
                host,
                subdomains_only,
            } => write!(f, "{}{host}", if *subdomains_only { "." } else { "" }),
            Base::Ip { network, mask } => {
                write!(f, "{}/{}", ip_text(network), mask_bits(mask))
            }
            Base::Unsupported(kind) => write!(f, "({kind})"),
        }
    }
}

/// Whether the certificate carries a nameConstraints extension at all (valid or not). The
/// extension "MUST be used only in a CA certificate" (RFC 5280 section 4.2.1.10); the path
/// validator refuses an end-entity certificate for which this is true.
pub fn has_name_constraints(cert_der: &[u8]) -> Result<bool, NcError> {
    let cert = parse_certificate(cert_der)?;
    Ok(cert
        .extensions()
        .iter()
        .any(|e| e.oid.as_bytes() == OID_NAME_CONSTRAINTS))
}

fn parse_certificate(der: &[u8]) -> Result<X509Certificate<'_>, NcError> {
    match X509Certificate::from_der(der) {
        Ok(([], cert)) => Ok(cert),
        Ok(_) => Err(NcError::Certificate("trailing data".into())),
        Err(e) => Err(NcError::Certificate(e.to_string())),
    }
}

/// The value of the single extension with `oid`, with its critical flag.
fn single_extension<'a>(
    cert: &X509Certificate<'a>,
    oid: &[u8],
    what: &'static str,
) -> Result<Option<(&'a [u8], bool)>, NcError> {
    let mut found = None;
    for ext in cert.extensions() {
        if ext.oid.as_bytes() == oid {
            if found.is_some() {
                return Err(NcError::DuplicateExtension(what));
            }
            found = Some((ext.value, ext.critical));
        }
    }
    Ok(found)
}

impl NameConstraints {
    /// The constraints of a CA certificate; `None` when it has no nameConstraints extension.
    pub fn from_certificate_der(cert_der: &[u8]) -> Result<Option<NameConstraints>, NcError> {
        NameConstraints::from_x509(&parse_certificate(cert_der)?)
    }

    /// As [`NameConstraints::from_certificate_der`], from a parsed certificate.
    pub fn from_x509(cert: &X509Certificate<'_>) -> Result<Option<NameConstraints>, NcError> {
        match single_extension(cert, OID_NAME_CONSTRAINTS, "nameConstraints")? {
            None => Ok(None),
            Some((value, critical)) => {
                NameConstraints::from_extension_value(value, critical).map(Some)
            }
        }
    }

    /// Reads the extension's value (the DER of `NameConstraints`).
    pub fn from_extension_value(value: &[u8], critical: bool) -> Result<NameConstraints, NcError> {
        if !critical {
            return Err(NcError::NotCritical);
        }
        let der_err = |e: der::DerError| NcError::Der(e.to_string());
        let (seq, used) = der::read_tlv(value).map_err(der_err)?;
        if used != value.len() || seq.tag != tag::SEQUENCE {
            return Err(NcError::Der("not a single SEQUENCE".into()));
        }
        let mut reader = seq.reader();
        let mut permitted = None;
        let mut excluded = None;
        if reader.peek_tag() == Some(0xa0) {
            permitted = Some(read_subtrees(&reader.read().map_err(der_err)?)?);
        }
        if reader.peek_tag() == Some(0xa1) {
            excluded = Some(read_subtrees(&reader.read().map_err(der_err)?)?);
        }
        if !reader.is_empty() {
            return Err(NcError::Der("unexpected field in NameConstraints".into()));
        }
        if permitted.is_none() && excluded.is_none() {
            // "Conforming CAs MUST NOT issue certificates where name constraints is an empty
            // sequence."
            return Err(NcError::Empty);
        }
        Ok(NameConstraints {
            permitted,
            excluded: excluded.unwrap_or_default(),
        })
    }

    /// The permitted subtrees (`None` when the extension has no permittedSubtrees).
    pub fn permitted(&self) -> Option<&[Subtree]> {
        self.permitted.as_deref()
    }

    /// The excluded subtrees.
    pub fn excluded(&self) -> &[Subtree] {
        &self.excluded
    }

    /// Checks one later certificate's names with a budget of its own. On a path, prefer
    /// [`NameConstraints::check_with_budget`] with one [`NcBudget`] for the whole path.
    ///
    /// Call it for every certificate after this CA in the path except self-issued
    /// intermediates (see the module documentation: RFC 5280 section 6.1.3 (b)).
    pub fn check(&self, names: &CertNames) -> Result<(), NcError> {
        self.check_with_budget(names, &mut NcBudget::default())
    }

    /// RFC 5280 section 6.1.3 (b) and (c): every name of a form this CA constrains must be
    /// within some permitted subtree of that form (when there is one) and within no excluded
    /// subtree.
    pub fn check_with_budget(
        &self,
        names: &CertNames,
        budget: &mut NcBudget,
    ) -> Result<(), NcError> {
        for name in &names.names {
            let kind = name.kind();
            let excluded = of_kind(&self.excluded, kind);
            let permitted = self
                .permitted
                .as_deref()
                .map_or(&[][..], |p| of_kind(p, kind));
            if excluded.is_empty() && permitted.is_empty() {
                continue;
            }
            match name {
                Presented::Malformed { kind, text } => {
                    return Err(NcError::MalformedName {
                        kind: *kind,
                        name: shown(text),
                    });
                }
                Presented::Unsupported(kind) => {
                    return Err(NcError::UnsupportedNameForm { kind: *kind });
                }
                _ => {}
            }
            for subtree in excluded {
                budget.consume()?;
                if subtree.base.excludes(name) {
                    return Err(NcError::Excluded {
                        kind,
                        name: shown(&name.to_string()),
                        subtree: shown(&subtree.to_string()),
                    });
                }
            }
            if !permitted.is_empty() {
                let mut within = false;
                for subtree in permitted {
                    budget.consume()?;
                    if subtree.base.permits(name) {
                        within = true;
                        break;
                    }
                }
                if !within {
                    return Err(NcError::NotPermitted {
                        kind,
                        name: shown(&name.to_string()),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The subtrees of one form in a list sorted by form.
fn of_kind(subtrees: &[Subtree], kind: NameKind) -> &[Subtree] {
    let start = subtrees.partition_point(|s| s.kind() < kind);
    let end = subtrees.partition_point(|s| s.kind() <= kind);
    subtrees.get(start..end).unwrap_or_default()
}

/// `GeneralSubtrees ::= SEQUENCE SIZE (1..MAX) OF GeneralSubtree`, sorted by form.
fn read_subtrees(list: &Tlv<'_>) -> Result<Vec<Subtree>, NcError> {
    let der_err = |e: der::DerError| NcError::Der(e.to_string());
    let mut out = Vec::new();
    let mut reader = list.reader();
    while !reader.is_empty() {
        let subtree = reader.read().map_err(der_err)?;
        if subtree.tag != tag::SEQUENCE {
            return Err(NcError::Der("GeneralSubtree is not a SEQUENCE".into()));
        }
        let mut fields = subtree.reader();
        let base = fields.read().map_err(der_err)?;
        // minimum [0] BaseDistance DEFAULT 0: DER omits it; an explicit 0 is read around.
        if fields.peek_tag() == Some(0x80) {
            let minimum = fields.read().map_err(der_err)?;
            if minimum.value != [0] {
                return Err(NcError::SubtreeBounds);
            }
        }
        if fields.peek_tag() == Some(0x81) {
            return Err(NcError::SubtreeBounds);
        }
        if !fields.is_empty() {
            return Err(NcError::Der("unexpected field in GeneralSubtree".into()));
        }
        out.push(Subtree {
            base: read_base(&base)?,
        });
    }
    if out.is_empty() {
        return Err(NcError::Empty);
    }
    out.sort_by_key(Subtree::kind);
    Ok(out)
}

/// The name form of a `GeneralName` tag; `None` for a tag outside the CHOICE.
fn general_name_kind(t: u8) -> Option<NameKind> {
    Some(match t {
        0xa0 => NameKind::OtherName,
        0x81 => NameKind::Rfc822,
        0x82 => NameKind::Dns,
        0xa3 => NameKind::X400Address,
        0xa4 => NameKind::Directory,
        0xa5 => NameKind::EdiParty,
        0x86 => NameKind::Uri,
        0x87 => NameKind::IpAddress,
        0x88 => NameKind::RegisteredId,
        _ => return None,
    })
}

/// The base of a GeneralSubtree (RFC 5280 section 4.2.1.10), by its name form: a DNS name
/// (here), a URI host (`uri_base`), a mail constraint (`mail_constraint`), an IP address
/// range (`ip_base`), a directory name (here); other forms are kept as unsupported. A base
/// that does not have its form's syntax is a malformed constraint.
fn read_base(name: &Tlv<'_>) -> Result<Base, NcError> {
    let kind = general_name_kind(name.tag)
        .ok_or_else(|| NcError::Der(format!("GeneralName with tag 0x{:02x}", name.tag)))?;
    let malformed = || NcError::MalformedConstraint {
        kind,
        value: if kind == NameKind::IpAddress {
            crate::hex::lower(name.value)
        } else {
            shown(&String::from_utf8_lossy(name.value))
        },
    };
    let ascii = || {
        std::str::from_utf8(name.value)
            .ok()
            .filter(|s| s.is_ascii())
            .map(str::to_ascii_lowercase)
            .ok_or_else(malformed)
    };
    Ok(match kind {
        NameKind::Dns => {
            let text = ascii()?;
            // Empty matches everything (the root of the DNS); otherwise a hostname without
            // wildcard and without a leading period.
            if !text.is_empty() && !is_hostname(&text, false) {
                return Err(malformed());
            }
            Base::Dns(text)
        }
        NameKind::Uri => uri_base(ascii()?).ok_or_else(malformed)?,
        NameKind::Rfc822 => {
            let raw = std::str::from_utf8(name.value)
                .ok()
                .filter(|s| s.is_ascii())
                .ok_or_else(malformed)?;
            Base::Rfc822(mail_constraint(raw).ok_or_else(malformed)?)
        }
        NameKind::IpAddress => ip_base(name.value).ok_or_else(malformed)??,
        NameKind::Directory => {
            let name =
                NormalizedName::from_der(name.value).map_err(|e| NcError::MalformedConstraint {
                    kind,
                    value: e.to_string(),
                })?;
            Base::Directory(name)
        }
        NameKind::OtherName
        | NameKind::X400Address
        | NameKind::EdiParty
        | NameKind::RegisteredId => Base::Unsupported(kind),
    })
}

/// A URI constraint: a host, or with a leading period, the hosts of a domain (RFC 5280
/// section 4.2.1.10); `None` when it is not a hostname.
fn uri_base(text: String) -> Option<Base> {
    let (host, subdomains_only) = match text.strip_prefix('.') {
        Some(domain) => (domain.to_owned(), true),
        None => (text, false),
    };
    if !is_hostname(&host, false) {
        return None;
    }
    Some(Base::Uri {
        host,
        subdomains_only,
    })
}

/// An rfc822Name constraint: a mailbox, a host, or with a leading period, the hosts of a
/// domain (RFC 5280 section 4.2.1.10); `None` when it is none of these.
fn mail_constraint(raw: &str) -> Option<MailConstraint> {
    match raw.split_once('@') {
        Some((local, host)) => {
            if !is_local_part(local) || !is_hostname(host, false) {
                return None;
            }
            Some(MailConstraint::Mailbox {
                local: local.to_owned(),
                host: host.to_ascii_lowercase(),
            })
        }
        None => match raw.strip_prefix('.') {
            Some(domain) if is_hostname(domain, false) => {
                Some(MailConstraint::Subdomains(domain.to_ascii_lowercase()))
            }
            Some(_) => None,
            None if is_hostname(raw, false) => Some(MailConstraint::Host(raw.to_ascii_lowercase())),
            None => None,
        },
    }
}

/// An iPAddress constraint: an IPv4 or IPv6 address and its mask (8 or 32 octets, RFC 5280
/// section 4.2.1.10); `None` for another length, and an error naming the range when the
/// mask is not contiguous.
fn ip_base(value: &[u8]) -> Option<Result<Base, NcError>> {
    let half = match value.len() {
        8 => 4,
        32 => 16,
        _ => return None,
    };
    let (network, mask) = value.split_at(half);
    if !is_contiguous_mask(mask) {
        return Some(Err(NcError::MalformedConstraint {
            kind: NameKind::IpAddress,
            value: format!("{}/{}", ip_text(network), crate::hex::lower(mask)),
        }));
    }
    Some(Ok(Base::Ip {
        network: network.to_vec(),
        mask: mask.to_vec(),
    }))
}

impl Base {
    /// True when every value `name` stands for is within this subtree.
    fn permits(&self, name: &Presented) -> bool {
        match (self, name) {
            (Base::Dns(constraint), Presented::Dns(name)) => match name.strip_prefix("*.") {
                Some(base) => dns_within(base, constraint),
                None => dns_within(name, constraint),
            },
            _ => self.contains(name),
        }
    }

    /// True when some value `name` stands for is within this subtree.
    fn excludes(&self, name: &Presented) -> bool {
        match (self, name) {
            (Base::Dns(constraint), Presented::Dns(name)) => match name.strip_prefix("*.") {
                // `*.example.com` stands for `<label>.example.com`: it meets the subtree
                // when `example.com` is within it, or when the subtree is one label below
                // `example.com` (`bar.example.com`, CVE-2025-61727).
                Some(base) => {
                    dns_within(base, constraint)
                        || constraint
                            .strip_suffix(base)
                            .and_then(|label| label.strip_suffix('.'))
                            .is_some_and(|label| !label.is_empty() && !label.contains('.'))
                }
                None => dns_within(name, constraint),
            },
            _ => self.contains(name),
        }
    }

    /// Membership for the forms where a name stands for one value.
    fn contains(&self, name: &Presented) -> bool {
        match (self, name) {
            (Base::Directory(subtree), Presented::Directory(name)) => name.is_within(subtree),
            (Base::Rfc822(constraint), Presented::Rfc822 { local, host }) => match constraint {
                MailConstraint::Mailbox {
                    local: c_local,
                    host: c_host,
                } => local == c_local && host == c_host,
                MailConstraint::Host(c_host) => host == c_host,
                MailConstraint::Subdomains(domain) => is_proper_subdomain(host, domain),
            },
            (
                Base::Uri {
                    host: c_host,
                    subdomains_only,
                },
                Presented::Uri { host },
            ) => {
                if *subdomains_only {
                    is_proper_subdomain(host, c_host)
                } else {
                    host == c_host
                }
            }
            (Base::Ip { network, mask }, Presented::Ip(address)) => {
                address.len() == network.len()
                    && address
                        .iter()
                        .zip(network)
                        .zip(mask)
                        .all(|((a, n), m)| a & m == n & m)
            }
            _ => false,
        }
    }
}

/// RFC 5280 section 4.2.1.10, dNSName: "Any DNS name that can be constructed by simply
/// adding zero or more labels to the left-hand side of the name satisfies the name
/// constraint." Both lowercase.
fn dns_within(name: &str, constraint: &str) -> bool {
    constraint.is_empty() || name == constraint || is_proper_subdomain(name, constraint)
}

/// `name` is `<one or more labels>.domain`.
fn is_proper_subdomain(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain)
        .and_then(|prefix| prefix.strip_suffix('.'))
        .is_some_and(|prefix| !prefix.is_empty())
}

/// A hostname: dot-separated labels of letters, digits, `-` and `_` (underscores appear in
/// real certificates; rustls-webpki allows them too), each 1 to 63 characters, at most 253
/// in all. With `wildcard`, the first label may be `*` when another label follows.
fn is_hostname(s: &str, wildcard: bool) -> bool {
    if s.is_empty() || s.len() > 253 || s == "*" {
        return false;
    }
    s.split('.').enumerate().all(|(i, label)| {
        (wildcard && i == 0 && label == "*")
            || (!label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    })
}

/// The local part of a mailbox as RFC 5280 uses it: printable ASCII without `@` or space
/// (quoted local parts, which may contain both, are refused; that fails closed).
fn is_local_part(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b'@')
}

/// Ones then zeros.
fn is_contiguous_mask(mask: &[u8]) -> bool {
    let mut seen_zero = false;
    for &byte in mask {
        for bit in (0..8).rev() {
            let one = byte & (1 << bit) != 0;
            if one && seen_zero {
                return false;
            }
            seen_zero |= !one;
        }
    }
    true
}

fn mask_bits(mask: &[u8]) -> u32 {
    mask.iter().map(|b| b.count_ones()).sum()
}

fn ip_text(octets: &[u8]) -> String {
    if let Ok(v4) = <[u8; 4]>::try_from(octets) {
        Ipv4Addr::from(v4).to_string()
    } else if let Ok(v6) = <[u8; 16]>::try_from(octets) {
        Ipv6Addr::from(v6).to_string()
    } else {
        crate::hex::lower(octets)
    }
}

/// A name as it may appear in an error: printable, and not longer than
/// [`MAX_SHOWN_CHARS`].
fn shown(s: &str) -> String {
    let mut out: String = s.escape_debug().take(MAX_SHOWN_CHARS).collect();
    if out.chars().count() == MAX_SHOWN_CHARS {
        out.push('…');
    }
    out
}

/// The names of one certificate that name constraints apply to (RFC 5280 section
/// 4.2.1.10): the subject DN (when not empty), the subject's emailAddress attributes, and
/// every subjectAltName entry.
///
/// Not included: the subject commonName as a DNS name (RFC 5280 does not constrain it; a
/// PSD2 QWAC carries its domains in subjectAltName).
#[derive(Debug, Clone)]
pub struct CertNames {
    subject: NormalizedName,
    names: Vec<Presented>,
}

#[derive(Debug, Clone)]
enum Presented {
    Directory(NormalizedName),
    /// The local part as written, the host lowercase.
    Rfc822 {
        local: String,
        host: String,
    },
    /// Lowercase; may start with `*.`.
    Dns(String),
    /// The URI's host, lowercase.
    Uri {
        host: String,
    },
    /// 4 or 16 octets.
    Ip(Vec<u8>),
    /// otherName, x400Address, ediPartyName, registeredID.
    Unsupported(NameKind),
    /// Not valid for its form; the raw text for messages.
    Malformed {
        kind: NameKind,
        text: String,
    },
}

impl Presented {
    fn kind(&self) -> NameKind {
        match self {
            Presented::Directory(_) => NameKind::Directory,
            Presented::Rfc822 { .. } => NameKind::Rfc822,
            Presented::Dns(_) => NameKind::Dns,
            Presented::Uri { .. } => NameKind::Uri,
            Presented::Ip(_) => NameKind::IpAddress,
            Presented::Unsupported(kind) | Presented::Malformed { kind, .. } => *kind,
        }
    }

    /// One `GeneralName` from a subjectAltName.
    fn from_general_name(name: &Tlv<'_>) -> Result<Presented, NcError> {
        let kind = general_name_kind(name.tag).ok_or_else(|| {
            NcError::SubjectAltName(format!("GeneralName with tag 0x{:02x}", name.tag))
        })?;
        let text = || String::from_utf8_lossy(name.value).into_owned();
        let malformed = || Presented::Malformed { kind, text: text() };
        let ascii = std::str::from_utf8(name.value)
            .ok()
            .filter(|s| s.is_ascii());
        Ok(match kind {
            NameKind::Dns => match ascii {
                Some(s) if is_hostname(s, true) => Presented::Dns(s.to_ascii_lowercase()),
                _ => malformed(),
            },
            NameKind::Rfc822 => {
                ascii.map_or_else(malformed, |s| mailbox(s).unwrap_or_else(malformed))
            }
            NameKind::Uri => match ascii.and_then(uri_host) {
                Some(host) => Presented::Uri { host },
                None => malformed(),
            },
            NameKind::IpAddress => match name.value.len() {
                4 | 16 => Presented::Ip(name.value.to_vec()),
                _ => Presented::Malformed {
                    kind,
                    text: crate::hex::lower(name.value),
                },
            },
            NameKind::Directory => match NormalizedName::from_der(name.value) {
                Ok(dn) => Presented::Directory(dn),
                Err(_) => Presented::Malformed {
                    kind,
                    text: crate::hex::lower(name.value),
                },
            },
            NameKind::OtherName
            | NameKind::X400Address
            | NameKind::EdiParty
            | NameKind::RegisteredId => Presented::Unsupported(kind),
        })
    }
}

impl fmt::Display for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Presented::Directory(name) => write!(f, "{name}"),
            Presented::Rfc822 { local, host } => write!(f, "{local}@{host}"),
            Presented::Dns(name) => f.write_str(name),
            Presented::Uri { host } => f.write_str(host),
            Presented::Ip(octets) => f.write_str(&ip_text(octets)),
            Presented::Unsupported(kind) => write!(f, "({kind})"),
            Presented::Malformed { text, .. } => f.write_str(text),
        }
    }
}

/// `local@host` with exactly one `@`.
fn mailbox(s: &str) -> Option<Presented> {
    let (local, host) = s.split_once('@')?;
    (is_local_part(local) && is_hostname(host, false)).then(|| Presented::Rfc822 {
        local: local.to_owned(),
        host: host.to_ascii_lowercase(),
    })
}

/// The host of a URI with an authority (RFC 3986 section 3.2.2), lowercase; `None` when
/// there is no authority or its host is not a domain name (an IP literal, an IPv4 address,
/// percent-encoding), which URI constraints cannot be shown to allow.
fn uri_host(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    let mut scheme_chars = scheme.chars();
    if !scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !scheme_chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let rest = rest.strip_prefix("//")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        Some(_) => return None,
        None => host_port,
    };
    if host.parse::<Ipv4Addr>().is_ok() || !is_hostname(host, false) {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

impl CertNames {
    /// Collects the names of a certificate.
    pub fn from_certificate_der(cert_der: &[u8]) -> Result<CertNames, NcError> {
        CertNames::from_x509(&parse_certificate(cert_der)?)
    }

    /// As [`CertNames::from_certificate_der`], from a parsed certificate.
    pub fn from_x509(cert: &X509Certificate<'_>) -> Result<CertNames, NcError> {
        let subject = NormalizedName::from_x509(cert.subject()).map_err(NcError::Subject)?;
        let mut names = Vec::new();
        if !subject.is_empty() {
            // "Restrictions of the form directoryName MUST be applied to the subject field in
            // the certificate (when the certificate includes a non-empty subject field)".
            names.push(Presented::Directory(subject.clone()));
        }
        // rfc822Name constraints apply to the subject's emailAddress attributes (section
        // 4.2.1.10 asks for it when there is no subjectAltName; we do it always, which can
        // only refuse more).
        for email in subject.email_addresses() {
            names.push(mailbox(&email).unwrap_or(Presented::Malformed {
                kind: NameKind::Rfc822,
                text: email,
            }));
        }
        if let Some((value, _)) = single_extension(cert, OID_SUBJECT_ALT_NAME, "subjectAltName")? {
            let der_err = |e: der::DerError| NcError::SubjectAltName(e.to_string());
            let (seq, used) = der::read_tlv(value).map_err(der_err)?;
            if used != value.len() || seq.tag != tag::SEQUENCE {
                return Err(NcError::SubjectAltName("not a single SEQUENCE".into()));
            }
            let mut reader = seq.reader();
            while !reader.is_empty() {
                names.push(Presented::from_general_name(
                    &reader.read().map_err(der_err)?,
                )?);
            }
        }
        Ok(CertNames { subject, names })
    }

    /// The subject, prepared (the caller compares it with the issuer to find self-issued
    /// certificates).
    pub fn subject(&self) -> &NormalizedName {
        &self.subject
    }
}

#[cfg(test)]
mod tests;
