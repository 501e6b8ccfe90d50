//! `gateway.toml`: typed, `deny_unknown_fields`, defaults in one place, validated before any
//! port is bound. `psp-gateway config check` runs exactly this code.
//!
//! Relative paths in the file are resolved against the directory the file is in, so the
//! sandbox configuration works from any working directory.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::api::ApiConfig;
use crate::country::{self, CountryCode};
use crate::trust::{CertKind, QcCompliancePolicy, QtspSource, UntypedPolicy};

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub sandbox: SandboxConfig,
    #[serde(default)]
    pub checks: ChecksConfig,
    #[serde(default)]
    pub trust: TrustConfig,
    #[serde(default)]
    pub registers: crate::register::RegisterConfig,
    /// CRL and OCSP: timeouts, size caps, caches, allowed destinations.
    #[serde(default)]
    pub revocation: crate::revocation::RevocationConfig,
    /// The `GET /v1/psp/eidas` listener; off when absent.
    #[serde(default)]
    pub api: Option<ApiConfig>,
    /// The check service's result cache, which the endpoint and the gateway share.
    #[serde(default)]
    pub results: crate::service::ResultsConfig,
    /// The gateway listener in front of the bank's API; off when absent. One site, named
    /// `default`; a bank group with several writes `[[sites]]` instead.
    #[serde(default)]
    pub gateway: Option<crate::gateway::GatewayConfig>,
    /// The sites of a bank group, each a `[gateway]` of its own with a `name` (and, when
    /// several share a listener, its `server_names`). Instead of `[gateway]`.
    #[serde(default)]
    pub sites: Vec<crate::gateway::GatewayConfig>,
    /// Envoy's external authorisation over gRPC (Envoy, Istio, Envoy Gateway); off when
    /// absent.
    #[serde(default)]
    pub ext_authz: Option<crate::ext_authz::ExtAuthzConfig>,
    /// Forward-auth for the bank's own reverse proxy (nginx `auth_request`, Traefik
    /// `ForwardAuth`, Caddy `forward_auth`, Envoy's HTTP ext_authz); off when absent.
    #[serde(default)]
    pub forward_auth: Option<crate::forward_auth::ForwardAuthConfig>,
    /// The admin listener (`/healthz`, `/readyz`, sandbox CRL/OCSP); off when absent.
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// Limits shared by every listener.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Explicit, logged relaxations of the fail-closed defaults.
    #[serde(default)]
    pub danger: DangerConfig,
    /// The chained audit log (`telemetry::audit`); audit records go to the logs only when
    /// absent.
    #[serde(default)]
    pub audit: Option<AuditConfig>,
    /// Signed answers, decisions and checkpoints (docs/evidence.md); nothing is signed when
    /// absent.
    #[serde(default)]
    pub evidence: Option<EvidenceConfig>,
    /// Redis for the counters the replicas of a fleet share (docs/replicas.md); per-process
    /// counters when absent.
    #[serde(default)]
    pub shared_state: Option<crate::server::SharedStateConfig>,
    /// The directory relative paths are resolved against (set by [`Config::load`]).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The SHA-256 (hex) of the configuration text: signed decisions name it.
    #[serde(skip)]
    pub sha256: String,
}

/// `[audit]`: where the chained audit log is appended, how it is made durable, and where its
/// signed checkpoints go (docs/evidence.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The file (relative to this file); reopened on SIGHUP, so logrotate can move it.
    pub file: PathBuf,
    /// The most time between a record's write and its `fsync` (records are synced in
    /// batches by a thread of their own).
    #[serde(default = "default_audit_sync_ms")]
    pub sync_interval_ms: u64,
    /// What requests get while a record cannot be written (a full disk, a read-only file
    /// system): `fail_closed` (503 until the log is writable again) or `fail_open` (served,
    /// each lost record counted).
    #[serde(default)]
    pub on_write_failure: crate::telemetry::audit::WriteFailurePolicy,
    /// The file the signed checkpoints are appended to (needs `[evidence] signing_key`).
    pub checkpoints: Option<PathBuf>,
    /// A second file each checkpoint is also appended to (another volume, a mounted share).
    pub checkpoint_copy: Option<PathBuf>,
    /// A checkpoint after this many records at most…
    #[serde(default = "default_checkpoint_records")]
    pub checkpoint_records: u64,
    /// …and this many seconds at most after a record.
    #[serde(default = "default_checkpoint_seconds")]
    pub checkpoint_seconds: u64,
    /// The log's name in its checkpoints (the signed note's origin line and key name).
    #[serde(default = "default_audit_origin")]
    pub origin: String,
}

fn default_audit_sync_ms() -> u64 {
    100
}

fn default_checkpoint_records() -> u64 {
    1000
}

fn default_checkpoint_seconds() -> u64 {
    60
}

fn default_audit_origin() -> String {
    "psp-gateway.invalid/audit".to_owned()
}

/// `[evidence]`: the key that signs the endpoint's answers, the gateway's decisions and the
/// audit log's checkpoints, and the public keys published beside it (docs/evidence.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceConfig {
    /// The signing key: a PKCS#8 PEM file, ECDSA P-256 or Ed25519.
    pub signing_key: PathBuf,
    /// Earlier public keys (SPKI PEM files) still published in the JWKS after a rotation, so
    /// that what they signed before they were retired still verifies.
    #[serde(default)]
    pub previous_keys: Vec<PreviousKey>,
    /// Forward each permitted call's signed decision to the upstream, in
    /// `x-psp-decision-jws`.
    #[serde(default)]
    pub forward_signature: bool,
}

/// A previous key of a rotation: its public key file and the instant it was retired. Nothing
/// it signed after that instant is accepted, by `serve` or by `evidence verify` and
/// `audit verify` (the JWKS publishes the instant).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a previous key with the instant it was retired: { path = \"old.pub.pem\", retired = \"2026-11-01T00:00:00Z\" }"
)]
pub struct PreviousKey {
    pub path: PathBuf,
    /// RFC 3339.
    pub retired: String,
}

/// Sandbox features. Off unless configured; the repository's `gateway.toml` turns it on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The sandbox PKI (`sandbox-pki.json` and the CA keys) whose CRLs and OCSP answers the
    /// admin listener serves.
    #[serde(default = "default_sandbox_certs")]
    pub certs: PathBuf,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            enabled: false,
            certs: default_sandbox_certs(),
        }
    }
}

