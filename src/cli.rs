//! The command line: `check`, `config check`, `sandbox generate`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cert::PspCertificate;
use crate::cert::input::decode_certificate_chain;
use std::sync::Arc;
use std::time::Duration;

pub mod audit;
mod evidence;
mod trust;

use crate::config::Config;
use crate::country::{self, CountryCode};
use crate::register;
use crate::revocation::RevocationChecker;
use crate::service::{CheckService, ReferenceData, Revocation};
use crate::trust::{ListSigners, QtspSource, SourceSpec, TrustedListFile};

// Exit statuses, one convention for every command (sysexits.h; README "Exit statuses").
/// The command line is wrong (an unknown flag, a bad value, an empty secret).
const EXIT_USAGE: u8 = 64;
/// An input's content is wrong (a certificate, a list or register file given on the command
/// line, a broken audit chain).
const EXIT_DATA_ERR: u8 = 65;
/// An input file does not exist or cannot be read.
const EXIT_NO_INPUT: u8 = 66;
/// Something needed is not usable now (a listener cannot bind, a trusted list is not usable).
const EXIT_UNAVAILABLE: u8 = 69;
/// An output file cannot be created.
const EXIT_CANT_CREATE: u8 = 73;
/// A download failed: trying again later may work (`trust fetch`, `register fetch`).
const EXIT_TEMP_FAIL: u8 = 75;
/// The configuration, or a file it names, cannot be used.
const EXIT_BAD_CONFIG: u8 = 78;

/// Budget: the longest secret `credentials hash` reads from stdin, in bytes. Passwords and API
/// secrets are tens of bytes (a 256-bit random secret is 44 in Base64); 4 KiB bounds a device
/// or an endless pipe on stdin.
const MAX_SECRET_BYTES: u64 = 4096;

/// The configuration used when `--config` is not given, if it exists in the working directory.
const DEFAULT_CONFIG: &str = "gateway.toml";

