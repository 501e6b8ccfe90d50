//! The workspace's dependency graph is the layering (docs/architecture.md): a crate may depend
//! only on the workspace crates written beside it below. Cargo then refuses any import of a
//! crate not depended on, so this test watches the edges, and Cargo holds the imports.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Every workspace crate and the workspace crates it may depend on (normal and build
/// dependencies; dev-dependencies are the tests' business). Written once, here and in
/// docs/architecture.md.
const ALLOWED: &[(&str, &[&str])] = &[
    // Certificates, names, QC statements, country codes, hex: the bottom layer.
    ("psp-cert", &[]),
    // Everything above it, still one crate (issue 23 goes on cutting it).
    ("psp-gateway", &["psp-cert"]),
    // Test support (a dev-dependency only): below every crate, so any crate's tests can use it.
    ("psp-testkit", &[]),
];

/// The workspace-internal edges of `metadata` (`cargo metadata --format-version 1 --no-deps`)
/// that [`ALLOWED`] does not allow, and the workspace crates it does not list.
fn violations(metadata: &Value) -> Vec<String> {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(krate, deps)| (*krate, deps.iter().copied().collect()))
        .collect();
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut out = Vec::new();
    for package in packages {
        let name = package["name"].as_str().expect("name");
        let Some(may) = allowed.get(name) else {
            out.push(format!(
                "{name} is not in ALLOWED: place it in the layering"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let dep_name = dep["name"].as_str().expect("dependency name");
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if kind != "dev" && members.contains(dep_name) && !may.contains(dep_name) {
                out.push(format!("{name} depends on {dep_name} ({kind})"));
            }
        }
    }
    out
}

fn workspace_metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON")
}

#[test]
fn every_workspace_crate_depends_only_on_the_crates_below_it() {
    let metadata = workspace_metadata();
    assert_eq!(violations(&metadata), Vec::<String>::new());
    let names: BTreeSet<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let listed: BTreeSet<&str> = ALLOWED.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, listed, "ALLOWED names every workspace crate");
}

#[test]
fn an_upward_edge_is_reported() {
    let mut metadata = workspace_metadata();
    // The bottom crate made to depend on the one above it, as an edit of its Cargo.toml would.
    let cert = metadata["packages"]
        .as_array_mut()
        .expect("packages")
        .iter_mut()
        .find(|p| p["name"] == "psp-cert")
        .expect("psp-cert is a member");
    cert["dependencies"]
        .as_array_mut()
        .expect("dependencies")
        .push(serde_json::json!({"name": "psp-gateway", "kind": null}));
    assert_eq!(
        violations(&metadata),
        ["psp-cert depends on psp-gateway (normal)"]
    );
}
