//! docs/configuration.md lists every key the configuration parser accepts: this test reads
//! the configuration structures from the source (every `pub` field of each `Deserialize`
//! struct below, as a TOML key at its path) and fails naming any key the page lacks, and any
//! configuration struct the table below does not place. It also parses every TOML block of
//! the README and of the page's examples, so that they stay valid configuration.

use std::collections::BTreeSet;
use std::path::Path;

/// Each configuration struct and where its keys sit in `gateway.toml`.
const PLACES: &[(&str, &str, &str)] = &[
    ("src/config.rs", "Config", ""),
    ("src/config.rs", "AuditConfig", "audit."),
    ("src/config.rs", "EvidenceConfig", "evidence."),
    ("src/config.rs", "PreviousKey", "evidence.previous_keys[]."),
    ("src/config.rs", "SandboxConfig", "sandbox."),
    ("src/config.rs", "ChecksConfig", "checks."),
    ("src/config.rs", "TrustConfig", "trust."),
    ("src/config.rs", "MirrorConfig", "trust.mirrors[]."),
    ("src/config.rs", "LotlConfig", "trust.sources[].lotl."),
    ("src/config.rs", "TrustSourceConfig", "trust.sources[]."),
    (
        "src/config.rs",
        "PemIssuerConfig",
        "trust.sources[].issuers[].",
    ),
    ("src/config.rs", "AdminConfig", "admin."),
    ("src/config.rs", "LimitsConfig", "limits."),
    ("src/config.rs", "DangerConfig", "danger."),
    (
        "crates/psp-service/src/register/config.rs",
        "RegisterConfig",
        "registers.",
    ),
    (
        "crates/psp-service/src/register/config.rs",
        "FcaSettings",
        "registers.fca.",
    ),
    (
        "crates/psp-service/src/register/config.rs",
        "RegisterFileConfig",
        "registers.files[].",
    ),
    (
        "crates/psp-service/src/revocation/config.rs",
        "RevocationConfig",
        "revocation.",
    ),
    (
        "crates/psp-service/src/service/config.rs",
        "ResultsConfig",
        "results.",
    ),
    ("crates/psp-faces/src/api/config.rs", "ApiConfig", "api."),
    (
        "crates/psp-faces/src/api/config.rs",
        "FailedLoginConfig",
        "api.failed_logins.",
    ),
    (
        "crates/psp-faces/src/api/config.rs",
        "Credential",
        "api.credentials[].",
    ),
    (
        "crates/psp-server/src/shared.rs",
        "SharedStateConfig",
        "shared_state.",
    ),
    // One type for both sections' rate limits, beside the limiter it configures.
    (
        "crates/psp-server/src/limiter.rs",
        "RateLimitConfig",
        "api.rate_limit.",
    ),
    (
        "crates/psp-server/src/limiter.rs",
        "RateLimitConfig",
        "gateway.rate_limit.",
    ),
    (
        "crates/psp-faces/src/gateway/config.rs",
        "GatewayConfig",
        "gateway.",
    ),
    (
        "crates/psp-faces/src/gateway/config.rs",
        "RouteConfig",
        "gateway.routes[].",
    ),
    (
        "crates/psp-faces/src/gateway/config.rs",
        "IdentityHeaderNames",
        "gateway.identity_headers.",
    ),
    ("crates/psp-server/src/lib.rs", "TlsFiles", "api.tls."),
    (
        "crates/psp-faces/src/forward_auth.rs",
        "ForwardAuthConfig",
        "forward_auth.",
    ),
    (
        "crates/psp-faces/src/ext_authz.rs",
        "ExtAuthzConfig",
        "ext_authz.",
    ),
    (
        "crates/psp-faces/src/ext_authz.rs",
        "ExtAuthzTls",
        "ext_authz.tls.",
    ),
    (
        "crates/psp-faces/src/forward_auth.rs",
        "CallerConfig",
        "forward_auth.callers[].",
    ),
];

/// Keys documented in the page's tables: the first backticked cell of each row.
fn documented(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .map(str::to_owned)
        .collect()
}