fn default_sandbox_certs() -> PathBuf {
    PathBuf::from("certs")
}

/// Settings of the check itself, shared by every face (gateway, endpoint, CLI).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksConfig {
    /// Transaction jurisdictions a caller may ask for: country codes, `EEA` or `EU`.
    #[serde(default = "default_valid_jurisdictions")]
    pub valid_jurisdictions: Vec<JurisdictionSet>,
    /// Prefix of the `link` in error objects; the error code is appended.
    #[serde(default = "default_error_link_base")]
    pub error_link_base: String,
}

impl Default for ChecksConfig {
    fn default() -> Self {
        ChecksConfig {
            valid_jurisdictions: default_valid_jurisdictions(),
            error_link_base: default_error_link_base(),
        }
    }
}

fn default_valid_jurisdictions() -> Vec<JurisdictionSet> {
    vec![
        JurisdictionSet::Eea,
        JurisdictionSet::Country(CountryCode::from_static("GB")),
    ]
}

/// The error documentation shipped with the product (`docs/errors.md`), served relative to
/// whatever host serves the docs. Operators who publish the docs elsewhere set their URL.
fn default_error_link_base() -> String {
    "/docs/errors#".to_owned()
}

impl ChecksConfig {
    pub fn valid_jurisdictions(&self) -> BTreeSet<CountryCode> {
        expand(&self.valid_jurisdictions)
    }
}

/// A set of transaction jurisdictions as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JurisdictionSet {
    /// The 30 EEA states.
    Eea,
    /// The 27 EU member states.
    Eu,
    Country(CountryCode),
}

impl<'de> Deserialize<'de> for JurisdictionSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "EEA" => Ok(JurisdictionSet::Eea),
            "EU" => Ok(JurisdictionSet::Eu),
            other => other.parse().map(JurisdictionSet::Country).map_err(|_| {
                serde::de::Error::custom(format!(
                    "`{other}` is not a jurisdiction: expected `EEA`, `EU` or a two-letter country code"
                ))
            }),
        }
    }
}

/// Expands `EEA` and `EU` into their states.
pub fn expand(sets: &[JurisdictionSet]) -> BTreeSet<CountryCode> {
    let mut out = BTreeSet::new();
    for set in sets {
        match set {
            JurisdictionSet::Eea => out.extend(country::EEA),
            JurisdictionSet::Eu => out.extend(country::eu()),
            JurisdictionSet::Country(c) => {
                out.insert(*c);
            }
        }
    }
    out
}

/// Default `[trust] cache_dir`, relative to the configuration file.
pub const DEFAULT_TRUST_CACHE_DIR: &str = "trust-cache";
/// Default `[trust] refresh_interval_secs`: 6 hours (lists are republished at least every six
/// months and on every change; the LOTL changes a few times a month).
pub const DEFAULT_TRUST_REFRESH_SECS: u64 = 6 * 3600;
/// Default `[trust] fetch_timeout_secs` per download.
pub const DEFAULT_TRUST_FETCH_TIMEOUT_SECS: u64 = 120;

/// A SHA-256 fingerprint written as hex, with colons or spaces between bytes allowed.
fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let digits: Vec<u8> = text.bytes().filter(|b| *b != b':' && *b != b' ').collect();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let pair = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// Whether a location is an `http` or `https` URL (otherwise it is a file path).
fn is_url(location: &str) -> bool {
    let lower = location.to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// The trust list: where approved issuers come from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    #[serde(default)]
    pub sources: Vec<TrustSourceConfig>,
    /// Where LOTL sources keep the lists they fetched (relative to this file; default
    /// `trust-cache`).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// How long after its `NextUpdate` a trusted list or LOTL is still used (default 0: not
    /// at all; TS 119 612 clause 5.3.15).
    #[serde(default)]
    pub next_update_grace_secs: u64,
    /// How often `serve` fetches the LOTL and its lists again (default 6 hours, with up to
    /// 10 % jitter; also at the earliest `NextUpdate`).
    #[serde(default)]
    pub refresh_interval_secs: Option<u64>,
    /// Time limit of one download (default 120 s).
    #[serde(default)]
    pub fetch_timeout_secs: Option<u64>,
    /// Where to fetch a published URL from instead: `{ prefix = "https://ec.europa.eu/",
    /// to = "https://mirror.internal/ec/" }`. The documents still have to verify; only where
    /// they are read from changes.
    #[serde(default)]
    pub mirrors: Vec<MirrorConfig>,
}

/// A rewrite of fetch URLs: the first mirror whose `prefix` starts a URL replaces it by `to`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorConfig {
    pub prefix: String,
    pub to: String,
}

/// The EU list of the lists of a trust source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LotlConfig {
    /// An `https://` or `http://` URL, or a file path (relative to this file).
    pub location: String,
    /// PEM files of the certificates pinned for the LOTL (the Official Journal's).
    #[serde(default)]
    pub signers: Vec<PathBuf>,
    /// SHA-256 fingerprints (hex, colons and spaces allowed) of certificates pinned for the
    /// LOTL, as the Official Journal prints them; with or instead of `signers`.
    #[serde(default)]
    pub signer_sha256: Vec<String>,
    /// Territories whose lists are used, as the LOTL writes them (`CZ`, `EL`, …); absent:
    /// every list the LOTL points to.
    #[serde(default)]
    pub territories: Option<Vec<String>>,
}

