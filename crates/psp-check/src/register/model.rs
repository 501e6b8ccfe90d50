//! The register model: payment services, statuses, categories, entities and their category
//! entries, passport-in entries, and one NCA's register with its O(1) indexes.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::normalise::Normalisation;
use crate::country::CountryCode;

/// A payment service number from PSD2 Annex I (the contract's table "Payment service numbers":
/// 1 cash placement … 7 payment initiation, 8 account information). For hub-directory
/// registers ([`RegisterKind::HubDirectory`]) the same numbers carry the scheme's permission
/// tiers 1–4 (contract: "For the hub-directory certificate kind the returned numbers are
/// permission tiers").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct PaymentService(u8);

impl PaymentService {
    /// The lowest service number (PSD2 Annex I point 1).
    pub const MIN: u8 = 1;
    /// The highest service number (PSD2 Annex I point 8, account information services).
    pub const MAX: u8 = 8;
    /// Payment initiation (PSD2 Annex I point 7; certificate role `PSP_PI`).
    pub const PAYMENT_INITIATION: PaymentService = PaymentService(7);
    /// Account information (PSD2 Annex I point 8; certificate role `PSP_AI`).
    pub const ACCOUNT_INFORMATION: PaymentService = PaymentService(8);

    /// The service with this number, when it is in 1–8.
    pub const fn new(number: u8) -> Option<Self> {
        if number >= Self::MIN && number <= Self::MAX {
            Some(PaymentService(number))
        } else {
            None
        }
    }

    /// The service's number, 1 to 8.
    pub const fn number(self) -> u8 {
        self.0
    }
}

impl fmt::Display for PaymentService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for PaymentService {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl<'de> Deserialize<'de> for PaymentService {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        u8::try_from(n)
            .ok()
            .and_then(PaymentService::new)
            .ok_or_else(|| de::Error::custom(format!("payment service {n} is not in 1 to 8")))
    }
}

/// A set of payment services, iterated in ascending order; serialises as the contract's
/// `pspPaymentServices` / `paymentServices` arrays of numbers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ServiceSet(u16);

impl ServiceSet {
    /// The set with no service.
    pub const EMPTY: ServiceSet = ServiceSet(0);

    /// Every PSD2 payment service, 1 to 8.
    pub const ALL: ServiceSet = ServiceSet(0b1_1111_1110);

    /// The set of the given numbers; `None` when one is outside 1–8.
    pub fn from_numbers(numbers: &[u8]) -> Option<Self> {
        let mut set = ServiceSet::EMPTY;
        for &n in numbers {
            set.insert(PaymentService::new(n)?);
        }
        Some(set)
    }

    /// Adds a service; returns false when it was already present.
    pub fn insert(&mut self, service: PaymentService) -> bool {
        let bit = 1u16 << service.0;
        let fresh = self.0 & bit == 0;
        self.0 |= bit;
        fresh
    }

    /// True when `service` is in the set.
    pub fn contains(&self, service: PaymentService) -> bool {
        self.0 & (1u16 << service.0) != 0
    }

    /// True when the set holds no service.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// How many services the set holds.
    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// The services in either set.
    pub fn union(self, other: ServiceSet) -> ServiceSet {
        ServiceSet(self.0 | other.0)
    }

    /// True when every service of `self` is in `other`.
    pub fn is_subset(&self, other: &ServiceSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The highest service number present, if any.
    pub fn max(&self) -> Option<PaymentService> {
        self.iter().last()
    }

    /// The services in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = PaymentService> + '_ {
        (PaymentService::MIN..=PaymentService::MAX)
            .filter(|n| self.0 & (1u16 << n) != 0)
            .map(PaymentService)
    }

    /// The numbers in ascending order.
    pub fn to_vec(&self) -> Vec<u8> {
        self.iter().map(PaymentService::number).collect()
    }
}

impl FromIterator<PaymentService> for ServiceSet {
    fn from_iter<I: IntoIterator<Item = PaymentService>>(iter: I) -> Self {
        let mut set = ServiceSet::EMPTY;
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl fmt::Debug for ServiceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(|s| s.0)).finish()
    }
}

impl Serialize for ServiceSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for ServiceSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SetVisitor;
        impl<'de> Visitor<'de> for SetVisitor {
            type Value = ServiceSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of payment service numbers (1 to 8)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ServiceSet, A::Error> {
                let mut set = ServiceSet::EMPTY;
                while let Some(service) = seq.next_element::<PaymentService>()? {
                    if !set.insert(service) {
                        return Err(de::Error::custom(format!(
                            "payment service {service} is listed twice"
                        )));
                    }
                }
                Ok(set)
            }
        }
        d.deserialize_seq(SetVisitor)
    }
}

