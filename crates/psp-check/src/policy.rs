//! The access rule: may this PSP call this route of the bank? A pure function of the check
//! report, the route and the configured rule, returning a [`Permit`] (only this module can
//! make one, and forwarding takes a `&Permit`) or a [`Rejection`] with a reason code.
//!
//! The decision (`docs/design.md` section 5):
//! 1. all four certificate flags true (401 otherwise, the reason naming the first failing
//!    check in the order issuer, signature, revoked, expired, revocation unknown);
//! 2. allow and deny lists by auth number (401 `CERTIFICATE_BLOCKED`);
//! 3. a home register entry with an accepted status (default `Authorised`, `Registered`)
//!    whose services cover the route's (403);
//! 4. when the bank's jurisdiction differs from the PSP's home, the cross-border rule:
//!    `passport-out` (the entry's `passportOut` to the bank's country covers the services),
//!    `uk-tpr` (the contract's rule 6: home not GB, a host entry whose `passportIn` covers the
//!    services) or `home-only` (403);
//! 5. optionally, the certificate's PSD2 roles cover the route (403).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use crate::cert::{Psd2Role, PspCertificate};
use crate::check::{CheckReport, RevocationStatus};
use crate::country::CountryCode;
use crate::register::{
    AuthStatus, CategoryEntryBlock, HomeOutcome, PaymentService, RegisterKind, ServiceSet,
};

/// How a cross-border call (bank jurisdiction ≠ PSP home) is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrossBorderRule {
    /// The home entry's `passportOut` to the bank's country covers the route's services.
    PassportOut,
    /// The contract's rule 6 (UK temporary permissions regime) on `passportIn`.
    UkTpr,
    /// Only PSPs whose home is the bank's jurisdiction.
    HomeOnly,
}

impl CrossBorderRule {
    /// The default for a bank jurisdiction: `uk-tpr` for GB, `passport-out` elsewhere.
    pub fn default_for(jurisdiction: CountryCode) -> Self {
        if jurisdiction.as_str() == "GB" {
            CrossBorderRule::UkTpr
        } else {
            CrossBorderRule::PassportOut
        }
    }
}

/// The configured rule.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The bank's jurisdiction: the transaction jurisdiction of every check.
    pub jurisdiction: CountryCode,
    /// How a call from a PSP whose home is not `jurisdiction` is judged.
    pub cross_border: CrossBorderRule,
    /// The home register statuses that qualify an entry (default `Authorised` and `Registered`).
    pub accepted_statuses: Vec<AuthStatus>,
    /// Whether the certificate's PSD2 roles must also cover the route's services (step 5).
    pub require_roles: bool,
    /// When set, only these auth numbers.
    pub allow: Option<AuthNumberList>,
    /// Auth numbers always refused, checked before the allow list.
    pub deny: AuthNumberList,
}

impl Policy {
    /// The default rule of a bank in `jurisdiction`: the cross-border rule the jurisdiction
    /// takes by default ([`CrossBorderRule::default_for`]), `Authorised` and `Registered`
    /// accepted, roles not required, no allow or deny list.
    pub fn for_jurisdiction(jurisdiction: CountryCode) -> Policy {
        Policy {
            jurisdiction,
            cross_border: CrossBorderRule::default_for(jurisdiction),
            accepted_statuses: vec![AuthStatus::Authorised, AuthStatus::Registered],
            require_roles: false,
            allow: None,
            deny: AuthNumberList::default(),
        }
    }
}

/// A list of authorisation numbers, each kept by its identity key
/// (`auth_number::identity_key`), normalised once when the list is built: every spelling of
/// one PSP's number (leading zeros, case, the separator) is the same entry, and a decision
/// compares one key with a set, not every entry's spelling with the certificate's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthNumberList(BTreeSet<String>);

impl AuthNumberList {
    /// Whether `auth_number`, spelled as in a certificate, is on the list.
    pub fn contains(&self, auth_number: &str) -> bool {
        self.0
            .contains(&psp_cert::cert::auth_number::identity_key(auth_number))
    }

