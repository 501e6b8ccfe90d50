//! The two extensions rcgen 0.14 has no field for, encoded with [`super::der`]:
//! QCStatements (ETSI EN 319 412-5, ETSI TS 119 495) and authorityInfoAccess (RFC 5280).

use rcgen::CustomExtension;

use super::der;
use crate::cert::Psd2Role;

/// id-pe-qcStatements (RFC 3739 section 3.2.6).
pub(crate) const OID_QC_STATEMENTS: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 1, 3];
/// id-pe-authorityInfoAccess (RFC 5280 section 4.2.2.1).
pub(crate) const OID_AUTHORITY_INFO_ACCESS: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 1, 1];
/// id-ad-ocsp (RFC 5280 section 4.2.2.1).
const OID_AD_OCSP: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 48, 1];
/// id-ad-caIssuers (RFC 5280 section 4.2.2.1).
const OID_AD_CA_ISSUERS: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 48, 2];

/// id-etsi-qcs-QcCompliance (EN 319 412-5 section 4.2.1).
const OID_QCS_QC_COMPLIANCE: &[u64] = &[0, 4, 0, 1862, 1, 1];
/// id-etsi-qcs-QcType (EN 319 412-5 section 4.2.3).
const OID_QCS_QC_TYPE: &[u64] = &[0, 4, 0, 1862, 1, 6];
/// id-etsi-qct-eseal (EN 319 412-5 section 4.2.3).
const OID_QCT_ESEAL: &[u64] = &[0, 4, 0, 1862, 1, 6, 2];
/// id-etsi-qct-web (EN 319 412-5 section 4.2.3).
const OID_QCT_WEB: &[u64] = &[0, 4, 0, 1862, 1, 6, 3];
/// id-etsi-psd2-qcStatement (TS 119 495 section 5.1).
const OID_PSD2_QC_STATEMENT: &[u64] = &[0, 4, 0, 19495, 2];

/// The QcType a sandbox certificate declares: website authentication (QWAC) or electronic
/// seal (QSealC). The sandbox issues no eSign certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxQcType {
    /// id-etsi-qct-web 0.4.0.1862.1.6.3
    Web,
    /// id-etsi-qct-eseal 0.4.0.1862.1.6.2
    Eseal,
}

impl SandboxQcType {
    fn oid(self) -> &'static [u64] {
        match self {
            SandboxQcType::Web => OID_QCT_WEB,
            SandboxQcType::Eseal => OID_QCT_ESEAL,
        }
    }
}

/// The TS 119 495 role OID (section 5.1, `id-psd2-role-psp-*` under 0.4.0.19495.1).
pub(crate) fn role_oid(role: Psd2Role) -> &'static [u64] {
    match role {
        Psd2Role::PspAs => &[0, 4, 0, 19495, 1, 1],
        Psd2Role::PspPi => &[0, 4, 0, 19495, 1, 2],
        Psd2Role::PspAi => &[0, 4, 0, 19495, 1, 3],
        Psd2Role::PspIc => &[0, 4, 0, 19495, 1, 4],
    }
}

/// The TS 119 495 role name (section 5.1: "PSP_AS", "PSP_PI", "PSP_AI", "PSP_IC").
pub(crate) fn role_name(role: Psd2Role) -> &'static str {
    match role {
        Psd2Role::PspAs => "PSP_AS",
        Psd2Role::PspPi => "PSP_PI",
        Psd2Role::PspAi => "PSP_AI",
        Psd2Role::PspIc => "PSP_IC",
    }
}

/// What goes into one certificate's QCStatements extension.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QcStatementsSpec<'a> {
    /// Whether to write the QcCompliance statement (real OBIE certificates have none).
    pub compliance: bool,
    pub qc_type: SandboxQcType,
    pub roles: &'a [Psd2Role],
    pub nca_name: &'a str,
    pub nca_id: &'a str,
}

