//! The sandbox: fictitious jurisdictions `XX` and `XY`, a generated PKI with one PSP certificate
//! per scenario of the service contract, and (later) the CRL/OCSP responder and register
//! fixtures that go with it.
//!
//! Everything here is test material. Its keys are published; nothing under `sandbox` may be
//! trusted outside it.

pub mod pki;

pub use pki::{Manifest, SandboxError, generate, load_manifest};