/// One trust source: a scheme (eIDAS trusted lists, a UK directory, a hub directory) with the
/// values it reports and the jurisdictions it is approved for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSourceConfig {
    /// A name for logs and `config check` output.
    pub name: String,
    /// The `QTSPSource` value reported for certificates of this source.
    pub qtsp_source: QtspSource,
    /// The `QTSPJurisdiction` value reported: `EEA`, `EU` or a country code.
    pub qtsp_jurisdiction: String,
    /// Transaction jurisdictions the source's issuers are approved for.
    pub valid_for: Vec<JurisdictionSet>,
    /// Whether certificates must carry the QcCompliance statement (EN 319 412-5 4.2.1).
    /// Default: `required` for `EIDAS` and `QTSP`, `optional` for `OBIE` and `OBHD`.
    #[serde(default)]
    pub qc_compliance: Option<QcCompliancePolicy>,
    /// What to do with a certificate that has no QcType statement. Default: `reject` for
    /// `EIDAS` and `QTSP` (EN 319 412-5 4.2.3 reads a missing QcType as an e-signature
    /// certificate), `accept` for `OBIE` and `OBHD` (their legacy certificates have none).
    #[serde(default)]
    pub untyped: Option<UntypedPolicy>,
    /// CA certificates (PEM files), each with the kinds it may issue.
    #[serde(default)]
    pub issuers: Vec<PemIssuerConfig>,
    /// ETSI TS 119 612 trusted-list XML files, each with the certificates authorised to sign
    /// it: `{ file = "tl/CZ.xml", signers = ["tl/CZ-signers.pem"] }`. The XML signature is
    /// verified at every load and must be by one of them. A bare path is accepted only when
    /// it is also listed in `[danger] unsigned_trusted_lists`.
    #[serde(default)]
    pub trusted_lists: Vec<TrustedListConfig>,
    /// The EU list of the lists, followed to the national lists it authorises:
    /// `lotl = { location = "https://ec.europa.eu/tools/lotl/eu-lotl.xml", signers =
    /// ["oj-lotl-signers.pem"] }`.
    #[serde(default)]
    pub lotl: Option<LotlConfig>,
}

/// A trusted list of a trust source: a bare path, or the file and its authorised signers.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum TrustedListConfig {
    Path(PathBuf),
    Signed {
        file: PathBuf,
        /// PEM files of the certificates authorised to sign the list.
        signers: Vec<PathBuf>,
    },
}

impl TrustedListConfig {
    pub fn file(&self) -> &Path {
        match self {
            TrustedListConfig::Path(p) => p,
            TrustedListConfig::Signed { file, .. } => file,
        }
    }
}

/// A PEM file of one or more CA certificates approved by a source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PemIssuerConfig {
    pub pem: PathBuf,
    /// Certificate kinds these CAs may issue.
    pub kinds: Vec<CertKind>,
}

/// The admin listener: plain HTTP, meant for loopback or a cluster-internal network.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    pub listen: SocketAddr,
}

/// Overrides of the listener limits (`server::Limits` documents each default and its source).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub header_read_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub handshake_timeout_ms: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub drain_timeout_ms: Option<u64>,
    pub first_request_timeout_ms: Option<u64>,
    pub max_connections_per_source: Option<usize>,
}

impl LimitsConfig {
    pub fn resolve(&self) -> crate::server::Limits {
        use std::time::Duration;
        let d = crate::server::Limits::default();
        crate::server::Limits {
            header_read_timeout: self
                .header_read_timeout_ms
                .map_or(d.header_read_timeout, Duration::from_millis),
            idle_timeout: self
                .idle_timeout_ms
                .map_or(d.idle_timeout, Duration::from_millis),
            handshake_timeout: self
                .handshake_timeout_ms
                .map_or(d.handshake_timeout, Duration::from_millis),
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            max_header_bytes: self.max_header_bytes.unwrap_or(d.max_header_bytes),
            drain_timeout: self
                .drain_timeout_ms
                .map_or(d.drain_timeout, Duration::from_millis),
            first_request_timeout: self
                .first_request_timeout_ms
                .map_or(d.first_request_timeout, Duration::from_millis),
            max_connections_per_source: self
                .max_connections_per_source
                .unwrap_or(d.max_connections_per_source),
        }
    }
}

/// Relaxations of fail-closed defaults. Each one set is logged as a warning at start-up.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DangerConfig {
    /// Serve the check endpoint over plain HTTP on a non-loopback address (credentials and
    /// certificates then cross the network in clear).
    #[serde(default)]
    pub plaintext_api: bool,
    /// Gateway report-only mode: forward calls the access rule refuses, and log (and signal
    /// upstream) what would have been refused.
    #[serde(default)]
    pub gateway_report_only: bool,
    /// Forward calls on paths no route matches: the certificate checks and the home register
    /// status still apply, but no payment service is required.
    #[serde(default)]
    pub forward_unmatched_routes: bool,
    /// Trusted-list files (as written in `trusted_lists`) loaded without verifying their XML
    /// signature. Logged at every load. For lists you built or edited yourself only.
    #[serde(default)]
    pub unsigned_trusted_lists: Vec<PathBuf>,
}

impl DangerConfig {
    /// The names of the relaxations in force, for the start-up warning.
    pub fn enabled(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.plaintext_api {
            v.push("danger.plaintext_api");
        }
        if self.gateway_report_only {
            v.push("danger.gateway_report_only");
        }
        if self.forward_unmatched_routes {
            v.push("danger.forward_unmatched_routes");
        }
        if !self.unsigned_trusted_lists.is_empty() {
            v.push("danger.unsigned_trusted_lists");
        }
        v
    }
}

