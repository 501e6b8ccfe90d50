//! C2SP signed notes (<https://c2sp.org/signed-note>): a text ending in a newline, a blank
//! line, and signature lines `— <name> base64(key ID || signature)`.
//!
//! Two signature types: Ed25519 (type 0x01, key ID = SHA-256(name || 0x0A || 0x01 ||
//! public key)[:4], the spec's own) and ECDSA P-256 (type 0x02, "as implemented by
//! github.com/transparency-dev/witness": key ID = SHA-256(DER SPKI)[:4], the signature
//! ASN.1 DER over SHA-256 of the text). Go's `golang.org/x/mod/sumdb/note` verifies the
//! first with the key [`verifier_key`] prints; transparency-dev/formats' `note` the second.

use super::Alg;
use super::key::{PublicKey, SigningKey};
use crate::hex;

/// The spec: verifiers "MUST accept at least up to 16 signatures"; we accept exactly that
/// many, which bounds the work a note of many forged lines can cause.
pub const MAX_NOTE_SIGNATURES: usize = 16;

/// The em dash and space that open a signature line.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// Why a note was not signed or not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// The text to sign, or the note, does not end in a newline.
    #[error("the note text does not end in a newline")]
    NoFinalNewline,
    /// A key name that is empty or holds a space or a `+`.
    #[error("the key name `{name}` is empty or contains a space or `+`")]
    BadKeyName { name: String },
    /// An ASCII control character other than newline.
    #[error("the note contains the control character {byte:#04x} at byte {offset}")]
    ControlCharacter { byte: u8, offset: usize },
    /// No blank line separates text from signatures.
    #[error("the note has no blank line before its signatures")]
    NoSignatureBlock,
    /// A signature line that is not `— <name> <base64>`.
    #[error("the signature line `{line}` is malformed")]
    MalformedSignatureLine { line: String },
    /// More than [`MAX_NOTE_SIGNATURES`].
    #[error("the note has more than {max} signatures")]
    TooManySignatures { max: usize },
    /// No signature line with this key's name and key ID.
    #[error("the note has no signature from {name} with key ID {key_id}")]
    NoSignatureFromKey { name: String, key_id: String },
    /// A signature line of this key that does not verify: the text was changed, or someone
    /// else signed under this key's name and ID.
    #[error("the signature of {name} (key ID {key_id}) does not verify over the note text")]
    BadSignature { name: String, key_id: String },
}

/// The note key ID of `key` under `name`.
pub fn note_key_id(name: &str, key: &PublicKey) -> [u8; 4] {
    let hash = match key.alg() {
        Alg::EdDsa => hex::sha256(&[name.as_bytes(), b"\n", &[0x01], key.raw()].concat()),
        Alg::Es256 => hex::sha256(&key.to_spki_der()),
    };
    [hash[0], hash[1], hash[2], hash[3]]
}

/// The verifier key `name+hex8(key ID)+base64(type || key)`: for Ed25519 the form Go's
/// `note.NewVerifier` reads, for ECDSA the one transparency-dev/formats'
/// `NewECDSAVerifier` reads (type 0x02 followed by the DER SPKI).
pub fn verifier_key(name: &str, key: &PublicKey) -> Result<String, NoteError> {
    check_name(name)?;
    let encoded = match key.alg() {
        Alg::EdDsa => [&[0x01], key.raw()].concat(),
        Alg::Es256 => [&[0x02][..], &key.to_spki_der()].concat(),
    };
    Ok(format!(
        "{name}+{}+{}",
        hex::lower(&note_key_id(name, key)),
        base64_std(&encoded)
    ))
}

/// Signs `text` (which must end in a newline) as `name`: the text, a blank line, and one
/// signature line.
pub fn note_sign(key: &SigningKey, name: &str, text: &str) -> Result<String, NoteError> {
    check_name(name)?;
    if !text.ends_with('\n') {
        return Err(NoteError::NoFinalNewline);
    }
    check_no_control_characters(text)?;
    let key_id = note_key_id(name, &key.public());
    let signature = key.sign_note(text.as_bytes());
    let blob = base64_std(&[&key_id[..], &signature].concat());
    Ok(format!("{text}\n{SIGNATURE_PREFIX}{name} {blob}\n"))
}

