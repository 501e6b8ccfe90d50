//! QC statements: ETSI EN 319 412-5 (QcCompliance, QcType, …) and ETSI TS 119 495
//! (the PSD2 statement: roles, NCA name, NCA id).
//!
//! [`decode_qc_statements`] reads the value of the qcStatements extension
//! (id-pe-qcStatements, 1.3.6.1.5.5.7.1.3, RFC 3739 section 3.2.6). x509-parser does not know
//! the extension, so its raw value comes here. The decoder is a pure function of the bytes:
//! it reads what can be read honestly, records a warning for every deviation from the
//! standards, never panics, and does work linear in the input (no recursion; the schemas
//! have a fixed depth and each level is walked by hand).
//!
//! Deviations met in real certificates, all tolerated with a warning:
//! - the extension value is one `QCStatement` instead of a `SEQUENCE OF QCStatement`
//!   (the adorsys XS2A and PSD2 accelerator mock certificates);
//! - a `RoleOfPSP` SEQUENCE holding all roles flattened (`oid, name, oid, name, …`): only
//!   the first pair is taken, as a naive parser would, and the rest is reported rather than
//!   guessed at (the WSO2 self-made certificate);
//! - `statementInfo` on QcCompliance, where none is defined (ING's sandbox certificates carry
//!   an empty UTF8String);
//! - names as PrintableString or another string type instead of UTF8String.
//!
//! Statement order is not fixed by any of the standards, so the PSD2 statement coming first
//! (D-TRUST) is not a deviation.

/// A statement found in the QCStatements extension, by kind, in the order they appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QcStatementKind {
    QcCompliance,
    QcSscd,
    QcLimitValue,
    QcRetentionPeriod,
    QcPds,
    QcType,
    Psd2,
    /// Any other statement, by dotted OID.
    Other(String),
}

/// ETSI EN 319 412-5 QcType values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QcType {
    /// id-etsi-qct-esign 0.4.0.1862.1.6.1
    ESign,
    /// id-etsi-qct-eseal 0.4.0.1862.1.6.2
    ESeal,
    /// id-etsi-qct-web 0.4.0.1862.1.6.3
    Web,
    /// Any other QcType OID, dotted.
    Other(String),
}

/// The four PSD2 roles of ETSI TS 119 495, identified by OID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Psd2Role {
    /// id-psd2-role-psp-as 0.4.0.19495.1.1: account servicing
    PspAs,
    /// id-psd2-role-psp-pi 0.4.0.19495.1.2: payment initiation
    PspPi,
    /// id-psd2-role-psp-ai 0.4.0.19495.1.3: account information
    PspAi,
    /// id-psd2-role-psp-ic 0.4.0.19495.1.4: issuing of card-based payment instruments
    PspIc,
}

/// One RoleOfPSP as encoded: the OID decides the role; the name is kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleOfPsp {
    /// Dotted OID as encoded.
    pub oid: String,
    /// roleOfPspName as encoded.
    pub name: String,
    /// The role the OID denotes; `None` for an OID outside TS 119 495.
    pub role: Option<Psd2Role>,
}

/// The PSD2 QC statement (TS 119 495 section 5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Psd2Statement {
    pub roles: Vec<RoleOfPsp>,
    pub nca_name: String,
    pub nca_id: String,
}

/// The decoded QCStatements extension.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QcStatements {
    /// Whether the extension was marked critical.
    pub critical: bool,
    /// Every statement, in order.
    pub statements: Vec<QcStatementKind>,
    /// QcType values, in order (empty when there is no QcType statement).
    pub types: Vec<QcType>,
    /// The PSD2 statement, when present and decodable.
    pub psd2: Option<Psd2Statement>,
}

impl QcStatements {
    pub fn has_compliance(&self) -> bool {
        self.statements.contains(&QcStatementKind::QcCompliance)
    }
}

use super::der::{self, DecodedString, Reader, Tlv, tag};

