//! ETSI TS 119 612 trusted lists: the XML read into owned values.
//!
//! A trusted list (TL) names, per Member State, the trust service providers (TSPs) its
//! supervisory body oversees, each TSP's services, the key that identifies each service and the
//! history of each service's status. The gateway needs it to decide whether the CA that issued a
//! PSP's certificate was a *qualified* CA (`…/Svctype/CA/QC`, status `granted`) for website
//! authentication or for seals at a given time.
//!
//! [`parse`] reads (TS 119 612 clause numbers as in V2.1.1 and later):
//!
//! ```text
//! TrustServiceStatusList                              (root, clause 5.2.1 TSL tag)
//! ├─ SchemeInformation                                (5.3)
//! │  ├─ TSLSequenceNumber                             (5.3.2)  → TrustedList::sequence_number
//! │  ├─ TSLType                                       (5.3.3)  → TrustedList::tsl_type
//! │  ├─ SchemeInformationURI/URI                      (5.3.7)  → TrustedList::scheme_information_uris
//! │  ├─ PointersToOtherTSL/OtherTSLPointer            (5.3.13) → TrustedList::pointers
//! │  ├─ SchemeTerritory                               (5.3.10) → TrustedList::territory
//! │  ├─ ListIssueDateTime                             (5.3.14) → TrustedList::issue_date
//! │  └─ NextUpdate/dateTime                           (5.3.15) → TrustedList::next_update
//! └─ TrustServiceProviderList/TrustServiceProvider    (5.3.18)
//!    ├─ TSPInformation/TSPName/Name                   (5.4.1)  → TslService::tsp_name
//!    └─ TSPServices/TSPService                        (5.4.6)
//!       ├─ ServiceInformation                         (5.5)
//!       │  ├─ ServiceTypeIdentifier                   (5.5.1)  → StatusPeriod::service_type
//!       │  ├─ ServiceName/Name                        (5.5.2)  → TslService::service_name
//!       │  ├─ ServiceDigitalIdentity/DigitalId        (5.5.3)  → certificates, SKIs, names
//!       │  ├─ ServiceStatus                           (5.5.4)  → StatusPeriod::status
//!       │  ├─ StatusStartingTime                      (5.5.5)  → StatusPeriod::starting
//!       │  └─ ServiceInformationExtensions/Extension  (5.5.9)
//!       │     ├─ ecc:Qualifications                   (5.5.9.2) → StatusPeriod::qualifications
//!       │     ├─ AdditionalServiceInformation/URI     (5.5.9.4) → StatusPeriod::additional_info
//!       │     └─ any other, if Critical="true"        → StatusPeriod::unread_critical_extensions
//!       └─ ServiceHistory/ServiceHistoryInstance      (5.5.10, 5.6.1–5.6.6) → more periods
//! ```
//!
//! Every element is matched by local name *and* the TS 119 612 namespace
//! [`TSL_NAMESPACE`], so a same-named element from another namespace (the `ds:` signature's
//! `X509Certificate`, an extension's own vocabulary) is never taken for a TL element.
//!
//! **Not done here**: the XML signature (clause 5.7) is not verified. A [`TrustedList`] from
//! [`parse`] is *unauthenticated*. To authenticate one, parse once
//! ([`super::xmlsig::parse_document`]), verify that tree ([`super::xmlsig::verify`]), compare
//! the signer with the scheme operator's certificates from the configuration or the list of
//! the lists, and read the same tree with [`read_document`] (not yet done when lists load).
//!
//! **Extensions** (clause 5.5.9). `AdditionalServiceInformation` and `Qualifications` are
//! read, whether marked critical or not; the `Qualifications` vocabulary is described in
//! [`crate::trust::qualifications`]. Every other extension marked critical is recorded in
//! [`StatusPeriod::unread_critical_extensions`], so that the consumer refuses to rely on a
//! period it does not understand, as clause 5.5.9 requires. A `Qualifications` extension
//! whose structure is broken (no `Qualifiers`, a `Qualifier` without `uri`, an `assert`
//! outside `all | atLeastOne | none`, a `KeyUsageBit` that is not a boolean, nesting deeper
//! than [`MAX_CRITERIA_DEPTH`]) skips the service, like any broken service field; a criterion
//! whose *content* is not understood (an unknown element, an identifier that is not an OID)
//! is kept as [`Criterion::NotUnderstood`](crate::trust::qualifications::Criterion) and
//! refuses the certificates it could apply to.
//!
//! **Hostile input.** The input is capped at [`MAX_TSL_BYTES`] and [`MAX_XML_NODES`]; a
//! document type declaration is refused (roxmltree's default `allow_dtd: false` rejects any
//! `<!DOCTYPE`, so no entity is ever expanded and nothing external is fetched); nothing here
//! panics on any input. What counts as broken:
//!
//! * the document as a whole — not UTF-8, not well-formed XML, not a `TrustServiceStatusList`,
//!   or a broken `SchemeInformation` (missing territory, unparseable date or sequence number,
//!   a field given twice): [`parse`] returns an error;
//! * one service — a certificate that is not Base64 or not DER X.509, an unparseable status
//!   time, a missing or duplicated mandatory element, a history entry later than the current
//!   status: that service is left out whole and a note goes to [`TrustedList::skipped`].
//!   Leaving out the whole service, not just the bad field, fails closed: a service with a
//!   history entry missing could look granted at a time it was withdrawn, and a certificate
//!   that cannot be read cannot be matched anyway.
//!
//! **A list of the lists** (LOTL, `TSLType` ending in `listofthelists`, clause 5.3.3) parses
//! to a [`TrustedList`] with no services: it points to other lists, it does not list TSPs.
//! Any `TrustServiceProviderList` inside it is ignored and noted in `skipped`, so a LOTL can
//! never be mistaken for a TL with services. Use [`TrustedList::is_list_of_lists`] to tell.

