//! The shape of a trusted list's XML, bounded before any tree is built.
//!
//! roxmltree, like most tree parsers, spends more than linear time on some shapes: it checks
//! every attribute of an element against the others (quadratic in attributes per element) and
//! copies the namespaces in scope into every element that declares one (quadratic in nesting
//! when each level declares a prefix, and the canonicaliser's work grows with it). A root
//! element with 200,000 attributes (2.3 MB) took 37 s to parse; 6,000 nested elements each
//! declaring a prefix (166 KB) took 77 s, before any signature was looked at. roxmltree has
//! no limit on either, so [`check`] reads the bytes once, linearly, counting what those costs
//! grow with, and refuses a document over any budget below before roxmltree sees it.
//!
//! The budgets are measured on the real lists in `../shared/data/trusted-lists/` (the CZ and
//! IE lists of 2019, the LOTLs of 2019 and 2024), with a wide margin:
//!
//! | shape | largest real value | budget |
//! |---|---|---|
//! | depth of element nesting | 15 (CZ) | [`MAX_XML_DEPTH`] = 64 |
//! | attributes on one element, namespace declarations included | 8 (2 + 6 declarations) | [`MAX_XML_ATTRIBUTES`] = 32 |
//! | namespace declarations in scope (summed over the open elements) | 8 | [`MAX_XML_NAMESPACES_IN_SCOPE`] = 32 |
//! | elements in the document | 3,762 (CZ, 640 KB) | [`MAX_XML_ELEMENTS`] = 500,000 |
//!
//! The scan is not a parser: it finds tags, comments, processing instructions and CDATA
//! sections, and counts. Where it meets something that is not well-formed it stops counting
//! and lets roxmltree report the error (roxmltree stops at the same point or earlier, since
//! everything the scan understands is well-formed XML and everything well-formed is
//! understood, a document type declaration aside, which roxmltree refuses).

use memchr::memmem;

/// Deepest element nesting. The real lists nest at most 15 levels (the CZ list's
/// `Qualifications` criteria); `CriteriaList` nesting is itself capped at
/// [`super::MAX_CRITERIA_DEPTH`] (8 levels, 2 elements each). 64 is four times the deepest
/// real list.
pub const MAX_XML_DEPTH: usize = 64;

/// Most attributes on one element, namespace declarations included. The real lists have at
/// most 8 (a root with 6 namespace declarations, `Id` and `TSLTag`). 32 is four times that;
/// roxmltree's duplicate check is quadratic in this number.
pub const MAX_XML_ATTRIBUTES: usize = 32;

/// Most namespace declarations in scope at any element, counted over the open elements
/// (a redeclaration counts again). The real lists have at most 8; 32 is four times that.
/// What roxmltree copies per element grows with this number.
pub const MAX_XML_NAMESPACES_IN_SCOPE: usize = 32;

/// Most elements in one document. The CZ list has 3,762 elements in 640 KB (one per 170
/// bytes); a list of that shape at [`super::MAX_TSL_BYTES`] would have about 200,000.
/// 500,000 is two and a half times that.
pub const MAX_XML_ELEMENTS: usize = 500_000;

/// A document whose shape is over a budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "XML shape refused before parsing: {what} over the budget {budget} = {limit} (line {line}, column {col})"
)]
pub struct ShapeError {
    /// The budget's name, as the constant is spelled (`MAX_XML_ATTRIBUTES`, …).
    pub budget: &'static str,
    /// What was counted, for people.
    pub what: &'static str,
    /// The budget's value.
    pub limit: usize,
    /// Where the budget was exceeded (1-based).
    pub line: u32,
    /// The column where the budget was exceeded (1-based).
    pub col: u32,
}

/// Counts the document's shape in one linear pass; refuses it at the first budget exceeded.
/// Each `<` starts markup that is skipped (`skip_markup`: a processing instruction, a
/// comment, a CDATA section), an end tag or a start tag, which `Shape` counts.
pub fn check(xml: &[u8]) -> Result<(), ShapeError> {
    let mut shape = Shape::default();
    let mut i = 0usize;
    while let Some(lt) = memchr::memchr(b'<', &xml[i..]) {
        let start = i + lt;
        let rest = &xml[start..];
        let len = if rest.starts_with(b"<?") || rest.starts_with(b"<!") {
            skip_markup(rest)
        } else if rest.starts_with(b"</") {
            shape.end_tag(rest)
        } else {
            let Some(tag) = start_tag(rest) else {
                return Ok(());
            };
            if let Err(budget) = shape.start_tag(&tag) {
                let (line, col) = super::xsd::line_col(&xml[..start.min(xml.len())]);
                return Err(ShapeError {
                    budget: budget.name,
                    what: budget.what,
                    limit: budget.limit,
                    line,
                    col,
                });
            }
            Some(tag.len)
        };
        match len {
            Some(len) => i = start + len,
            // Not well-formed: roxmltree reports it.
            None => return Ok(()),
        }
    }
    Ok(())
}

