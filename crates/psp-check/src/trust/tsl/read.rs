//! Walking the parsed document, TS 119 612 clause 5 element by element.
//!
//! Only the paths the module docs draw are visited, each step matched by local name and the
//! TS 119 612 namespace. An element the schema allows once but that appears twice is an error,
//! not a choice: two readers picking different copies is how XML signature wrapping works.

use roxmltree::{Document, Node};

use super::xsd;
use super::{
    ADDITIONAL_TYPES_NAMESPACE, ECC_NAMESPACE, MAX_CRITERIA_DEPTH, MAX_POINTER_CERTIFICATES,
    MAX_POINTERS, ServiceStatus, StatusPeriod, TSL_NAMESPACE, TrustedList, TslError, TslPointer,
    TslService, XADES_NAMESPACE,
};
use crate::trust::qualifications::{
    Assert, CriteriaList, Criterion, KeyUsageBit, Qualification, Qualifier,
};

/// The `xml:` namespace, for `xml:lang`.
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";

/// Something wrong at a place in the document (a byte offset, turned into a line on output).
struct Problem {
    at: usize,
    msg: String,
}

impl Problem {
    fn at(node: Node, msg: impl Into<String>) -> Self {
        Problem {
            at: node.range().start,
            msg: msg.into(),
        }
    }
}

type Read<T> = Result<T, Problem>;

/// `TSLType` values ending in `listofthelists` (clause 5.3.3): `EUlistofthelists` in the EU,
/// `CClistofthelists` elsewhere.
pub(super) fn is_list_of_lists_type(tsl_type: &str) -> bool {
    tsl_type.ends_with("listofthelists")
}

/// Reads a trusted list from its tree: the root (clause 5.2.1), the scheme information
/// (clause 5.3), the pointers to other lists (`read_pointers`), then, unless it is a list of
/// the lists, the trust service providers (`read_providers`).
pub(super) fn trusted_list(doc: &Document) -> Result<TrustedList, TslError> {
    // Clause 5.2.1: the root is `TrustServiceStatusList`.
    let root = doc.root_element();
    if !is(root, "TrustServiceStatusList") {
        let (line, col) = line_col(doc, root.range().start);
        return Err(TslError::NotATrustedList {
            line,
            col,
            found: expanded_name(root),
        });
    }
    let invalid = |p: Problem| {
        let (line, col) = line_col(doc, p.at);
        TslError::Invalid {
            line,
            col,
            msg: p.msg,
        }
    };

    let mut list = scheme_information(root).map_err(invalid)?;
    let providers = optional(root, "TrustServiceProviderList").map_err(invalid)?;

    let pointers = optional(
        one(root, "SchemeInformation").map_err(invalid)?,
        "PointersToOtherTSL",
    )
    .map_err(invalid)?;
    if let Some(pointers) = pointers {
        read_pointers(doc, pointers, &mut list)?;
    }

    if list.is_list_of_lists() {
        // A list of the lists points to other lists; it lists no TSPs (module docs).
        if let Some(p) = providers {
            let (line, _) = line_col(doc, p.range().start);
            list.skipped.push(format!(
                "TrustServiceProviderList at line {line} ignored: a list of the lists does not \
                 list trust service providers"
            ));
        }
        return Ok(list);
    }

    // Clause 5.3.18: absent when no TSP is or was approved.
    let Some(providers) = providers else {
        return Ok(list);
    };
    read_providers(doc, providers, &mut list);
    Ok(list)
}

/// Clause 5.3.13: the pointers to other lists, at most [`MAX_POINTERS`]; one that cannot be
/// read is noted in `list.skipped` and passed over.
fn read_pointers(doc: &Document, pointers: Node, list: &mut TrustedList) -> Result<(), TslError> {
    let count = all(pointers, "OtherTSLPointer").count();
    if count > MAX_POINTERS {
        return Err(TslError::TooLarge {
            what: "number of OtherTSLPointer entries",
            limit: MAX_POINTERS,
        });
    }
    for node in all(pointers, "OtherTSLPointer") {
        match pointer(node) {
            Ok(p) => list.pointers.push(p),
            Err(p) => {
                let (line, _) = line_col(doc, p.at);
                list.skipped.push(format!(
                    "OtherTSLPointer, line {line}: {}; pointer skipped",
                    p.msg
                ));
            }
        }
    }
    Ok(())
}

