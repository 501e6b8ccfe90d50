//! psp-sandbox: the sandbox's fictitious jurisdictions `XX` and `XY`, a generated PKI with one
//! PSP certificate per scenario of the service contract ([`pki`], `psp-gateway sandbox
//! generate`), and the CRL/OCSP responder that speaks for its CAs ([`responder`], served on
//! the admin listener). A crate of its own, below the faces: no face generates certificates.
//!
//! Everything here is test material. Its keys are published; nothing under `sandbox` may be
//! trusted outside it.
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers below, named as modules of this crate inside it.
use psp_cert::{cert, hex};
use psp_check::revocation;
use psp_service::evidence;

pub mod pki;
pub mod responder;

pub use pki::{Manifest, SandboxError, generate, generate_with_base_url, load_manifest};
pub use responder::SandboxResponder;
