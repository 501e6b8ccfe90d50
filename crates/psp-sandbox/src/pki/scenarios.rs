//! The sandbox scenario table: the certificate authorities to create ([`CAS`]) and one PSP
//! certificate per scenario of the service contract ([`PSPS`]), as data. What each scenario is
//! about (roles, NCA, QC type, validity, revocation, tampering) is read here; how keys and
//! certificates are made from these rows is `super` (`pki.rs`).

use time::OffsetDateTime;
use time::macros::datetime;

use super::extensions::SandboxQcType;
use super::manifest::{KeyAlgorithm, RevocationReason};
use crate::cert::Psd2Role;

/// Validity of the PSP certificates, except `expired`.
const PSP_NOT_BEFORE: OffsetDateTime = datetime!(2025-01-01 0:00 UTC);
const PSP_NOT_AFTER: OffsetDateTime = datetime!(2055-01-01 0:00 UTC);
const EXPIRED_NOT_BEFORE: OffsetDateTime = datetime!(2020-01-01 0:00 UTC);
const EXPIRED_NOT_AFTER: OffsetDateTime = datetime!(2021-01-01 0:00 UTC);
/// When `revoked` was revoked: the day after it was issued, so it is revoked at any
/// validation time a test picks inside its validity.
pub(super) const REVOKED_AT: OffsetDateTime = datetime!(2025-01-02 0:00 UTC);

/// One certificate authority to create.
pub(super) struct CaSpec {
    pub(super) name: &'static str,
    pub(super) common_name: &'static str,
    pub(super) organisation: &'static str,
    pub(super) country: &'static str,
    pub(super) key: KeyAlgorithm,
    /// The CA that signs this one; `None` for self-signed.
    pub(super) issued_by: Option<&'static str>,
    /// Copy this CA's subject DN (built from its spec, so byte-identical) instead of our own.
    pub(super) lookalike_of: Option<&'static str>,
}

const QTSP_ORG: &str = "PSP Gateway Sandbox QTSP";

/// Parents before children: [`generate`](super::generate) builds them in this order.
pub(super) const CAS: &[CaSpec] = &[
    CaSpec {
        name: "qtsp-root",
        common_name: "PSP Gateway Sandbox QTSP Root CA",
        organisation: QTSP_ORG,
        country: "XX",
        key: KeyAlgorithm::Rsa3072,
        issued_by: None,
        lookalike_of: None,
    },
    CaSpec {
        name: "qtsp-issuing",
        common_name: "PSP Gateway Sandbox QTSP Issuing CA",
        organisation: QTSP_ORG,
        country: "XX",
        key: KeyAlgorithm::Rsa3072,
        issued_by: Some("qtsp-root"),
        lookalike_of: None,
    },
    CaSpec {
        name: "qtsp-ecdsa-issuing",
        common_name: "PSP Gateway Sandbox QTSP ECDSA Issuing CA",
        organisation: QTSP_ORG,
        country: "XX",
        key: KeyAlgorithm::EcdsaP256,
        issued_by: Some("qtsp-root"),
        lookalike_of: None,
    },
    CaSpec {
        name: "obie-root",
        common_name: "PSP Gateway Sandbox OBIE Root CA",
        organisation: "PSP Gateway Sandbox OBIE",
        country: "GB",
        key: KeyAlgorithm::Rsa3072,
        issued_by: None,
        lookalike_of: None,
    },
    CaSpec {
        name: "obie-issuing",
        common_name: "PSP Gateway Sandbox OBIE Issuing CA",
        organisation: "PSP Gateway Sandbox OBIE",
        country: "GB",
        key: KeyAlgorithm::Rsa3072,
        issued_by: Some("obie-root"),
        lookalike_of: None,
    },
    CaSpec {
        name: "obhd-root",
        common_name: "PSP Gateway Sandbox Hub Directory Root CA",
        organisation: "PSP Gateway Sandbox Hub Directory",
        country: "XX",
        key: KeyAlgorithm::Rsa3072,
        issued_by: None,
        lookalike_of: None,
    },
    CaSpec {
        name: "obhd-issuing",
        common_name: "PSP Gateway Sandbox Hub Directory Issuing CA",
        organisation: "PSP Gateway Sandbox Hub Directory",
        country: "XX",
        key: KeyAlgorithm::Rsa3072,
        issued_by: Some("obhd-root"),
        lookalike_of: None,
    },
    CaSpec {
        name: "untrusted-issuing",
        // The DN comes from qtsp-issuing's spec; these fields only name it in the manifest.
        common_name: "PSP Gateway Sandbox QTSP Issuing CA",
        organisation: QTSP_ORG,
        country: "XX",
        key: KeyAlgorithm::Rsa3072,
        issued_by: None,
        lookalike_of: Some("qtsp-issuing"),
    },
];

