//! How a long-lived role's process uses the C allocator.
//!
//! glibc's malloc gives a thread that allocates while another holds an arena an arena of its
//! own, up to eight per core, and what is freed in an arena stays with it. A role's threads
//! are Tokio's workers (one per core) and its blocking pool (DNS lookups, file reads), whose
//! threads come and go: each could leave an arena holding what it once allocated. Two arenas
//! keep the workers from waiting on each other; at 3,000 instances they measured 1.7 MiB less
//! anonymous memory in the controller than glibc's default (`make bench-scale`: 40.2 → 38.5
//! MiB steady). `MALLOC_ARENA_MAX` in the environment still decides when set.

/// The arenas a role's process keeps at most.
pub const ARENAS: i32 = 2;

/// Limits the allocator to [`ARENAS`] arenas unless `MALLOC_ARENA_MAX` says otherwise. Call it
/// first thing, before any thread starts.
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets one of the allocator's tunables; it is called before any thread of
    // the process starts, and a refused value leaves glibc's default.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}
