//! Audits ("was this PSP allowed on 3 March?"): the registers in force at a past time, and
//! the `audit` object that `check --at` and the endpoint's `at` add to the contract's answer,
//! saying which register snapshots and which revocation evidence each block came from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::register::{History, HistoryEntry, RegisterConfig, RegisterLoadError, RegisterSnapshot};
use crate::revocation::{MethodOutcome, PathEvidence};

/// The registers an audit at a past time uses.
#[derive(Debug, Clone)]
pub struct AuditRegisters {
    /// The snapshot in force at the time; `None`: the current one (no history configured).
    pub snapshot: Option<Arc<RegisterSnapshot>>,
    /// What was used, in words.
    pub note: String,
    pub used: Vec<HistoryEntry>,
    /// Register files no recorded snapshot covers: not consulted.
    pub uncovered: Vec<PathBuf>,
}

impl AuditRegisters {
    /// The history's entries that the snapshot is made of, as a cache key.
    pub fn key(&self) -> Vec<String> {
        self.used.iter().map(|e| e.sha256.clone()).collect()
    }
}

/// Why the registers in force at a past time cannot be had ([`registers_as_of`]).
#[derive(Debug, thiserror::Error)]
pub enum AuditRegistersError {
    /// The history's index cannot be read.
    #[error("register history {}: {source}", dir.display())]
    History {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// The files in force at the time do not load.
    #[error("register history: {0}")]
    Snapshot(#[source] RegisterLoadError),
}

/// The registers in force at `at`, from the register history of `config`; the current
/// registers (said so) when no history is configured. Loading a snapshot reads every file:
/// call it off the async workers.
pub fn registers_as_of(
    config: &RegisterConfig,
    base_dir: &Path,
    at: OffsetDateTime,
) -> Result<AuditRegisters, AuditRegistersError> {
    let Some(history) = History::of(config, base_dir) else {
        return Ok(AuditRegisters {
            snapshot: None,
            note: "the current register files: no [registers] history_dir is configured, so \
                   the registers in force at the time are not known"
                .to_owned(),
            used: Vec::new(),
            uncovered: Vec::new(),
        });
    };
    let as_of =
        history
            .as_of(config, base_dir, at)
            .map_err(|source| AuditRegistersError::History {
                dir: history.dir().to_path_buf(),
                source,
            })?;
    let (snapshot, _) =
        crate::register::load(&as_of.config, base_dir).map_err(AuditRegistersError::Snapshot)?;
    Ok(AuditRegisters {
        snapshot: Some(Arc::new(snapshot)),
        note: format!(
            "the register files in force at the time, from {}",
            history.dir().display()
        ),
        used: as_of.used,
        uncovered: as_of.uncovered,
    })
}

/// Adds to `wire` (the contract's answer): a warning in each register block for every file
/// no snapshot covers, and the `audit` object.
pub fn annotate(
    wire: &mut Value,
    at: OffsetDateTime,
    registers: &AuditRegisters,
    path: &PathEvidence,
) {
    let evidence = &path.certificate;
    let when = crate::trust::rfc3339(at);
    // Nothing pretends: a register file that no recorded snapshot covers was not consulted.
    for file in &registers.uncovered {
        let warning = format!(
            "No register snapshot of {} covers {when}: its registers were not consulted.",
            file.display()
        );
        for block in ["homeRegister", "hostRegister"] {
            if let Some(b) = wire.get_mut(block).and_then(Value::as_object_mut) {
                let list = b.entry("warning").or_insert_with(|| json!([]));
                if !list.is_array() {
                    *list = json!([]);
                }
                if let Some(items) = list.as_array_mut() {
                    items.push(json!(warning));
                }
            }
        }
    }
    let outcome = |o: &MethodOutcome| match o {
        MethodOutcome::Good { evidence, .. } => format!("good: {evidence}"),
        MethodOutcome::Revoked { evidence, .. } => format!("revoked: {evidence}"),
        MethodOutcome::Failed { reason } => format!("not completed: {reason}"),
    };
    if let Some(obj) = wire.as_object_mut() {
        obj.insert(
            "audit".to_owned(),
            json!({
                "at": when,
                "eIDAS": "the trusted lists loaded now, each service's status read as it was at the time; revocation evidence fetched now and read as of the time",
                "registers": registers.note,
                "registerSnapshots": registers.used.iter().map(|e| json!({
                    "file": e.file.display().to_string(),
                    "sha256": e.sha256,
                    "inForceFrom": crate::trust::rfc3339(e.from),
                    "inForceUntil": e.until.map(crate::trust::rfc3339),
                })).collect::<Vec<_>>(),
                "registersNotCovered": registers
                    .uncovered
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>(),
                "revocation": {
                    "crl": outcome(&evidence.crl),
                    "ocsp": outcome(&evidence.ocsp),
                },
            }),
        );
        // The CA certificates of the path (and CRL signers relied on), when there are any.
        if !path.above.is_empty()
            && let Some(revocation) = obj
                .get_mut("audit")
                .and_then(|a| a.get_mut("revocation"))
                .and_then(Value::as_object_mut)
        {
            revocation.insert(
                "path".to_owned(),
                json!(
                    path.above
                        .iter()
                        .map(|ca| json!({
                            "certificate": format!("{} {}", ca.role, ca.subject),
                            "crl": outcome(&ca.evidence.crl),
                            "ocsp": outcome(&ca.evidence.ocsp),
                        }))
                        .collect::<Vec<_>>()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::revocation::{CaEvidence, RevocationEvidence};

    #[test]
    fn an_audit_names_the_evidence_of_each_ca_of_the_path() {
        let at = datetime!(2025-06-01 12:00 UTC);
        let next_update = at + time::Duration::days(1);
        let good = crate::revocation::test_answers::crl_answer(at, next_update, false);
        let revoked = crate::revocation::test_answers::crl_answer(at, next_update, true);
        let evidence = |o: &MethodOutcome| match o {
            MethodOutcome::Good { evidence, .. } | MethodOutcome::Revoked { evidence, .. } => {
                evidence.clone()
            }
            MethodOutcome::Failed { reason } => panic!("a CRL answer, not {reason}"),
        };
        let (good_text, revoked_text) = (evidence(&good), evidence(&revoked));
        let registers = AuditRegisters {
            snapshot: None,
            note: "current".into(),
            used: Vec::new(),
            uncovered: Vec::new(),
        };
        let leaf_only = PathEvidence::from(RevocationEvidence {
            crl: good.clone(),
            ocsp: good.clone(),
        });
        let mut wire = json!({});
        annotate(&mut wire, at, &registers, &leaf_only);
        assert!(wire["audit"]["revocation"].get("path").is_none());

        let mut path = leaf_only;
        path.above.push(CaEvidence {
            role: "intermediate CA",
            subject: "CN=Issuing CA".into(),
            fingerprint: [0; 32],
            evidence: RevocationEvidence {
                crl: revoked,
                ocsp: good,
            },
        });
        let mut wire = json!({});
        annotate(&mut wire, at, &registers, &path);
        assert_eq!(
            wire["audit"]["revocation"]["path"],
            json!([{
                "certificate": "intermediate CA CN=Issuing CA",
                "crl": format!("revoked: {revoked_text}"),
                "ocsp": format!("good: {good_text}"),
            }])
        );
        assert_eq!(
            wire["audit"]["revocation"]["crl"],
            format!("good: {good_text}")
        );
    }
}
