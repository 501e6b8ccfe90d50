//! Real ETSI TS 119 612 trusted lists (`shared/data/trusted-lists/`, from the esig/dss test
//! resources) read by `psp_service::trust::tsl::parse`. Expected values were read off the
//! XML files themselves; the XML signatures are not checked here (that is a later module).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use psp_service::trust::qualifications::{
    Assert, CriteriaList, Criterion, Qualification, Qualifier,
};
use psp_service::trust::tsl::{
    self, ServiceKinds, ServiceStatus, TrustedList, TslError, TslService,
};
use time::macros::datetime;

/// `shared/data` next to the repository, or `/work/shared/data` when the repository is a
/// copy elsewhere.
fn data_dir() -> PathBuf {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    let fixed = PathBuf::from("/work/shared/data");
    for dir in [&beside, &fixed] {
        if dir.join("trusted-lists").is_dir() {
            return dir.clone();
        }
    }
    panic!(
        "test data not found: neither {} nor {} holds trusted-lists/",
        beside.display(),
        fixed.display()
    );
}

fn read(relative: &str) -> Vec<u8> {
    let path = data_dir().join(relative);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn parse_file(name: &str) -> TrustedList {
    let bytes = read(&format!("trusted-lists/{name}"));
    tsl::parse(&bytes).unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
}

fn pem_der(relative: &str) -> Vec<u8> {
    let pem = String::from_utf8(read(relative)).expect("PEM is text");
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .expect("PEM body is Base64")
}

fn service<'a>(tl: &'a TrustedList, name: &str) -> &'a TslService {
    let mut found = tl.services.iter().filter(|s| s.service_name == name);
    let s = found
        .next()
        .unwrap_or_else(|| panic!("no service named {name:?}"));
    assert!(
        found.next().is_none(),
        "more than one service named {name:?}"
    );
    s
}

fn status_at(s: &TslService, t: time::OffsetDateTime) -> Option<ServiceStatus> {
    s.period_at(t).map(|p| p.status.clone())
}

const CZ: &str = "CZ-tl_seq77_2019-08-23.xml";
const CZ_BROKEN_SIG: &str = "CZ-tl_seq77_broken-sig.xml";
const IE: &str = "IE-tl_seq17_2019-07-29.xml";
const ICA_QWAC_SERVICE: &str =
    "(104) I.CA - issuing qualified certificates for website authentication";
const ICA_TSA_SERVER_1: &str = "(10) I.CA - Qualified Time Stamping Authority, Time Stamp Server 1";

#[test]
fn the_czech_list_header_and_counts_are_those_in_the_file() {
    let tl = parse_file(CZ);
    assert_eq!(tl.territory, "CZ");
    assert_eq!(tl.sequence_number, Some(77));
    assert_eq!(
        tl.tsl_type.as_deref(),
        Some("http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUgeneric")
    );
    assert_eq!(tl.issue_date, Some(datetime!(2019-08-23 08:00 UTC)));
    assert_eq!(tl.next_update, Some(datetime!(2020-02-23 00:00 UTC)));
    assert!(!tl.is_list_of_lists());
    assert_eq!(tl.tsp_count, 6);
    assert_eq!(tl.services.len(), 133);
    assert_eq!(
        tl.skipped,
        Vec::<String>::new(),
        "nothing in the real list is skipped"
    );

    let mut per_tsp: Vec<(&str, usize)> = Vec::new();
    for s in &tl.services {
        match per_tsp.last_mut() {
            Some((name, n)) if *name == s.tsp_name => *n += 1,
            _ => per_tsp.push((&s.tsp_name, 1)),
        }
    }
    assert_eq!(
        per_tsp,
        vec![
            ("First certification authority, a.s.", 33),
            ("The Czech Post, s.p.", 71),
            ("eIdentity a.s.", 15),
            ("Software602 a.s.", 6),
            ("National Registers Authority", 7),
            ("SEFIRA spol. s r.o.", 1),
        ]
    );
}

