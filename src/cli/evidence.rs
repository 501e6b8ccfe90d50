//! The evidence commands: `audit verify` (the chain, and with `--checkpoints` the signed
//! checkpoints, `--since` an older checkpoint, `--proof` one record's inclusion proof),
//! `audit prove`, `audit repair`, and `evidence verify` (a signed answer or decision).
//! docs/evidence.md walks an auditor through them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{EXIT_DATA_ERR, EXIT_NO_INPUT, EXIT_USAGE, fail};
use crate::evidence::{Jwks, PublicKey};
use crate::telemetry::audit::{self, checkpoint, proof};

/// `audit verify`'s arguments.
#[derive(Debug, clap::Args)]
pub(super) struct VerifyArgs {
    /// The audit files, oldest first (rotated files before the current one).
    #[arg(required_unless_present = "proof")]
    pub(super) files: Vec<PathBuf>,
    /// The checkpoint file: every checkpoint in it must verify and match the files.
    #[arg(long, value_name = "FILE")]
    pub(super) checkpoints: Option<PathBuf>,
    /// The public keys: the JWKS from /.well-known/jwks.json, or a PEM public key.
    #[arg(long, value_name = "FILE")]
    pub(super) key: Option<PathBuf>,
    /// A checkpoint kept from before (its signed note, or its checkpoint-file line): the
    /// files must extend it.
    #[arg(long, value_name = "FILE")]
    pub(super) since: Option<PathBuf>,
    /// An inclusion proof from `audit prove`, checked without the log.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["files", "checkpoints", "since"])]
    pub(super) proof: Option<PathBuf>,
    /// Accept records after the last checkpoint (a log still being written).
    #[arg(long)]
    pub(super) allow_tail: bool,
    /// Accept what restarts recorded as lost or changed after it was synced (records cut
    /// from the end before a restart): still printed, no longer a failure.
    #[arg(long)]
    pub(super) accept_losses: bool,
    /// The log's origin (`[audit] origin`): every checkpoint must name it. Without it, the
    /// first checkpoint's origin is the log's, and every other must name the same.
    #[arg(long, value_name = "ORIGIN")]
    pub(super) origin: Option<String>,
}

/// `audit prove`'s arguments.
#[derive(Debug, clap::Args)]
pub(super) struct ProveArgs {
    /// The record's `seq`.
    pub(super) seq: u64,
    /// The audit files, oldest first, from the first record.
    #[arg(required = true)]
    pub(super) files: Vec<PathBuf>,
    /// The checkpoint file.
    #[arg(long, value_name = "FILE")]
    pub(super) checkpoints: PathBuf,
}

/// `evidence verify`'s arguments.
#[derive(Debug, clap::Args)]
pub(super) struct EvidenceVerifyArgs {
    /// The public keys: the JWKS from /.well-known/jwks.json.
    #[arg(long, value_name = "FILE")]
    pub(super) jwks: PathBuf,
    /// A detached signature (the x-jws-signature header of a /v1/psp/eidas answer)…
    #[arg(long, value_name = "JWS", requires = "body")]
    pub(super) signature: Option<String>,
    /// …over this body, byte for byte.
    #[arg(long, value_name = "FILE")]
    pub(super) body: Option<PathBuf>,
    /// A signed decision (the `decision_jws` of an audit record, or the x-psp-decision-jws
    /// header an upstream received): its payload is printed once it verifies.
    #[arg(long, value_name = "JWS", conflicts_with_all = ["signature", "body"])]
    pub(super) decision: Option<String>,
    /// The certificate the answer must be about (PEM or DER): its SHA-256 must be the
    /// signed question's `certSha256`.
    #[arg(long, value_name = "FILE", requires = "signature")]
    pub(super) cert: Option<PathBuf>,
    /// The jurisdiction the answer must be for.
    #[arg(long, value_name = "CC", requires = "signature")]
    pub(super) jurisdiction: Option<String>,
    /// The `fi_reference_id` the answer must be for.
    #[arg(long, value_name = "ID", requires = "signature")]
    pub(super) fi_reference_id: Option<String>,
    /// The caller (the check endpoint's user) the answer must be for.
    #[arg(long, value_name = "USER", requires = "signature")]
    pub(super) caller: Option<String>,
}

