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

// The layers are the workspace's crates (docs/architecture.md), named as modules of this
// crate inside it; nothing is re-exported: a test or an embedder names the crate that is the
// home of what it uses (`psp_check::policy`, `psp_service::trust`, ...).
use psp_cert::{cert, country, hex};
use psp_check::check;
use psp_faces::{admin, api, ext_authz, forward_auth, gateway, sites};
use psp_sandbox as sandbox;
use psp_server as server;
use psp_service::{bounded, evidence, fetch, register, revocation, service, telemetry, trust};

pub mod app;
pub mod cli;
pub mod config;

pub use config::Config;
