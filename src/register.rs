//! NCA registers: the model, the loaders (native snapshots, the EBA PSD2 register export), the
//! home/host lookup with passporting (contract behaviour rules 1 to 6), and the holder that
//! swaps snapshots atomically on reload.
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
mod commands;
mod config;
mod download;
mod eba;
mod fca;
mod history;
mod lookup;
mod model;
mod native;
mod normalise;
mod report;
mod snapshot;

pub use authorities::{DEFAULT_EBA_AUTHORITIES, EbaAuthority};
pub use commands::{ImportSummary, import_eba, import_eba_with, stats};
pub use config::{FcaSettings, RegisterConfig, RegisterFileConfig};
pub use download::{Downloaded, MAX_ZIP_BYTES, fetch_eba};
pub use fca::{
    CategoryRule as FcaCategoryRule, DEFAULT_BASE_URL as FCA_DEFAULT_BASE_URL,
    ENV_EMAIL as FCA_ENV_EMAIL, ENV_KEY as FCA_ENV_KEY, Endpoint as FcaEndpoint,
    FIRM_STATUS as FCA_FIRM_STATUS, FcaAnswer, FcaClock, FcaConfig, FcaConfigError, FcaCredentials,
    FcaError, FcaFirm, FcaLookup, FcaPassport, FcaQuota, FcaRegister,
    FirmStanding as FcaFirmStanding, Freshness as FcaFreshness, Frn, ManualClock as FcaManualClock,
    PERMISSIONS as FCA_PERMISSIONS, PSD_EMD_STATUS as FCA_PSD_EMD_STATUS,
    PassportDirection as FcaPassportDirection, PermissionMeaning as FcaPermissionMeaning,
    PsdStanding, PsdStatusRow as FcaPsdStatusRow, RateLimit as FcaRateLimit,
    SystemClock as FcaSystemClock, decode_answer_for_fuzzing, frn_of, gcra_quota as fca_gcra_quota,
};
pub use history::{AsOf, Entry as HistoryEntry, History};
pub use lookup::{
    CategoryEntryBlock, HomeOutcome, OnDemandHome, PassportIn, PassportOut, RegisterBlock,
    RegisterResult, RegisterType, not_found_warning,
};
pub use model::{
    AuthStatus, Category, CategoryEntry, Entity, PassportInEntry, PaymentService, Register,
    RegisterFormat, RegisterKind, ServiceSet,
};
pub use native::{
    HomeAuthNumber, NATIVE_FORMAT_VERSION, NativeEntity, NativeEntry, NativeFile, NativePassportIn,
    NativeRegister, read_native_file, write_native_file,
};
pub use normalise::{DEFAULT_RULES, Normalisation, NormaliseRule};
pub use report::{
    EbaReport, FileLoadReport, LoadReport, MAX_DISTINCT_CODES, OTHER_CODES, RegisterLoadError,
    RegisterSummary,
};
pub use snapshot::{LoadedFile, RegisterHolder, RegisterSnapshot};
