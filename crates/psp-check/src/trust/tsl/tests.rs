//! Unit tests on small generated lists. The real lists are read in `tests/trusted_list.rs`.

use super::*;
use base64::Engine as _;
use time::macros::datetime;

const WEB: &str = uri::FOR_WEB_SITE_AUTHENTICATION;
const SEALS: &str = uri::FOR_E_SEALS;

/// A freshly generated certificate, Base64 with line breaks every 64 characters (as lists
/// are written).
fn cert_b64() -> (Vec<u8>, String) {
    let key = rcgen::generate_simple_self_signed(vec!["tsl.test".to_owned()])
        .expect("rcgen generates a self-signed certificate");
    let der = key.cert.der().to_vec();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let wrapped = b64
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\n      ");
    (der, wrapped)
}

fn extensions(uris: &[&str]) -> String {
    if uris.is_empty() {
        return String::new();
    }
    let mut s = String::from("<ServiceInformationExtensions>");
    for u in uris {
        s.push_str(&format!(
            r#"<Extension Critical="true"><AdditionalServiceInformation><URI xml:lang="en">{u}</URI></AdditionalServiceInformation></Extension>"#
        ));
    }
    s.push_str("</ServiceInformationExtensions>");
    s
}

fn history_instance(status: &str, starting: &str, uris: &[&str]) -> String {
    format!(
        r#"<ServiceHistoryInstance>
          <ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier>
          <ServiceName><Name xml:lang="en">old name</Name></ServiceName>
          <ServiceDigitalIdentity><DigitalId><X509SKI>AAECAwQ=</X509SKI></DigitalId></ServiceDigitalIdentity>
          <ServiceStatus>{status}</ServiceStatus>
          <StatusStartingTime>{starting}</StatusStartingTime>
          {ext}
        </ServiceHistoryInstance>"#,
        ext = extensions(uris)
    )
}

fn service(
    name: &str,
    cert: &str,
    status: &str,
    starting: &str,
    uris: &[&str],
    history: &[String],
) -> String {
    let history = if history.is_empty() {
        String::new()
    } else {
        format!("<ServiceHistory>{}</ServiceHistory>", history.concat())
    };
    format!(
        r#"<TSPService>
      <ServiceInformation>
        <ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier>
        <ServiceName><Name xml:lang="cs">jméno</Name><Name xml:lang="en">{name}</Name></ServiceName>
        <ServiceDigitalIdentity>
          <DigitalId><X509Certificate>
      {cert}
          </X509Certificate></DigitalId>
          <DigitalId><X509SubjectName>CN=tsl.test</X509SubjectName></DigitalId>
          <DigitalId><X509SKI>AAECAwQ=</X509SKI></DigitalId>
        </ServiceDigitalIdentity>
        <ServiceStatus>{status}</ServiceStatus>
        <StatusStartingTime>{starting}</StatusStartingTime>
        {ext}
      </ServiceInformation>
      {history}
    </TSPService>"#,
        ext = extensions(uris)
    )
}

fn list_with_type(tsl_type: &str, services: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" TSLTag="http://uri.etsi.org/19612/TSLTag">
  <SchemeInformation>
    <TSLVersionIdentifier>5</TSLVersionIdentifier>
    <TSLSequenceNumber>3</TSLSequenceNumber>
    <TSLType>{tsl_type}</TSLType>
    <SchemeTerritory>XX</SchemeTerritory>
    <ListIssueDateTime>2019-01-01T00:00:00Z</ListIssueDateTime>
    <NextUpdate><dateTime>2019-07-01T00:00:00Z</dateTime></NextUpdate>
  </SchemeInformation>
  <TrustServiceProviderList>
    <TrustServiceProvider>
      <TSPInformation><TSPName><Name xml:lang="xx">Nom</Name><Name xml:lang="en">Example TSP</Name></TSPName></TSPInformation>
      <TSPServices>{services}</TSPServices>
    </TrustServiceProvider>
  </TrustServiceProviderList>
  <ds:Signature><ds:KeyInfo><ds:X509Data><ds:X509Certificate>bm90IGEgY2VydA==</ds:X509Certificate></ds:X509Data></ds:KeyInfo></ds:Signature>
</TrustServiceStatusList>"#
    )
}