/// The QCStatements extension (non-critical), in this order: QcCompliance (optional), QcType,
/// PSD2.
///
/// RFC 3739 section 3.2.6:
///
/// ```asn1
/// QCStatements ::= SEQUENCE OF QCStatement
/// QCStatement ::= SEQUENCE {
///     statementId   QC-STATEMENT.&id({SupportedStatements}),
///     statementInfo QC-STATEMENT.&Type({SupportedStatements}{@statementId}) OPTIONAL }
/// ```
///
/// ETSI EN 319 412-5 section 4.2.1 and 4.2.3 (Annex B):
///
/// ```asn1
/// esi4-qcStatement-1 QC-STATEMENT ::= { IDENTIFIED BY id-etsi-qcs-QcCompliance }
/// id-etsi-qcs-QcCompliance OBJECT IDENTIFIER ::= { id-etsi-qcs 1 }   -- 0.4.0.1862.1.1
///
/// esi4-qcStatement-6 QC-STATEMENT ::= { SYNTAX QcType IDENTIFIED BY id-etsi-qcs-QcType }
/// id-etsi-qcs-QcType OBJECT IDENTIFIER ::= { id-etsi-qcs 6 }         -- 0.4.0.1862.1.6
/// QcType ::= SEQUENCE OF OBJECT IDENTIFIER (id-etsi-qct-esign | id-etsi-qct-eseal |
///                                           id-etsi-qct-web, ...)
/// id-etsi-qct-eseal OBJECT IDENTIFIER ::= { id-etsi-qcs-QcType 2 }   -- 0.4.0.1862.1.6.2
/// id-etsi-qct-web   OBJECT IDENTIFIER ::= { id-etsi-qcs-QcType 3 }   -- 0.4.0.1862.1.6.3
/// ```
///
/// ETSI TS 119 495 section 5.1 (Annex A):
///
/// ```asn1
/// etsi-psd2-qcStatement QC-STATEMENT ::= { SYNTAX PSD2QcType
///                                          IDENTIFIED BY id-etsi-psd2-qcStatement }
/// id-etsi-psd2-qcStatement OBJECT IDENTIFIER ::= { itu-t(0) identified-organization(4)
///                                  etsi(0) psd2(19495) qcstatement(2) }
/// PSD2QcType ::= SEQUENCE {
///     rolesOfPSP RolesOfPSP,
///     nCAName    NCAName,
///     nCAId      NCAId }
/// RolesOfPSP ::= SEQUENCE OF RoleOfPSP
/// RoleOfPSP ::= SEQUENCE {
///     roleOfPspOid  RoleOfPspOid,
///     roleOfPspName RoleOfPspName }
/// RoleOfPspOid ::= OBJECT IDENTIFIER
/// RoleOfPspName ::= UTF8String (SIZE(256))
/// NCAName ::= UTF8String (SIZE (256))
/// NCAId ::= UTF8String (SIZE (256))
/// ```
///
/// (The `SIZE (256)` constraints are read, as everyone does, as an upper bound.)
pub(crate) fn qc_statements(spec: &QcStatementsSpec<'_>) -> CustomExtension {
    let mut statements = Vec::with_capacity(3);
    if spec.compliance {
        // No statementInfo: the statement is the OID alone.
        statements.push(der::sequence(&[der::oid(OID_QCS_QC_COMPLIANCE)]));
    }
    statements.push(der::sequence(&[
        der::oid(OID_QCS_QC_TYPE),
        der::sequence(&[der::oid(spec.qc_type.oid())]),
    ]));
    let roles: Vec<Vec<u8>> = spec
        .roles
        .iter()
        .map(|&role| der::sequence(&[der::oid(role_oid(role)), der::utf8_string(role_name(role))]))
        .collect();
    statements.push(der::sequence(&[
        der::oid(OID_PSD2_QC_STATEMENT),
        der::sequence(&[
            der::sequence(&roles),
            der::utf8_string(spec.nca_name),
            der::utf8_string(spec.nca_id),
        ]),
    ]));
    // from_oid_content makes the extension non-critical, as EN 319 412-5 section 4.1 wants.
    CustomExtension::from_oid_content(OID_QC_STATEMENTS, der::sequence(&statements))
}

/// The authorityInfoAccess extension (non-critical) with an OCSP and/or a caIssuers URL.
/// Returns `None` when both are absent (the extension is `SIZE (1..MAX)`).
///
/// RFC 5280 section 4.2.2.1:
///
/// ```asn1
/// AuthorityInfoAccessSyntax ::= SEQUENCE SIZE (1..MAX) OF AccessDescription
/// AccessDescription ::= SEQUENCE {
///     accessMethod   OBJECT IDENTIFIER,
///     accessLocation GeneralName }
/// id-ad-caIssuers OBJECT IDENTIFIER ::= { id-ad 2 }
/// id-ad-ocsp      OBJECT IDENTIFIER ::= { id-ad 1 }
/// GeneralName ::= CHOICE { ..., uniformResourceIdentifier [6] IA5String, ... }
/// ```
pub(crate) fn authority_info_access(
    ocsp_url: Option<&str>,
    ca_issuers_url: Option<&str>,
) -> Option<CustomExtension> {
    let mut descriptions = Vec::with_capacity(2);
    if let Some(url) = ocsp_url {
        descriptions.push(der::sequence(&[
            der::oid(OID_AD_OCSP),
            der::context_ia5_string(6, url),
        ]));
    }
    if let Some(url) = ca_issuers_url {
        descriptions.push(der::sequence(&[
            der::oid(OID_AD_CA_ISSUERS),
            der::context_ia5_string(6, url),
        ]));
    }
    if descriptions.is_empty() {
        return None;
    }
    // RFC 5280: "This extension MUST be marked as non-critical"; from_oid_content does that.
    Some(CustomExtension::from_oid_content(
        OID_AUTHORITY_INFO_ACCESS,
        der::sequence(&descriptions),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_statement_is_written_as_oid_then_name() {
        let ext = qc_statements(&QcStatementsSpec {
            compliance: false,
            qc_type: SandboxQcType::Web,
            roles: &[Psd2Role::PspAi],
            nca_name: "N",
            nca_id: "XX-TEST",
        });
        assert!(!ext.criticality());
        let content = ext.content();
        let role = [
            der::oid(&[0, 4, 0, 19495, 1, 3]),
            der::utf8_string("PSP_AI"),
        ]
        .concat();
        assert!(content.windows(role.len()).any(|w| w == role.as_slice()));
        // No QcCompliance statement was asked for.
        let compliance = der::oid(OID_QCS_QC_COMPLIANCE);
        assert!(
            !content
                .windows(compliance.len())
                .any(|w| w == compliance.as_slice())
        );
    }

    #[test]
    fn authority_info_access_needs_at_least_one_url() {
        assert!(authority_info_access(None, None).is_none());
        let ext = authority_info_access(Some("http://o"), None).expect("one URL");
        assert!(!ext.criticality());
    }
}
