//! psp-telemetry: what every layer above the certificate crate reports through, and nothing
//! it reports about: the metrics registry ([`metrics`]), W3C trace context and the ids of
//! requests, traces and spans ([`trace_context`]), the JSON log lines and their writer
//! thread ([`json_lines`], [`log_writer`]), and the OTLP trace export ([`otlp`]).
//!
//! It depends on `psp-cert` only (for hex), so that the listeners (`psp-server`) report
//! without depending on the service, and the service, the faces and the binary share one
//! registry. The audit log, which is evidence and not telemetry, stays in `psp-service`
//! (issue 41).
#![forbid(unsafe_code)]
// `pub` only what is reachable from the crate root: anything else is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod json_lines;
pub mod log_writer;
pub mod metrics;
pub mod otlp;
pub mod trace_context;
