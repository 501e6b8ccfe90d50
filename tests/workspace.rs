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
    // The pure decision: trust data, revocation evidence, registers, the check, the rule.
    ("psp-check", &["psp-cert"]),
    // Metrics, trace context and ids, log lines, trace export: what every layer reports
    // through.
    ("psp-telemetry", &["psp-cert"]),
    // The cached async service: loading, fetching, refreshing, caches, audit log.
    ("psp-service", &["psp-cert", "psp-check", "psp-telemetry"]),
    // Listeners and TLS: below the service (issue 41).
    ("psp-server", &["psp-cert", "psp-telemetry"]),
    // The sandbox PKI and its CRL/OCSP responder: test material, below the faces.
    ("psp-sandbox", &["psp-cert", "psp-check", "psp-service"]),
    // The faces: gateway, check endpoint, external authorisers, admin.
    (
        "psp-faces",
        &[
            "psp-cert",
            "psp-check",
            "psp-service",
            "psp-server",
            "psp-sandbox",
        ],
    ),
    // The binary: command line, configuration file, start-up.
    (
        "psp-gateway",
        &[
            "psp-cert",
            "psp-check",
            "psp-service",
            "psp-server",
            "psp-sandbox",
            "psp-faces",
        ],
    ),
    // Test support (a dev-dependency only): below every crate, so any crate's tests can use it.
    ("psp-testkit", &[]),
];

/// Crates the pure check must never have in its dependency tree, at any depth: the runtime,
/// HTTP, caches, TLS and sockets are the service's and the listeners'.
const NOT_UNDER_PSP_CHECK: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "moka",
    "rustls",
    "tokio-rustls",
    "hyper-rustls",
    "h2",
    "mio",
    "socket2",
    "arc-swap",
    "governor",
    "notify",
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

/// `cargo tree -p psp-check -e normal`, as crate names.
fn psp_check_tree() -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "psp-check",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_pure_check_has_no_runtime_http_cache_or_tls_crate_in_its_tree() {
    let tree = psp_check_tree();
    assert!(tree.contains("psp-cert"), "the tree was read: {tree:?}");
    let found: Vec<&str> = NOT_UNDER_PSP_CHECK
        .iter()
        .copied()
        .filter(|c| tree.contains(*c))
        .collect();
    assert_eq!(found, Vec::<&str>::new(), "under psp-check");
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

#[test]
fn the_pure_check_depending_on_the_service_is_reported() {
    let mut metadata = workspace_metadata();
    let check = metadata["packages"]
        .as_array_mut()
        .expect("packages")
        .iter_mut()
        .find(|p| p["name"] == "psp-check")
        .expect("psp-check is a member");
    check["dependencies"]
        .as_array_mut()
        .expect("dependencies")
        .push(serde_json::json!({"name": "psp-service", "kind": null}));
    assert_eq!(
        violations(&metadata),
        ["psp-check depends on psp-service (normal)"]
    );
}

/// The figures issue 23 brought to zero and issue 41 brought back to zero are held:
/// `scripts/code-figures --check` fails on a function of 80 lines or more without a
/// `// Whole:` reason, a `Result<_, String>`, a `dyn Any`, or an import circle between a
/// crate's top-level modules.
#[test]
fn the_code_figures_that_must_stay_at_zero_are_zero() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("python3")
        .arg(format!("{root}/scripts/code-figures"))
        .args(["--check", root])
        .output()
        .expect("python3 runs scripts/code-figures");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The check itself can fail: a crate with a circle between two modules, a function of 80
/// lines and a `Result<_, String>` is reported on each count.
#[test]
fn code_figures_reports_a_circle_a_long_function_and_a_string_error() {
    let dir = std::env::temp_dir().join(format!("code-figures-{}", std::process::id()));
    let src = dir.join("crates/demo/src");
    std::fs::create_dir_all(&src).expect("a scratch crate");
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").expect("lib.rs");
    std::fs::write(
        src.join("a.rs"),
        "pub(crate) fn f() -> Result<(), String> { crate::b::g(); Ok(()) }\n",
    )
    .expect("a.rs");
    let body = "    let _ = 1;\n".repeat(80);
    std::fs::write(
        src.join("b.rs"),
        format!("pub(crate) fn g() {{\n    let _ = crate::a::f();\n{body}}}\n"),
    )
    .expect("b.rs");
    std::fs::create_dir_all(dir.join("src")).expect("src");
    let out = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/code-figures"))
        .arg("--check")
        .arg(&dir)
        .output()
        .expect("python3 runs scripts/code-figures");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("demo: a <-> b"), "{text}");
    assert!(text.contains("functions >= 80 lines: 1"), "{text}");
    assert!(text.contains("Result<_, String>:      1"), "{text}");
}
