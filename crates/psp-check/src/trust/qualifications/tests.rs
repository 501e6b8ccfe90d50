//! The evaluation rules on hand-built qualifications and certificate facts. The XML reading
//! is tested in `tsl/tests.rs`, the whole path on the real Czech list in
//! `tests/check_real_certificates.rs`.

use super::*;

const QWAC_POLICY: &str = "1.3.6.1.4.1.23624.10.1.40.1.1";
const OTHER_POLICY: &str = "1.3.6.1.4.1.23624.10.1.35.1.0";
const ORGANIZATION_IDENTIFIER: &str = "2.5.4.97";

fn ku(digital_signature: bool, non_repudiation: bool) -> KeyUsage {
    KeyUsage {
        digital_signature,
        non_repudiation,
        key_encipherment: false,
        data_encipherment: false,
        key_agreement: false,
        key_cert_sign: false,
        crl_sign: false,
        encipher_only: false,
        decipher_only: false,
    }
}

/// Facts of a certificate with these policies, a keyUsage of digitalSignature only and an
/// organisation subject.
struct Cert {
    key_usage: Option<KeyUsage>,
    policies: Vec<String>,
    subject: Vec<String>,
    eku: Option<Vec<String>>,
}

impl Cert {
    fn with_policies(policies: &[&str]) -> Cert {
        Cert {
            key_usage: Some(ku(true, false)),
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
            subject: vec![
                "2.5.4.6".to_owned(),
                "2.5.4.10".to_owned(),
                ORGANIZATION_IDENTIFIER.to_owned(),
            ],
            eku: Some(vec!["1.3.6.1.5.5.7.3.1".to_owned()]),
        }
    }

    fn facts(&self) -> CertFacts<'_> {
        CertFacts {
            key_usage: self.key_usage.as_ref(),
            policies: &self.policies,
            subject_attribute_types: &self.subject,
            extended_key_usage: self.eku.as_deref(),
        }
    }
}

fn policy(oid: &str) -> Criterion {
    Criterion::PolicySet(vec![oid.to_owned()])
}

fn element(qualifiers: &[&str], assert: Assert, criteria: Vec<Criterion>) -> Qualification {
    Qualification {
        qualifiers: qualifiers.iter().map(|u| Qualifier::from_uri(u)).collect(),
        criteria: CriteriaList { assert, criteria },
    }
}

fn web() -> BTreeSet<CertKind> {
    BTreeSet::from([CertKind::Web])
}

#[test]
fn no_qualifications_leave_the_service_kinds_standing() {
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(evaluate(&[], &cert.facts()), Ok(None));
}

#[test]
fn neutral_qualifiers_change_nothing_even_when_they_select_the_certificate() {
    // The real CZ QWAC service: QCQSCDStatusAsInCert for at least one of three policies.
    let q = element(
        &[uri::QC_QSCD_STATUS_AS_IN_CERT],
        Assert::AtLeastOne,
        vec![policy(OTHER_POLICY), policy(QWAC_POLICY)],
    );
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(q.criteria.selects(&cert.facts()), Some(true));
    assert_eq!(evaluate(&[q], &cert.facts()), Ok(None));
}

#[test]
fn qc_for_wsa_decides_web_and_qc_for_eseal_decides_seal_for_the_selected_certificates() {
    let qs = [
        element(&[uri::QC_FOR_WSA], Assert::All, vec![policy(QWAC_POLICY)]),
        element(
            &[uri::QC_FOR_ESEAL],
            Assert::All,
            vec![policy(OTHER_POLICY)],
        ),
    ];
    let qwac = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(evaluate(&qs, &qwac.facts()), Ok(Some(web())));
    let seal = Cert::with_policies(&[OTHER_POLICY]);
    assert_eq!(
        evaluate(&qs, &seal.facts()),
        Ok(Some(BTreeSet::from([CertKind::Seal])))
    );
    let neither = Cert::with_policies(&["1.2.3.4"]);
    assert_eq!(evaluate(&qs, &neither.facts()), Ok(None));
}

#[test]
fn not_qualified_for_a_policy_refuses_matching_certificates_only() {
    let qs = [element(
        &[uri::NOT_QUALIFIED],
        Assert::AtLeastOne,
        vec![policy(OTHER_POLICY)],
    )];
    let matching = Cert::with_policies(&[QWAC_POLICY, OTHER_POLICY]);
    assert_eq!(evaluate(&qs, &matching.facts()), Err(Refusal::NotQualified));
    let other = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(evaluate(&qs, &other.facts()), Ok(None));
}