pub(crate) mod read;
pub mod shape;
mod xsd;

use time::OffsetDateTime;

use super::qualifications::Qualification;

/// The XML namespace of TS 119 612 trusted lists (Annex C; registered in Annex D.1).
pub const TSL_NAMESPACE: &str = "http://uri.etsi.org/02231/v2#";

/// Largest input [`parse`] accepts: 32 MiB.
///
/// Real lists are far smaller: the CZ list in the test data (133 services, 6 TSPs) is 0.6 MiB,
/// the EU lists of the lists 0.4–0.5 MiB, and TS 119 612 Annex G.8 asks operators to keep
/// lists small. 32 MiB leaves room for fifty times the CZ list while bounding what a hostile
/// or broken server can make us spend (the parsed tree costs a small multiple of the input).
pub const MAX_TSL_BYTES: usize = 32 * 1024 * 1024;

/// Deepest nesting of `CriteriaList` in a `Qualifications` extension (the outer list is depth
/// 1). The real CZ and IE lists never nest; the TS 119 612 examples nest once. Eight levels
/// leave room for any honest list while keeping the recursive reader and evaluator shallow.
pub const MAX_CRITERIA_DEPTH: usize = 8;

/// Most `OtherTSLPointer` entries read from one list. The EU list of the lists has about 45
/// (one per Member State and EEA country, some twice for a PDF rendering); a list with more
/// is refused rather than read in part.
pub const MAX_POINTERS: usize = 256;

/// Most certificates one `OtherTSLPointer` may name. Real pointers name two to eight (a
/// scheme operator's current and next signing keys); more is refused.
pub const MAX_POINTER_CERTIFICATES: usize = 32;

/// The namespace of the `Qualifications` extension (TS 119 612 Annex C.2, `ecc:`).
pub const ECC_NAMESPACE: &str =
    "http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/#";
/// TS 119 612 additional types (Annex C.3, `tslx:`): `CertSubjectDNAttribute`,
/// `ExtendedKeyUsage`.
pub const ADDITIONAL_TYPES_NAMESPACE: &str = "http://uri.etsi.org/02231/v2/additionaltypes#";
/// XAdES 1.3.2 (ETSI EN 319 132-1), whose `Identifier` carries the OIDs of the criteria.
pub const XADES_NAMESPACE: &str = "http://uri.etsi.org/01903/v1.3.2#";

/// Most XML nodes (elements, text, comments…) [`parse`] builds before giving up.
///
/// The CZ list has 11 170 nodes in 640 KB, about one per 57 bytes; a list of that shape at
/// [`MAX_TSL_BYTES`] would have about 590 000. Two million is three times that, and stops input
/// made of tiny elements (`<a/>` is four bytes) from growing an eight-million-node tree.
pub const MAX_XML_NODES: u32 = 2_000_000;

