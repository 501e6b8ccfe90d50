//! Merkle tree hashing as RFC 9162 (Certificate Transparency 2.0) §2.1 defines it, with
//! SHA-256: the tree hash of a list of leaves, inclusion proofs (§2.1.3) and consistency
//! proofs (§2.1.4), and a [`Frontier`] that keeps a growing tree's root in O(log n) space.
//!
//! The audit log is a list of leaves (one per record): a root published now and a
//! consistency proof later show that the log was only appended to in between, and an
//! inclusion proof shows that one record is in it, without handing over the other records.
//!
//! Everything here is a pure function of hashes and sizes; reading the records is the
//! caller's work.
//!
//! ```text
//! MTH({})       = SHA-256()
//! MTH({d(0)})   = SHA-256(0x00 || d(0))
//! MTH(D_n)      = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))
//!                 where k is the largest power of two smaller than n
//! ```

use ring::digest::{Context, SHA256};

/// A SHA-256 value: a leaf hash, an interior node hash or a root.
pub type Hash = [u8; 32];

/// RFC 9162 §2.1.1: the byte put before a leaf's data, so that a leaf can never be taken
/// for an interior node (a second-preimage attack on the tree).
const LEAF_PREFIX: u8 = 0x00;
/// RFC 9162 §2.1.1: the byte put before the two children of an interior node.
const NODE_PREFIX: u8 = 0x01;

/// The hash of one leaf: `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> Hash {
    digest(&[&[LEAF_PREFIX], data])
}

/// The hash of an interior node: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    digest(&[&[NODE_PREFIX], left, right])
}

/// The root of the empty tree: `SHA-256()` of no bytes.
pub fn empty_root() -> Hash {
    digest(&[])
}