    /// Adds `auth_number`, by its identity key.
    pub fn insert(&mut self, auth_number: &str) {
        self.0
            .insert(psp_cert::cert::auth_number::identity_key(auth_number));
    }
}

impl<S: AsRef<str>> FromIterator<S> for AuthNumberList {
    fn from_iter<I: IntoIterator<Item = S>>(entries: I) -> Self {
        let mut list = AuthNumberList::default();
        for entry in entries {
            list.insert(entry.as_ref());
        }
        list
    }
}

impl<S: AsRef<str>, const N: usize> From<[S; N]> for AuthNumberList {
    fn from(entries: [S; N]) -> Self {
        entries.into_iter().collect()
    }
}

/// Why a call is refused. Each has a stable reason code for logs and the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The call carried no client certificate.
    CertificateMissing,
    /// The client certificate could not be parsed.
    CertificateUnreadable,
    /// The certificate's signature does not verify with its issuer's key.
    SignatureInvalid,
    /// The certificate's issuer is not an approved issuer for the jurisdiction.
    IssuerNotApproved,
    /// The certificate is revoked.
    CertificateRevoked,
    /// The certificate is outside its validity period.
    CertificateExpired,
    /// The certificate's revocation status could not be established.
    RevocationUnknown,
    /// The PSP's auth number is on the deny list.
    Denied,
    /// An allow list is configured and the PSP's auth number is not on it.
    NotAllowed,
    /// The PSP is not found in its home register, or that register could not be consulted.
    NotInRegister,
    /// No home register entry has an accepted status.
    NotAuthorised,
    /// No accepted home register entry covers the route's payment services.
    ServicesNotCovered,
    /// The PSP is not passported to the bank's jurisdiction for the route's services.
    NotPassported,
    /// The host register gives the PSP no temporary permission for the route's services.
    NoTemporaryPermission,
    /// The cross-border rule is `home-only` and the PSP's home is another country.
    CrossBorderRefused,
    /// The certificate's PSD2 roles do not cover the route's payment services.
    RolesNotCovered,
}

impl Reason {
    /// Every reason, for the tables that must cover them all (docs/errors.md's anchors).
    pub const ALL: [Reason; 16] = [
        Reason::CertificateMissing,
        Reason::CertificateUnreadable,
        Reason::SignatureInvalid,
        Reason::IssuerNotApproved,
        Reason::CertificateRevoked,
        Reason::CertificateExpired,
        Reason::RevocationUnknown,
        Reason::Denied,
        Reason::NotAllowed,
        Reason::NotInRegister,
        Reason::NotAuthorised,
        Reason::ServicesNotCovered,
        Reason::NotPassported,
        Reason::NoTemporaryPermission,
        Reason::CrossBorderRefused,
        Reason::RolesNotCovered,
    ];