#[derive(Debug, Parser)]
#[command(name = "psp-gateway", version, about = "PSD2 PSP-checking gateway")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start every listener the configuration names (API, admin) and serve until SIGTERM.
    Serve {
        /// Configuration file.
        #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// API credential commands.
    Credentials {
        #[command(subcommand)]
        command: CredentialsCommand,
    },
    /// Check a certificate file and print the contract's check-result JSON.
    Check(CheckArgs),
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// NCA register commands.
    Register {
        #[command(subcommand)]
        command: RegisterCommand,
    },
    /// Sandbox commands.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Audit log commands.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Signed answers and decisions (docs/evidence.md).
    Evidence {
        #[command(subcommand)]
        command: EvidenceCommand,
    },
    /// Trusted-list commands (LOTL sources).
    Trust {
        #[command(subcommand)]
        command: TrustCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the hash chain of audit log files, oldest first (rotated files before the
    /// current one); with --checkpoints, every signed checkpoint (a truncated tail, a replaced
    /// file); with --since, that the log extends an older checkpoint; with --proof, one
    /// record's inclusion proof. Exit 0 when it holds, 65 naming what does not.
    Verify(evidence::VerifyArgs),
    /// Print the inclusion proof of one record against the first checkpoint covering it.
    Prove(evidence::ProveArgs),
    /// Set a torn final record aside and record the repair in the chain; with
    /// --checkpoints, set the checkpoint file's torn lines aside too.
    Repair {
        /// The audit file.
        file: PathBuf,
        /// The checkpoint file, whose torn lines (cut short by a crash) are moved aside.
        #[arg(long, value_name = "FILE")]
        checkpoints: Option<PathBuf>,
    },
    /// Print the audit records that match, as JSON lines or a table.
    Query(audit::QueryArgs),
    /// Write a self-contained HTML report of a period's decisions.
    Report(audit::ReportArgs),
}

#[derive(Debug, Subcommand)]
enum EvidenceCommand {
    /// Verify a signed answer of /v1/psp/eidas (its x-jws-signature over its body) or a
    /// signed decision against the JWKS. Exit 0 when it verifies, 65 saying why not.
    Verify(evidence::EvidenceVerifyArgs),
}

#[derive(Debug, Subcommand)]
enum TrustCommand {
    /// Download the LOTL of every source that names one and the lists it points to; store
    /// what verifies, keep the last good copy of what does not. Exit 75 if anything failed.
    Fetch {
        #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Show every trusted list and LOTL as `serve` would load it now: territory, sequence
    /// number, dates, signer, verdict, services and issuers used, last fetch. Exit 69 if any
    /// list is not used.
    Status {
        #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The PSP certificate: DER, PEM or Base64.
    #[arg(long, value_name = "FILE")]
    cert: PathBuf,
    /// The transaction jurisdiction (two-letter country code, any case). With `--site`, the
    /// site's.
    #[arg(long, value_name = "CC", value_parser = parse_country, required_unless_present = "site")]
    jurisdiction: Option<CountryCode>,
    /// Answer what this site of the configuration would decide for a request (`--method`,
    /// `--path`): the check, then the site's route rule and access rule, as its gateway and
    /// external authorisers decide. Prints the decision, not the check report.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["jurisdiction", "at"], requires = "path")]
    site: Option<String>,
    /// With `--site`: the request's path (and query), as the client sends it.
    #[arg(long, value_name = "PATH", requires = "site")]
    path: Option<String>,
    /// With `--site`: the request's method.
    #[arg(long, value_name = "METHOD", default_value = "GET", requires = "site")]
    method: String,
    /// Intermediate certificates presented with it (PEM bundle or DER); repeatable.
    #[arg(long, value_name = "FILE")]
    chain: Vec<PathBuf>,
    /// Check at this time (RFC 3339) instead of now; not in the future (the evidence of a
    /// later time does not exist yet).
    #[arg(long, value_name = "RFC3339", value_parser = parse_past_time)]
    at: Option<OffsetDateTime>,
    /// Configuration file [default: ./gateway.toml when present].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Add an ETSI TS 119 612 trusted list as an `EIDAS` source valid for the EEA; repeatable.
    /// Its signature is verified; its signer is accepted as your explicit choice (named on
    /// stderr), or must be one the `--lotl` authorises for the list's territory.
    #[arg(long, value_name = "FILE")]
    trust: Vec<PathBuf>,
    /// A list of the lists whose pointers authorise the signers of the `--trust` lists.
    #[arg(long, value_name = "FILE", requires = "lotl_signer")]
    lotl: Option<PathBuf>,
    /// A certificate (PEM) pinned for the `--lotl`; repeatable.
    #[arg(long, value_name = "CERT", requires = "lotl")]
    lotl_signer: Vec<PathBuf>,
    /// Also explain each flag on stderr.
    #[arg(long)]
    explain: bool,
    /// Fetch no CRL or OCSP evidence (no network traffic): `notRevoked` is false with both
    /// revocation errors saying so.
    #[arg(long)]
    offline: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a configuration, including every file it names; exit 78 if it cannot be used.
    Check {
        #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum CredentialsCommand {
    /// Read a secret from stdin (first line) and print its argon2 hash for api.credentials.
    Hash,
}

#[derive(Debug, Subcommand)]
enum RegisterCommand {
    /// Convert a register export to the native snapshot format (docs/registers.md).
    Import {
        /// The export's format.
        #[arg(long, value_enum)]
        format: ImportFormat,
        /// The export file.
        file: PathBuf,
        /// The native file to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Print entity counts per country, category and status of a native snapshot file.
    Stats { file: PathBuf },
    /// Download every register file that has a `url` (the EBA metadata endpoint), verify it
    /// and replace the file only when the new one loads. Exit 75 if any failed.
    Fetch {
        #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ImportFormat {
    /// The EBA "Payment Institutions and E-Money Institutions" register download (JSON).
    Eba,
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Generate the sandbox PKI (CAs, one PSP certificate per scenario, server certificate).
    Generate {
        #[arg(long, value_name = "DIR", default_value = "certs")]
        out: PathBuf,
    },
}

fn parse_country(s: &str) -> Result<CountryCode, crate::country::InvalidCountryCode> {
    s.parse()
}

/// `--at` that is not an RFC 3339 time (clap prints it after the argument's name).
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not an RFC 3339 time: {source}")]
struct TimeArgError {
    text: String,
    source: time::error::Parse,
}

/// `--at` later than now (5 minutes of clock skew allowed): a check as of a time to come would
/// answer from today's registers and revocation evidence as if they held then.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{text}` is in the future: a check as of a later time would answer from today's registers and revocation evidence as if they held then"
)]
struct FutureTimeError {
    text: String,
}

fn parse_past_time(s: &str) -> Result<OffsetDateTime, Box<dyn std::error::Error + Send + Sync>> {
    let t = parse_time(s)?;
    if t > OffsetDateTime::now_utc() + time::Duration::minutes(5) {
        return Err(Box::new(FutureTimeError { text: s.to_owned() }));
    }
    Ok(t)
}

fn parse_time(s: &str) -> Result<OffsetDateTime, TimeArgError> {
    OffsetDateTime::parse(s, &Rfc3339).map_err(|source| TimeArgError {
        text: s.to_owned(),
        source,
    })
}

/// Parses the arguments and runs the command.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_USAGE),
            };
        }
    };
    match cli.command {
        Command::Serve { config } => run_serve(&config),
        Command::Credentials {
            command: CredentialsCommand::Hash,
        } => run_credentials_hash(),
        Command::Check(args) => match run_check(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err((code, message)) => fail(code, &message),
        },
        Command::Config {
            command: ConfigCommand::Check { config },
        } => match run_config_check(&config) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_BAD_CONFIG, &e.to_string()),
        },
        Command::Register { command } => match run_register(command) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err((code, message)) => fail(code, &message),
        },
        Command::Audit { command } => match command {
            AuditCommand::Verify(args) => evidence::run_verify(&args),
            AuditCommand::Prove(args) => evidence::run_prove(&args),
            AuditCommand::Repair { file, checkpoints } => {
                evidence::run_repair(&file, checkpoints.as_deref())
            }
            AuditCommand::Query(args) => audit::run_query(&args),
            AuditCommand::Report(args) => evidence::run_report(&args),
        },
        Command::Evidence {
            command: EvidenceCommand::Verify(args),
        } => evidence::run_evidence_verify(&args),
        Command::Trust { command } => run_trust(command),
        Command::Sandbox {
            command: SandboxCommand::Generate { out },
        } => run_sandbox_generate(&out),
    }
}