/// The contract's `pspAuthStatus` (section "States and transitions").
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AuthStatus {
    /// The PSP holds authorisation in the register.
    Authorised,
    /// Exempt and AISP categories (lower regulation level); accepted alongside `Authorised`
    /// by the contract's access rule (rule 6).
    Registered,
    /// In the register without (or no longer with) authorisation.
    Unauthorised,
}

impl AuthStatus {
    /// The status as the contract spells it (`Authorised`, `Registered`, `Unauthorised`).
    pub fn as_str(&self) -> &'static str {
        match self {
            AuthStatus::Authorised => "Authorised",
            AuthStatus::Registered => "Registered",
            AuthStatus::Unauthorised => "Unauthorised",
        }
    }
}

impl fmt::Display for AuthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A register category (the contract's table "Register categories"), or a free category name
/// of a hub-directory register such as `Private Domestic Bank`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Category {
    /// Payment Institution.
    PaymentInstitution,
    /// Exempt Payment Institution.
    ExemptPaymentInstitution,
    /// E-Money Institution.
    EMoneyInstitution,
    /// Exempt E-Money Institution.
    ExemptEMoneyInstitution,
    /// AISP (account information service provider).
    Aisp,
    /// Credit Institution.
    CreditInstitution,
    /// A category name the contract does not list (hub-directory registers), as written.
    Other(String),
}

/// The contract's category names, in its table order.
const KNOWN_CATEGORIES: [(Category, &str); 6] = [
    (Category::PaymentInstitution, "Payment Institution"),
    (
        Category::ExemptPaymentInstitution,
        "Exempt Payment Institution",
    ),
    (Category::EMoneyInstitution, "E-Money Institution"),
    (
        Category::ExemptEMoneyInstitution,
        "Exempt E-Money Institution",
    ),
    (Category::Aisp, "AISP"),
    (Category::CreditInstitution, "Credit Institution"),
];

impl Category {
    /// The category with this name. The contract's names match case-insensitively and come
    /// back in the contract's spelling; any other non-empty name is [`Category::Other`].
    pub fn from_name(name: &str) -> Option<Category> {
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        Some(
            KNOWN_CATEGORIES
                .iter()
                .find(|(_, known)| known.eq_ignore_ascii_case(name))
                .map(|(c, _)| c.clone())
                .unwrap_or_else(|| Category::Other(name.to_owned())),
        )
    }

    /// The category name in the contract's spelling, or the name as written for `Other`.
    pub fn as_str(&self) -> &str {
        match self {
            Category::PaymentInstitution => "Payment Institution",
            Category::ExemptPaymentInstitution => "Exempt Payment Institution",
            Category::EMoneyInstitution => "E-Money Institution",
            Category::ExemptEMoneyInstitution => "Exempt E-Money Institution",
            Category::Aisp => "AISP",
            Category::CreditInstitution => "Credit Institution",
            Category::Other(name) => name,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Category {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Category::from_name(&name).ok_or_else(|| de::Error::custom("category name is empty"))
    }
}

/// What the numbers in a register's service lists mean.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegisterKind {
    /// An NCA register under PSD2: service numbers 1–8.
    #[default]
    Psd2,
    /// An open-banking hub directory: permission tiers 1–4 (1 public data; 2 subscription and
    /// account opening; 3 account information; 4 payment initiation).
    HubDirectory,
}

impl RegisterKind {
    /// The highest number a service list of this kind may hold.
    pub fn max_service(&self) -> u8 {
        match self {
            RegisterKind::Psd2 => PaymentService::MAX,
            // Contract: hub-directory permission tiers are 1 to 4.
            RegisterKind::HubDirectory => 4,
        }
    }
}

/// The format of a register file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegisterFormat {
    /// This project's snapshot format (docs/registers.md).
    Native,
    /// The EBA "Payment Institutions and E-Money Institutions" register download (JSON).
    Eba,
}

impl RegisterFormat {
    /// The name of the format in configuration (`native`, `eba`).
    pub fn as_str(&self) -> &'static str {
        match self {
            RegisterFormat::Native => "native",
            RegisterFormat::Eba => "eba",
        }
    }
}

/// One category in which an entity appears in its home register.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CategoryEntry {
    /// The register category (the contract's `categoryName`).
    pub category: Category,
    /// The entity's legal name in this category (the contract's `pspLegalName`).
    pub legal_name: String,
    /// The entity's status in this category (the contract's `pspAuthStatus`).
    pub status: AuthStatus,
    /// The services the register lists for the entity in its home country.
    pub services: ServiceSet,
    /// Issuing, distributing and redeeming e-money (EBA `ES_010`); kept apart from the
    /// payment services because the contract has no number for it.
    pub e_money: bool,
    /// Services passported out, per host country, sorted by country. `None` when the NCA
    /// publishes no passporting data for this entry (contract: `passportOut` is omitted "when
    /// the NCA publishes no passporting data"); countries with no service are not listed.
    pub passport_out: Option<Vec<(CountryCode, ServiceSet)>>,
}

