//! What every long-lived role of loop-plugins shares, so each has one home:
//! - [`logging`]: tracing to stderr, filtered by `RUST_LOG`, and spans over OTLP when an
//!   endpoint is set;
//! - [`metrics`]: `/healthz` and `/metrics` of a Prometheus registry;
//! - [`shutdown`]: SIGTERM or Ctrl-C;
//! - [`leader`]: leader election on a Lease (only the holder does work that must happen once);
//! - [`allocator`]: how many malloc arenas the process keeps;
//! - [`pod_env`]: the env vars the chart sets on each role's Pod.

pub mod allocator;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod pod_env;
pub mod shutdown;
