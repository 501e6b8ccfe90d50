//! Revocation evidence, pure: RFC 6960 OCSP request building and response verification
//! ([`ocsp`]), RFC 5280 CRL verification and indexing ([`crl`]), and the evidence they give
//! ([`RevocationEvidence`]), which the rule in [`crate::check::revocation`] combines into
//! `notRevoked`. Fetching and caching them is the service's (`psp_service::revocation`).
//!
//! Evidence is used only when it verifies against the certificate's issuer (or, for OCSP, a
//! responder the issuer delegated; for CRLs, another key of the issuer whose certificate has a
//! verified path to the same trust anchor, RFC 5280 section 6.3.3 (f)), is current, and
//! covers the certificate. Everything else (no URL, unreachable, slow, oversized, garbage,
//! wrong signer, stale, OCSP `unknown` and the unsigned OCSP error statuses) is a method that
//! could not complete, with its reason.

pub mod crl;
pub mod ocsp;

mod evidence;
mod reason;

pub use evidence::{
    CaEvidence, MethodOutcome, PathEvidence, RevocationEvidence, RevocationStatus, Verified,
};
pub use reason::{CrlReason, add, rfc3339, until};
