//! The `Qualifications` extension of a trusted-list service (ETSI TS 119 612 clause 5.5.9.2)
//! and what it means for one certificate.
//!
//! A supervisory body uses `Qualifications` to say more about *some* of the certificates a
//! CA/QC service issues than the service's status does: these ones are for website
//! authentication, those are not qualified at all. Each `QualificationElement` pairs
//! qualifiers with criteria that select the certificates they apply to:
//!
//! ```text
//! ecc:Qualifications
//! └─ ecc:QualificationElement                              (1..n)
//!    ├─ ecc:Qualifiers/ecc:Qualifier@uri                   (1..n) → Qualifier
//!    └─ ecc:CriteriaList@assert = all | atLeastOne | none  → CriteriaList
//!       ├─ ecc:KeyUsage/ecc:KeyUsageBit@name = true|false  → Criterion::KeyUsage
//!       ├─ ecc:PolicySet/ecc:PolicyIdentifier/xades:Identifier → Criterion::PolicySet
//!       ├─ ecc:CriteriaList (nested)                       → Criterion::List
//!       ├─ ecc:Description                                 (ignored)
//!       └─ ecc:otherCriteriaList
//!          ├─ tslx:CertSubjectDNAttribute/tslx:AttributeOID → Criterion::SubjectDnAttributes
//!          └─ tslx:ExtendedKeyUsage/tslx:KeyPurposeId      → Criterion::ExtendedKeyUsage
//! ```
//!
//! (`ecc:` is `http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/#`,
//! `tslx:` is `http://uri.etsi.org/02231/v2/additionaltypes#`, `xades:` is
//! `http://uri.etsi.org/01903/v1.3.2#`; the XML is read in `tsl/read.rs`.)
//!
//! [`evaluate`] is a pure function of the qualifications of one status period and the facts
//! of one certificate ([`CertFacts`]). Its rules, all failing closed:
//!
//! * A criterion this module cannot decide for the certificate (an element it does not know,
//!   an identifier that is not an OID, `KeyUsage` asked of a certificate with no keyUsage
//!   extension) makes the element's match *unknown*; an unknown match of an element whose
//!   qualifiers would change the outcome refuses the certificate. An element whose
//!   qualifiers are all [neutral](Qualifier::is_neutral) cannot change the outcome and is not
//!   evaluated at all.
//! * For a matching element: `QCForWSA` and `QCForESeal` decide the kinds the service
//!   approves for the certificate (in place of the `AdditionalServiceInformation` kinds);
//!   `NotQualified` and `QCForESig` refuse it; an unknown qualifier URI refuses it.
//! * URIs are compared whole and exactly, never by prefix or suffix.

use std::collections::BTreeSet;

use super::CertKind;
use crate::cert::{KeyUsage, PspCertificate};

/// The qualifier URIs of TS 119 612 clause 5.5.9.2.1 (Annex D.5, `SvcInfoExt`).
pub mod uri {
    /// `QCStatement`: qualified, as the certificate's QcCompliance statement says.
    pub const QC_STATEMENT: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCStatement";
    /// `QCForESig`: a certificate for electronic signatures.
    pub const QC_FOR_ESIG: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForESig";
    /// `QCForESeal`: a certificate for electronic seals.
    pub const QC_FOR_ESEAL: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForESeal";
    /// `QCForWSA`: a certificate for website authentication.
    pub const QC_FOR_WSA: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForWSA";
    /// `NotQualified`: not a qualified certificate.
    pub const NOT_QUALIFIED: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/NotQualified";
    /// `QCWithSSCD`: the private key is held in a secure signature creation device.
    pub const QC_WITH_SSCD: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCWithSSCD";
    /// `QCNoSSCD`: the private key is not held in a secure signature creation device.
    pub const QC_NO_SSCD: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCNoSSCD";
    /// `QCSSCDStatusAsInCert`: whether the key is in an SSCD is as the certificate says.
    pub const QC_SSCD_STATUS_AS_IN_CERT: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCSSCDStatusAsInCert";
    /// `QCWithQSCD`: the private key is held in a qualified signature creation device.
    pub const QC_WITH_QSCD: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCWithQSCD";
    /// `QCNoQSCD`: the private key is not held in a qualified signature creation device.
    pub const QC_NO_QSCD: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCNoQSCD";
    /// `QCQSCDStatusAsInCert`: whether the key is in a QSCD is as the certificate says.
    pub const QC_QSCD_STATUS_AS_IN_CERT: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCQSCDStatusAsInCert";
    /// `QCQSCDManagedOnBehalf`: the QSCD holding the key is managed on the holder's behalf.
    pub const QC_QSCD_MANAGED_ON_BEHALF: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCQSCDManagedOnBehalf";
    /// `QCForLegalPerson`: a certificate issued to a legal person.
    pub const QC_FOR_LEGAL_PERSON: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForLegalPerson";
}