fn digest(parts: &[&[u8]]) -> Hash {
    let mut ctx = Context::new(&SHA256);
    for part in parts {
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    // A SHA-256 digest is always 32 bytes.
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The largest power of two smaller than `n` (the RFC's `k`); `n` is at least 2.
fn split(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// The Merkle Tree Hash (RFC 9162 §2.1.1) of the leaves whose hashes are `leaf_hashes`.
///
/// Recursive as the RFC writes it: the depth is the tree's height (at most 64), and each
/// node is hashed once.
pub fn root(leaf_hashes: &[Hash]) -> Hash {
    match leaf_hashes {
        [] => empty_root(),
        [one] => *one,
        _ => {
            let k = split(leaf_hashes.len());
            node_hash(&root(&leaf_hashes[..k]), &root(&leaf_hashes[k..]))
        }
    }
}

/// The inclusion proof of leaf `index` in the tree of the first `size` leaves of
/// `leaf_hashes`: RFC 9162 §2.1.3.1 `PATH(m, D_n)`. Empty when `index >= size` or when
/// `size` is beyond the leaves given (no such proof exists).
pub fn inclusion_proof(leaf_hashes: &[Hash], index: u64, size: u64) -> Vec<Hash> {
    let (Ok(index), Ok(size)) = (usize::try_from(index), usize::try_from(size)) else {
        return Vec::new();
    };
    if index >= size || size > leaf_hashes.len() {
        return Vec::new();
    }
    let mut proof = Vec::new();
    path(index, &leaf_hashes[..size], &mut proof);
    proof
}

/// `PATH(m, D_n)`: the siblings from the leaf up, so the innermost call pushes first.
fn path(m: usize, leaves: &[Hash], out: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &leaves[..k], out);
        out.push(root(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], out);
        out.push(root(&leaves[..k]));
    }
}

/// The consistency proof between the tree of the first `m` leaves and the tree of the first
/// `n`: RFC 9162 §2.1.4.1 `PROOF(m, D_n) = SUBPROOF(m, D_n, true)`, defined for
/// `0 < m < n`. Empty otherwise (`m == 0`, `m == n`: nothing to prove; `m > n` or `n`
/// beyond the leaves given: no such proof).
pub fn consistency_proof(leaf_hashes: &[Hash], m: u64, n: u64) -> Vec<Hash> {
    let (Ok(m), Ok(n)) = (usize::try_from(m), usize::try_from(n)) else {
        return Vec::new();
    };
    if m == 0 || m >= n || n > leaf_hashes.len() {
        return Vec::new();
    }
    let mut proof = Vec::new();
    subproof(m, &leaf_hashes[..n], true, &mut proof);
    proof
}

/// `SUBPROOF(m, D_n, b)`: `b` says whether the subtree of the first `m` leaves is the
/// tree the proof started from (whose root the verifier has already).
fn subproof(m: usize, leaves: &[Hash], b: bool, out: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !b {
            out.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &leaves[..k], b, out);
        out.push(root(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, out);
        out.push(root(&leaves[..k]));
    }
}

/// Why a proof does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("leaf index {index} is not in a tree of {size} leaves")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("the earlier tree size {m} is larger than the later one {n}")]
    SizesOutOfOrder { m: u64, n: u64 },
    #[error("the proof is empty where the sizes need at least one hash")]
    EmptyProof,
    #[error("the proof has {len} hashes where the sizes need none")]
    UnexpectedProof { len: usize },
    #[error("the proof has more hashes than a tree of this size has levels")]
    ProofTooLong,
    #[error("the proof has fewer hashes than the path to the root needs")]
    ProofTooShort,
    #[error("the root computed from the proof is not the root given")]
    RootMismatch,
    #[error("the earlier root computed from the proof is not the earlier root given")]
    FirstRootMismatch,
    #[error("the later root computed from the proof is not the later root given")]
    SecondRootMismatch,
}

/// Checks that `proof` proves the leaf `leaf_hash` at `index` in the tree of `size` leaves
/// whose root is `root`: the algorithm of RFC 9162 §2.1.3.2, step by step.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf_hash: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    // 1. leaf_index must be below tree_size.
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    // 2. fn = leaf_index, sn = tree_size - 1; 3. r = hash.
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf_hash;
    // 4. For each p in the path:
    for p in proof {
        // a. sn == 0: the path is longer than the tree is high.
        if sn == 0 {
            return Err(ProofError::ProofTooLong);
        }
        // b. A right child (or the last node of its level): p is its left sibling.
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        // c. Up one level.
        fn_ >>= 1;
        sn >>= 1;
    }
    // 5. sn must be 0 (the path reached the root), and r the root.
    if sn != 0 {
        return Err(ProofError::ProofTooShort);
    }
    if r != *root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// Checks that `proof` proves the tree of `n` leaves with root `root_n` extends the tree of
/// `m` leaves with root `root_m`: the algorithm of RFC 9162 §2.1.4.2, step by step, for
/// `0 < m < n`.
///
/// The sizes the RFC defines no proof for (§2.1.4.1 defines `PROOF(m, D_n)` for
/// `0 < m < n` only) take an empty proof and are decided by the roots alone: `m == n` is
/// consistent when the two roots are the same; `m == 0` when `root_m` is the empty tree's
/// root (every tree extends the empty one). transparency-dev/merkle accepts any `root_m`
/// for `m == 0`; checking it costs nothing and refuses a made-up earlier root.
pub fn verify_consistency(
    m: u64,
    n: u64,
    root_m: &Hash,
    root_n: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if m > n {
        return Err(ProofError::SizesOutOfOrder { m, n });
    }
    if m == 0 || m == n {
        if !proof.is_empty() {
            return Err(ProofError::UnexpectedProof { len: proof.len() });
        }
        if m == 0 && *root_m != empty_root() {
            return Err(ProofError::FirstRootMismatch);
        }
        if m == n && root_m != root_n {
            return Err(ProofError::RootMismatch);
        }
        return Ok(());
    }
    // 1. An empty path fails.
    let Some((first, rest)) = proof.split_first() else {
        return Err(ProofError::EmptyProof);
    };
    // 2. When m is a power of two, the earlier tree is a whole subtree: its root is the
    // path's first value.
    let (start, rest) = if m.is_power_of_two() {
        (root_m, proof)
    } else {
        (first, rest)
    };
    // 3. fn = first - 1, sn = second - 1.
    let (mut fn_, mut sn) = (m - 1, n - 1);
    // 4. Shift past the levels where the earlier tree's last node is a right child.
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    // 5. fr = sr = the first value.
    let (mut fr, mut sr) = (*start, *start);
    // 6. Each next value c.
    for c in rest {
        if sn == 0 {
            return Err(ProofError::ProofTooLong);
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    // 7. Both roots, and sn == 0.
    if sn != 0 {
        return Err(ProofError::ProofTooShort);
    }
    if fr != *root_m {
        return Err(ProofError::FirstRootMismatch);
    }
    if sr != *root_n {
        return Err(ProofError::SecondRootMismatch);
    }
    Ok(())
}

/// A tree's right edge: the roots of its perfect subtrees, largest (leftmost) first, one per
/// bit set in its size (a compact range from 0, as transparency-dev/merkle's `compact`
/// calls it). Enough to append leaves and compute the root without the earlier leaves, so
/// the audit log keeps its tree across restarts by storing this instead of rereading every
/// record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frontier {
    size: u64,
    /// `size.count_ones()` hashes, largest subtree first.
    hashes: Vec<Hash>,
}

/// Why stored frontier parts are not a frontier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontierError {
    #[error(
        "a tree of {size} leaves has {expected} perfect subtrees (one per bit set in its size), not {got}"
    )]
    WrongCount {
        size: u64,
        expected: u32,
        got: usize,
    },
    #[error("hash {index} is not 64 lowercase hex digits")]
    NotHex { index: usize },
}

