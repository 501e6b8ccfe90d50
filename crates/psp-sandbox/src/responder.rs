//! The sandbox's CRL and OCSP responder: answers for the sandbox CAs from the manifest and the
//! CA keys in `certs/` (public test keys). The admin listener mounts it under `/sandbox/`:
//!
//! | request | answer |
//! |---|---|
//! | `GET /sandbox/crl/<ca>.crl` | a CRL signed by the CA (DER, `application/pkix-crl`), listing the manifest's revoked certificates of that CA with their time and reason; re-signed every [`CRL_REISSUE_INTERVAL`], `nextUpdate` [`CRL_VALIDITY`] after `thisUpdate` |
//! | `POST /sandbox/ocsp/<ca>` | an OCSP response signed by the CA itself (`application/ocsp-response`): `good` for certificates the CA issued, `revoked` with time and reason for the revoked ones, `unknown` for other serials, `unauthorized` when the request names another CA, `malformedRequest` for what does not parse |
//! | `GET /sandbox/ca/<ca>.crt` | the CA certificate (DER, `application/pkix-cert`) |
//!
//! Other paths give `None`, so the caller can route them elsewhere; a known path with an
//! unknown CA gives 404, a known path with the wrong method 405. OCSP over GET (RFC 6960
//! appendix A.1) is not offered: clients POST.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use der::asn1::{BitString, GeneralizedTime, Null, OctetString};
use der::{Decode as _, Encode as _};
use http::{Method, StatusCode};
use rcgen::{
    CertificateRevocationListParams, Issuer, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
    SigningKey as _,
};
use spki::{AlgorithmIdentifierOwned, ObjectIdentifier};
use time::OffsetDateTime;
use x509_ocsp::{
    BasicOcspResponse, CertStatus, OcspGeneralizedTime, OcspRequest, OcspResponse, ResponderId,
    ResponseData, RevokedInfo, SingleResponse, Version,
};

use super::pki::{KeyAlgorithm, MANIFEST_FILE, Manifest, RevocationReason, load_manifest};
use crate::cert::{PspCertificate, decode_certificate_input};
use crate::revocation::ocsp::{CertIdHash, OID_PKIX_OCSP_NONCE, subject_public_key_bits};

/// A CA's CRL is signed again after this long (and whenever the clock moves backwards).
pub const CRL_REISSUE_INTERVAL: Duration = Duration::from_secs(60 * 60);
/// `nextUpdate - thisUpdate` of the sandbox CRLs: a day, like many QTSPs' CRLs.
pub const CRL_VALIDITY: Duration = Duration::from_secs(24 * 60 * 60);
/// `nextUpdate - thisUpdate` of the sandbox OCSP responses.
pub const OCSP_VALIDITY: Duration = Duration::from_secs(60 * 60);
/// OCSP request bodies above this size are answered `malformedRequest` without parsing. A
/// request for one certificate with a nonce is about 120 bytes.
pub const MAX_OCSP_REQUEST_BYTES: usize = 16 * 1024;
/// CertIDs answered in one request (clients ask for one; RFC 6960 allows a list).
pub const MAX_OCSP_REQUESTS: usize = 16;

const CT_CRL: &str = "application/pkix-crl";
const CT_OCSP: &str = "application/ocsp-response";
const CT_CERT: &str = "application/pkix-cert";
const CT_TEXT: &str = "text/plain; charset=utf-8";

/// sha256WithRSAEncryption (RFC 4055) and ecdsa-with-SHA256 (RFC 5758).
const SHA256_WITH_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const ECDSA_WITH_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");

/// One HTTP answer: status, `Content-Type`, body.
pub type Reply = (StatusCode, &'static str, Vec<u8>);

/// Why the responder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ResponderLoadError {
    #[error(transparent)]
    Sandbox(#[from] super::SandboxError),
    #[error("{path}: {reason}")]
    Certificate { path: PathBuf, reason: String },
    #[error("the manifest entry {what} is not valid: {reason}")]
    Manifest { what: String, reason: String },
}

/// Serves the sandbox CAs' CRLs, OCSP and certificates. Share it behind an `Arc`.
pub struct SandboxResponder {
    cas: HashMap<String, CaResponder>,
}

impl std::fmt::Debug for SandboxResponder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.cas.keys().collect();
        names.sort();
        f.debug_struct("SandboxResponder")
            .field("cas", &names)
            .finish()
    }
}

