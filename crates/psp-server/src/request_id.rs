//! Request ids: the `id` of an error body and the `x-request-id` header of every response the
//! check endpoint gives, and the check id of every call through the gateway.

use time::OffsetDateTime;

/// A random UUID (version 4, RFC 9562 section 5.4) for the error `id` and `x-request-id`.
pub fn new_request_id() -> String {
    use ring::rand::SecureRandom;
    static FALLBACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut b = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        // The OS generator failed: ids must stay unique, so fall back to time and a counter.
        tracing::error!("the system random generator failed");
        let n = FALLBACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = OffsetDateTime::now_utc().unix_timestamp_nanos();
        b[..8].copy_from_slice(&n.to_be_bytes());
        b[8..].copy_from_slice(&(t as u64).to_be_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::hex::lower(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
