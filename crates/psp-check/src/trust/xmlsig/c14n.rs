//! Canonical XML 1.0 (W3C, 2001) and Exclusive XML Canonicalization 1.0 (W3C, 2002) over a
//! roxmltree tree.
//!
//! The node-sets this module canonicalises are the only ones XML-DSig needs for an enveloped
//! trusted-list signature: a whole subtree (an element with everything under it, or the whole
//! document), optionally minus one element subtree (the enveloped `ds:Signature`). Comments
//! are kept only when the caller asks (the `#WithComments` variants; a same-document
//! reference drops them whatever the transform says, XML-DSig 1.0 section 4.3.3.3).
//!
//! What the W3C texts require, and where it is done:
//!
//! * elements and attributes in document order, attributes sorted by namespace URI then local
//!   name, namespace declarations first and sorted by prefix (default first) —
//!   [`write_start_tag`];
//! * exclusive C14N (section 3 of xml-exc-c14n): a namespace declaration is output on an
//!   element only where it is *visibly utilised* (by the element's prefix, or by one of its
//!   attributes' prefixes) and not already output with the same value by an output ancestor;
//!   `xmlns=""` where the element has no default namespace and an output ancestor declared
//!   one. Inclusive C14N (section 2.3 of xml-c14n): every namespace in scope, under the same
//!   "not already output" rule; at the apex of a subset, `xml:*` attributes inherited from
//!   ancestors are output as well;
//! * escaping of text (`&amp;`, `&lt;`, `&gt;`, `&#xD;`) and attribute values (`&amp;`,
//!   `&lt;`, `&quot;`, `&#x9;`, `&#xA;`, `&#xD;`) — [`escape_text`], [`escape_attribute`];
//! * no XML declaration, no document type declaration; processing instructions kept;
//!   outside the document element, a line feed between the top-level nodes.
//!
//! roxmltree already did what the data model asks of a parser: line endings normalised,
//! attribute values normalised, character and predefined entity references resolved, CDATA
//! sections merged into text. It does not keep an element's or attribute's *prefix* as
//! written (only its namespace URI), and two prefixes may be bound to one URI (the real lists
//! bind the XML-DSig namespace to both `ns2` and `ds`), so prefixes are read back from the
//! input text through the node positions roxmltree records. The traversal is iterative, so a
//! deeply nested hostile document cannot overflow the stack.

use std::collections::HashMap;
use std::fmt;

use roxmltree::{Node, NodeId, NodeType};

/// The XML namespace (`xml:` prefix), never declared in output.
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";

/// A canonicalisation method of XML-DSig 1.0 (section 6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Canonical XML 1.0, `http://www.w3.org/TR/2001/REC-xml-c14n-20010315`.
    Inclusive,
    /// `http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments`.
    InclusiveWithComments,
    /// Exclusive XML Canonicalization 1.0, `http://www.w3.org/2001/10/xml-exc-c14n#`.
    Exclusive,
    /// `http://www.w3.org/2001/10/xml-exc-c14n#WithComments`.
    ExclusiveWithComments,
}

impl Method {
    /// The method named by an XML-DSig `Algorithm` URI, if it is one of the four.
    pub fn from_uri(uri: &str) -> Option<Method> {
        match uri {
            "http://www.w3.org/TR/2001/REC-xml-c14n-20010315" => Some(Method::Inclusive),
            "http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments" => {
                Some(Method::InclusiveWithComments)
            }
            "http://www.w3.org/2001/10/xml-exc-c14n#" => Some(Method::Exclusive),
            "http://www.w3.org/2001/10/xml-exc-c14n#WithComments" => {
                Some(Method::ExclusiveWithComments)
            }
            _ => None,
        }
    }

