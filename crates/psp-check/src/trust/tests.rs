//! A trusted list loaded into the trust list, and what its issuers approve for generated
//! certificates: the rules of the module documentation, each with the attempt to get around
//! it.

use base64::Engine as _;
use psp_testkit::der::{oid, tlv};
use time::macros::datetime;

use super::*;
use crate::trust::{QcCompliancePolicy, UntypedPolicy};

const GRANTED: &str = tsl::uri::GRANTED;
const WEB: &str = tsl::uri::FOR_WEB_SITE_AUTHENTICATION;
const SEALS: &str = tsl::uri::FOR_E_SEALS;
const ECC: &str = "http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/#";
const SVC: &str = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/";

/// The current status starts here; the history instance at [`EARLIER`].
const CURRENT: OffsetDateTime = datetime!(2019-01-01 00:00 UTC);
const EARLIER: OffsetDateTime = datetime!(2016-07-01 00:00 UTC);

/// A certificate with these certificatePolicies (RFC 5280 section 4.2.1.4:
/// `SEQUENCE OF PolicyInformation`, each `SEQUENCE { policyIdentifier }`).
fn leaf(policies: &[&str]) -> PspCertificate {
    let mut params =
        rcgen::CertificateParams::new(vec!["psp.test".to_owned()]).expect("valid name");
    let infos: Vec<u8> = policies.iter().flat_map(|p| tlv(0x30, &oid(p))).collect();
    params
        .custom_extensions
        .push(rcgen::CustomExtension::from_oid_content(
            &[2, 5, 29, 32],
            tlv(0x30, &infos),
        ));
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    PspCertificate::from_der(cert.der().to_vec()).expect("parses")
}

fn ca_b64() -> String {
    let mut params = rcgen::CertificateParams::new(vec![]).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    base64::engine::general_purpose::STANDARD.encode(cert.der())
}

fn asi(uri: &str) -> String {
    format!(
        r#"<Extension Critical="true"><AdditionalServiceInformation><URI>{uri}</URI></AdditionalServiceInformation></Extension>"#
    )
}