    /// The stable reason code (`certificate_revoked`, `not_in_register`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::CertificateMissing => "certificate_missing",
            Reason::CertificateUnreadable => "certificate_unreadable",
            Reason::SignatureInvalid => "signature_invalid",
            Reason::IssuerNotApproved => "issuer_not_approved",
            Reason::CertificateRevoked => "certificate_revoked",
            Reason::CertificateExpired => "certificate_expired",
            Reason::RevocationUnknown => "revocation_unknown",
            Reason::Denied => "denied",
            Reason::NotAllowed => "not_allowed",
            Reason::NotInRegister => "not_in_register",
            Reason::NotAuthorised => "not_authorised",
            Reason::ServicesNotCovered => "services_not_covered",
            Reason::NotPassported => "not_passported",
            Reason::NoTemporaryPermission => "no_temporary_permission",
            Reason::CrossBorderRefused => "cross_border_refused",
            Reason::RolesNotCovered => "roles_not_covered",
        }
    }

    /// Whether the access rule decided it after a check ran (rather than the call arriving
    /// without a usable certificate).
    pub fn is_decided_by_rule(&self) -> bool {
        match self {
            Reason::CertificateMissing | Reason::CertificateUnreadable => false,
            Reason::SignatureInvalid
            | Reason::IssuerNotApproved
            | Reason::CertificateRevoked
            | Reason::CertificateExpired
            | Reason::RevocationUnknown
            | Reason::Denied
            | Reason::NotAllowed
            | Reason::NotInRegister
            | Reason::NotAuthorised
            | Reason::ServicesNotCovered
            | Reason::NotPassported
            | Reason::NoTemporaryPermission
            | Reason::CrossBorderRefused
            | Reason::RolesNotCovered => true,
        }
    }

    /// What kind of problem the reason is: the one table behind every status and wire code.
    /// Certificate problems (missing, unreadable, not trusted, revoked, expired, status
    /// unknown, or blocked by the allow and deny lists) against register and role problems.
    pub fn kind(&self) -> ReasonKind {
        match self {
            Reason::CertificateMissing => ReasonKind::CertificateMissing,
            Reason::CertificateExpired => ReasonKind::CertificateExpired,
            Reason::CertificateRevoked => ReasonKind::CertificateRevoked,
            Reason::Denied | Reason::NotAllowed => ReasonKind::CertificateBlocked,
            Reason::CertificateUnreadable
            | Reason::SignatureInvalid
            | Reason::IssuerNotApproved
            | Reason::RevocationUnknown => ReasonKind::CertificateInvalid,
            Reason::NotInRegister
            | Reason::NotAuthorised
            | Reason::ServicesNotCovered
            | Reason::NotPassported
            | Reason::NoTemporaryPermission
            | Reason::CrossBorderRefused
            | Reason::RolesNotCovered => ReasonKind::RegisterOrRole,
        }
    }
}

/// The kinds of refusal reason ([`Reason::kind`]); each wire dialect names them its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonKind {
    /// No certificate was presented.
    CertificateMissing,
    /// The certificate is expired.
    CertificateExpired,
    /// The certificate is revoked.
    CertificateRevoked,
    /// The certificate is blocked by the allow or deny list.
    CertificateBlocked,
    /// The certificate is unreadable, untrusted, badly signed or of unknown revocation status.
    CertificateInvalid,
    /// A register or role problem: the PSP is not registered, authorised or passported as needed.
    RegisterOrRole,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A refusal: the reason and a sentence for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Why the call is refused.
    pub reason: Reason,
    /// A sentence explaining the refusal, for the caller.
    pub detail: String,
}

impl Rejection {
    /// A refusal for `reason` with the explanation `detail`.
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Rejection {
            reason,
            detail: detail.into(),
        }
    }
}

/// Leave to forward one call. Only [`decide`] and [`decide_report_only`] make one. It holds
/// the report it was decided on, as the caller shared it (`R`: the report itself, or a
/// caller's type that carries one, such as a cached result).
#[derive(Debug)]
pub struct Permit<R = CheckReport> {
    report: Arc<R>,
    /// The services the PSP is registered for (home entry that qualified), for the identity
    /// header.
    services: ServiceSet,
    /// In report-only mode: the rejection that was not enforced.
    not_enforced: Option<Rejection>,
}

impl<R> Clone for Permit<R> {
    fn clone(&self) -> Self {
        Permit {
            report: Arc::clone(&self.report),
            services: self.services,
            not_enforced: self.not_enforced.clone(),
        }
    }
}

impl<R: AsRef<CheckReport>> Permit<R> {
    /// Report-only mode: forward although the rule refused; the refusal travels with the
    /// permit so that it is logged and signalled to the upstream.
    fn report_only(report: Arc<R>, rejection: Rejection) -> Permit<R> {
        Permit {
            report,
            services: ServiceSet::EMPTY,
            not_enforced: Some(rejection),
        }
    }

    /// The check report the decision was made on.
    pub fn report(&self) -> &CheckReport {
        (*self.report).as_ref()
    }

    /// The report as the caller shared it.
    pub fn shared(&self) -> &Arc<R> {
        &self.report
    }

    /// The services the PSP is registered for (its qualifying home entry's), granted by the permit.
    pub fn services(&self) -> ServiceSet {
        self.services
    }

