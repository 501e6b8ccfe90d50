//! The EBA "Payment Institutions and E-Money Institutions" register download (PSD2 Art. 15;
//! content per Commission Implementing Regulation (EU) 2019/410), read as a stream.
//!
//! The document is `[[{disclaimer}], [{entity}, …]]`, about 217 MB with about 330,000
//! entities, nearly all agents. It is read through a `BufReader` by a serde
//! [`DeserializeSeed`] that walks the arrays and folds each entity into the registers as it
//! goes: no full text in memory, no DOM. Entities are found by content: any object with an
//! `EntityType`, at any array depth; everything else (the disclaimer, a block added upstream)
//! is counted and skipped.
//!
//! Per entity (field meanings from `shared/data/REGISTER-FORMATS.md`):
//! - `EntityType` → category: `PSD_PI` Payment Institution, `PSD_EMI` E-Money Institution
//!   (both `Authorised` when current); `PSD_AISP` AISP, `PSD_EPI` Exempt Payment Institution,
//!   `PSD_EEMI` Exempt E-Money Institution (`Registered` when current, as the contract's
//!   category table says). `PSD_EXC` and `PSD_ENL` are not authorisations; agents `PSD_AG`
//!   and branches `PSD_BR` are skipped: all counted.
//! - `Properties` is a list of single-key objects; values are a string or a list. `ENT_NAM`
//!   gives the legal name (the first Latin-script one when several), `ENT_NAT_REF_COD` the
//!   reference (else the tail of `EntityCode` after its last `!`), and `ENT_AUT` the
//!   authorisation history: odd length = currently authorised, even = withdrawn →
//!   `Unauthorised`.
//! - `Services` is the passporting map `[{country: codes}]` (codes a list or a bare string):
//!   the home country's codes are the entity's own services, the other keys passport-out.
//!   `PS_*` codes map to the PSD2 Annex I numbers; `ES_010` (e-money) is kept apart.
//! - `CA_OwnerID` (`FI_FIN-FSA`) is mapped to the certificate NCA id (`FI-FINFSA`) by
//!   [`DEFAULT_EBA_AUTHORITIES`](super::DEFAULT_EBA_AUTHORITIES), overridable per
//!   file (`nca_map`); the table and the code parsers live in [`super::authorities`].

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::native_file::{
    NATIVE_FORMAT_VERSION, NativeEntity, NativeEntry, NativeFile, NativeRegister,
};
use super::{AuthStatus, Category, ServiceSet};
use super::{EbaReport, RegisterLoadError};
use super::{NcaMap, canonical_code, derived_nca_id, eba_country};
use crate::country::CountryCode;

// ---------------------------------------------------------------------------------------------
// The mapping, as data: the one table per vocabulary that docs/registers.md (§5.2) reproduces
// and the unit test `the_mapping_tables_are_the_documented_ones` holds it to. When PSD3 and the Payment
// Services Regulation merge e-money institutions into payment institutions, these rows change
// and nothing else.
// ---------------------------------------------------------------------------------------------

/// What one service code in `Services` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// A PSD2 Annex I payment service number.
    Service(u8),
    /// Issuing, distributing or redeeming e-money (kept apart from the eight services).
    EMoney,
}

/// EBA service codes (the register's 14; labels in `/pir-api/metadata`) → PSD2 Annex I.
/// A code not in the table is counted in the load report and ignored.
pub(crate) const SERVICE_CODES: &[(&str, Code)] = &[
    ("PS_010", Code::Service(1)),
    ("PS_020", Code::Service(2)),
    ("PS_03A", Code::Service(3)),
    ("PS_03B", Code::Service(3)),
    ("PS_03C", Code::Service(3)),
    ("PS_04A", Code::Service(4)),
    ("PS_04B", Code::Service(4)),
    ("PS_04C", Code::Service(4)),
    ("PS_05A", Code::Service(5)),
    ("PS_05B", Code::Service(5)),
    ("PS_060", Code::Service(6)),
    ("PS_070", Code::Service(7)),
    ("PS_080", Code::Service(8)),
    ("ES_010", Code::EMoney),
];

