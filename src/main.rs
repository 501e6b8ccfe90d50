#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    psp_gateway::cli::run()
}
