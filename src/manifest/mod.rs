//! The plugin manifest (`plugin.json`): parsing and every rule the reference states. (in progress)

use std::path::Path;
use std::process::ExitCode;

/// `loop-plugins manifest check FILE`.
pub fn check_file_cli(_file: &Path) -> ExitCode {
    ExitCode::FAILURE
}