/// `credentials hash`: reads one secret from stdin and prints its hash.
fn run_credentials_hash() -> ExitCode {
    // The first line only, and never more than MAX_SECRET_BYTES of it: stdin may be
    // a device or an endless pipe (`< /dev/zero`).
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(MAX_SECRET_BYTES + 1)
        .read_until(b'\n', &mut line)
    {
        return fail(EXIT_NO_INPUT, &format!("cannot read stdin: {e}"));
    }
    if !line.ends_with(b"\n") && line.len() as u64 > MAX_SECRET_BYTES {
        return fail(
            EXIT_DATA_ERR,
            &format!("the secret on stdin is over the {MAX_SECRET_BYTES}-byte limit"),
        );
    }
    let Ok(line) = String::from_utf8(line) else {
        return fail(EXIT_DATA_ERR, "the secret on stdin is not UTF-8 text");
    };
    let secret = line.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        return fail(EXIT_USAGE, "empty secret on stdin");
    }
    match crate::api::auth::hash_secret(secret) {
        Ok(hash) => {
            println!("{hash}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_DATA_ERR, &e.to_string()),
    }
}

/// `audit verify`: checks the audit logs' hash chain and prints what it covers.
fn run_audit_verify(files: &[PathBuf]) -> ExitCode {
    match crate::telemetry::audit::verify(files) {
        Ok(v) => {
            // The chain holds, but a record was lost where a write was cut short: said
            // on stderr, once per set-aside torn line.
            for torn in &v.torn_lines_set_aside {
                eprintln!("psp-gateway: audit log: {torn}");
            }
            println!(
                "audit chain unbroken: {} records, seq {} to {}, last hash {}{}",
                v.records,
                v.first_seq
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into()),
                v.last_seq
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into()),
                v.last_hash,
                if v.starts_mid_chain {
                    " (the first record continues an earlier file not given here)"
                } else {
                    ""
                }
            );
            if !v.torn_lines_set_aside.is_empty() {
                println!(
                    "{} torn line(s) set aside at start: a record was lost each time (stderr names them)",
                    v.torn_lines_set_aside.len()
                );
            }
            evidence::decisions_stand(&v)
        }
        Err(e) if e.line == 0 => fail(EXIT_NO_INPUT, &format!("audit log: {e}")),
        Err(e) => fail(EXIT_DATA_ERR, &format!("audit chain broken: {e}")),
    }
}

/// `trust fetch` and `trust status`: prints the outcome; not all good is 75 (fetch) or 69
/// (status).
fn run_trust(command: TrustCommand) -> ExitCode {
    let (result, not_all_good) = match command {
        TrustCommand::Fetch { config } => (trust::fetch(&config), EXIT_TEMP_FAIL),
        TrustCommand::Status { config, json } => (trust::status(&config, json), EXIT_UNAVAILABLE),
    };
    match result {
        Ok(outcome) => {
            println!("{}", outcome.output);
            if outcome.all_good {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(not_all_good)
            }
        }
        Err(e) => fail(EXIT_BAD_CONFIG, &e.to_string()),
    }
}

/// `sandbox generate`: writes the sandbox PKI to `out`.
fn run_sandbox_generate(out: &Path) -> ExitCode {
    match crate::sandbox::pki::generate(out) {
        Ok(manifest) => {
            println!(
                "wrote {} CAs and {} PSP certificates to {}",
                manifest.cas.len(),
                manifest.psps.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_CANT_CREATE, &e.to_string()),
    }
}

fn run_serve(path: &Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_BAD_CONFIG, &e.to_string()),
    };
    let audit_log = match &config.audit {
        Some(a) => {
            let file = config.resolve(&a.file);
            let options = match audit_options(&config, a) {
                Ok(o) => o,
                Err(e) => return fail(EXIT_BAD_CONFIG, &format!("evidence: {e}")),
            };
            match crate::telemetry::audit::AuditLog::open_with(&file, options) {
                Ok(log) => {
                    let log = Arc::new(log);
                    if let Err(e) = crate::telemetry::audit::AuditLog::start(&log) {
                        return fail(
                            EXIT_UNAVAILABLE,
                            &format!("audit log: cannot start its sync thread: {e}"),
                        );
                    }
                    Some(log)
                }
                Err(e) => {
                    return fail(
                        EXIT_CANT_CREATE,
                        &format!("audit log {}: {e}", file.display()),
                    );
                }
            }
        }
        None => None,
    };
    let torn = audit_log
        .as_ref()
        .and_then(|log| Some((log.path(), log.torn_set_aside()?.to_owned())));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_UNAVAILABLE, &format!("cannot start the runtime: {e}")),
    };
    // Held until `serve` returns: dropping it writes the queued log lines and sends the last
    // batch of traces, which the exporter does on the runtime (so it is made first, on it,
    // and dropped before it).
    let _log = {
        let _on_runtime = runtime.enter();
        crate::telemetry::init_with_audit(audit_log)
    };
    if let Some((file, aside)) = torn {
        // Start-up goes on: the chain continues from the last intact record, and its next
        // record names the set-aside file (`audit verify` reports it).
        tracing::warn!(
            audit_file = %file.display(),
            torn_file = %aside.display(),
            "the audit log's last line was torn (a write cut short: a full disk, a crash); its bytes were moved aside and the chain goes on from the last intact record"
        );
    }
    let served = runtime.block_on(crate::app::run(path, config));
    if let Some(log) = crate::telemetry::audit::global()
        && let Err(e) = log.close()
    {
        eprintln!(
            "psp-gateway: audit log: the last records could not be synced and checkpointed: {e}"
        );
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        // What start refuses is the configuration or a file it names (trust list, register,
        // TLS key), except a listener that cannot bind or a register that cannot be fetched.
        Err(e @ crate::app::StartError::Bind { .. })
        | Err(e @ crate::app::StartError::RegisterFetch(_)) => {
            fail(EXIT_UNAVAILABLE, &e.to_string())
        }
        Err(e) => fail(EXIT_BAD_CONFIG, &e.to_string()),
    }
}

