//! From an FCA firm record, its permissions and its passports to the contract's category,
//! status and payment services. The mapping is data: four tables below, documented in
//! `docs/registers.md` ("UK FCA register (on demand)"). Pure: no I/O.
//!
//! The recorded responses (`shared/data/registers/fca/`) are two banks and an investment firm;
//! no payment or e-money institution was recorded, so the rows for payment-institution values
//! come from the FCA's documentation and the register classes of the Payment Services
//! Regulations 2017 (regulation 4) and the Electronic Money Regulations 2011. A value no row
//! lists is never guessed: it gives no category entry and is reported in
//! [`FcaFirm::notes`](super::FcaFirm::notes).

use super::wire::{FirmRecord, PassportRecord};
use super::{FcaFirm, FcaPassport, PassportDirection, PsdStanding};
use crate::register::{AuthStatus, Category, PaymentService, ServiceSet};

/// How a `PSD / EMD Status` value decides the category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CategoryRule {
    /// The value names the category.
    Fixed(Category),
    /// The value names only a status: the category follows from the permissions
    /// (`derived_category`).
    FromPermissions,
}

/// One row of [`PSD_EMD_STATUS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsdStatusRow {
    /// The value, compared after `normalise`.
    pub value: &'static str,
    pub category: CategoryRule,
    pub status: AuthStatus,
}

const fn psd(value: &'static str, category: CategoryRule, status: AuthStatus) -> PsdStatusRow {
    PsdStatusRow {
        value,
        category,
        status,
    }
}

/// `PSD / EMD Status` → the contract's category and status. The empty value (every recorded
/// firm) means "no PSD/EMD status": see `map_firm` for deposit takers.
///
/// Small payment institutions are the contract's `Exempt Payment Institution` (PSD2 Art. 32
/// exemption, PSRs 2017 regulation 13), small e-money institutions its `Exempt E-Money
/// Institution` (EMD2 Art. 9), registered account information service providers its `AISP`.
pub const PSD_EMD_STATUS: &[PsdStatusRow] = &[
    // The status alone: the FCA's wording for the firm `Status` field.
    psd(
        "Authorised",
        CategoryRule::FromPermissions,
        AuthStatus::Authorised,
    ),
    psd(
        "Registered",
        CategoryRule::FromPermissions,
        AuthStatus::Registered,
    ),
    psd(
        "Cancelled",
        CategoryRule::FromPermissions,
        AuthStatus::Unauthorised,
    ),
    psd(
        "Revoked",
        CategoryRule::FromPermissions,
        AuthStatus::Unauthorised,
    ),
    // The register classes of PSRs 2017 regulation 4(1)(a)–(c) and EMRs 2011 regulation 4.
    psd(
        "Authorised Payment Institution",
        CategoryRule::Fixed(Category::PaymentInstitution),
        AuthStatus::Authorised,
    ),
    psd(
        "Small Payment Institution",
        CategoryRule::Fixed(Category::ExemptPaymentInstitution),
        AuthStatus::Registered,
    ),
    psd(
        "Registered Account Information Service Provider",
        CategoryRule::Fixed(Category::Aisp),
        AuthStatus::Registered,
    ),
    psd(
        "Authorised Electronic Money Institution",
        CategoryRule::Fixed(Category::EMoneyInstitution),
        AuthStatus::Authorised,
    ),
    psd(
        "Authorised E-Money Institution",
        CategoryRule::Fixed(Category::EMoneyInstitution),
        AuthStatus::Authorised,
    ),
    psd(
        "Small Electronic Money Institution",
        CategoryRule::Fixed(Category::ExemptEMoneyInstitution),
        AuthStatus::Registered,
    ),
    psd(
        "Small E-Money Institution",
        CategoryRule::Fixed(Category::ExemptEMoneyInstitution),
        AuthStatus::Registered,
    ),
    // The FCA Firm Details API documentation's example record (FRN 615820).
    psd(
        "Cancelled - Small PI",
        CategoryRule::Fixed(Category::ExemptPaymentInstitution),
        AuthStatus::Unauthorised,
    ),
];