/// The NCA named in a PSD2 QC statement.
#[derive(Clone, Copy)]
pub(super) struct Nca {
    pub(super) name: &'static str,
    pub(super) id: &'static str,
}

const NCA_XX: Nca = Nca {
    name: "Sandbox Competent Authority XX",
    id: "XX-TEST",
};
const NCA_GB: Nca = Nca {
    name: "Financial Conduct Authority",
    id: "GB-FCA",
};
const NCA_OBHD: Nca = Nca {
    name: "Sandbox Hub Directory",
    id: "XX-OBHD",
};

const PI_AI: &[Psd2Role] = &[Psd2Role::PspPi, Psd2Role::PspAi];

/// One PSP certificate to create: one sandbox scenario.
#[derive(Clone, Copy)]
pub(super) struct PspSpec {
    pub(super) scenario: &'static str,
    pub(super) organisation: &'static str,
    pub(super) auth_number: &'static str,
    pub(super) issuer: &'static str,
    pub(super) roles: &'static [Psd2Role],
    pub(super) country: &'static str,
    pub(super) nca: Nca,
    pub(super) qc_type: SandboxQcType,
    pub(super) qc_compliance: bool,
    pub(super) key: KeyAlgorithm,
    pub(super) not_before: OffsetDateTime,
    pub(super) not_after: OffsetDateTime,
    /// CRL distribution point and OCSP URL (caIssuers is always written).
    pub(super) revocation_pointers: bool,
    pub(super) revoked: Option<RevocationReason>,
    /// Change one octet of the subject O value after signing.
    pub(super) tampered: bool,
}

/// A QWAC of a PSP authorised in `XX`, issued by `qtsp-issuing`; scenarios change what they
/// are about.
const XX_QWAC: PspSpec = PspSpec {
    scenario: "",
    organisation: "",
    auth_number: "",
    issuer: "qtsp-issuing",
    roles: PI_AI,
    country: "XX",
    nca: NCA_XX,
    qc_type: SandboxQcType::Web,
    qc_compliance: true,
    key: KeyAlgorithm::Rsa2048,
    not_before: PSP_NOT_BEFORE,
    not_after: PSP_NOT_AFTER,
    revocation_pointers: true,
    revoked: None,
    tampered: false,
};