#[test]
fn qc_for_esig_refuses_the_selected_certificate_even_beside_qc_for_wsa() {
    let qs = [
        element(&[uri::QC_FOR_WSA], Assert::All, vec![]),
        element(&[uri::QC_FOR_ESIG], Assert::All, vec![policy(QWAC_POLICY)]),
    ];
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(evaluate(&qs, &cert.facts()), Err(Refusal::ForESig));
}

#[test]
fn an_unknown_qualifier_fails_closed_for_the_certificates_it_selects_only() {
    let evil = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForEverything";
    let qs = [element(&[evil], Assert::All, vec![policy(OTHER_POLICY)])];
    let selected = Cert::with_policies(&[OTHER_POLICY]);
    assert_eq!(
        evaluate(&qs, &selected.facts()),
        Err(Refusal::UnknownQualifier {
            uri: evil.to_owned()
        })
    );
    let not_selected = Cert::with_policies(&[QWAC_POLICY]);
    assert_eq!(evaluate(&qs, &not_selected.facts()), Ok(None));
}

#[test]
fn qualifier_uris_are_compared_whole_never_by_suffix_or_case() {
    for look_alike in [
        "http://evil.example/QCForWSA",
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForWSA/",
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/qcforwsa",
        "https://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForWSA",
    ] {
        assert_eq!(
            Qualifier::from_uri(look_alike),
            Qualifier::Unknown(look_alike.to_owned())
        );
        let cert = Cert::with_policies(&[QWAC_POLICY]);
        let qs = [element(&[look_alike], Assert::All, vec![])];
        assert!(
            matches!(
                evaluate(&qs, &cert.facts()),
                Err(Refusal::UnknownQualifier { .. })
            ),
            "{look_alike} must not grant web"
        );
    }
}

#[test]
fn every_known_qualifier_round_trips_and_only_the_deciding_ones_are_not_neutral() {
    let deciding = [
        uri::QC_FOR_ESIG,
        uri::QC_FOR_ESEAL,
        uri::QC_FOR_WSA,
        uri::NOT_QUALIFIED,
    ];
    let neutral = [
        uri::QC_STATEMENT,
        uri::QC_WITH_SSCD,
        uri::QC_NO_SSCD,
        uri::QC_SSCD_STATUS_AS_IN_CERT,
        uri::QC_WITH_QSCD,
        uri::QC_NO_QSCD,
        uri::QC_QSCD_STATUS_AS_IN_CERT,
        uri::QC_QSCD_MANAGED_ON_BEHALF,
        uri::QC_FOR_LEGAL_PERSON,
    ];
    for u in deciding.iter().chain(&neutral) {
        let q = Qualifier::from_uri(u);
        assert!(!matches!(q, Qualifier::Unknown(_)), "{u} is known");
        assert_eq!(q.uri(), *u);
        assert_eq!(q.is_neutral(), neutral.contains(u), "{u}");
    }
}

#[test]
fn assert_all_at_least_one_and_none_combine_criteria() {
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    let list = |assert, criteria| CriteriaList { assert, criteria };
    let yes = || policy(QWAC_POLICY);
    let no = || policy(OTHER_POLICY);
    let f = cert.facts();
    assert_eq!(
        list(Assert::All, vec![yes(), yes()]).selects(&f),
        Some(true)
    );
    assert_eq!(
        list(Assert::All, vec![yes(), no()]).selects(&f),
        Some(false)
    );
    assert_eq!(
        list(Assert::AtLeastOne, vec![no(), yes()]).selects(&f),
        Some(true)
    );
    assert_eq!(
        list(Assert::AtLeastOne, vec![no()]).selects(&f),
        Some(false)
    );
    assert_eq!(list(Assert::None, vec![no()]).selects(&f), Some(true));
    assert_eq!(
        list(Assert::None, vec![no(), yes()]).selects(&f),
        Some(false)
    );
    // As DSS reads them: an empty `all` or `none` list selects every certificate.
    assert_eq!(list(Assert::All, vec![]).selects(&f), Some(true));
    assert_eq!(list(Assert::AtLeastOne, vec![]).selects(&f), Some(false));
    // Nested lists.
    let nested = list(
        Assert::All,
        vec![
            yes(),
            Criterion::List(list(Assert::None, vec![no()])),
            Criterion::List(list(Assert::AtLeastOne, vec![no(), yes()])),
        ],
    );
    assert_eq!(nested.selects(&f), Some(true));
}

