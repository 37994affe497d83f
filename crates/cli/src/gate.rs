//! The gate wrapper's wiring: `install-gate` (the init container copies this binary into a
//! volume the plugin container shares) and `gate -- <command>` (the plugin's command run
//! under it).
//!
//! The syscall policy itself (Landlock for exec and write limits, seccomp user notification
//! for the finer rules, the JSONL audit) is the next issue's. Until it lands, `gate` runs the
//! command unconfined and says so on stderr at every start, so nobody mistakes it for
//! enforcement.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// Why the gate could not start the plugin.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("gate: no command to run after `--`")]
    NoCommand,
    #[error("gate: finding this binary: {0}")]
    SelfPath(#[source] std::io::Error),
    #[error("gate: copying this binary to {path}: {source}")]
    Install {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("gate: running {program}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Copies this binary to `dest`, executable, for the plugin container to run as its gate.
pub fn install(dest: &Path) -> Result<(), GateError> {
    let me = std::env::current_exe().map_err(GateError::SelfPath)?;
    let fail = |source| GateError::Install {
        path: dest.display().to_string(),
        source,
    };
    std::fs::copy(&me, dest).map_err(fail)?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    Ok(())
}

/// Replaces this process with `command`: returns only when it could not start.
pub fn exec(command: &[String]) -> GateError {
    let Some((program, args)) = command.split_first() else {
        return GateError::NoCommand;
    };
    eprintln!("agentgate: syscall rules are not enforced yet; running {program} unconfined");
    let source = std::process::Command::new(program).args(args).exec();
    GateError::Exec {
        program: program.clone(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_copies_an_executable() {
        let dir = std::env::temp_dir().join(format!("loop-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("loop-plugins");
        install(&dest).unwrap();
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_command_is_refused() {
        assert!(matches!(exec(&[]), GateError::NoCommand));
    }
}
