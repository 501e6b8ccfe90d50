#!/usr/bin/env python3
"""Verifies psp-gateway's evidence signatures with code no one here wrote.

    verify.py jws JWKS_FILE PAYLOAD_FILE JWS_STRING [QUESTION_JSON]
        A detached JWS with an unencoded payload (RFC 7515 appendix F + RFC 7797), with
        jwcrypto. Every key of the JWKS must have its RFC 7638 thumbprint as its kid. The
        header's `psp_question` (the question the answer answers) must be critical; with
        QUESTION_JSON, each of its members must be the header's.

    verify.py compact JWKS_FILE JWS_STRING
        A compact JWS with its payload (a signed gateway decision), with jwcrypto; the
        payload is printed on stderr once it verifies.

    Both hold a key to its life: a JWK with a `retired` member (RFC 3339) verifies nothing
    whose `iat` is after it, and no `iat` may be more than 300 s ahead of this clock.

    verify.py root SIZE AUDIT_FILE...
        The RFC 9162 Merkle tree root (base64) of the first SIZE records of the audit files
        (oldest first), with hashlib alone: leaf = SHA-256(0x00 || line without its end),
        node = SHA-256(0x01 || left || right). Prints the root, not `valid`.

    verify.py note PUBKEY_PEM NAME NOTE_FILE [RETIRED]
        A C2SP signed note (https://c2sp.org/signed-note) with pyca/cryptography only:
        Ed25519 (type 0x01) or ECDSA P-256 (type 0x02, as transparency-dev/witness). With
        RETIRED (RFC 3339, the key's retirement), the checkpoint's `time` line must not be
        after it.

Prints `valid` and exits 0, or prints `refused: <why>` and exits 1. Usage errors exit 2.
The packages are pinned in scripts/evidence/requirements.txt (scripts/test installs them
into target/evidence-venv).
"""

import base64
import datetime
import hashlib
import json
import sys
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from jwcrypto import jwk, jws

# The only algorithms evidence is signed with; jwcrypto's default list also allows HS256,
# RS256 and more, which an algorithm-substitution token would otherwise be tried under.
ALLOWED_ALGS = ["ES256", "EdDSA"]

# c2sp.org/signed-note: verifiers "MUST accept at least up to 16 signatures".
MAX_NOTE_SIGNATURES = 16

# How far ahead of this clock a signature's time may be.
MAX_CLOCK_SKEW_SECS = 300

# psp-gateway's header parameter naming the question a signed answer answers: jwcrypto
# refuses a critical parameter it was not told of, as it must.
PSP_QUESTION = {"psp_question": jws.JWSEHeaderParameter("The question answered", True, True, None)}


def rfc3339(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def check_lifetime(jwks_file, kid, iat):
    """The key `kid` of the raw JWK set must have been alive at `iat`. Without a `kid`,
    jwcrypto tries every key of the set, so which key's life applies is unknown: refused, as
    is an `iat` that is not an integer."""
    if not isinstance(kid, str):
        raise Refused("the header names no kid: which key's life applies cannot be told")
    if not isinstance(iat, int) or isinstance(iat, bool):
        raise Refused("the header has no integer iat")
    with open(jwks_file, encoding="utf-8") as f:
        keys = json.load(f).get("keys", [])
    if sum(1 for key in keys if key.get("kid") == kid) > 1:
        raise Refused(f"the JWK set lists key {kid} more than once")
    for key in keys:
        if key.get("kid") == kid and "retired" in key:
            if iat > rfc3339(key["retired"]):
                raise Refused(f"signed at {iat}, after key {kid} was retired at {key['retired']}")
    if iat > time.time() + MAX_CLOCK_SKEW_SECS:
        raise Refused(f"signed at {iat}, in the future")


class Refused(Exception):
    """The evidence does not verify; the message says why."""


def verify_jws(jwks_file, payload_file, token, question=None):
    keyset = load_keyset(jwks_file)
    with open(payload_file, "rb") as f:
        payload = f.read()
    token_jws = jws.JWS(header_registry=PSP_QUESTION)
    token_jws.allowed_algs = ALLOWED_ALGS
    try:
        token_jws.deserialize(token)
        header = token_jws.jose_header
    except Exception as e:  # jwcrypto raises several types for a malformed token.
        raise Refused(f"{type(e).__name__}: {e}") from e
    # RFC 7797 section 6: only an unencoded payload that the header marks critical.
    if header.get("b64") is not False or "b64" not in header.get("crit", []):
        raise Refused("the header is not b64:false with crit [b64]")
    if "psp_question" in header and "psp_question" not in header.get("crit", []):
        raise Refused("psp_question is not listed in crit")
    try:
        token_jws.verify(keyset, detached_payload=payload)
    except Exception as e:
        log = "; ".join(token_jws.verifylog or [])
        raise Refused(f"{type(e).__name__}: {e} [{log}]") from e
    check_lifetime(jwks_file, header.get("kid"), header.get("iat"))
    if "psp_question" in header and not isinstance(header["psp_question"], dict):
        raise Refused("psp_question is not an object")
    if question is not None:
        asked = header.get("psp_question") or {}
        for member, value in json.loads(question).items():
            if asked.get(member) != value:
                raise Refused(f"the answer is about {member} {asked.get(member)!r}, not {value!r}")


def load_keyset(jwks_file):
    with open(jwks_file, encoding="utf-8") as f:
        try:
            keyset = jwk.JWKSet.from_json(f.read())
        except Exception as e:  # jwcrypto raises several types for a malformed set.
            raise Refused(f"the JWK set: {type(e).__name__}: {e}") from e
    for key in keyset:
        kid = key.get("kid")
        if kid != key.thumbprint():
            raise Refused(f"kid {kid!r} is not the key's RFC 7638 thumbprint {key.thumbprint()!r}")
    return keyset


def verify_compact(jwks_file, token):
    keyset = load_keyset(jwks_file)
    token_jws = jws.JWS()
    token_jws.allowed_algs = ALLOWED_ALGS
    try:
        token_jws.deserialize(token)
        token_jws.verify(keyset)
    except Exception as e:
        log = "; ".join(token_jws.verifylog or [])
        raise Refused(f"{type(e).__name__}: {e} [{log}]") from e
    header = token_jws.jose_header
    if header.get("typ") != "psp-decision+json":
        raise Refused(f"typ is {header.get('typ')!r}, not psp-decision+json")
    check_lifetime(jwks_file, header.get("kid"), header.get("iat"))
    print(token_jws.payload.decode("utf-8"), file=sys.stderr)


def note_key_id(name, public):
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return hashlib.sha256(name.encode() + b"\n" + b"\x01" + raw).digest()[:4]
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).digest()[:4]


