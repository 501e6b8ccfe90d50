//! Walking the parsed document, TS 119 612 clause 5 element by element.
//!
//! Only the paths the module docs draw are visited, each step matched by local name and the
//! TS 119 612 namespace. An element the schema allows once but that appears twice is an error,
//! not a choice: two readers picking different copies is how XML signature wrapping works.

use roxmltree::{Document, Node};

use super::xsd;
use super::{ServiceStatus, StatusPeriod, TSL_NAMESPACE, TrustedList, TslError, TslService};

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

    if list.is_list_of_lists() {
        // A list of the lists points to other lists; it lists no TSPs (module docs).
        let pointers = pointer_count(root).map_err(invalid)?;
        list.skipped.push(format!(
            "list of the lists: its {pointers} OtherTSLPointer entries (clause 5.3.13) point to \
             other lists and are not trust services; they were not read"
        ));
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
    Ok(list)
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
    Ok(TrustedList {
        territory,
        sequence_number,
        tsl_type,
        issue_date,
        next_update,
        tsp_count: 0,
        services: Vec::new(),
        skipped: Vec::new(),
    })
}

/// Clause 5.3.13: how many `OtherTSLPointer` entries the list has.
fn pointer_count(root: Node) -> Read<usize> {
    let scheme = one(root, "SchemeInformation")?;
    Ok(match optional(scheme, "PointersToOtherTSL")? {
        Some(p) => all(p, "OtherTSLPointer").count(),
        None => 0,
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
        unread_critical_extensions,
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

/// One DER X.509 certificate and nothing after it.
fn check_certificate(der: &[u8]) -> Result<(), String> {
    match x509_parser::parse_x509_certificate(der) {
        Ok(([], _)) => Ok(()),
        Ok((rest, _)) => Err(format!("{} bytes follow the DER certificate", rest.len())),
        Err(e) => Err(format!("not a DER X.509 certificate ({e})")),
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
    node.is_element()
        && node.tag_name().name() == local
        && node.tag_name().namespace() == Some(TSL_NAMESPACE)
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