impl CategoryEntry {
    /// The services this entry passports to `country`; empty when none or when the NCA
    /// publishes no passporting data.
    pub fn passported_to(&self, country: CountryCode) -> ServiceSet {
        self.passport_out
            .as_deref()
            .and_then(|list| {
                list.binary_search_by(|(c, _)| c.cmp(&country))
                    .ok()
                    .map(|i| list[i].1)
            })
            .unwrap_or(ServiceSet::EMPTY)
    }
}

/// An entity of a home register: its national reference as published and its categories.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Entity {
    /// The reference as the register publishes it (not normalised).
    pub reference: String,
    /// One entry per category in which the entity appears (the contract's `categoryEntries`).
    pub entries: Vec<CategoryEntry>,
}

/// An inbound entry of a host register (the UK temporary permissions regime is such data),
/// keyed to the PSP's home auth number.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PassportInEntry {
    /// The home NCA id, upper-case (`XX-TEST`).
    pub home_nca_id: String,
    /// The home reference as written in the register file (not normalised).
    pub home_reference: String,
    /// The register category (the contract's `categoryName`).
    pub category: Category,
    /// The PSP's legal name as the host register publishes it (the contract's `pspLegalName`).
    pub legal_name: String,
    /// The PSP's status in the host register (the contract's `pspAuthStatus`).
    pub status: AuthStatus,
    /// The services the PSP may provide in the host country under this entry; reported both
    /// as `pspPaymentServices` and as `passportIn.paymentServices`.
    pub services: ServiceSet,
    /// The PSP's home country as the host register records it (`passportIn.countryCode`).
    pub country: Option<CountryCode>,
}

/// One NCA's register, immutable once built, with O(1) lookups by normalised reference and by
/// home auth number for passport-in entries.
#[derive(Clone, Debug)]
pub struct Register {
    pub(crate) nca_id: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) name: String,
    pub(crate) country: CountryCode,
    pub(crate) kind: RegisterKind,
    pub(crate) normalisation: Normalisation,
    pub(crate) entities: Vec<Entity>,
    /// Normalised reference → index into `entities`.
    pub(crate) by_reference: HashMap<String, usize>,
    /// (home NCA id, normalised home reference) → inbound entries.
    pub(crate) passport_in: HashMap<(String, String), Vec<PassportInEntry>>,
    pub(crate) source: PathBuf,
}

/// What a reader built a register from: the parts of a [`Register`], its indexes included
/// (the reader builds them as it checks each entry).
#[derive(Clone, Debug)]
pub struct RegisterParts {
    /// The NCA id (`XX-TEST`), the contract's `ncaName`.
    pub nca_id: String,
    /// Further NCA ids by which certificates name this register.
    pub aliases: Vec<String>,
    /// The authority's name.
    pub name: String,
    /// The register's country (the contract's `ncaCountryCode`).
    pub country: CountryCode,
    /// What the numbers in the register's service lists mean.
    pub kind: RegisterKind,
    /// How the register's references are normalised for lookups.
    pub normalisation: Normalisation,
    /// The register's entities.
    pub entities: Vec<Entity>,
    /// Normalised reference → index into `entities`.
    pub by_reference: HashMap<String, usize>,
    /// (home NCA id, normalised home reference) → inbound entries.
    pub passport_in: HashMap<(String, String), Vec<PassportInEntry>>,
    /// The file it was read from, for messages.
    pub source: PathBuf,
}

impl From<RegisterParts> for Register {
    fn from(p: RegisterParts) -> Self {
        Register {
            nca_id: p.nca_id,
            aliases: p.aliases,
            name: p.name,
            country: p.country,
            kind: p.kind,
            normalisation: p.normalisation,
            entities: p.entities,
            by_reference: p.by_reference,
            passport_in: p.passport_in,
            source: p.source,
        }
    }
}

impl Register {
    /// The NCA id (`XX-TEST`, `FI-FINFSA`): the contract's `ncaName`.
    pub fn nca_id(&self) -> &str {
        &self.nca_id
    }

    /// Further NCA ids by which certificates name this register (`LV-FCMC` for `LV-LB`).
    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// The authority's name ("Sandbox Competent Authority XX").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The register's country: the contract's `ncaCountryCode`.
    pub fn country(&self) -> CountryCode {
        self.country
    }

    /// What the numbers in this register's service lists mean.
    pub fn kind(&self) -> RegisterKind {
        self.kind
    }

    /// How this register normalises references for lookups.
    pub fn normalisation(&self) -> Normalisation {
        self.normalisation
    }