fn list(services: &str) -> String {
    list_with_type(
        "http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUgeneric",
        services,
    )
}

fn parse_str(xml: &str) -> Result<TrustedList, TslError> {
    parse(xml.as_bytes())
}

#[test]
fn a_service_is_read_with_its_identity_and_current_status() {
    let (der, b64) = cert_b64();
    let xml = list(&service(
        "QWAC CA",
        &b64,
        uri::GRANTED,
        "2018-02-07T11:00:00Z",
        &[WEB],
        &[],
    ));
    let tl = parse_str(&xml).expect("the list parses");
    assert_eq!(tl.territory, "XX");
    assert_eq!(tl.sequence_number, Some(3));
    assert_eq!(tl.issue_date, Some(datetime!(2019-01-01 00:00 UTC)));
    assert_eq!(tl.next_update, Some(datetime!(2019-07-01 00:00 UTC)));
    assert_eq!(tl.tsp_count, 1);
    assert!(!tl.is_list_of_lists());
    assert_eq!(tl.skipped, Vec::<String>::new());
    let [s] = tl.services.as_slice() else {
        panic!("one service expected, got {}", tl.services.len())
    };
    assert_eq!(s.tsp_name, "Example TSP", "the English name is preferred");
    assert_eq!(s.service_name, "QWAC CA");
    assert_eq!(s.service_type, uri::SVCTYPE_CA_QC);
    assert_eq!(s.certificates, vec![der], "Base64 line breaks are stripped");
    assert_eq!(s.subject_key_ids, vec![vec![0, 1, 2, 3, 4]]);
    assert_eq!(s.subject_names, vec!["CN=tsl.test".to_owned()]);
    let current = s.current().expect("a current status");
    assert_eq!(current.status, ServiceStatus::Granted);
    assert_eq!(current.starting, datetime!(2018-02-07 11:00 UTC));
    assert_eq!(current.additional_info, vec![WEB.to_owned()]);
    assert_eq!(current.unread_critical_extensions, Vec::<String>::new());
}

#[test]
fn history_is_current_first_then_newest_first_whatever_the_document_order() {
    let (_, b64) = cert_b64();
    let xml = list(&service(
        "CA",
        &b64,
        uri::WITHDRAWN,
        "2019-01-25T00:00:00Z",
        &[],
        &[
            history_instance(uri::UNDER_SUPERVISION, "2008-06-11T12:00:00Z", &[]),
            history_instance(uri::GRANTED, "2016-06-30T22:00:00Z", &[SEALS]),
        ],
    ));
    let tl = parse_str(&xml).expect("the list parses");
    let s = &tl.services[0];
    let got: Vec<_> = s
        .history
        .iter()
        .map(|p| (p.status.clone(), p.starting))
        .collect();
    assert_eq!(
        got,
        vec![
            (ServiceStatus::Withdrawn, datetime!(2019-01-25 00:00 UTC)),
            (ServiceStatus::Granted, datetime!(2016-06-30 22:00 UTC)),
            (
                ServiceStatus::UnderSupervision,
                datetime!(2008-06-11 12:00 UTC)
            ),
        ]
    );
}

#[test]
fn period_at_picks_the_newest_period_that_has_started() {
    let (_, b64) = cert_b64();
    let xml = list(&service(
        "CA",
        &b64,
        uri::WITHDRAWN,
        "2019-01-25T00:00:00Z",
        &[],
        &[history_instance(
            uri::GRANTED,
            "2016-06-30T22:00:00Z",
            &[SEALS],
        )],
    ));
    let s = &parse_str(&xml).expect("the list parses").services[0];
    assert_eq!(s.period_at(datetime!(2016-06-30 21:59:59 UTC)), None);
    let status_at = |t| s.period_at(t).map(|p| p.status.clone());
    assert_eq!(
        status_at(datetime!(2016-06-30 22:00 UTC)),
        Some(ServiceStatus::Granted)
    );
    assert_eq!(
        status_at(datetime!(2019-01-24 23:59:59 UTC)),
        Some(ServiceStatus::Granted)
    );
    assert_eq!(
        status_at(datetime!(2019-01-25 00:00 UTC)),
        Some(ServiceStatus::Withdrawn)
    );
    assert_eq!(
        status_at(datetime!(2030-01-01 00:00 UTC)),
        Some(ServiceStatus::Withdrawn)
    );
}