/// Why a configuration could not be used. Each message names the file, and for syntax and
/// unknown keys the line and column.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Budget: the largest configuration file read, in bytes. The production example is under
/// 10 KiB; a hundred times that still bounds a wrong path, a device or an endless pipe
/// (`--config /dev/zero` is zeros, which are valid UTF-8 and would be read until memory ran out).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl Config {
    /// Reads, parses and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        use crate::bounded::{BoundedReadError, read_file};
        let bytes =
            read_file(path, MAX_CONFIG_BYTES, "a configuration file").map_err(|e| match e {
                BoundedReadError::Io(source) => ConfigError::Read {
                    path: path.to_owned(),
                    source,
                },
                too_large @ (BoundedReadError::TooLarge { .. }
                | BoundedReadError::NotRegular { .. }) => ConfigError::Invalid {
                    path: path.to_owned(),
                    message: too_large.to_string(),
                },
            })?;
        let text = String::from_utf8(bytes).map_err(|_| ConfigError::Parse {
            path: path.to_owned(),
            message: "the configuration is not UTF-8 text".to_owned(),
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Config::from_toml(&text, path, base_dir)
    }

    /// Parses and validates configuration text; `path` is only used in messages.
    pub fn from_toml(text: &str, path: &Path, base_dir: PathBuf) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.base_dir = base_dir;
        config.sha256 = crate::hex::lower(&crate::hex::sha256(text.as_bytes()));
        config.validate().map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(config)
    }

    /// A configuration with no trust sources and the defaults, for ad-hoc CLI checks.
    pub fn empty() -> Config {
        Config {
            sandbox: SandboxConfig::default(),
            checks: ChecksConfig::default(),
            trust: TrustConfig::default(),
            registers: crate::register::RegisterConfig::default(),
            revocation: crate::revocation::RevocationConfig::default(),
            api: None,
            results: crate::service::ResultsConfig::default(),
            gateway: None,
            sites: Vec::new(),
            ext_authz: None,
            forward_auth: None,
            admin: None,
            limits: LimitsConfig::default(),
            danger: DangerConfig::default(),
            audit: None,
            evidence: None,
            shared_state: None,
            base_dir: PathBuf::new(),
            sha256: String::new(),
        }
    }

    /// A path from the file, resolved against the file's directory.
    /// The trust sources, with paths resolved against the file's directory.
    pub fn trust_sources(&self) -> Vec<crate::trust::SourceSpec> {
        self.trust
            .sources
            .iter()
            .map(|sc| crate::trust::SourceSpec {
                name: sc.name.clone(),
                qtsp_source: sc.qtsp_source,
                reported_jurisdiction: sc.qtsp_jurisdiction.clone(),
                valid_for: expand(&sc.valid_for),
                qc_compliance: sc.qc_compliance,
                untyped: sc.untyped,
                issuers: sc
                    .issuers
                    .iter()
                    .map(|i| crate::trust::IssuerFile {
                        path: self.resolve(&i.pem),
                        kinds: i.kinds.clone(),
                    })
                    .collect(),
                trusted_lists: sc
                    .trusted_lists
                    .iter()
                    .map(|tl| crate::trust::TrustedListFile {
                        path: self.resolve(tl.file()),
                        signers: match tl {
                            _ if self.is_unsigned_allowed(tl.file()) => {
                                crate::trust::ListSigners::Unsigned
                            }
                            TrustedListConfig::Signed { signers, .. } => {
                                crate::trust::ListSigners::Pinned(
                                    signers.iter().map(|p| self.resolve(p)).collect(),
                                )
                            }
                            // Refused by `validate`; pinned to nobody if it ever got here.
                            TrustedListConfig::Path(_) => {
                                crate::trust::ListSigners::Pinned(Vec::new())
                            }
                        },
                    })
                    .collect(),
                lotl: sc.lotl.as_ref().map(|l| crate::trust::LotlSpec {
                    location: if is_url(&l.location) {
                        l.location.clone()
                    } else {
                        self.resolve(Path::new(&l.location)).display().to_string()
                    },
                    signers: l.signers.iter().map(|p| self.resolve(p)).collect(),
                    // Validated by `validate`.
                    signer_sha256: l
                        .signer_sha256
                        .iter()
                        .filter_map(|f| parse_fingerprint(f))
                        .collect(),
                    territories: l.territories.clone(),
                    cache_dir: self.trust_cache_dir(),
                }),
                next_update_grace: time::Duration::seconds(
                    i64::try_from(self.trust.next_update_grace_secs).unwrap_or(i64::MAX),
                ),
            })
            .collect()
    }

    /// Where LOTL sources keep what they fetched.
    pub fn trust_cache_dir(&self) -> PathBuf {
        self.resolve(
            self.trust
                .cache_dir
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_TRUST_CACHE_DIR)),
        )
    }

    /// How trusted lists are fetched and refreshed.
    pub fn trust_fetch(&self) -> crate::trust::refresh::FetchSettings {
        crate::trust::refresh::FetchSettings {
            allow: self.revocation.allow_destinations,
            connect_timeout: self.revocation.connect_timeout(),
            timeout: std::time::Duration::from_secs(
                self.trust
                    .fetch_timeout_secs
                    .unwrap_or(DEFAULT_TRUST_FETCH_TIMEOUT_SECS),
            ),
            mirrors: self
                .trust
                .mirrors
                .iter()
                .map(|m| (m.prefix.clone(), m.to.clone()))
                .collect(),
            refresh_interval: std::time::Duration::from_secs(
                self.trust
                    .refresh_interval_secs
                    .unwrap_or(DEFAULT_TRUST_REFRESH_SECS),
            ),
        }
    }

    /// Whether `[danger] unsigned_trusted_lists` names this trusted-list path (as written).
    fn is_unsigned_allowed(&self, file: &Path) -> bool {
        self.danger
            .unsigned_trusted_lists
            .iter()
            .any(|p| self.resolve(p) == self.resolve(file))
    }

    /// Where the reference data comes from (trust sources and register files).
    pub fn data_sources(&self) -> crate::service::DataSources {
        crate::service::DataSources {
            trust: self.trust_sources(),
            registers: self.registers.clone(),
            base_dir: self.base_dir.clone(),
        }
    }

    /// Loads the trust list the configuration names, judging list freshness at `at`.
    pub fn load_trust(
        &self,
        at: time::OffsetDateTime,
    ) -> Result<crate::trust::TrustList, crate::trust::TrustLoadError> {
        crate::trust::load(&self.trust_sources(), at)
    }

    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.base_dir.join(p)
        }
    }

    fn validate(&self) -> Result<(), Invalid> {
        if let Some(shared) = &self.shared_state {
            shared.validate()?;
        }
        self.registers.validate()?;
        self.revocation.validate()?;
        if let Some(api) = &self.api {
            self.validate_api(api)?;
        }
        if let Some(g) = &self.gateway {
            g.validate(self.sandbox.enabled)?;
            if g.name.is_some() {
                return Err(Invalid::NamedGateway);
            }
        }
        self.validate_sites()?;
        if let Some(e) = &self.ext_authz {
            if self.sites().is_empty() {
                return Err(Invalid::NoSiteToDecide("ext_authz"));
            }
            e.validate()?;
        }
        if let Some(f) = &self.forward_auth {
            let sites: Vec<&str> = self
                .sites()
                .iter()
                .map(|g| g.name.as_deref().unwrap_or(crate::gateway::DEFAULT_SITE))
                .collect();
            if sites.is_empty() {
                return Err(Invalid::NoSiteToDecide("forward_auth"));
            }
            f.validate(&sites)?;
        }
        self.validate_limits()?;
        self.validate_audit()?;
        if self.checks.valid_jurisdictions.is_empty() {
            return Err(Invalid::NoJurisdictions);
        }
        let mut names = BTreeSet::new();
        for s in &self.trust.sources {
            if !names.insert(s.name.as_str()) {
                return Err(Invalid::DuplicateSource(s.name.clone()));
            }
            self.validate_trust_source(s)?;
        }
        Ok(())
    }

    /// `[audit]`: positive intervals, and a key to sign checkpoints with.
    fn validate_audit(&self) -> Result<(), Invalid> {
        let Some(a) = &self.audit else {
            return Ok(());
        };
        for (name, value) in [
            ("audit.sync_interval_ms", a.sync_interval_ms),
            ("audit.checkpoint_records", a.checkpoint_records),
            ("audit.checkpoint_seconds", a.checkpoint_seconds),
        ] {
            if value == 0 {
                return Err(Invalid::NotPositive(name));
            }
        }
        if a.checkpoints.is_some() && self.evidence.is_none() {
            return Err(Invalid::CheckpointsUnsigned);
        }
        if a.checkpoint_copy.is_some() && a.checkpoints.is_none() {
            return Err(Invalid::CheckpointCopyAlone);
        }
        if a.origin.is_empty()
            || a.origin
                .chars()
                .any(|c| c.is_whitespace() || c == '+' || c.is_control())
        {
            return Err(Invalid::BadOrigin(a.origin.clone()));
        }
        Ok(())
    }

    /// Every site: `[gateway]` (the one site `default`) or each of `[[sites]]`.
    pub fn sites(&self) -> Vec<&crate::gateway::GatewayConfig> {
        match &self.gateway {
            Some(g) => vec![g],
            None => self.sites.iter().collect(),
        }
    }

    /// `[[sites]]`: instead of `[gateway]`; each valid as a `[gateway]` is, named uniquely;
    /// server names and hosts name one site each; the sites that share a listener agree on
    /// its TLS and identity settings, are told apart by server name (or by host on a plain
    /// listener), and have at most one default.
    fn validate_sites(&self) -> Result<(), Invalid> {
        if self.sites.is_empty() {
            return Ok(());
        }
        if self.gateway.is_some() {
            return Err(Invalid::GatewayAndSites);
        }
        let mut names = BTreeSet::new();
        let mut hosts = std::collections::BTreeMap::new();
        for site in &self.sites {
            let Some(name) = site.name.as_deref() else {
                return Err(Invalid::UnnamedSite);
            };
            let well_formed = !name.is_empty()
                && name.len() <= 63
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !well_formed {
                return Err(Invalid::BadSiteName(name.to_owned()));
            }
            if !names.insert(name) {
                return Err(Invalid::DuplicateSite(name.to_owned()));
            }
            site.validate(self.sandbox.enabled)
                .map_err(|error| Invalid::Site {
                    site: name.to_owned(),
                    error,
                })?;
            if site.default && site.listen.is_none() {
                return Err(Invalid::DefaultWithoutListener(name.to_owned()));
            }
            for host in site.host_names() {
                if let Some(other) = hosts.insert(host.clone(), name) {
                    return Err(Invalid::HostTwice {
                        host,
                        sites: [other.to_owned(), name.to_owned()],
                    });
                }
            }
        }
        let mut listeners: std::collections::BTreeMap<
            SocketAddr,
            Vec<&crate::gateway::GatewayConfig>,
        > = std::collections::BTreeMap::new();
        for site in &self.sites {
            if let Some(listen) = site.listen {
                listeners.entry(listen).or_default().push(site);
            }
        }
        for (listen, sites) in listeners {
            validate_shared_listener(listen, &sites)?;
        }
        Ok(())
    }

    /// `[api]`: TLS or loopback (or `danger.plaintext_api`), credentials (unique well-formed
    /// users, PHC password hashes), rate limit and the positive limits.
    fn validate_api(&self, api: &ApiConfig) -> Result<(), Invalid> {
        if api.tls.is_none() && !api.listen.ip().is_loopback() && !self.danger.plaintext_api {
            return Err(Invalid::PlaintextApi(api.listen));
        }
        if api.credentials.is_empty() {
            return Err(Invalid::NoCredentials);
        }
        let mut users = BTreeSet::new();
        for c in &api.credentials {
            if !users.insert(c.username.as_str()) {
                return Err(Invalid::DuplicateUser(c.username.clone()));
            }
            if c.username.is_empty() || c.username.contains(':') {
                return Err(Invalid::BadUsername(c.username.clone()));
            }
            if let Err(e) = argon2::PasswordHash::new(&c.password_hash) {
                return Err(Invalid::BadPasswordHash {
                    user: c.username.clone(),
                    reason: e.to_string(),
                });
            }
        }
        api.rate_limit.validate("api")?;
        if api.max_concurrent_password_checks == 0 {
            return Err(Invalid::NotPositive("api.max_concurrent_password_checks"));
        }
        let f = &api.failed_logins;
        if f.per_source == 0 || f.per_user == 0 || f.period_seconds == 0 {
            return Err(Invalid::ZeroFailedLogins);
        }
        if api.max_eidas_header_bytes == 0 {
            return Err(Invalid::NotPositive("api.max_eidas_header_bytes"));
        }
        Ok(())
    }

    /// `[limits]`, as resolved: connection counts and timeouts above zero.
    fn validate_limits(&self) -> Result<(), Invalid> {
        let limits = self.limits.resolve();
        if limits.max_connections == 0 {
            return Err(Invalid::NotPositive("limits.max_connections"));
        }
        if limits.max_connections_per_source == 0 {
            return Err(Invalid::NotPositive("limits.max_connections_per_source"));
        }
        if limits.first_request_timeout.is_zero() || limits.idle_timeout.is_zero() {
            return Err(Invalid::ZeroConnectionTimeout);
        }
        Ok(())
    }

    /// One `[[trust.sources]]` entry (its name's uniqueness is checked by the caller): where
    /// it is valid, unsigned lists allowed, not empty, its LOTL, issuers' kinds, and the
    /// reported QTSP jurisdiction.
    fn validate_trust_source(&self, s: &TrustSourceConfig) -> Result<(), Invalid> {
        if s.valid_for.is_empty() {
            return Err(Invalid::NoValidFor(s.name.clone()));
        }
        for tl in &s.trusted_lists {
            if let TrustedListConfig::Path(p) = tl
                && !self.is_unsigned_allowed(p)
            {
                return Err(Invalid::UnsignedList {
                    source_name: s.name.clone(),
                    list: p.clone(),
                });
            }
        }
        if s.issuers.is_empty() && s.trusted_lists.is_empty() && s.lotl.is_none() {
            return Err(Invalid::EmptySource(s.name.clone()));
        }
        if let Some(l) = &s.lotl {
            validate_lotl(&s.name, l)?;
        }
        if let Some(i) = s.issuers.iter().find(|i| i.kinds.is_empty()) {
            return Err(Invalid::IssuerWithoutKinds {
                source_name: s.name.clone(),
                pem: i.pem.clone(),
            });
        }
        if !is_reported_jurisdiction(&s.qtsp_jurisdiction) {
            return Err(Invalid::BadQtspJurisdiction {
                source_name: s.name.clone(),
                jurisdiction: s.qtsp_jurisdiction.clone(),
            });
        }
        Ok(())
    }
}