/// id-pe-qcStatements (RFC 3739 section 3.2.6).
pub const OID_QC_STATEMENTS: &str = "1.3.6.1.5.5.7.1.3";
/// id-etsi-qcs-QcCompliance (EN 319 412-5 section 4.2.1).
pub const OID_QC_COMPLIANCE: &str = "0.4.0.1862.1.1";
/// id-etsi-qcs-QcLimitValue (EN 319 412-5, QCStatement on transaction value limits).
pub const OID_QC_LIMIT_VALUE: &str = "0.4.0.1862.1.2";
/// id-etsi-qcs-QcRetentionPeriod (EN 319 412-5, QCStatement on the retention period).
pub const OID_QC_RETENTION_PERIOD: &str = "0.4.0.1862.1.3";
/// id-etsi-qcs-QcSSCD (EN 319 412-5 section 4.2.2).
pub const OID_QC_SSCD: &str = "0.4.0.1862.1.4";
/// id-etsi-qcs-QcPDS (EN 319 412-5, QCStatement on PKI disclosure statements).
pub const OID_QC_PDS: &str = "0.4.0.1862.1.5";
/// id-etsi-qcs-QcType (EN 319 412-5 section 4.2.3).
pub const OID_QC_TYPE: &str = "0.4.0.1862.1.6";
/// id-etsi-qct-esign.
pub const OID_QCT_ESIGN: &str = "0.4.0.1862.1.6.1";
/// id-etsi-qct-eseal.
pub const OID_QCT_ESEAL: &str = "0.4.0.1862.1.6.2";
/// id-etsi-qct-web.
pub const OID_QCT_WEB: &str = "0.4.0.1862.1.6.3";
/// id-etsi-psd2-qcStatement (TS 119 495 section 5.1).
pub const OID_PSD2_STATEMENT: &str = "0.4.0.19495.2";
/// id-psd2-role-psp-as.
pub const OID_ROLE_PSP_AS: &str = "0.4.0.19495.1.1";
/// id-psd2-role-psp-pi.
pub const OID_ROLE_PSP_PI: &str = "0.4.0.19495.1.2";
/// id-psd2-role-psp-ai.
pub const OID_ROLE_PSP_AI: &str = "0.4.0.19495.1.3";
/// id-psd2-role-psp-ic.
pub const OID_ROLE_PSP_IC: &str = "0.4.0.19495.1.4";
/// id-psd2-role-psp-unspecified, added by later versions of TS 119 495 ("RolesOfPSP shall
/// contain one or more roles or contain a single entry indicating that the role is
/// unspecified", GEN-5.2.2-1). It is read with `role: None` and no warning.
pub const OID_ROLE_PSP_UNSPECIFIED: &str = "0.4.0.19495.1.0";

/// Budget: most QCStatements read from one extension. EN 319 412-5 defines six statements,
/// TS 119 495 one, RFC 3739 two; 32 leaves room for national ones. Past it the rest is
/// skipped with a warning, which bounds the statements and warnings a hostile extension
/// can produce.
pub const MAX_QC_STATEMENTS: usize = 32;
/// Budget: most RoleOfPSP entries read. TS 119 495 defines four roles (plus "unspecified");
/// 16 is generous.
pub const MAX_PSD2_ROLES: usize = 16;
/// Budget: most QcType OIDs read. EN 319 412-5 defines three.
pub const MAX_QC_TYPES: usize = 16;
/// NCAName, NCAId and RoleOfPspName are `UTF8String (SIZE (1..256))` (TS 119 495 ASN.1 module).
const MAX_NAME_CHARS: usize = 256;

