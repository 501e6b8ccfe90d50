//! Revocation as the service gets it: CRL and OCSP, fetched, verified, cached, fail closed
//! (docs/design.md sections 3 and 6). This is an edge: it does network I/O. The pure parts
//! (verification, indexing, the evidence) are [`psp_check::revocation`], re-exported here
//! whole.
//!
//! - [`RevocationChecker`]: the fetching, caching edge; one per process.
//! - [`RevocationConfig`]: the `[revocation]` configuration table.
//!
//! Every certificate of the verified path below the trust anchor is checked
//! (`check::RevocationPlan`, gathered by the checking service).

pub mod config;

mod checker;

pub use psp_check::revocation::*;

pub use checker::{
    ISSUER_MISMATCH, MAX_URLS_PER_METHOD, MethodStats, NO_CRL_URL, NO_OCSP_URL,
    OCSP_REQUEST_CONTENT_TYPE, RevocationChecker, RevocationSetupError, RevocationStats,
    UNKNOWN_ISSUER,
};
pub use config::{AllowDestinations, RevocationConfig, RevocationConfigError};