/// One `QualificationElement`: qualifiers and the certificates they apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qualification {
    /// `Qualifiers/Qualifier@uri`, in document order; never empty.
    pub qualifiers: Vec<Qualifier>,
    /// The certificates the qualifiers apply to.
    pub criteria: CriteriaList,
}

/// A `Qualifier@uri` (clause 5.5.9.2.1), named when this module knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qualifier {
    /// `QCStatement`: qualified, as the certificate's QcCompliance says.
    QcStatement,
    /// `QCForESig`: a certificate for electronic signatures.
    QcForESig,
    /// `QCForESeal`: a certificate for electronic seals.
    QcForESeal,
    /// `QCForWSA`: a certificate for website authentication.
    QcForWsa,
    /// `NotQualified`: not a qualified certificate, whatever it says.
    NotQualified,
    /// `QCWithSSCD`: the key is held in an SSCD.
    QcWithSscd,
    /// `QCNoSSCD`: the key is not held in an SSCD.
    QcNoSscd,
    /// `QCSSCDStatusAsInCert`: SSCD status as the certificate says.
    QcSscdStatusAsInCert,
    /// `QCWithQSCD`: the key is held in a QSCD.
    QcWithQscd,
    /// `QCNoQSCD`: the key is not held in a QSCD.
    QcNoQscd,
    /// `QCQSCDStatusAsInCert`: QSCD status as the certificate says.
    QcQscdStatusAsInCert,
    /// `QCQSCDManagedOnBehalf`: the QSCD is managed on the holder's behalf.
    QcQscdManagedOnBehalf,
    /// `QCForLegalPerson`: a certificate issued to a legal person.
    QcForLegalPerson,
    /// Any other URI, kept as written (trimmed of XML white space).
    Unknown(String),
}

impl Qualifier {
    /// The qualifier named by `uri`, compared whole and exactly (URIs are case-sensitive).
    pub fn from_uri(u: &str) -> Qualifier {
        match u {
            uri::QC_STATEMENT => Qualifier::QcStatement,
            uri::QC_FOR_ESIG => Qualifier::QcForESig,
            uri::QC_FOR_ESEAL => Qualifier::QcForESeal,
            uri::QC_FOR_WSA => Qualifier::QcForWsa,
            uri::NOT_QUALIFIED => Qualifier::NotQualified,
            uri::QC_WITH_SSCD => Qualifier::QcWithSscd,
            uri::QC_NO_SSCD => Qualifier::QcNoSscd,
            uri::QC_SSCD_STATUS_AS_IN_CERT => Qualifier::QcSscdStatusAsInCert,
            uri::QC_WITH_QSCD => Qualifier::QcWithQscd,
            uri::QC_NO_QSCD => Qualifier::QcNoQscd,
            uri::QC_QSCD_STATUS_AS_IN_CERT => Qualifier::QcQscdStatusAsInCert,
            uri::QC_QSCD_MANAGED_ON_BEHALF => Qualifier::QcQscdManagedOnBehalf,
            uri::QC_FOR_LEGAL_PERSON => Qualifier::QcForLegalPerson,
            other => Qualifier::Unknown(other.to_owned()),
        }
    }