    /// The `Algorithm` URI of this method.
    pub fn uri(self) -> &'static str {
        match self {
            Method::Inclusive => "http://www.w3.org/TR/2001/REC-xml-c14n-20010315",
            Method::InclusiveWithComments => {
                "http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments"
            }
            Method::Exclusive => "http://www.w3.org/2001/10/xml-exc-c14n#",
            Method::ExclusiveWithComments => "http://www.w3.org/2001/10/xml-exc-c14n#WithComments",
        }
    }

    fn exclusive(self) -> bool {
        matches!(self, Method::Exclusive | Method::ExclusiveWithComments)
    }

    /// Whether comments are kept when the node-set still has them.
    pub fn with_comments(self) -> bool {
        matches!(
            self,
            Method::InclusiveWithComments | Method::ExclusiveWithComments
        )
    }
}

/// The input cannot be canonicalised faithfully: a prefix could not be read back from the
/// input text (roxmltree records qualified-name lengths in 16 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct C14nError(pub String);

impl fmt::Display for C14nError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One namespace declaration in output: prefix (`None` for the default namespace) and URI.
type Decl<'a> = (Option<&'a str>, &'a str);

/// Canonicalises the subtree of `apex` (an element, or the document root for the whole
/// document), leaving out the subtree of `omit` if given, with `method`; comments are output
/// only if `comments` is true (and the method is a `WithComments` one: the caller decides).
///
/// An iterative pre-order walk with explicit closing: each node output (elements by
/// [`write_start_tag`], top-level comments and processing instructions by
/// `write_top_level`), then its first child, or else the next node after climbing
/// (`climb`, which closes the elements it leaves).
pub(super) fn canonicalize<'a, 'i: 'a>(
    apex: Node<'a, 'i>,
    omit: Option<NodeId>,
    method: Method,
    comments: bool,
) -> Result<Vec<u8>, C14nError> {
    let mut out = Vec::new();
    let text = apex.document().input_text();
    // Declarations output by each open element, innermost last.
    let mut rendered = Rendered::default();
    let at_document = apex.node_type() == NodeType::Root;
    let mut seen_document_element = false;

    let mut current = if at_document {
        apex.first_child()
    } else {
        Some(apex)
    };
    while let Some(node) = current {
        let skip = Some(node.id()) == omit;
        let mut descend = false;
        if !skip {
            let top_level = at_document && node.parent().map(|p| p.id()) == Some(apex.id());
            let top = TopLevel {
                top_level,
                after_document_element: seen_document_element,
            };
            match node.node_type() {
                NodeType::Element => {
                    if top_level {
                        seen_document_element = true;
                    }
                    let is_apex = node.id() == apex.id();
                    write_start_tag(&mut out, text, node, &mut rendered, method, is_apex)?;
                    descend = true;
                }
                NodeType::Text => {
                    if !top_level {
                        escape_text(&mut out, node.text().unwrap_or(""));
                    }
                }
                NodeType::Comment if comments => write_top_level(&mut out, top, |out| {
                    out.extend_from_slice(b"<!--");
                    out.extend_from_slice(node.text().unwrap_or("").as_bytes());
                    out.extend_from_slice(b"-->");
                }),
                NodeType::Comment => {}
                NodeType::PI => {
                    if let Some(pi) = node.pi() {
                        write_top_level(&mut out, top, |out| {
                            out.extend_from_slice(b"<?");
                            out.extend_from_slice(pi.target.as_bytes());
                            if let Some(value) = pi.value.filter(|v| !v.is_empty()) {
                                out.push(b' ');
                                out.extend_from_slice(value.as_bytes());
                            }
                            out.extend_from_slice(b"?>");
                        });
                    }
                }
                NodeType::Root => {}
            }
        }
        if descend && let Some(child) = node.first_child() {
            current = Some(child);
            continue;
        }
        if descend {
            write_end_tag(&mut out, text, node, &mut rendered)?;
        }
        current = climb(&mut out, text, node, apex, at_document, &mut rendered)?;
    }
    Ok(out)
}

/// Where a comment or processing instruction stands: among the top-level nodes of a whole
/// document or not, and if so, after the document element or before it.
#[derive(Clone, Copy)]
struct TopLevel {
    top_level: bool,
    after_document_element: bool,
}