struct CaResponder {
    cert_der: Vec<u8>,
    subject_der: Vec<u8>,
    key_bits: Vec<u8>,
    subject_key_id: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
    key_algorithm: KeyAlgorithm,
    issued: HashSet<Vec<u8>>,
    revoked: HashMap<Vec<u8>, (OffsetDateTime, RevocationReason)>,
    crl: Mutex<Option<(OffsetDateTime, Vec<u8>)>>,
}

enum Route<'a> {
    Crl(&'a str),
    Ocsp(&'a str),
    Ca(&'a str),
}

impl SandboxResponder {
    /// Loads `certs_dir/sandbox-pki.json` and every CA's certificate and key.
    pub fn load(certs_dir: &Path) -> Result<Self, ResponderLoadError> {
        let manifest = load_manifest(&certs_dir.join(MANIFEST_FILE))?;
        Self::from_manifest(&manifest, certs_dir)
    }

    /// Builds the responder from a manifest already read; paths in it are relative to
    /// `certs_dir`.
    pub fn from_manifest(
        manifest: &Manifest,
        certs_dir: &Path,
    ) -> Result<Self, ResponderLoadError> {
        let mut cas = HashMap::new();
        for ca in &manifest.cas {
            let cert_path = certs_dir.join(&ca.cert);
            let pem = std::fs::read(&cert_path).map_err(|e| ResponderLoadError::Certificate {
                path: cert_path.clone(),
                reason: e.to_string(),
            })?;
            let cert_err = |reason: String| ResponderLoadError::Certificate {
                path: cert_path.clone(),
                reason,
            };
            let cert_der = decode_certificate_input(&pem).map_err(|e| cert_err(e.to_string()))?;
            let cert =
                PspCertificate::from_der(cert_der.clone()).map_err(|e| cert_err(e.to_string()))?;
            let key_bits =
                subject_public_key_bits(&cert.spki).map_err(|e| cert_err(e.to_string()))?;
            let subject_key_id =
                decode_hex(&ca.subject_key_id).ok_or_else(|| ResponderLoadError::Manifest {
                    what: format!("{}.subject_key_id", ca.name),
                    reason: "not hex".to_owned(),
                })?;
            let mut issued = HashSet::new();
            let mut revoked = HashMap::new();
            for psp in manifest.issued_by(&ca.name) {
                let serial = psp
                    .serial_bytes()
                    .ok_or_else(|| ResponderLoadError::Manifest {
                        what: format!("{}.serial", psp.scenario),
                        reason: "not hex".to_owned(),
                    })?;
                if psp.revoked {
                    let (Some(at), Some(reason)) = (psp.revocation_time, psp.revocation_reason)
                    else {
                        return Err(ResponderLoadError::Manifest {
                            what: psp.scenario.clone(),
                            reason: "revoked without a revocation time and reason".to_owned(),
                        });
                    };
                    revoked.insert(serial.clone(), (at, reason));
                }
                issued.insert(serial);
            }
            cas.insert(
                ca.name.clone(),
                CaResponder {
                    cert_der,
                    subject_der: cert.subject_raw.clone(),
                    key_bits,
                    subject_key_id,
                    issuer: ca.load_issuer(certs_dir)?,
                    key_algorithm: ca.key_algorithm,
                    issued,
                    revoked,
                    crl: Mutex::new(None),
                },
            );
        }
        Ok(SandboxResponder { cas })
    }

    /// Answers one request, or `None` when `path` is not one of the responder's.
    pub fn respond(
        &self,
        method: &Method,
        path: &str,
        body: &[u8],
        now: OffsetDateTime,
    ) -> Option<Reply> {
        let route = route(path)?;
        let (name, expected) = match route {
            Route::Crl(n) | Route::Ca(n) => (n, Method::GET),
            Route::Ocsp(n) => (n, Method::POST),
        };
        let Some(ca) = self.cas.get(name) else {
            return Some(text(StatusCode::NOT_FOUND, "no such sandbox CA"));
        };
        if *method != expected {
            return Some(text(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed here",
            ));
        }
        Some(match route {
            Route::Ca(_) => (StatusCode::OK, CT_CERT, ca.cert_der.clone()),
            Route::Crl(_) => match ca.crl(now) {
                Ok(der) => (StatusCode::OK, CT_CRL, der),
                Err(e) => {
                    tracing::error!(ca = name, error = %e, "cannot sign the sandbox CRL");
                    text(StatusCode::INTERNAL_SERVER_ERROR, "cannot sign the CRL")
                }
            },
            Route::Ocsp(_) => (StatusCode::OK, CT_OCSP, ca.ocsp(body, now)),
        })
    }
}

fn route(path: &str) -> Option<Route<'_>> {
    let rest = path.strip_prefix("/sandbox/")?;
    let simple = |s: &str| !s.is_empty() && !s.contains('/');
    if let Some(name) = rest
        .strip_prefix("crl/")
        .and_then(|r| r.strip_suffix(".crl"))
    {
        return simple(name).then_some(Route::Crl(name));
    }
    if let Some(name) = rest
        .strip_prefix("ca/")
        .and_then(|r| r.strip_suffix(".crt"))
    {
        return simple(name).then_some(Route::Ca(name));
    }
    if let Some(name) = rest.strip_prefix("ocsp/") {
        return simple(name).then_some(Route::Ocsp(name));
    }
    None
}

fn text(status: StatusCode, message: &str) -> Reply {
    (status, CT_TEXT, message.as_bytes().to_vec())
}

impl CaResponder {
    /// The CA's current CRL, signed again when the cached one is older than
    /// [`CRL_REISSUE_INTERVAL`] or from a later time than `now`.
    fn crl(&self, now: OffsetDateTime) -> Result<Vec<u8>, rcgen::Error> {
        let now = whole_seconds(now);
        let mut cached = self
            .crl
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((at, der)) = cached.as_ref()
            && *at <= now
            && now - *at < CRL_REISSUE_INTERVAL
        {
            return Ok(der.clone());
        }
        let mut revoked: Vec<(&Vec<u8>, &(OffsetDateTime, RevocationReason))> =
            self.revoked.iter().collect();
        revoked.sort_by(|a, b| a.0.cmp(b.0));
        let params = CertificateRevocationListParams {
            this_update: now,
            next_update: now + CRL_VALIDITY,
            // Seconds since the epoch: increases with every CRL the responder signs.
            crl_number: SerialNumber::from_slice(&now.unix_timestamp().max(1).to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .into_iter()
                .map(|(serial, (at, reason))| RevokedCertParams {
                    serial_number: SerialNumber::from_slice(serial),
                    revocation_time: *at,
                    reason_code: Some(reason.to_rcgen()),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::PreSpecified(self.subject_key_id.clone()),
        };
        let der = params.signed_by(&self.issuer)?.der().to_vec();
        *cached = Some((now, der.clone()));
        Ok(der)
    }

    /// An OCSP response to `body`; never fails: problems become OCSP error statuses.
    fn ocsp(&self, body: &[u8], now: OffsetDateTime) -> Vec<u8> {
        match self.try_ocsp(body, now) {
            Ok(der) => der,
            Err(status) => status.to_der().unwrap_or_default(),
        }
    }

    /// Answers an OCSP request: bounded and well formed, one single response per CertID
    /// (all for this CA), the nonce echoed, signed by the CA.
    fn try_ocsp(&self, body: &[u8], now: OffsetDateTime) -> Result<Vec<u8>, OcspResponse> {
        if body.len() > MAX_OCSP_REQUEST_BYTES {
            return Err(OcspResponse::malformed_request());
        }
        let request = OcspRequest::from_der(body).map_err(|_| OcspResponse::malformed_request())?;
        let list = &request.tbs_request.request_list;
        if list.is_empty() || list.len() > MAX_OCSP_REQUESTS {
            return Err(OcspResponse::malformed_request());
        }
        let now = whole_seconds(now);
        let this_update = generalized(now).ok_or_else(OcspResponse::internal_error)?;
        let next_update =
            generalized(now + OCSP_VALIDITY).ok_or_else(OcspResponse::internal_error)?;
        let mut responses = Vec::with_capacity(list.len());
        for req in list {
            responses.push(self.single_response(req, this_update, next_update)?);
        }
        // RFC 8954: echo the nonce.
        let nonce = request
            .tbs_request
            .request_extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id == OID_PKIX_OCSP_NONCE)
            .cloned();
        let key_hash = OctetString::new(CertIdHash::Sha1.digest(&self.key_bits))
            .map_err(|_| OcspResponse::internal_error())?;
        self.signed(ResponseData {
            version: Version::V1,
            responder_id: ResponderId::ByKey(key_hash),
            produced_at: this_update,
            responses,
            response_extensions: nonce.map(|n| vec![n]),
        })
    }

    /// The status of one CertID: refused unless its issuer hashes are this CA's (RFC 6960
    /// section 2.3), then revoked, good (issued here) or unknown.
    fn single_response(
        &self,
        req: &x509_ocsp::Request,
        this_update: OcspGeneralizedTime,
        next_update: OcspGeneralizedTime,
    ) -> Result<SingleResponse, OcspResponse> {
        let id = &req.req_cert;
        let Some(hash) = CertIdHash::from_oid(&id.hash_algorithm.oid) else {
            return Err(OcspResponse::malformed_request());
        };
        if id.issuer_name_hash.as_bytes() != hash.digest(&self.subject_der)
            || id.issuer_key_hash.as_bytes() != hash.digest(&self.key_bits)
        {
            // RFC 6960 section 2.3: not authoritative for that CA.
            return Err(OcspResponse::unauthorized());
        }
        let serial = id.serial_number.as_bytes().to_vec();
        let status = match self.revoked.get(&serial) {
            Some((at, reason)) => CertStatus::Revoked(RevokedInfo {
                revocation_time: generalized(whole_seconds(*at))
                    .ok_or_else(OcspResponse::internal_error)?,
                revocation_reason: Some(crl_reason(*reason)),
            }),
            None if self.issued.contains(&serial) => CertStatus::good(),
            None => CertStatus::unknown(),
        };
        Ok(SingleResponse {
            cert_id: id.clone(),
            cert_status: status,
            this_update,
            next_update: Some(next_update),
            single_extensions: None,
        })
    }

    /// `data` signed with the CA's key, as a successful OCSP response in DER.
    fn signed(&self, data: ResponseData) -> Result<Vec<u8>, OcspResponse> {
        let tbs = data.to_der().map_err(|_| OcspResponse::internal_error())?;
        let signature = self
            .issuer
            .key()
            .sign(&tbs)
            .map_err(|_| OcspResponse::internal_error())?;
        let signature_algorithm = match self.key_algorithm {
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 => AlgorithmIdentifierOwned {
                oid: SHA256_WITH_RSA,
                parameters: Some(Null.into()),
            },
            KeyAlgorithm::EcdsaP256 => AlgorithmIdentifierOwned {
                oid: ECDSA_WITH_SHA256,
                parameters: None,
            },
        };
        let basic = BasicOcspResponse {
            tbs_response_data: data,
            signature_algorithm,
            signature: BitString::from_bytes(&signature)
                .map_err(|_| OcspResponse::internal_error())?,
            certs: None,
        };
        OcspResponse::successful(basic)
            .and_then(|r| r.to_der())
            .map_err(|_| OcspResponse::internal_error())
    }
}

fn crl_reason(reason: RevocationReason) -> x509_cert::ext::pkix::CrlReason {
    use x509_cert::ext::pkix::CrlReason as R;
    match reason {
        RevocationReason::Unspecified => R::Unspecified,
        RevocationReason::KeyCompromise => R::KeyCompromise,
        RevocationReason::CaCompromise => R::CaCompromise,
        RevocationReason::AffiliationChanged => R::AffiliationChanged,
        RevocationReason::Superseded => R::Superseded,
        RevocationReason::CessationOfOperation => R::CessationOfOperation,
        RevocationReason::CertificateHold => R::CertificateHold,
        RevocationReason::RemoveFromCrl => R::RemoveFromCRL,
        RevocationReason::PrivilegeWithdrawn => R::PrivilegeWithdrawn,
        RevocationReason::AaCompromise => R::AaCompromise,
    }
}

/// DER times have whole seconds; signing a time with a fraction would round differently in
/// the CRL (rcgen truncates) and in our own bookkeeping.
fn whole_seconds(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).unwrap_or(t)
}

fn generalized(t: OffsetDateTime) -> Option<OcspGeneralizedTime> {
    let secs = u64::try_from(t.unix_timestamp()).ok()?;
    GeneralizedTime::from_unix_duration(Duration::from_secs(secs))
        .ok()
        .map(OcspGeneralizedTime)
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_three_sandbox_paths_are_routed() {
        assert!(matches!(
            route("/sandbox/crl/qtsp-issuing.crl"),
            Some(Route::Crl("qtsp-issuing"))
        ));
        assert!(matches!(
            route("/sandbox/ocsp/qtsp-issuing"),
            Some(Route::Ocsp("qtsp-issuing"))
        ));
        assert!(matches!(
            route("/sandbox/ca/qtsp-root.crt"),
            Some(Route::Ca("qtsp-root"))
        ));
        for other in [
            "/healthz",
            "/sandbox/",
            "/sandbox/crl/.crl",
            "/sandbox/crl/a/b.crl",
            "/sandbox/ocsp/qtsp-issuing/MEUw",
            "/sandbox/ca/qtsp-root.pem",
        ] {
            assert!(route(other).is_none(), "{other}");
        }
    }
}
