//! The HTTP/1 framing guard in front of hyper: what it lets hyper read is a prefix of what the
//! client sent (it never rewrites, reorders or invents bytes), and the outcome does not depend
//! on how the bytes were split into reads. The first byte picks the read size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_server::framing::Framer;

/// What hyper would read, and the refusal, with reads of `step` bytes.
fn run(input: &[u8], step: usize) -> (Vec<u8>, Option<&'static str>) {
    let mut framer = Framer::new(8192);
    for piece in input.chunks(step.max(1)) {
        framer.feed(piece);
    }
    let out = framer.output().split().to_vec();
    (out, framer.take_refusal().map(|r| r.title))
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, input)) = data.split_first() else {
        return;
    };
    let whole = run(input, input.len());
    assert!(input.starts_with(&whole.0), "hyper would read bytes not sent");
    assert_eq!(run(input, usize::from(step)), whole, "read size {step} changed the outcome");
});