/// Whether the firm's register `Status` is a current authorisation or registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirmStanding {
    Current,
    NotCurrent,
}

/// The firm `Status` field → whether the firm holds a current authorisation. A value not
/// listed counts as not current (and is reported). `Authorised` is recorded (552016); the
/// others are the FCA register's published statuses.
pub const FIRM_STATUS: &[(&str, FirmStanding)] = &[
    ("Authorised", FirmStanding::Current),
    ("Registered", FirmStanding::Current),
    ("No longer authorised", FirmStanding::NotCurrent),
    ("No longer registered", FirmStanding::NotCurrent),
    ("Cancelled", FirmStanding::NotCurrent),
    ("Revoked", FirmStanding::NotCurrent),
    ("Unauthorised", FirmStanding::NotCurrent),
    // An EEA firm's home register is its own NCA's; its FCA entry is not a home
    // authorisation.
    ("EEA Authorised", FirmStanding::NotCurrent),
];

/// What a permission (activity) name means here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PermissionMeaning {
    /// A PSD2 Annex I payment service number (1–8).
    Service(u8),
    /// Issuing electronic money (EMD2; FSMA Regulated Activities Order art. 9B).
    EMoney,
    /// Accepting deposits (FSMA RAO art. 5): the firm is a credit institution.
    DepositTaking,
}

/// Permission names → meaning, compared after `normalise` (case, spacing, apostrophes,
/// trailing punctuation, a leading "the"). The service rows are PSRs 2017 Schedule 1 Part 1
/// paragraph 1 (a)–(h) and their PSD2 Annex I equivalents. Sub-items of (c) and (d) ("execution
/// of direct debits", …) appear under both and are not listed: they are reported, not guessed.
/// Names not listed (every FSMA investment, mortgage, insurance activity) are reported in
/// [`FcaFirm::unmapped_permissions`](super::FcaFirm::unmapped_permissions).
pub const PERMISSIONS: &[(&str, PermissionMeaning)] = &[
    (
        "Services enabling cash to be placed on a payment account and all of the operations required for operating a payment account",
        PermissionMeaning::Service(1),
    ),
    (
        "Services enabling cash to be placed on a payment account as well as all the operations required for operating a payment account",
        PermissionMeaning::Service(1),
    ),
    (
        "Services enabling cash withdrawals from a payment account and all of the operations required for operating a payment account",
        PermissionMeaning::Service(2),
    ),
    (
        "Services enabling cash withdrawals from a payment account as well as all the operations required for operating a payment account",
        PermissionMeaning::Service(2),
    ),
    (
        "The execution of payment transactions, including transfers of funds on a payment account with the user's payment service provider or with another payment service provider",
        PermissionMeaning::Service(3),
    ),
    (
        "The execution of payment transactions where the funds are covered by a credit line for a payment service user",
        PermissionMeaning::Service(4),
    ),
    (
        "Issuing payment instruments or acquiring payment transactions",
        PermissionMeaning::Service(5),
    ),
    (
        "Issuing of payment instruments and/or acquiring of payment transactions",
        PermissionMeaning::Service(5),
    ),
    (
        "Issuing payment instruments and/or acquiring payment transactions",
        PermissionMeaning::Service(5),
    ),
    (
        "Issuing of payment instruments",
        PermissionMeaning::Service(5),
    ),
    (
        "Acquiring of payment transactions",
        PermissionMeaning::Service(5),
    ),
    ("Money remittance", PermissionMeaning::Service(6)),
    ("Payment initiation services", PermissionMeaning::Service(7)),
    ("Payment initiation service", PermissionMeaning::Service(7)),
    (
        "Account information services",
        PermissionMeaning::Service(8),
    ),
    ("Account information service", PermissionMeaning::Service(8)),
    ("Issuing electronic money", PermissionMeaning::EMoney),
    // Recorded for both banks (765112, 122702).
    ("Accepting Deposits", PermissionMeaning::DepositTaking),
];