/// URIs registered in TS 119 612 Annex D that this module gives meaning to.
pub mod uri {
    /// Service status, Annex D.5 (clause 5.5.4): qualified status granted (eIDAS).
    pub const GRANTED: &str = "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted";
    /// Qualified status withdrawn (eIDAS).
    pub const WITHDRAWN: &str = "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/withdrawn";
    /// Pre-eIDAS (Directive 1999/93/EC) status: under supervision.
    pub const UNDER_SUPERVISION: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/undersupervision";
    /// Pre-eIDAS status: supervision of a service in cessation.
    pub const SUPERVISION_IN_CESSATION: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/supervisionincessation";
    /// Pre-eIDAS status: accredited.
    pub const ACCREDITED: &str = "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/accredited";
    /// Set by national law (pre-eIDAS; since V2 only for the `NationalRootCA-QC` type).
    pub const SET_BY_NATIONAL_LAW: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/setbynationallaw";

    /// additionalServiceInformation (clause 5.5.9.4): the service issues qualified
    /// certificates for website authentication (QWACs).
    pub const FOR_WEB_SITE_AUTHENTICATION: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/ForWebSiteAuthentication";
    /// … for electronic seals.
    pub const FOR_E_SEALS: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/ForeSeals";
    /// … for electronic signatures.
    pub const FOR_E_SIGNATURES: &str =
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/ForeSignatures";

    /// `MimeType` of an `OtherTSLPointer` to the XML form of a list (clause 5.3.13).
    pub const MIME_TSL_XML: &str = "application/vnd.etsi.tsl+xml";

    /// Service type (clause 5.5.1.1): a CA issuing qualified certificates.
    pub const SVCTYPE_CA_QC: &str = "http://uri.etsi.org/TrstSvc/Svctype/CA/QC";
}

/// One trusted list (or list of the lists), as far as this module reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedList {
    /// `SchemeTerritory` (clause 5.3.10): `CZ`, `IE`, … (`UK` and `EL` per clause 5.1.5),
    /// `EU` for the list of the lists.
    pub territory: String,
    /// `TSLSequenceNumber` (clause 5.3.2).
    pub sequence_number: Option<u64>,
    /// `TSLType` (clause 5.3.3), e.g. `…/TSLType/EUgeneric` or `…/TSLType/EUlistofthelists`.
    pub tsl_type: Option<String>,
    /// `ListIssueDateTime` (clause 5.3.14).
    pub issue_date: Option<OffsetDateTime>,
    /// `NextUpdate/dateTime` (clause 5.3.15); `None` also for a closed list, whose
    /// `NextUpdate` is empty.
    pub next_update: Option<OffsetDateTime>,
    /// `SchemeInformationURI/URI` values (clause 5.3.7), in document order. The EU list of
    /// the lists announces its pivot LOTLs here ([`super::lotl`]).
    pub scheme_information_uris: Vec<String>,
    /// `PointersToOtherTSL/OtherTSLPointer` entries (clause 5.3.13) that could be read: for a
    /// list of the lists, where each national list is and who may sign it.
    pub pointers: Vec<TslPointer>,
    /// How many `TrustServiceProvider` elements the list has (including any whose services
    /// were all skipped); 0 for a list of the lists.
    pub tsp_count: usize,
    /// Every service read, in document order.
    pub services: Vec<TslService>,
    /// Human-readable notes on what was passed over (a skipped service and why, with its line).
    pub skipped: Vec<String>,
}

impl TrustedList {
    /// Whether `TSLType` says this is a list of the lists (`EUlistofthelists`, or
    /// `CClistofthelists` outside the EU; clause 5.3.3).
    pub fn is_list_of_lists(&self) -> bool {
        self.tsl_type
            .as_deref()
            .is_some_and(read::is_list_of_lists_type)
    }
}

/// One `OtherTSLPointer` (clause 5.3.13): where another list is published and the
/// certificates allowed to sign it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TslPointer {
    /// `TSLLocation`: the URL of the list.
    pub location: String,
    /// `AdditionalInformation/OtherInformation/SchemeTerritory` of the list pointed to.
    pub territory: Option<String>,
    /// `…/OtherInformation/TSLType` of the list pointed to.
    pub tsl_type: Option<String>,
    /// `…/OtherInformation/MimeType` (additional-types namespace): the XML list is
    /// [`uri::MIME_TSL_XML`]; some pointers name a PDF rendering.
    pub mime_type: Option<String>,
    /// DER of every `ServiceDigitalIdentities/ServiceDigitalIdentity/DigitalId/X509Certificate`:
    /// the certificates allowed to sign the list pointed to.
    pub certificates: Vec<Vec<u8>>,
}

