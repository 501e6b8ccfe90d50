//! Test support for the psp-gateway workspace, written once for every crate's tests.
//!
//! It depends on no workspace crate (so any crate's tests can use it, the bottom one too):
//! whatever needs a product type stays in the tests that use it.
//!
//! - [`server`]: loopback HTTP servers (a handler server that counts hits, a static file
//!   server, a silent one, a raw chunked one), each bound before its address is handed out;
//! - [`tls_client`]: a rustls client (ring) speaking HTTP/1.1 or HTTP/2;
//! - [`der`]: a DER TLV writer and reader, and certificates re-issued under other keys;
//! - [`pki`]: rcgen builders the tests share (a rotated server certificate, an AIA extension);
//! - [`wait`]: bounded waits for a condition (never a fixed sleep) and a gate to hold
//!   answers until a test releases them.

pub mod der;
pub mod pki;
pub mod server;
pub mod tls_client;
pub mod wait;
