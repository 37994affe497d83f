//! The env vars the chart sets on each long-lived role's Pod, by the names every role reads
//! them under: who and where the Pod is (the downward API's), and where the Leases are.

/// The Pod's name: a Lease holder's identity, the controller's Events' reporting instance.
pub const POD_NAME: &str = "POD_NAME";
/// The Pod's namespace: the controller's own (HostConfig's registry credentials are read
/// there), the API server replicas' (they count shared runs there).
pub const POD_NAMESPACE: &str = "POD_NAMESPACE";
/// Where the controller's and the API server's Leases are; leader election is on when set.
pub const LEADER_ELECTION_NAMESPACE: &str = "LOOP_PLUGINS_LEADER_ELECTION_NAMESPACE";