#[test]
fn every_czech_service_has_its_certificate_and_the_statuses_add_up() {
    let tl = parse_file(CZ);
    let certificates: usize = tl.services.iter().map(|s| s.certificates.len()).sum();
    assert_eq!(certificates, 133, "one X509Certificate per service");
    let current = |status: ServiceStatus| {
        tl.services
            .iter()
            .filter(|s| s.current().map(|p| &p.status) == Some(&status))
            .count()
    };
    assert_eq!(current(ServiceStatus::Granted), 74);
    assert_eq!(current(ServiceStatus::Withdrawn), 59);
    let history_instances: usize = tl.services.iter().map(|s| s.history.len() - 1).sum();
    assert_eq!(history_instances, 74);
    assert_eq!(
        tl.services.iter().filter(|s| s.history.len() > 1).count(),
        71
    );
    for s in &tl.services {
        assert!(
            s.history.windows(2).all(|w| w[0].starting >= w[1].starting),
            "{} history is newest first",
            s.service_name
        );
    }
}

#[test]
fn the_ica_qwac_issuing_service_is_a_granted_qualified_ca_for_website_authentication() {
    let tl = parse_file(CZ);
    let s = service(&tl, ICA_QWAC_SERVICE);
    assert_eq!(s.tsp_name, "First certification authority, a.s.");
    assert_eq!(s.service_type, "http://uri.etsi.org/TrstSvc/Svctype/CA/QC");
    assert_eq!(
        s.certificates,
        vec![pem_der("psd2-certs/ica_ssl_ev_ca_rsa_10_2017.pem")],
        "the listed certificate is the I.CA SSL EV CA/RSA 10/2017 from the PSD2 corpus"
    );
    let (_, cert) = x509_parser::parse_x509_certificate(&s.certificates[0])
        .expect("the listed certificate is X.509");
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok());
    assert_eq!(cn, Some("I.CA SSL EV CA/RSA 10/2017"));
    assert_eq!(
        s.subject_key_ids,
        vec![
            base64::engine::general_purpose::STANDARD
                .decode("Pa8ZCJd6EIy8KMFGbZdIWkj8Aso=")
                .expect("Base64")
        ]
    );

    // Granted since 2018-02-07T11:00:00Z, no history.
    assert_eq!(s.history.len(), 1);
    let current = &s.history[0];
    assert_eq!(current.status, ServiceStatus::Granted);
    assert_eq!(current.starting, datetime!(2018-02-07 11:00 UTC));
    for t in [
        datetime!(2020-01-15 00:00 UTC),
        datetime!(2019-12-17 00:00 UTC),
    ] {
        let p = s.period_at(t).expect("a period is in effect");
        assert_eq!(p.status, ServiceStatus::Granted);
        assert!(p.status.is_active());
    }
    assert_eq!(s.period_at(datetime!(2018-02-07 10:59:59 UTC)), None);

    assert_eq!(
        s.kinds_at(datetime!(2020-01-15 00:00 UTC)),
        ServiceKinds {
            web: true,
            seal: false,
            esign: false
        }
    );
    // The critical Qualifications extension is read: QCQSCDStatusAsInCert for a certificate
    // with at least one of three I.CA policies. Nothing critical is left unread.
    assert_eq!(current.unread_critical_extensions, Vec::<String>::new());
    let policy = |oid: &str| Criterion::PolicySet(vec![oid.to_owned()]);
    assert_eq!(
        current.qualifications,
        vec![Qualification {
            qualifiers: vec![Qualifier::QcQscdStatusAsInCert],
            criteria: CriteriaList {
                assert: Assert::AtLeastOne,
                criteria: vec![
                    policy("1.3.6.1.4.1.23624.10.1.35.1.0"),
                    policy("1.3.6.1.4.1.23624.10.1.40.1.0"),
                    policy("1.3.6.1.4.1.23624.10.1.40.1.1"),
                ],
            },
        }]
    );
}

#[test]
fn a_withdrawn_czech_timestamp_service_was_accredited_until_its_withdrawal() {
    let tl = parse_file(CZ);
    let s = service(&tl, ICA_TSA_SERVER_1);
    assert_eq!(
        s.service_type,
        "http://uri.etsi.org/TrstSvc/Svctype/TSA/QTST"
    );
    assert_eq!(status_at(s, datetime!(2007-10-04 11:59:59 UTC)), None);
    assert_eq!(
        status_at(s, datetime!(2007-10-04 12:00 UTC)),
        Some(ServiceStatus::Accredited)
    );
    let before = s
        .period_at(datetime!(2016-06-30 21:59:59 UTC))
        .expect("accredited then");
    assert_eq!(before.status, ServiceStatus::Accredited);
    assert!(
        before.status.is_active(),
        "pre-eIDAS accredited counts as active"
    );
    let after = s
        .period_at(datetime!(2016-06-30 22:00 UTC))
        .expect("withdrawn since");
    assert_eq!(after.status, ServiceStatus::Withdrawn);
    assert!(!after.status.is_active());
    assert_eq!(
        status_at(s, datetime!(2019-12-17 00:00 UTC)),
        Some(ServiceStatus::Withdrawn)
    );
}

