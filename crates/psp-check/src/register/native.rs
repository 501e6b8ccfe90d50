//! The native snapshot format: one JSON document holding one or more registers. The reference
//! is `docs/registers.md`; the types below are the format, field for field, and reject
//! unknown fields. Bytes in, registers out: reading and writing files is the caller's
//! (`psp_service::register` reads them bounded and writes them whole).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Normalisation;
use super::RegisterLoadError;
use super::{
    AuthStatus, Category, CategoryEntry, Entity, PassportInEntry, Register, RegisterKind,
    RegisterParts, ServiceSet,
};
use crate::country::CountryCode;

/// The only version of the native format so far.
pub const NATIVE_FORMAT_VERSION: u32 = 1;

/// A native register file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativeFile {
    /// Must be [`NATIVE_FORMAT_VERSION`].
    pub version: u32,
    /// Where the data came from (free text, for people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The registers the file defines.
    pub registers: Vec<NativeRegister>,
}

/// One register of a native file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativeRegister {
    /// `CC-NCA`, the id certificates carry (ETSI TS 119 495); `CC` must equal `country`.
    pub nca_id: String,
    /// Further NCA ids naming the same register.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// The authority's name.
    pub name: String,
    /// The register's country.
    pub country: CountryCode,
    /// A PSD2 register (the default) or a hub directory.
    #[serde(default, skip_serializing_if = "is_psd2")]
    pub kind: RegisterKind,
    /// The institutions the register lists.
    pub entities: Vec<NativeEntity>,
    /// Inbound passporting (temporary permissions) the register publishes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passport_in: Vec<NativePassportIn>,
}

fn is_psd2(kind: &RegisterKind) -> bool {
    *kind == RegisterKind::Psd2
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One institution of a native register.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativeEntity {
    /// The national reference as the NCA publishes it.
    pub reference: String,
    /// Its authorisations, one per category.
    pub entries: Vec<NativeEntry>,
}

/// One authorisation of an institution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativeEntry {
    /// The institution's category (payment institution, credit institution, …).
    pub category: Category,
    /// The legal name under this authorisation.
    pub legal_name: String,
    /// The authorisation's status.
    pub status: AuthStatus,
    /// The services authorised (PSD2 annex I numbers).
    pub services: ServiceSet,
    /// Whether it is an e-money institution.
    #[serde(default, skip_serializing_if = "is_false")]
    pub e_money: bool,
    /// Host country → services passported there. Absent: the NCA publishes no passporting
    /// data for this entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passport_out: Option<BTreeMap<CountryCode, ServiceSet>>,
}

/// An inbound passporting entry: a PSP of another country allowed here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativePassportIn {
    /// The PSP's home auth number, `PSD` + country + `-` + NCA + `-` + reference.
    pub home_auth_number: HomeAuthNumber,
    /// The PSP's category.
    pub category: Category,
    /// The PSP's legal name.
    pub legal_name: String,
    /// The status of its permission here.
    pub status: AuthStatus,
    /// The services the PSP may provide in this register's country.
    pub passport_in_services: ServiceSet,
    /// The PSP's home country as this register records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_code: Option<CountryCode>,
}

/// A home auth number in a register file: the certificate's parser and type, so the two can
/// never split an auth number differently.
pub use crate::cert::PsdAuthNumber as HomeAuthNumber;

impl NativeFile {
    /// Reads a native file's bytes; `path` names it in errors (and is not opened). Bad JSON,
    /// wrong types and unknown fields are reported with the position; an unsupported version
    /// with the file.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<NativeFile, RegisterLoadError> {
        let native: NativeFile =
            serde_json::from_slice(bytes).map_err(|e| RegisterLoadError::from_json(path, e))?;
        if native.version != NATIVE_FORMAT_VERSION {
            return Err(RegisterLoadError::invalid(
                path,
                format!(
                    "native register format version {} is not supported (this build reads version {NATIVE_FORMAT_VERSION})",
                    native.version
                ),
            ));
        }
        Ok(native)
    }

    /// The registers of the file, each checked and indexed ([`build_register`]), with the
    /// number of entities merged because their normalised references were equal.
    pub fn build(
        self,
        path: &Path,
        normalisation: Normalisation,
    ) -> Result<(Vec<Register>, u64), RegisterLoadError> {
        let mut merged = 0;
        let mut out = Vec::with_capacity(self.registers.len());
        for r in self.registers {
            let (register, m) = build_register(path, r, normalisation)?;
            merged += m;
            out.push(register);
        }
        Ok((out, merged))
    }
}