impl QcStatementKind {
    /// The statement a dotted statementId denotes.
    pub fn from_oid(oid: &str) -> Self {
        match oid {
            OID_QC_COMPLIANCE => QcStatementKind::QcCompliance,
            OID_QC_SSCD => QcStatementKind::QcSscd,
            OID_QC_LIMIT_VALUE => QcStatementKind::QcLimitValue,
            OID_QC_RETENTION_PERIOD => QcStatementKind::QcRetentionPeriod,
            OID_QC_PDS => QcStatementKind::QcPds,
            OID_QC_TYPE => QcStatementKind::QcType,
            OID_PSD2_STATEMENT => QcStatementKind::Psd2,
            other => QcStatementKind::Other(other.to_owned()),
        }
    }

    /// The name used in reports (`QcCompliance`, `PSD2QcType`, or the dotted OID).
    pub fn name(&self) -> &str {
        match self {
            QcStatementKind::QcCompliance => "QcCompliance",
            QcStatementKind::QcSscd => "QcSSCD",
            QcStatementKind::QcLimitValue => "QcLimitValue",
            QcStatementKind::QcRetentionPeriod => "QcRetentionPeriod",
            QcStatementKind::QcPds => "QcPDS",
            QcStatementKind::QcType => "QcType",
            QcStatementKind::Psd2 => "PSD2QcType",
            QcStatementKind::Other(oid) => oid,
        }
    }
}

impl QcType {
    pub fn from_oid(oid: &str) -> Self {
        match oid {
            OID_QCT_ESIGN => QcType::ESign,
            OID_QCT_ESEAL => QcType::ESeal,
            OID_QCT_WEB => QcType::Web,
            other => QcType::Other(other.to_owned()),
        }
    }

    /// `esign`, `eseal`, `web`, or the dotted OID.
    pub fn name(&self) -> &str {
        match self {
            QcType::ESign => "esign",
            QcType::ESeal => "eseal",
            QcType::Web => "web",
            QcType::Other(oid) => oid,
        }
    }
}

impl Psd2Role {
    /// The role a RoleOfPspOid denotes; `None` outside the four roles of TS 119 495.
    pub fn from_oid(oid: &str) -> Option<Self> {
        match oid {
            OID_ROLE_PSP_AS => Some(Psd2Role::PspAs),
            OID_ROLE_PSP_PI => Some(Psd2Role::PspPi),
            OID_ROLE_PSP_AI => Some(Psd2Role::PspAi),
            OID_ROLE_PSP_IC => Some(Psd2Role::PspIc),
            _ => None,
        }
    }

    /// The roleOfPspName TS 119 495 pairs with the role's OID (`PSP_AS`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Psd2Role::PspAs => "PSP_AS",
            Psd2Role::PspPi => "PSP_PI",
            Psd2Role::PspAi => "PSP_AI",
            Psd2Role::PspIc => "PSP_IC",
        }
    }

    /// The role's dotted OID.
    pub fn oid(&self) -> &'static str {
        match self {
            Psd2Role::PspAs => OID_ROLE_PSP_AS,
            Psd2Role::PspPi => OID_ROLE_PSP_PI,
            Psd2Role::PspAi => OID_ROLE_PSP_AI,
            Psd2Role::PspIc => OID_ROLE_PSP_IC,
        }
    }
}

impl Psd2Statement {
    /// The distinct roles the statement grants, by OID, sorted.
    pub fn role_set(&self) -> Vec<Psd2Role> {
        let mut roles: Vec<Psd2Role> = self.roles.iter().filter_map(|r| r.role).collect();
        roles.sort();
        roles.dedup();
        roles
    }
}