/// A trust source's `lotl`: the source's name usable as a cache name, the signers pinned,
/// fingerprints, location and territory codes well-formed.
fn validate_lotl(source_name: &str, l: &LotlConfig) -> Result<(), Invalid> {
    if !source_name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        || source_name.is_empty()
    {
        return Err(Invalid::BadLotlSourceName(source_name.to_owned()));
    }
    if l.signers.is_empty() && l.signer_sha256.is_empty() {
        return Err(Invalid::LotlUnpinned(source_name.to_owned()));
    }
    if let Some(f) = l
        .signer_sha256
        .iter()
        .find(|f| parse_fingerprint(f).is_none())
    {
        return Err(Invalid::BadLotlFingerprint {
            source_name: source_name.to_owned(),
            fingerprint: f.clone(),
        });
    }
    if l.location.contains("://") && !is_url(&l.location) {
        return Err(Invalid::BadLotlLocation {
            source_name: source_name.to_owned(),
            location: l.location.clone(),
        });
    }
    if let Some(t) = l
        .territories
        .iter()
        .flatten()
        .find(|t| !crate::trust::cache::is_territory_code(t))
    {
        return Err(Invalid::BadTerritory {
            source_name: source_name.to_owned(),
            territory: t.clone(),
        });
    }
    Ok(())
}

