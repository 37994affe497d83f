//! The gate's wiring in the binary: `install-gate` (the init container copies this binary
//! into the volume the plugin container shares, and writes the policy admission compiled)
//! and `gate` (crates/gate's entry point, its arguments flattened into the subcommand).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use model::contract::GATE_POLICY_ENV;

/// Why the init container could not set the gate up.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("install-gate: finding this binary: {0}")]
    SelfPath(#[source] std::io::Error),
    #[error("install-gate: writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("install-gate: --policy needs the policy in ${GATE_POLICY_ENV}")]
    NoPolicy,
    #[error("install-gate: the policy in ${GATE_POLICY_ENV}: {0}")]
    Policy(#[source] gate::PolicyError),
}

/// Copies this binary to `dest` (executable), and writes `policy` (when asked) from
/// `policy_json` after checking it is a policy the gate will read.
pub fn install(
    dest: &Path,
    policy: Option<&Path>,
    policy_json: Option<&str>,
) -> Result<(), InstallError> {
    let me = std::env::current_exe().map_err(InstallError::SelfPath)?;
    let fail = |path: &Path| {
        let path = path.display().to_string();
        move |source| InstallError::Write { path, source }
    };
    std::fs::copy(&me, dest).map_err(fail(dest))?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o555)).map_err(fail(dest))?;
    if let Some(path) = policy {
        let text = policy_json.ok_or(InstallError::NoPolicy)?;
        gate::Policy::from_json(text, GATE_POLICY_ENV).map_err(InstallError::Policy)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o444)
            .open(path)
            .map_err(fail(path))?;
        file.write_all(text.as_bytes()).map_err(fail(path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("loop-gate-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn install_copies_an_executable_and_writes_the_policy() {
        let dir = dir("ok");
        let dest = dir.join("loop-plugins");
        let policy = dir.join("policy.json");
        let json = r#"{"version":1,"gate":{"commands":[{"commands":["curl"],"decision":"deny"}]}}"#;
        install(&dest, Some(&policy), Some(json)).unwrap();
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o555);
        let back = gate::Policy::load(&policy).unwrap();
        assert_eq!(back.gate.commands[0].commands, ["curl"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_policy_the_gate_would_refuse_fails_the_init_container() {
        let dir = dir("bad");
        let policy = dir.join("policy.json");
        let bad =
            r#"{"version":1,"gate":{"commands":[{"commands":["curl"],"decision":"approve"}]}}"#;
        let err = install(&dir.join("bin"), Some(&policy), Some(bad)).unwrap_err();
        assert!(err.to_string().contains("approve"), "{err}");
        assert!(matches!(
            install(&dir.join("bin2"), Some(&policy), None),
            Err(InstallError::NoPolicy)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