    /// In report-only mode, the refusal the rule made but did not enforce.
    pub fn not_enforced(&self) -> Option<&Rejection> {
        self.not_enforced.as_ref()
    }
}

/// Decides one call by the PSP of `certificate` (checked in `report`) to a route needing
/// `required` services: the steps of the module documentation, in order, the first refusal
/// returned.
pub fn decide<R: AsRef<CheckReport>>(
    policy: &Policy,
    shared: Arc<R>,
    certificate: &PspCertificate,
    required: ServiceSet,
) -> Result<Permit<R>, Rejection> {
    let report = (*shared).as_ref();
    if report.certificate_sha256 != certificate.fingerprint_sha256 {
        // A report decides for the certificate it checked, never for another one.
        return Err(Rejection::new(
            Reason::CertificateUnreadable,
            "the check report is about another certificate than the one presented",
        ));
    }
    certificate_flags(report)?;
    allow_and_deny_lists(policy, report)?;
    let home_country = certificate.auth_number().map(|a| a.country);
    let (covering, granted) = home_register_entry(policy, report, home_country, required)?;
    if home_country != Some(policy.jurisdiction) {
        cross_border(policy, report, home_country, &covering, required)?;
    }
    if policy.require_roles {
        roles_cover(certificate, required)?;
    }
    Ok(Permit {
        report: shared,
        services: granted,
        not_enforced: None,
    })
}

/// Step 2: the deny list, then the allow list (when configured), by auth number.
/// Auth numbers are compared by their identity key (`auth_number::identity_key`): every
/// spelling the register matches to one PSP is on the list when one is.
fn allow_and_deny_lists(policy: &Policy, report: &CheckReport) -> Result<(), Rejection> {
    let auth = report.auth_number.clone().unwrap_or_default();
    if policy.deny.contains(&auth) {
        return Err(Rejection::new(
            Reason::Denied,
            format!("{auth} is on the deny list"),
        ));
    }
    if let Some(allow) = &policy.allow
        && !allow.contains(&auth)
    {
        return Err(Rejection::new(
            Reason::NotAllowed,
            format!("`{auth}` is not on the allow list"),
        ));
    }
    Ok(())
}

/// Step 3: the home register consulted and the PSP found in it, with entries of an accepted
/// status whose services cover `required`. Returns those entries and the services of the
/// first, which the permit grants.
fn home_register_entry<'r>(
    policy: &Policy,
    report: &'r CheckReport,
    home_country: Option<CountryCode>,
    required: ServiceSet,
) -> Result<(Vec<&'r CategoryEntryBlock>, ServiceSet), Rejection> {
    let entries = &report.registers.home.category_entries;
    if let HomeOutcome::Unavailable { nca_id, reason } = &report.registers.home_outcome {
        // Fail closed: a register that cannot be consulted vouches for nobody.
        return Err(Rejection::new(
            Reason::NotInRegister,
            format!("the PSP's home register {nca_id} could not be consulted: {reason}"),
        ));
    }
    if home_country.is_none() || entries.is_empty() {
        return Err(Rejection::new(
            Reason::NotInRegister,
            "the PSP is not found in its home register",
        ));
    }
    // Contradicting entries (issue 40 finding 7: the same category listed with an accepted
    // status and another, in one register or in two references normalised to one PSP): the
    // most restrictive status decides, so such a category vouches for nothing.
    let contradicted = |e: &CategoryEntryBlock| {
        entries.iter().any(|other| {
            other.category_name == e.category_name
                && !policy.accepted_statuses.contains(&other.psp_auth_status)
        })
    };
    let accepted: Vec<&CategoryEntryBlock> = entries
        .iter()
        .filter(|e| policy.accepted_statuses.contains(&e.psp_auth_status) && !contradicted(e))
        .collect();
    if accepted.is_empty() {
        if let Some(e) = entries
            .iter()
            .find(|e| policy.accepted_statuses.contains(&e.psp_auth_status))
        {
            return Err(Rejection::new(
                Reason::NotAuthorised,
                format!(
                    "the PSP's home register contradicts itself: category {:?} is listed both {} and with a status that is not accepted; the most restrictive decides",
                    e.category_name,
                    e.psp_auth_status.as_str()
                ),
            ));
        }
        return Err(Rejection::new(
            Reason::NotAuthorised,
            "the PSP's home register status is not an accepted one",
        ));
    }
    // Hub directories publish permission tiers, not services.
    let home_kind = match &report.registers.home_outcome {
        HomeOutcome::Found { kind, .. } => *kind,
        HomeOutcome::NotPsdForm
        | HomeOutcome::NoRegister { .. }
        | HomeOutcome::NotFound { .. }
        | HomeOutcome::Unavailable { .. } => RegisterKind::Psd2,
    };
    let services = |e: &CategoryEntryBlock| as_services(e.psp_payment_services, home_kind);
    let covering: Vec<&CategoryEntryBlock> = accepted
        .into_iter()
        .filter(|e| required.is_subset(&services(e)))
        .collect();
    let Some(first) = covering.first() else {
        return Err(Rejection::new(
            Reason::ServicesNotCovered,
            format!(
                "the PSP is not registered for payment services {:?}",
                required.to_vec()
            ),
        ));
    };
    let granted = services(first);
    Ok((covering, granted))
}

