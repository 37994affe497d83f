//! What the tests (tests/: the e2e suite, the chart checks) and the benchmarks (crates/bench)
//! share: where the repository is, the product binary they run, the plugin images they push
//! ([`images`]), test plugins' manifests ([`plugins`]), a scripted chat-completions server
//! for agent runners ([`chat_model`]) and headless Chromium for the browser tests
//! ([`browser`], the shipped `crates/browser` that conformance draws panels with). Never
//! shipped.

pub use browser;
pub mod chat_model;
pub mod images;
pub mod plugins;

use std::path::PathBuf;
use std::sync::OnceLock;

/// The repository's root folder (charts/, crds/, deploy/, examples/ are relative to it).
pub use devcluster::binaries::repo_root;

/// The `loop-plugins` binary under test: `$LOOP_PLUGINS_BIN`, else the one cargo built in
/// this target folder (`make test` and `make e2e` build it first).
pub fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| devcluster::binaries::product_binary().unwrap_or_else(|e| panic!("{e}")))
        .clone()
}
