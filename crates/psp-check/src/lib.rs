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
//! See `examples/decide.rs` for a whole decision from files on disk.
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

pub use check::{CheckInput, CheckReport, check};