/// Step 4, for a PSP whose home is not the bank's jurisdiction: the configured cross-border
/// rule, on the `covering` home entries (`passport-out`) or the host register (`uk-tpr`).
fn cross_border(
    policy: &Policy,
    report: &CheckReport,
    home_country: Option<CountryCode>,
    covering: &[&CategoryEntryBlock],
    required: ServiceSet,
) -> Result<(), Rejection> {
    match policy.cross_border {
        CrossBorderRule::HomeOnly => Err(Rejection::new(
            Reason::CrossBorderRefused,
            format!("only PSPs from {} are accepted", policy.jurisdiction),
        )),
        CrossBorderRule::PassportOut => {
            let passported = covering.iter().any(|e| {
                e.passport_out.as_ref().is_some_and(|p| {
                    p.country_code == policy.jurisdiction && required.is_subset(&p.payment_services)
                })
            });
            if !passported {
                return Err(Rejection::new(
                    Reason::NotPassported,
                    format!(
                        "the PSP is not passported to {} for payment services {:?}",
                        policy.jurisdiction,
                        required.to_vec()
                    ),
                ));
            }
            Ok(())
        }
        CrossBorderRule::UkTpr => uk_temporary_permission(policy, report, home_country, required),
    }
}

/// Step 4, `uk-tpr` (contract rule 6): home not GB; a home entry Authorised or Registered
/// whose services match (checked in step 3); the host register's passportIn matches.
fn uk_temporary_permission(
    policy: &Policy,
    report: &CheckReport,
    home_country: Option<CountryCode>,
    required: ServiceSet,
) -> Result<(), Rejection> {
    let home_is_gb = home_country.is_some_and(|c| c.as_str() == "GB");
    let host_ok = report.registers.host.as_ref().is_some_and(|h| {
        h.category_entries.iter().any(|e| {
            matches!(
                e.psp_auth_status,
                AuthStatus::Authorised | AuthStatus::Registered
            ) && e
                .passport_in
                .as_ref()
                .is_some_and(|p| required.is_subset(&p.payment_services))
        })
    });
    if home_is_gb || !host_ok {
        return Err(Rejection::new(
            Reason::NoTemporaryPermission,
            format!(
                "no temporary permission in {} for payment services {:?}",
                policy.jurisdiction,
                required.to_vec()
            ),
        ));
    }
    Ok(())
}

/// Step 5 (`require_roles`): the certificate's PSD2 roles cover `required`.
fn roles_cover(certificate: &PspCertificate, required: ServiceSet) -> Result<(), Rejection> {
    let roles = certificate_role_services(certificate);
    if !required.is_subset(&roles) {
        return Err(Rejection::new(
            Reason::RolesNotCovered,
            format!(
                "the certificate's PSD2 roles do not cover payment services {:?}",
                required.to_vec()
            ),
        ));
    }
    Ok(())
}

