//! The home and host register lookup and the contract's behaviour rules 1 to 6, as a pure
//! function of a snapshot, an auth number and a jurisdiction.
//!
//! The rules fall out of what each register publishes; no country is special-cased:
//! - Rule 1: same jurisdiction as home → home block only.
//! - Rules 2 and 3: otherwise a host block too, and `passportOut` on a home entry only for the
//!   services the entity passports to the jurisdiction.
//! - Rules 3, 4 and 5: a host register without inbound data for the PSP (every EEA register;
//!   credit institutions' passporting) → host block "not found" with a warning.
//! - Rule 6: a host register that publishes inbound entries (the GB temporary permissions
//!   regime) → host entries with `passportIn`.

use serde::{Deserialize, Serialize};

use super::model::{
    AuthStatus, Category, CategoryEntry, Entity, PassportInEntry, RegisterKind, ServiceSet,
};
use super::snapshot::RegisterSnapshot;
use crate::cert::PsdAuthNumber;
use crate::country::CountryCode;

/// `registerType` of a register object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterType {
    /// The PSP's home register.
    Home,
    /// A register of the transaction jurisdiction, when it is not the PSP's home.
    Host,
}

/// The contract's register object (`homeRegister`, `hostRegister`), field for field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterBlock {
    /// The NCA id; null for a host register in which the PSP was not found (and for a home
    /// register that is not loaded, or an auth number that names none).
    pub nca_name: Option<String>,
    /// The contract's `ncaCountryCode`: the country of the register's NCA.
    pub nca_country_code: CountryCode,
    /// The contract's `registerType`: home or host.
    pub register_type: RegisterType,
    /// One entry per register category in which the PSP is found; empty when not found.
    pub category_entries: Vec<CategoryEntryBlock>,
    /// Host register only, present when the PSP is not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<Vec<String>>,
}

/// The contract's category entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CategoryEntryBlock {
    /// The contract's `categoryName`: the register category of this entry.
    pub category_name: Category,
    /// The contract's `pspLegalName`: the PSP's legal name as the register publishes it.
    pub psp_legal_name: String,
    /// The contract's `pspAuthStatus`: the PSP's status in this category.
    pub psp_auth_status: AuthStatus,
    /// The contract's `pspPaymentServices`: the services (or tiers) this entry lists.
    pub psp_payment_services: ServiceSet,
    /// Home entries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passport_out: Option<PassportOut>,
    /// Host entries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passport_in: Option<PassportIn>,
}

/// The contract's `passportOut`: the services a home entry passports to the jurisdiction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PassportOut {
    /// The contract's `countryCode`: the host country passported to.
    pub country_code: CountryCode,
    /// The contract's `paymentServices`: the services passported to that country.
    pub payment_services: ServiceSet,
}

/// The contract's `passportIn`: what a host register publishes for an inbound PSP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PassportIn {
    /// The contract's `paymentServices`: the services the PSP may provide in the host country.
    pub payment_services: ServiceSet,
    /// The contract's `countryCode`: the PSP's home country as the host register records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_code: Option<CountryCode>,
}

/// How the home lookup ended, for audit logs and the access policy (not part of the wire
/// format: the contract gives a home block no warning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HomeOutcome {
    /// The entity was found in its NCA's register, of this kind (hub directories publish
    /// permission tiers, not services).
    Found {
        /// The NCA id of the register.
        nca_id: String,
        /// The register's kind.
        kind: RegisterKind,
    },
    /// The certificate's identifier is not a PSD2 auth number; no register can be named.
    NotPsdForm,
    /// No register for the auth number's NCA is loaded.
    NoRegister {
        /// The auth number's NCA id.
        nca_id: String,
    },
    /// The NCA's register is loaded but has no entity with the reference.
    NotFound {
        /// The NCA id of the register.
        nca_id: String,
    },
    /// The NCA's register is consulted on demand (the UK FCA API) and could not be: the home
    /// block says so in a warning, and the access rule refuses (fail closed).
    Unavailable {
        /// The NCA id of the register.
        nca_id: String,
        /// Why it could not be consulted.
        reason: String,
    },
}

/// What a register consulted on demand (the UK FCA API) said of a PSP's home entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnDemandHome {
    /// An answer: the entity (`None`: not in the register), and a warning when the answer is
    /// a stale one standing in for a register that failed just now.
    Answer {
        /// The PSP's entity in its home register; `None` when it is not there.
        entity: Option<Entity>,
        /// Set when the answer is a stale one standing in for a register that just failed.
        warning: Option<String>,
    },
    /// No answer could be had.
    Unavailable {
        /// Why no answer could be had.
        reason: String,
    },
}