    /// The qualifier's URI: the known one, or the unknown URI as written.
    pub fn uri(&self) -> &str {
        match self {
            Qualifier::QcStatement => uri::QC_STATEMENT,
            Qualifier::QcForESig => uri::QC_FOR_ESIG,
            Qualifier::QcForESeal => uri::QC_FOR_ESEAL,
            Qualifier::QcForWsa => uri::QC_FOR_WSA,
            Qualifier::NotQualified => uri::NOT_QUALIFIED,
            Qualifier::QcWithSscd => uri::QC_WITH_SSCD,
            Qualifier::QcNoSscd => uri::QC_NO_SSCD,
            Qualifier::QcSscdStatusAsInCert => uri::QC_SSCD_STATUS_AS_IN_CERT,
            Qualifier::QcWithQscd => uri::QC_WITH_QSCD,
            Qualifier::QcNoQscd => uri::QC_NO_QSCD,
            Qualifier::QcQscdStatusAsInCert => uri::QC_QSCD_STATUS_AS_IN_CERT,
            Qualifier::QcQscdManagedOnBehalf => uri::QC_QSCD_MANAGED_ON_BEHALF,
            Qualifier::QcForLegalPerson => uri::QC_FOR_LEGAL_PERSON,
            Qualifier::Unknown(u) => u,
        }
    }

    /// Whether the qualifier is understood and cannot change whether the gateway approves a
    /// QWAC or a QSealC: the (Q)SCD qualifiers concern where a signature key is held, and
    /// `QCStatement` / `QCForLegalPerson` agree with what the checks already require of the
    /// certificate itself (QcCompliance, an organisation subject).
    pub fn is_neutral(&self) -> bool {
        match self {
            Qualifier::QcStatement
            | Qualifier::QcWithSscd
            | Qualifier::QcNoSscd
            | Qualifier::QcSscdStatusAsInCert
            | Qualifier::QcWithQscd
            | Qualifier::QcNoQscd
            | Qualifier::QcQscdStatusAsInCert
            | Qualifier::QcQscdManagedOnBehalf
            | Qualifier::QcForLegalPerson => true,
            Qualifier::QcForESig
            | Qualifier::QcForESeal
            | Qualifier::QcForWsa
            | Qualifier::NotQualified
            | Qualifier::Unknown(_) => false,
        }
    }

    /// The last path segment, for messages (`NotQualified`); the whole URI when unknown.
    fn short(&self) -> &str {
        match self {
            Qualifier::Unknown(u) => u,
            known => known.uri().rsplit('/').next().unwrap_or_default(),
        }
    }
}

/// `CriteriaList@assert` (clause 5.5.9.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assert {
    /// `all`: every criterion holds (an empty list holds for every certificate).
    All,
    /// `atLeastOne`: some criterion holds.
    AtLeastOne,
    /// `none`: no criterion holds.
    None,
}

impl Assert {
    /// The value as the schema spells it; anything else is `None`.
    pub fn from_xml(value: &str) -> Option<Assert> {
        match value {
            "all" => Some(Assert::All),
            "atLeastOne" => Some(Assert::AtLeastOne),
            "none" => Some(Assert::None),
            _ => None,
        }
    }
}

/// A `CriteriaList`: criteria combined by `assert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriteriaList {
    /// How the criteria are combined (`all`, `atLeastOne` or `none`).
    pub assert: Assert,
    /// The criteria, in document order.
    pub criteria: Vec<Criterion>,
}

/// One criterion of a [`CriteriaList`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Criterion {
    /// `KeyUsage`: every listed bit has the given value in the certificate's keyUsage.
    KeyUsage(Vec<(KeyUsageBit, bool)>),
    /// `PolicySet`: every listed policy OID (dotted) is in certificatePolicies.
    PolicySet(Vec<String>),
    /// A nested `CriteriaList`.
    List(CriteriaList),
    /// `otherCriteriaList/CertSubjectDNAttribute`: the subject has an attribute of every
    /// listed type (dotted OIDs).
    SubjectDnAttributes(Vec<String>),
    /// `otherCriteriaList/ExtendedKeyUsage`: every listed KeyPurposeId (dotted) is in the
    /// certificate's extendedKeyUsage.
    ExtendedKeyUsage(Vec<String>),
    /// Something this module cannot evaluate, described for the reason given to a refused
    /// certificate (`{namespace}localName`, or an identifier that is not an OID).
    NotUnderstood(String),
}

/// The `KeyUsageBit@name` values (clause 5.5.9.2.2.1; RFC 5280 section 4.2.1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUsageBit {
    /// `digitalSignature` (bit 0).
    DigitalSignature,
    /// `nonRepudiation` (bit 1, also called contentCommitment).
    NonRepudiation,
    /// `keyEncipherment` (bit 2).
    KeyEncipherment,
    /// `dataEncipherment` (bit 3).
    DataEncipherment,
    /// `keyAgreement` (bit 4).
    KeyAgreement,
    /// `keyCertSign` (bit 5).
    KeyCertSign,
    /// `crlSign` (bit 6).
    CrlSign,
    /// `encipherOnly` (bit 7).
    EncipherOnly,
    /// `decipherOnly` (bit 8).
    DecipherOnly,
}