/// The `pub` fields of `struct name` in `source` that serde reads (not `#[serde(skip)]`).
fn fields(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("struct {name} not found"));
    let body = &source[start..];
    let body = &body[..body.find("\n}").expect("end of struct")];
    let mut out = Vec::new();
    let mut skipped = false;
    for line in body.lines().map(str::trim) {
        if line.starts_with("#[serde(") && (line.contains("skip)") || line == "#[serde(skip)]") {
            skipped = true;
        }
        if let Some(rest) = line.strip_prefix("pub ")
            && let Some((field, _)) = rest.split_once(':')
            && !field.contains(' ')
        {
            if !skipped {
                out.push(field.to_owned());
            }
            skipped = false;
        }
    }
    out
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_key_the_parser_accepts_is_in_docs_configuration_md() {
    let page = std::fs::read_to_string(root().join("docs/configuration.md")).expect("page");
    let keys = documented(&page);
    let mut missing = Vec::new();
    for (file, name, prefix) in PLACES {
        let source = std::fs::read_to_string(root().join(file)).expect("source");
        let found = fields(&source, name);
        assert!(!found.is_empty(), "{name} has no fields?");
        for field in found {
            let key = format!("{prefix}{field}");
            // `gateway.tls.*` has the same fields as `api.tls.*`.
            if !keys.contains(&key) {
                missing.push(format!("{key} ({name} in {file})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys missing from docs/configuration.md:\n{}",
        missing.join("\n")
    );
    for key in ["gateway.tls.cert", "gateway.tls.key"] {
        assert!(keys.contains(key), "{key}");
    }
}

#[test]
fn every_configuration_struct_is_placed() {
    // A new Deserialize struct in a configuration file must be placed above (or its keys
    // would be missed).
    let placed: BTreeSet<&str> = PLACES.iter().map(|(_, n, _)| *n).collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for file in [
        "src/config.rs",
        "crates/psp-service/src/register/config.rs",
        "crates/psp-service/src/revocation/config.rs",
        "crates/psp-faces/src/api/config.rs",
        "crates/psp-faces/src/gateway/config.rs",
        "crates/psp-server/src/limiter.rs",
        "crates/psp-server/src/shared.rs",
        "crates/psp-service/src/service/config.rs",
        "crates/psp-faces/src/forward_auth.rs",
        "crates/psp-faces/src/ext_authz.rs",
    ] {
        let source = std::fs::read_to_string(root().join(file)).expect("source");
        let mut rest = source.as_str();
        while let Some(i) = rest.find("Deserialize") {
            rest = &rest[i + 1..];
            let Some(j) = rest.find("pub struct ") else {
                break;
            };
            // Only a derive directly above the struct counts.
            if rest[..j].matches("\npub ").count() > 0 || rest[..j].contains("impl") {
                continue;
            }
            let name: String = rest[j + "pub struct ".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            assert!(
                placed.contains(name.as_str()),
                "{file}: struct {name} derives Deserialize but has no place in tests/configuration_docs.rs"
            );
            seen.insert(name);
        }
    }
    // The scan found every placed struct of these files (so it does look).
    let scanned: BTreeSet<&str> = PLACES
        .iter()
        .filter(|(f, _, _)| *f != "crates/psp-server/src/lib.rs")
        .map(|(_, n, _)| *n)
        .collect();
    assert_eq!(
        seen.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        scanned
    );
}

/// Every ```toml block of `text`.
fn toml_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("```toml\n") {
        let after = &rest[i + 8..];
        let end = after.find("```").expect("closed block");
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

#[test]
fn the_readme_and_the_docs_toml_blocks_are_valid_toml() {
    for file in [
        "README.md",
        "docs/configuration.md",
        "docs/registers.md",
        "docs/trusted-lists.md",
    ] {
        let text = std::fs::read_to_string(root().join(file)).expect("read");
        for (i, block) in toml_blocks(&text).iter().enumerate() {
            if let Err(e) = block.parse::<toml::Table>() {
                panic!(
                    "{file}: TOML block {} is not valid TOML: {e}\n{block}",
                    i + 1
                );
            }
        }
    }
}

/// A deployment's file written before `[results]` existed must not load with its cache
/// settings silently dropped: each old key is refused, naming where it is written now.
#[test]
fn the_result_cache_keys_that_left_api_are_refused_with_their_new_place() {
    let text = std::fs::read_to_string(root().join("gateway.toml")).expect("gateway.toml");
    for (old, new) in [
        ("result_ttl_seconds", "ttl_seconds"),
        ("result_cache_entries", "cache_entries"),
    ] {
        let edited = text.replace(
            "listen = \"127.0.0.1:8080\"",
            &format!("listen = \"127.0.0.1:8080\"\n{old} = 60"),
        );
        let error = psp_gateway::Config::from_toml(
            &edited,
            Path::new("gateway.toml"),
            root().to_path_buf(),
        )
        .err()
        .unwrap_or_else(|| panic!("api.{old} was accepted"))
        .to_string();
        assert!(
            error.contains(&format!("api.{old} has moved")) && error.contains(new),
            "{error}"
        );
        assert!(error.contains("[results]"), "{error}");
    }
}

/// `gateway.rate_limit` takes `api.rate_limit`'s settings and their checks: a quota of
/// nothing, or an IPv6 block no address fits, is refused rather than read some way.
#[test]
fn a_gateway_rate_limit_of_nothing_is_refused() {
    let text = std::fs::read_to_string(root().join("gateway.toml")).expect("gateway.toml");
    for limit in [
        "{ requests = 0, period_seconds = 60 }",
        "{ requests = 10, period_seconds = 0 }",
        "{ requests = 10, period_seconds = 60, ipv6_prefix = 0 }",
        "{ requests = 10, period_seconds = 60, ipv6_prefix = 129 }",
        "{ requests = 10, period_seconds = 60, max_tracked_sources = 0 }",
    ] {
        let edited = text.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"sandbox-echo\"\nrate_limit = {limit}"),
        );
        assert!(
            psp_gateway::Config::from_toml(
                &edited,
                Path::new("gateway.toml"),
                root().to_path_buf()
            )
            .is_err(),
            "gateway.rate_limit = {limit} was accepted"
        );
    }
}