/// Checks an NCA id (`CC-NCA`) against the register's country.
fn check_nca_id(path: &Path, id: &str, country: CountryCode) -> Result<String, RegisterLoadError> {
    let upper = id.to_ascii_uppercase();
    match super::parse_nca_id(&upper) {
        Some((cc, _)) if cc == country => Ok(upper),
        Some(_) => Err(RegisterLoadError::invalid(
            path,
            format!("NCA id `{id}` does not start with the register's country {country}"),
        )),
        None => Err(RegisterLoadError::invalid(
            path,
            format!("`{id}` is not an NCA id of the form CC-NCA"),
        )),
    }
}

/// Builds the model of one native register: validates what serde cannot and indexes entities
/// by normalised reference and passport-in entries by home auth number. Returns the register
/// and the number of entities merged because their normalised references were equal.
pub fn build_register(
    path: &Path,
    native: NativeRegister,
    normalisation: Normalisation,
) -> Result<(Register, u64), RegisterLoadError> {
    let country = native.country;
    let nca_id = check_nca_id(path, &native.nca_id, country)?;
    let aliases = native
        .aliases
        .iter()
        .map(|a| check_nca_id(path, a, country))
        .collect::<Result<Vec<_>, _>>()?;
    let checks = RegisterChecks {
        path,
        nca_id: &nca_id,
        country,
        kind: native.kind,
    };
    if native.name.trim().is_empty() {
        return Err(checks.at("name is empty".into()));
    }
    let IndexedEntities {
        entities,
        by_reference,
        merged,
    } = index_entities(&checks, native.entities, &normalisation)?;
    let passport_in = index_passport_in(&checks, native.passport_in, &normalisation)?;
    Ok((
        Register::from(RegisterParts {
            nca_id,
            aliases,
            name: native.name,
            country,
            kind: native.kind,
            normalisation,
            entities,
            by_reference,
            passport_in,
            source: path.to_owned(),
        }),
        merged,
    ))
}

/// What the checks of one register's content report against: the file, the register's NCA
/// id, its country and its kind (which bounds the service numbers).
struct RegisterChecks<'a> {
    path: &'a Path,
    nca_id: &'a str,
    country: CountryCode,
    kind: RegisterKind,
}

impl RegisterChecks<'_> {
    /// The error for `what` in this register.
    fn at(&self, what: String) -> RegisterLoadError {
        RegisterLoadError::invalid(self.path, format!("register {}: {what}", self.nca_id))
    }

    /// Every service of `services` is within the register kind's range; `context` names where
    /// they were read.
    fn services(
        &self,
        services: &ServiceSet,
        context: &dyn Fn() -> String,
    ) -> Result<(), RegisterLoadError> {
        let max_service = self.kind.max_service();
        match services.max() {
            Some(s) if s.number() > max_service => Err(self.at(format!(
                "{}: service {s} is out of range for a {} register (1 to {max_service})",
                context(),
                match self.kind {
                    RegisterKind::Psd2 => "PSD2",
                    RegisterKind::HubDirectory => "hub-directory",
                }
            ))),
            _ => Ok(()),
        }
    }
}

/// A register's entities indexed by normalised reference.
struct IndexedEntities {
    entities: Vec<Entity>,
    by_reference: HashMap<String, usize>,
    /// Entities merged because their normalised references were equal.
    merged: u64,
}

