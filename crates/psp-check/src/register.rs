//! NCA registers: the model, the immutable snapshot and the home/host lookup with
//! passporting (contract behaviour rules 1 to 6), and the reader of the native format
//! ([`native`], from bytes: [`RegisterSnapshot::from_native`]). Reading files, the EBA PSD2
//! register export and the FCA API are the service's (`psp_service::register`).
//!
//! ```text
//!  config (RegisterConfig) ──▶ RegisterSnapshot::load ──▶ RegisterSnapshot ──▶ RegisterHolder
//!    native files (native.rs)        │ complete or error        │ immutable        (ArcSwap)
//!    EBA export   (eba.rs, streamed) │                          ▼
//!                                    ▼                  lookup(auth, jurisdiction)
//!                                LoadReport                     │ pure
//!                                                               ▼
//!                                               RegisterResult { home, host }
//!                                               (serialises to the contract's register objects)
//! ```
//!
//! The reference for the native format, the EBA mapping and the lookup decisions is
//! `docs/registers.md`.
//!
//! The files import only the ones above them in this list, so there is no loop between them:
//! `authorities` (NCA ids and EBA authority codes), `normalise`, `model` (with
//! [`RegisterFormat`]), `report` (load reports and errors), `native` and `eba` (the readers;
//! `eba` produces native registers), `config`, `history`, `snapshot`, `download`, `fca` (the
//! UK FCA register API, looked up on demand), `commands`, `lookup`.

mod authorities;
mod lookup;
mod model;
pub mod native;
mod normalise;
mod report;
mod snapshot;

pub use authorities::{
    DEFAULT_EBA_AUTHORITIES, EbaAuthority, NcaMap, canonical_code, derived_nca_id, eba_country,
    parse_eba_code, parse_nca_id,
};
pub use lookup::{
    CategoryEntryBlock, HomeOutcome, OnDemandHome, PassportIn, PassportOut, RegisterBlock,
    RegisterResult, RegisterType, not_found_warning,
};
pub use model::{
    AuthStatus, Category, CategoryEntry, Entity, MergeError, PassportInEntry, PaymentService,
    Register, RegisterFormat, RegisterKind, RegisterParts, ServiceSet,
};
pub use normalise::{DEFAULT_RULES, Normalisation, NormaliseRule};
pub use report::{
    EbaReport, FileLoadReport, LoadReport, MAX_DISTINCT_CODES, OTHER_CODES, RegisterLoadError,
    RegisterSummary,
};
pub use snapshot::{LoadedFile, RegisterSnapshot};