/// The text of `note` when it carries a verifying signature of `key` under `name`.
/// Signatures of other keys are skipped, as the spec requires; any signature with this
/// name and key ID that does not verify refuses the note.
pub fn note_verify(note: &str, name: &str, key: &PublicKey) -> Result<String, NoteError> {
    check_name(name)?;
    check_no_control_characters(note)?;
    if !note.ends_with('\n') {
        return Err(NoteError::NoFinalNewline);
    }
    // The text is separated from the signatures by the last blank line.
    let split = note.rfind("\n\n").ok_or(NoteError::NoSignatureBlock)?;
    let (text, signatures) = (&note[..=split], &note[split + 2..]);
    let key_id = note_key_id(name, key);
    let key_id_hex = hex::lower(&key_id);
    let mut verified = false;
    for (count, line) in signatures.lines().enumerate() {
        if count == MAX_NOTE_SIGNATURES {
            return Err(NoteError::TooManySignatures {
                max: MAX_NOTE_SIGNATURES,
            });
        }
        let (line_name, blob) = parse_signature_line(line)?;
        if line_name != name || blob[..4] != key_id {
            continue;
        }
        if !key.verify_note(text.as_bytes(), &blob[4..]) {
            return Err(NoteError::BadSignature {
                name: name.to_owned(),
                key_id: key_id_hex,
            });
        }
        verified = true;
    }
    if !verified {
        return Err(NoteError::NoSignatureFromKey {
            name: name.to_owned(),
            key_id: key_id_hex,
        });
    }
    Ok(text.to_owned())
}

/// `— <name> <base64>`: the name and the decoded key ID and signature (at least 5 bytes).
fn parse_signature_line(line: &str) -> Result<(&str, Vec<u8>), NoteError> {
    let malformed = || NoteError::MalformedSignatureLine {
        line: line.to_owned(),
    };
    let rest = line.strip_prefix(SIGNATURE_PREFIX).ok_or_else(malformed)?;
    let (name, blob) = rest.split_once(' ').ok_or_else(malformed)?;
    if check_name(name).is_err() {
        return Err(malformed());
    }
    use base64::Engine as _;
    let blob = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| malformed())?;
    if blob.len() < 5 {
        return Err(malformed());
    }
    Ok((name, blob))
}

