//! What an auditor checks with the signed checkpoints ([`super::checkpoint`]): that the log
//! files hold every record each checkpoint was signed over, unchanged ([`check`]); that
//! today's log extends a checkpoint kept from before ([`since`], with an RFC 9162
//! consistency proof); and that one record is in the log, without the log ([`prove`],
//! [`verify_inclusion`]).

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::checkpoint::{self, Checkpoint, CheckpointLine};
use super::{Broken, Verified};
use crate::evidence::PublicKey;
use crate::telemetry::merkle::{self, Hash};

/// Why a log does not stand up to its checkpoints: each case its own, as `audit verify`
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Finding {
    /// The chain itself breaks (an edited, removed or reordered record, a missing file).
    #[error("{0}")]
    Chain(Broken),
    /// The files do not start at record 1: the tree cannot be computed.
    #[error(
        "the first file given starts at record {0}: give every file from the first (oldest first) to check checkpoints"
    )]
    NotFromStart(u64),
    /// A checkpoint whose signature does not verify with any key given (`index` 0: the
    /// checkpoint kept from before, `--since`, whose size is not known).
    #[error(
        "{}: its signature does not verify with the keys given ({why})",
        if *index == 0 { which(*index) } else { format!("checkpoint {index} ({size} records)") }
    )]
    BadSignature {
        index: usize,
        size: u64,
        why: String,
    },
    /// A checkpoint a key verifies, dated outside that key's life (after its retirement,
    /// or in the future).
    #[error(
        "{}: signed, but not accepted: {why}",
        if *index == 0 { which(*index) } else { format!("checkpoint {index} ({size} records)") }
    )]
    OutsideKeyLife {
        index: usize,
        size: u64,
        why: String,
    },
    /// Fewer records than a signed checkpoint says: the tail was cut.
    #[error(
        "truncated: {} was signed over {size} records{}, and the files hold {records}",
        which(*index),
        time.as_ref().map(|t| format!(" at {t}")).unwrap_or_default()
    )]
    Truncated {
        index: usize,
        size: u64,
        time: Option<String>,
        records: u64,
    },
    /// The first `size` records are not those a checkpoint was signed over.
    #[error(
        "replaced or rewritten: the first {size} records are not the ones {} was signed over{} (its root does not match)",
        which(*index),
        time.as_ref().map(|t| format!(" at {t}")).unwrap_or_default()
    )]
    RootMismatch {
        index: usize,
        size: u64,
        time: Option<String>,
    },
    /// Records after the last checkpoint: nothing signed covers them yet.
    #[error(
        "records {first} to {last} are after the last checkpoint ({covered} records): no signature covers them (appended later, or the log is still being written: the next checkpoint comes within checkpoint_seconds; --allow-tail accepts them)"
    )]
    Uncovered { covered: u64, first: u64, last: u64 },
    /// No checkpoint to check against.
    #[error("no checkpoint given")]
    NoCheckpoint,
    /// A checkpoint of another log: its note names another origin than the log's.
    #[error(
        "checkpoint {index} is of another log: its origin is `{origin}`, this log's is `{expected}` (a checkpoint of another deployment signed by the same key proves nothing about this log)"
    )]
    OtherOrigin {
        index: usize,
        origin: String,
        expected: String,
    },
}

/// How a finding names its checkpoint: by its place in the checkpoint file (from 1), or,
/// `index` 0, the one kept from before (`--since`).
fn which(index: usize) -> String {
    match index {
        0 => "the checkpoint kept from before (--since)".to_owned(),
        i => format!("checkpoint {i}"),
    }
}

/// What a log that stands up to its checkpoints covers.
#[derive(Debug, Clone)]
pub struct Covered {
    pub chain: Verified,
    /// Checkpoints verified, and the size of the last.
    pub checkpoints: usize,
    pub covered: u64,
    /// Records after the last checkpoint (accepted with `allow_tail`).
    pub tail: u64,
}