/// A budget of the module documentation's table.
struct Budget {
    name: &'static str,
    what: &'static str,
    limit: usize,
}

const ELEMENTS: Budget = Budget {
    name: "MAX_XML_ELEMENTS",
    what: "elements in the document",
    limit: MAX_XML_ELEMENTS,
};
const ATTRIBUTES: Budget = Budget {
    name: "MAX_XML_ATTRIBUTES",
    what: "attributes on one element",
    limit: MAX_XML_ATTRIBUTES,
};
const NAMESPACES_IN_SCOPE: Budget = Budget {
    name: "MAX_XML_NAMESPACES_IN_SCOPE",
    what: "namespace declarations in scope",
    limit: MAX_XML_NAMESPACES_IN_SCOPE,
};
const DEPTH: Budget = Budget {
    name: "MAX_XML_DEPTH",
    what: "depth of element nesting",
    limit: MAX_XML_DEPTH,
};

/// The length of the processing instruction, comment or CDATA section at the start of
/// `rest`; `None` when it is not closed, or for a document type declaration (which roxmltree
/// refuses).
fn skip_markup(rest: &[u8]) -> Option<usize> {
    if rest.starts_with(b"<?") {
        memmem::find(&rest[2..], b"?>").map(|end| 2 + end + 2)
    } else if rest.starts_with(b"<!--") {
        memmem::find(&rest[4..], b"-->").map(|end| 4 + end + 3)
    } else if rest.starts_with(b"<![CDATA[") {
        memmem::find(&rest[9..], b"]]>").map(|end| 9 + end + 3)
    } else {
        None
    }
}

/// The shape counted so far.
#[derive(Default)]
struct Shape {
    /// Namespace declarations of each open element; their sum is what is in scope.
    open: Vec<usize>,
    in_scope: usize,
    elements: usize,
}

impl Shape {
    /// Counts a start tag, checking the budgets in order: elements, attributes, namespaces
    /// in scope, depth.
    fn start_tag(&mut self, tag: &StartTag) -> Result<(), Budget> {
        self.elements += 1;
        if self.elements > MAX_XML_ELEMENTS {
            return Err(ELEMENTS);
        }
        if tag.attributes > MAX_XML_ATTRIBUTES {
            return Err(ATTRIBUTES);
        }
        if self.in_scope + tag.declarations > MAX_XML_NAMESPACES_IN_SCOPE {
            return Err(NAMESPACES_IN_SCOPE);
        }
        if self.open.len() >= MAX_XML_DEPTH {
            return Err(DEPTH);
        }
        if !tag.empty {
            self.open.push(tag.declarations);
            self.in_scope += tag.declarations;
        }
        Ok(())
    }

    /// Closes the innermost open element at the end tag at the start of `rest`; its length,
    /// or `None` when it is not closed or closes nothing.
    fn end_tag(&mut self, rest: &[u8]) -> Option<usize> {
        let len = memchr::memchr(b'>', rest)? + 1;
        let declared = self.open.pop()?;
        self.in_scope -= declared;
        Some(len)
    }
}

/// What a start tag holds.
struct StartTag {
    /// Bytes from `<` to `>` inclusive.
    len: usize,
    attributes: usize,
    declarations: usize,
    /// `<a/>`.
    empty: bool,
}