/// Key names "MUST be non-empty and MUST NOT contain any Unicode spaces or plus".
fn check_name(name: &str) -> Result<(), NoteError> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(NoteError::BadKeyName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Notes "MUST NOT contain any ASCII control characters (those below U+0020) other than
/// newline".
fn check_no_control_characters(text: &str) -> Result<(), NoteError> {
    match text
        .bytes()
        .enumerate()
        .find(|&(_, b)| b < 0x20 && b != b'\n')
    {
        Some((offset, byte)) => Err(NoteError::ControlCharacter { byte, offset }),
        None => Ok(()),
    }
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "psp-gateway.example/evidence";
    const TEXT: &str =
        "psp-gateway.example/evidence\n42\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBrxhEcqd1K4uo+s=\n";

    fn key(alg: Alg) -> SigningKey {
        SigningKey::from_pem(&SigningKey::generate_pem(alg)).unwrap()
    }

    #[test]
    fn notes_round_trip_for_both_signature_types() {
        for alg in [Alg::EdDsa, Alg::Es256] {
            let key = key(alg);
            let note = note_sign(&key, NAME, TEXT).unwrap();
            assert!(
                note.starts_with(&format!("{TEXT}\n\u{2014} {NAME} ")),
                "{note}"
            );
            assert_eq!(note_verify(&note, NAME, &key.public()), Ok(TEXT.to_owned()));
        }
    }

    /// The public key of a verifier key `name+hash+base64(type || key)`.
    fn from_verifier_key(vkey: &str) -> PublicKey {
        use base64::Engine as _;
        let material = vkey.splitn(3, '+').nth(2).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(material)
            .unwrap();
        match bytes[0] {
            0x01 => PublicKey::from_raw(Alg::EdDsa, &bytes[1..]).unwrap(),
            0x02 => PublicKey::from_spki_der(&bytes[1..]).unwrap(),
            other => panic!("signature type {other}"),
        }
    }

    #[test]
    fn go_sumdb_notes_example_is_reproduced_byte_for_byte() {
        // golang.org/x/mod/sumdb/note's package example: its signer key
        // `PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz` holds
        // the Ed25519 seed after the type byte 0x01. Ed25519 is deterministic, so our note
        // must be Go's to the byte, and Go's verifier key ours.
        use base64::Engine as _;
        let seed = base64::engine::general_purpose::STANDARD
            .decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")
            .unwrap();
        // PKCS#8 v1 of an Ed25519 seed (RFC 8410 §7).
        let mut pkcs8 = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        pkcs8.extend_from_slice(&seed[1..]);
        let key = SigningKey::from_pkcs8_der(&pkcs8).unwrap();
        let text = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
        let note = format!(
            "{text}\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
        );
        assert_eq!(note_sign(&key, "PeterNeumann", text).unwrap(), note);
        let vkey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
        assert_eq!(verifier_key("PeterNeumann", &key.public()).unwrap(), vkey);
        assert_eq!(
            note_verify(&note, "PeterNeumann", &from_verifier_key(vkey)),
            Ok(text.to_owned())
        );
    }

    #[test]
    fn real_ecdsa_checkpoints_of_rekor_and_the_pixel_log_verify() {
        // transparency-dev/formats, note/note_verifier_test.go: Sigstore's Rekor and Google's
        // Pixel 6 transparency log, ECDSA P-256 keys and checkpoints signed by them.
        let cases = [
            (
                "rekor.sigstore.dev",
                "rekor.sigstore.dev+c0d23d6a+AjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABNhtmPtrWm3U1eQXBogSMdGvXwBcK5AW5i0hrZLOC96l+smGNM7nwZ4QvFK/4sueRoVj//QP22Ni4Qt9DPfkWLc=",
                "Rekor\n798034\nf+7CoKgXKE/tNys9TTXcr/ad6U/K3xvznmzew9y6SP0=\n",
                "wNI9ajBEAiARInWIWyCdyG27CO6LPnPekyw20qO0YJfoaPaowGp/XgIgc+qEHS3+GKVClgqq20uDLet7MCoTURUCRdxwWBHHufk=",
            ),
            (
                "pixel6_transparency_log",
                "pixel6_transparency_log+91c16e30+AjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABN+4x0Jk1yTwvLFI9A4NDdGZcX0aiWVdWM5XJVy0M4VWD3AvyW5Q6Hs9A0mcDkpUoYgn+KKPNzFC0H3nN3q6JQ8=",
                "DEFAULT\n10\nbsWRucJU5xJPHb5eBdOm6+DM+VelCZBuvtI3sHERJ9Y=\n",
                "kcFuMDBFAiEAhqMAP8P6qf6QxtUJhzMhbN+MbZ9dwfUHzGQJmffJHtoCIGD0cNe47dHWBoPwYdgBCepB06/+g5O1FmYjXl06owL4",
            ),
        ];
        for (name, vkey, text, signature) in cases {
            let key = from_verifier_key(vkey);
            assert_eq!(verifier_key(name, &key).unwrap(), vkey);
            let note = format!("{text}\n\u{2014} {name} {signature}\n");
            assert_eq!(note_verify(&note, name, &key), Ok(text.to_owned()));
            let tampered = note.replacen('\n', "0\n", 1);
            assert!(matches!(
                note_verify(&tampered, name, &key),
                Err(NoteError::BadSignature { .. })
            ));
        }
    }

    #[test]
    fn the_ed25519_key_id_and_verifier_key_follow_the_spec() {
        // RFC 8037 A.2's public key, under a name: the key ID is recomputed by hand here.
        let x =
            crate::evidence::b64url_decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        let public = PublicKey::from_raw(Alg::EdDsa, &x).unwrap();
        let hash = hex::sha256(&[b"example.com/key\n\x01".as_slice(), &x].concat());
        assert_eq!(note_key_id("example.com/key", &public), hash[..4]);
        let vkey = verifier_key("example.com/key", &public).unwrap();
        assert_eq!(
            vkey,
            format!(
                "example.com/key+{}+{}",
                hex::lower(&hash[..4]),
                base64_std(&[&[1u8][..], &x].concat())
            )
        );
        let ec = key(Alg::Es256).public();
        assert_eq!(note_key_id("any", &ec), hex::sha256(&ec.to_spki_der())[..4]);
        assert!(
            verifier_key("any", &ec)
                .unwrap()
                .contains("+AjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IAB")
        );
    }

    #[test]
    fn a_tampered_text_fails_and_another_key_finds_no_signature() {
        for alg in [Alg::EdDsa, Alg::Es256] {
            let key = key(alg);
            let note = note_sign(&key, NAME, TEXT).unwrap().replacen("42", "43", 1);
            assert!(matches!(
                note_verify(&note, NAME, &key.public()),
                Err(NoteError::BadSignature { .. })
            ));
            let note = note_sign(&key, NAME, TEXT).unwrap();
            let other = self::key(alg).public();
            assert!(matches!(
                note_verify(&note, NAME, &other),
                Err(NoteError::NoSignatureFromKey { .. })
            ));
            assert!(matches!(
                note_verify(&note, "other.example/name", &key.public()),
                Err(NoteError::NoSignatureFromKey { .. })
            ));
        }
    }

    #[test]
    fn a_forged_line_under_our_name_and_key_id_refuses_the_note() {
        // Another key signs, and its line is relabelled with our key ID.
        let ours = key(Alg::EdDsa);
        let theirs = key(Alg::EdDsa);
        let genuine = note_sign(&ours, NAME, TEXT).unwrap();
        let forged = note_sign(&theirs, NAME, TEXT).unwrap();
        let forged_line = forged.lines().last().unwrap();
        let (_, blob) = parse_signature_line(forged_line).unwrap();
        let relabelled = base64_std(&[&note_key_id(NAME, &ours.public())[..], &blob[4..]].concat());
        let note = format!("{genuine}\u{2014} {NAME} {relabelled}\n");
        assert!(matches!(
            note_verify(&note, NAME, &ours.public()),
            Err(NoteError::BadSignature { .. })
        ));
    }

    #[test]
    fn other_signers_lines_are_skipped_up_to_sixteen() {
        let ours = key(Alg::Es256);
        let witness = key(Alg::EdDsa);
        let mut note = note_sign(&witness, "witness.example/w1", TEXT).unwrap();
        note.push_str(
            note_sign(&ours, NAME, TEXT)
                .unwrap()
                .lines()
                .last()
                .unwrap(),
        );
        note.push('\n');
        assert_eq!(
            note_verify(&note, NAME, &ours.public()),
            Ok(TEXT.to_owned())
        );
        let line = note.lines().last().unwrap().to_owned();
        let mut crowded = format!("{TEXT}\n");
        for _ in 0..MAX_NOTE_SIGNATURES {
            crowded.push_str(&line);
            crowded.push('\n');
        }
        assert!(note_verify(&crowded, NAME, &ours.public()).is_ok());
        crowded.push_str(&line);
        crowded.push('\n');
        assert_eq!(
            note_verify(&crowded, NAME, &ours.public()),
            Err(NoteError::TooManySignatures { max: 16 })
        );
    }

    #[test]
    fn malformed_notes_and_names_are_refused() {
        let key = key(Alg::EdDsa);
        let public = key.public();
        let note = note_sign(&key, NAME, TEXT).unwrap();
        assert_eq!(
            note_sign(&key, NAME, "no newline"),
            Err(NoteError::NoFinalNewline)
        );
        assert_eq!(
            note_sign(&key, NAME, "tab\there\n"),
            Err(NoteError::ControlCharacter { byte: 9, offset: 3 })
        );
        for name in ["", "a b", "a+b"] {
            assert_eq!(
                note_sign(&key, name, TEXT),
                Err(NoteError::BadKeyName {
                    name: name.to_owned()
                })
            );
        }
        let cr = note.replace('\n', "\r\n");
        assert!(matches!(
            note_verify(&cr, NAME, &public),
            Err(NoteError::ControlCharacter { byte: 0x0d, .. })
        ));
        assert_eq!(
            note_verify(note.trim_end(), NAME, &public),
            Err(NoteError::NoFinalNewline)
        );
        assert_eq!(
            note_verify(TEXT, NAME, &public),
            Err(NoteError::NoSignatureBlock)
        );
        let dashless = note.replace('\u{2014}', "-");
        assert!(matches!(
            note_verify(&dashless, NAME, &public),
            Err(NoteError::MalformedSignatureLine { .. })
        ));
        let short = format!("{TEXT}\n\u{2014} {NAME} AAAA\n");
        assert!(matches!(
            note_verify(&short, NAME, &public),
            Err(NoteError::MalformedSignatureLine { .. })
        ));
    }
}