/// The leaf hashes of every record of `files` (oldest first, from record 1), with the
/// chain checked on the way.
pub fn leaves(files: &[PathBuf]) -> Result<(Verified, Vec<Hash>), Finding> {
    let mut leaves = Vec::new();
    let chain = super::verify_with(files, |_, line| {
        leaves.push(merkle::leaf_hash(line.as_bytes()))
    })
    .map_err(Finding::Chain)?;
    if chain.starts_mid_chain {
        return Err(Finding::NotFromStart(chain.first_seq.unwrap_or(0)));
    }
    Ok((chain, leaves))
}

/// Verifies a checkpoint note with any of `keys` and reads it. The key must have been alive
/// at the checkpoint's `time`: not retired before it, and the time not in the future
/// ([`PublicKey::signed_in_lifetime`]).
pub fn open_note(note: &str, keys: &[PublicKey]) -> Result<Checkpoint, NoteRefused> {
    let origin = note
        .split('\n')
        .next()
        .filter(|o| !o.is_empty())
        .ok_or_else(|| NoteRefused::Signature("the note has no origin line".to_owned()))?;
    let mut why = String::from("no key given");
    for key in keys {
        match crate::evidence::note_verify(note, origin, key) {
            Ok(text) => {
                let c = checkpoint::parse_text(&text)
                    .map_err(|e| NoteRefused::Signature(e.to_string()))?;
                checkpoint::in_lifetime(&c, key)
                    .map_err(|e| NoteRefused::Lifetime(e.to_string()))?;
                return Ok(c);
            }
            Err(e) => why = e.to_string(),
        }
    }
    Err(NoteRefused::Signature(why))
}

/// Why a checkpoint note is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteRefused {
    /// No key given verifies it (or it does not read as a checkpoint).
    #[error("{0}")]
    Signature(String),
    /// A key verifies it, but it is dated outside that key's life.
    #[error("{0}")]
    Lifetime(String),
}

impl NoteRefused {
    /// The finding for checkpoint `index` of `size` records (0: the one kept from before).
    fn finding(self, index: usize, size: u64) -> Finding {
        match self {
            NoteRefused::Signature(why) => Finding::BadSignature { index, size, why },
            NoteRefused::Lifetime(why) => Finding::OutsideKeyLife { index, size, why },
        }
    }
}

/// The chain through `files` (from record 1), and the tree's root at each of `sizes` (`None`
/// for a size past the records held), in one pass: the leaves are folded into a
/// [`merkle::Frontier`] as they are read, and a root is taken when the tree reaches a size
/// asked for, so the work is linear in the records and the memory is the frontier (at most 64
/// hashes) and one root per size asked for, not one hash per record. The signed decisions
/// in the log are verified with `keys` on the way.
pub fn roots_at(
    files: &[PathBuf],
    sizes: &[u64],
    keys: &[PublicKey],
) -> Result<(Verified, Vec<Option<Hash>>), Finding> {
    let jwks = crate::evidence::Jwks::new(keys.iter().cloned());
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut roots = vec![None; sizes.len()];
    let mut next = 0;
    let mut frontier = merkle::Frontier::new();
    let mut settle = |frontier: &merkle::Frontier, next: &mut usize| {
        while let Some(&i) = order.get(*next)
            && sizes[i] <= frontier.size()
        {
            if sizes[i] == frontier.size() {
                roots[i] = Some(frontier.root());
            }
            *next += 1;
        }
    };
    settle(&frontier, &mut next);
    let chain = super::verify_with_keys(files, Some(&jwks), |_, line| {
        frontier.push(merkle::leaf_hash(line.as_bytes()));
        settle(&frontier, &mut next);
    })
    .map_err(Finding::Chain)?;
    if chain.starts_mid_chain {
        return Err(Finding::NotFromStart(chain.first_seq.unwrap_or(0)));
    }
    Ok((chain, roots))
}