/// Writes a comment or processing instruction with `write`; outside the document element, a
/// line feed separates it from the document element (before it when after the element, after
/// it when before), as Canonical XML 1.0 section 2.1 asks.
fn write_top_level(out: &mut Vec<u8>, at: TopLevel, write: impl FnOnce(&mut Vec<u8>)) {
    if at.top_level && at.after_document_element {
        out.push(b'\n');
    }
    write(out);
    if at.top_level && !at.after_document_element {
        out.push(b'\n');
    }
}

/// The node after `node` in the walk: its next sibling, or that of the nearest ancestor that
/// has one, closing the elements climbed out of; `None` at the end of the apex's subtree.
fn climb<'a, 'i: 'a>(
    out: &mut Vec<u8>,
    text: &'a str,
    node: Node<'a, 'i>,
    apex: Node<'a, 'i>,
    at_document: bool,
    rendered: &mut Rendered<'a>,
) -> Result<Option<Node<'a, 'i>>, C14nError> {
    let mut at = node;
    loop {
        if at.id() == apex.id() {
            return Ok(None);
        }
        if let Some(next) = at.next_sibling() {
            return Ok(Some(next));
        }
        let Some(parent) = at.parent() else {
            return Ok(None);
        };
        if parent.id() == apex.id() && at_document {
            return Ok(None);
        }
        if parent.is_element() {
            write_end_tag(out, text, parent, rendered)?;
        }
        at = parent;
    }
}

/// The prefix of an element as written, read back from the input text: the characters
/// between `<` and the first `:` of the qualified name (`None` for no prefix).
fn element_prefix<'t>(text: &'t str, node: Node<'_, '_>) -> Result<Option<&'t str>, C14nError> {
    let start = node.range().start;
    let rest = text.get(start + 1..).unwrap_or("");
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '/' || c == '>')
        .unwrap_or(rest.len());
    split_qname(&rest[..end], node.tag_name().name())
}

/// The prefix of an attribute as written (`None` for no prefix).
fn attribute_prefix<'t>(
    text: &'t str,
    attr: &roxmltree::Attribute<'_, '_>,
) -> Result<Option<&'t str>, C14nError> {
    let qname = text.get(attr.range_qname()).unwrap_or("");
    split_qname(qname, attr.name())
}

/// Splits a qualified name read from the input and checks its local part against the one
/// roxmltree parsed, so a position that does not point where expected is an error rather
/// than a wrong prefix.
fn split_qname<'t>(qname: &'t str, local: &str) -> Result<Option<&'t str>, C14nError> {
    let (prefix, found) = match qname.split_once(':') {
        Some((p, l)) => (Some(p), l),
        None => (None, qname),
    };
    if found != local {
        return Err(C14nError(format!(
            "cannot read back the qualified name of {local:?} from the input"
        )));
    }
    Ok(prefix)
}

/// The namespace declarations in effect from output ancestors, with what each open element
/// changed, so that a lookup costs the same at any depth (a stack searched frame by frame
/// would make a deeply nested hostile document quadratic).
#[derive(Default)]
struct Rendered<'a> {
    in_effect: HashMap<Option<&'a str>, &'a str>,
    undo: Vec<Vec<(Option<&'a str>, Option<&'a str>)>>,
}