/// Clause 5.3.18 and clauses 5.4 and 5.5: each trust service provider and its services; a
/// provider or a service that cannot be read is noted in `list.skipped` and passed over.
fn read_providers(doc: &Document, providers: Node, list: &mut TrustedList) {
    for tsp in all(providers, "TrustServiceProvider") {
        list.tsp_count += 1;
        match provider(tsp) {
            Ok((tsp_name, services)) => {
                for svc in services {
                    match service(svc, &tsp_name) {
                        Ok(s) => list.services.push(s),
                        Err(p) => {
                            let (line, _) = line_col(doc, p.at);
                            list.skipped.push(format!(
                                "TSPService {:?} of {:?}, line {line}: {}; service skipped",
                                lenient_service_name(svc),
                                xsd::excerpt(&tsp_name),
                                p.msg
                            ));
                        }
                    }
                }
            }
            Err(p) => {
                let (line, _) = line_col(doc, p.at);
                list.skipped.push(format!(
                    "TrustServiceProvider, line {line}: {}; its services were skipped",
                    p.msg
                ));
            }
        }
    }
}

/// Clause 5.3: the scheme information this module reads, as a list without services yet.
fn scheme_information(root: Node) -> Read<TrustedList> {
    let scheme = one(root, "SchemeInformation")?;
    let territory = nonempty_text(one(scheme, "SchemeTerritory")?)?;
    let sequence_number = match optional(scheme, "TSLSequenceNumber")? {
        Some(n) => Some(
            xsd::unsigned(&text(n))
                .map_err(|m| Problem::at(n, format!("TSLSequenceNumber: {m}")))?,
        ),
        None => None,
    };
    let tsl_type = optional(scheme, "TSLType")?
        .map(nonempty_text)
        .transpose()?;
    let issue_date = optional(scheme, "ListIssueDateTime")?
        .map(|n| date_time(n, "ListIssueDateTime"))
        .transpose()?;
    // Clause 5.3.15: `NextUpdate` is empty for a closed list.
    let next_update = match optional(scheme, "NextUpdate")? {
        Some(n) => optional(n, "dateTime")?
            .map(|d| date_time(d, "NextUpdate/dateTime"))
            .transpose()?,
        None => None,
    };
    let scheme_information_uris = match optional(scheme, "SchemeInformationURI")? {
        Some(uris) => all(uris, "URI").map(text).collect(),
        None => Vec::new(),
    };
    Ok(TrustedList {
        territory,
        scheme_information_uris,
        pointers: Vec::new(),
        sequence_number,
        tsl_type,
        issue_date,
        next_update,
        tsp_count: 0,
        services: Vec::new(),
        skipped: Vec::new(),
    })
}

/// Clause 5.3.13: one `OtherTSLPointer`.
fn pointer(node: Node) -> Read<TslPointer> {
    let location = nonempty_text(one(node, "TSLLocation")?)?;
    let mut certificates = Vec::new();
    if let Some(ids) = optional(node, "ServiceDigitalIdentities")? {
        for sdi in all(ids, "ServiceDigitalIdentity") {
            certificates.extend(identity(sdi)?.0);
            if certificates.len() > MAX_POINTER_CERTIFICATES {
                return Err(Problem::at(
                    node,
                    format!("more than {MAX_POINTER_CERTIFICATES} certificates"),
                ));
            }
        }
    }
    let (mut territory, mut tsl_type, mut mime_type) = (None, None, None);
    if let Some(info) = optional(node, "AdditionalInformation")? {
        for other in all(info, "OtherInformation") {
            for field in elements(other) {
                let slot = if is(field, "SchemeTerritory") {
                    &mut territory
                } else if is(field, "TSLType") {
                    &mut tsl_type
                } else if is_in(field, ADDITIONAL_TYPES_NAMESPACE, "MimeType") {
                    &mut mime_type
                } else {
                    continue;
                };
                if slot.is_some() {
                    return Err(Problem::at(
                        field,
                        format!("more than one {}", field.tag_name().name()),
                    ));
                }
                *slot = Some(nonempty_text(field)?);
            }
        }
    }
    Ok(TslPointer {
        location,
        territory,
        tsl_type,
        mime_type,
        certificates,
    })
}