/// The register part of a check result: serialises as `{"homeRegister": …, "hostRegister": …}`
/// (the host only when the jurisdiction differs from home, contract rule 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegisterResult {
    /// The contract's `homeRegister` block.
    #[serde(rename = "homeRegister")]
    pub home: RegisterBlock,
    /// The contract's `hostRegister` block; present only when the jurisdiction differs from home.
    #[serde(rename = "hostRegister", skip_serializing_if = "Option::is_none")]
    pub host: Option<RegisterBlock>,
    /// How the home lookup ended (not serialised).
    #[serde(skip)]
    pub home_outcome: HomeOutcome,
    /// The generation of the snapshot that answered.
    #[serde(skip)]
    pub generation: u64,
}

/// The warning of a host block that found nothing (contract: "text states the PSP could not be
/// found in any register of the jurisdiction").
pub fn not_found_warning(jurisdiction: CountryCode) -> String {
    format!("The PSP could not be found in any register of the jurisdiction {jurisdiction}.")
}

impl RegisterSnapshot {
    /// Looks the PSP up in its home register and, when `jurisdiction` is not its home
    /// country, in the registers of the jurisdiction.
    ///
    /// Home block decisions where the contract is silent (docs/registers.md, "Lookup"):
    /// - auth number not in PSD2 form: no home country is known, so `ncaCountryCode` is the
    ///   jurisdiction, `ncaName` null, no entries, and no host block (rule 1 cannot compare);
    /// - no register loaded for the NCA: `ncaName` null, `ncaCountryCode` the auth number's
    ///   country, no entries;
    /// - entity not in a loaded register: `ncaName` the NCA id, no entries.
    ///
    /// The home block never carries `warning` (the contract reserves it for hosts); the reason
    /// is in [`RegisterResult::home_outcome`].
    pub fn lookup(
        &self,
        auth: Option<&PsdAuthNumber>,
        jurisdiction: CountryCode,
    ) -> RegisterResult {
        let Some(auth) = auth else {
            return RegisterResult {
                home: RegisterBlock {
                    nca_name: None,
                    nca_country_code: jurisdiction,
                    register_type: RegisterType::Home,
                    category_entries: Vec::new(),
                    warning: None,
                },
                host: None,
                home_outcome: HomeOutcome::NotPsdForm,
                generation: self.generation(),
            };
        };
        let home_country = auth.country;
        let nca_id = auth.nca_id().to_ascii_uppercase();
        // Rule 1: the host register is consulted only when the jurisdiction differs from home.
        let cross_border = jurisdiction != home_country;

        let (home, home_outcome) = match self.register(&nca_id) {
            None => (
                RegisterBlock {
                    nca_name: None,
                    nca_country_code: home_country,
                    register_type: RegisterType::Home,
                    category_entries: Vec::new(),
                    warning: None,
                },
                HomeOutcome::NoRegister { nca_id },
            ),
            Some(register) => {
                let entries: Vec<CategoryEntryBlock> = register
                    .entity(&auth.reference)
                    .map(|entity| {
                        entity
                            .entries
                            .iter()
                            .map(|e| home_entry(e, cross_border.then_some(jurisdiction)))
                            .collect()
                    })
                    .unwrap_or_default();
                let outcome = if entries.is_empty() {
                    HomeOutcome::NotFound {
                        nca_id: register.nca_id().to_owned(),
                    }
                } else {
                    HomeOutcome::Found {
                        nca_id: register.nca_id().to_owned(),
                        kind: register.kind(),
                    }
                };
                (
                    RegisterBlock {
                        nca_name: Some(register.nca_id().to_owned()),
                        nca_country_code: home_country,
                        register_type: RegisterType::Home,
                        category_entries: entries,
                        warning: None,
                    },
                    outcome,
                )
            }
        };

        let host = cross_border.then(|| self.host_block(auth, &auth.nca_id(), jurisdiction));
        RegisterResult {
            home,
            host,
            home_outcome,
            generation: self.generation(),
        }
    }