impl<'a> Rendered<'a> {
    /// The URI output ancestors declared for `prefix`; the empty string for the default
    /// namespace when none was declared.
    fn get(&self, prefix: Option<&'a str>) -> Option<&'a str> {
        match self.in_effect.get(&prefix) {
            Some(uri) => Some(uri),
            None => prefix.is_none().then_some(""),
        }
    }

    fn open(&mut self, frame: &[Decl<'a>]) {
        let undo = frame
            .iter()
            .map(|(p, uri)| (*p, self.in_effect.insert(*p, uri)))
            .collect();
        self.undo.push(undo);
    }

    fn close(&mut self) {
        for (p, previous) in self.undo.pop().unwrap_or_default().into_iter().rev() {
            match previous {
                Some(uri) => self.in_effect.insert(p, uri),
                None => self.in_effect.remove(&p),
            };
        }
    }
}

/// Writes the start tag of `node`: its qualified name as written, the namespace declarations
/// it must output (`namespace_candidates`, less those an output ancestor already declared the
/// same, sorted by prefix, default first), then its attributes (`sorted_attributes`).
fn write_start_tag<'a, 'i: 'a>(
    out: &mut Vec<u8>,
    text: &'a str,
    node: Node<'a, 'i>,
    rendered: &mut Rendered<'a>,
    method: Method,
    is_apex: bool,
) -> Result<(), C14nError> {
    let prefix = element_prefix(text, node)?;
    let candidates = namespace_candidates(text, node, prefix, method)?;
    let mut frame: Vec<Decl<'a>> = Vec::new();
    for (p, uri) in candidates {
        if rendered.get(p) != Some(uri) {
            frame.push((p, uri));
        }
    }
    frame.sort_by(|a, b| a.0.unwrap_or("").cmp(b.0.unwrap_or("")));

    out.push(b'<');
    write_qname(out, prefix, node.tag_name().name());
    for (p, uri) in &frame {
        match p {
            None => out.extend_from_slice(b" xmlns=\""),
            Some(p) => {
                out.extend_from_slice(b" xmlns:");
                out.extend_from_slice(p.as_bytes());
                out.extend_from_slice(b"=\"");
            }
        }
        escape_attribute(out, uri);
        out.push(b'"');
    }
    for (_, local, p, value) in sorted_attributes(text, node, method, is_apex)? {
        out.push(b' ');
        write_qname(out, p, local);
        out.extend_from_slice(b"=\"");
        escape_attribute(out, value);
        out.push(b'"');
    }
    out.push(b'>');
    rendered.open(&frame);
    Ok(())
}

/// The namespace declarations an element may output: (prefix, URI as in scope here).
/// Exclusive C14N (section 3): those visibly utilised, by the element's `prefix` and its
/// attributes' prefixes. Inclusive C14N (section 2.3): every namespace in scope, and the
/// empty default namespace when none is.
fn namespace_candidates<'a, 'i: 'a>(
    text: &'a str,
    node: Node<'a, 'i>,
    prefix: Option<&'a str>,
    method: Method,
) -> Result<Vec<Decl<'a>>, C14nError> {
    let mut candidates: Vec<Decl<'a>> = Vec::new();
    if method.exclusive() {
        let element_uri = match prefix {
            None => node.tag_name().namespace().unwrap_or(""),
            Some(p) => node.lookup_namespace_uri(Some(p)).unwrap_or(""),
        };
        candidates.push((prefix, element_uri));
        for attr in node.attributes() {
            if let Some(p) = attribute_prefix(text, &attr)?
                && p != "xml"
            {
                let uri = attr.namespace().unwrap_or("");
                if !candidates.iter().any(|(q, _)| *q == Some(p)) {
                    candidates.push((Some(p), uri));
                }
            }
        }
    } else {
        let mut has_default = false;
        for ns in node.namespaces() {
            if ns.name() == Some("xml") {
                continue;
            }
            has_default |= ns.name().is_none();
            candidates.push((ns.name(), ns.uri()));
        }
        if !has_default {
            candidates.push((None, ""));
        }
    }
    Ok(candidates)
}

/// One attribute in output: namespace URI, local name, prefix, value.
type Attr<'a> = (&'a str, &'a str, Option<&'a str>, &'a str);