/// Checks `files` against every checkpoint in `lines`: each verifies with one of `keys` and
/// names the log's origin (`origin`, or when `None` the first checkpoint's: a checkpoint of
/// another log signed by the same key is not this log's), the files hold at least its size of
/// records, and the root of that many is its root. Records after the last checkpoint are
/// refused unless `allow_tail`. Linear in the records ([`roots_at`]); the first checkpoint
/// (in the file's order) that fails is the one named.
pub fn check(
    files: &[PathBuf],
    lines: &[CheckpointLine],
    keys: &[PublicKey],
    allow_tail: bool,
    origin: Option<&str>,
) -> Result<Covered, Finding> {
    if lines.is_empty() {
        return Err(Finding::NoCheckpoint);
    }
    let mut opened = Vec::with_capacity(lines.len());
    let mut origin = origin.map(str::to_owned);
    for (i, line) in lines.iter().enumerate() {
        let index = i + 1;
        let c = open_note(&line.note, keys).map_err(|e| e.finding(index, line.size))?;
        match &origin {
            None => origin = Some(c.origin.clone()),
            Some(expected) if *expected != c.origin => {
                return Err(Finding::OtherOrigin {
                    index,
                    origin: c.origin,
                    expected: expected.clone(),
                });
            }
            Some(_) => {}
        }
        opened.push(c);
    }
    let sizes: Vec<u64> = opened.iter().map(|c| c.size).collect();
    let (chain, roots) = roots_at(files, &sizes, keys)?;
    let records = chain.records;
    for (i, (c, root)) in opened.into_iter().zip(roots).enumerate() {
        let index = i + 1;
        match root {
            None => {
                return Err(Finding::Truncated {
                    index,
                    size: c.size,
                    time: c.time,
                    records,
                });
            }
            Some(root) if root != c.root => {
                return Err(Finding::RootMismatch {
                    index,
                    size: c.size,
                    time: c.time,
                });
            }
            Some(_) => {}
        }
    }
    let covered = sizes.iter().copied().max().unwrap_or(0);
    if covered < records && !allow_tail {
        return Err(Finding::Uncovered {
            covered,
            first: covered + 1,
            last: records,
        });
    }
    Ok(Covered {
        chain,
        checkpoints: lines.len(),
        covered,
        tail: records - covered,
    })
}

/// A checkpoint kept from before, or a checkpoint file's line: the signed note in either.
pub fn note_of(kept: &str) -> String {
    match serde_json::from_str::<CheckpointLine>(kept.trim()) {
        Ok(line) => line.note,
        Err(_) => kept.to_owned(),
    }
}

/// What [`since`] found: today's log extends the old checkpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Extends {
    pub old_size: u64,
    pub new_size: u64,
    /// The RFC 9162 consistency proof from the old tree to today's (base64 hashes), checked.
    pub proof: Vec<String>,
}

/// Checks that today's log (`files`, from record 1) extends the kept checkpoint `old`: the
/// first `old.size` records have `old`'s root, and a consistency proof from it to today's
/// tree verifies.
pub fn since(files: &[PathBuf], old: &str, keys: &[PublicKey]) -> Result<Extends, Finding> {
    let old = open_note(&note_of(old), keys).map_err(|e| e.finding(0, 0))?;
    let (_, leaves) = leaves(files)?;
    let records = leaves.len() as u64;
    if old.size > records {
        return Err(Finding::Truncated {
            index: 0,
            size: old.size,
            time: old.time,
            records,
        });
    }
    let new_root = merkle::root(&leaves);
    let proof = merkle::consistency_proof(&leaves, old.size, records);
    if merkle::verify_consistency(old.size, records, &old.root, &new_root, &proof).is_err() {
        return Err(Finding::RootMismatch {
            index: 0,
            size: old.size,
            time: old.time,
        });
    }
    Ok(Extends {
        old_size: old.size,
        new_size: records,
        proof: proof.iter().map(|h| STANDARD.encode(h)).collect(),
    })
}

/// One record and the proof that it is in the tree a signed checkpoint states: all a
/// supervisor needs to check it without the log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InclusionProof {
    /// The record's line, exactly as in the log.
    pub record: String,
    /// Its position in the tree (its `seq` − 1).
    pub index: u64,
    pub tree_size: u64,
    /// RFC 9162 inclusion path, base64 hashes.
    pub proof: Vec<String>,
    /// The signed checkpoint of `tree_size` records.
    pub checkpoint: String,
}