fn service_code(code: &str) -> Option<Code> {
    let code = code.trim();
    SERVICE_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, m)| *m)
}

/// Where an entity's own services come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OwnServices {
    /// The home country's codes in `Services`.
    FromServicesMap,
    /// All eight: the contract's category table entitles credit institutions to all eight
    /// payment services, and the credit-institutions register publishes no service list.
    AllEight,
}

/// What an EBA `EntityType` is to the contract.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// Kept, with this category, the status a current authorisation or registration gives
    /// (`Unauthorised` when withdrawn), and its services.
    Kept {
        category: Category,
        status: AuthStatus,
        services: OwnServices,
    },
    /// Agents and branches act for their principal, which is looked up instead: counted.
    Agent,
    Branch,
    /// In the file but not an authorisation (excluded from scope, entitled under national
    /// law): counted.
    NotAnAuthorisation,
}

/// EBA `EntityType` codes (PSD2 register, and `CRD_CRE_INS` from the credit-institutions
/// register) → treatment. A code not in the table is counted and skipped.
pub(crate) const ENTITY_TYPES: &[(&str, Treatment)] = &[
    (
        "PSD_PI",
        Treatment::Kept {
            category: Category::PaymentInstitution,
            status: AuthStatus::Authorised,
            services: OwnServices::FromServicesMap,
        },
    ),
    (
        "PSD_EMI",
        Treatment::Kept {
            category: Category::EMoneyInstitution,
            status: AuthStatus::Authorised,
            services: OwnServices::FromServicesMap,
        },
    ),
    (
        "PSD_AISP",
        Treatment::Kept {
            category: Category::Aisp,
            status: AuthStatus::Registered,
            services: OwnServices::FromServicesMap,
        },
    ),
    (
        "PSD_EPI",
        Treatment::Kept {
            category: Category::ExemptPaymentInstitution,
            status: AuthStatus::Registered,
            services: OwnServices::FromServicesMap,
        },
    ),
    (
        "PSD_EEMI",
        Treatment::Kept {
            category: Category::ExemptEMoneyInstitution,
            status: AuthStatus::Registered,
            services: OwnServices::FromServicesMap,
        },
    ),
    (
        "CRD_CRE_INS",
        Treatment::Kept {
            category: Category::CreditInstitution,
            status: AuthStatus::Authorised,
            services: OwnServices::AllEight,
        },
    ),
    ("PSD_EXC", Treatment::NotAnAuthorisation),
    ("PSD_ENL", Treatment::NotAnAuthorisation),
    ("PSD_AG", Treatment::Agent),
    ("PSD_BR", Treatment::Branch),
];

/// The treatment of an entity type code; `None` for a code the table does not know.
fn treatment(code: &str) -> Option<&'static Treatment> {
    ENTITY_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, t)| t)
}

/// Whether the rest of an entity of this type is read at all.
fn is_kept(t: Option<&Treatment>) -> bool {
    matches!(t, Some(Treatment::Kept { .. }))
}

/// Services of one country in `Services`.
#[derive(Default, Clone, Copy)]
struct CountryServices {
    services: ServiceSet,
    e_money: bool,
}

