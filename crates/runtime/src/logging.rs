//! Logs: tracing to stderr, filtered by `RUST_LOG` (default `info,kube=warn`).

/// Installs the subscriber once; later calls do nothing.
pub fn init() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
}