/// Clause 5.4: the TSP's name (5.4.1) and its `TSPService` elements (5.4.6).
fn provider<'a, 'i>(tsp: Node<'a, 'i>) -> Read<(String, Vec<Node<'a, 'i>>)> {
    let info = one(tsp, "TSPInformation")?;
    let name = preferred_name(one(info, "TSPName")?)?;
    let services = all(one(tsp, "TSPServices")?, "TSPService").collect();
    Ok((name, services))
}

/// Clauses 5.5 and 5.6: one service with its status history.
fn service(svc: Node, tsp_name: &str) -> Read<TslService> {
    let info = one(svc, "ServiceInformation")?;
    let service_name = preferred_name(one(info, "ServiceName")?)?;
    let (certificates, subject_key_ids, subject_names) =
        identity(one(info, "ServiceDigitalIdentity")?)?;
    let current = period(info)?;

    // Clause 5.5.10: previous statuses, meant to be in descending order; sorted here anyway
    // (stable, so equal times keep document order).
    let mut previous = Vec::new();
    if let Some(h) = optional(svc, "ServiceHistory")? {
        for instance in all(h, "ServiceHistoryInstance") {
            previous.push((instance, period(instance)?));
        }
    }
    previous.sort_by_key(|(_, p)| std::cmp::Reverse(p.starting));
    if let Some((node, newest)) = previous.first()
        && newest.starting > current.starting
    {
        // The current status must be the latest; otherwise which status holds now is
        // ambiguous, and guessing could re-grant a withdrawn service.
        return Err(Problem::at(
            *node,
            format!(
                "ServiceHistoryInstance starting {} is later than the current status, which \
                 starts {}",
                newest.starting, current.starting
            ),
        ));
    }

    let mut history = Vec::with_capacity(previous.len() + 1);
    let service_type = current.service_type.clone();
    history.push(current);
    history.extend(previous.into_iter().map(|(_, p)| p));
    Ok(TslService {
        tsp_name: tsp_name.to_owned(),
        service_name,
        service_type,
        certificates,
        subject_key_ids,
        subject_names,
        history,
    })
}

/// The fields a current status (clause 5.5) and a history instance (clause 5.6) share.
fn period(node: Node) -> Read<StatusPeriod> {
    let service_type = nonempty_text(one(node, "ServiceTypeIdentifier")?)?;
    let status = ServiceStatus::from_uri(&nonempty_text(one(node, "ServiceStatus")?)?);
    let starting = date_time(one(node, "StatusStartingTime")?, "StatusStartingTime")?;

    let mut additional_info = Vec::new();
    let mut qualifications = Vec::new();
    let mut unread_critical_extensions = Vec::new();
    if let Some(extensions) = optional(node, "ServiceInformationExtensions")? {
        for extension in all(extensions, "Extension") {
            // `Critical` is a required xsd:boolean; absent or unreadable counts as critical.
            let critical = !matches!(
                extension
                    .attribute("Critical")
                    .map(|v| v.trim_matches(xsd::is_xml_space)),
                Some("false" | "0")
            );
            for content in extension.children().filter(Node::is_element) {
                if is(content, "AdditionalServiceInformation") {
                    // Clause 5.5.9.4.
                    for u in all(content, "URI") {
                        additional_info.push(nonempty_text(u)?);
                    }
                } else if is_in(content, ECC_NAMESPACE, "Qualifications") {
                    // Clause 5.5.9.2.
                    qualifications.extend(read_qualifications(content)?);
                } else if critical {
                    let name = content.tag_name();
                    unread_critical_extensions.push(match name.namespace() {
                        Some(ns) => format!("{{{ns}}}{}", name.name()),
                        None => name.name().to_owned(),
                    });
                }
            }
        }
    }
    Ok(StatusPeriod {
        status,
        starting,
        service_type,
        additional_info,
        qualifications,
        unread_critical_extensions,
    })
}

