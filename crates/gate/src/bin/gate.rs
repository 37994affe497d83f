//! `loop-plugins-gate [OPTIONS] -- COMMAND ARGS...`: the gate on its own (tests, the
//! benchmark, plugin authors). The shipped `loop-plugins gate` calls the same function.

use clap::Parser;

/// Runs COMMAND under the syscall gate: Landlock, seccomp and an audit log.
#[derive(Parser)]
#[command(name = "loop-plugins-gate", version)]
struct Cli {
    #[command(flatten)]
    gate: loop_plugins_gate::GateArgs,
}

fn main() -> std::process::ExitCode {
    loop_plugins_gate::run(Cli::parse().gate)
}