/// Why a file named on the command line cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a PEM certificate ({source})", path.display())]
    NotPem {
        path: PathBuf,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{}: {source}", path.display())]
    Jwks {
        path: PathBuf,
        #[source]
        source: crate::evidence::JwkError,
    },
    #[error("{}: {source}", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: crate::evidence::KeyError,
    },
}

/// The SHA-256 (hex) of the certificate in `path`: PEM (the first certificate) or DER.
fn certificate_sha256(path: &Path) -> Result<String, InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    let der = match std::str::from_utf8(&bytes) {
        Ok(text) if text.contains("-----BEGIN CERTIFICATE-----") => {
            let body: String = text
                .split("-----BEGIN CERTIFICATE-----")
                .nth(1)
                .and_then(|rest| rest.split("-----END CERTIFICATE-----").next())
                .unwrap_or("")
                .split_whitespace()
                .collect();
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(body)
                .map_err(|source| InputError::NotPem {
                    path: path.to_owned(),
                    source,
                })?
        }
        _ => bytes,
    };
    Ok(crate::hex::lower(&crate::hex::sha256(&der)))
}

/// Each member of the signed question that the caller named must be what it says.
fn question_mismatches(
    args: &EvidenceVerifyArgs,
    question: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Vec<String>, InputError> {
    let mut expected = Vec::new();
    if let Some(cert) = &args.cert {
        expected.push(("certSha256", certificate_sha256(cert)?));
    }
    if let Some(j) = &args.jurisdiction {
        expected.push(("jurisdiction", j.clone()));
    }
    if let Some(f) = &args.fi_reference_id {
        expected.push(("fiReferenceId", f.clone()));
    }
    if let Some(c) = &args.caller {
        expected.push(("caller", c.clone()));
    }
    Ok(expected
        .into_iter()
        .filter_map(|(member, want)| {
            let got = question
                .and_then(|q| q.get(member))
                .and_then(|v| v.as_str());
            (got != Some(want.as_str())).then(|| {
                format!(
                    "the signed answer is about {member} {}, not {want}",
                    got.map_or_else(|| "(none)".to_owned(), |g| format!("`{g}`"))
                )
            })
        })
        .collect())
}

/// Reads public keys: a JWKS (`{"keys":[…]}`) or PEM public keys.
pub(super) fn load_keys(path: &Path) -> Result<Vec<PublicKey>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.trim_start().starts_with('{') {
        let jwks = Jwks::from_json(&text).map_err(|source| InputError::Jwks {
            path: path.to_owned(),
            source,
        })?;
        return Ok(jwks.keys().to_vec());
    }
    PublicKey::from_pem(&text)
        .map(|k| vec![k])
        .map_err(|source| InputError::Key {
            path: path.to_owned(),
            source,
        })
}

/// `audit verify`.
pub(super) fn run_verify(args: &VerifyArgs) -> ExitCode {
    if args.checkpoints.is_none() && args.since.is_none() && args.proof.is_none() {
        return super::run_audit_verify(&args.files);
    }
    let Some(key) = &args.key else {
        return fail(
            EXIT_USAGE,
            "--checkpoints, --since and --proof need --key (the JWKS or a PEM public key)",
        );
    };
    let keys = match load_keys(key) {
        Ok(k) => k,
        Err(e) => return fail(EXIT_NO_INPUT, &e.to_string()),
    };
    if let Some(path) = &args.proof {
        return verify_proof(path, &keys);
    }
    if let Some(cp) = &args.checkpoints
        && let Err(refused) = verify_against_checkpoints(args, cp, &keys)
    {
        return refused;
    }
    if let Some(old) = &args.since {
        let text = match std::fs::read_to_string(old) {
            Ok(t) => t,
            Err(e) => return fail(EXIT_NO_INPUT, &format!("{}: {e}", old.display())),
        };
        match proof::since(&args.files, &text, &keys) {
            Ok(x) => println!(
                "the log extends the checkpoint of {} records: it holds {} records, and the RFC 9162 consistency proof from {} to {} verifies ({} hashes)",
                x.old_size,
                x.new_size,
                x.old_size,
                x.new_size,
                x.proof.len()
            ),
            Err(e) => return finding(e),
        }
    }
    ExitCode::SUCCESS
}