/// Clause 5.5.9.2: `Qualifications`, a sequence of one or more `QualificationElement`.
fn read_qualifications(node: Node) -> Read<Vec<Qualification>> {
    let mut out = Vec::new();
    for element in elements(node) {
        if !is_in(element, ECC_NAMESPACE, "QualificationElement") {
            return Err(Problem::at(
                element,
                format!(
                    "Qualifications holds {}, not a QualificationElement",
                    expanded_name(element)
                ),
            ));
        }
        out.push(qualification_element(element)?);
    }
    if out.is_empty() {
        return Err(Problem::at(
            node,
            "Qualifications has no QualificationElement",
        ));
    }
    Ok(out)
}

/// `QualificationElement`: exactly one `Qualifiers` (one or more `Qualifier@uri`) and exactly
/// one `CriteriaList`.
fn qualification_element(element: Node) -> Read<Qualification> {
    let qualifiers_node = one_in(element, ECC_NAMESPACE, "Qualifiers")?;
    let mut qualifiers = Vec::new();
    for q in elements(qualifiers_node) {
        if !is_in(q, ECC_NAMESPACE, "Qualifier") {
            return Err(Problem::at(
                q,
                format!("Qualifiers holds {}, not a Qualifier", expanded_name(q)),
            ));
        }
        let uri = q
            .attribute("uri")
            .map(|u| u.trim_matches(xsd::is_xml_space))
            .filter(|u| !u.is_empty())
            .ok_or_else(|| Problem::at(q, "Qualifier has no uri"))?;
        qualifiers.push(Qualifier::from_uri(uri));
    }
    if qualifiers.is_empty() {
        return Err(Problem::at(qualifiers_node, "Qualifiers has no Qualifier"));
    }
    let criteria = criteria_list(one_in(element, ECC_NAMESPACE, "CriteriaList")?, 1)?;
    Ok(Qualification {
        qualifiers,
        criteria,
    })
}

/// `CriteriaList` at nesting `depth` (1 for the outer one).
fn criteria_list(node: Node, depth: usize) -> Read<CriteriaList> {
    if depth > MAX_CRITERIA_DEPTH {
        return Err(Problem::at(
            node,
            format!("CriteriaList nested deeper than {MAX_CRITERIA_DEPTH} levels"),
        ));
    }
    let assert = node
        .attribute("assert")
        .map(|a| a.trim_matches(xsd::is_xml_space))
        .and_then(Assert::from_xml)
        .ok_or_else(|| {
            Problem::at(
                node,
                format!(
                    "CriteriaList assert is {:?}, not all, atLeastOne or none",
                    node.attribute("assert").map(xsd::excerpt)
                ),
            )
        })?;
    let mut criteria = Vec::new();
    for c in elements(node) {
        if is_in(c, ECC_NAMESPACE, "KeyUsage") {
            criteria.push(key_usage(c)?);
        } else if is_in(c, ECC_NAMESPACE, "PolicySet") {
            let ids = children_in(c, ECC_NAMESPACE, "PolicyIdentifier").map(identifier);
            criteria.push(oid_criterion(c, ids, Criterion::PolicySet)?);
        } else if is_in(c, ECC_NAMESPACE, "CriteriaList") {
            criteria.push(Criterion::List(criteria_list(c, depth + 1)?));
        } else if is_in(c, ECC_NAMESPACE, "Description") {
            // Text for people (clause 5.5.9.2.1); it selects nothing.
        } else if is_in(c, ECC_NAMESPACE, "otherCriteriaList") {
            for other in elements(c) {
                criteria.push(other_criterion(other)?);
            }
        } else {
            criteria.push(Criterion::NotUnderstood(expanded_name(c)));
        }
    }
    Ok(CriteriaList { assert, criteria })
}