/// The fields of one entity that the register needs; the rest is skipped unread.
#[derive(Default)]
struct RawEntity {
    authority: Option<String>,
    entity_code: Option<String>,
    entity_type: Option<(String, Option<&'static Treatment>)>,
    names: Vec<String>,
    references: Vec<String>,
    authorisation_dates: Option<usize>,
    services: Option<Vec<(CountryCode, CountryServices)>>,
}

/// Accumulates registers while the document streams by.
struct Builder {
    map: NcaMap,
    report: EbaReport,
    registers: BTreeMap<String, NativeRegister>,
}

/// Prefers the first legal name written in Latin script: registers publish some firms under
/// a Cyrillic or Greek name and a Latin one, and the contract's `pspLegalName` is one string.
fn choose_name(names: &[String]) -> Option<&str> {
    fn latin(s: &str) -> bool {
        s.chars().all(|c| {
            c.is_ascii()
                || ('\u{00A0}'..='\u{024F}').contains(&c)
                || ('\u{1E00}'..='\u{1EFF}').contains(&c)
                || ('\u{2000}'..='\u{206F}').contains(&c)
        })
    }
    let names = || names.iter().map(|n| n.trim()).filter(|n| !n.is_empty());
    names().find(|n| latin(n)).or_else(|| names().next())
}

impl Builder {
    /// One entity object, once read: counted by type, and kept (as an entity of its
    /// authority's register) when its type is a kept one and it has an authority, a reference
    /// and a name. The steps, in order, each counting what it refuses: the entity type, the
    /// authority, the reference, the legal name, the status from the authorisation dates,
    /// the services by country, and the register it goes in.
    fn finish_entity(&mut self, raw: RawEntity) {
        let report = &mut self.report;
        let Some((type_code, entity_type)) = raw.entity_type else {
            report.other_objects += 1;
            return;
        };
        report.records += 1;
        EbaReport::count(&mut report.by_entity_type, &type_code);
        let Some((category, granted, own_services)) =
            kept_treatment(report, &type_code, entity_type)
        else {
            return;
        };
        let Some((country, authority)) = raw.authority.as_deref().and_then(canonical_code) else {
            report.missing_authority += 1;
            return;
        };
        let Some(reference) = entity_reference(&raw.references, raw.entity_code.as_deref()) else {
            report.missing_reference += 1;
            return;
        };
        let Some(legal_name) = choose_name(&raw.names) else {
            report.missing_name += 1;
            return;
        };
        let status = current_status(report, raw.authorisation_dates, granted);
        let (own, passport_out) = services_by_country(own_services, raw.services, country);
        let Some(register) = self.register_for(authority, country) else {
            return;
        };
        register.entities.push(NativeEntity {
            reference: reference.to_owned(),
            entries: vec![NativeEntry {
                category,
                legal_name: legal_name.to_owned(),
                status,
                services: own.services,
                e_money: own.e_money,
                passport_out,
            }],
        });
        self.report.kept += 1;
    }