/// The register's entities, checked, indexed by normalised reference; entities whose
/// references normalise alike are merged.
fn index_entities(
    checks: &RegisterChecks<'_>,
    native: Vec<NativeEntity>,
    normalisation: &Normalisation,
) -> Result<IndexedEntities, RegisterLoadError> {
    let mut entities: Vec<Entity> = Vec::with_capacity(native.len());
    let mut by_reference: HashMap<String, usize> = HashMap::with_capacity(native.len());
    let mut merged = 0u64;
    for entity in native {
        let key = normalisation.normalise(&entity.reference);
        if key.is_empty() {
            return Err(checks.at(format!(
                "entity reference `{}` is empty after normalisation",
                entity.reference
            )));
        }
        if entity.entries.is_empty() {
            return Err(checks.at(format!("entity {} has no entries", entity.reference)));
        }
        let mut entries = Vec::with_capacity(entity.entries.len());
        for entry in entity.entries {
            entries.push(category_entry(checks, &entity.reference, entry)?);
        }
        match by_reference.get(&key) {
            Some(&i) => {
                merged += 1;
                entities[i].entries.extend(entries);
            }
            None => {
                by_reference.insert(key, entities.len());
                entities.push(Entity {
                    reference: entity.reference,
                    entries,
                });
            }
        }
    }
    Ok(IndexedEntities {
        entities,
        by_reference,
        merged,
    })
}

/// One category entry of entity `reference`: a legal name, services in range, and its
/// passport-out list (hosts other than the register's country, empty service sets dropped).
fn category_entry(
    checks: &RegisterChecks<'_>,
    reference: &str,
    entry: NativeEntry,
) -> Result<CategoryEntry, RegisterLoadError> {
    let context = || format!("entity {reference}");
    if entry.legal_name.trim().is_empty() {
        return Err(checks.at(format!("{}: legal name is empty", context())));
    }
    checks.services(&entry.services, &context)?;
    let passport_out = match entry.passport_out {
        None => None,
        Some(map) => {
            let mut list = Vec::with_capacity(map.len());
            for (host, services) in map {
                checks.services(&services, &|| {
                    format!("entity {reference} passport-out {host}")
                })?;
                if host == checks.country {
                    return Err(checks.at(format!(
                        "entity {reference}: passport-out to the register's own country {host}"
                    )));
                }
                if !services.is_empty() {
                    list.push((host, services));
                }
            }
            // BTreeMap iteration is sorted by country: `passported_to` binary-searches.
            Some(list)
        }
    };
    Ok(CategoryEntry {
        category: entry.category,
        legal_name: entry.legal_name,
        status: entry.status,
        services: entry.services,
        e_money: entry.e_money,
        passport_out,
    })
}

/// The register's passport-in entries, checked, indexed by home NCA id and normalised home
/// reference.
fn index_passport_in(
    checks: &RegisterChecks<'_>,
    native: Vec<NativePassportIn>,
    normalisation: &Normalisation,
) -> Result<HashMap<(String, String), Vec<PassportInEntry>>, RegisterLoadError> {
    let mut passport_in: HashMap<(String, String), Vec<PassportInEntry>> = HashMap::new();
    for entry in native {
        let home = &entry.home_auth_number;
        if entry.legal_name.trim().is_empty() {
            return Err(checks.at(format!("passport-in {home}: legal name is empty")));
        }
        checks.services(&entry.passport_in_services, &|| {
            format!("passport-in {home}")
        })?;
        let key = (home.nca_id(), normalisation.normalise(&home.reference));
        passport_in.entry(key).or_default().push(PassportInEntry {
            home_nca_id: home.nca_id(),
            home_reference: home.reference.clone(),
            category: entry.category,
            legal_name: entry.legal_name,
            status: entry.status,
            services: entry.passport_in_services,
            country: entry.country_code,
        });
    }
    Ok(passport_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_auth_numbers_split_on_the_first_two_hyphens_only() {
        let a = HomeAuthNumber::parse("PSDFI-FINFSA-1234567-8").expect("PSD form");
        assert_eq!(a.country.as_str(), "FI");
        assert_eq!(a.nca, "FINFSA");
        assert_eq!(a.reference, "1234567-8");
        assert_eq!(a.nca_id(), "FI-FINFSA");
        assert_eq!(a.to_string(), "PSDFI-FINFSA-1234567-8");
        for bad in [
            "PSDXX-TEST-",
            "PSDXX--1",
            "PSDX-TEST-1",
            "XXX-TEST-1",
            "PSDxx-TEST-1",
        ] {
            assert!(HomeAuthNumber::parse(bad).is_none(), "{bad}");
        }
    }
}