/// `KeyUsage`: up to nine `KeyUsageBit name="…"` booleans.
fn key_usage(node: Node) -> Read<Criterion> {
    let mut bits: Vec<(KeyUsageBit, bool)> = Vec::new();
    for b in elements(node) {
        if !is_in(b, ECC_NAMESPACE, "KeyUsageBit") {
            return Ok(Criterion::NotUnderstood(expanded_name(b)));
        }
        let name = b.attribute("name").unwrap_or_default();
        let Some(bit) = KeyUsageBit::from_name(name.trim_matches(xsd::is_xml_space)) else {
            return Ok(Criterion::NotUnderstood(format!(
                "KeyUsageBit {:?}",
                xsd::excerpt(name)
            )));
        };
        let value = match text(b).as_str() {
            "true" | "1" => true,
            "false" | "0" => false,
            other => {
                return Err(Problem::at(
                    b,
                    format!("KeyUsageBit `{}` is not a boolean", xsd::excerpt(other)),
                ));
            }
        };
        if bits.iter().any(|(seen, _)| *seen == bit) {
            return Err(Problem::at(b, format!("KeyUsageBit {name} given twice")));
        }
        bits.push((bit, value));
    }
    if bits.is_empty() {
        return Err(Problem::at(node, "KeyUsage has no KeyUsageBit"));
    }
    Ok(Criterion::KeyUsage(bits))
}

/// An element of `otherCriteriaList` (`xades:AnyType`): the two TS 119 612 Annex C.3 ones
/// are read, anything else is not understood.
fn other_criterion(node: Node) -> Read<Criterion> {
    if is_in(node, ADDITIONAL_TYPES_NAMESPACE, "CertSubjectDNAttribute") {
        let ids = children_in(node, ADDITIONAL_TYPES_NAMESPACE, "AttributeOID").map(identifier);
        oid_criterion(node, ids, Criterion::SubjectDnAttributes)
    } else if is_in(node, ADDITIONAL_TYPES_NAMESPACE, "ExtendedKeyUsage") {
        let ids = children_in(node, ADDITIONAL_TYPES_NAMESPACE, "KeyPurposeId").map(identifier);
        oid_criterion(node, ids, Criterion::ExtendedKeyUsage)
    } else {
        Ok(Criterion::NotUnderstood(expanded_name(node)))
    }
}

/// A criterion made of OIDs: `make(oids)` when there is at least one and every one reads as
/// an OID, `NotUnderstood` when one does not.
fn oid_criterion(
    node: Node,
    ids: impl Iterator<Item = Read<Option<String>>>,
    make: fn(Vec<String>) -> Criterion,
) -> Read<Criterion> {
    let mut oids = Vec::new();
    for id in ids {
        match id? {
            Some(oid) => oids.push(oid),
            None => {
                return Ok(Criterion::NotUnderstood(format!(
                    "{} with an identifier that is not an OID",
                    node.tag_name().name()
                )));
            }
        }
    }
    if oids.is_empty() {
        return Err(Problem::at(
            node,
            format!("{} lists no identifier", node.tag_name().name()),
        ));
    }
    Ok(make(oids))
}