#[test]
fn the_broken_signature_copy_regrants_exactly_the_one_withdrawn_service_it_changed() {
    let original = parse_file(CZ);
    let tampered = parse_file(CZ_BROKEN_SIG);
    assert_eq!(original.services.len(), tampered.services.len());
    let changed: Vec<(&TslService, &TslService)> = original
        .services
        .iter()
        .zip(&tampered.services)
        .filter(|(a, b)| a != b)
        .collect();
    let [(before, after)] = changed.as_slice() else {
        panic!("exactly one service should differ, {} do", changed.len())
    };
    // Line 586 of the file is this service's current ServiceStatus.
    assert_eq!(before.service_name, ICA_TSA_SERVER_1);
    let t = datetime!(2019-12-17 00:00 UTC);
    assert_eq!(status_at(before, t), Some(ServiceStatus::Withdrawn));
    assert_eq!(status_at(after, t), Some(ServiceStatus::Granted));
    assert_eq!(
        before.history[1..],
        after.history[1..],
        "the history is untouched"
    );
}

#[test]
fn the_irish_list_header_and_services_are_those_in_the_file() {
    let tl = parse_file(IE);
    assert_eq!(tl.territory, "IE");
    assert_eq!(tl.sequence_number, Some(17));
    assert_eq!(tl.issue_date, Some(datetime!(2019-07-29 01:00 UTC)));
    assert_eq!(tl.next_update, Some(datetime!(2020-01-29 00:00 UTC)));
    assert_eq!(tl.tsp_count, 3);
    assert_eq!(tl.skipped, Vec::<String>::new());
    let names: Vec<(&str, &str)> = tl
        .services
        .iter()
        .map(|s| (s.tsp_name.as_str(), s.service_name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (
                "Post.Trust Ltd",
                "Post.Trust Ltd - qualified certificate service"
            ),
            (
                "Adobe Systems Software Ireland Ltd.",
                "Adobe Qualified Timestamp CA"
            ),
            ("TrustPro QTSP Ltd", "TrustPro QCP-n"),
            ("TrustPro QTSP Ltd", "TrustPro QCP-l"),
        ]
    );
    let t = datetime!(2019-12-01 00:00 UTC);
    assert_eq!(
        service(&tl, "TrustPro QCP-n").kinds_at(t),
        ServiceKinds {
            web: false,
            seal: false,
            esign: true
        }
    );
    assert_eq!(
        service(&tl, "TrustPro QCP-l").kinds_at(t),
        ServiceKinds {
            web: false,
            seal: true,
            esign: false
        }
    );
}

#[test]
fn the_irish_post_trust_history_runs_from_supervision_through_granted_to_withdrawn() {
    let tl = parse_file(IE);
    let s = service(&tl, "Post.Trust Ltd - qualified certificate service");
    let history: Vec<_> = s
        .history
        .iter()
        .map(|p| (p.status.clone(), p.starting))
        .collect();
    assert_eq!(
        history,
        vec![
            (ServiceStatus::Withdrawn, datetime!(2019-01-25 00:00 UTC)),
            (ServiceStatus::Granted, datetime!(2016-06-30 22:00 UTC)),
            (
                ServiceStatus::UnderSupervision,
                datetime!(2008-06-11 12:00 UTC)
            ),
        ]
    );
    let in_2010 = s
        .period_at(datetime!(2010-01-01 00:00 UTC))
        .expect("listed in 2010");
    assert!(
        in_2010.status.is_active(),
        "undersupervision is a pre-eIDAS active status"
    );
    assert!(s.kinds_at(datetime!(2017-01-01 00:00 UTC)).esign);
    assert!(
        !s.period_at(datetime!(2019-06-01 00:00 UTC))
            .expect("listed")
            .status
            .is_active()
    );
}

