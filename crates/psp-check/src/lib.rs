//! psp-check: the pure PSD2 PSP check. From a certificate's bytes, the trust data, the
//! revocation evidence, a register snapshot, a transaction jurisdiction and an access rule,
//! to a typed decision with its reasons.
//!
//! No network, no file, no clock: time is an argument, and every input is a value the caller
//! built (how it is loaded, fetched and cached is `psp-service`'s). That is what lets a
//! bank's own Rust service embed it, and what lets the tests check real certificates that
//! expired long ago at a fixed time.
//!
//! - [`trust`]: which issuers are approved, by which source, for which jurisdictions and
//!   kinds (trusted lists, their XML signatures, the EU list of the lists).
//! - [`revocation`]: CRL and OCSP evidence, verified.
//! - [`register`]: NCA registers and the home/host lookup with passporting.
//! - [`check`](mod@check): the four certificate checks, to a [`CheckReport`].
//! - [`policy`]: the access rule, to a [`policy::Permit`] or a [`policy::Rejection`].
//!
//! [`decide()`] is the common case in one call. `examples/embed.rs` decides a sandbox
//! certificate from the sandbox's PEM issuers, its register file and a CRL.
//!
//! A [`policy::Permit`] comes only from the check: a [`CheckReport`]'s fields are read
//! through methods, and a good or revoked answer comes only from a CRL or OCSP response
//! this crate verified ([`revocation::Verified`]). A program cannot flip a flag:
//!
//! ```compile_fail
//! fn forge(report: &mut psp_check::CheckReport) {
//!     report.validity.not_expired = true;
//! }
//! ```
//!
//! while reading it compiles (so the one above fails for the forgery alone):
//!
//! ```
//! fn read(report: &psp_check::CheckReport) -> bool {
//!     report.validity().not_expired
//! }
//! ```
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]
// A library a bank's own service may embed: every public item says what it is.
#![warn(missing_docs)]

// The bottom layer (crates/psp-cert), whose types this crate's take and give: re-exported so
// that an embedder depends on psp-check alone.
pub use psp_cert::{cert, country, hex};

pub mod check;
pub mod policy;
pub mod register;
pub mod revocation;
pub mod trust;

pub use check::{CheckInput, CheckReport, Snapshots, check};

use std::sync::Arc;

use cert::PspCertificate;
use policy::{Permit, Policy, Rejection};
use register::ServiceSet;
use revocation::RevocationEvidence;
use time::OffsetDateTime;

/// The common case in one call: the four checks of `certificate`, presented without
/// intermediates, for the policy's jurisdiction at `now` ([`check()`]), then the access rule
/// for a route needing `required` ([`policy::decide`]).
pub fn decide(
    certificate: &PspCertificate,
    snapshots: Snapshots<'_>,
    evidence: &RevocationEvidence,
    policy: &Policy,
    required: ServiceSet,
    now: OffsetDateTime,
) -> Result<Permit, Rejection> {
    let input = CheckInput {
        certificate,
        intermediates: &[],
        jurisdiction: policy.jurisdiction,
        now,
    };
    let report = check(&input, snapshots, evidence);
    policy::decide(policy, Arc::new(report), certificate, required)
}