    /// The entities this register publishes.
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// The file this register was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The entity with this reference, after this register's normalisation.
    pub fn entity(&self, reference: &str) -> Option<&Entity> {
        let key = self.normalisation.normalise(reference);
        self.by_reference.get(&key).map(|&i| &self.entities[i])
    }

    /// The inbound entries for a PSP whose home auth number has this NCA id and reference.
    pub fn passport_in(&self, home_nca_id: &str, home_reference: &str) -> &[PassportInEntry] {
        let key = (
            home_nca_id.to_ascii_uppercase(),
            self.normalisation.normalise(home_reference),
        );
        self.passport_in.get(&key).map_or(&[], Vec::as_slice)
    }

    /// How many inbound entries this register publishes.
    pub fn passport_in_len(&self) -> usize {
        self.passport_in.values().map(Vec::len).sum()
    }

    /// Adds the entities and inbound entries of `other`, a register of the same NCA from
    /// another file (`merge = true`: the credit institutions of an NCA whose payment
    /// institutions come from the EBA file). An entity in both keeps its entries from both,
    /// as several `categoryEntries`. The two must read references the same way.
    pub fn merge(&mut self, other: Register) -> Result<(), MergeError> {
        if other.kind != self.kind {
            return Err(MergeError::Kind {
                nca_id: self.nca_id.clone(),
                kind: self.kind,
                file: self.source.clone(),
                other_kind: other.kind,
                other_file: other.source,
            });
        }
        if other.normalisation != self.normalisation {
            return Err(MergeError::Normalisation {
                nca_id: self.nca_id.clone(),
                file: self.source.clone(),
                other_file: other.source,
            });
        }
        for alias in other.aliases {
            if !self.aliases.contains(&alias) && alias != self.nca_id {
                self.aliases.push(alias);
            }
        }
        for entity in other.entities {
            let key = self.normalisation.normalise(&entity.reference);
            match self.by_reference.get(&key) {
                Some(&i) => self.entities[i].entries.extend(entity.entries),
                None => {
                    self.by_reference.insert(key, self.entities.len());
                    self.entities.push(entity);
                }
            }
        }
        for (key, entries) in other.passport_in {
            self.passport_in.entry(key).or_default().extend(entries);
        }
        Ok(())
    }
}

/// Why two files' registers of one NCA cannot be merged ([`Register::merge`]).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The two registers are of different kinds.
    #[error(
        "register {nca_id} is a {kind:?} register in {} but a {other_kind:?} register in {}",
        file.display(),
        other_file.display()
    )]
    Kind {
        /// The NCA id of the register being merged into.
        nca_id: String,
        /// The kind of the register being merged into.
        kind: RegisterKind,
        /// The file of the register being merged into.
        file: PathBuf,
        /// The kind of the register being merged in.
        other_kind: RegisterKind,
        /// The file of the register being merged in.
        other_file: PathBuf,
    },
    /// The two registers normalise references differently.
    #[error(
        "register {nca_id} normalises references differently in {} and {}: give both files the same `normalise`",
        file.display(),
        other_file.display()
    )]
    Normalisation {
        /// The NCA id of the register being merged into.
        nca_id: String,
        /// The file of the register being merged into.
        file: PathBuf,
        /// The file of the register being merged in.
        other_file: PathBuf,
    },
}

/// The message as text, for `RegisterLoadError::invalid` (its message is a string).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_sets_iterate_in_ascending_order_and_serialise_as_numbers() {
        let set = ServiceSet::from_numbers(&[8, 1, 5]).expect("all in range");
        assert_eq!(set.to_vec(), vec![1, 5, 8]);
        assert_eq!(serde_json::to_string(&set).expect("serialises"), "[1,5,8]");
        assert_eq!(ServiceSet::ALL.to_vec(), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn service_sets_reject_numbers_out_of_range_and_duplicates() {
        assert!(ServiceSet::from_numbers(&[0]).is_none());
        assert!(ServiceSet::from_numbers(&[9]).is_none());
        assert!(serde_json::from_str::<ServiceSet>("[9]").is_err());
        assert!(serde_json::from_str::<ServiceSet>("[7,7]").is_err());
        assert_eq!(
            serde_json::from_str::<ServiceSet>("[7,8]").expect("valid"),
            ServiceSet::from_numbers(&[7, 8]).expect("valid")
        );
    }

    #[test]
    fn contract_category_names_match_case_insensitively_and_others_are_kept() {
        assert_eq!(
            Category::from_name("payment institution"),
            Some(Category::PaymentInstitution)
        );
        assert_eq!(Category::from_name("AISP"), Some(Category::Aisp));
        assert_eq!(
            Category::from_name("Private Domestic Bank"),
            Some(Category::Other("Private Domestic Bank".into()))
        );
        assert_eq!(Category::from_name("  "), None);
        assert_eq!(Category::EMoneyInstitution.as_str(), "E-Money Institution");
    }
}