/// Reads the start tag at the head of `tag` (which starts with `<`); `None` where it is not
/// well-formed (roxmltree will say why). Attribute values are skipped whole, so a `>` inside
/// one does not end the tag. Linear in the tag's length.
fn start_tag(tag: &[u8]) -> Option<StartTag> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let name_end = |b: u8| is_space(b) || matches!(b, b'/' | b'>' | b'=' | b'<');
    let mut i = 1;
    // The element name.
    let name_start = i;
    while i < tag.len() && !name_end(tag[i]) {
        i += 1;
    }
    if i == name_start {
        return None;
    }
    let (mut attributes, mut declarations) = (0usize, 0usize);
    loop {
        while i < tag.len() && is_space(tag[i]) {
            i += 1;
        }
        match tag.get(i)? {
            b'>' => {
                return Some(StartTag {
                    len: i + 1,
                    attributes,
                    declarations,
                    empty: false,
                });
            }
            b'/' => {
                return (tag.get(i + 1) == Some(&b'>')).then_some(StartTag {
                    len: i + 2,
                    attributes,
                    declarations,
                    empty: true,
                });
            }
            _ => {}
        }
        // An attribute: name, `=`, quoted value.
        let attr_start = i;
        while i < tag.len() && !name_end(tag[i]) {
            i += 1;
        }
        if i == attr_start {
            return None;
        }
        let name = &tag[attr_start..i];
        while i < tag.len() && is_space(tag[i]) {
            i += 1;
        }
        if tag.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        while i < tag.len() && is_space(tag[i]) {
            i += 1;
        }
        let quote = *tag.get(i)?;
        if quote != b'"' && quote != b'\'' {
            return None;
        }
        let close = memchr::memchr(quote, &tag[i + 1..])?;
        i += 1 + close + 1;
        attributes += 1;
        if name == b"xmlns" || name.starts_with(b"xmlns:") {
            declarations += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(xml: &str) -> Option<&'static str> {
        check(xml.as_bytes()).err().map(|e| e.budget)
    }

    #[test]
    fn every_real_list_is_within_every_budget() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("../shared/data/trusted-lists");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("shared data") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "xml") {
                let bytes = std::fs::read(&path).expect("read");
                assert_eq!(check(&bytes), Ok(()), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 5, "{seen} lists");
    }

    #[test]
    fn a_root_with_200000_attributes_is_refused_naming_the_attribute_budget() {
        let attrs: String = (0..200_000).map(|i| format!(" a{i}=\"\"")).collect();
        let xml = format!("<TrustServiceStatusList{attrs}/>");
        let e = check(xml.as_bytes()).expect_err("refused");
        assert_eq!(e.budget, "MAX_XML_ATTRIBUTES");
        assert_eq!((e.line, e.col), (1, 1));
        assert!(
            e.to_string()
                .contains("attributes on one element over the budget MAX_XML_ATTRIBUTES = 32")
        );
    }

    #[test]
    fn six_thousand_nested_namespace_declarations_are_refused_naming_the_namespace_budget() {
        let open: String = (0..6000)
            .map(|i| format!("<p{i}:e xmlns:p{i}=\"urn:{i}\">"))
            .collect();
        let close: String = (0..6000).rev().map(|i| format!("</p{i}:e>")).collect();
        assert_eq!(
            budget(&format!("{open}{close}")),
            Some("MAX_XML_NAMESPACES_IN_SCOPE")
        );
    }

    #[test]
    fn deep_nesting_without_namespaces_is_refused_naming_the_depth_budget() {
        let deep = format!("{}{}", "<a>".repeat(65), "</a>".repeat(65));
        assert_eq!(budget(&deep), Some("MAX_XML_DEPTH"));
        let ok = format!("{}{}", "<a>".repeat(64), "</a>".repeat(64));
        assert_eq!(budget(&ok), None);
        // An empty element at the limit is an element one deeper too.
        let empty = format!("{}<b/>{}", "<a>".repeat(64), "</a>".repeat(64));
        assert_eq!(budget(&empty), Some("MAX_XML_DEPTH"));
    }

    #[test]
    fn many_small_elements_are_refused_naming_the_element_budget() {
        let xml = format!("<r>{}</r>", "<a/>".repeat(MAX_XML_ELEMENTS));
        assert_eq!(budget(&xml), Some("MAX_XML_ELEMENTS"));
    }

    #[test]
    fn declarations_leave_scope_with_their_element() {
        // Thirty-two siblings each declaring one prefix never have more than one in scope.
        let siblings: String = (0..100)
            .map(|i| format!("<p:e xmlns:p=\"urn:{i}\"/><q:e xmlns:q=\"u\"></q:e>"))
            .collect();
        assert_eq!(budget(&format!("<r>{siblings}</r>")), None);
    }

    #[test]
    fn markup_inside_values_comments_cdata_and_instructions_is_not_counted() {
        let attrs: String = (0..40).map(|i| format!(" a{i}=\"\"")).collect();
        let hidden = format!(
            "<r a='<x{attrs}>' b=\"/>\"><!-- <x{attrs}> --><![CDATA[<x{attrs}>]]><?pi <x{attrs}>?></r>"
        );
        assert_eq!(budget(&hidden), None);
    }
}