impl Frontier {
    /// The empty tree.
    pub fn new() -> Frontier {
        Frontier::default()
    }

    /// A frontier from its stored parts: `hashes` must hold one hash per bit set in `size`,
    /// largest subtree first.
    pub fn from_parts(size: u64, hashes: Vec<Hash>) -> Result<Frontier, FrontierError> {
        let expected = size.count_ones();
        if hashes.len() != expected as usize {
            return Err(FrontierError::WrongCount {
                size,
                expected,
                got: hashes.len(),
            });
        }
        Ok(Frontier { size, hashes })
    }

    /// A frontier from `size` and its hashes as lowercase hex ([`Frontier::to_hex`]).
    pub fn from_hex(size: u64, hashes: &[String]) -> Result<Frontier, FrontierError> {
        let parsed = hashes
            .iter()
            .enumerate()
            .map(|(index, h)| decode_hash(h).ok_or(FrontierError::NotHex { index }))
            .collect::<Result<Vec<_>, _>>()?;
        Frontier::from_parts(size, parsed)
    }

    /// The hashes as lowercase hex, largest subtree first (with [`Frontier::size`], what to
    /// store).
    pub fn to_hex(&self) -> Vec<String> {
        self.hashes.iter().map(|h| crate::hex::lower(h)).collect()
    }