/// The form names are compared in: lower case, `’`/`‘` as `'`, runs of whitespace as one
/// space, no trailing `.`, `;`, `:` or `,`, no leading "the ".
pub(super) fn normalise(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' => '\'',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let spaced = replaced.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = spaced.trim_end_matches(['.', ';', ':', ',']).trim_end();
    trimmed.strip_prefix("the ").unwrap_or(trimmed).to_owned()
}

/// The row for a `PSD / EMD Status` value.
pub(super) fn psd_status_row(value: &str) -> Option<&'static PsdStatusRow> {
    let key = normalise(value);
    PSD_EMD_STATUS
        .iter()
        .find(|row| normalise(row.value) == key)
}

/// The standing for a firm `Status` value, `None` when no row lists it.
pub(super) fn firm_standing(value: &str) -> Option<FirmStanding> {
    let key = normalise(value);
    FIRM_STATUS
        .iter()
        .find(|(v, _)| normalise(v) == key)
        .map(|(_, s)| *s)
}

/// The meaning of a permission name, `None` when no row lists it.
pub(super) fn permission_meaning(name: &str) -> Option<PermissionMeaning> {
    let key = normalise(name);
    PERMISSIONS
        .iter()
        .find(|(v, _)| normalise(v) == key)
        .map(|(_, m)| *m)
}

/// The category of a firm whose `PSD / EMD Status` names only a status: an e-money issuer is
/// an e-money institution, a firm whose only service is account information (8) an AISP,
/// any other a payment institution; `Registered` gives the small (exempt) variant.
pub(super) fn derived_category(
    status: AuthStatus,
    e_money: bool,
    services: ServiceSet,
) -> Category {
    let small = status == AuthStatus::Registered;
    let ais_only = services == ServiceSet::from_iter([PaymentService::ACCOUNT_INFORMATION]);
    match (e_money, ais_only, small) {
        (true, _, false) => Category::EMoneyInstitution,
        (true, _, true) => Category::ExemptEMoneyInstitution,
        (false, true, _) => Category::Aisp,
        (false, false, false) => Category::PaymentInstitution,
        (false, false, true) => Category::ExemptPaymentInstitution,
    }
}

/// Which way a passport goes. The FCA's own documentation spells it "Passpoting Out", so the
/// text is not matched exactly: a word ending in "out" or "in" decides.
pub(super) fn passport_direction(text: &str) -> PassportDirection {
    let last = text
        .split_whitespace()
        .last()
        .unwrap_or("")
        .to_ascii_lowercase();
    match last.as_str() {
        "out" => PassportDirection::Out,
        "in" => PassportDirection::In,
        _ => PassportDirection::Other,
    }
}

/// Builds the firm from its record, the activity names of every permissions page, and its
/// passports. The steps: the permissions read (`read_permissions`), the firm's standing from
/// its Status, the PSD standing from its PSD / EMD Status or, without one, from a
/// deposit-taking permission (`psd_standing`), then the passports; notes say what the tables
/// did not cover.
pub(crate) fn map_firm(
    record: FirmRecord,
    permissions: Vec<String>,
    passports: Vec<PassportRecord>,
) -> FcaFirm {
    let mut notes = Vec::new();
    let mut permissions = permissions;
    permissions.sort();
    permissions.dedup();
    let mut read = read_permissions(&permissions);

    let standing_of_firm = firm_standing(&record.status).unwrap_or_else(|| {
        notes.push(format!(
            "firm Status {:?} is not in the mapping table: treated as not current",
            record.status
        ));
        FirmStanding::NotCurrent
    });
    let standing = psd_standing(&record, standing_of_firm, &mut read, &mut notes);

    let passports = passports
        .into_iter()
        .map(|p| FcaPassport {
            direction: passport_direction(&p.direction),
            direction_text: p.direction,
            country: p.country,
        })
        .collect();

    // Services are reported only with a category entry to carry them.
    let services = if standing.is_some() {
        read.services
    } else {
        ServiceSet::EMPTY
    };
    FcaFirm {
        frn: record.frn,
        name: record.name,
        firm_status: record.status,
        psd_emd_status: record.psd_emd_status,
        standing,
        services,
        e_money: read.e_money,
        permissions,
        unmapped_permissions: read.unmapped,
        passports,
        notes,
    }
}

