//! The signal every role stops on: SIGTERM (Kubernetes) or Ctrl-C (a person).

/// Resolves on SIGTERM or Ctrl-C.
pub async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler installs");
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