/// The attributes an element outputs, as (namespace URI, local name, prefix, value), sorted
/// by namespace URI then local name; at the apex of an inclusive subset, with the `xml:*`
/// attributes it inherits.
fn sorted_attributes<'a, 'i: 'a>(
    text: &'a str,
    node: Node<'a, 'i>,
    method: Method,
    is_apex: bool,
) -> Result<Vec<Attr<'a>>, C14nError> {
    let mut attrs: Vec<Attr<'a>> = Vec::new();
    for attr in node.attributes() {
        let p = attribute_prefix(text, &attr)?;
        attrs.push((attr.namespace().unwrap_or(""), attr.name(), p, attr.value()));
    }
    if is_apex && !method.exclusive() {
        // Canonical XML 1.0 section 2.4: the apex of a document subset inherits the xml:*
        // attributes of its ancestors (nearest wins) that it does not carry itself.
        for ancestor in node.ancestors().skip(1) {
            for attr in ancestor.attributes() {
                if attr.namespace() == Some(XML_NAMESPACE)
                    && !attrs
                        .iter()
                        .any(|(ns, local, _, _)| *ns == XML_NAMESPACE && *local == attr.name())
                {
                    attrs.push((XML_NAMESPACE, attr.name(), Some("xml"), attr.value()));
                }
            }
        }
    }
    attrs.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    Ok(attrs)
}

fn write_end_tag<'a>(
    out: &mut Vec<u8>,
    text: &'a str,
    node: Node<'_, '_>,
    rendered: &mut Rendered<'a>,
) -> Result<(), C14nError> {
    let prefix = element_prefix(text, node)?;
    out.extend_from_slice(b"</");
    write_qname(out, prefix, node.tag_name().name());
    out.push(b'>');
    rendered.close();
    Ok(())
}

fn write_qname(out: &mut Vec<u8>, prefix: Option<&str>, local: &str) {
    if let Some(p) = prefix {
        out.extend_from_slice(p.as_bytes());
        out.push(b':');
    }
    out.extend_from_slice(local.as_bytes());
}

/// Text node escaping, Canonical XML 1.0 section 2.3.
fn escape_text(out: &mut Vec<u8>, s: &str) {
    for b in s.bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'\r' => out.extend_from_slice(b"&#xD;"),
            _ => out.push(b),
        }
    }
}