/// What a firm's permissions mean, by the permission table.
struct PermissionReading {
    services: ServiceSet,
    e_money: bool,
    deposit_taker: bool,
    /// Permission names the table does not know.
    unmapped: Vec<String>,
}

/// Reads each permission name through the permission table.
fn read_permissions(permissions: &[String]) -> PermissionReading {
    let mut read = PermissionReading {
        services: ServiceSet::EMPTY,
        e_money: false,
        deposit_taker: false,
        unmapped: Vec::new(),
    };
    for name in permissions {
        match permission_meaning(name) {
            Some(PermissionMeaning::Service(n)) => {
                // The table holds 1–8 only (unit-tested), so `new` cannot fail here.
                if let Some(s) = PaymentService::new(n) {
                    read.services.insert(s);
                }
            }
            Some(PermissionMeaning::EMoney) => read.e_money = true,
            Some(PermissionMeaning::DepositTaking) => read.deposit_taker = true,
            None => read.unmapped.push(name.clone()),
        }
    }
    read
}

/// The firm's PSD standing (its category entry), or `None` with a note saying why there is
/// none: from the PSD / EMD status table when the record has one, else a credit institution
/// when the firm may take deposits (which gives it all eight services).
fn psd_standing(
    record: &FirmRecord,
    standing_of_firm: FirmStanding,
    read: &mut PermissionReading,
    notes: &mut Vec<String>,
) -> Option<PsdStanding> {
    if !record.psd_emd_status.trim().is_empty() {
        return listed_psd_standing(record, standing_of_firm, read, notes);
    }
    if read.deposit_taker {
        // A credit institution provides payment services under its banking permission
        // (PSRs 2017 regulation 2(1), "payment service provider" (d)); the FCA lists no PSD
        // status for it. All eight services, as the sandbox credit institution.
        read.services = ServiceSet::ALL;
        let status = match standing_of_firm {
            FirmStanding::Current => AuthStatus::Authorised,
            FirmStanding::NotCurrent => AuthStatus::Unauthorised,
        };
        Some(PsdStanding {
            category: Category::CreditInstitution,
            status,
        })
    } else {
        notes.push(
            "no PSD / EMD status and no deposit-taking permission: not a payment service \
             provider in the FCA register"
                .to_owned(),
        );
        None
    }
}

/// The PSD standing from the record's PSD / EMD Status, by the status table: its category
/// (fixed, or derived from the permissions) and status, reported Unauthorised when the firm
/// is not current.
fn listed_psd_standing(
    record: &FirmRecord,
    standing_of_firm: FirmStanding,
    read: &PermissionReading,
    notes: &mut Vec<String>,
) -> Option<PsdStanding> {
    let Some(row) = psd_status_row(&record.psd_emd_status) else {
        notes.push(format!(
            "PSD / EMD Status {:?} is not in the mapping table: no category entry",
            record.psd_emd_status
        ));
        return None;
    };
    let category = match &row.category {
        CategoryRule::Fixed(c) => c.clone(),
        CategoryRule::FromPermissions => derived_category(row.status, read.e_money, read.services),
    };
    let mut status = row.status;
    if standing_of_firm == FirmStanding::NotCurrent && status != AuthStatus::Unauthorised {
        notes.push(format!(
            "firm Status {:?} is not current: PSD / EMD status {:?} reported as \
             Unauthorised",
            record.status, record.psd_emd_status
        ));
        status = AuthStatus::Unauthorised;
    }
    Some(PsdStanding { category, status })
}
