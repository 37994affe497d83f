//! `loop-plugins-dev`: a local cluster for a developer until Ctrl-C (control plane, kubelet
//! stand-in, CRDs, the API server and the controller from the `loop-plugins` binary built
//! beside it, examples/). Test tooling: never in the shipped image.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "loop-plugins-dev",
    version,
    about = "Runs a local loop-plugins dev cluster until Ctrl-C"
)]
struct Cli {
    #[command(flatten)]
    args: loop_plugins_devcluster::dev::DevArgs,
}

fn main() -> std::process::ExitCode {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    loop_plugins_devcluster::dev::main(Cli::parse().args)
}
