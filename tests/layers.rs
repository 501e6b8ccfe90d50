//! The layers of `src/` point down (docs/architecture.md): a module may import only from a
//! layer below its own, and the files of one folder import each other without a cycle. A
//! small source scan: every `crate::<module>` and `super::<file>` reference counts, in `use`
//! lines and in paths alike.
//!
//! `KNOWN_UPWARD` lists upward imports tolerated for a while (none today); the test fails on
//! any other upward import, and on a listed one that no longer exists (so the list only
//! shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules, bottom up. A module may import modules of a lower layer only (and its
/// own files).
const LAYERS: &[&[&str]] = &[
    // 1. country codes and byte helpers, then certificate parsing (`country`, `hex` and
    //    `cert` are the crate psp-cert, which depends on no workspace crate:
    //    tests/workspace.rs)
    &["country", "hex", "fetch", "bounded"],
    &["cert", "telemetry"],
    // 2. reference data
    &["trust", "register", "revocation"],
    // 3. the pure check
    &["check"],
    // 4. the service around the check, the access rule, shared HTTP plumbing, the sandbox
    &["service", "policy", "server", "sandbox"],
    // 5. faces
    &["api", "gateway", "admin"],
    // 6. configuration: parses into the lower layers' own types
    &["config"],
    // 7. start-up
    &["app"],
    // 8. the command line
    &["cli"],
];

/// Upward imports tolerated for now (module → module it must stop importing): none.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Folders whose files still import each other in a cycle (none left).
const KNOWN_FOLDER_CYCLES: &[&str] = &[];

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` has no layer: add it to LAYERS"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers that follow each occurrence of `prefix` in `text`.
fn referenced(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before_ok = rest[..at]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[at + prefix.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if before_ok && !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// Comments and doc comments removed: links in prose are not imports.
fn code_only(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

struct Source {
    /// Path below src/ without `.rs`, e.g. `check/path`.
    rel: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|p| Source {
            rel: p
                .strip_prefix(&src)
                .expect("below src")
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/"),
            code: code_only(&std::fs::read_to_string(&p).expect("read")),
        })
        .collect()
}

#[test]
fn imports_are_written_so_the_scan_sees_them() {
    // `use crate::{a, b}` and `super::super::` would hide an import from the scan below.
    for s in sources() {
        for hidden in ["crate::{", "super::super::"] {
            assert!(
                !s.code.contains(hidden),
                "src/{}.rs: write `{hidden}` imports one module per path",
                s.rel
            );
        }
    }
}

#[test]
fn modules_import_only_from_layers_below_their_own() {
    let mut upward: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for s in sources() {
        let top = s.rel.split('/').next().expect("segment").to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let own = layer_of(&top);
        for target in referenced(&s.code, "crate::") {
            if target == top {
                continue;
            }
            if layer_of(&target) >= own {
                upward
                    .entry((top.clone(), target))
                    .or_default()
                    .insert(s.rel.clone());
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    let new: Vec<String> = upward
        .iter()
        .filter(|(k, _)| !known.contains(*k))
        .map(|((a, b), files)| format!("{a} imports {b} (layer not below it): {files:?}"))
        .collect();
    let gone: Vec<String> = known
        .iter()
        .filter(|k| !upward.contains_key(*k))
        .map(|(a, b)| format!("{a} → {b} is gone: remove it from KNOWN_UPWARD"))
        .collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "{}",
        [new, gone].concat().join("\n")
    );
}

#[test]
fn files_of_one_folder_import_each_other_without_a_cycle() {
    // Per folder: file → files of the same folder it references (`super::x` from a child
    // file, `crate::folder::x`, or `self::x`/`x::` from the folder's own `folder.rs`).
    let all = sources();
    let mut folders: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in &all {
        let parts: Vec<&str> = s.rel.split('/').collect();
        let (folder, file) = match parts.as_slice() {
            [folder, file] => ((*folder).to_owned(), (*file).to_owned()),
            _ => continue,
        };
        let siblings: BTreeSet<String> = all
            .iter()
            .filter_map(|o| {
                let p: Vec<&str> = o.rel.split('/').collect();
                (p.len() == 2 && p[0] == folder).then(|| p[1].to_owned())
            })
            .collect();
        let mut refs = referenced(&s.code, "super::");
        refs.extend(referenced(&s.code, &format!("crate::{folder}::")));
        let edges: BTreeSet<String> = refs
            .into_iter()
            .filter(|r| r != &file && siblings.contains(r))
            .collect();
        folders.entry(folder).or_default().insert(file, edges);
    }
    let mut cyclic = Vec::new();
    for (folder, graph) in &folders {
        if let Some(cycle) = find_cycle(graph) {
            cyclic.push((folder.clone(), cycle));
        }
    }
    let unexpected: Vec<String> = cyclic
        .iter()
        .filter(|(f, _)| !KNOWN_FOLDER_CYCLES.contains(&f.as_str()))
        .map(|(f, c)| format!("src/{f}/: {}", c.join(" → ")))
        .collect();
    let gone: Vec<String> = KNOWN_FOLDER_CYCLES
        .iter()
        .filter(|f| !cyclic.iter().any(|(c, _)| c == *f))
        .map(|f| format!("src/{f}/ has no cycle any more: remove it from KNOWN_FOLDER_CYCLES"))
        .collect();
    assert!(
        unexpected.is_empty() && gone.is_empty(),
        "{}",
        [unexpected, gone].concat().join("\n")
    );
}

/// A cycle in `graph`, if there is one (depth-first search with colours).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(node, graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}