    /// [`RegisterSnapshot::lookup`] for a PSP whose home register (`nca_id`) is consulted on
    /// demand: the home block comes from `home`, the host block from this snapshot as usual.
    /// Unlike a loaded register's home block, this one carries a warning when the answer is
    /// stale or missing (the rule: say so, and fail closed).
    pub fn lookup_on_demand(
        &self,
        auth: &PsdAuthNumber,
        jurisdiction: CountryCode,
        nca_id: &str,
        home: &OnDemandHome,
    ) -> RegisterResult {
        let home_country = auth.country;
        let cross_border = jurisdiction != home_country;
        let (entries, warning, outcome) = match home {
            OnDemandHome::Answer { entity, warning } => {
                let entries: Vec<CategoryEntryBlock> = entity
                    .iter()
                    .flat_map(|e| e.entries.iter())
                    .map(|e| home_entry(e, cross_border.then_some(jurisdiction)))
                    .collect();
                let outcome = if entries.is_empty() {
                    HomeOutcome::NotFound {
                        nca_id: nca_id.to_owned(),
                    }
                } else {
                    HomeOutcome::Found {
                        nca_id: nca_id.to_owned(),
                        kind: RegisterKind::Psd2,
                    }
                };
                (entries, warning.clone().map(|w| vec![w]), outcome)
            }
            OnDemandHome::Unavailable { reason } => (
                Vec::new(),
                Some(vec![reason.clone()]),
                HomeOutcome::Unavailable {
                    nca_id: nca_id.to_owned(),
                    reason: reason.clone(),
                },
            ),
        };
        let host = cross_border.then(|| self.host_block(auth, &auth.nca_id(), jurisdiction));
        RegisterResult {
            home: RegisterBlock {
                nca_name: Some(nca_id.to_owned()),
                nca_country_code: home_country,
                register_type: RegisterType::Home,
                category_entries: entries,
                warning,
            },
            host,
            home_outcome: outcome,
            generation: self.generation(),
        }
    }

    /// Rules 2 to 6 on the host side: the first register of the jurisdiction (by NCA id) that
    /// publishes inbound entries for the PSP answers; otherwise "not found".
    fn host_block(
        &self,
        auth: &PsdAuthNumber,
        home_nca_id: &str,
        jurisdiction: CountryCode,
    ) -> RegisterBlock {
        for register in self.registers_of(jurisdiction) {
            let inbound = register.passport_in(home_nca_id, &auth.reference);
            if !inbound.is_empty() {
                // Rule 6: the host register publishes passport-in data (GB temporary
                // permissions regime): report its entries with `passportIn`.
                return RegisterBlock {
                    nca_name: Some(register.nca_id().to_owned()),
                    nca_country_code: jurisdiction,
                    register_type: RegisterType::Host,
                    category_entries: inbound.iter().map(host_entry).collect(),
                    warning: None,
                };
            }
        }
        // Rules 3, 4 and 5: no register of the jurisdiction has inbound data for the PSP (EEA
        // registers publish none; credit institutions' passporting is not published):
        // `ncaName` null, no entries, a warning.
        RegisterBlock {
            nca_name: None,
            nca_country_code: jurisdiction,
            register_type: RegisterType::Host,
            category_entries: Vec::new(),
            warning: Some(vec![not_found_warning(jurisdiction)]),
        }
    }
}

/// A home category entry. `host` is the jurisdiction when it differs from home (rule 2).
fn home_entry(entry: &CategoryEntry, host: Option<CountryCode>) -> CategoryEntryBlock {
    // Rules 2 and 3: `passportOut` only for a foreign jurisdiction to which the entity
    // passports at least one service, listing those services; omitted when the NCA publishes
    // no passporting data (rule 5 for credit institutions).
    let passport_out = host.and_then(|country| {
        let services = entry.passported_to(country);
        (!services.is_empty()).then_some(PassportOut {
            country_code: country,
            payment_services: services,
        })
    });
    CategoryEntryBlock {
        category_name: entry.category.clone(),
        psp_legal_name: entry.legal_name.clone(),
        psp_auth_status: entry.status,
        psp_payment_services: entry.services,
        passport_out,
        passport_in: None,
    }
}

/// A host category entry from an inbound (passport-in) entry (rule 6).
fn host_entry(entry: &PassportInEntry) -> CategoryEntryBlock {
    CategoryEntryBlock {
        category_name: entry.category.clone(),
        psp_legal_name: entry.legal_name.clone(),
        psp_auth_status: entry.status,
        psp_payment_services: entry.services,
        passport_out: None,
        passport_in: Some(PassportIn {
            payment_services: entry.services,
            country_code: entry.country,
        }),
    }
}
