//! A synthetic EU list of the lists and Czech list, signed by `xmlsec1` with keys made here
//! and dated around now: the LOTL refresh tests (`trust_lotl`, `faults_refresh`).

use std::path::{Path, PathBuf};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::data;
use super::xmlsec::{Scratch, Signer, b64, rsa_signer, sign_list, strip_signature};

/// A configuration file in `dir` with one LOTL source.
pub fn lotl_config(dir: &Path, lotl_url: &str, signers_pem: &Path, extra_trust: &str) -> PathBuf {
    super::loopback_config(
        dir,
        &format!(
            r#"
[trust]
cache_dir = "cache"
{extra_trust}

[[trust.sources]]
name = "eu"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["EEA"]
lotl = {{ location = "{lotl_url}", signers = ["{}"], territories = ["CZ"] }}
"#,
            signers_pem.display()
        ),
    )
}

/// The real Czech list of 2019 (sequence 77), re-signed by [`World::cz`].
pub const CZ_2019: &str = "trusted-lists/CZ-tl_seq77_2019-08-23.xml";

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(data(rel)).expect("shared data")
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).expect("format")
}

pub fn in_days(days: i64) -> OffsetDateTime {
    OffsetDateTime::now_utc() + time::Duration::days(days)
}

/// Synthetic documents, signed by `xmlsec1` with keys made here, dated around now.
pub struct World {
    scratch: Scratch,
    /// Pinned for the LOTL.
    pub k0: Signer,
    /// Keys the Commission moves to, announced by pivots.
    pub k1: Signer,
    pub k2: Signer,
    /// The Czech scheme operator.
    pub cz: Signer,
}

impl World {
    pub fn new(name: &str) -> World {
        let scratch = Scratch::new(name);
        let dir = scratch.0.clone();
        World {
            k0: rsa_signer(&dir, "k0"),
            k1: rsa_signer(&dir, "k1"),
            k2: rsa_signer(&dir, "k2"),
            cz: rsa_signer(&dir, "cz"),
            scratch,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.scratch.0
    }

    /// A LOTL of sequence `seq`, signed by `by`, announcing `next` for the next LOTL, with
    /// `pivots` (newest first) in SchemeInformationURI and a CZ pointer to `cz_url` that
    /// authorises the CZ key.
    pub fn lotl(
        &self,
        seq: u64,
        by: &Signer,
        next: &[&Signer],
        pivots: &[String],
        cz_url: &str,
    ) -> Vec<u8> {
        self.lotl_until(seq, by, next, pivots, cz_url, in_days(30))
    }

    /// [`World::lotl`] with `NextUpdate` at `next_update`.
    pub fn lotl_until(
        &self,
        seq: u64,
        by: &Signer,
        next: &[&Signer],
        pivots: &[String],
        cz_url: &str,
        next_update: OffsetDateTime,
    ) -> Vec<u8> {
        let now = OffsetDateTime::now_utc();
        let ids = |signers: &[&Signer]| {
            signers
                .iter()
                .map(|s| {
                    format!(
                        "<ServiceDigitalIdentity><DigitalId><X509Certificate>{}</X509Certificate></DigitalId></ServiceDigitalIdentity>",
                        b64(&s.cert_der)
                    )
                })
                .collect::<String>()
        };
        let uris: String = pivots
            .iter()
            .map(|u| format!("<URI xml:lang=\"en\">{u}</URI>"))
            .chain(std::iter::once(
                "<URI xml:lang=\"en\">https://eur-lex.europa.eu/legal-content/EN/TXT/?uri=OJ:C_202601944</URI>".to_owned(),
            ))
            .collect();
        let xml = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#" xmlns:tslx="http://uri.etsi.org/02231/v2/additionaltypes#" Id="lotl" TSLTag="http://uri.etsi.org/19612/TSLTag">
<SchemeInformation>
<TSLVersionIdentifier>6</TSLVersionIdentifier>
<TSLSequenceNumber>{seq}</TSLSequenceNumber>
<TSLType>http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUlistofthelists</TSLType>
<SchemeOperatorName><Name xml:lang="en">Test Commission</Name></SchemeOperatorName>
<SchemeInformationURI>{uris}</SchemeInformationURI>
<SchemeTerritory>EU</SchemeTerritory>
<PointersToOtherTSL>
<OtherTSLPointer><ServiceDigitalIdentities>{next_ids}</ServiceDigitalIdentities><TSLLocation>https://ec.example/eu-lotl.xml</TSLLocation><AdditionalInformation><OtherInformation><TSLType>http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUlistofthelists</TSLType></OtherInformation><OtherInformation><SchemeTerritory>EU</SchemeTerritory></OtherInformation><OtherInformation><tslx:MimeType>application/vnd.etsi.tsl+xml</tslx:MimeType></OtherInformation></AdditionalInformation></OtherTSLPointer>
<OtherTSLPointer><ServiceDigitalIdentities>{cz_ids}</ServiceDigitalIdentities><TSLLocation>{cz_url}</TSLLocation><AdditionalInformation><OtherInformation><TSLType>http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUgeneric</TSLType></OtherInformation><OtherInformation><SchemeTerritory>CZ</SchemeTerritory></OtherInformation><OtherInformation><tslx:MimeType>application/vnd.etsi.tsl+xml</tslx:MimeType></OtherInformation></AdditionalInformation></OtherTSLPointer>
</PointersToOtherTSL>
<ListIssueDateTime>{issued}</ListIssueDateTime>
<NextUpdate><dateTime>{next_update}</dateTime></NextUpdate>
</SchemeInformation>
</TrustServiceStatusList>
"#,
            next_ids = ids(next),
            cz_ids = ids(&[&self.cz]),
            // Now: the signers made for these tests are valid from their creation on.
            issued = rfc3339(now),
            next_update = rfc3339(next_update),
        );
        sign_list(self.dir(), &format!("lotl-{seq}"), &xml, by)
    }

    /// The real Czech list as sequence `seq` with `NextUpdate` at `next_update`, issued now,
    /// signed by `by`.
    pub fn cz(&self, seq: u64, next_update: OffsetDateTime, by: &Signer) -> Vec<u8> {
        self.cz_edited(seq, next_update, by, |xml| xml)
    }

    /// [`World::cz`] with `edit` applied to the unsigned XML before signing.
    pub fn cz_edited(
        &self,
        seq: u64,
        next_update: OffsetDateTime,
        by: &Signer,
        edit: impl FnOnce(String) -> String,
    ) -> Vec<u8> {
        let xml = String::from_utf8(read(CZ_2019)).expect("UTF-8");
        // Issued now: the signers made for these tests are valid from their creation on.
        let xml = strip_signature(&xml)
            .replace(
                "<ListIssueDateTime>2019-08-23T08:00:00Z</ListIssueDateTime>",
                &format!(
                    "<ListIssueDateTime>{}</ListIssueDateTime>",
                    rfc3339(OffsetDateTime::now_utc())
                ),
            )
            .replace(
                "<TSLSequenceNumber>77</TSLSequenceNumber>",
                &format!("<TSLSequenceNumber>{seq}</TSLSequenceNumber>"),
            )
            .replace(
                "<dateTime>2020-02-23T00:00:00Z</dateTime>",
                &format!("<dateTime>{}</dateTime>", rfc3339(next_update)),
            );
        sign_list(self.dir(), &format!("cz-{seq}"), &edit(xml), by)
    }
}