/// Decodes the value (the content of extnValue) of a qcStatements extension.
///
/// Never fails: what cannot be read is left out and described in the returned warnings.
/// `critical` is the extension's critical flag, carried into the result.
///
/// RFC 3739 section 3.2.6:
///
/// ```text
/// QCStatements ::= SEQUENCE OF QCStatement
/// QCStatement ::= SEQUENCE {
///     statementId   QC-STATEMENT.&Id({SupportedStatements}),
///     statementInfo QC-STATEMENT.&Type({SupportedStatements}{@statementId}) OPTIONAL }
/// ```
///
/// that is, `QCStatement ::= SEQUENCE { statementId OBJECT IDENTIFIER, statementInfo ANY
/// DEFINED BY statementId OPTIONAL }`.
pub fn decode_qc_statements(value: &[u8], critical: bool) -> (QcStatements, Vec<String>) {
    let mut out = QcStatements {
        critical,
        ..QcStatements::default()
    };
    let mut warnings = Vec::new();

    let mut top = Reader::new(value);
    let outer = match top.read() {
        Ok(tlv) if tlv.tag == tag::SEQUENCE => tlv,
        Ok(tlv) => {
            warnings.push(format!(
                "extension value is a {} instead of SEQUENCE OF QCStatement; no statement could be read",
                der::tag_name(tlv.tag)
            ));
            return (out, warnings);
        }
        Err(e) => {
            warnings.push(format!(
                "extension value is not DER ({e}); no statement could be read"
            ));
            return (out, warnings);
        }
    };
    if !top.is_empty() {
        warnings.push(format!(
            "{} bytes after the QCStatements SEQUENCE ignored",
            top.remaining().len()
        ));
    }

    if outer.reader().peek_tag() == Some(tag::OID) {
        // SEQUENCE { OID, ... }: one QCStatement where a SEQUENCE OF was due.
        warnings.push(
            "extension value is a single QCStatement (SEQUENCE{OID,...}) instead of SEQUENCE OF QCStatement; decoded leniently"
                .to_owned(),
        );
        decode_statement(1, outer, &mut out, &mut warnings);
        return (out, warnings);
    }

    let mut statements = outer.reader();
    let mut index = 0;
    while !statements.is_empty() {
        index += 1;
        if index > MAX_QC_STATEMENTS {
            warnings.push(format!(
                "more than {MAX_QC_STATEMENTS} QCStatements; the rest was not read"
            ));
            break;
        }
        match statements.read() {
            Ok(tlv) if tlv.tag == tag::SEQUENCE => {
                decode_statement(index, tlv, &mut out, &mut warnings)
            }
            Ok(tlv) => warnings.push(format!(
                "QCStatement {index} is a {} instead of a SEQUENCE; skipped",
                der::tag_name(tlv.tag)
            )),
            Err(e) => {
                warnings.push(format!(
                    "QCStatement {index} is not DER ({e}); it and the rest were not read"
                ));
                break;
            }
        }
    }
    if index == 0 {
        warnings.push("QCStatements SEQUENCE is empty".to_owned());
    }
    (out, warnings)
}

/// One `QCStatement` (a SEQUENCE): statementId (`statement_id`), then statementInfo, read
/// by statementId (`decode_statement_info`).
fn decode_statement(
    index: usize,
    statement: Tlv<'_>,
    out: &mut QcStatements,
    warnings: &mut Vec<String>,
) {
    let mut fields = statement.reader();
    let Some(oid) = statement_id(index, &mut fields, warnings) else {
        return;
    };
    let kind = QcStatementKind::from_oid(&oid);
    let name = kind.name().to_owned();
    let info = if fields.is_empty() {
        None
    } else {
        match fields.read() {
            Ok(tlv) => Some(tlv),
            Err(e) => {
                warnings.push(format!("{name} statement: statementInfo is not DER ({e})"));
                out.statements.push(kind);
                return;
            }
        }
    };
    if !fields.is_empty() {
        warnings.push(format!(
            "{name} statement has elements after statementInfo; ignored"
        ));
    }
    if kind != QcStatementKind::Psd2
        && !matches!(kind, QcStatementKind::Other(_))
        && out.statements.contains(&kind)
    {
        warnings.push(format!("{name} statement appears more than once"));
    }
    decode_statement_info(&kind, &name, info, out, warnings);
    out.statements.push(kind);
}