    /// The register of `authority` (an EBA authority code of `country`), created on its first
    /// entity under the NCA ids the map gives it, or one derived from the code (recorded as
    /// unmapped). `None`, counted as a missing authority, when no id can be derived.
    fn register_for(
        &mut self,
        authority: String,
        country: CountryCode,
    ) -> Option<&mut NativeRegister> {
        if !self.registers.contains_key(&authority) {
            let (ids, name) = match self.map.by_code.get(&authority) {
                Some((ids, name)) => (ids.clone(), name.clone()),
                None => {
                    let code_rest = authority.split_once('_').map_or("", |(_, r)| r);
                    let Some(derived) = derived_nca_id(country, code_rest) else {
                        self.report.missing_authority += 1;
                        return None;
                    };
                    self.report
                        .unmapped_authorities
                        .insert(authority.clone(), derived.clone());
                    (vec![derived], authority.clone())
                }
            };
            let mut ids = ids.into_iter();
            let nca_id = ids.next().unwrap_or_default();
            self.registers.insert(
                authority.clone(),
                NativeRegister {
                    nca_id,
                    aliases: ids.collect(),
                    name,
                    country,
                    kind: Default::default(),
                    entities: Vec::new(),
                    passport_in: Vec::new(),
                },
            );
        }
        self.registers.get_mut(&authority)
    }
}

/// The entity type step: the category, granted status and own services of a kept type; for
/// any other, `None`, with agents, branches, non-authorisations and unknown codes counted.
fn kept_treatment(
    report: &mut EbaReport,
    type_code: &str,
    entity_type: Option<&Treatment>,
) -> Option<(Category, AuthStatus, OwnServices)> {
    match entity_type {
        Some(Treatment::Kept {
            category,
            status,
            services,
        }) => Some((category.clone(), *status, *services)),
        Some(Treatment::Agent) => {
            report.skipped_agents += 1;
            None
        }
        Some(Treatment::Branch) => {
            report.skipped_branches += 1;
            None
        }
        Some(Treatment::NotAnAuthorisation) => {
            report.skipped_not_authorisations += 1;
            None
        }
        None => {
            EbaReport::count(&mut report.unknown_entity_types, type_code);
            None
        }
    }
}

/// The entity's reference: its first non-blank reference number, else the tail of its
/// entity code after the last `!`.
fn entity_reference<'r>(references: &'r [String], entity_code: Option<&'r str>) -> Option<&'r str> {
    references
        .iter()
        .map(|r| r.trim())
        .find(|r| !r.is_empty())
        .or_else(|| {
            entity_code
                .and_then(|c| c.rsplit_once('!'))
                .map(|(_, tail)| tail.trim())
                .filter(|t| !t.is_empty())
        })
}

/// The status from the authorisation dates. ENT_AUT: "Odd numbers show a date of
/// authorisation/registration. Even numbers show the date of withdrawal" — an odd count means
/// the last change was a grant. Withdrawn (and undated) entities are counted.
fn current_status(
    report: &mut EbaReport,
    authorisation_dates: Option<usize>,
    granted: AuthStatus,
) -> AuthStatus {
    match authorisation_dates {
        Some(n) if n % 2 == 1 => granted,
        Some(_) => {
            report.withdrawn += 1;
            AuthStatus::Unauthorised
        }
        None => {
            report.withdrawn += 1;
            report.missing_authorisation_dates += 1;
            AuthStatus::Unauthorised
        }
    }
}

/// The services in the home `country` (all eight for a type that has them all, plus those the
/// `Services` map lists for the home country) and the passport-out map (the other countries,
/// empty ones left out); `None` for an entity without a `Services` map.
fn services_by_country(
    own_services: OwnServices,
    services: Option<Vec<(CountryCode, CountryServices)>>,
    country: CountryCode,
) -> (CountryServices, Option<BTreeMap<CountryCode, ServiceSet>>) {
    let mut own = CountryServices::default();
    if own_services == OwnServices::AllEight {
        own.services = ServiceSet::from_numbers(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap_or_default();
    }
    let passport_out = services.map(|list| {
        let mut out: BTreeMap<CountryCode, ServiceSet> = BTreeMap::new();
        for (c, s) in list {
            if c == country {
                own.services = own.services.union(s.services);
                own.e_money |= s.e_money;
            } else if !s.services.is_empty() {
                let slot = out.entry(c).or_default();
                *slot = slot.union(s.services);
            }
        }
        out
    });
    (own, passport_out)
}

// ---------------------------------------------------------------------------------------------
// The streaming walk.
// ---------------------------------------------------------------------------------------------

/// Any value at array level: an array is walked, an object is an entity candidate, anything
/// else is counted and skipped.
struct NodeSeed<'b>(&'b mut Builder);

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the EBA register document (arrays of entity objects)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NodeSeed(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut raw = RawEntity::default();
        while let Some(key) = map.next_key::<EntityKey>()? {
            // Once the type is known to be one that is not kept, its bulk is skipped unread
            // (the real file writes EntityType before Properties).
            let skip = raw.entity_type.as_ref().is_some_and(|(_, t)| !is_kept(*t));
            match key {
                EntityKey::Authority => raw.authority = map.next_value()?,
                EntityKey::EntityCode => raw.entity_code = map.next_value()?,
                EntityKey::EntityType => {
                    raw.entity_type = map.next_value::<Option<String>>()?.map(|t| {
                        let parsed = treatment(&t);
                        (t, parsed)
                    });
                }
                EntityKey::Properties if !skip => map.next_value_seed(PropertiesSeed(&mut raw))?,
                EntityKey::Services if !skip => {
                    let mut list = Vec::new();
                    map.next_value_seed(ServicesSeed {
                        out: &mut list,
                        report: &mut self.0.report,
                    })?;
                    raw.services = Some(list);
                }
                // The credit-institutions search wraps each entity as `{"_payload": {…}}`.
                EntityKey::Payload => map.next_value_seed(NodeSeed(&mut *self.0))?,
                EntityKey::Properties | EntityKey::Services | EntityKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        self.0.finish_entity(raw);
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.report.other_objects += 1;
        Ok(())
    }
}

/// The keys of an entity object that are read; every other key is skipped.
enum EntityKey {
    Authority,
    EntityCode,
    EntityType,
    Properties,
    Services,
    Payload,
    Other,
}

impl<'de> Deserialize<'de> for EntityKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EntityKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an entity field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<EntityKey, E> {
                Ok(match s {
                    "CA_OwnerID" => EntityKey::Authority,
                    "EntityCode" => EntityKey::EntityCode,
                    "EntityType" => EntityKey::EntityType,
                    "Properties" => EntityKey::Properties,
                    "Services" => EntityKey::Services,
                    "_payload" => EntityKey::Payload,
                    _ => EntityKey::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// The property codes that are read.
enum PropertyKey {
    Name,
    Reference,
    Authorisations,
    Other,
}

impl<'de> Deserialize<'de> for PropertyKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PropertyKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a property code")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<PropertyKey, E> {
                Ok(match s {
                    "ENT_NAM" => PropertyKey::Name,
                    "ENT_NAT_REF_COD" => PropertyKey::Reference,
                    "ENT_AUT" => PropertyKey::Authorisations,
                    _ => PropertyKey::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// `Properties`: a list of single-key objects (a single object is read the same way).
struct PropertiesSeed<'r>(&'r mut RawEntity);

impl<'de> DeserializeSeed<'de> for PropertiesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PropertiesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Properties: a list of single-key objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(PropertiesSeed(&mut *self.0))?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<PropertyKey>()? {
            match key {
                PropertyKey::Name => map.next_value_seed(StrList(&mut self.0.names))?,
                PropertyKey::Reference => map.next_value_seed(StrList(&mut self.0.references))?,
                PropertyKey::Authorisations => {
                    let n = map.next_value_seed(CountValues)?;
                    *self.0.authorisation_dates.get_or_insert(0) += n;
                }
                PropertyKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A property value: a string, a number, or a list of them (null: nothing).
struct StrList<'v>(&'v mut Vec<String>);

impl<'de> DeserializeSeed<'de> for StrList<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrList<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list of strings")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.0.push(s.to_owned());
        Ok(())
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<(), E> {
        self.0.push(s);
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<(), E> {
        self.0.push(n.to_string());
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<(), E> {
        self.0.push(n.to_string());
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(StrList(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

/// `ENT_AUT`: how many dates (a bare string is one).
struct CountValues;

impl<'de> DeserializeSeed<'de> for CountValues {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CountValues {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a date or a list of dates")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<usize, E> {
        Ok(1)
    }
    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

/// `Services`: a list of `{country: codes}` objects (a single object is read the same way).
struct ServicesSeed<'o> {
    out: &'o mut Vec<(CountryCode, CountryServices)>,
    report: &'o mut EbaReport,
}

impl<'de> DeserializeSeed<'de> for ServicesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ServicesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Services: a list of objects mapping a country to service codes")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(ServicesSeed {
                out: &mut *self.out,
                report: &mut *self.report,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match eba_country(&key) {
                Some(country) => {
                    let mut services = CountryServices::default();
                    map.next_value_seed(CodesSeed {
                        into: &mut services,
                        report: &mut *self.report,
                    })?;
                    self.out.push((country, services));
                }
                None => {
                    EbaReport::count(&mut self.report.unknown_countries, &key);
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The codes of one country: a list, or a bare string.
struct CodesSeed<'o> {
    into: &'o mut CountryServices,
    report: &'o mut EbaReport,
}

impl<'de> DeserializeSeed<'de> for CodesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CodesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a service code or a list of service codes")
    }
    fn visit_str<E: de::Error>(self, code: &str) -> Result<(), E> {
        match service_code(code) {
            Some(Code::Service(n)) => {
                // The table holds 1 to 8 only.
                if let Some(s) = super::PaymentService::new(n) {
                    self.into.services.insert(s);
                }
            }
            Some(Code::EMoney) => self.into.e_money = true,
            None => EbaReport::count(&mut self.report.unknown_service_codes, code),
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(CodesSeed {
                into: &mut *self.into,
                report: &mut *self.report,
            })?
            .is_some()
        {}
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a file.
// ---------------------------------------------------------------------------------------------

/// Read buffer for the export: large reads keep the 217 MB file's syscalls few.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// Counts bytes read from the file and, when enabled, writes progress to stderr every 2 %.
struct ProgressReader<R> {
    inner: R,
    read: u64,
    total: u64,
    next_report: u64,
    enabled: bool,
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.enabled && self.read >= self.next_report && self.total > 0 {
            let pct = self.read.saturating_mul(100) / self.total;
            eprint!(
                "\rreading EBA register: {pct:>3}% ({} of {} MB)",
                self.read / 1_000_000,
                self.total / 1_000_000
            );
            self.next_report = self.read + self.total / 50;
        }
        Ok(n)
    }
}

/// The first bytes of a ZIP file (a local file header).
const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";

/// Largest JSON member read from a ZIP: the real document is about 217 MB, so 2 GiB leaves
/// room for growth while a ZIP bomb (a small file inflating without end) stops there.
pub(crate) const MAX_ZIP_JSON_BYTES: u64 = 2 << 30;

/// Largest `.sha256` member read.
const MAX_SIDECAR_BYTES: u64 = 4096;

/// Reads an EBA export into native registers (one per `CA_OwnerID`, sorted by NCA id), with
/// the counts of what was kept and skipped. The file is the JSON document, or the ZIP that
/// EBA publishes: its one JSON member is streamed, and its SHA-256 must equal the hex digest
/// in the ZIP's `.sha256` member.
pub(crate) fn read_eba(
    path: &Path,
    nca_overrides: &BTreeMap<String, String>,
    progress: bool,
) -> Result<(NativeFile, EbaReport), RegisterLoadError> {
    let read_err = |source| RegisterLoadError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = super::native_file::open_regular(path).map_err(read_err)?;
    let mut magic = [0u8; 4];
    let is_zip = match file.read_exact(&mut magic) {
        Ok(()) => &magic == ZIP_MAGIC,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
        Err(e) => return Err(read_err(e)),
    };
    drop(file);
    if is_zip {
        return read_eba_zip(path, nca_overrides, progress, MAX_ZIP_JSON_BYTES);
    }
    let file = File::open(path).map_err(read_err)?;
    let total = file.metadata().map_err(read_err)?.len();
    read_eba_stream(path, file, total, nca_overrides, progress)
}

/// The ZIP form: exactly one `.json` member, and a `.sha256` member whose digest it must
/// match. The steps: the archive opened and its members found ([`zip_members`]), the
/// expected digest read ([`sidecar_digest`]), then the JSON member streamed through a hash,
/// within `max_json` bytes, and its digest compared.
fn read_eba_zip(
    path: &Path,
    nca_overrides: &BTreeMap<String, String>,
    progress: bool,
    max_json: u64,
) -> Result<(NativeFile, EbaReport), RegisterLoadError> {
    let invalid = |message: String| RegisterLoadError::invalid(path, message);
    let file = File::open(path).map_err(|source| RegisterLoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| invalid(format!("not a readable ZIP archive: {e}")))?;
    let (json, sidecar) = zip_members(path, &archive)?;
    let expected = sidecar_digest(path, &mut archive, &sidecar)?;
    let member = archive
        .by_name(&json)
        .map_err(|e| invalid(format!("{json}: {e}")))?;
    let total = member.size();
    if total > max_json {
        return Err(invalid(format!(
            "{json} inflates to {total} bytes, over the {max_json}-byte limit"
        )));
    }
    let mut rest = HashingReader {
        inner: member.take(max_json + 1),
        context: ring::digest::Context::new(&ring::digest::SHA256),
        read: 0,
    };
    let (native, report) = read_eba_stream(path, &mut rest, total, nca_overrides, progress)?;
    // Hash what the parser did not need (trailing white space), then compare.
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(|e| invalid(format!("{json}: {e}")))?;
    if rest.read > max_json {
        return Err(invalid(format!(
            "{json} inflates to more than the {max_json}-byte limit"
        )));
    }
    let actual = crate::hex::lower(rest.context.finish().as_ref());
    if actual != expected {
        return Err(invalid(format!(
            "{json} has SHA-256 {actual}, but {sidecar} says {expected}: the download is corrupt or was altered"
        )));
    }
    Ok((native, report))
}

/// The names of the archive's one `.json` member and its one `.sha256` member (compared
/// case-insensitively); anything else is refused, listing the members.
fn zip_members<R: Read + std::io::Seek>(
    path: &Path,
    archive: &zip::ZipArchive<R>,
) -> Result<(String, String), RegisterLoadError> {
    let invalid = |message: String| RegisterLoadError::invalid(path, message);
    let names: Vec<String> = archive
        .file_names()
        .map(|n| n.map(|n| n.into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("unreadable member names: {e}")))?;
    let lower = |n: &String| n.to_ascii_lowercase();
    let json: Vec<&String> = names
        .iter()
        .filter(|n| lower(n).ends_with(".json"))
        .collect();
    let sidecar: Vec<&String> = names
        .iter()
        .filter(|n| lower(n).ends_with(".sha256"))
        .collect();
    let [json] = json.as_slice() else {
        return Err(invalid(format!(
            "expected exactly one .json member, found {}: {names:?}",
            json.len()
        )));
    };
    let [sidecar] = sidecar.as_slice() else {
        return Err(invalid(format!(
            "expected exactly one .sha256 member next to {json}, found {}: {names:?}",
            sidecar.len()
        )));
    };
    Ok(((*json).clone(), (*sidecar).clone()))
}

/// The SHA-256 digest the `.sha256` member states (its first word, 64 hex digits, read
/// within [`MAX_SIDECAR_BYTES`]), in lower case.
fn sidecar_digest<R: Read + std::io::Seek>(
    path: &Path,
    archive: &mut zip::ZipArchive<R>,
    sidecar: &str,
) -> Result<String, RegisterLoadError> {
    let invalid = |message: String| RegisterLoadError::invalid(path, message);
    let member = archive
        .by_name(sidecar)
        .map_err(|e| invalid(format!("{sidecar}: {e}")))?;
    let mut text = String::new();
    member
        .take(MAX_SIDECAR_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| invalid(format!("{sidecar}: {e}")))?;
    let digest = text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(format!(
            "{sidecar} does not start with a SHA-256 hex digest"
        )));
    }
    Ok(digest.to_ascii_lowercase())
}

/// Hashes what is read through it.
struct HashingReader<R> {
    inner: R,
    context: ring::digest::Context,
    read: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.context.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Parses the EBA JSON document from `source` (`total` bytes, for the progress display).
fn read_eba_stream<R: Read>(
    path: &Path,
    source: R,
    total: u64,
    nca_overrides: &BTreeMap<String, String>,
    progress: bool,
) -> Result<(NativeFile, EbaReport), RegisterLoadError> {
    let reader = BufReader::with_capacity(
        READ_BUFFER_BYTES,
        ProgressReader {
            inner: source,
            read: 0,
            total,
            next_report: 0,
            enabled: progress,
        },
    );
    let mut builder = Builder {
        map: NcaMap::new(nca_overrides),
        report: EbaReport::default(),
        registers: BTreeMap::new(),
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let walked = NodeSeed(&mut builder)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    if progress {
        eprintln!();
    }
    walked.map_err(|e| RegisterLoadError::from_json(path, e))?;
    if builder.report.records == 0 {
        return Err(RegisterLoadError::invalid(
            path,
            "no EBA entity records (objects with an EntityType) found; is this the EBA PSD2 register download?",
        ));
    }
    let mut registers: Vec<NativeRegister> = builder.registers.into_values().collect();
    registers.sort_by(|a, b| a.nca_id.cmp(&b.nca_id));
    let source = path
        .file_name()
        .map(|n| format!("EBA PSD2 register export {}", n.to_string_lossy()));
    Ok((
        NativeFile {
            version: NATIVE_FORMAT_VERSION,
            source,
            registers,
        },
        builder.report,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ZIP whose JSON member inflates past the cap is refused at the cap: by its declared
    /// size, or, when the declared size lies, by counting while inflating.
    #[test]
    fn a_json_member_past_the_inflation_cap_is_refused() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("eba-zip-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("bomb.zip");
        // 1 MB of white space and a tiny document: compresses to about a kilobyte.
        let mut json = vec![b' '; 1 << 20];
        json.extend_from_slice(br#"[[{"EntityType":"PSD_PI"}]]"#);
        let digest = crate::hex::lower(&crate::hex::sha256(&json));
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        w.start_file("a.json", options).expect("member");
        w.write_all(&json).expect("write");
        w.start_file("a.json.sha256", options).expect("member");
        w.write_all(digest.as_bytes()).expect("write");
        w.finish().expect("finish");
        let bytes = out.into_inner();
        assert!(bytes.len() < 16 * 1024, "{} bytes", bytes.len());
        std::fs::write(&path, bytes).expect("write");
        let e = read_eba_zip(&path, &BTreeMap::new(), false, 64 * 1024)
            .unwrap_err()
            .to_string();
        assert!(e.contains("over the 65536-byte limit"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// docs/registers.md §5.2 lists every row of both tables, with the same meaning.
    #[test]
    fn the_mapping_tables_are_the_documented_ones() {
        let docs = std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("docs/registers.md"),
        )
        .expect("docs/registers.md");
        let section = docs
            .split("### 5.2 Mapping")
            .nth(1)
            .and_then(|s| s.split("### 5.3").next())
            .expect("section 5.2");
        let row_of = |code: &str| {
            section
                .lines()
                .find(|l| l.starts_with('|') && l.contains(&format!("`{code}`")))
                .unwrap_or_else(|| panic!("{code} is not in docs/registers.md §5.2"))
                .to_owned()
        };
        for (code, meaning) in SERVICE_CODES {
            let row = row_of(code);
            let said = row.rsplit('|').nth(1).unwrap_or_default().trim().to_owned();
            match meaning {
                Code::Service(n) => assert!(said.starts_with(&n.to_string()), "{code}: {row}"),
                Code::EMoney => assert!(said.contains("eMoney: true"), "{code}: {row}"),
            }
        }
        for (code, treatment) in ENTITY_TYPES {
            let row = row_of(code);
            match treatment {
                Treatment::Kept {
                    category,
                    status,
                    services,
                } => {
                    assert!(row.contains(&format!("`{}`", category.as_str())), "{row}");
                    assert!(
                        row.contains(&format!("`{}` when current", status.as_str())),
                        "{row}"
                    );
                    match services {
                        OwnServices::AllEight => assert!(row.contains("all eight"), "{row}"),
                        OwnServices::FromServicesMap => {
                            assert!(row.contains("from `Services`"), "{row}")
                        }
                    }
                }
                Treatment::Agent | Treatment::Branch => assert!(row.contains("skipped"), "{row}"),
                Treatment::NotAnAuthorisation => {
                    assert!(row.contains("not authorisations"), "{row}")
                }
            }
        }
    }

    #[test]
    fn latin_names_are_preferred_among_several() {
        let names = vec!["Альфа ООД".to_owned(), "Alpha Ltd".to_owned()];
        assert_eq!(choose_name(&names), Some("Alpha Ltd"));
        let only = vec!["Альфа ООД".to_owned()];
        assert_eq!(choose_name(&only), Some("Альфа ООД"));
        assert_eq!(choose_name(&[]), None);
    }
}