def signature_verifies(public, text, signature):
    try:
        if isinstance(public, ed25519.Ed25519PublicKey):
            public.verify(signature, text)
        else:
            public.verify(signature, text, ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


def verify_note(pem_file, name, note_file, retired=None):
    with open(pem_file, "rb") as f:
        public = serialization.load_pem_public_key(f.read())
    if isinstance(public, ec.EllipticCurvePublicKey):
        if not isinstance(public.curve, ec.SECP256R1):
            raise Refused(f"an ECDSA key on {public.curve.name}, not P-256")
    elif not isinstance(public, ed25519.Ed25519PublicKey):
        raise Refused(f"a {type(public).__name__}, neither Ed25519 nor ECDSA P-256")
    with open(note_file, "rb") as f:
        note = f.read()
    try:
        note.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused("the note is not UTF-8") from e
    if any(b < 0x20 and b != 0x0A for b in note):
        raise Refused("the note contains a control character")
    if not note.endswith(b"\n"):
        raise Refused("the note does not end in a newline")
    split = note.rfind(b"\n\n")
    if split < 0:
        raise Refused("the note has no blank line before its signatures")
    text, signatures = note[: split + 1], note[split + 2 :]
    lines = signatures[:-1].split(b"\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise Refused(f"more than {MAX_NOTE_SIGNATURES} signatures")
    key_id = note_key_id(name, public)
    verified = False
    for line in lines:
        prefix = "\u2014 ".encode()
        if not line.startswith(prefix) or line.count(b" ") != 2:
            raise Refused(f"malformed signature line {line!r}")
        line_name, blob = line[len(prefix) :].split(b" ")
        try:
            blob = base64.b64decode(blob, validate=True)
        except ValueError as e:
            raise Refused(f"the signature of line {line!r} is not base64") from e
        if line_name.decode() != name or blob[:4] != key_id:
            continue
        if not signature_verifies(public, text, blob[4:]):
            raise Refused(f"the signature of {name} ({key_id.hex()}) does not verify")
        verified = True
    if not verified:
        raise Refused(f"no signature from {name} with key ID {key_id.hex()}")
    times = [l[5:] for l in text.decode().split("\n") if l.startswith("time ")]
    if len(times) > 1:
        raise Refused("the checkpoint has more than one time line")
    if retired is not None:
        if not times:
            raise Refused("the key is retired and the checkpoint names no time")
        if rfc3339(times[0]) > rfc3339(retired):
            raise Refused(f"the checkpoint is dated {times[0]}, after the key was retired at {retired}")
    if times and rfc3339(times[0]) > time.time() + MAX_CLOCK_SKEW_SECS:
        raise Refused(f"the checkpoint is dated {times[0]}, in the future")


def merkle_root(leaves):
    """RFC 9162 section 2.1.1 MTH, on leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + merkle_root(leaves[:k]) + merkle_root(leaves[k:])).digest()


def print_root(size, files):
    leaves = []
    for name in files:
        with open(name, "rb") as f:
            # The bytes hashed are the line up to its LF (a CR is part of them).
            for line in f.read().split(b"\n"):
                if line:
                    leaves.append(hashlib.sha256(b"\x00" + line).digest())
    if size > len(leaves):
        print(f"refused: the files hold {len(leaves)} records, fewer than {size}")
        return 1
    print(base64.b64encode(merkle_root(leaves[:size])).decode())
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "root":
        return print_root(int(argv[2]), argv[3:])
    if len(argv) in (5, 6) and argv[1] == "jws":
        check = lambda: verify_jws(*argv[2:])
    elif len(argv) == 4 and argv[1] == "compact":
        check = lambda: verify_compact(argv[2], argv[3])
    elif len(argv) in (5, 6) and argv[1] == "note":
        check = lambda: verify_note(*argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        check()
    except Refused as e:
        print(f"refused: {e}")
        return 1
    print("valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
