//! The scale and chaos harness behind `make bench-scale` (benches/scale.rs) and `make chaos`
//! (benches/chaos.rs): a world of plugins, projects and chats at a team's size on the local
//! control plane, the controller and the API server as real processes under the chart's own
//! RBAC (each with an identity of its own, so the API server's audit log tells their writes
//! apart), and what the two benches measure and check.
//!
//! - [`knobs`]: the sizes (full or quick) and the other settings, from the environment;
//! - [`world`]: the objects a run declares (HostConfig, Plugins, Projects, Chats) and writing
//!   them with bounded concurrency;
//! - [`identity`]: the chart's RBAC, a ServiceAccount per role and a kubeconfig for each;
//! - [`procs`]: the controller and API server processes, and their /metrics;
//! - [`procstat`]: a process's RSS and CPU time from /proc, and pinning it to CPUs;
//! - [`audit`]: writes by identity, from the API server's audit log;
//! - [`burst`]: a burst of config changes (projects and the HostConfig);
//! - [`converge`]: watches that say how far the controller got, and when it converged;
//! - [`baseline`]: a bare client writing the same objects, the rate to compare with;
//! - [`deliveries`]: how many times a run's /done reached the plugin, against the kills;
//! - [`footprint`]: what the processes' watches hold, kind by kind;
//! - [`load`]: HTTP load (keep-alive connections, many callers) and percentiles;
//! - [`ops`]: small operations on the cluster (an instance's Secret, a Pod's address, ...);
//! - [`ownership`]: every child has exactly one owner that wants it, nothing doubled;
//! - [`report`]: the machine's load, progress lines and the `name=value` summary.

pub mod audit;
pub mod baseline;
pub mod burst;
pub mod converge;
pub mod deliveries;
pub mod echo;
pub mod footprint;
pub mod identity;
pub mod knobs;
pub mod load;
pub mod ops;
pub mod ownership;
pub mod procs;
pub mod procstat;
pub mod report;
pub mod world;