/// `xades:ObjectIdentifierType`: its one `xades:Identifier`, as a dotted OID; `None` when the
/// identifier is neither a dotted OID nor an `urn:oid:` URN (RFC 3061).
fn identifier(node: Node) -> Read<Option<String>> {
    let id = text(one_in(node, XADES_NAMESPACE, "Identifier")?);
    let dotted = match id.get(..8) {
        Some(prefix) if prefix.eq_ignore_ascii_case("urn:oid:") => &id[8..],
        _ => id.as_str(),
    };
    Ok(is_dotted_oid(dotted).then(|| dotted.to_owned()))
}

/// Two or more arcs of decimal digits separated by dots, without leading zeros (as
/// certificates' OIDs are printed, so that comparison is by string).
fn is_dotted_oid(s: &str) -> bool {
    let arcs: Vec<&str> = s.split('.').collect();
    arcs.len() >= 2
        && arcs.iter().all(|a| {
            !a.is_empty()
                && a.bytes().all(|b| b.is_ascii_digit())
                && (a.len() == 1 || !a.starts_with('0'))
        })
}

type Identity = (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<String>);

/// Clause 5.5.3: certificates, key identifiers and subject names of the service.
/// `KeyValue` and `Other` digital identifiers are not read.
fn identity(sdi: Node) -> Read<Identity> {
    let (mut certificates, mut skis, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for id in all(sdi, "DigitalId") {
        for field in id.children().filter(Node::is_element) {
            if is(field, "X509Certificate") {
                let der = xsd::base64(&text(field))
                    .map_err(|m| Problem::at(field, format!("X509Certificate: {m}")))?;
                check_certificate(&der)
                    .map_err(|m| Problem::at(field, format!("X509Certificate: {m}")))?;
                certificates.push(der);
            } else if is(field, "X509SKI") {
                let ski = xsd::base64(&text(field))
                    .map_err(|m| Problem::at(field, format!("X509SKI: {m}")))?;
                skis.push(ski);
            } else if is(field, "X509SubjectName") {
                names.push(text(field));
            }
        }
    }
    Ok((certificates, skis, names))
}

/// Why a `DigitalId`'s `X509Certificate` is refused.
#[derive(Debug, thiserror::Error)]
enum CertificateError {
    #[error("{0} bytes follow the DER certificate")]
    TrailingBytes(usize),
    #[error("not a DER X.509 certificate ({0})")]
    NotDer(x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// One DER X.509 certificate and nothing after it.
fn check_certificate(der: &[u8]) -> Result<(), CertificateError> {
    match x509_parser::parse_x509_certificate(der) {
        Ok(([], _)) => Ok(()),
        Ok((rest, _)) => Err(CertificateError::TrailingBytes(rest.len())),
        Err(e) => Err(CertificateError::NotDer(e)),
    }
}

/// Clause 5.1.4 multilingual names: the first `xml:lang="en"` (or `en-…`) `Name`, else the
/// first `Name`.
fn preferred_name(names: Node) -> Read<String> {
    let mut first = None;
    for n in all(names, "Name") {
        let english = n.attribute((XML_NAMESPACE, "lang")).is_some_and(|lang| {
            let lang = lang.trim_matches(xsd::is_xml_space);
            lang.eq_ignore_ascii_case("en")
                || lang.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("en-"))
        });
        if english {
            return Ok(text(n));
        }
        first.get_or_insert(n);
    }
    match first {
        Some(n) => Ok(text(n)),
        None => Err(Problem::at(
            names,
            format!("{} has no Name", names.tag_name().name()),
        )),
    }
}

/// The service's name for a note about it, read without complaint.
fn lenient_service_name(svc: Node) -> String {
    all(svc, "ServiceInformation")
        .next()
        .and_then(|i| all(i, "ServiceName").next())
        .and_then(|n| preferred_name(n).ok())
        .map(|n| xsd::excerpt(&n))
        .unwrap_or_else(|| "(no name)".to_owned())
}

fn date_time(node: Node, what: &str) -> Read<time::OffsetDateTime> {
    xsd::date_time(&text(node)).map_err(|m| Problem::at(node, format!("{what}: {m}")))
}

/// Whether `node` is the TS 119 612 element `local`.
fn is(node: Node, local: &str) -> bool {
    is_in(node, TSL_NAMESPACE, local)
}

/// Whether `node` is the element `local` of namespace `ns` (also for `trust::xmlsig`).
pub(crate) fn is_in(node: Node, ns: &str, local: &str) -> bool {
    node.is_element() && node.tag_name().name() == local && node.tag_name().namespace() == Some(ns)
}

/// The child elements, of any namespace.
fn elements<'a, 'i>(parent: Node<'a, 'i>) -> impl Iterator<Item = Node<'a, 'i>> {
    parent.children().filter(Node::is_element)
}

/// The child elements `local` of namespace `ns` (also for `trust::xmlsig`).
pub(crate) fn children_in<'a, 'i>(
    parent: Node<'a, 'i>,
    ns: &'static str,
    local: &'static str,
) -> impl Iterator<Item = Node<'a, 'i>> {
    parent.children().filter(move |c| is_in(*c, ns, local))
}

/// The child element `local` of namespace `ns`, which the schema requires exactly once.
fn one_in<'a, 'i>(
    parent: Node<'a, 'i>,
    ns: &'static str,
    local: &'static str,
) -> Read<Node<'a, 'i>> {
    let mut found = children_in(parent, ns, local);
    match (found.next(), found.next()) {
        (Some(node), None) => Ok(node),
        (None, _) => Err(Problem::at(
            parent,
            format!("{} has no {local}", parent.tag_name().name()),
        )),
        (Some(_), Some(second)) => Err(Problem::at(
            second,
            format!("{} has more than one {local}", parent.tag_name().name()),
        )),
    }
}

/// The TS 119 612 child elements named `local`.
fn all<'a, 'i>(parent: Node<'a, 'i>, local: &'static str) -> impl Iterator<Item = Node<'a, 'i>> {
    parent.children().filter(move |c| is(*c, local))
}

/// The child element `local`, which the schema allows at most once.
fn optional<'a, 'i>(parent: Node<'a, 'i>, local: &'static str) -> Read<Option<Node<'a, 'i>>> {
    let mut found = all(parent, local);
    let first = found.next();
    match found.next() {
        None => Ok(first),
        Some(second) => Err(Problem::at(
            second,
            format!("{} has more than one {local}", parent.tag_name().name()),
        )),
    }
}

/// The child element `local`, which the schema requires exactly once.
fn one<'a, 'i>(parent: Node<'a, 'i>, local: &'static str) -> Read<Node<'a, 'i>> {
    optional(parent, local)?.ok_or_else(|| {
        Problem::at(
            parent,
            format!("{} has no {local}", parent.tag_name().name()),
        )
    })
}

/// The element's character data (text and CDATA children joined), without surrounding white
/// space. Child elements and comments are not part of it.
fn text(node: Node) -> String {
    let mut out = String::new();
    for t in node.children().filter(Node::is_text) {
        out.push_str(t.text().unwrap_or_default());
    }
    out.trim_matches(xsd::is_xml_space).to_owned()
}

fn nonempty_text(node: Node) -> Read<String> {
    let t = text(node);
    if t.is_empty() {
        Err(Problem::at(
            node,
            format!("{} is empty", node.tag_name().name()),
        ))
    } else {
        Ok(t)
    }
}

/// `{namespace}local`, or `local (no namespace)`, shortened for messages.
fn expanded_name(node: Node) -> String {
    let name = node.tag_name();
    match name.namespace() {
        Some(ns) => format!("{{{}}}{}", xsd::excerpt(ns), xsd::excerpt(name.name())),
        None => format!("{} (no namespace)", xsd::excerpt(name.name())),
    }
}

fn line_col(doc: &Document, at: usize) -> (u32, u32) {
    let p = doc.text_pos_at(at);
    (p.row, p.col)
}