/// The rule in report-only mode (`danger.gateway_report_only`): the permit of [`decide`], or
/// when it refuses, a permit that carries the refusal it did not enforce
/// ([`Permit::not_enforced`]), for the audit log and the upstream's report-only header. The
/// refusal's services are empty: no service is asserted for a PSP the rule refused.
pub fn decide_report_only<R: AsRef<CheckReport>>(
    policy: &Policy,
    report: Arc<R>,
    certificate: &PspCertificate,
    required: ServiceSet,
) -> Permit<R> {
    match decide(policy, report.clone(), certificate, required) {
        Ok(permit) => permit,
        Err(rejection) => Permit::report_only(report, rejection),
    }
}

/// Step 1: the four flags, first failure wins in a fixed order.
fn certificate_flags(report: &CheckReport) -> Result<(), Rejection> {
    let v = &report.validity;
    if !v.valid_qtsp {
        return Err(Rejection::new(
            Reason::IssuerNotApproved,
            "the certificate's issuer is not an approved issuer for this jurisdiction",
        ));
    }
    if !v.valid_signature {
        return Err(Rejection::new(
            Reason::SignatureInvalid,
            "the certificate's signature does not verify with its issuer's key",
        ));
    }
    if report.revocation == RevocationStatus::Revoked {
        return Err(Rejection::new(
            Reason::CertificateRevoked,
            "the certificate is revoked",
        ));
    }
    if !v.not_expired {
        return Err(Rejection::new(
            Reason::CertificateExpired,
            "the certificate is outside its validity period",
        ));
    }
    if !v.not_revoked {
        return Err(Rejection::new(
            Reason::RevocationUnknown,
            "the certificate's revocation status could not be established",
        ));
    }
    Ok(())
}

/// Register services as PSD2 services. Hub directories publish permission tiers: 3 is
/// account information (service 8), 4 payment initiation (service 7); tiers 1 and 2
/// (public data, account opening) are no PSD2 service.
fn as_services(published: ServiceSet, kind: RegisterKind) -> ServiceSet {
    match kind {
        RegisterKind::Psd2 => published,
        RegisterKind::HubDirectory => {
            let mut s = ServiceSet::EMPTY;
            for tier in published.iter() {
                match tier.number() {
                    3 => {
                        s.insert(PaymentService::ACCOUNT_INFORMATION);
                    }
                    4 => {
                        s.insert(PaymentService::PAYMENT_INITIATION);
                    }
                    // A number, not an enum: tiers 1 and 2 and any other number stand for no
                    // PSD2 service (see above), so nothing is granted.
                    _ => {}
                }
            }
            s
        }
    }
}

