//! psp-gateway: checks a PSD2 payment service provider's eIDAS certificate and its
//! regulatory status, as a gateway filter, as an HTTP endpoint and from the command line.
//!
//! This crate is the top of the workspace: the command line ([`cli`]), the configuration file
//! ([`config`]) and start-up ([`app`]). The layers under it are crates of their own: the pure
//! check (`psp-check`, over `psp-cert`), the cached async service (`psp-service`), the
//! listeners (`psp-server`), the sandbox PKI (`psp-sandbox`) and the faces (`psp-faces`).
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers are the workspace's crates (docs/architecture.md); their modules keep their
// paths here, for this crate's own modules and for the tests, which drive the whole product.
pub use psp_cert::{cert, country, hex};
pub use psp_check::{check, policy};
pub use psp_faces::{admin, api, ext_authz, forward_auth, gateway, sites};
pub use psp_sandbox as sandbox;
pub use psp_server as server;
pub use psp_service::{bounded, evidence, fetch, register, revocation, service, telemetry, trust};

pub mod app;
pub mod cli;
pub mod config;

pub use cert::PspCertificate;
pub use check::{CheckInput, CheckReport};
pub use config::Config;
pub use country::CountryCode;
pub use trust::{QtspSource, TrustList};