#[test]
fn the_lists_of_the_lists_parse_with_no_services() {
    for (file, sequence, pointers) in [
        ("eu-lotl_seq248_2019-09-04.xml", 248, 44),
        ("eu-lotl_seq341_2024-05-31.xml", 341, 43),
    ] {
        let tl = parse_file(file);
        assert_eq!(tl.territory, "EU", "{file}");
        assert_eq!(tl.sequence_number, Some(sequence), "{file}");
        assert!(tl.is_list_of_lists(), "{file}");
        assert!(tl.services.is_empty(), "{file}");
        assert_eq!(tl.tsp_count, 0, "{file}");
        assert!(tl.skipped.is_empty(), "{file}: {:?}", tl.skipped);
        assert_eq!(tl.pointers.len(), pointers, "{file}");
        // The pointer to the LOTL itself names the keys that may sign the next LOTL.
        let own = &tl.pointers[0];
        assert!(own.is_list_of_lists() && own.is_xml(), "{file}");
        assert_eq!(own.territory.as_deref(), Some("EU"));
        assert_eq!(own.location, "https://ec.europa.eu/tools/lotl/eu-lotl.xml");
        // Every Member State's XML list is pointed to with the certificates that may sign it.
        let cz = tl
            .pointers
            .iter()
            .find(|p| p.territory.as_deref() == Some("CZ") && p.is_xml())
            .expect("a CZ pointer");
        assert!(!cz.certificates.is_empty(), "{file}");
        // Some pointers name a PDF rendering; they are read but are not the XML list.
        assert!(
            tl.pointers.iter().all(|p| p.territory.is_some()),
            "{file}: every pointer names its territory"
        );
    }
}

#[test]
fn a_truncated_list_is_not_xml_and_the_error_gives_the_line_where_it_ends() {
    let bytes = read(&format!("trusted-lists/{CZ}"));
    let text = std::str::from_utf8(&bytes).expect("UTF-8");
    let close = "</TSPService>";
    let cut = text[text.len() / 2..]
        .find(close)
        .map(|i| text.len() / 2 + i + close.len())
        .expect("a service ends after the middle");
    let prefix = &bytes[..cut];
    let last_line =
        u32::try_from(prefix.iter().filter(|&&b| b == b'\n').count() + 1).expect("fits");
    match tsl::parse(prefix) {
        Err(TslError::NotXml { line, .. }) => {
            assert!(line > 1000, "the end of the input is far into the file");
            assert_eq!(line, last_line);
        }
        other => panic!("expected NotXml, got {other:?}"),
    }
}

#[test]
fn bytes_that_are_not_xml_are_refused() {
    let ie = read(&format!("trusted-lists/{IE}"));
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(
            std::str::from_utf8(&ie[..200])
                .expect("ASCII prefix")
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        )
        .collect();
    for bytes in [
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
        b"hello, world".to_vec(),
        b"{\"TrustServiceStatusList\": {}}".to_vec(),
        b"   ".to_vec(),
        utf16,
    ] {
        match tsl::parse(&bytes) {
            Err(TslError::NotXml { line, col, .. }) => assert!(line >= 1 && col >= 1),
            other => panic!("expected NotXml for {:?}, got {other:?}", &bytes[..4]),
        }
    }
}

#[test]
fn an_html_error_page_is_not_a_trusted_list() {
    let page = b"<!-- served instead of the list -->\n<html><body><h1>503</h1></body></html>";
    match tsl::parse(page) {
        Err(TslError::NotATrustedList { line, col, found }) => {
            assert_eq!((line, col), (2, 1));
            assert_eq!(found, "html (no namespace)");
        }
        other => panic!("expected NotATrustedList, got {other:?}"),
    }
}

#[test]
fn a_bad_base64_certificate_in_the_irish_list_skips_only_that_service() {
    let ie = String::from_utf8(read(&format!("trusted-lists/{IE}"))).expect("UTF-8");
    // Damage the first X509Certificate after Post.Trust's service name (the ones before it
    // are in the pointer to the list of the lists); `!` is not in the Base64 alphabet.
    let at = ie
        .find("Post.Trust Ltd - qualified certificate service")
        .expect("Post.Trust service is listed");
    let damaged = format!(
        "{}{}",
        &ie[..at],
        ie[at..].replacen("<X509Certificate>MII", "<X509Certificate>!II", 1)
    );
    assert_ne!(damaged, ie);
    let tl = tsl::parse(damaged.as_bytes()).expect("the rest of the list still parses");
    assert_eq!(tl.services.len(), 3);
    assert!(
        tl.services
            .iter()
            .all(|s| s.service_name != "Post.Trust Ltd - qualified certificate service")
    );
    let [note] = tl.skipped.as_slice() else {
        panic!("one note expected: {:?}", tl.skipped)
    };
    assert!(
        note.contains("Post.Trust Ltd - qualified certificate service"),
        "{note}"
    );
    assert!(note.contains("line 152"), "{note}");
    assert!(note.contains("not Base64"), "{note}");
}

