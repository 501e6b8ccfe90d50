//! Unit tests of the QC-statement parser (ETSI EN 319 412-5, ETSI TS 119 495), kept apart
//! from the parser in `qc.rs` so that the code reads without scrolling past them.

use super::*;

use psp_testkit::der::{oid, seq, tlv, utf8};

fn role(o: &str, name: &str) -> Vec<u8> {
    seq(&[oid(o), utf8(name)])
}

fn psd2_info(roles: &[Vec<u8>], nca_name: Vec<u8>, nca_id: Vec<u8>) -> Vec<u8> {
    seq(&[seq(roles), nca_name, nca_id])
}

fn statement(o: &str, info: Option<Vec<u8>>) -> Vec<u8> {
    let mut parts = vec![oid(o)];
    parts.extend(info);
    seq(&parts)
}

fn conforming() -> Vec<u8> {
    seq(&[
        statement(OID_QC_COMPLIANCE, None),
        statement(OID_QC_TYPE, Some(seq(&[oid(OID_QCT_WEB)]))),
        statement(
            OID_PSD2_STATEMENT,
            Some(psd2_info(
                &[
                    role(OID_ROLE_PSP_AI, "PSP_AI"),
                    role(OID_ROLE_PSP_PI, "PSP_PI"),
                ],
                utf8("Test Authority"),
                utf8("XX-TEST"),
            )),
        ),
    ])
}

#[test]
fn a_conforming_extension_decodes_without_warnings() {
    let (qc, warnings) = decode_qc_statements(&conforming(), false);
    assert_eq!(warnings, Vec::<String>::new());
    assert!(!qc.critical);
    assert_eq!(
        qc.statements,
        vec![
            QcStatementKind::QcCompliance,
            QcStatementKind::QcType,
            QcStatementKind::Psd2
        ]
    );
    assert!(qc.has_compliance());
    assert_eq!(qc.types, vec![QcType::Web]);
    let psd2 = qc.psd2.expect("PSD2 statement");
    assert_eq!(psd2.nca_name, "Test Authority");
    assert_eq!(psd2.nca_id, "XX-TEST");
    assert_eq!(psd2.role_set(), vec![Psd2Role::PspPi, Psd2Role::PspAi]);
    assert_eq!(psd2.roles[0].oid, OID_ROLE_PSP_AI);
    assert_eq!(psd2.roles[0].name, "PSP_AI");
}

#[test]
fn the_critical_flag_is_carried_through() {
    let (qc, _) = decode_qc_statements(&conforming(), true);
    assert!(qc.critical);
}

#[test]
fn a_single_statement_instead_of_a_sequence_is_read_with_a_warning() {
    let single = statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[role(OID_ROLE_PSP_AI, "PSP_AI")],
            utf8("Auth"),
            utf8("DE-FAKENCA"),
        )),
    );
    let (qc, warnings) = decode_qc_statements(&single, false);
    assert_eq!(qc.statements, vec![QcStatementKind::Psd2]);
    assert_eq!(qc.psd2.expect("PSD2").role_set(), vec![Psd2Role::PspAi]);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("single QCStatement"));
}

#[test]
fn flattened_roles_yield_the_first_pair_and_a_warning() {
    let flat = seq(&[
        oid(OID_ROLE_PSP_AS),
        utf8("PSP_AS"),
        oid(OID_ROLE_PSP_PI),
        utf8("PSP_PI"),
        oid(OID_ROLE_PSP_AI),
        utf8("PSP_AI"),
        oid(OID_ROLE_PSP_IC),
        utf8("PSP_IC"),
    ]);
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[flat],
            utf8("Financial Conduct Authority"),
            utf8("GB-FCA"),
        )),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    let psd2 = qc.psd2.expect("PSD2");
    assert_eq!(psd2.role_set(), vec![Psd2Role::PspAs]);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("8 elements"));
}

#[test]
fn statement_info_on_qc_compliance_is_tolerated_with_a_warning() {
    let ext = seq(&[statement(OID_QC_COMPLIANCE, Some(utf8("")))]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert!(qc.has_compliance());
    assert_eq!(
        warnings,
        vec!["QcCompliance statement carries unexpected statementInfo (tag 0x0c)"]
    );
}

#[test]
fn names_in_other_string_types_are_kept_with_a_warning() {
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[seq(&[
                oid(OID_ROLE_PSP_AS),
                tlv(tag::PRINTABLE_STRING, b"PSP_AS"),
            ])],
            tlv(tag::PRINTABLE_STRING, b"Authority"),
            tlv(
                tag::BMP_STRING,
                &[0, b'X', 0, b'X', 0, b'-', 0, b'T', 0, b'E'],
            ),
        )),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    let psd2 = qc.psd2.expect("PSD2");
    assert_eq!(psd2.nca_name, "Authority");
    assert_eq!(psd2.nca_id, "XX-TE");
    assert_eq!(psd2.roles[0].name, "PSP_AS");
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("instead of a UTF8String"))
    );
}

#[test]
fn a_role_name_that_contradicts_its_oid_is_reported_and_the_oid_decides() {
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[role(OID_ROLE_PSP_AS, "PSP_PI")],
            utf8("A"),
            utf8("XX-TEST"),
        )),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert_eq!(qc.psd2.expect("PSD2").role_set(), vec![Psd2Role::PspAs]);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("does not match"));
}

