//! psp-faces: what callers talk to. The gateway proxy ([`gateway`]), the check endpoint
//! `GET /v1/psp/eidas` with its authentication ([`api`]), the external authorisers
//! ([`ext_authz`], [`forward_auth`]) and the admin listener ([`admin`], which also serves the
//! sandbox responder of `psp-sandbox`). Each face takes what it needs from the
//! service (`psp-service`) and the listeners (`psp-server`); no face imports another.
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

// The layers below, named as modules of this crate inside it.
use psp_cert::{cert, country, hex};
use psp_check::{check, policy};
use psp_sandbox as sandbox;
use psp_server as server;
use psp_service::{evidence, register, revocation, service, telemetry, trust};

pub mod admin;
pub mod api;
pub mod ext_authz;
pub mod forward_auth;
pub mod forwarded;
pub mod gateway;
pub mod sites;
