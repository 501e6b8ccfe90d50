//! psp-service: the PSP checking service around the pure check of `psp-check`. It loads
//! trust lists and registers from files and keeps them fresh, fetches and caches revocation
//! evidence, caches results (moka), and composes them into one call, [`CheckService`]. It
//! holds the one outbound HTTP client ([`fetch`]) and the audit log with its evidence
//! ([`telemetry`], which also re-exports `psp-telemetry`'s metrics, trace context and
//! logs); bounded file reads are `psp-cert`'s ([`bounded`]).
//!
//! The modules `trust`, `register` and `revocation` re-export their `psp-check` namesakes
//! whole and add what reads them from the outside world, so a caller names one module.
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers below, named as modules of this crate inside it.
use psp_cert::{cert, country, hex};
use psp_check::{check, policy};

pub use psp_cert::bounded;
pub mod durable;
pub mod evidence;
pub mod fetch;
pub mod register;
pub mod revocation;
pub mod service;
pub mod telemetry;
pub mod trust;

pub use service::{Call, CheckService, Checked, Decision, Site};