#[test]
fn truncating_or_corrupting_the_irish_list_anywhere_never_panics() {
    let ie = read(&format!("trusted-lists/{IE}"));
    let lines = u32::try_from(ie.iter().filter(|&&b| b == b'\n').count() + 1).expect("fits");

    // Every prefix lacks the closing root tag, so each is an XML error with a real position.
    let step = ie.len() / 300;
    for cut in (0..ie.len()).step_by(step).chain(ie.len() - 30..ie.len()) {
        match tsl::parse(&ie[..cut]) {
            Err(TslError::NotXml { line, .. }) => {
                assert!((1..=lines).contains(&line), "cut at {cut}: line {line}");
            }
            other => panic!("cut at {cut}: expected NotXml, got {other:?}"),
        }
    }

    // Single-byte damage: whatever comes out, it is an answer, not a panic, and never more
    // services (4) and pointers (1) than the file has, each read or skipped.
    let mut answers = 0;
    for (i, at) in (0..ie.len()).step_by(ie.len() / 150).enumerate() {
        let mut damaged = ie.clone();
        damaged[at] = [b'<', b'>', b'&', b'"', 0xFF, b'x', b'0', b' '][i % 8];
        match tsl::parse(&damaged) {
            Ok(tl) => assert!(
                tl.services.len() + tl.pointers.len() + tl.skipped.len() <= 5,
                "damage at {at}"
            ),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        answers += 1;
    }
    assert!(answers >= 150);
}

/// Per list: services with a `Qualifications` extension in some period, periods with one,
/// each qualifier's short name with its count, and periods with a critical extension left
/// unread.
fn qualification_figures(tl: &TrustedList) -> (usize, usize, Vec<(String, usize)>, usize) {
    let mut services = 0;
    let mut periods = 0;
    let mut qualifiers = std::collections::BTreeMap::<String, usize>::new();
    let mut unread = 0;
    for s in &tl.services {
        if s.history.iter().any(|p| !p.qualifications.is_empty()) {
            services += 1;
        }
        for p in &s.history {
            if !p.qualifications.is_empty() {
                periods += 1;
            }
            if !p.unread_critical_extensions.is_empty() {
                unread += 1;
            }
            for q in p.qualifications.iter().flat_map(|q| &q.qualifiers) {
                let short = q.uri().rsplit('/').next().unwrap_or_default().to_owned();
                *qualifiers.entry(short).or_default() += 1;
            }
        }
    }
    (services, periods, qualifiers.into_iter().collect(), unread)
}

#[test]
fn every_qualification_in_the_real_lists_is_understood_and_nothing_critical_is_left_unread() {
    let count = |pairs: &[(&str, usize)]| -> Vec<(String, usize)> {
        pairs.iter().map(|(q, n)| ((*q).to_owned(), *n)).collect()
    };
    // CZ: 18 CA/QC services, 33 periods with 34 extensions (the current status of
    // "(78) I.CA - issuing qualified certificates" has two), every one marked critical.
    assert_eq!(
        qualification_figures(&parse_file(CZ)),
        (
            18,
            33,
            count(&[
                ("QCNoQSCD", 7),
                ("QCNoSSCD", 9),
                ("QCQSCDManagedOnBehalf", 1),
                ("QCQSCDStatusAsInCert", 15),
                ("QCSSCDStatusAsInCert", 2),
            ]),
            0
        )
    );
    // IE: one service, three periods, marked non-critical, read all the same.
    assert_eq!(
        qualification_figures(&parse_file(IE)),
        (1, 3, count(&[("QCWithQSCD", 2), ("QCWithSSCD", 1)]), 0)
    );
    // Every qualifier in them is known and neutral: none changes an approval.
    for file in [CZ, IE] {
        let tl = parse_file(file);
        for s in &tl.services {
            for p in &s.history {
                for q in p.qualifications.iter().flat_map(|q| &q.qualifiers) {
                    assert!(q.is_neutral(), "{file}: {}: {q:?}", s.service_name);
                }
            }
        }
    }
}