/// The statementId of statement `index`, an OBJECT IDENTIFIER in dotted form; `None`, with a
/// warning, when it is missing or not one (the statement is skipped).
fn statement_id(
    index: usize,
    fields: &mut Reader<'_>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    match fields.read() {
        Ok(tlv) if tlv.tag == tag::OID => match der::oid_to_string(tlv.value) {
            Ok(oid) => Some(oid),
            Err(e) => {
                warnings.push(format!("QCStatement {index}: statementId {e}; skipped"));
                None
            }
        },
        Ok(tlv) => {
            warnings.push(format!(
                "QCStatement {index}: statementId is a {} instead of an OBJECT IDENTIFIER; skipped",
                der::tag_name(tlv.tag)
            ));
            None
        }
        Err(e) => {
            warnings.push(format!("QCStatement {index}: {e}; skipped"));
            None
        }
    }
}

/// The statementInfo of a statement of `kind` (named `name` in warnings), by the syntax its
/// standard gives it: checked for shape, or decoded into `out` (QcType, PSD2QcType; a
/// repeated one is not read again).
fn decode_statement_info(
    kind: &QcStatementKind,
    name: &str,
    info: Option<Tlv<'_>>,
    out: &mut QcStatements,
    warnings: &mut Vec<String>,
) {
    match kind {
        // EN 319 412-5 section 4.2.1 and 4.2.2:
        //   esi4-qcStatement-1 QC-STATEMENT ::= { IDENTIFIED BY id-etsi-qcs-QcCompliance }
        //   esi4-qcStatement-4 QC-STATEMENT ::= { IDENTIFIED BY id-etsi-qcs-QcSSCD }
        // Neither has statementInfo.
        QcStatementKind::QcCompliance | QcStatementKind::QcSscd => {
            if let Some(info) = info {
                warnings.push(format!(
                    "{name} statement carries unexpected statementInfo (tag 0x{:02x})",
                    info.tag
                ));
            }
        }
        // EN 319 412-5 ASN.1 module:
        //   esi4-qcStatement-2 QC-STATEMENT ::= { SYNTAX QcEuLimitValue
        //       IDENTIFIED BY id-etsi-qcs-QcLimitValue }
        //   QcEuLimitValue ::= MonetaryValue
        //   MonetaryValue ::= SEQUENCE { currency Iso4217CurrencyCode,
        //       amount INTEGER, exponent INTEGER }
        // Read for its shape only: nothing here decides on it.
        QcStatementKind::QcLimitValue => {
            if info.map(|i| i.tag) != Some(tag::SEQUENCE) {
                warnings.push(format!("{name} statement lacks its MonetaryValue SEQUENCE"));
            }
        }
        // EN 319 412-5 ASN.1 module:
        //   esi4-qcStatement-3 QC-STATEMENT ::= { SYNTAX QcEuRetentionPeriod
        //       IDENTIFIED BY id-etsi-qcs-QcRetentionPeriod }
        //   QcEuRetentionPeriod ::= INTEGER
        QcStatementKind::QcRetentionPeriod => {
            if info.map(|i| i.tag) != Some(tag::INTEGER) {
                warnings.push(format!("{name} statement lacks its INTEGER (years)"));
            }
        }
        // EN 319 412-5 ASN.1 module:
        //   esi4-qcStatement-5 QC-STATEMENT ::= { SYNTAX QcEuPDS
        //       IDENTIFIED BY id-etsi-qcs-QcPDS }
        //   QcEuPDS ::= PdsLocations
        //   PdsLocations ::= SEQUENCE SIZE (1..MAX) OF PdsLocation
        //   PdsLocation ::= SEQUENCE { url IA5String, language PrintableString (SIZE(2)) }
        QcStatementKind::QcPds => check_pds(info, warnings),
        // EN 319 412-5 section 4.2.3:
        //   esi4-qcStatement-6 QC-STATEMENT ::= { SYNTAX QcType
        //       IDENTIFIED BY id-etsi-qcs-QcType }
        //   QcType ::= SEQUENCE OF OBJECT IDENTIFIER (id-etsi-qct-esign |
        //       id-etsi-qct-eseal | id-etsi-qct-web, ...)
        QcStatementKind::QcType => {
            if out.statements.contains(&QcStatementKind::QcType) {
                warnings.push("QcType values of the repeated statement ignored".to_owned());
            } else {
                out.types = decode_qc_type(info, warnings);
            }
        }
        // TS 119 495 section 5.1:
        //   etsi-psd2-qcStatement QC-STATEMENT ::= { SYNTAX PSD2QcType
        //       IDENTIFIED BY id-etsi-psd2-qcStatement }
        QcStatementKind::Psd2 => {
            if out.statements.contains(&QcStatementKind::Psd2) {
                warnings.push(
                    "PSD2QcType statement appears more than once; the first is used".to_owned(),
                );
            } else {
                out.psd2 = decode_psd2(info, warnings);
            }
        }
        // Any other statement (RFC 3739 semantics information, national statements):
        // listed by OID, its statementInfo not interpreted.
        QcStatementKind::Other(_) => {}
    }
}

