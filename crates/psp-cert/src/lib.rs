//! The bottom layer of psp-gateway: a PSP's eIDAS certificate read as the checks need it
//! ([`cert::PspCertificate`]: names compared as RFC 5280 section 7.1 says, QC statements,
//! the PSD2 authorisation number, signatures under the algorithm policy, name constraints),
//! ISO country codes with the EEA and EU sets ([`country`]), the one hex encoder and
//! SHA-256 ([`hex`]), and file reads bounded in size and refused on anything but a regular
//! file ([`bounded`], for every layer that reads a file an operator names).
//!
//! It knows nothing of trust lists, registers, revocation or HTTP: a crate cannot import
//! what it does not depend on, and this one depends on no other crate of the workspace.
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod bounded;
pub mod cert;
pub mod country;
pub mod hex;

pub use cert::PspCertificate;
pub use country::CountryCode;