/// The sites on one listener: one TLS mode, client-certificate mode, session resumption and
/// identity source; several sites each with server names (TLS) or hosts (plain); one
/// default at most.
fn validate_shared_listener(
    listen: SocketAddr,
    sites: &[&crate::gateway::GatewayConfig],
) -> Result<(), Invalid> {
    let name = |g: &crate::gateway::GatewayConfig| g.name.clone().unwrap_or_default();
    let settings = |g: &crate::gateway::GatewayConfig| {
        format!(
            "{:?}",
            (
                g.tls.as_ref().map(|t| t.session_resumption),
                g.client_certificate,
                g.identity
            )
        )
    };
    let first = sites[0];
    if let Some(other) = sites.iter().find(|g| settings(g) != settings(first)) {
        return Err(Invalid::ListenerDisagrees {
            listen,
            sites: [name(first), name(other)],
        });
    }
    if sites.len() > 1 {
        let tls = first.tls.is_some();
        if let Some(unnamed) = sites.iter().find(|g| {
            if tls {
                g.server_names.is_empty()
            } else {
                g.host_names().is_empty()
            }
        }) {
            return Err(Invalid::SharedListenerUnnamed {
                listen,
                site: name(unnamed),
                what: if tls {
                    "server_names"
                } else {
                    "server_names or hosts"
                },
            });
        }
    }
    let defaults: Vec<String> = sites
        .iter()
        .filter(|g| g.default)
        .map(|g| name(g))
        .collect();
    if defaults.len() > 1 {
        return Err(Invalid::TwoDefaults { listen, defaults });
    }
    Ok(())
}