#[test]
fn kinds_follow_the_additional_service_information_of_the_period_in_effect() {
    let (_, b64) = cert_b64();
    let xml = list(&service(
        "CA",
        &b64,
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[WEB, uri::FOR_E_SIGNATURES],
        &[history_instance(
            uri::GRANTED,
            "2016-06-30T22:00:00Z",
            &[SEALS],
        )],
    ));
    let s = &parse_str(&xml).expect("the list parses").services[0];
    assert_eq!(
        s.kinds_at(datetime!(2017-01-01 00:00 UTC)),
        ServiceKinds {
            web: false,
            seal: true,
            esign: false
        }
    );
    assert_eq!(
        s.kinds_at(datetime!(2020-01-01 00:00 UTC)),
        ServiceKinds {
            web: true,
            seal: false,
            esign: true
        }
    );
    assert_eq!(
        s.kinds_at(datetime!(2000-01-01 00:00 UTC)),
        ServiceKinds::default()
    );
}

#[test]
fn period_at_does_not_depend_on_the_order_of_a_hand_built_history() {
    let period = |status, starting| StatusPeriod {
        status,
        starting,
        service_type: uri::SVCTYPE_CA_QC.to_owned(),
        additional_info: vec![],
        qualifications: vec![],
        unread_critical_extensions: vec![],
    };
    let s = TslService {
        tsp_name: "t".into(),
        service_name: "s".into(),
        service_type: uri::SVCTYPE_CA_QC.into(),
        certificates: vec![],
        subject_key_ids: vec![],
        subject_names: vec![],
        history: vec![
            period(ServiceStatus::Accredited, datetime!(2010-01-01 00:00 UTC)),
            period(ServiceStatus::Withdrawn, datetime!(2019-01-01 00:00 UTC)),
            period(ServiceStatus::Granted, datetime!(2016-01-01 00:00 UTC)),
        ],
    };
    let status_at = |t| s.period_at(t).map(|p| p.status.clone());
    assert_eq!(
        status_at(datetime!(2017-01-01 00:00 UTC)),
        Some(ServiceStatus::Granted)
    );
    assert_eq!(
        status_at(datetime!(2020-01-01 00:00 UTC)),
        Some(ServiceStatus::Withdrawn)
    );
    assert_eq!(
        status_at(datetime!(2011-01-01 00:00 UTC)),
        Some(ServiceStatus::Accredited)
    );
}

#[test]
fn elements_of_other_namespaces_are_never_taken_for_trusted_list_elements() {
    let (_, b64) = cert_b64();
    // A foreign `ServiceStatus` saying granted next to the real one saying withdrawn, and a
    // foreign `X509Certificate` that is not a certificate inside a `DigitalId`.
    let svc = service("CA", &b64, uri::WITHDRAWN, "2019-01-25T00:00:00Z", &[], &[])
        .replace(
            "<ServiceStatus>",
            &format!(
                r#"<x:ServiceStatus xmlns:x="urn:example:other">{}</x:ServiceStatus><ServiceStatus>"#,
                uri::GRANTED
            ),
        )
        .replace(
            "<DigitalId><X509SKI>",
            r#"<DigitalId><ds:X509Certificate>bm90IGEgY2VydA==</ds:X509Certificate><X509SKI>"#,
        );
    let tl = parse_str(&list(&svc)).expect("the list parses");
    assert_eq!(tl.skipped, Vec::<String>::new());
    assert_eq!(tl.services[0].history[0].status, ServiceStatus::Withdrawn);
    assert_eq!(tl.services[0].certificates.len(), 1);
}

