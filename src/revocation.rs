//! Revocation: CRL and OCSP, fetched, verified, cached, fail closed (DESIGN.md sections 3
//! and 6). This is an edge: it does network I/O. What it produces,
//! [`RevocationEvidence`], is combined into `notRevoked` by
//! the pure rule in [`crate::check::revocation`].
//!
//! - [`ocsp`]: RFC 6960 request building and response verification (pure).
//! - [`crl`]: RFC 5280 CRL verification and indexing (pure).
//! - [`RevocationChecker`]: the fetching, caching edge; one per process.
//! - [`RevocationConfig`]: the `[revocation]` configuration table.
//!
//! Evidence is used only when it verifies against the certificate's issuer (or, for OCSP, a
//! responder the issuer delegated; for CRLs, another key of the issuer whose certificate has a
//! verified path to the same trust anchor, RFC 5280 section 6.3.3 (f)), is current, and
//! covers the certificate. Every certificate of the verified path below the trust anchor is
//! checked (`check::RevocationPlan`, gathered by the checking service). Everything else
//! (no URL, unreachable, slow, oversized, garbage, wrong signer, stale, OCSP `unknown` and
//! the unsigned OCSP error statuses) is a method that could not complete, with its reason.

pub mod config;
pub mod crl;
pub mod ocsp;

mod checker;
mod evidence;
mod reason;

pub use checker::{
    ISSUER_MISMATCH, MAX_URLS_PER_METHOD, MethodStats, NO_CRL_URL, NO_OCSP_URL,
    OCSP_REQUEST_CONTENT_TYPE, RevocationChecker, RevocationSetupError, RevocationStats,
    UNKNOWN_ISSUER,
};
pub use config::{AllowDestinations, RevocationConfig, RevocationConfigError};
pub use evidence::{CaEvidence, MethodOutcome, PathEvidence, RevocationEvidence, RevocationStatus};
pub use reason::CrlReason;