fn check_pds(info: Option<Tlv<'_>>, warnings: &mut Vec<String>) {
    let Some(info) = info.filter(|i| i.tag == tag::SEQUENCE) else {
        warnings.push("QcPDS statement lacks its PdsLocations SEQUENCE".to_owned());
        return;
    };
    let mut locations = info.reader();
    if locations.is_empty() {
        warnings.push("QcPDS statement has no PdsLocation".to_owned());
    }
    // Each location is read in constant work; the loop is bounded by the input length.
    while !locations.is_empty() {
        let well_formed = locations.read().ok().is_some_and(|loc| {
            let mut f = loc.reader();
            loc.tag == tag::SEQUENCE
                && f.read().is_ok_and(|u| u.tag == tag::IA5_STRING)
                && f.read()
                    .is_ok_and(|l| l.tag == tag::PRINTABLE_STRING && l.value.len() == 2)
                && f.is_empty()
        });
        if !well_formed {
            warnings.push(
                "QcPDS PdsLocation is not SEQUENCE { IA5String, PrintableString (SIZE(2)) }"
                    .to_owned(),
            );
            return;
        }
    }
}

fn decode_qc_type(info: Option<Tlv<'_>>, warnings: &mut Vec<String>) -> Vec<QcType> {
    let Some(info) = info.filter(|i| i.tag == tag::SEQUENCE) else {
        warnings.push("QcType statement lacks its SEQUENCE OF OBJECT IDENTIFIER".to_owned());
        return Vec::new();
    };
    let mut types = Vec::new();
    let mut oids = info.reader();
    while !oids.is_empty() {
        if types.len() == MAX_QC_TYPES {
            warnings.push(format!(
                "more than {MAX_QC_TYPES} QcType values; the rest was not read"
            ));
            break;
        }
        match oids.read() {
            Ok(tlv) if tlv.tag == tag::OID => match der::oid_to_string(tlv.value) {
                Ok(oid) => types.push(QcType::from_oid(&oid)),
                Err(e) => warnings.push(format!("QcType value: {e}; skipped")),
            },
            Ok(tlv) => warnings.push(format!(
                "QcType value is a {} instead of an OBJECT IDENTIFIER; skipped",
                der::tag_name(tlv.tag)
            )),
            Err(e) => {
                warnings.push(format!("QcType values are not DER ({e})"));
                break;
            }
        }
    }
    if types.is_empty() {
        warnings.push("QcType statement names no type".to_owned());
    }
    types
}

