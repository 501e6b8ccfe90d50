//! Signed decisions (`[evidence]`, docs/evidence.md): a decision is the verdict of one site's
//! access rule on one cached check result (one certificate, chain and jurisdiction against
//! one generation of reference data) for one route, under one configuration. It is signed
//! once, when first made, as a compact JWS whose payload says what was decided, for whom,
//! where, when and on which data; every request it decides carries its id in its audit
//! record, and the audit log's signed checkpoints cover those records.
//!
//! The id is the first 16 bytes (hex) of the SHA-256 of the JWS, so anyone holding the JWS
//! can check that an audit record names it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderValue;
use serde_json::{Value, json};

use crate::evidence::Evidence;
use crate::register::ServiceSet;
use crate::service::{CheckService, Checked};

/// Decisions kept signed at most: well above the certificates × routes a bank sees within
/// the results' lifetime.
const DECISIONS: u64 = 100_000;
/// A decision is signed again after this long even if its check result lives on (never
/// longer than a check result is cached by default).
const DECISION_TTL: Duration = Duration::from_secs(300);

/// One site's signed decisions.
pub(super) struct Decisions {
    evidence: Arc<Evidence>,
    cache: moka::future::Cache<Key, Arc<SignedDecision>>,
    /// The data versions of the reference data in force, by generation (they change only
    /// on a reload or refresh).
    versions: Mutex<Option<(u64, Arc<Value>)>>,
}

/// What makes two requests the same decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The cached check result, by address: the entry holds it, so the address is not reused
    /// while the entry lives.
    checked: usize,
    route: String,
    verdict: &'static str,
    reason: &'static str,
    config_sha256: Arc<String>,
}

/// A signed decision.
pub(super) struct SignedDecision {
    pub(super) id: String,
    /// The JWS as a header value, for `forward_signature`.
    pub(super) header: Option<HeaderValue>,
    /// Keeps the check result alive while the entry is cached (see [`Key::checked`]).
    _checked: Arc<Checked>,
}

/// What a decision is about, as the gateway knows it when deciding.
pub(super) struct Facts<'a> {
    pub(super) site: &'a str,
    pub(super) jurisdiction: crate::country::CountryCode,
    pub(super) route: &'a str,
    pub(super) required: ServiceSet,
    pub(super) fingerprint: &'a str,
    pub(super) checked: &'a Arc<Checked>,
    pub(super) verdict: &'static str,
    pub(super) reason: &'static str,
}

impl Decisions {
    pub(super) fn new(evidence: Arc<Evidence>) -> Decisions {
        Decisions {
            evidence,
            cache: moka::future::Cache::builder()
                .max_capacity(DECISIONS)
                .time_to_live(DECISION_TTL)
                .build(),
            versions: Mutex::new(None),
        }
    }

    pub(super) fn evidence(&self) -> &Arc<Evidence> {
        &self.evidence
    }

    /// The signed decision for `facts`: the one already made, or a new one, signed now and
    /// recorded in the audit log (`gateway decision signed`).
    pub(super) async fn get(
        &self,
        service: &CheckService,
        facts: Facts<'_>,
    ) -> Arc<SignedDecision> {
        let key = Key {
            checked: Arc::as_ptr(facts.checked) as usize,
            route: facts.route.to_owned(),
            verdict: facts.verdict,
            reason: facts.reason,
            config_sha256: self.evidence.config_sha256(),
        };
        self.cache
            .get_with(key, async { Arc::new(self.sign(service, &facts)) })
            .await
    }

    fn sign(&self, service: &CheckService, facts: &Facts<'_>) -> SignedDecision {
        let report = facts.checked.report();
        let now = time::OffsetDateTime::now_utc();
        let payload = json!({
            "decision": facts.verdict,
            "reason": (!facts.reason.is_empty()).then_some(facts.reason),
            "psp": {
                "certificateSha256": facts.fingerprint,
                "authorisationNumber": report.attested_auth_number(),
                "claimedAuthorisationNumber": report.claimed_auth_number(),
                "name": report.psp_subject_name(),
            },
            "site": facts.site,
            "jurisdiction": facts.jurisdiction.as_str(),
            "route": {
                "prefix": facts.route,
                "services": facts.required.to_vec(),
            },
            "validity": {
                "validQtsp": report.validity().valid_qtsp,
                "validSignature": report.validity().valid_signature,
                "notRevoked": report.validity().not_revoked,
                "notExpired": report.validity().not_expired,
            },
            "decidedAt": crate::trust::rfc3339(now),
            "data": {
                "reference": &*self.data_versions(service),
                "revocation": report.revocation_evidence(),
                "configSha256": &*self.evidence.config_sha256(),
            },
        });
        let jws = self.evidence.sign_decision(payload.to_string().as_bytes());
        let id = crate::hex::lower(&crate::hex::sha256(jws.as_bytes())[..16]);
        crate::telemetry::metrics::metrics().decisions_signed.inc();
        tracing::info!(
            target: "audit",
            site = facts.site,
            decision_id = %id,
            fingerprint = facts.fingerprint,
            auth_number = report.attested_auth_number().unwrap_or(""),
            claimed_auth_number = report.claimed_auth_number(),
            route = facts.route,
            signed_decision = facts.verdict,
            signed_reason = facts.reason,
            decision_jws = %jws,
            "gateway decision signed"
        );
        SignedDecision {
            header: HeaderValue::from_str(&jws).ok(),
            id,
            _checked: Arc::clone(facts.checked),
        }
    }

    /// The versions of the reference data in force: each trusted list's sequence number and
    /// issue date, each register file's modification time, and the data's generation.
    fn data_versions(&self, service: &CheckService) -> Arc<Value> {
        let data = service.data();
        let mut held = self.versions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((generation, versions)) = &*held
            && *generation == data.generation
        {
            return Arc::clone(versions);
        }
        let versions = Arc::new(json!({
            "generation": data.generation,
            "loadedAt": crate::trust::rfc3339(data.loaded_at),
            "trustedLists": data.trust.lists().iter().map(|l| json!({
                "source": l.source,
                "territory": l.territory,
                "location": l.location,
                "sequenceNumber": l.sequence_number,
                "issueDate": l.issue_date.map(crate::trust::rfc3339),
                "used": l.problem.is_none(),
            })).collect::<Vec<_>>(),
            "registers": data.registers.files().iter().map(|f| json!({
                "file": f.path.display().to_string(),
                "modified": f.modified.map(|m| crate::trust::rfc3339(time::OffsetDateTime::from(m))),
            })).collect::<Vec<_>>(),
        }));
        *held = Some((data.generation, Arc::clone(&versions)));
        versions
    }
}