/// `audit verify --checkpoints`: the log against its signed checkpoints; `Err` with the
/// exit code when it does not stand (what was found already said).
fn verify_against_checkpoints(
    args: &VerifyArgs,
    cp: &Path,
    keys: &[PublicKey],
) -> Result<(), ExitCode> {
    let lines = match checkpoint::read_all(cp) {
        Ok(file) => {
            for torn in &file.torn {
                eprintln!("psp-gateway: checkpoints: {torn}");
            }
            file.lines
        }
        Err(e) => return Err(checkpoints_unreadable(cp, &e)),
    };
    match proof::check(
        &args.files,
        &lines,
        keys,
        args.allow_tail,
        args.origin.as_deref(),
    ) {
        Ok(c) => {
            // Verified, but a record was lost where a write was cut short: said each time.
            for torn in &c.chain.torn_lines_set_aside {
                eprintln!("psp-gateway: audit log: {torn}");
            }
            for aside in &c.chain.set_aside_at_restart {
                eprintln!("psp-gateway: audit log: {aside}");
            }
            for loss in &c.chain.losses {
                eprintln!("psp-gateway: audit log: {loss}");
            }
            if decisions_stand(&c.chain) != ExitCode::SUCCESS {
                return Err(ExitCode::from(EXIT_DATA_ERR));
            }
            if !c.chain.losses.is_empty() && !args.accept_losses {
                return Err(fail(
                    EXIT_DATA_ERR,
                    &format!(
                        "audit log not verified: {} restart(s) found records synced before the stop missing or changed (above); --accept-losses accepts them once investigated",
                        c.chain.losses.len()
                    ),
                ));
            }
            println!(
                "audit log verified against {} signed checkpoint(s): {} records, the first {} covered by the last checkpoint{}",
                c.checkpoints,
                c.chain.records,
                c.covered,
                if c.tail > 0 {
                    format!(
                        "; {} after it not yet covered (accepted: --allow-tail)",
                        c.tail
                    )
                } else {
                    String::new()
                }
            );
            Ok(())
        }
        Err(e) => Err(finding(e)),
    }
}

/// Every request record stands with the signed decision it names (0), or each that does
/// not is named and the verification fails (65).
pub(super) fn decisions_stand(v: &audit::Verified) -> ExitCode {
    for d in &v.decisions_unknown_after_loss {
        eprintln!("psp-gateway: audit log: {d}");
    }
    if v.decisions_unmatched.is_empty() {
        return ExitCode::SUCCESS;
    }
    for d in &v.decisions_unmatched {
        eprintln!("psp-gateway: audit log: {d}");
    }
    fail(
        EXIT_DATA_ERR,
        &format!(
            "audit log not verified: {} record(s) do not stand with the signed decision they name (above)",
            v.decisions_unmatched.len()
        ),
    )
}

/// A checkpoint file that cannot be read (66) or holds a line that is no checkpoint (65).
fn checkpoints_unreadable(path: &Path, e: &std::io::Error) -> ExitCode {
    let code = if e.kind() == std::io::ErrorKind::InvalidData {
        EXIT_DATA_ERR
    } else {
        EXIT_NO_INPUT
    };
    fail(code, &format!("{}: {e}", path.display()))
}

fn finding(e: proof::Finding) -> ExitCode {
    match &e {
        proof::Finding::Chain(b) if b.line == 0 => fail(EXIT_NO_INPUT, &format!("audit log: {b}")),
        _ => fail(EXIT_DATA_ERR, &format!("audit log not verified: {e}")),
    }
}