/// TS 119 495 section 5.1 and its ASN.1 module:
///
/// ```text
/// PSD2QcType ::= SEQUENCE {
///     rolesOfPSP RolesOfPSP,
///     nCAName    NCAName,
///     nCAId      NCAId }
/// NCAName ::= UTF8String (SIZE (1..256))
/// NCAId   ::= UTF8String (SIZE (1..256))
/// ```
///
/// `None` (with a warning) when the three parts cannot all be read.
fn decode_psd2(info: Option<Tlv<'_>>, warnings: &mut Vec<String>) -> Option<Psd2Statement> {
    let Some(info) = info else {
        warnings.push("PSD2QcType statement has no statementInfo".to_owned());
        return None;
    };
    if info.tag != tag::SEQUENCE {
        warnings.push(format!(
            "PSD2QcType statementInfo is a {} instead of a SEQUENCE",
            der::tag_name(info.tag)
        ));
        return None;
    }
    let mut fields = info.reader();
    let roles = match fields.read() {
        Ok(tlv) if tlv.tag == tag::SEQUENCE => decode_roles(tlv, warnings),
        Ok(tlv) => {
            warnings.push(format!(
                "PSD2QcType rolesOfPSP is a {} instead of a SEQUENCE",
                der::tag_name(tlv.tag)
            ));
            return None;
        }
        Err(e) => {
            warnings.push(format!("PSD2QcType rolesOfPSP is not DER ({e})"));
            return None;
        }
    };
    let nca_name = read_name(&mut fields, "nCAName", warnings)?;
    let nca_id = read_name(&mut fields, "nCAId", warnings)?;
    if !fields.is_empty() {
        warnings.push("PSD2QcType has elements after nCAId; ignored".to_owned());
    }
    if !is_nca_id_form(&nca_id) {
        // TS 119 495 GEN-5.2.3-2: 2-letter ISO 3166-1 country code, hyphen-minus, 2-8
        // character Competent Authority identifier (A-Z).
        warnings.push(format!(
            "nCAId `{nca_id}` is not in the form CC-NCA (TS 119 495 section 5.2.3)"
        ));
    }
    Some(Psd2Statement {
        roles,
        nca_name,
        nca_id,
    })
}

/// TS 119 495 section 5.2.2 and its ASN.1 module:
///
/// ```text
/// RolesOfPSP ::= SEQUENCE OF RoleOfPSP
/// RoleOfPSP ::= SEQUENCE {
///     roleOfPspOid  RoleOfPspOid,
///     roleOfPspName RoleOfPspName }
/// RoleOfPspOid  ::= OBJECT IDENTIFIER
/// RoleOfPspName ::= UTF8String (SIZE(1..256))
/// id-psd2-role-psp-as OBJECT IDENTIFIER ::= { 0 4 0 19495 1 1 }  -- PSP_AS
/// id-psd2-role-psp-pi OBJECT IDENTIFIER ::= { 0 4 0 19495 1 2 }  -- PSP_PI
/// id-psd2-role-psp-ai OBJECT IDENTIFIER ::= { 0 4 0 19495 1 3 }  -- PSP_AI
/// id-psd2-role-psp-ic OBJECT IDENTIFIER ::= { 0 4 0 19495 1 4 }  -- PSP_IC
/// ```
fn decode_roles(roles_seq: Tlv<'_>, warnings: &mut Vec<String>) -> Vec<RoleOfPsp> {
    let mut roles = Vec::new();
    let mut entries = roles_seq.reader();
    let mut index = 0;
    while !entries.is_empty() {
        index += 1;
        if index > MAX_PSD2_ROLES {
            warnings.push(format!(
                "more than {MAX_PSD2_ROLES} RoleOfPSP entries; the rest was not read"
            ));
            break;
        }
        let entry = match entries.read() {
            Ok(tlv) if tlv.tag == tag::SEQUENCE => tlv,
            Ok(tlv) => {
                warnings.push(format!(
                    "RoleOfPSP {index} is a {} instead of a SEQUENCE; skipped",
                    der::tag_name(tlv.tag)
                ));
                continue;
            }
            Err(e) => {
                warnings.push(format!(
                    "RoleOfPSP {index} is not DER ({e}); the rest were not read"
                ));
                break;
            }
        };
        if let Some(role) = decode_role(index, entry, warnings) {
            roles.push(role);
        }
    }
    if roles.is_empty() {
        // TS 119 495 GEN-5.2.2-1: RolesOfPSP shall contain one or more roles.
        warnings.push("PSD2QcType rolesOfPSP holds no role".to_owned());
    }
    roles
}