/// How `[audit]` asks the log to be kept: its sync interval and write-failure policy, and
/// its checkpoints signed with the `[evidence]` key.
fn audit_options(
    config: &Config,
    a: &crate::config::AuditConfig,
) -> Result<crate::telemetry::audit::Options, crate::app::EvidenceConfigError> {
    let checkpoints = match (&a.checkpoints, &config.evidence) {
        (Some(file), Some(e)) => {
            let path = config.resolve(&e.signing_key);
            let key = crate::evidence::SigningKey::from_pem_file(&path)
                .map_err(|source| crate::app::EvidenceConfigError::SigningKey { path, source })?;
            Some(crate::telemetry::audit::checkpoint::CheckpointSpec {
                file: config.resolve(file),
                copy: a.checkpoint_copy.as_deref().map(|p| config.resolve(p)),
                every_records: a.checkpoint_records,
                every: Duration::from_secs(a.checkpoint_seconds),
                origin: a.origin.clone(),
                key: Arc::new(key),
                previous: crate::app::previous_keys(config, e)?,
            })
        }
        _ => None,
    };
    Ok(crate::telemetry::audit::Options {
        sync_interval: Duration::from_millis(a.sync_interval_ms),
        on_write_failure: a.on_write_failure,
        checkpoints,
    })
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("psp-gateway: {message}");
    ExitCode::from(code)
}

/// A failed command: its exit status and its message.
type Failure = (u8, String);

fn config_err(e: impl std::fmt::Display) -> Failure {
    (EXIT_BAD_CONFIG, e.to_string())
}

fn run_check(args: &CheckArgs) -> Result<(), Failure> {
    let config = check_config(args)?;
    let site = match &args.site {
        Some(name) => Some(site_of(&config, name)?),
        None => None,
    };
    let jurisdiction = match (&site, args.jurisdiction) {
        (Some(site), _) => site.jurisdiction,
        (None, Some(jurisdiction)) => jurisdiction,
        (None, None) => return Err((EXIT_USAGE, "give --jurisdiction or --site".to_owned())),
    };
    refuse_unusable_check(&config, args, jurisdiction)?;
    let sources = check_sources(&config, args)?;
    let at = args.at.unwrap_or_else(OffsetDateTime::now_utc);
    let data = check_reference_data(&sources, at)?;
    let revocation = if args.offline {
        Revocation::Offline
    } else {
        Revocation::Fetch(RevocationChecker::new(&config.revocation).map_err(config_err)?)
    };
    let (certificate, intermediates) = read_check_certificates(args)?;
    let service = check_service(&config, data, revocation)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (EXIT_UNAVAILABLE, format!("cannot start the runtime: {e}")))?;
    if let (Some(name), Some(path)) = (&args.site, &args.path) {
        let ask = SiteAsk {
            name,
            method: &args.method,
            path,
        };
        let decision = site_decision(
            &config,
            service,
            &runtime,
            ask,
            (certificate, intermediates),
        )?;
        let json = serde_json::to_string_pretty(&decision)
            .map_err(|e| (EXIT_DATA_ERR, format!("cannot serialise the decision: {e}")))?;
        println!("{json}");
        return Ok(());
    }
    let (report, wire) = match args.at {
        None => check_now(
            &config,
            &service,
            &runtime,
            certificate,
            intermediates,
            jurisdiction,
        )?,
        Some(at) => audit(
            &config,
            &service,
            &runtime,
            certificate,
            intermediates,
            jurisdiction,
            at,
        )
        .map_err(config_err)?,
    };
    write_check_report(&report, &wire, args.explain)
}