#[test]
fn a_root_element_in_another_namespace_is_not_a_trusted_list() {
    let xml = list("").replace(
        r#"<TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#""#,
        r#"<TrustServiceStatusList xmlns="urn:example:lookalike""#,
    );
    match parse_str(&xml) {
        Err(TslError::NotATrustedList { line, found, .. }) => {
            assert_eq!(line, 2);
            assert_eq!(found, "{urn:example:lookalike}TrustServiceStatusList");
        }
        other => panic!("expected NotATrustedList, got {other:?}"),
    }
    assert!(matches!(
        parse_str("<TrustServiceStatusList/>"),
        Err(TslError::NotATrustedList { .. })
    ));
}

#[test]
fn a_certificate_that_is_not_base64_skips_only_its_service() {
    let (_, b64) = cert_b64();
    let good = service(
        "good CA",
        &b64,
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[],
        &[],
    );
    let bad = service(
        "bad CA",
        &format!("*{b64}"),
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[],
        &[],
    );
    let tl = parse_str(&list(&format!("{bad}{good}"))).expect("the list still parses");
    assert_eq!(tl.services.len(), 1);
    assert_eq!(tl.services[0].service_name, "good CA");
    let [note] = tl.skipped.as_slice() else {
        panic!("one note expected: {:?}", tl.skipped)
    };
    assert!(note.contains("\"bad CA\""), "{note}");
    assert!(note.contains("X509Certificate: not Base64"), "{note}");
    assert!(note.contains("line 19"), "{note}");
}

