//! What the reference's sizes mean in bytes, in one place. The reference writes its caps in
//! "MB" and "KB" (a tool answer 1 MB, an `/x` body 8 MB, `/loop-plugin` 50 MB, a switch icon
//! 16 KB) without saying which megabyte: every cap here counts them in binary units, so a
//! plugin within the reference's number under either reading is within ours (a plugin is
//! never refused for being within the reference's number). Everything that enforces or
//! checks one of these caps (the API server, the SDK's server, install and admission, the
//! conformance check) takes it from here; `docs/plugins.md` says the same to plugin authors.

/// A kilobyte as the reference's sizes count it: 1,024 bytes (a KiB).
pub const KB: u64 = 1024;

/// A megabyte as the reference's sizes count it: 1,048,576 bytes (a MiB), the larger reading
/// of "MB".
pub const MB: u64 = 1024 * KB;

/// "A tool answer is capped at 1 MB".
pub const TOOL_ANSWER_MAX_BYTES: u64 = MB;

/// "... and an /x body at 8 MB" (each way).
pub const X_BODY_MAX_BYTES: u64 = 8 * MB;

/// "/loop-plugin may hold at most 50 MB; install refuses a bigger one."
pub const LOOP_PLUGIN_MAX_BYTES: u64 = 50 * MB;

/// A composer switch's icon: "an .svg under ui/, at most 16 KB".
pub const SWITCH_ICON_MAX_BYTES: u64 = 16 * KB;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cap_is_the_references_number_in_binary_units() {
        assert_eq!(MB, 1_048_576);
        assert_eq!(TOOL_ANSWER_MAX_BYTES, 1_048_576);
        assert_eq!(X_BODY_MAX_BYTES, 8_388_608);
        assert_eq!(LOOP_PLUGIN_MAX_BYTES, 52_428_800);
        assert_eq!(SWITCH_ICON_MAX_BYTES, 16_384);
    }
}