impl TslPointer {
    /// Whether the pointer names the XML form of a list (not its PDF rendering).
    pub fn is_xml(&self) -> bool {
        self.mime_type.as_deref() == Some(uri::MIME_TSL_XML)
    }

    /// Whether the list pointed to is a list of the lists (the LOTL's pointer to itself).
    pub fn is_list_of_lists(&self) -> bool {
        self.tsl_type
            .as_deref()
            .is_some_and(read::is_list_of_lists_type)
    }
}

/// One `TSPService` (clause 5.4.6): its identity and its status history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TslService {
    /// `TSPInformation/TSPName/Name` (clause 5.4.1): the first `xml:lang="en"` name, else the
    /// first name.
    pub tsp_name: String,
    /// `ServiceInformation/ServiceName/Name` (clause 5.5.2), chosen as for `tsp_name`.
    pub service_name: String,
    /// The current `ServiceTypeIdentifier` (clause 5.5.1), e.g. [`uri::SVCTYPE_CA_QC`]. Each
    /// period also carries its own.
    pub service_type: String,
    /// DER of every `ServiceDigitalIdentity/DigitalId/X509Certificate` of the current
    /// `ServiceInformation` (clause 5.5.3), in document order. Each has been checked to be one
    /// DER X.509 certificate. History instances carry no certificates (clause 5.6.3) and their
    /// identity must be the service's own (Annex G.4: a new key is a new service entry), so
    /// only the current identity is read, as DSS does.
    pub certificates: Vec<Vec<u8>>,
    /// `X509SKI` values of the current identity (the key identifier bytes, Base64-decoded).
    pub subject_key_ids: Vec<Vec<u8>>,
    /// `X509SubjectName` strings of the current identity, as written (for display only; never
    /// match on them).
    pub subject_names: Vec<String>,
    /// The current status first, then the `ServiceHistoryInstance` entries sorted newest first
    /// by starting time (ties keep document order). Never empty for a parsed service; no
    /// history entry starts after the current status (such a service is skipped).
    pub history: Vec<StatusPeriod>,
}

impl TslService {
    /// The current status period (`ServiceInformation`), if any.
    pub fn current(&self) -> Option<&StatusPeriod> {
        self.history.first()
    }

    /// The period in effect at `t`: the newest period whose `starting <= t`; `None` when `t`
    /// is before every period (the service was not listed then).
    pub fn period_at(&self, t: OffsetDateTime) -> Option<&StatusPeriod> {
        // Not relying on `history` being sorted: its fields are public.
        self.history
            .iter()
            .enumerate()
            .filter(|(_, p)| p.starting <= t)
            // Newest start wins; on a tie the earlier entry (the current status first).
            .max_by(|(ia, a), (ib, b)| a.starting.cmp(&b.starting).then(ib.cmp(ia)))
            .map(|(_, p)| p)
    }

    /// What the period in effect at `t` says the service issues certificates for; all
    /// `false` when no period is in effect.
    pub fn kinds_at(&self, t: OffsetDateTime) -> ServiceKinds {
        self.period_at(t)
            .map(StatusPeriod::kinds)
            .unwrap_or_default()
    }
}

/// One status of a service and the time from which it held: the current status
/// (`ServiceInformation`, clauses 5.5.1–5.5.9) or a `ServiceHistoryInstance` (clause 5.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPeriod {
    /// `ServiceStatus` (clause 5.5.4) or previous status (clause 5.6.4).
    pub status: ServiceStatus,
    /// `StatusStartingTime` (clauses 5.5.5, 5.6.5), in UTC.
    pub starting: OffsetDateTime,
    /// `ServiceTypeIdentifier` of this period (clauses 5.5.1, 5.6.1).
    pub service_type: String,
    /// Every `ServiceInformationExtensions/Extension/AdditionalServiceInformation/URI` of this
    /// period (clause 5.5.9.4), in document order.
    pub additional_info: Vec<String>,
    /// Every `Qualifications/QualificationElement` of this period (clause 5.5.9.2), in
    /// document order, whether its extension is marked critical or not.
    pub qualifications: Vec<Qualification>,
    /// Extensions marked `Critical="true"` that this module does not read, as
    /// `{namespace}localName`. Clause 5.5.9 says a relying party that does not understand
    /// a critical extension shall not rely on the service information.
    pub unread_critical_extensions: Vec<String>,
}