#[test]
fn base64_that_is_not_a_certificate_skips_its_service() {
    let svc = service(
        "CA",
        "bm90IGEgY2VydA==",
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[],
        &[],
    );
    let tl = parse_str(&list(&svc)).expect("the list still parses");
    assert!(tl.services.is_empty());
    assert!(
        tl.skipped[0].contains("not a DER X.509 certificate"),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn a_certificate_followed_by_extra_bytes_skips_its_service() {
    let (mut der, _) = cert_b64();
    der.extend_from_slice(b"extra");
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let svc = service("CA", &b64, uri::GRANTED, "2019-01-25T00:00:00Z", &[], &[]);
    let tl = parse_str(&list(&svc)).expect("the list still parses");
    assert!(tl.services.is_empty());
    assert!(tl.skipped[0].contains("5 bytes follow"), "{:?}", tl.skipped);
}

#[test]
fn an_unparseable_status_time_in_the_history_skips_the_whole_service() {
    let (_, b64) = cert_b64();
    let svc = service(
        "CA",
        &b64,
        uri::WITHDRAWN,
        "2019-01-25T00:00:00Z",
        &[],
        &[history_instance(uri::GRANTED, "30.6.2016", &[])],
    );
    let tl = parse_str(&list(&svc)).expect("the list still parses");
    assert!(
        tl.services.is_empty(),
        "a service with a lost period would mislead period_at"
    );
    assert!(
        tl.skipped[0].contains("StatusStartingTime"),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn a_history_entry_later_than_the_current_status_skips_the_service() {
    let (_, b64) = cert_b64();
    let svc = service(
        "CA",
        &b64,
        uri::WITHDRAWN,
        "2016-06-30T22:00:00Z",
        &[],
        &[history_instance(uri::GRANTED, "2019-01-25T00:00:00Z", &[])],
    );
    let tl = parse_str(&list(&svc)).expect("the list still parses");
    assert!(tl.services.is_empty());
    assert!(
        tl.skipped[0].contains("later than the current status"),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn a_duplicated_service_status_is_ambiguous_and_skips_the_service() {
    let (_, b64) = cert_b64();
    let svc = service("CA", &b64, uri::WITHDRAWN, "2019-01-25T00:00:00Z", &[], &[]).replace(
        "<StatusStartingTime>",
        &format!(
            "<ServiceStatus>{}</ServiceStatus><StatusStartingTime>",
            uri::GRANTED
        ),
    );
    let tl = parse_str(&list(&svc)).expect("the list still parses");
    assert!(tl.services.is_empty());
    assert!(
        tl.skipped[0].contains("ServiceInformation has more than one ServiceStatus"),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn a_provider_without_a_name_is_noted_and_its_services_skipped() {
    let (_, b64) = cert_b64();
    let svc = service("CA", &b64, uri::GRANTED, "2019-01-25T00:00:00Z", &[], &[]);
    let xml = list(&svc).replace(
        r#"<TSPName><Name xml:lang="xx">Nom</Name><Name xml:lang="en">Example TSP</Name></TSPName>"#,
        "<TSPName/>",
    );
    let tl = parse_str(&xml).expect("the list still parses");
    assert_eq!(tl.tsp_count, 1);
    assert!(tl.services.is_empty());
    assert!(
        tl.skipped[0].contains("TSPName has no Name"),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn critical_extensions_that_are_not_read_are_recorded() {
    let (_, b64) = cert_b64();
    let svc = service(
        "CA",
        &b64,
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[WEB],
        &[],
    )
    .replace(
        "</ServiceInformationExtensions>",
        r#"<Extension Critical="true"><q:Qualifications xmlns:q="urn:example:q"/></Extension>
           <Extension Critical="false"><q:Ignored xmlns:q="urn:example:q"/></Extension>
           </ServiceInformationExtensions>"#,
    );
    let tl = parse_str(&list(&svc)).expect("the list parses");
    let p = &tl.services[0].history[0];
    assert_eq!(p.additional_info, vec![WEB.to_owned()]);
    assert_eq!(
        p.unread_critical_extensions,
        vec!["{urn:example:q}Qualifications".to_owned()]
    );
}

#[test]
fn an_unparseable_list_issue_date_makes_the_list_invalid() {
    let xml = list("").replace("2019-01-01T00:00:00Z", "1 January 2019");
    match parse_str(&xml) {
        Err(TslError::Invalid { line, msg, .. }) => {
            assert_eq!(line, 8);
            assert!(
                msg.starts_with("ListIssueDateTime: `1 January 2019`"),
                "{msg}"
            );
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn an_unreadable_sequence_number_makes_the_list_invalid() {
    let xml = list("").replace("<TSLSequenceNumber>3<", "<TSLSequenceNumber>three<");
    assert!(matches!(
        parse_str(&xml),
        Err(TslError::Invalid { line: 5, .. })
    ));
}

#[test]
fn a_list_without_a_territory_is_invalid() {
    let xml = list("").replace("<SchemeTerritory>XX</SchemeTerritory>", "");
    match parse_str(&xml) {
        Err(TslError::Invalid { msg, .. }) => {
            assert_eq!(msg, "SchemeInformation has no SchemeTerritory");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn a_second_scheme_territory_makes_the_list_invalid() {
    let xml = list("").replace(
        "<SchemeTerritory>XX</SchemeTerritory>",
        "<SchemeTerritory>XX</SchemeTerritory><SchemeTerritory>YY</SchemeTerritory>",
    );
    assert!(matches!(parse_str(&xml), Err(TslError::Invalid { .. })));
}

#[test]
fn an_empty_next_update_means_a_closed_list() {
    let xml = list("").replace(
        "<NextUpdate><dateTime>2019-07-01T00:00:00Z</dateTime></NextUpdate>",
        "<NextUpdate/>",
    );
    let tl = parse_str(&xml).expect("a closed list parses");
    assert_eq!(tl.next_update, None);
}

#[test]
fn a_list_of_the_lists_yields_no_services_even_if_it_has_providers() {
    let (_, b64) = cert_b64();
    let svc = service("CA", &b64, uri::GRANTED, "2019-01-25T00:00:00Z", &[], &[]);
    let xml = list_with_type(
        "http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUlistofthelists",
        &svc,
    );
    let tl = parse_str(&xml).expect("the list of the lists parses");
    assert!(tl.is_list_of_lists());
    assert!(tl.services.is_empty());
    assert_eq!(tl.tsp_count, 0);
    assert!(
        tl.skipped
            .iter()
            .any(|n| n.contains("TrustServiceProviderList at line 11 ignored")),
        "{:?}",
        tl.skipped
    );
}

#[test]
fn a_document_type_declaration_is_refused() {
    let xml = list("").replacen(
        "\n<TrustServiceStatusList",
        "\n<!DOCTYPE TrustServiceStatusList [<!ENTITY x \"granted\">]>\n<TrustServiceStatusList",
        1,
    );
    assert_eq!(
        parse_str(&xml),
        Err(TslError::DtdRefused { line: 2, col: 1 })
    );
}

#[test]
fn input_over_the_size_cap_is_refused_before_parsing() {
    let big = vec![b' '; MAX_TSL_BYTES + 1];
    assert_eq!(
        parse(&big),
        Err(TslError::TooLarge {
            what: "input size in bytes",
            limit: MAX_TSL_BYTES
        })
    );
}

#[test]
fn too_many_xml_nodes_are_refused() {
    // Comments are nodes, and no element budget of `shape` counts them.
    let xml = format!("<r>{}</r>", "<!---->".repeat(MAX_XML_NODES as usize));
    assert!(xml.len() <= MAX_TSL_BYTES);
    assert!(matches!(
        parse_str(&xml),
        Err(TslError::TooLarge {
            what: "number of XML nodes",
            ..
        })
    ));
}

#[test]
fn bytes_that_are_not_utf8_are_not_xml_and_the_position_is_given() {
    let mut bytes = b"<?xml version=\"1.0\"?>\n<TrustServiceStatusList>\n  abc".to_vec();
    bytes.push(0xFF);
    match parse(&bytes) {
        Err(TslError::NotXml { line, col, msg }) => {
            assert_eq!((line, col), (3, 6));
            assert!(msg.contains("UTF-8"), "{msg}");
        }
        other => panic!("expected NotXml, got {other:?}"),
    }
}

#[test]
fn truncated_xml_is_reported_at_the_end_of_the_input() {
    let xml = list("");
    let cut = &xml[..xml.find("<TSLType>").expect("has TSLType")];
    match parse_str(cut) {
        Err(TslError::NotXml { line, .. }) => assert_eq!(line, 6),
        other => panic!("expected NotXml, got {other:?}"),
    }
    assert!(matches!(
        parse(b""),
        Err(TslError::NotXml {
            line: 1,
            col: 1,
            ..
        })
    ));
}

#[test]
fn statuses_known_before_and_after_eidas_are_named_and_round_trip() {
    for (u, s, active) in [
        (uri::GRANTED, ServiceStatus::Granted, true),
        (uri::WITHDRAWN, ServiceStatus::Withdrawn, false),
        (
            uri::UNDER_SUPERVISION,
            ServiceStatus::UnderSupervision,
            true,
        ),
        (
            uri::SUPERVISION_IN_CESSATION,
            ServiceStatus::SupervisionInCessation,
            true,
        ),
        (uri::ACCREDITED, ServiceStatus::Accredited, true),
        (
            uri::SET_BY_NATIONAL_LAW,
            ServiceStatus::SetByNationalLaw,
            false,
        ),
    ] {
        let parsed = ServiceStatus::from_uri(u);
        assert_eq!(parsed, s);
        assert_eq!(parsed.uri(), u);
        assert_eq!(parsed.is_active(), active, "{u}");
    }
}

#[test]
fn other_status_uris_are_kept_and_never_active() {
    for u in [
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/supervisionceased",
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/accreditationrevoked",
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/recognisedatnationallevel",
        "http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/Granted",
        "http://uri.etsi.org/TrstSvc/eSigDir-1999-93-EC-TrustedList/Svcstatus/undersupervision",
    ] {
        let s = ServiceStatus::from_uri(u);
        assert_eq!(s, ServiceStatus::Other(u.to_owned()));
        assert_eq!(s.uri(), u);
        assert!(!s.is_active(), "{u}");
    }
}

/// The `ecc:` namespace the real lists use for `Qualifications`.
const ECC: &str = "http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/#";

/// A service granted for web with `extension` (one `<Extension>`) added to its current status.
fn service_with_extension(extension: &str) -> String {
    let (_, b64) = cert_b64();
    service(
        "CA",
        &b64,
        uri::GRANTED,
        "2019-01-25T00:00:00Z",
        &[WEB],
        &[history_instance(
            uri::GRANTED,
            "2016-06-30T22:00:00Z",
            &[SEALS],
        )],
    )
    .replacen(
        "</ServiceInformationExtensions>",
        &format!("{extension}</ServiceInformationExtensions>"),
        1,
    )
}

fn qualifications_extension(critical: bool, elements: &str) -> String {
    format!(
        r#"<Extension Critical="{critical}"><ecc:Qualifications xmlns:ecc="{ECC}" xmlns:xades="http://uri.etsi.org/01903/v1.3.2#" xmlns:tslx="http://uri.etsi.org/02231/v2/additionaltypes#">{elements}</ecc:Qualifications></Extension>"#
    )
}

#[test]
fn qualifications_are_read_with_every_criterion_kind_and_nesting() {
    use crate::trust::qualifications::{
        Assert, CriteriaList, Criterion, KeyUsageBit, Qualification, Qualifier,
    };
    let ext = qualifications_extension(
        true,
        r#"<ecc:QualificationElement>
             <ecc:Qualifiers>
               <ecc:Qualifier uri="http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForWSA"/>
               <ecc:Qualifier uri=" http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCWithQSCD "/>
             </ecc:Qualifiers>
             <ecc:CriteriaList assert="all">
               <ecc:KeyUsage>
                 <ecc:KeyUsageBit name="digitalSignature">true</ecc:KeyUsageBit>
                 <ecc:KeyUsageBit name="nonRepudiation">0</ecc:KeyUsageBit>
               </ecc:KeyUsage>
               <ecc:PolicySet>
                 <ecc:PolicyIdentifier><xades:Identifier Qualifier="OIDAsURN">urn:oid:1.2.3.4</xades:Identifier></ecc:PolicyIdentifier>
                 <ecc:PolicyIdentifier><xades:Identifier>0.4.0.194112.1.4</xades:Identifier></ecc:PolicyIdentifier>
               </ecc:PolicySet>
               <ecc:CriteriaList assert="none">
                 <ecc:PolicySet><ecc:PolicyIdentifier><xades:Identifier>1.2.3.5</xades:Identifier></ecc:PolicyIdentifier></ecc:PolicySet>
               </ecc:CriteriaList>
               <ecc:Description>people read this</ecc:Description>
               <ecc:otherCriteriaList>
                 <tslx:CertSubjectDNAttribute><tslx:AttributeOID><xades:Identifier>2.5.4.97</xades:Identifier></tslx:AttributeOID></tslx:CertSubjectDNAttribute>
                 <tslx:ExtendedKeyUsage><tslx:KeyPurposeId><xades:Identifier>1.3.6.1.5.5.7.3.1</xades:Identifier></tslx:KeyPurposeId></tslx:ExtendedKeyUsage>
                 <x:Mystery xmlns:x="urn:example:x"/>
               </ecc:otherCriteriaList>
               <ecc:PolicySet><ecc:PolicyIdentifier><xades:Identifier>http://example.com/policy</xades:Identifier></ecc:PolicyIdentifier></ecc:PolicySet>
             </ecc:CriteriaList>
           </ecc:QualificationElement>"#,
    );
    let tl = parse_str(&list(&service_with_extension(&ext))).expect("the list parses");
    assert_eq!(tl.skipped, Vec::<String>::new());
    let current = &tl.services[0].history[0];
    assert_eq!(current.unread_critical_extensions, Vec::<String>::new());
    assert_eq!(current.additional_info, vec![WEB.to_owned()]);
    assert_eq!(
        current.qualifications,
        vec![Qualification {
            qualifiers: vec![Qualifier::QcForWsa, Qualifier::QcWithQscd],
            criteria: CriteriaList {
                assert: Assert::All,
                criteria: vec![
                    Criterion::KeyUsage(vec![
                        (KeyUsageBit::DigitalSignature, true),
                        (KeyUsageBit::NonRepudiation, false),
                    ]),
                    Criterion::PolicySet(vec!["1.2.3.4".into(), "0.4.0.194112.1.4".into()]),
                    Criterion::List(CriteriaList {
                        assert: Assert::None,
                        criteria: vec![Criterion::PolicySet(vec!["1.2.3.5".into()])],
                    }),
                    Criterion::SubjectDnAttributes(vec!["2.5.4.97".into()]),
                    Criterion::ExtendedKeyUsage(vec!["1.3.6.1.5.5.7.3.1".into()]),
                    Criterion::NotUnderstood("{urn:example:x}Mystery".into()),
                    Criterion::NotUnderstood(
                        "PolicySet with an identifier that is not an OID".into()
                    ),
                ],
            },
        }]
    );
    assert_eq!(
        tl.services[0].history[1].qualifications,
        vec![],
        "a period's qualifications are its own"
    );
}

#[test]
fn qualifications_in_a_look_alike_namespace_stay_unread_and_critical() {
    let ext = r#"<Extension Critical="true"><q:Qualifications xmlns:q="http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/"><q:QualificationElement/></q:Qualifications></Extension>"#;
    let tl = parse_str(&list(&service_with_extension(ext))).expect("the list parses");
    let current = &tl.services[0].history[0];
    assert!(current.qualifications.is_empty());
    assert_eq!(
        current.unread_critical_extensions,
        vec![
            "{http://uri.etsi.org/TrstSvc/SvcInfoExt/eSigDir-1999-93-EC-TrustedList/}Qualifications"
                .to_owned()
        ]
    );
}

#[test]
fn a_structurally_broken_qualifications_extension_skips_its_service() {
    let element = |qualifiers: &str, assert: &str| {
        format!(
            r#"<ecc:QualificationElement><ecc:Qualifiers>{qualifiers}</ecc:Qualifiers><ecc:CriteriaList assert="{assert}"/></ecc:QualificationElement>"#
        )
    };
    let ok_qualifier =
        r#"<ecc:Qualifier uri="http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/NotQualified"/>"#;
    let nested = (0..9).fold(String::new(), |inner, _| {
        format!(r#"<ecc:CriteriaList assert="all">{inner}</ecc:CriteriaList>"#)
    });
    let cases = [
        (element(ok_qualifier, "some"), "CriteriaList assert"),
        (element(ok_qualifier, "ALL"), "CriteriaList assert"),
        (
            element(r#"<ecc:Qualifier/>"#, "all"),
            "Qualifier has no uri",
        ),
        (element("", "all"), "Qualifiers has no Qualifier"),
        (
            element(
                r#"<x:Qualifier xmlns:x="urn:x" uri="http://uri.etsi.org/TrstSvc/TrustedList/SvcInfoExt/QCForWSA"/>"#,
                "all",
            ),
            "not a Qualifier",
        ),
        (String::new(), "Qualifications has no QualificationElement"),
        (
            format!(
                r#"<ecc:QualificationElement><ecc:Qualifiers>{ok_qualifier}</ecc:Qualifiers>{nested}</ecc:QualificationElement>"#
            ),
            "nested deeper than 8",
        ),
        (
            format!(
                r#"<ecc:QualificationElement><ecc:Qualifiers>{ok_qualifier}</ecc:Qualifiers><ecc:CriteriaList assert="all"><ecc:KeyUsage><ecc:KeyUsageBit name="crlSign">yes</ecc:KeyUsageBit></ecc:KeyUsage></ecc:CriteriaList></ecc:QualificationElement>"#
            ),
            "is not a boolean",
        ),
    ];
    for (elements, expected) in cases {
        // Non-critical too: a Qualifications that is read must be read whole.
        let ext = qualifications_extension(false, &elements);
        let tl = parse_str(&list(&service_with_extension(&ext))).expect("the list parses");
        assert!(tl.services.is_empty(), "{expected}: {:?}", tl.services);
        assert!(
            tl.skipped[0].contains(expected),
            "{expected}: {:?}",
            tl.skipped
        );
    }
}

#[test]
fn eight_levels_of_criteria_lists_are_read() {
    let nested = (0..7).fold(String::new(), |inner, _| {
        format!(r#"<ecc:CriteriaList assert="all">{inner}</ecc:CriteriaList>"#)
    });
    let ext = qualifications_extension(
        true,
        &format!(
            r#"<ecc:QualificationElement><ecc:Qualifiers><ecc:Qualifier uri="urn:x"/></ecc:Qualifiers><ecc:CriteriaList assert="all">{nested}</ecc:CriteriaList></ecc:QualificationElement>"#
        ),
    );
    let tl = parse_str(&list(&service_with_extension(&ext))).expect("the list parses");
    assert_eq!(tl.skipped, Vec::<String>::new());
    assert_eq!(tl.services[0].history[0].qualifications.len(), 1);
}