/// `check`'s configuration: `--config`, else `./gateway.toml` if it exists, else the built-in
/// defaults; which one is said on stderr.
fn check_config(args: &CheckArgs) -> Result<Config, Failure> {
    Ok(match &args.config {
        Some(path) => {
            eprintln!("psp-gateway: configuration {}", path.display());
            Config::load(path).map_err(config_err)?
        }
        None if Path::new(DEFAULT_CONFIG).exists() => {
            eprintln!("psp-gateway: configuration ./{DEFAULT_CONFIG}");
            Config::load(Path::new(DEFAULT_CONFIG)).map_err(config_err)?
        }
        None => {
            eprintln!(
                "psp-gateway: no configuration (no --config, no ./{DEFAULT_CONFIG}): built-in defaults"
            );
            Config::empty()
        }
    })
}

/// Refuses a `check` that cannot have an answer: a jurisdiction the configuration does not
/// list, or no trust source at all.
fn refuse_unusable_check(
    config: &Config,
    args: &CheckArgs,
    jurisdiction: CountryCode,
) -> Result<(), Failure> {
    // As the endpoint does: a jurisdiction the configuration does not list is refused.
    if !config.checks.valid_jurisdictions().contains(&jurisdiction) {
        return Err((
            EXIT_USAGE,
            format!(
                "`{jurisdiction}` is not a valid jurisdiction for this configuration (checks.valid_jurisdictions)"
            ),
        ));
    }
    if config.trust.sources.is_empty() && args.trust.is_empty() {
        return Err((
            EXIT_BAD_CONFIG,
            "no trust source is configured, so no issuer can be approved: give --trust FILE (a trusted list) or a configuration with [[trust.sources]]".to_owned(),
        ));
    }
    Ok(())
}

/// The configuration's data sources, plus one trust source per `--trust` list.
fn check_sources(
    config: &Config,
    args: &CheckArgs,
) -> Result<crate::service::DataSources, Failure> {
    let mut sources = config.data_sources();
    for (i, tl) in args.trust.iter().enumerate() {
        let path = std::path::absolute(tl)
            .map_err(|e| (EXIT_NO_INPUT, format!("{}: {e}", tl.display())))?;
        // An ad-hoc audit: the list's signature is verified, and its signer, which no LOTL
        // authorises here, is accepted as the operator's explicit choice and named below.
        sources.trust.push(SourceSpec {
            name: format!("--trust #{}", i + 1),
            qtsp_source: QtspSource::Eidas,
            reported_jurisdiction: "EEA".to_owned(),
            valid_for: country::EEA.iter().copied().collect(),
            qc_compliance: None,
            untyped: None,
            issuers: Vec::new(),
            trusted_lists: vec![TrustedListFile {
                path,
                signers: match &args.lotl {
                    Some(lotl) => ListSigners::Lotl {
                        file: lotl.clone(),
                        signers: args.lotl_signer.clone(),
                    },
                    None => ListSigners::AnyVerified,
                },
            }],
            lotl: None,
            next_update_grace: time::Duration::seconds(
                i64::try_from(config.trust.next_update_grace_secs).unwrap_or(i64::MAX),
            ),
        });
    }
    Ok(sources)
}

/// Loads the reference data as of `at`, and says on stderr which lists are not used and how
/// each `--trust` list's signer was accepted.
fn check_reference_data(
    sources: &crate::service::DataSources,
    at: OffsetDateTime,
) -> Result<ReferenceData, Failure> {
    let data = ReferenceData::load(sources, 1, at).map_err(|e| {
        // A list given with --trust is an input of this command; the rest is configuration.
        let message = e.to_string();
        if message.contains("`--trust #") {
            (EXIT_DATA_ERR, message)
        } else {
            (EXIT_BAD_CONFIG, message)
        }
    })?;
    for problem in data.trust.list_problems(at) {
        eprintln!("psp-gateway: not used: {problem}");
    }
    for note in data.trust.notes() {
        // How each `--trust` list's signer was accepted: the operator's explicit choice, or
        // authorised by the `--lotl`.
        if note.contains("explicit choice") || note.contains("by the LOTL") {
            eprintln!("psp-gateway: {note}");
        }
    }
    Ok(data)
}

/// Reads `--cert` and every `--chain` file: the PSP certificate and its intermediates.
fn read_check_certificates(
    args: &CheckArgs,
) -> Result<(PspCertificate, Vec<PspCertificate>), Failure> {
    let bytes = read_input(&args.cert)?;
    let certificate = PspCertificate::parse(&bytes)
        .map_err(|e| (EXIT_DATA_ERR, format!("{}: {e}", args.cert.display())))?;
    let mut intermediates = Vec::new();
    for path in &args.chain {
        let bytes = read_input(path)?;
        for der in decode_certificate_chain(&bytes)
            .map_err(|e| (EXIT_DATA_ERR, format!("{}: {e}", path.display())))?
        {
            intermediates.push(
                PspCertificate::from_der(der)
                    .map_err(|e| (EXIT_DATA_ERR, format!("{}: {e}", path.display())))?,
            );
        }
    }
    Ok((certificate, intermediates))
}