/// Why a configuration that parses is refused (the message of [`ConfigError::Invalid`]).
#[derive(Debug, thiserror::Error)]
enum Invalid {
    /// `[registers]` is refused.
    #[error(transparent)]
    Registers(#[from] crate::register::RegisterLoadError),
    /// `[revocation]` is refused.
    #[error(transparent)]
    Revocation(#[from] crate::revocation::RevocationConfigError),
    /// `[gateway]` is refused.
    #[error(transparent)]
    Gateway(#[from] crate::gateway::GatewayConfigError),
    /// `[ext_authz]` is refused.
    #[error(transparent)]
    ExtAuthz(#[from] crate::ext_authz::ExtAuthzConfigError),
    /// `[forward_auth]` is refused.
    #[error(transparent)]
    ForwardAuth(#[from] crate::forward_auth::ForwardAuthConfigError),
    /// An external authoriser with no site to decide for.
    #[error("[{0}] needs a site to decide for: configure [gateway] or [[sites]]")]
    NoSiteToDecide(&'static str),
    /// `[gateway]` and `[[sites]]` both.
    #[error(
        "[gateway] and [[sites]] are both set: write the one site as [[sites]], or keep [gateway] alone"
    )]
    GatewayAndSites,
    /// `[gateway]` with a name.
    #[error("gateway.name: [gateway] is the one site `default`; name sites under [[sites]]")]
    NamedGateway,
    /// A `[[sites]]` entry without a name.
    #[error("[[sites]]: every site needs a name")]
    UnnamedSite,
    /// A site name that is not lowercase letters, digits and `-`.
    #[error("[[sites]]: name `{0}` must be 1 to 63 lowercase letters, digits or `-`")]
    BadSiteName(String),
    /// Two sites with one name.
    #[error("[[sites]]: name `{0}` is used twice")]
    DuplicateSite(String),
    /// One site's settings are refused.
    #[error("site `{site}`: {error}")]
    Site {
        site: String,
        error: crate::gateway::GatewayConfigError,
    },
    /// `default = true` on a site without a listener.
    #[error(
        "site `{0}`: default = true needs listen (it is the listener's site for clients that send no server name)"
    )]
    DefaultWithoutListener(String),
    /// A server name or host named by two sites.
    #[error("[[sites]]: `{host}` names both site `{}` and site `{}`", sites[0], sites[1])]
    HostTwice { host: String, sites: [String; 2] },
    /// Sites on one listener with different TLS, client-certificate or identity settings.
    #[error("{listen}: sites `{}` and `{}` share this listener but not its tls.session_resumption, client_certificate and identity settings", sites[0], sites[1])]
    ListenerDisagrees {
        listen: SocketAddr,
        sites: [String; 2],
    },
    /// A site on a shared listener that nothing tells apart.
    #[error("{listen}: site `{site}` shares this listener and needs {what} to be told apart")]
    SharedListenerUnnamed {
        listen: SocketAddr,
        site: String,
        what: &'static str,
    },
    /// Two default sites on one listener.
    #[error("{listen}: sites {defaults:?} are each the listener's default; one at most")]
    TwoDefaults {
        listen: SocketAddr,
        defaults: Vec<String>,
    },
    /// The API would serve credentials in clear on a non-loopback address.
    #[error(
        "api.listen {0} is not a loopback address and api.tls is not set: set api.tls, or danger.plaintext_api = true to serve credentials in clear"
    )]
    PlaintextApi(SocketAddr),
    /// `api.credentials` is empty.
    #[error("api.credentials is empty: no caller could authenticate")]
    NoCredentials,
    /// Two credentials share a username.
    #[error("api.credentials: username `{0}` is used twice")]
    DuplicateUser(String),
    /// A username is empty or contains `:`.
    #[error("api.credentials: username `{0}` must be non-empty and contain no `:`")]
    BadUsername(String),
    /// A password hash is not an argon2 PHC string.
    #[error("api.credentials: the password_hash of `{user}` is not an argon2 PHC string: {reason}")]
    BadPasswordHash { user: String, reason: String },
    /// `api.rate_limit` is refused.
    #[error(transparent)]
    ApiRateLimit(#[from] crate::server::RateLimitConfigError),
    #[error(transparent)]
    SharedState(#[from] crate::server::SharedStateConfigError),
    /// A setting that must be positive is zero (its name).
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    /// `api.failed_logins` has a zero limit or period.
    #[error("api.failed_logins: per_source, per_user and period_seconds must be positive")]
    ZeroFailedLogins,
    /// A connection timeout is zero.
    #[error("limits.first_request_timeout_ms and limits.idle_timeout_ms must be positive")]
    ZeroConnectionTimeout,
    /// Checkpoints without a key to sign them.
    #[error(
        "audit.checkpoints needs [evidence] signing_key: a checkpoint is worth what its signature is"
    )]
    CheckpointsUnsigned,
    /// A copy of checkpoints that are not written.
    #[error("audit.checkpoint_copy needs audit.checkpoints")]
    CheckpointCopyAlone,
    /// An origin a signed note cannot carry.
    #[error(
        "audit.origin `{0}`: a checkpoint's origin is a non-empty name without spaces or `+` (a schema-less URL such as bank.example/psp-gateway)"
    )]
    BadOrigin(String),
    /// `checks.valid_jurisdictions` is empty.
    #[error("checks.valid_jurisdictions must name at least one jurisdiction")]
    NoJurisdictions,
    /// Two trust sources share a name.
    #[error("trust source name `{0}` is used twice")]
    DuplicateSource(String),
    /// A trust source's `valid_for` is empty.
    #[error("trust source `{0}`: valid_for is empty")]
    NoValidFor(String),
    /// A trusted list has no signers and is not listed as allowed unsigned.
    #[error(
        "trust source `{source_name}`: trusted list {} names no signers: write {{ file = \"{}\", signers = [\"signers.pem\"] }} with the certificates authorised to sign it, or list it under [danger] unsigned_trusted_lists",
        list.display(),
        list.display()
    )]
    UnsignedList { source_name: String, list: PathBuf },
    /// A trust source names nothing to trust.
    #[error("trust source `{0}` names neither issuers, trusted_lists nor a lotl")]
    EmptySource(String),
    /// A source with a LOTL has a name unfit for its cache directory.
    #[error(
        "trust source `{0}`: a source with a lotl names its cache directory: use letters, digits, `-` and `_` only"
    )]
    BadLotlSourceName(String),
    /// A LOTL pins no signer.
    #[error(
        "trust source `{0}`: lotl pins no signer: give `signer_sha256` (the fingerprints the Official Journal publishes) or `signers` (PEM files)"
    )]
    LotlUnpinned(String),
    /// A LOTL signer fingerprint is not a SHA-256 fingerprint.
    #[error(
        "trust source `{source_name}`: lotl.signer_sha256 `{fingerprint}` is not a SHA-256 fingerprint (64 hex digits, colons and spaces allowed)"
    )]
    BadLotlFingerprint {
        source_name: String,
        fingerprint: String,
    },
    /// A LOTL location looks like a URL but is not http(s).
    #[error(
        "trust source `{source_name}`: lotl.location `{location}` is neither an http(s) URL nor a file"
    )]
    BadLotlLocation {
        source_name: String,
        location: String,
    },
    /// A LOTL territory is not written as the LOTL writes territory codes.
    #[error(
        "trust source `{source_name}`: lotl.territories: `{territory}` is not a territory code as the LOTL writes it (two capital letters: CZ, EL, UK…)"
    )]
    BadTerritory {
        source_name: String,
        territory: String,
    },
    /// An issuer has no certificate kinds.
    #[error(
        "trust source `{source_name}`: issuer {} has no kinds (expected `web`, `seal` or both)",
        pem.display()
    )]
    IssuerWithoutKinds { source_name: String, pem: PathBuf },
    /// `qtsp_jurisdiction` is not `EEA`, `EU` or a country code.
    #[error(
        "trust source `{source_name}`: qtsp_jurisdiction `{jurisdiction}` is not `EEA`, `EU` or an upper-case country code"
    )]
    BadQtspJurisdiction {
        source_name: String,
        jurisdiction: String,
    },
}