/// Attribute value escaping, Canonical XML 1.0 section 2.3.
fn escape_attribute(out: &mut Vec<u8>, s: &str) {
    for b in s.bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            b'\t' => out.extend_from_slice(b"&#x9;"),
            b'\n' => out.extend_from_slice(b"&#xA;"),
            b'\r' => out.extend_from_slice(b"&#xD;"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c14n(xml: &str, method: Method) -> String {
        let doc = roxmltree::Document::parse(xml).expect("test XML");
        let out = canonicalize(doc.root(), None, method, method.with_comments()).expect("c14n");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn exclusive_c14n_declares_only_visibly_used_namespaces_sorted_and_escapes() {
        let xml = "<?xml version=\"1.0\"?>\n<!--c--><a:r xmlns:a=\"urn:a\" xmlns:b=\"urn:b\" xmlns=\"urn:d\" z=\"1\" b:y=\"&quot;\t&#9;&#10;&#13;\" a:x=\"2\"><e b:k=\"v\"/>t&amp;&lt;&gt;&#13;\r\n</a:r><?pi data?>";
        assert_eq!(
            c14n(xml, Method::Exclusive),
            "<a:r xmlns:a=\"urn:a\" xmlns:b=\"urn:b\" z=\"1\" a:x=\"2\" b:y=\"&quot; &#x9;&#xA;&#xD;\"><e xmlns=\"urn:d\" b:k=\"v\"></e>t&amp;&lt;&gt;&#xD;\n</a:r>\n<?pi data?>"
        );
        assert_eq!(
            c14n(xml, Method::ExclusiveWithComments),
            "<!--c-->\n<a:r xmlns:a=\"urn:a\" xmlns:b=\"urn:b\" z=\"1\" a:x=\"2\" b:y=\"&quot; &#x9;&#xA;&#xD;\"><e xmlns=\"urn:d\" b:k=\"v\"></e>t&amp;&lt;&gt;&#xD;\n</a:r>\n<?pi data?>"
        );
    }

    #[test]
    fn inclusive_c14n_declares_every_namespace_once_and_undeclares_the_default() {
        let xml = "<r xmlns=\"urn:d\" xmlns:a=\"urn:a\"><a:e><f xmlns=\"\"/></a:e></r>";
        assert_eq!(
            c14n(xml, Method::Inclusive),
            "<r xmlns=\"urn:d\" xmlns:a=\"urn:a\"><a:e><f xmlns=\"\"></f></a:e></r>"
        );
    }

    #[test]
    fn exclusive_c14n_of_a_subtree_redeclares_what_it_uses_and_omits_a_subtree() {
        let xml =
            "<r xmlns=\"urn:d\" xmlns:a=\"urn:a\"><a:e><f/><g xml:lang=\"en\">x</g></a:e></r>";
        let doc = roxmltree::Document::parse(xml).expect("test XML");
        let e = doc.root_element().first_child().expect("a:e");
        let f = e.first_child().expect("f");
        let out = canonicalize(e, Some(f.id()), Method::Exclusive, false).expect("c14n");
        assert_eq!(
            String::from_utf8(out).expect("UTF-8"),
            "<a:e xmlns:a=\"urn:a\"><g xmlns=\"urn:d\" xml:lang=\"en\">x</g></a:e>"
        );
    }

    #[test]
    fn the_same_uri_under_two_prefixes_keeps_the_prefix_as_written() {
        let xml = "<r xmlns:n=\"urn:s\"><s:x xmlns:s=\"urn:s\"/></r>";
        assert_eq!(
            c14n(xml, Method::Exclusive),
            "<r><s:x xmlns:s=\"urn:s\"></s:x></r>"
        );
    }

    /// What keeps deep nesting linear: the namespaces in effect are one map with an entry per
    /// prefix, however deep the output, and each open element remembers only what it
    /// changed, so a lookup never searches the ancestors frame by frame.
    #[test]
    fn namespaces_in_effect_hold_one_entry_per_prefix_at_any_depth() {
        const DEPTH: usize = 100_000;
        let mut rendered = Rendered::default();
        for i in 0..DEPTH {
            let uri = if i % 2 == 0 { "urn:d" } else { "urn:e" };
            rendered.open(&[(None, uri), (Some("a"), "urn:a")]);
        }
        assert_eq!(rendered.in_effect.len(), 2, "one entry per prefix");
        assert_eq!(rendered.undo.len(), DEPTH, "one frame per open element");
        assert!(rendered.undo.iter().all(|frame| frame.len() == 2));
        assert_eq!(rendered.get(None), Some("urn:e"));
        assert_eq!(rendered.get(Some("a")), Some("urn:a"));
        rendered.close();
        assert_eq!(rendered.get(None), Some("urn:d"), "the parent's again");
        for _ in 1..DEPTH {
            rendered.close();
        }
        assert!(rendered.in_effect.is_empty() && rendered.undo.is_empty());
        assert_eq!(
            rendered.get(None),
            Some(""),
            "no default namespace declared"
        );
        assert_eq!(rendered.get(Some("a")), None);
    }

    /// A hostile depth is canonicalized without overflowing the stack; that it stays linear
    /// is `namespaces_in_effect_hold_one_entry_per_prefix_at_any_depth`, not a stopwatch.
    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        const DEPTH: usize = 100_000;
        let xml = format!(
            "<a:r xmlns:a=\"urn:a\" xmlns=\"urn:d\">{}{}</a:r>",
            "<a:e><e>".repeat(DEPTH),
            "</e></a:e>".repeat(DEPTH)
        );
        let options = roxmltree::ParsingOptions {
            nodes_limit: u32::MAX,
            ..roxmltree::ParsingOptions::default()
        };
        let doc = roxmltree::Document::parse_with_options(&xml, options).expect("test XML");
        let out = canonicalize(doc.root(), None, Method::Exclusive, false).expect("c14n");
        let out = String::from_utf8(out).expect("UTF-8");
        assert!(out.starts_with("<a:r xmlns:a=\"urn:a\"><a:e><e xmlns=\"urn:d\"><a:e><e>"));
        assert_eq!(out.matches("xmlns").count(), 2);
    }
}