/// The services the certificate's PSD2 roles stand for (the contract's mapping):
/// PSP_AS 1–8, PSP_PI 7, PSP_AI 8, PSP_IC 5.
pub fn certificate_role_services(cert: &PspCertificate) -> ServiceSet {
    let mut s = ServiceSet::EMPTY;
    let roles = cert
        .qc
        .as_ref()
        .and_then(|q| q.psd2.as_ref())
        .map(|p| p.roles.iter().filter_map(|r| r.role).collect::<Vec<_>>())
        .unwrap_or_default();
    for role in roles {
        let numbers: &[u8] = match role {
            Psd2Role::PspAs => &[1, 2, 3, 4, 5, 6, 7, 8],
            Psd2Role::PspPi => &[7],
            Psd2Role::PspAi => &[8],
            Psd2Role::PspIc => &[5],
        };
        for n in numbers {
            if let Some(p) = PaymentService::new(*n) {
                s.insert(p);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{RevocationStatus, Validity};
    use crate::register::RegisterSnapshot;

    /// A report whose four flags are true for a certificate claiming `auth_number`, with no
    /// register consulted: what step 2 reads. Only this crate can make one.
    fn report_claiming(auth_number: &str) -> CheckReport {
        let jurisdiction: CountryCode = "XX".parse().expect("country");
        CheckReport {
            certificate_sha256: [0; 32],
            psp_subject_name: None,
            auth_number: Some(auth_number.to_owned()),
            qtsp_common_name: None,
            qtsp_source: None,
            qtsp_jurisdiction: None,
            validity: Validity {
                valid_qtsp: true,
                valid_signature: true,
                not_revoked: true,
                not_expired: true,
            },
            revocation: RevocationStatus::Good,
            errors: Vec::new(),
            explanation: Vec::new(),
            registers: RegisterSnapshot::from_registers(Vec::new())
                .expect("an empty snapshot")
                .lookup(None, jurisdiction),
        }
    }

    /// The fresh-eyes attack of issue 40 (docs/attacks/proxy-and-data.md B2): `gateway.deny`
    /// compared the raw auth number while the register lookup normalised it, so
    /// `PSDXX-TEST-0000000001`, `PSDXX-test-000001` or a trailing space got a denied PSP in.
    /// Every spelling the register matches is on the list now, in the certificate and in the
    /// list alike.
    #[test]
    fn a_denied_psp_is_denied_under_every_spelling_of_its_auth_number() {
        let spellings = [
            "PSDXX-TEST-000001",
            "PSDXX-TEST-0000000001",
            "PSDXX-test-000001",
            "PSDXX-TEST-000001 ",
        ];
        for listed in spellings {
            let deny: AuthNumberList = [listed].into();
            let policy = Policy {
                jurisdiction: "XX".parse().expect("country"),
                cross_border: CrossBorderRule::PassportOut,
                accepted_statuses: vec![AuthStatus::Authorised],
                require_roles: false,
                allow: Some(["PSDXX-TEST-000001"].into()),
                deny,
            };
            for claimed in spellings {
                let refused =
                    allow_and_deny_lists(&policy, &report_claiming(claimed)).expect_err("denied");
                assert_eq!(refused.reason, Reason::Denied, "{listed:?} / {claimed:?}");
            }
            let other = allow_and_deny_lists(&policy, &report_claiming("PSDXX-TEST-000002"))
                .expect_err("not on the allow list");
            assert_eq!(other.reason, Reason::NotAllowed);
        }
        let open = Policy {
            jurisdiction: "XX".parse().expect("country"),
            cross_border: CrossBorderRule::PassportOut,
            accepted_statuses: vec![AuthStatus::Authorised],
            require_roles: false,
            allow: None,
            deny: ["PSDXX-TEST-000002"].into(),
        };
        assert!(allow_and_deny_lists(&open, &report_claiming("PSDXX-TEST-000001")).is_ok());
    }

    /// Each reason's place in [`Reason::ALL`]. No `_` arm: a new reason does not compile until
    /// it is given its place here, beside the list it must join.
    fn place_in_all(reason: Reason) -> usize {
        match reason {
            Reason::CertificateMissing => 0,
            Reason::CertificateUnreadable => 1,
            Reason::SignatureInvalid => 2,
            Reason::IssuerNotApproved => 3,
            Reason::CertificateRevoked => 4,
            Reason::CertificateExpired => 5,
            Reason::RevocationUnknown => 6,
            Reason::Denied => 7,
            Reason::NotAllowed => 8,
            Reason::NotInRegister => 9,
            Reason::NotAuthorised => 10,
            Reason::ServicesNotCovered => 11,
            Reason::NotPassported => 12,
            Reason::NoTemporaryPermission => 13,
            Reason::CrossBorderRefused => 14,
            Reason::RolesNotCovered => 15,
        }
    }

    #[test]
    fn all_lists_each_reason_once_and_each_has_its_own_code() {
        for (place, reason) in Reason::ALL.into_iter().enumerate() {
            assert_eq!(place_in_all(reason), place, "{reason}");
        }
        let mut codes: Vec<&str> = Reason::ALL.iter().map(Reason::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Reason::ALL.len(), "codes are distinct");
    }
}
