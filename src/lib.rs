//! psp-gateway: checks a PSD2 payment service provider's eIDAS certificate and its
//! regulatory status, as a gateway filter, as an HTTP endpoint and from the command line.
//!
//! The check core ([`mod@check`]) is pure: certificate bytes, a transaction jurisdiction, a point
//! in time and read-only snapshots in, a [`check::CheckReport`] out. I/O lives at the edges.
#![forbid(unsafe_code)]

// The bottom layer is its own crate (crates/psp-cert); its modules keep their paths here.
pub use psp_cert::{cert, country, hex};

pub mod admin;
pub mod api;
pub mod app;
pub mod bounded;
pub mod check;
pub mod cli;
pub mod config;
pub mod fetch;
pub mod gateway;
pub mod policy;
pub mod register;
pub mod revocation;
pub mod sandbox;
pub mod server;
pub mod service;
pub mod telemetry;
pub mod trust;

pub use cert::PspCertificate;
pub use check::{CheckInput, CheckReport, check};
pub use config::Config;
pub use country::CountryCode;
pub use trust::{QtspSource, TrustList};