impl KeyUsageBit {
    /// The bit the schema names `name` (exact spelling); `None` for any other name.
    pub fn from_name(name: &str) -> Option<KeyUsageBit> {
        Some(match name {
            "digitalSignature" => KeyUsageBit::DigitalSignature,
            "nonRepudiation" => KeyUsageBit::NonRepudiation,
            "keyEncipherment" => KeyUsageBit::KeyEncipherment,
            "dataEncipherment" => KeyUsageBit::DataEncipherment,
            "keyAgreement" => KeyUsageBit::KeyAgreement,
            "keyCertSign" => KeyUsageBit::KeyCertSign,
            "crlSign" => KeyUsageBit::CrlSign,
            "encipherOnly" => KeyUsageBit::EncipherOnly,
            "decipherOnly" => KeyUsageBit::DecipherOnly,
            _ => return None,
        })
    }

    fn of(self, ku: &KeyUsage) -> bool {
        match self {
            KeyUsageBit::DigitalSignature => ku.digital_signature,
            KeyUsageBit::NonRepudiation => ku.non_repudiation,
            KeyUsageBit::KeyEncipherment => ku.key_encipherment,
            KeyUsageBit::DataEncipherment => ku.data_encipherment,
            KeyUsageBit::KeyAgreement => ku.key_agreement,
            KeyUsageBit::KeyCertSign => ku.key_cert_sign,
            KeyUsageBit::CrlSign => ku.crl_sign,
            KeyUsageBit::EncipherOnly => ku.encipher_only,
            KeyUsageBit::DecipherOnly => ku.decipher_only,
        }
    }
}

/// What the criteria look at in a certificate.
#[derive(Debug, Clone, Copy)]
pub struct CertFacts<'a> {
    /// `None`: the certificate has no keyUsage extension.
    pub key_usage: Option<&'a KeyUsage>,
    /// certificatePolicies OIDs, dotted.
    pub policies: &'a [String],
    /// Subject attribute types, dotted.
    pub subject_attribute_types: &'a [String],
    /// extendedKeyUsage OIDs, dotted; `None` when the extension is absent.
    pub extended_key_usage: Option<&'a [String]>,
}

impl<'a> CertFacts<'a> {
    /// The facts of `cert` the criteria look at.
    pub fn of(cert: &'a PspCertificate) -> CertFacts<'a> {
        CertFacts {
            key_usage: cert.key_usage.as_ref(),
            policies: &cert.policies,
            subject_attribute_types: &cert.subject_attribute_types,
            extended_key_usage: cert.extended_key_usage.as_deref(),
        }
    }
}

/// Whether criteria select a certificate: three-valued, so that what cannot be decided is
/// never read as "no".
#[derive(Debug, Clone, PartialEq, Eq)]
enum Match {
    Yes,
    No,
    /// Cannot be decided, and why.
    Unknown(String),
}

impl Criterion {
    fn matches(&self, facts: &CertFacts<'_>) -> Match {
        let all_in = |wanted: &[String], have: &[String]| {
            if wanted.iter().all(|w| have.contains(w)) {
                Match::Yes
            } else {
                Match::No
            }
        };
        match self {
            Criterion::KeyUsage(bits) => match facts.key_usage {
                // RFC 5280 reads an absent keyUsage as "any use": whether a listed bit is
                // set cannot be said.
                None => Match::Unknown(
                    "a KeyUsage criterion applies to a certificate without keyUsage".to_owned(),
                ),
                Some(ku) if bits.iter().all(|(bit, value)| bit.of(ku) == *value) => Match::Yes,
                Some(_) => Match::No,
            },
            Criterion::PolicySet(oids) => all_in(oids, facts.policies),
            Criterion::List(list) => list.matches(facts),
            Criterion::SubjectDnAttributes(oids) => all_in(oids, facts.subject_attribute_types),
            Criterion::ExtendedKeyUsage(oids) => {
                all_in(oids, facts.extended_key_usage.unwrap_or_default())
            }
            Criterion::NotUnderstood(what) => {
                Match::Unknown(format!("criterion {what} is not understood"))
            }
        }
    }
}

impl CriteriaList {
    /// Whether the criteria select the certificate; `None` when that cannot be decided. The
    /// unit tests' view of [`CriteriaList::matches`]; the product reads `matches` itself.
    #[cfg(test)]
    pub(crate) fn selects(&self, facts: &CertFacts<'_>) -> Option<bool> {
        match self.matches(facts) {
            Match::Yes => Some(true),
            Match::No => Some(false),
            Match::Unknown(_) => None,
        }
    }

