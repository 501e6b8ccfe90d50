//! psp-faces: what callers talk to. The gateway proxy ([`gateway`]), the check endpoint
//! `GET /v1/psp/eidas` with its authentication ([`api`]), the admin listener ([`admin`]), and
//! the sandbox PKI and its responder ([`sandbox`]). Each face takes what it needs from the
//! service (`psp-service`) and the listeners (`psp-server`); no face imports another.
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers below, named as modules of this crate inside it.
use psp_cert::{cert, country, hex};
use psp_check::{check, policy};
use psp_server as server;
use psp_service::{evidence, register, revocation, service, telemetry, trust};

pub mod admin;
pub mod api;
pub mod ext_authz;
pub mod forward_auth;
pub mod gateway;
pub mod sandbox;
pub mod sites;
