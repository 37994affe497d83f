//! `loop-plugins manifest check FILE`.

use std::path::Path;
use std::process::ExitCode;

use model::manifest::{Manifest, ManifestError, parse_str};

/// Checks a manifest file: prints each problem (`path: message`, or `file:line:column: message`
/// for a syntax error) and exits 1, or prints a one-line summary and exits 0.
pub fn check_file_cli(file: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}: cannot read: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    match parse_str(&text) {
        Ok(m) => {
            println!("{}", summary(&m));
            ExitCode::SUCCESS
        }
        Err(ManifestError::Syntax {
            line,
            column,
            message,
        }) => {
            println!("{}:{line}:{column}: {message}", file.display());
            ExitCode::FAILURE
        }
        Err(ManifestError::Invalid(problems)) => {
            for p in problems {
                println!("{p}");
            }
            ExitCode::FAILURE
        }
    }
}

/// `echo 0.1.0: valid (3 capabilities, 1 tool, 2 actions, 1 setting)`.
pub fn summary(m: &Manifest) -> String {
    let counts = [
        count(m.capabilities.len(), "capability", "capabilities"),
        count(m.tools.len(), "tool", "tools"),
        count(m.actions.len(), "action", "actions"),
        count(m.settings.len(), "setting", "settings"),
    ];
    format!("{} {}: valid ({})", m.id, m.version, counts.join(", "))
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_a_valid_manifest() {
        let m = parse_str(include_str!("../examples/manifests/echo.json")).unwrap();
        assert_eq!(
            summary(&m),
            "echo 0.1.0: valid (7 capabilities, 1 tool, 2 actions, 1 setting)"
        );
    }

    #[test]
    fn exit_codes() {
        let dir = std::env::temp_dir().join(format!("loop-plugins-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(&good, include_str!("../examples/manifests/echo.json")).unwrap();
        assert_eq!(check_file_cli(&good), ExitCode::SUCCESS);
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{ \"id\": \"x\" }").unwrap();
        assert_eq!(check_file_cli(&bad), ExitCode::FAILURE);
        let broken = dir.join("broken.json");
        std::fs::write(&broken, "{ \"id\": ").unwrap();
        assert_eq!(check_file_cli(&broken), ExitCode::FAILURE);
        assert_eq!(check_file_cli(&dir.join("missing.json")), ExitCode::FAILURE);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