    fn matches(&self, facts: &CertFacts<'_>) -> Match {
        let mut unknown = None;
        let mut any_yes = false;
        let mut any_no = false;
        for c in &self.criteria {
            match c.matches(facts) {
                Match::Yes => any_yes = true,
                Match::No => any_no = true,
                Match::Unknown(why) => {
                    unknown.get_or_insert(why);
                }
            }
        }
        // Kleene logic: a known answer wins only where no unknown criterion could change it.
        let decided = match self.assert {
            Assert::All if any_no => Some(Match::No),
            Assert::AtLeastOne if any_yes => Some(Match::Yes),
            Assert::None if any_yes => Some(Match::No),
            _ => None,
        };
        if let Some(m) = decided {
            return m;
        }
        if let Some(why) = unknown {
            return Match::Unknown(why);
        }
        match self.assert {
            Assert::All | Assert::None => Match::Yes,
            Assert::AtLeastOne => Match::No,
        }
    }
}

/// Why a service's `Qualifications` refuse a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `NotQualified` applies to the certificate.
    #[error("the trusted list qualifies certificates like this one as NotQualified")]
    NotQualified,
    /// `QCForESig` applies: an e-signature certificate is neither a QWAC nor a QSealC.
    #[error(
        "the trusted list qualifies certificates like this one as QCForESig (for electronic \
         signatures, neither website authentication nor seals)"
    )]
    ForESig,
    /// A qualifier URI this module does not know applies to the certificate.
    #[error("the trusted list's qualifier {uri} applies to this certificate and is not understood")]
    UnknownQualifier {
        /// The qualifier URI, as written.
        uri: String,
    },
    /// Whether an element whose qualifiers matter applies cannot be decided.
    #[error("whether the trusted list's qualifier {qualifier} applies cannot be decided: {why}")]
    Undecidable {
        /// The qualifier's short name (`QCForWSA`, …).
        qualifier: String,
        /// Why whether the element applies cannot be decided.
        why: String,
    },
}

/// What the `Qualifications` of one status period say about one certificate: `Ok(None)`
/// when no qualifier changes the outcome (the service's `AdditionalServiceInformation`
/// kinds stand), `Ok(Some(kinds))` when `QCForWSA` / `QCForESeal` decide the kinds the
/// service approves for this certificate, `Err` when the certificate is refused. The first
/// refusal in document order is given.
pub fn evaluate(
    qualifications: &[Qualification],
    facts: &CertFacts<'_>,
) -> Result<Option<BTreeSet<CertKind>>, Refusal> {
    let mut kinds: Option<BTreeSet<CertKind>> = None;
    for q in qualifications {
        let Some(deciding) = q.qualifiers.iter().find(|x| !x.is_neutral()) else {
            continue;
        };
        match q.criteria.matches(facts) {
            Match::No => continue,
            Match::Unknown(why) => {
                return Err(Refusal::Undecidable {
                    qualifier: deciding.short().to_owned(),
                    why,
                });
            }
            Match::Yes => {}
        }
        for qualifier in &q.qualifiers {
            match qualifier {
                Qualifier::QcForWsa => {
                    kinds.get_or_insert_default().insert(CertKind::Web);
                }
                Qualifier::QcForESeal => {
                    kinds.get_or_insert_default().insert(CertKind::Seal);
                }
                Qualifier::NotQualified => return Err(Refusal::NotQualified),
                Qualifier::QcForESig => return Err(Refusal::ForESig),
                Qualifier::Unknown(uri) => {
                    return Err(Refusal::UnknownQualifier { uri: uri.clone() });
                }
                neutral => debug_assert!(neutral.is_neutral()),
            }
        }
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests;