fn verify_proof(path: &Path, keys: &[PublicKey]) -> ExitCode {
    let parsed = std::fs::read_to_string(path)
        .map_err(|e| (EXIT_NO_INPUT, format!("{}: {e}", path.display())))
        .and_then(|t| {
            serde_json::from_str::<proof::InclusionProof>(&t).map_err(|e| {
                (
                    EXIT_DATA_ERR,
                    format!("{}: not an inclusion proof: {e}", path.display()),
                )
            })
        });
    let p = match parsed {
        Ok(p) => p,
        Err((code, e)) => return fail(code, &e),
    };
    match proof::verify_inclusion(&p, keys) {
        Ok(c) => {
            println!(
                "record {} is in the log `{}` of {} records, as its signed checkpoint states",
                p.index + 1,
                c.origin,
                c.size
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_DATA_ERR, &format!("inclusion proof not verified: {e}")),
    }
}

/// `audit prove`: prints the inclusion proof of one record as JSON.
pub(super) fn run_prove(args: &ProveArgs) -> ExitCode {
    let lines = match checkpoint::read_all(&args.checkpoints) {
        Ok(file) => file.lines,
        Err(e) => return checkpoints_unreadable(&args.checkpoints, &e),
    };
    if args.seq == 0 {
        return fail(EXIT_USAGE, "records are numbered from 1");
    }
    match proof::prove(&args.files, &lines, args.seq) {
        Ok(p) => {
            println!("{}", serde_json::to_string_pretty(&p).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_DATA_ERR, &e.to_string()),
    }
}

/// `audit report`: the report, with the period's checkpoints verified against the files
/// (every checkpoint signed in the period, and the first one after it).
pub(super) fn run_report(args: &super::audit::ReportArgs) -> ExitCode {
    use super::audit::Verification;
    let (statuses, verification) = match (&args.checkpoints, &args.key) {
        (Some(cp), Some(key)) => {
            let lines = match checkpoint::read_all(cp) {
                Ok(file) => file.lines,
                Err(e) => return checkpoints_unreadable(cp, &e),
            };
            let keys = match load_keys(key) {
                Ok(k) => k,
                Err(e) => return fail(EXIT_NO_INPUT, &e.to_string()),
            };
            // The whole log first: the tallies count only what stands up to the signatures.
            // Records after the last checkpoint (a live log) are counted, and said to be.
            let verification = match proof::check(&args.files, &lines, &keys, args.allow_tail, None)
            {
                Ok(c) if !c.chain.losses.is_empty() => {
                    Verification::Failed(c.chain.losses.join("; "))
                }
                Ok(c) if !c.chain.decisions_unmatched.is_empty() => {
                    Verification::Failed(c.chain.decisions_unmatched.join("; "))
                }
                Ok(c) => Verification::Verified(format!(
                    "{} records against {} signed checkpoint(s), the first {} covered{}",
                    c.chain.records,
                    c.checkpoints,
                    c.covered,
                    if c.tail > 0 {
                        format!("; the last {} not yet covered by a checkpoint", c.tail)
                    } else {
                        String::new()
                    }
                )),
                Err(e) => Verification::Failed(e.to_string()),
            };
            (checkpoint_statuses(args, &lines, &keys), verification)
        }
        _ => (Vec::new(), Verification::NotAsked),
    };
    super::audit::run_report(args, &statuses, &verification)
}

fn checkpoint_statuses(
    args: &super::audit::ReportArgs,
    lines: &[checkpoint::CheckpointLine],
    keys: &[PublicKey],
) -> Vec<super::audit::CheckpointStatus> {
    use time::format_description::well_known::Rfc3339;
    let sizes: Vec<u64> = lines.iter().map(|l| l.size).collect();
    let roots = proof::roots_at(&args.files, &sizes, keys);
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Ok(time) = time::OffsetDateTime::parse(&line.time, &Rfc3339) else {
            continue;
        };
        let after = args.to.is_some_and(|to| time > to);
        if args.from.is_some_and(|from| time < from) {
            continue;
        }
        let (verified, detail) = match (proof::open_note(&line.note, keys), &roots) {
            (Err(why), _) => (false, format!("signature not verified: {why}")),
            (Ok(_), Err(e)) => (false, e.to_string()),
            (Ok(c), Ok((chain, roots))) => match roots[i] {
                None => (
                    false,
                    format!(
                        "truncated: signed over {} records, the files hold {}",
                        c.size, chain.records
                    ),
                ),
                Some(root) if root == c.root && c.size == line.size => (
                    true,
                    format!(
                        "signature and root of the first {} records verified",
                        c.size
                    ),
                ),
                Some(_) => (
                    false,
                    format!(
                        "the first {} records are not those it was signed over",
                        c.size
                    ),
                ),
            },
        };
        out.push(super::audit::CheckpointStatus {
            size: line.size,
            time,
            verified,
            detail,
        });
        if after {
            break;
        }
    }
    out
}

/// `audit repair`: sets a torn final record aside (as `serve` does at start) and appends the
/// record saying so; a file without one is left as it is. With `--checkpoints`, the torn
/// lines of the checkpoint file are set aside too.
pub(super) fn run_repair(file: &Path, checkpoints: Option<&Path>) -> ExitCode {
    // Only regular files, never through a symbolic link: a repair cuts the file it is given.
    for path in std::iter::once(file).chain(checkpoints) {
        match std::fs::symlink_metadata(path) {
            Err(e) => return fail(EXIT_NO_INPUT, &format!("{}: {e}", path.display())),
            Ok(m) if !m.file_type().is_file() => {
                return fail(
                    EXIT_DATA_ERR,
                    &format!(
                        "{}: not a regular file (a symbolic link, a FIFO, a device or a directory): audit repair changes only the file itself; nothing was changed",
                        path.display()
                    ),
                );
            }
            Ok(_) => {}
        }
    }
    if let Some(cp) = checkpoints {
        match checkpoint::set_torn_lines_aside(cp) {
            Ok(Some((aside, n))) => println!(
                "{n} torn checkpoint line(s) of {} were moved to {}",
                cp.display(),
                aside.display()
            ),
            Ok(None) => println!("no torn checkpoint line in {}", cp.display()),
            Err(e) => return fail(EXIT_DATA_ERR, &format!("{}: {e}", cp.display())),
        }
    }
    match audit::AuditLog::open(file) {
        Ok(log) => {
            match log.torn_set_aside() {
                Some(aside) => println!(
                    "a torn final record was moved to {}; the file ends with the record saying so, and the chain goes on",
                    aside.display()
                ),
                None => println!("no torn final record: nothing to repair"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_DATA_ERR, &format!("{}: {e}", file.display())),
    }
}

/// `evidence verify`.
pub(super) fn run_evidence_verify(args: &EvidenceVerifyArgs) -> ExitCode {
    let jwks = match std::fs::read_to_string(&args.jwks)
        .map_err(|e| e.to_string())
        .and_then(|t| Jwks::from_json(&t).map_err(|e| e.to_string()))
    {
        Ok(j) => j,
        Err(e) => return fail(EXIT_NO_INPUT, &format!("{}: {e}", args.jwks.display())),
    };
    if let (Some(signature), Some(body)) = (&args.signature, &args.body) {
        let payload = match std::fs::read(body) {
            Ok(b) => b,
            Err(e) => return fail(EXIT_NO_INPUT, &format!("{}: {e}", body.display())),
        };
        return match crate::evidence::verify_detached(&jwks, signature, &payload) {
            Ok(v) => {
                let mismatches = match question_mismatches(args, v.question.as_ref()) {
                    Ok(m) => m,
                    Err(e) => return fail(EXIT_NO_INPUT, &e.to_string()),
                };
                if !mismatches.is_empty() {
                    return fail(
                        EXIT_DATA_ERR,
                        &format!(
                            "signature verified, but not for this question: {}",
                            mismatches.join("; ")
                        ),
                    );
                }
                println!(
                    "signature verified: {} by key {}, signed at {}{}",
                    v.alg,
                    v.kid,
                    crate::evidence::rfc3339_secs(v.iat),
                    v.question
                        .as_ref()
                        .map(|q| format!(", answering {}", serde_json::Value::Object(q.clone())))
                        .unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_DATA_ERR, &format!("signature not verified: {e}")),
        };
    }
    if let Some(decision) = &args.decision {
        return match crate::evidence::verify_compact(&jwks, decision) {
            Ok((v, payload)) => {
                eprintln!("decision verified: {} by key {}", v.alg, v.kid);
                println!("{}", String::from_utf8_lossy(&payload));
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_DATA_ERR, &format!("decision not verified: {e}")),
        };
    }
    fail(
        EXIT_USAGE,
        "give --signature and --body (a signed answer) or --decision (a signed decision)",
    )
}