fn decode_role(index: usize, entry: Tlv<'_>, warnings: &mut Vec<String>) -> Option<RoleOfPsp> {
    // Count the elements first (constant work each, bounded by the entry's length) so that a
    // flattened list of roles is reported as such.
    let mut count = 0usize;
    let mut counter = entry.reader();
    while !counter.is_empty() && counter.read().is_ok() {
        count += 1;
    }
    if count > 2 {
        warnings.push(format!(
            "RoleOfPSP SEQUENCE has {count} elements (expected 2: roleOfPspOid, roleOfPspName); only the first pair was read"
        ));
    }
    let mut fields = entry.reader();
    let oid = match fields.read() {
        Ok(tlv) if tlv.tag == tag::OID => match der::oid_to_string(tlv.value) {
            Ok(oid) => oid,
            Err(e) => {
                warnings.push(format!("RoleOfPSP {index}: roleOfPspOid {e}; skipped"));
                return None;
            }
        },
        Ok(tlv) => {
            warnings.push(format!(
                "RoleOfPSP {index}: roleOfPspOid is a {} instead of an OBJECT IDENTIFIER; skipped",
                der::tag_name(tlv.tag)
            ));
            return None;
        }
        Err(e) => {
            warnings.push(format!("RoleOfPSP {index}: {e}; skipped"));
            return None;
        }
    };
    let name = read_name(&mut fields, "roleOfPspName", warnings)?;
    let role = Psd2Role::from_oid(&oid);
    match role {
        Some(r) if r.name() != name => warnings.push(format!(
            "roleOfPspName `{name}` does not match roleOfPspOid {oid} ({}); the OID decides",
            r.name()
        )),
        Some(_) => {}
        None if oid == OID_ROLE_PSP_UNSPECIFIED => {}
        None => warnings.push(format!(
            "roleOfPspOid {oid} is not a role of TS 119 495; it grants nothing"
        )),
    }
    Some(RoleOfPsp { oid, name, role })
}

/// Reads the next element as one of the `UTF8String (SIZE (1..256))` names of TS 119 495.
/// Other string types are accepted with a warning; a non-string is `None` with a warning.
fn read_name(fields: &mut Reader<'_>, what: &str, warnings: &mut Vec<String>) -> Option<String> {
    let tlv = match fields.read() {
        Ok(tlv) => tlv,
        Err(der::DerError::Truncated) if fields.is_empty() => {
            warnings.push(format!("{what} is missing"));
            return None;
        }
        Err(e) => {
            warnings.push(format!("{what} is not DER ({e})"));
            return None;
        }
    };
    let Some(DecodedString { text, tag: t }) = der::decode_string(&tlv) else {
        warnings.push(format!(
            "{what} is a {} instead of a UTF8String, or its content is invalid",
            der::tag_name(tlv.tag)
        ));
        return None;
    };
    if t != tag::UTF8_STRING {
        warnings.push(format!(
            "{what} is a {} instead of a UTF8String; read leniently",
            der::tag_name(t)
        ));
    }
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        warnings.push(format!(
            "{what} has {chars} characters, outside SIZE (1..{MAX_NAME_CHARS})"
        ));
    }
    Some(text)
}

/// `CC-NCA`: two ASCII capital letters, a hyphen, 2 to 8 ASCII capital letters; or `NA`,
/// which later versions of TS 119 495 use where no NCA applies (GEN-5.2.3-1A).
fn is_nca_id_form(id: &str) -> bool {
    if id == "NA" {
        return true;
    }
    let Some((cc, nca)) = id.split_once('-') else {
        return false;
    };
    cc.len() == 2
        && cc.bytes().all(|b| b.is_ascii_uppercase())
        && (2..=8).contains(&nca.len())
        && nca.bytes().all(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests;
