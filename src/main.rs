#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    // ring is the only crypto provider (docs/stack.md); installing it can only fail if another
    // provider was installed first, which nothing in this binary does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    psp_gateway::cli::run()
}