pub(super) const PSPS: &[PspSpec] = &[
    PspSpec {
        scenario: "valid",
        organisation: "Sandbox Valid PSP",
        auth_number: "PSDXX-TEST-000001",
        roles: &[Psd2Role::PspPi, Psd2Role::PspAi, Psd2Role::PspIc],
        ..XX_QWAC
    },
    PspSpec {
        scenario: "unauthorised",
        organisation: "Sandbox Unauthorised PSP",
        auth_number: "PSDXX-TEST-000002",
        ..XX_QWAC
    },
    PspSpec {
        scenario: "roles-1-2",
        organisation: "Sandbox Roles 1 2 PSP",
        auth_number: "PSDXX-TEST-000003",
        ..XX_QWAC
    },
    PspSpec {
        scenario: "expired",
        organisation: "Sandbox Expired PSP",
        auth_number: "PSDXX-TEST-000004",
        not_before: EXPIRED_NOT_BEFORE,
        not_after: EXPIRED_NOT_AFTER,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "untrusted",
        organisation: "Sandbox Untrusted PSP",
        auth_number: "PSDXX-TEST-000005",
        issuer: "untrusted-issuing",
        ..XX_QWAC
    },
    PspSpec {
        scenario: "revoked",
        organisation: "Sandbox Revoked PSP",
        auth_number: "PSDXX-TEST-000006",
        revoked: Some(RevocationReason::KeyCompromise),
        ..XX_QWAC
    },
    PspSpec {
        scenario: "no-revocation",
        organisation: "Sandbox No Revocation PSP",
        auth_number: "PSDXX-TEST-000007",
        revocation_pointers: false,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "tampered",
        organisation: "Sandbox Tampered PSP",
        auth_number: "PSDXX-TEST-000008",
        tampered: true,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "passport-out-xy",
        organisation: "Sandbox Passport Out XY PSP",
        auth_number: "PSDXX-TEST-000009",
        ..XX_QWAC
    },
    PspSpec {
        scenario: "gb-tpr",
        organisation: "Sandbox GB TPR PSP",
        auth_number: "PSDXX-TEST-000010",
        ..XX_QWAC
    },
    PspSpec {
        scenario: "role-5",
        organisation: "Sandbox Role 5 PSP",
        auth_number: "PSDXX-TEST-000011",
        roles: &[Psd2Role::PspIc],
        ..XX_QWAC
    },
    PspSpec {
        scenario: "obie-valid",
        organisation: "Sandbox OBIE Valid PSP",
        auth_number: "PSDGB-FCA-000012",
        issuer: "obie-issuing",
        country: "GB",
        nca: NCA_GB,
        // As real OBIE certificates: a QcType and a PSD2 statement, no QcCompliance.
        qc_compliance: false,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "obhd-valid",
        organisation: "Sandbox Hub Directory Valid PSP",
        auth_number: "PSDXX-OBHD-000013",
        issuer: "obhd-issuing",
        nca: NCA_OBHD,
        qc_compliance: false,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "qseal",
        organisation: "Sandbox QSeal PSP",
        auth_number: "PSDXX-TEST-000014",
        qc_type: SandboxQcType::Eseal,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "ecdsa",
        organisation: "Sandbox ECDSA PSP",
        auth_number: "PSDXX-TEST-000015",
        issuer: "qtsp-ecdsa-issuing",
        key: KeyAlgorithm::EcdsaP256,
        ..XX_QWAC
    },
    PspSpec {
        scenario: "aisp",
        organisation: "Sandbox AISP PSP",
        auth_number: "PSDXX-TEST-000016",
        roles: &[Psd2Role::PspAi],
        ..XX_QWAC
    },
    PspSpec {
        scenario: "credit-institution",
        organisation: "Sandbox Credit Institution PSP",
        auth_number: "PSDXX-TEST-000017",
        roles: &[
            Psd2Role::PspAs,
            Psd2Role::PspPi,
            Psd2Role::PspAi,
            Psd2Role::PspIc,
        ],
        ..XX_QWAC
    },
    PspSpec {
        scenario: "exempt",
        organisation: "Sandbox Exempt PSP",
        auth_number: "PSDXX-TEST-000018",
        ..XX_QWAC
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_names_an_existing_ca_and_a_unique_file() {
        let mut seen = std::collections::HashSet::new();
        for psp in PSPS {
            assert!(seen.insert(psp.scenario), "duplicate {}", psp.scenario);
            assert!(
                CAS.iter().any(|ca| ca.name == psp.issuer),
                "{}",
                psp.scenario
            );
        }
        for (i, ca) in CAS.iter().enumerate() {
            for parent in ca.issued_by.iter().chain(ca.lookalike_of.iter()) {
                assert!(CAS[..i].iter().any(|c| c.name == *parent), "{}", ca.name);
            }
        }
    }
}
