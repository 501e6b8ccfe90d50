//! NCA registers as the service reads them: the pure model and lookup of
//! [`psp_check::register`] (re-exported here whole), plus the readers of the register files
//! (native snapshots, the EBA PSD2 register export), loading them into a snapshot
//! ([`load`]), their history, fetching the EBA export, and the UK FCA register API, looked
//! up on demand.
//!
//! The files import only the ones above them in this list, so there is no loop between them:
//! `native_file` (native files on disk; the format's reader is psp-check's) and `eba` (the
//! EBA reader, which produces native registers), `config`, `load`,
//! `history`, `download`, `fca`, `commands`.

mod commands;
mod config;
mod download;
mod eba;
mod fca;
mod history;
mod load;
mod native_file;

pub use psp_check::register::*;

pub use commands::{ImportSummary, import_eba, import_eba_with, stats};
pub use config::{FcaSettings, RegisterConfig, RegisterFileConfig};
pub use download::{Downloaded, FetchEbaError, MAX_ZIP_BYTES, fetch_eba};
pub use fca::{
    CategoryRule as FcaCategoryRule, DEFAULT_BASE_URL as FCA_DEFAULT_BASE_URL,
    ENV_EMAIL as FCA_ENV_EMAIL, ENV_KEY as FCA_ENV_KEY, Endpoint as FcaEndpoint,
    FIRM_STATUS as FCA_FIRM_STATUS, FcaAnswer, FcaClock, FcaConfig, FcaConfigError, FcaCredentials,
    FcaError, FcaFirm, FcaLookup, FcaPassport, FcaQuota, FcaRegister, FcaSettingsError,
    FirmStanding as FcaFirmStanding, Freshness as FcaFreshness, Frn, ManualClock as FcaManualClock,
    PERMISSIONS as FCA_PERMISSIONS, PSD_EMD_STATUS as FCA_PSD_EMD_STATUS,
    PassportDirection as FcaPassportDirection, PermissionMeaning as FcaPermissionMeaning,
    PsdStanding, PsdStatusRow as FcaPsdStatusRow, RateLimit as FcaRateLimit,
    SystemClock as FcaSystemClock, decode_answer_for_fuzzing, frn_of, gcra_quota as fca_gcra_quota,
};
pub use history::{AsOf, Entry as HistoryEntry, History};
pub use load::{load, summarise};
pub use native_file::{
    HomeAuthNumber, NATIVE_FORMAT_VERSION, NativeEntity, NativeEntry, NativeFile, NativePassportIn,
    NativeRegister, read_native_file, write_native_file,
};
