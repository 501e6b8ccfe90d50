//! The sandbox: fictitious jurisdictions `XX` and `XY`, a generated PKI with one PSP certificate
//! per scenario of the service contract, the CRL/OCSP responder that speaks for its CAs, and
//! (later) the register fixtures that go with it.
//!
//! Everything here is test material. Its keys are published; nothing under `sandbox` may be
//! trusted outside it.

pub mod pki;
pub mod responder;

pub use pki::{Manifest, SandboxError, generate, generate_with_base_url, load_manifest};
pub use responder::SandboxResponder;