    /// The hashes, largest subtree first.
    pub fn hashes(&self) -> &[Hash] {
        &self.hashes
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one leaf: the new leaf merges with each subtree of its own size to its left,
    /// as adding one to the size carries through its trailing ones.
    pub fn push(&mut self, leaf_hash: Hash) {
        let mut node = leaf_hash;
        let mut carry = self.size;
        while carry & 1 == 1 {
            // One hash per bit set: a set bit has its hash on the stack.
            let Some(left) = self.hashes.pop() else {
                break;
            };
            node = node_hash(&left, &node);
            carry >>= 1;
        }
        self.hashes.push(node);
        self.size += 1;
    }

    /// The tree's root: the subtrees folded from the right, which is MTH's split at the
    /// largest power of two, applied again to what remains.
    pub fn root(&self) -> Hash {
        let mut it = self.hashes.iter().rev();
        let Some(last) = it.next() else {
            return empty_root();
        };
        it.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// 64 lowercase hex digits as a hash.
fn decode_hash(text: &str) -> Option<Hash> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(text: &str) -> Hash {
        decode_hash(text).expect("a test vector is 64 hex digits")
    }

    fn bytes(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
            .collect()
    }

    // The test vectors of transparency-dev/merkle (formerly certificate-transparency-go's
    // merkle package), testonly/constants.go (LeafInputs, RootHashes) and
    // proof/verify_test.go (inclusionProofs, consistencyProofs): the values only.
    const LEAVES: [&str; 8] = [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ];
    /// Roots of the trees of the first 1..=8 leaves.
    const ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];
    /// (leaf index, tree size, proof): the vectors' leaf numbers are 1-based.
    const INCLUSION: [(u64, u64, &[&str]); 5] = [
        (0, 1, &[]),
        (
            0,
            8,
            &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ],
        ),
        (
            5,
            8,
            &[
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ],
        ),
        (
            2,
            3,
            &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
        ),
        (
            1,
            5,
            &[
                "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ],
        ),
    ];
    /// (earlier size, later size, proof).
    const CONSISTENCY: [(u64, u64, &[&str]); 5] = [
        (1, 1, &[]),
        (
            1,
            8,
            &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ],
        ),
        (
            6,
            8,
            &[
                "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ],
        ),
        (
            2,
            5,
            &[
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ],
        ),
        (
            6,
            7,
            &[
                "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ],
        ),
    ];

    fn vector_leaves() -> Vec<Hash> {
        LEAVES.iter().map(|l| leaf_hash(&bytes(l))).collect()
    }

    fn hashes(list: &[&str]) -> Vec<Hash> {
        list.iter().map(|s| h(s)).collect()
    }

    /// Leaves 0..n, each the hash of its index.
    fn generated(n: usize) -> Vec<Hash> {
        (0..n as u64).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn the_empty_tree_and_the_published_roots_for_sizes_one_to_eight() {
        assert_eq!(
            crate::hex::lower(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(root(&[]), empty_root());
        let leaves = vector_leaves();
        for (n, want) in ROOTS.iter().enumerate() {
            assert_eq!(root(&leaves[..=n]), h(want), "size {}", n + 1);
        }
    }

    #[test]
    fn the_published_inclusion_proofs_are_generated_and_verify() {
        let leaves = vector_leaves();
        for (index, size, proof) in INCLUSION {
            let want = hashes(proof);
            assert_eq!(
                inclusion_proof(&leaves, index, size),
                want,
                "{index} in {size}"
            );
            let root_n = h(ROOTS[size as usize - 1]);
            verify_inclusion(index, size, &leaves[index as usize], &want, &root_n)
                .unwrap_or_else(|e| panic!("{index} in {size}: {e}"));
        }
    }

    #[test]
    fn the_published_consistency_proofs_are_generated_and_verify() {
        let leaves = vector_leaves();
        for (m, n, proof) in CONSISTENCY {
            let want = hashes(proof);
            assert_eq!(consistency_proof(&leaves, m, n), want, "{m} to {n}");
            let (root_m, root_n) = (h(ROOTS[m as usize - 1]), h(ROOTS[n as usize - 1]));
            verify_consistency(m, n, &root_m, &root_n, &want)
                .unwrap_or_else(|e| panic!("{m} to {n}: {e}"));
        }
    }

    #[test]
    fn the_sizes_without_a_proof_are_decided_by_the_roots() {
        let leaves = generated(5);
        let (r0, r3, r5) = (empty_root(), root(&leaves[..3]), root(&leaves));
        let some = [h(ROOTS[0])];
        // m == 0: every tree extends the empty one, with an empty proof and the empty root.
        assert_eq!(verify_consistency(0, 0, &r0, &r0, &[]), Ok(()));
        assert_eq!(verify_consistency(0, 5, &r0, &r5, &[]), Ok(()));
        assert_eq!(
            verify_consistency(0, 5, &r3, &r5, &[]),
            Err(ProofError::FirstRootMismatch)
        );
        assert_eq!(
            verify_consistency(0, 5, &r0, &r5, &some),
            Err(ProofError::UnexpectedProof { len: 1 })
        );
        // m == n: the same root, with an empty proof.
        assert_eq!(verify_consistency(5, 5, &r5, &r5, &[]), Ok(()));
        assert_eq!(
            verify_consistency(5, 5, &r3, &r5, &[]),
            Err(ProofError::RootMismatch)
        );
        assert_eq!(
            verify_consistency(5, 5, &r5, &r5, &some),
            Err(ProofError::UnexpectedProof { len: 1 })
        );
        // A smaller later tree, an empty proof between different sizes.
        assert_eq!(
            verify_consistency(5, 3, &r5, &r3, &[]),
            Err(ProofError::SizesOutOfOrder { m: 5, n: 3 })
        );
        assert_eq!(
            verify_consistency(3, 5, &r3, &r5, &[]),
            Err(ProofError::EmptyProof)
        );
        // No leaf is in the empty tree, nor past the end.
        assert!(verify_inclusion(0, 0, &leaves[0], &[], &r0).is_err());
        assert!(verify_inclusion(5, 5, &leaves[0], &[], &r5).is_err());
    }

    /// The bits flipped in each hash of a proof: the first and last of the hash and two
    /// between (every bit of every proof up to 64 leaves is millions of hashes for no more
    /// assurance: any change to a hash changes the root).
    const FLIPPED_BITS: [usize; 4] = [0, 3, 100, 255];

    /// Every way of spoiling a good inclusion proof that a tampered log could try: each bit
    /// of each hash flipped, a hash left off or added, another index, a tree of another
    /// height (twice or half the size, as transparency-dev/merkle's proof/verify_test.go
    /// does: a size one more or less can keep the path's shape, and with it the same root).
    fn spoiled_inclusions(
        index: u64,
        size: u64,
        proof: &[Hash],
    ) -> Vec<(String, u64, u64, Vec<Hash>)> {
        let mut out = Vec::new();
        for i in 0..proof.len() {
            for bit in FLIPPED_BITS {
                let mut bad = proof.to_vec();
                bad[i][bit / 8] ^= 1 << (bit % 8);
                out.push((format!("bit {bit} of hash {i}"), index, size, bad));
            }
        }
        if let Some((_, short)) = proof.split_last() {
            out.push(("one hash short".into(), index, size, short.to_vec()));
        }
        let mut long = proof.to_vec();
        long.push(empty_root());
        out.push(("one hash long".into(), index, size, long));
        for wrong in [index.wrapping_sub(1), index + 1, index ^ 2, size] {
            if wrong != index {
                out.push((format!("index {wrong}"), wrong, size, proof.to_vec()));
            }
        }
        for wrong in [size * 2, size / 2] {
            out.push((format!("size {wrong}"), index, wrong, proof.to_vec()));
        }
        out
    }

    #[test]
    fn every_inclusion_proof_up_to_64_leaves_verifies_and_every_spoiled_one_fails() {
        let leaves = generated(64);
        for size in 1..=64u64 {
            let root_n = root(&leaves[..size as usize]);
            for index in 0..size {
                let leaf = leaves[index as usize];
                let proof = inclusion_proof(&leaves, index, size);
                verify_inclusion(index, size, &leaf, &proof, &root_n)
                    .unwrap_or_else(|e| panic!("{index} in {size}: {e}"));
                for (what, i, s, bad) in spoiled_inclusions(index, size, &proof) {
                    assert!(
                        verify_inclusion(i, s, &leaf, &bad, &root_n).is_err(),
                        "{index} in {size}: {what} verified"
                    );
                }
                let mut other = leaf;
                other[0] ^= 1;
                assert!(verify_inclusion(index, size, &other, &proof, &root_n).is_err());
            }
        }
    }

    #[test]
    fn every_consistency_proof_up_to_64_leaves_verifies_and_every_spoiled_one_fails() {
        let leaves = generated(64);
        let roots: Vec<Hash> = (0..=64).map(|n| root(&leaves[..n])).collect();
        for n in 1..=64u64 {
            for m in 1..n {
                let (root_m, root_n) = (roots[m as usize], roots[n as usize]);
                let proof = consistency_proof(&leaves, m, n);
                verify_consistency(m, n, &root_m, &root_n, &proof)
                    .unwrap_or_else(|e| panic!("{m} to {n}: {e}"));
                // The roots stay those of the true sizes: only the claim changes.
                let fails = |what: &str, m2: u64, n2: u64, p: &[Hash]| {
                    assert!(
                        verify_consistency(m2, n2, &root_m, &root_n, p).is_err(),
                        "{m} to {n}: {what} verified"
                    );
                };
                for i in 0..proof.len() {
                    for bit in FLIPPED_BITS {
                        let mut bad = proof.clone();
                        bad[i][bit / 8] ^= 1 << (bit % 8);
                        fails(&format!("bit {bit} of hash {i}"), m, n, &bad);
                    }
                }
                if let Some((_, short)) = proof.split_last() {
                    fails("one hash short", m, n, short);
                }
                let mut long = proof.clone();
                long.push(root_n);
                fails("one hash long", m, n, &long);
                // Another earlier size; a later tree of another height (twice or half the
                // size, as in transparency-dev/merkle: one more can keep the proof's shape).
                for wrong in [m - 1, m + 1, m ^ 2] {
                    if wrong != m {
                        fails(&format!("m = {wrong}"), wrong, n, &proof);
                    }
                }
                for wrong in [n * 2, n / 2] {
                    fails(&format!("n = {wrong}"), m, wrong, &proof);
                }
                assert!(
                    verify_consistency(m, n, &root_n, &root_m, &proof).is_err(),
                    "{m} to {n}: swapped roots verified"
                );
            }
        }
    }

    #[test]
    fn the_frontier_root_is_the_tree_root_for_every_size_up_to_200() {
        let leaves = generated(200);
        let mut frontier = Frontier::new();
        assert_eq!(frontier.root(), empty_root());
        for n in 0..=200usize {
            if n > 0 {
                frontier.push(leaves[n - 1]);
            }
            assert_eq!(frontier.size(), n as u64);
            assert_eq!(frontier.hashes().len(), n.count_ones() as usize);
            assert_eq!(frontier.root(), root(&leaves[..n]), "size {n}");
        }
    }

    #[test]
    fn the_frontier_of_the_published_leaves_is_the_published_compact_range() {
        // testonly/constants.go CompactTrees for size 7: nh[2][0], nh[1][2], nh[0][6].
        let mut frontier = Frontier::new();
        for leaf in vector_leaves().into_iter().take(7) {
            frontier.push(leaf);
        }
        assert_eq!(
            frontier.to_hex(),
            [
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            ]
        );
        assert_eq!(frontier.root(), h(ROOTS[6]));
    }

    #[test]
    fn a_stored_frontier_comes_back_and_grows_as_before() {
        let leaves = generated(50);
        let mut frontier = Frontier::new();
        for leaf in &leaves[..37] {
            frontier.push(*leaf);
        }
        let mut back = Frontier::from_hex(frontier.size(), &frontier.to_hex()).expect("back");
        assert_eq!(back, frontier);
        for leaf in &leaves[37..] {
            back.push(*leaf);
        }
        assert_eq!(back.root(), root(&leaves));
    }

    #[test]
    fn stored_frontier_parts_that_do_not_fit_the_size_are_refused() {
        let one = crate::hex::lower(&empty_root());
        // 37 = 0b100101: three subtrees.
        assert_eq!(
            Frontier::from_hex(37, &[one.clone(), one.clone()]),
            Err(FrontierError::WrongCount {
                size: 37,
                expected: 3,
                got: 2
            })
        );
        assert!(Frontier::from_hex(0, std::slice::from_ref(&one)).is_err());
        assert_eq!(
            Frontier::from_hex(1, &[one.to_uppercase()]),
            Err(FrontierError::NotHex { index: 0 })
        );
        assert_eq!(
            Frontier::from_hex(1, &[one[..62].to_owned()]),
            Err(FrontierError::NotHex { index: 0 })
        );
        assert!(Frontier::from_parts(0, Vec::new()).is_ok());
    }
}