fn is_reported_jurisdiction(s: &str) -> bool {
    matches!(s, "EEA" | "EU") || (s.len() == 2 && s.bytes().all(|b| b.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"), PathBuf::new())
    }

    const MINIMAL: &str = r#"
[[trust.sources]]
name = "s"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA", "XX"]
trusted_lists = [{ file = "tl.xml", signers = ["tl-signers.pem"] }]
"#;

    #[test]
    fn a_trusted_list_without_signers_is_refused_unless_the_danger_section_names_it() {
        let bare = MINIMAL.replace(
            "trusted_lists = [{ file = \"tl.xml\", signers = [\"tl-signers.pem\"] }]",
            "trusted_lists = [\"tl.xml\"]",
        );
        let e = parse(&bare).unwrap_err().to_string();
        assert!(
            e.contains("names no signers") && e.contains("unsigned_trusted_lists"),
            "{e}"
        );
        let allowed = format!("{bare}\n[danger]\nunsigned_trusted_lists = [\"tl.xml\"]\n");
        let c = parse(&allowed).unwrap();
        assert_eq!(c.danger.enabled(), vec!["danger.unsigned_trusted_lists"]);
        assert!(matches!(
            c.trust_sources()[0].trusted_lists[0].signers,
            crate::trust::ListSigners::Unsigned
        ));
    }

    #[test]
    fn minimal_configuration_takes_the_defaults() {
        let c = parse(MINIMAL).unwrap();
        let j = c.checks.valid_jurisdictions();
        assert_eq!(j.len(), 31, "EEA plus GB");
        assert!(j.contains(&"GB".parse().unwrap()));
        assert_eq!(
            expand(&c.trust.sources[0].valid_for).len(),
            31,
            "EEA plus XX"
        );
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name_and_line() {
        let text = format!("{MINIMAL}colour = \"blue\"\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        assert!(e.contains("line"), "{e}");
        assert!(e.starts_with("test.toml"), "{e}");
    }

    #[test]
    fn unknown_qtsp_source_value_is_rejected() {
        let e = parse(&MINIMAL.replace("\"EIDAS\"", "\"FOO\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("FOO"), "{e}");
    }

    #[test]
    fn a_source_without_issuers_is_rejected() {
        let e = parse(&MINIMAL.replace(
            "trusted_lists = [{ file = \"tl.xml\", signers = [\"tl-signers.pem\"] }]",
            "",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("neither issuers, trusted_lists nor a lotl"),
            "{e}"
        );
    }

    #[test]
    fn exhaustion_limits_are_validated() {
        let head = "[api]\nlisten = \"127.0.0.1:0\"\n";
        let credentials = "[[api.credentials]]\nusername = \"u\"\npassword_hash = \"$argon2id$v=19$m=19456,t=2,p=1$qkyi1XhW90WBgYIz6Vv2fA$Iu4p5t35NG+gbkJ70VYkIvwddGviUKp3stH8hPPkGG8\"\n";
        let ok = parse(&format!("{MINIMAL}{head}{credentials}")).expect("defaults are valid");
        let a = ok.api.expect("api");
        assert_eq!(a.max_concurrent_password_checks, 2);
        assert_eq!(a.failed_logins.per_source, 20);
        assert_eq!(a.failed_logins.per_user, 20);
        assert_eq!(a.rate_limit.ipv6_prefix, 64);
        let limits = ok.limits.resolve();
        assert_eq!(limits.max_connections_per_source, 64);
        assert_eq!(limits.first_request_timeout.as_secs(), 10);
        for (extra, named) in [
            (
                "max_concurrent_password_checks = 0\n",
                "max_concurrent_password_checks",
            ),
            ("failed_logins = { per_user = 0 }\n", "failed_logins"),
            ("rate_limit = { ipv6_prefix = 129 }\n", "ipv6_prefix"),
            (
                "rate_limit = { max_tracked_sources = 0 }\n",
                "max_tracked_sources",
            ),
        ] {
            let text = format!("{MINIMAL}{head}{extra}{credentials}");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(named), "{extra}: {e}");
        }
        for (extra, named) in [
            (
                "max_connections_per_source = 0",
                "max_connections_per_source",
            ),
            ("first_request_timeout_ms = 0", "first_request_timeout_ms"),
        ] {
            let e = parse(&format!("{MINIMAL}[limits]\n{extra}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(named), "{extra}: {e}");
        }
    }

    #[test]
    fn the_result_cache_is_configured_in_its_own_section_and_the_old_api_keys_name_it() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.results.ttl_seconds, 300);
        assert_eq!(c.results.cache_entries, 100_000);
        let c = parse(&format!(
            "{MINIMAL}[results]\nttl_seconds = 60\ncache_entries = 10\n"
        ))
        .unwrap();
        assert_eq!(c.results.ttl().as_secs(), 60);
        assert_eq!(c.results.cache_entries, 10);
        let head = "[api]\nlisten = \"127.0.0.1:0\"\n";
        for (old, new) in [
            ("result_ttl_seconds = 60", "ttl_seconds"),
            ("result_cache_entries = 10", "cache_entries"),
        ] {
            let e = parse(&format!("{MINIMAL}{head}{old}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(old.split(' ').next().unwrap()), "{e}");
            assert!(e.contains(new) && e.contains("[results]"), "{e}");
            assert!(e.contains("line"), "{e}");
        }
    }

    #[test]
    fn both_rate_limits_are_one_type_with_each_sections_defaults_and_checks() {
        let gateway = "[gateway]\nlisten = \"127.0.0.1:0\"\njurisdiction = \"GB\"\nupstream = \"http://127.0.0.1:1\"\ntls = { cert = \"c.pem\", key = \"k.pem\" }\n";
        let c = parse(&format!(
            "{MINIMAL}{gateway}rate_limit = {{ requests = 5, period_seconds = 60 }}\n"
        ))
        .unwrap();
        let r = c.gateway.unwrap().rate_limit.unwrap();
        assert_eq!((r.requests, r.period_seconds), (5, 60));
        assert_eq!((r.ipv6_prefix, r.max_tracked_sources), (64, 100_000));
        // The gateway's limit is off unless its count and period are written.
        let e = parse(&format!(
            "{MINIMAL}{gateway}rate_limit = {{ ipv6_prefix = 48 }}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("requests"), "{e}");
        let e = parse(&format!(
            "{MINIMAL}{gateway}rate_limit = {{ requests = 5, period_seconds = 60, ipv6_prefix = 0 }}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("gateway.rate_limit.ipv6_prefix"), "{e}");
    }

    #[test]
    fn a_bad_jurisdiction_is_named() {
        let e = parse(&MINIMAL.replace("\"XX\"]", "\"Europe\"]"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Europe"), "{e}");
    }
}
