//! Writes an audit log of N records with a signed checkpoint every 1,000 (as `serve` does
//! by default), for `benches/audit-verify.sh`: `audit_log_gen N DIR`. Records are shaped as
//! the check endpoint's (about 420 bytes each); the checkpoints are real C2SP signed notes of
//! the log's RFC 9162 tree, signed with a fresh Ed25519 key whose JWKS is written beside them.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use psp_service::evidence::{Alg, Jwks, SigningKey, note_sign};
use psp_service::telemetry::audit::GENESIS;
use psp_service::telemetry::audit::checkpoint::{CheckpointLine, note_text};
use psp_service::telemetry::merkle::{Frontier, leaf_hash};

const ORIGIN: &str = "bench.example/psp-gateway/audit";
const EVERY: u64 = 1000;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(n), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: audit_log_gen N DIR");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("N is a number");
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let key = SigningKey::from_pem(&SigningKey::generate_pem(Alg::EdDsa)).expect("a key");
    std::fs::write(dir.join("jwks.json"), Jwks::new([key.public()]).to_json())?;
    let mut log =
        BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join("audit.jsonl"))?);
    let mut checkpoints = BufWriter::new(std::fs::File::create(dir.join("checkpoints.jsonl"))?);
    let mut frontier = Frontier::new();
    let mut prev = GENESIS.to_owned();
    let time = "2026-11-01T00:00:00Z";
    for seq in 1..=n {
        let line = format!(
            "{{\"seq\":{seq},\"prev\":\"{prev}\",\"auth_number\":\"PSDXX-BENCH-{:06}\",\"caller\":\"bank\",\"evidence\":\"leaf: OCSP good, producedAt 2026-11-29T09:59:00Z\",\"fi_reference_id\":\"R{seq}\",\"fingerprint\":\"{}\",\"jurisdiction\":\"XX\",\"message\":\"check\",\"not_expired\":true,\"not_revoked\":true,\"request_id\":\"req-{seq:012}\",\"source\":\"127.0.0.1\",\"time\":\"{time}\",\"valid_qtsp\":true,\"valid_signature\":true}}",
            seq % 1000,
            "ab".repeat(32),
        );
        prev = psp_cert::hex::lower(&psp_cert::hex::sha256(line.as_bytes()));
        frontier.push(leaf_hash(line.as_bytes()));
        log.write_all(line.as_bytes())?;
        log.write_all(b"\n")?;
        if seq % EVERY == 0 || seq == n {
            let text = note_text(ORIGIN, seq, &frontier.root(), time);
            let cp = CheckpointLine {
                size: seq,
                time: time.to_owned(),
                chain_head: prev.clone(),
                frontier: frontier.to_hex(),
                note: note_sign(&key, ORIGIN, &text).expect("sign"),
            };
            serde_json::to_writer(&mut checkpoints, &cp)?;
            checkpoints.write_all(b"\n")?;
        }
    }
    log.flush()?;
    checkpoints.flush()?;
    Ok(())
}