#[test]
fn unknown_role_oids_grant_nothing_and_unspecified_is_silent() {
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[
                role("0.4.0.19495.1.9", "PSP_XX"),
                role(OID_ROLE_PSP_UNSPECIFIED, "PSP_UNSPECIFIED"),
            ],
            utf8("A"),
            utf8("XX-TEST"),
        )),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    let psd2 = qc.psd2.expect("PSD2");
    assert_eq!(psd2.roles.len(), 2);
    assert!(psd2.role_set().is_empty());
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("0.4.0.19495.1.9"));
}

#[test]
fn an_incomplete_psd2_statement_is_listed_but_not_decoded() {
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(seq(&[seq(&[role(OID_ROLE_PSP_AS, "PSP_AS")]), utf8("A")])),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert_eq!(qc.statements, vec![QcStatementKind::Psd2]);
    assert_eq!(qc.psd2, None);
    assert_eq!(warnings, vec!["nCAId is missing"]);
}

#[test]
fn empty_roles_and_malformed_nca_ids_are_reported() {
    let ext = seq(&[statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(&[], utf8("Auth"), utf8("1219088"))),
    )]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert!(qc.psd2.expect("PSD2").roles.is_empty());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
}

#[test]
fn a_repeated_psd2_statement_is_reported_and_the_first_used() {
    let first = statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[role(OID_ROLE_PSP_AI, "PSP_AI")],
            utf8("A"),
            utf8("XX-TEST"),
        )),
    );
    let second = statement(
        OID_PSD2_STATEMENT,
        Some(psd2_info(
            &[role(OID_ROLE_PSP_AS, "PSP_AS")],
            utf8("B"),
            utf8("XX-OTHER"),
        )),
    );
    let (qc, warnings) = decode_qc_statements(&seq(&[first, second]), false);
    assert_eq!(qc.psd2.expect("PSD2").nca_name, "A");
    assert_eq!(warnings.len(), 1);
}

#[test]
fn other_statements_are_listed_by_oid_without_warning() {
    let ext = seq(&[
        statement("1.3.6.1.5.5.7.11.2", Some(seq(&[oid("0.4.0.194121.1.2")]))),
        statement(OID_QC_SSCD, None),
        statement(OID_QC_RETENTION_PERIOD, Some(tlv(tag::INTEGER, &[10]))),
        statement(
            OID_QC_LIMIT_VALUE,
            Some(seq(&[
                tlv(tag::PRINTABLE_STRING, b"EUR"),
                tlv(tag::INTEGER, &[1]),
                tlv(tag::INTEGER, &[3]),
            ])),
        ),
        statement(
            OID_QC_PDS,
            Some(seq(&[seq(&[
                tlv(tag::IA5_STRING, b"https://example.test/pds"),
                tlv(tag::PRINTABLE_STRING, b"en"),
            ])])),
        ),
    ]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        qc.statements,
        vec![
            QcStatementKind::Other("1.3.6.1.5.5.7.11.2".to_owned()),
            QcStatementKind::QcSscd,
            QcStatementKind::QcRetentionPeriod,
            QcStatementKind::QcLimitValue,
            QcStatementKind::QcPds,
        ]
    );
}

#[test]
fn values_that_are_not_a_sequence_yield_no_statement_and_a_warning() {
    for value in [
        &[][..],
        &[0x04, 0x00],
        &[0x30],
        &[0x30, 0x80, 0x00, 0x00],
        &[0x30, 0x00],
    ] {
        let (qc, warnings) = decode_qc_statements(value, false);
        assert!(qc.statements.is_empty(), "{value:?}");
        assert_eq!(warnings.len(), 1, "{value:?}: {warnings:?}");
    }
}

#[test]
fn trailing_bytes_after_the_extension_are_reported() {
    let mut ext = conforming();
    ext.extend([0x05, 0x00]);
    let (qc, warnings) = decode_qc_statements(&ext, false);
    assert_eq!(qc.statements.len(), 3);
    assert_eq!(
        warnings,
        vec!["2 bytes after the QCStatements SEQUENCE ignored"]
    );
}

#[test]
fn the_statement_budget_bounds_the_work() {
    let many: Vec<Vec<u8>> = (0..MAX_QC_STATEMENTS + 10)
        .map(|_| statement(OID_QC_SSCD, None))
        .collect();
    let (qc, warnings) = decode_qc_statements(&seq(&many), false);
    assert_eq!(qc.statements.len(), MAX_QC_STATEMENTS);
    assert!(warnings.iter().any(|w| w.contains("rest was not read")));
}

#[test]
fn deep_nesting_is_read_without_recursion() {
    let mut nested = vec![0x05, 0x00];
    for _ in 0..5000 {
        nested = tlv(tag::SEQUENCE, &nested);
    }
    let (qc, warnings) = decode_qc_statements(&nested, false);
    assert!(qc.statements.is_empty());
    assert!(!warnings.is_empty());
}

#[test]
fn every_single_byte_change_of_an_extension_decodes_without_panic() {
    let original = conforming();
    let mut decoded_psd2 = 0;
    for pos in 0..original.len() {
        for value in 0..=255u8 {
            let mut mutated = original.clone();
            mutated[pos] = value;
            let (qc, warnings) = decode_qc_statements(&mutated, false);
            assert!(qc.statements.len() <= MAX_QC_STATEMENTS);
            assert!(warnings.len() < 64);
            decoded_psd2 += usize::from(qc.psd2.is_some());
        }
    }
    assert!(decoded_psd2 > 0);
    for end in 0..original.len() {
        let (_, warnings) = decode_qc_statements(&original[..end], false);
        assert!(!warnings.is_empty(), "truncated to {end} bytes");
    }
}