/// Why no inclusion proof can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProveError {
    /// The log does not stand up (its chain breaks, it starts mid-chain, a checkpoint
    /// covers more records than it has).
    #[error("{0}")]
    Log(#[from] Finding),
    #[error("record {0} is not in the files given")]
    NotInFiles(u64),
    #[error("no checkpoint covers record {0} yet")]
    NotCovered(u64),
}

/// Why an inclusion proof does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InclusionError {
    #[error("{0}")]
    Checkpoint(#[from] NoteRefused),
    #[error("the proof is for a tree of {proof} records, the checkpoint states {checkpoint}")]
    SizeMismatch { proof: u64, checkpoint: u64 },
    #[error("the record's position {index} is past the signed tree of {size} records")]
    PastTree { index: u64, size: u64 },
    #[error("the record is not JSON: {0}")]
    NotJson(String),
    #[error("the record's seq is not {0} (its position in the tree plus one)")]
    WrongSeq(u64),
    #[error("`{0}` is not a base64 SHA-256 hash")]
    NotAHash(String),
    #[error("the record is not in the signed tree: {0}")]
    NotInTree(#[source] merkle::ProofError),
}

/// The inclusion proof of record `seq` against the first checkpoint in `lines` that covers it.
pub fn prove(
    files: &[PathBuf],
    lines: &[CheckpointLine],
    seq: u64,
) -> Result<InclusionProof, ProveError> {
    let mut record = None;
    let mut leaves = Vec::new();
    let chain = super::verify_with(files, |s, line| {
        leaves.push(merkle::leaf_hash(line.as_bytes()));
        if s == seq {
            record = Some(line.to_owned());
        }
    })
    .map_err(Finding::Chain)?;
    if chain.starts_mid_chain {
        return Err(Finding::NotFromStart(chain.first_seq.unwrap_or(0)).into());
    }
    let record = record.ok_or(ProveError::NotInFiles(seq))?;
    let (i, line) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.size >= seq)
        .ok_or(ProveError::NotCovered(seq))?;
    if line.size > leaves.len() as u64 {
        return Err(Finding::Truncated {
            index: i + 1,
            size: line.size,
            time: Some(line.time.clone()),
            records: leaves.len() as u64,
        }
        .into());
    }
    let tree = &leaves[..line.size as usize];
    let proof = merkle::inclusion_proof(tree, seq - 1, line.size);
    Ok(InclusionProof {
        record,
        index: seq - 1,
        tree_size: line.size,
        proof: proof.iter().map(|h| STANDARD.encode(h)).collect(),
        checkpoint: line.note.clone(),
    })
}

/// Checks an inclusion proof with the public keys only: the checkpoint's signature, its size,
/// the record's `seq`, and the path from the record's leaf to the signed root.
pub fn verify_inclusion(
    p: &InclusionProof,
    keys: &[PublicKey],
) -> Result<Checkpoint, InclusionError> {
    let c = open_note(&p.checkpoint, keys)?;
    if c.size != p.tree_size {
        return Err(InclusionError::SizeMismatch {
            proof: p.tree_size,
            checkpoint: c.size,
        });
    }
    // Before `index + 1` is computed: a position in the tree is below its size.
    if p.index >= p.tree_size {
        return Err(InclusionError::PastTree {
            index: p.index,
            size: p.tree_size,
        });
    }
    let record: serde_json::Value =
        serde_json::from_str(&p.record).map_err(|e| InclusionError::NotJson(e.to_string()))?;
    if record["seq"].as_u64() != Some(p.index + 1) {
        return Err(InclusionError::WrongSeq(p.index + 1));
    }
    let proof: Vec<Hash> = p
        .proof
        .iter()
        .map(|h| {
            STANDARD
                .decode(h)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| InclusionError::NotAHash(h.clone()))
        })
        .collect::<Result<_, _>>()?;
    merkle::verify_inclusion(
        p.index,
        p.tree_size,
        &merkle::leaf_hash(p.record.as_bytes()),
        &proof,
        &c.root,
    )
    .map_err(InclusionError::NotInTree)?;
    Ok(c)
}