#[test]
fn a_policy_set_needs_every_policy_it_lists() {
    let both = Criterion::PolicySet(vec![QWAC_POLICY.to_owned(), OTHER_POLICY.to_owned()]);
    let list = CriteriaList {
        assert: Assert::All,
        criteria: vec![both],
    };
    assert_eq!(
        list.selects(&Cert::with_policies(&[QWAC_POLICY]).facts()),
        Some(false)
    );
    assert_eq!(
        list.selects(&Cert::with_policies(&[OTHER_POLICY, QWAC_POLICY]).facts()),
        Some(true)
    );
}

#[test]
fn key_usage_subject_attribute_and_extended_key_usage_criteria() {
    let cert = Cert::with_policies(&[]);
    let f = cert.facts();
    let one = |c| CriteriaList {
        assert: Assert::All,
        criteria: vec![c],
    };
    let signing = Criterion::KeyUsage(vec![
        (KeyUsageBit::DigitalSignature, true),
        (KeyUsageBit::NonRepudiation, false),
    ]);
    assert_eq!(one(signing).selects(&f), Some(true));
    let non_repudiation = Criterion::KeyUsage(vec![(KeyUsageBit::NonRepudiation, true)]);
    assert_eq!(one(non_repudiation).selects(&f), Some(false));
    let org = Criterion::SubjectDnAttributes(vec![ORGANIZATION_IDENTIFIER.to_owned()]);
    assert_eq!(one(org).selects(&f), Some(true));
    let surname = Criterion::SubjectDnAttributes(vec!["2.5.4.4".to_owned()]);
    assert_eq!(one(surname).selects(&f), Some(false));
    let server_auth = Criterion::ExtendedKeyUsage(vec!["1.3.6.1.5.5.7.3.1".to_owned()]);
    assert_eq!(one(server_auth.clone()).selects(&f), Some(true));
    let no_eku = Cert {
        eku: None,
        ..Cert::with_policies(&[])
    };
    assert_eq!(one(server_auth).selects(&no_eku.facts()), Some(false));
}

#[test]
fn a_key_usage_criterion_cannot_be_decided_without_key_usage_and_refuses_when_it_matters() {
    let no_ku = Cert {
        key_usage: None,
        ..Cert::with_policies(&[QWAC_POLICY])
    };
    let criterion = || Criterion::KeyUsage(vec![(KeyUsageBit::NonRepudiation, true)]);
    let not_qualified = [element(
        &[uri::NOT_QUALIFIED],
        Assert::All,
        vec![criterion()],
    )];
    assert!(matches!(
        evaluate(&not_qualified, &no_ku.facts()),
        Err(Refusal::Undecidable { ref qualifier, .. }) if qualifier == "NotQualified"
    ));
    // The same criterion under neutral qualifiers is not even evaluated.
    let neutral = [element(
        &[uri::QC_WITH_QSCD],
        Assert::All,
        vec![criterion()],
    )];
    assert_eq!(evaluate(&neutral, &no_ku.facts()), Ok(None));
}

#[test]
fn a_criterion_not_understood_refuses_unless_the_rest_decides_the_list() {
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    let f = cert.facts();
    let unknown = || Criterion::NotUnderstood("{urn:x}Anything".to_owned());
    let not_qualified = |assert, criteria| [element(&[uri::NOT_QUALIFIED], assert, criteria)];
    // `all` with an unknown criterion and one that holds: undecided, so refused.
    assert!(matches!(
        evaluate(
            &not_qualified(Assert::All, vec![policy(QWAC_POLICY), unknown()]),
            &f
        ),
        Err(Refusal::Undecidable { .. })
    ));
    // `all` with one criterion that fails is decided whatever the unknown one says.
    assert_eq!(
        evaluate(
            &not_qualified(Assert::All, vec![policy(OTHER_POLICY), unknown()]),
            &f
        ),
        Ok(None)
    );
    // `atLeastOne` with one that holds is decided: NotQualified applies.
    assert_eq!(
        evaluate(
            &not_qualified(Assert::AtLeastOne, vec![unknown(), policy(QWAC_POLICY)]),
            &f
        ),
        Err(Refusal::NotQualified)
    );
    // `none` over an unknown criterion is undecided too: not read as "no".
    assert!(matches!(
        evaluate(&not_qualified(Assert::None, vec![unknown()]), &f),
        Err(Refusal::Undecidable { .. })
    ));
}

#[test]
fn the_first_refusal_in_document_order_is_given() {
    let cert = Cert::with_policies(&[QWAC_POLICY]);
    let qs = [
        element(&[uri::QC_FOR_WSA], Assert::All, vec![]),
        element(&[uri::NOT_QUALIFIED], Assert::All, vec![]),
        element(&["urn:x:unknown"], Assert::All, vec![]),
    ];
    assert_eq!(evaluate(&qs, &cert.facts()), Err(Refusal::NotQualified));
}