impl StatusPeriod {
    /// What the `AdditionalServiceInformation` URIs of this period say, taken literally: no
    /// URI means no flag. Whether a CA/QC service with none of them issues e-signature
    /// certificates (as pre-eIDAS services did) is for the caller's policy to decide.
    pub fn kinds(&self) -> ServiceKinds {
        let has = |u: &str| self.additional_info.iter().any(|a| a == u);
        ServiceKinds {
            web: has(uri::FOR_WEB_SITE_AUTHENTICATION),
            seal: has(uri::FOR_E_SEALS),
            esign: has(uri::FOR_E_SIGNATURES),
        }
    }
}

/// The `ServiceStatus` URI (clause 5.5.4, Annex D.5), with the statuses that matter named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServiceStatus {
    /// `…/Svcstatus/granted`
    Granted,
    /// `…/Svcstatus/withdrawn`
    Withdrawn,
    /// `…/Svcstatus/undersupervision` (pre-eIDAS, Directive 1999/93/EC)
    UnderSupervision,
    /// `…/Svcstatus/supervisionincessation` (pre-eIDAS)
    SupervisionInCessation,
    /// `…/Svcstatus/accredited` (pre-eIDAS)
    Accredited,
    /// `…/Svcstatus/setbynationallaw`
    SetByNationalLaw,
    /// Any other URI, kept as written (trimmed): `supervisionceased`, `accreditationrevoked`,
    /// `recognisedatnationallevel`, `deprecatedatnationallevel`, …
    Other(String),
}