/// One `QualificationElement` with `qualifiers` (last path segments under `SvcInfoExt/`, or
/// whole URIs) for certificates with the policy `oid`.
fn qualification(qualifiers: &[&str], oid: &str) -> String {
    let qualifiers: String = qualifiers
        .iter()
        .map(|q| {
            let uri = if q.contains(':') {
                (*q).to_owned()
            } else {
                format!("{SVC}{q}")
            };
            format!(r#"<ecc:Qualifier uri="{uri}"/>"#)
        })
        .collect();
    format!(
        r#"<Extension Critical="true"><ecc:Qualifications xmlns:ecc="{ECC}" xmlns:xades="http://uri.etsi.org/01903/v1.3.2#">
             <ecc:QualificationElement>
               <ecc:Qualifiers>{qualifiers}</ecc:Qualifiers>
               <ecc:CriteriaList assert="atLeastOne">
                 <ecc:PolicySet><ecc:PolicyIdentifier><xades:Identifier Qualifier="OIDAsURN">urn:oid:{oid}</xades:Identifier></ecc:PolicyIdentifier></ecc:PolicySet>
               </ecc:CriteriaList>
             </ecc:QualificationElement>
           </ecc:Qualifications></Extension>"#
    )
}

/// A list with one granted CA/QC service: `current` extensions since [`CURRENT`], `earlier`
/// extensions from [`EARLIER`].
fn list_xml(current: &str, earlier: &str) -> String {
    let ca = ca_b64();
    format!(
        r#"<TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#">
  <SchemeInformation><SchemeTerritory>XX</SchemeTerritory></SchemeInformation>
  <TrustServiceProviderList><TrustServiceProvider>
    <TSPInformation><TSPName><Name xml:lang="en">TSP</Name></TSPName></TSPInformation>
    <TSPServices><TSPService>
      <ServiceInformation>
        <ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier>
        <ServiceName><Name xml:lang="en">QC CA</Name></ServiceName>
        <ServiceDigitalIdentity><DigitalId><X509Certificate>{ca}</X509Certificate></DigitalId></ServiceDigitalIdentity>
        <ServiceStatus>{GRANTED}</ServiceStatus>
        <StatusStartingTime>2019-01-01T00:00:00Z</StatusStartingTime>
        <ServiceInformationExtensions>{current}</ServiceInformationExtensions>
      </ServiceInformation>
      <ServiceHistory><ServiceHistoryInstance>
        <ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier>
        <ServiceName><Name xml:lang="en">QC CA</Name></ServiceName>
        <ServiceDigitalIdentity><DigitalId><X509SKI>AAEC</X509SKI></DigitalId></ServiceDigitalIdentity>
        <ServiceStatus>{GRANTED}</ServiceStatus>
        <StatusStartingTime>2016-07-01T00:00:00Z</StatusStartingTime>
        <ServiceInformationExtensions>{earlier}</ServiceInformationExtensions>
      </ServiceHistoryInstance></ServiceHistory>
    </TSPService></TSPServices>
  </TrustServiceProvider></TrustServiceProviderList>
</TrustServiceStatusList>"#
    )
}

fn load(xml: &str) -> TrustList {
    let source = Source {
        name: "tl".into(),
        qtsp_source: QtspSource::Eidas,
        reported_jurisdiction: "EEA".into(),
        valid_for: BTreeSet::from(["XX".parse().expect("a country code")]),
        qc_compliance: QcCompliancePolicy::Required,
        untyped: UntypedPolicy::Reject,
    };
    let mut trust = TrustList::new(vec![source], vec![]).expect("every issuer names a source");
    let parsed = tsl::parse(xml.as_bytes()).expect("the list parses");
    assert_eq!(parsed.skipped, Vec::<String>::new());
    let deadline = ListDeadline {
        list: "trusted list XX (xx.xml)".into(),
        next_update: time::macros::datetime!(2099-01-01 0:00 UTC),
        until: time::macros::datetime!(2099-01-01 0:00 UTC),
    };
    trust.add_trusted_list(0, "xx.xml", &parsed, &deadline);
    assert_eq!(trust.issuers().len(), 1);
    trust
}

fn kinds(k: &[CertKind]) -> BTreeSet<CertKind> {
    k.iter().copied().collect()
}

#[test]
fn a_certificate_policy_is_read_from_the_certificate() {
    assert_eq!(
        leaf(&["1.2.3.4.5", "0.4.0.194112.1.4"]).policies,
        vec!["1.2.3.4.5".to_owned(), "0.4.0.194112.1.4".to_owned()]
    );
    assert!(leaf(&[]).policies.is_empty());
}

#[test]
fn additional_service_information_grants_exactly_the_kinds_it_names() {
    let trust = load(&list_xml(
        &format!("{}{}", asi(WEB), asi(SEALS)),
        &asi(SEALS),
    ));
    let issuer = &trust.issuers()[0];
    let cert = leaf(&[]);
    let at_now = issuer.approval_for(&cert, CURRENT).expect("approved");
    assert_eq!(at_now.kinds, kinds(&[CertKind::Web, CertKind::Seal]));
    let before = issuer.approval_for(&cert, EARLIER).expect("approved");
    assert_eq!(before.kinds, kinds(&[CertKind::Seal]));
}

#[test]
fn look_alike_additional_service_information_uris_grant_nothing() {
    let look_alikes = [
        "http://evil.example/ForWebSiteAuthentication",
        "http://evil.example/TrstSvc/TrustedList/SvcInfoExt/ForeSeals",
        "https://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/ForWebSiteAuthentication",
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/ForWebSiteAuthentication/",
        "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/forwebsiteauthentication",
    ];
    let current: String = look_alikes.iter().map(|u| asi(u)).collect();
    let trust = load(&list_xml(&current, ""));
    let a = trust.issuers()[0]
        .approval_for(&leaf(&[]), CURRENT)
        .expect("the status is granted");
    assert_eq!(a.kinds, BTreeSet::new(), "no look-alike grants a kind");
}

#[test]
fn an_unknown_critical_extension_makes_its_period_unusable_and_is_noted_once() {
    let mystery = r#"<Extension Critical="true"><x:Mystery xmlns:x="urn:example:x"/></Extension>"#;
    let harmless =
        r#"<Extension Critical="false"><x:Harmless xmlns:x="urn:example:x"/></Extension>"#;
    let trust = load(&list_xml(
        &format!("{}{mystery}", asi(WEB)),
        &format!("{}{harmless}", asi(WEB)),
    ));
    let issuer = &trust.issuers()[0];
    let cert = leaf(&[]);
    let refused = issuer
        .approval_for(&cert, CURRENT)
        .expect_err("the current period is not used");
    assert_eq!(
        refused,
        NotApproved::CriticalExtension {
            extension: "{urn:example:x}Mystery".into(),
            at: CURRENT
        }
    );
    assert!(
        refused
            .to_string()
            .contains("service extension {urn:example:x}Mystery is critical and not understood"),
        "{refused}"
    );
    // The earlier period has only a non-critical unknown extension: it is used.
    assert_eq!(
        issuer.approval_for(&cert, EARLIER).map(|a| a.kinds),
        Ok(kinds(&[CertKind::Web]))
    );
    let noted: Vec<_> = trust
        .notes()
        .iter()
        .filter(|n| n.contains("critical extensions not understood"))
        .collect();
    assert_eq!(noted.len(), 1, "{:?}", trust.notes());
    assert!(noted[0].contains("{urn:example:x}Mystery"), "{noted:?}");
    assert!(!noted[0].contains("Harmless"), "{noted:?}");
}

#[test]
fn not_qualified_for_a_policy_refuses_matching_certificates_and_keeps_the_others() {
    let trust = load(&list_xml(
        &format!(
            "{}{}",
            asi(WEB),
            qualification(&["NotQualified"], "1.2.3.4.5")
        ),
        "",
    ));
    let issuer = &trust.issuers()[0];
    let matching = leaf(&["1.2.3.4.5"]);
    let refused = issuer
        .approval_for(&matching, CURRENT)
        .expect_err("NotQualified applies");
    assert_eq!(
        refused,
        NotApproved::Qualification(qualifications::Refusal::NotQualified)
    );
    assert!(refused.to_string().contains("NotQualified"), "{refused}");
    let other = leaf(&["1.2.3.4.6"]);
    assert_eq!(
        issuer.approval_for(&other, CURRENT).map(|a| a.kinds),
        Ok(kinds(&[CertKind::Web]))
    );
    assert!(
        trust
            .notes()
            .iter()
            .any(|n| n.contains("1 CA/QC services carry Qualifications")),
        "{:?}",
        trust.notes()
    );
}

#[test]
fn an_unknown_qualifier_fails_closed_for_the_certificates_it_selects_only() {
    let unknown = "http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForAnything";
    let trust = load(&list_xml(
        &format!("{}{}", asi(WEB), qualification(&[unknown], "1.2.3.4.5")),
        "",
    ));
    let issuer = &trust.issuers()[0];
    assert_eq!(
        issuer.approval_for(&leaf(&["1.2.3.4.5"]), CURRENT),
        Err(NotApproved::Qualification(
            qualifications::Refusal::UnknownQualifier {
                uri: unknown.into()
            }
        ))
    );
    assert!(issuer.approval_for(&leaf(&["1.2.3.4.6"]), CURRENT).is_ok());
}

#[test]
fn qc_for_wsa_decides_web_for_the_selected_certificates_of_a_seals_service() {
    let trust = load(&list_xml(
        &format!(
            "{}{}",
            asi(SEALS),
            qualification(&["QCForWSA"], "1.2.3.4.5")
        ),
        "",
    ));
    let issuer = &trust.issuers()[0];
    assert_eq!(
        issuer
            .approval_for(&leaf(&["1.2.3.4.5"]), CURRENT)
            .map(|a| a.kinds),
        Ok(kinds(&[CertKind::Web])),
        "the qualifier decides the kind of the certificates it selects"
    );
    assert_eq!(
        issuer
            .approval_for(&leaf(&["1.2.3.4.6"]), CURRENT)
            .map(|a| a.kinds),
        Ok(kinds(&[CertKind::Seal]))
    );
}

#[test]
fn a_qc_for_esig_certificate_of_a_web_service_is_refused() {
    let trust = load(&list_xml(
        &format!(
            "{}{}",
            asi(WEB),
            qualification(&["QCForESig", "QCWithQSCD"], "1.2.3.4.5")
        ),
        "",
    ));
    assert_eq!(
        trust.issuers()[0].approval_for(&leaf(&["1.2.3.4.5"]), CURRENT),
        Err(NotApproved::Qualification(qualifications::Refusal::ForESig))
    );
}

#[test]
fn qualifications_of_an_earlier_period_apply_to_certificates_issued_then() {
    let trust = load(&list_xml(
        &asi(WEB),
        &format!(
            "{}{}",
            asi(WEB),
            qualification(&["NotQualified"], "1.2.3.4.5")
        ),
    ));
    let issuer = &trust.issuers()[0];
    let cert = leaf(&["1.2.3.4.5"]);
    assert!(issuer.approval_for(&cert, EARLIER).is_err());
    assert!(issuer.approval_for(&cert, CURRENT).is_ok());
}

#[test]
fn at_load_a_list_without_a_sequence_number_or_issued_beyond_the_clock_skew_is_not_used() {
    let parsed = tsl::parse(list_xml("", "").as_bytes()).expect("parses");
    let now = datetime!(2026-01-01 0:00 UTC);
    let mut list = parsed.clone();
    list.sequence_number = Some(7);
    list.issue_date = Some(now + MAX_CLOCK_SKEW);
    assert_eq!(not_admissible(&list, now), None, "within the skew");
    list.issue_date = Some(now + MAX_CLOCK_SKEW + time::Duration::SECOND);
    let why = not_admissible(&list, now).expect("from the future");
    assert!(why.contains("is in the future"), "{why}");
    list.issue_date = Some(now);
    list.sequence_number = None;
    let why = not_admissible(&list, now).expect("no sequence");
    assert!(why.contains("no TSLSequenceNumber"), "{why}");
    // The status of a loaded list records it as the reason it is not used.
    let mut status = ListStatus::new("s", ListRole::Configured, Some("XX"), "xx.xml".into());
    list.next_update = Some(now + time::Duration::days(1));
    status.judge(&list, time::Duration::ZERO, now);
    assert!(
        status
            .problem
            .as_deref()
            .is_some_and(|p| p.contains("no TSLSequenceNumber")),
        "{status:?}"
    );
}