/// The same service the listeners use: revocation evidence is fetched (CRL and OCSP, per
/// the configuration's [revocation] rules) for issuers the trust list knows.
fn check_service(
    config: &Config,
    data: ReferenceData,
    revocation: Revocation,
) -> Result<CheckService, Failure> {
    let mut service = CheckService::new(data, revocation, Duration::ZERO, 1);
    let fetcher = crate::fetch::Fetcher::new(
        config.revocation.allow_destinations,
        config.revocation.connect_timeout(),
    );
    if let Some(fca) = crate::app::fca_register(config, &fetcher).map_err(config_err)? {
        service = service.with_fca(fca);
    }
    Ok(service)
}

/// The site `name` of the configuration, for `check --site`.
struct SiteOf {
    jurisdiction: CountryCode,
}

fn site_of(config: &Config, name: &str) -> Result<SiteOf, Failure> {
    let sites = config.sites();
    let named = |g: &&&crate::gateway::GatewayConfig| {
        g.name.as_deref().unwrap_or(crate::gateway::DEFAULT_SITE) == name
    };
    match sites.iter().find(named) {
        Some(g) => Ok(SiteOf {
            jurisdiction: g.jurisdiction,
        }),
        None => Err((
            EXIT_USAGE,
            format!(
                "no site `{name}` in this configuration (its sites: {})",
                sites
                    .iter()
                    .map(|g| g.name.as_deref().unwrap_or(crate::gateway::DEFAULT_SITE))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The request `check --site` asks about.
struct SiteAsk<'a> {
    name: &'a str,
    method: &'a str,
    path: &'a str,
}

/// `check --site`: the site's decision for the request, as its gateway and its external
/// authorisers make it ([`crate::gateway::GatewayState::authorise`]): allowed with the
/// identity headers its upstream would receive, or refused with the status, code and body
/// of the site's dialect.
fn site_decision(
    config: &Config,
    service: CheckService,
    runtime: &tokio::runtime::Runtime,
    ask: SiteAsk<'_>,
    (certificate, intermediates): (PspCertificate, Vec<PspCertificate>),
) -> Result<serde_json::Value, Failure> {
    let faces =
        crate::app::build_faces(config, Arc::new(service), None, None).map_err(config_err)?;
    let site = faces
        .sites
        .named(ask.name)
        .ok_or_else(|| (EXIT_USAGE, format!("no site `{}`", ask.name)))?;
    let method: http::Method = ask.method.parse().map_err(|_| {
        (
            EXIT_USAGE,
            format!("`{}` is not an HTTP method", ask.method),
        )
    })?;
    let chain = std::iter::once(certificate.der.clone())
        .chain(intermediates.iter().map(|c| c.der.clone()))
        .collect();
    let answer = runtime.block_on(site.authorise(crate::gateway::Ask {
        face: "cli",
        method: method.clone(),
        target: ask.path.to_owned(),
        host: None,
        chain: Ok(crate::gateway::DecodedChain::new(chain)),
        peer: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        header_names: Vec::new(),
        edge_removes: true,
        form_body: None,
        trace_headers: http::HeaderMap::new(),
    }));
    let mut out = serde_json::json!({
        "site": site.name(),
        "jurisdiction": site.jurisdiction().to_string(),
        "method": method.as_str(),
        "path": ask.path,
    });
    match answer {
        crate::gateway::Answer::Allow { set, .. } => {
            out["decision"] = "allow".into();
            out["identityHeaders"] = set
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into(),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        crate::gateway::Answer::Deny {
            status, code, body, ..
        } => {
            out["decision"] = "refuse".into();
            out["status"] = status.as_u16().into();
            out["code"] = code.into();
            out["body"] = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        }
    }
    Ok(out)
}

/// `check` without `--at`: the certificate checked now, and the report's wire form.
fn check_now(
    config: &Config,
    service: &CheckService,
    runtime: &tokio::runtime::Runtime,
    certificate: PspCertificate,
    intermediates: Vec<PspCertificate>,
    jurisdiction: CountryCode,
) -> Result<(crate::check::CheckReport, serde_json::Value), Failure> {
    let report = runtime.block_on(service.check(
        Arc::new(certificate),
        Arc::new(intermediates),
        jurisdiction,
        OffsetDateTime::now_utc(),
    ));
    let wire = serde_json::to_value(report.to_wire(&config.checks.error_link_base))
        .map_err(|e| (EXIT_DATA_ERR, format!("cannot serialise the report: {e}")))?;
    Ok(((*report).clone(), wire))
}

/// Prints the report's JSON on stdout and, with `--explain`, its explanation on stderr.
fn write_check_report(
    report: &crate::check::CheckReport,
    wire: &serde_json::Value,
    explain: bool,
) -> Result<(), Failure> {
    let json = serde_json::to_string_pretty(wire)
        .map_err(|e| (EXIT_DATA_ERR, format!("cannot serialise the report: {e}")))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{json}")
        .map_err(|e| (EXIT_CANT_CREATE, format!("cannot write to stdout: {e}")))?;
    if explain {
        for line in report.explanation() {
            eprintln!("{line}");
        }
    }
    Ok(())
}

/// Why `check --at` has no answer (exit status 78, as a configuration problem).
#[derive(Debug, thiserror::Error)]
enum AuditError {
    #[error(transparent)]
    Registers(#[from] crate::service::audit::AuditRegistersError),
    #[error("cannot serialise the report: {0}")]
    Serialise(#[source] serde_json::Error),
}

/// `check --at T`: the registers in force at T (from the register history), revocation
/// evidence read as of T, and an `audit` object saying what each block came from.
fn audit(
    config: &Config,
    service: &CheckService,
    runtime: &tokio::runtime::Runtime,
    certificate: PspCertificate,
    intermediates: Vec<PspCertificate>,
    jurisdiction: CountryCode,
    at: OffsetDateTime,
) -> Result<(crate::check::CheckReport, serde_json::Value), AuditError> {
    let registers =
        crate::service::audit::registers_as_of(&config.registers, &config.base_dir, at)?;
    let (report, evidence) = runtime.block_on(service.audit(
        &certificate,
        &intermediates,
        jurisdiction,
        at,
        registers.snapshot.as_deref(),
    ));
    let mut wire = serde_json::to_value(report.to_wire(&config.checks.error_link_base))
        .map_err(AuditError::Serialise)?;
    crate::service::audit::annotate(&mut wire, at, &registers, &evidence);
    Ok((report, wire))
}

/// Budget: the largest certificate or `--chain` file read, in bytes. Certificate inputs are
/// small (a chain of a dozen PEM certificates is under 64 KiB, [`MAX_INPUT_LEN`]); 1 MiB
/// refuses a wrong path, a device or an endless pipe (`/dev/zero`) before memory runs out,
/// and the decoder then applies its own, smaller cap.
///
/// [`MAX_INPUT_LEN`]: crate::cert::input::MAX_INPUT_LEN
const MAX_INPUT_FILE_BYTES: u64 = 1024 * 1024;

/// Reads a certificate input through a bounded reader: a regular file, a pipe (`<(cmd)`,
/// `/dev/stdin`) or a device alike never costs more than [`MAX_INPUT_FILE_BYTES`].
fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    use crate::bounded::{BoundedReadError, read_file};
    read_file(path, MAX_INPUT_FILE_BYTES, "a certificate file").map_err(|e| match e {
        BoundedReadError::Io(e) => (EXIT_NO_INPUT, format!("{}: {e}", path.display())),
        too_large @ (BoundedReadError::TooLarge { .. } | BoundedReadError::NotRegular { .. }) => {
            (EXIT_DATA_ERR, format!("{}: {too_large}", path.display()))
        }
    })
}

fn run_register(command: RegisterCommand) -> Result<String, Failure> {
    use std::io::IsTerminal;
    // A file that cannot be read is 66; one whose content is wrong, 65.
    let load_err = |e: register::RegisterLoadError| match e {
        register::RegisterLoadError::Read { .. } => (EXIT_NO_INPUT, e.to_string()),
        other => (EXIT_DATA_ERR, other.to_string()),
    };
    match command {
        RegisterCommand::Import {
            format: ImportFormat::Eba,
            file,
            out,
        } => {
            let summary = register::import_eba(&file, &out, std::io::stderr().is_terminal())
                .map_err(load_err)?;
            Ok(summary.to_string())
        }
        RegisterCommand::Stats { file } => register::stats(&file).map_err(load_err),
        RegisterCommand::Fetch { config } => fetch_registers(&config),
    }
}

fn fetch_registers(config_path: &Path) -> Result<String, Failure> {
    let config = Config::load(config_path).map_err(config_err)?;
    let files: Vec<_> = config.registers.fetched_files().collect();
    if files.is_empty() {
        return Err(config_err(format!(
            "{}: no register file names a url; nothing to fetch",
            config_path.display()
        )));
    }
    let fetcher = crate::fetch::Fetcher::new(
        config.revocation.allow_destinations,
        config.revocation.connect_timeout(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (EXIT_UNAVAILABLE, format!("cannot start the runtime: {e}")))?;
    let mut lines = Vec::new();
    let mut failed = 0;
    for (i, file) in files.iter().enumerate() {
        eprintln!(
            "[{}/{}] fetching {} from {}",
            i + 1,
            files.len(),
            file.path.display(),
            file.url.as_deref().unwrap_or_default()
        );
        match runtime.block_on(register::fetch_eba(
            &fetcher,
            &config.registers,
            file,
            &config.base_dir,
            config.registers.fetch_timeout(),
        )) {
            Ok(d) => lines.push(format!(
                "{}: stored {} bytes from {} (published {}), {} entities",
                d.path.display(),
                d.bytes,
                d.zip_url,
                d.published.as_deref().unwrap_or("?"),
                d.entities
            )),
            Err(e) => {
                failed += 1;
                lines.push(format!(
                    "{}: FAILED, the file in place stays: {e}",
                    file.path.display()
                ));
            }
        }
    }
    if failed > 0 {
        Err((EXIT_TEMP_FAIL, lines.join("\n")))
    } else {
        Ok(lines.join("\n"))
    }
}

/// Why `config check` finds the configuration unusable (each the error of the step that
/// failed, as serve would report it).
#[derive(Debug, thiserror::Error)]
enum ConfigCheckError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustLoadError),
    #[error(transparent)]
    Registers(#[from] register::RegisterLoadError),
    #[error(transparent)]
    Data(#[from] crate::service::LoadError),
    #[error(transparent)]
    Faces(#[from] crate::app::StartError),
    /// `[registers.fca]` does not give usable settings (credentials, …).
    #[error(transparent)]
    Fca(#[from] register::FcaSettingsError),
}

/// What `config check` says of the faces it built.
fn faces_summary(faces: &crate::app::Faces) -> String {
    let mut summary = String::new();
    if faces.api.is_some() {
        summary.push_str("\ncheck endpoint: configured, its files load");
    }
    for site in faces.sites.all() {
        summary.push_str(&format!(
            "\nsite {}: jurisdiction {}, {}, upstream {}; its files load",
            site.name(),
            site.jurisdiction(),
            match (site.listen(), site.server_names()) {
                (Some(listen), []) => format!("listener {listen}"),
                (Some(listen), names) => format!("listener {listen} as {}", names.join(", ")),
                (None, _) => "no listener (external authorisers only)".to_owned(),
            },
            site.upstream_display(),
        ));
    }
    if faces.admin.is_some() {
        summary.push_str("\nadmin listener: configured, its files load");
    }
    if let Some(evidence) = &faces.evidence {
        summary.push_str(&format!(
            "\nevidence: signing with {} key {}; {} public key(s) published at {}{}",
            evidence.key().alg(),
            evidence.key().kid(),
            evidence.jwks().keys().len(),
            crate::admin::JWKS_PATH,
            if evidence.forward_signature {
                "; decisions forwarded to the upstream"
            } else {
                ""
            }
        ));
    }
    summary
}

/// What `config check` says of `[audit]`.
fn audit_summary(config: &Config, a: &crate::config::AuditConfig) -> String {
    format!(
        "\naudit log: {} (synced every {} ms, {} on a write failure){}",
        config.resolve(&a.file).display(),
        a.sync_interval_ms,
        match a.on_write_failure {
            crate::telemetry::audit::WriteFailurePolicy::FailClosed => "fail_closed",
            crate::telemetry::audit::WriteFailurePolicy::FailOpen => "fail_open",
        },
        match &a.checkpoints {
            Some(c) => format!(
                "; checkpoints signed every {} records or {} s to {}",
                a.checkpoint_records,
                a.checkpoint_seconds,
                config.resolve(c).display()
            ),
            None => String::new(),
        }
    )
}

fn run_config_check(path: &Path) -> Result<String, ConfigCheckError> {
    let config = Config::load(path)?;
    let trust = config.load_trust(OffsetDateTime::now_utc())?;
    let (registers, report) = crate::register::load(&config.registers, &config.base_dir)?;
    let mut summary = format!(
        "{}: ok: {} trust sources, {} trusted issuers, {} registers\n{report}",
        path.display(),
        trust.sources().len(),
        trust.issuers().len(),
        registers.registers().len()
    );
    for note in trust.notes() {
        summary.push_str("\nnote: ");
        summary.push_str(note);
    }
    // Everything else serve loads before binding: TLS certificates and keys (matched), the
    // upstream CA, the sandbox PKI, identity header names and route prefixes.
    let data = ReferenceData::load(&config.data_sources(), 1, OffsetDateTime::now_utc())?;
    let service = Arc::new(CheckService::new(
        data,
        Revocation::Offline,
        Duration::ZERO,
        1,
    ));
    let faces = crate::app::build_faces(&config, service, None, None)?;
    summary.push_str(&faces_summary(&faces));
    if let Some(a) = &config.audit {
        audit_options(&config, a).map_err(crate::app::StartError::Evidence)?;
        summary.push_str(&audit_summary(&config, a));
    }
    // Redis is not contacted (it may be down while the configuration is right); what serve
    // reads at start is: the password and the CA file.
    if let Some(shared) = &config.shared_state {
        shared
            .password(&config.base_dir)
            .map_err(|e| crate::app::StartError::SharedState(e.to_string()))?;
        if let Some(ca) = &shared.ca_file {
            std::fs::read(config.resolve(ca)).map_err(|e| {
                crate::app::StartError::SharedState(format!(
                    "shared_state.ca_file {}: {e}",
                    config.resolve(ca).display()
                ))
            })?;
        }
        summary.push_str(&format!(
            "\nshared state: {} (not contacted), its credentials load",
            shared.url
        ));
    }
    if let Some(settings) = &config.registers.fca {
        // What serve will need: the credentials (never printed).
        crate::register::FcaConfig::from_settings(settings, &config.base_dir)
            .map_err(ConfigCheckError::Fca)?;
        summary.push_str("\nUK FCA register API: credentials present, consulted on demand");
    }
    for problem in trust.list_problems(OffsetDateTime::now_utc()) {
        summary.push_str("\nnot used: ");
        summary.push_str(&problem);
    }
    Ok(summary)
}