impl ServiceStatus {
    /// The status named by `uri` (compared exactly; URIs are case-sensitive).
    pub fn from_uri(uri: &str) -> Self {
        match uri {
            uri::GRANTED => Self::Granted,
            uri::WITHDRAWN => Self::Withdrawn,
            uri::UNDER_SUPERVISION => Self::UnderSupervision,
            uri::SUPERVISION_IN_CESSATION => Self::SupervisionInCessation,
            uri::ACCREDITED => Self::Accredited,
            uri::SET_BY_NATIONAL_LAW => Self::SetByNationalLaw,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The status URI.
    pub fn uri(&self) -> &str {
        match self {
            Self::Granted => uri::GRANTED,
            Self::Withdrawn => uri::WITHDRAWN,
            Self::UnderSupervision => uri::UNDER_SUPERVISION,
            Self::SupervisionInCessation => uri::SUPERVISION_IN_CESSATION,
            Self::Accredited => uri::ACCREDITED,
            Self::SetByNationalLaw => uri::SET_BY_NATIONAL_LAW,
            Self::Other(u) => u,
        }
    }

    /// Whether a service with this status was an approved (qualified) service.
    ///
    /// `granted` is the eIDAS status. Before 1 July 2016 lists used the Directive 1999/93/EC
    /// statuses; TS 119 612 V2 Annex J migrated `undersupervision`, `supervisionincessation`
    /// and `accredited` onto `granted` for qualified services and keeps them in the history,
    /// so a time before the migration must read them as active. DSS does the same
    /// (`TrustServiceStatus.isAcceptableStatusBeforeEIDAS`).
    ///
    /// `setbynationallaw` is NOT counted active (fail closed, as DSS does): TS 119 612 V2
    /// (Annex D.5) keeps it only as the status of the `NationalRootCA-QC` service type, never
    /// of a `CA/QC` service, so it cannot vouch for a QWAC or a QSealC.
    pub fn is_active(&self) -> bool {
        match self {
            Self::Granted
            | Self::UnderSupervision
            | Self::SupervisionInCessation
            | Self::Accredited => true,
            Self::SetByNationalLaw | Self::Withdrawn | Self::Other(_) => false,
        }
    }
}

/// What a service issues certificates for, from the `AdditionalServiceInformation` URIs
/// (clause 5.5.9.4) of one status period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServiceKinds {
    /// `…/SvcInfoExt/ForWebSiteAuthentication`: qualified website authentication (QWAC).
    pub web: bool,
    /// `…/SvcInfoExt/ForeSeals`: qualified electronic seals (QSealC).
    pub seal: bool,
    /// `…/SvcInfoExt/ForeSignatures`: qualified electronic signatures.
    pub esign: bool,
}

/// Why bytes could not be read as a trusted list. Lines and columns are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TslError {
    /// The input is over a budget ([`MAX_TSL_BYTES`], [`MAX_XML_NODES`]).
    #[error("trusted list refused: {what} exceeds the limit of {limit}")]
    TooLarge {
        /// What was counted, for people.
        what: &'static str,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The document's shape is over a budget of [`shape`] (attributes per element,
    /// namespace declarations in scope, depth, elements), found before any tree is built.
    #[error("trusted list refused: {0}")]
    Shape(#[from] shape::ShapeError),
    /// Not UTF-8 (TS 119 612 Annex B) or not well-formed XML.
    #[error("not well-formed XML at line {line}, column {col}: {msg}")]
    NotXml {
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        col: u32,
        /// Why the input is not well-formed UTF-8 XML.
        msg: String,
    },
    /// The document has a document type declaration (`<!DOCTYPE …>`); refused so no entity is
    /// expanded and nothing is fetched.
    #[error("XML document type declarations are refused (line {line}, column {col})")]
    DtdRefused {
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        col: u32,
    },
    /// Well-formed XML whose root element is not `TrustServiceStatusList` in the
    /// TS 119 612 namespace.
    #[error(
        "not a trusted list: the root element at line {line}, column {col} is {found}, \
         not TrustServiceStatusList in namespace http://uri.etsi.org/02231/v2#"
    )]
    NotATrustedList {
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        col: u32,
        /// The root element found, as `{namespace}name`.
        found: String,
    },
    /// A trusted list whose `SchemeInformation` (or list structure) is broken.
    #[error("invalid trusted list at line {line}, column {col}: {msg}")]
    Invalid {
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        col: u32,
        /// What is wrong with the list.
        msg: String,
    },
}

/// Reads a trusted list (or a list of the lists) from its XML bytes.
///
/// Pure: no I/O, no clock. The XML signature is *not* verified (see the module docs).
pub fn parse(xml: &[u8]) -> Result<TrustedList, TslError> {
    if xml.len() > MAX_TSL_BYTES {
        return Err(TslError::TooLarge {
            what: "input size in bytes",
            limit: MAX_TSL_BYTES,
        });
    }
    // Annex B: trusted lists are UTF-8. roxmltree reads `&str` and skips a UTF-8 BOM.
    let text = match std::str::from_utf8(xml) {
        Ok(text) => text,
        Err(e) => {
            let (line, col) = xsd::line_col(&xml[..e.valid_up_to()]);
            return Err(TslError::NotXml {
                line,
                col,
                msg: format!("invalid UTF-8 ({e}); trusted lists are UTF-8"),
            });
        }
    };
    // Linear, before roxmltree, whose cost is superlinear in some shapes.
    shape::check(xml)?;
    let options = roxmltree::ParsingOptions {
        // The default, spelled out: any `<!DOCTYPE` is an error (`Error::DtdDetected`).
        allow_dtd: false,
        nodes_limit: MAX_XML_NODES,
        // No resolver: external entities are never fetched.
        entity_resolver: None,
    };
    let doc =
        roxmltree::Document::parse_with_options(text, options).map_err(|e| xml_error(text, &e))?;
    read::trusted_list(&doc)
}

/// Reads a trusted list from a tree already parsed (by [`super::xmlsig::parse_document`], so
/// that the tree whose signature was verified is the tree that is read).
pub fn read_document(doc: &roxmltree::Document<'_>) -> Result<TrustedList, TslError> {
    read::trusted_list(doc)
}

/// A roxmltree error as a [`TslError`], with a position even where roxmltree has none.
fn xml_error(text: &str, e: &roxmltree::Error) -> TslError {
    use roxmltree::Error as E;
    let end_of_input = || xsd::line_col(text.as_bytes());
    match e {
        E::DtdDetected => {
            let at = text.find("<!DOCTYPE").unwrap_or(0);
            let (line, col) = xsd::line_col(&text.as_bytes()[..at]);
            TslError::DtdRefused { line, col }
        }
        E::NodesLimitReached => TslError::TooLarge {
            what: "number of XML nodes",
            limit: MAX_XML_NODES as usize,
        },
        // roxmltree reports these at 1:1; where they happen is the end of the input.
        E::NoRootNode | E::UnclosedRootNode | E::UnexpectedEndOfStream => {
            let (line, col) = end_of_input();
            TslError::NotXml {
                line,
                col,
                msg: format!("{e} (input ends too early)"),
            }
        }
        other => {
            let pos = other.pos();
            TslError::NotXml {
                line: pos.row,
                col: pos.col,
                msg: other.to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests;
