//! The headers of every answer from a plugin's bundle: the reference's content security policy
//! and the headers around it. They live in `crates/ui-policy` (pure, with each directive's
//! test), so `loop-plugins conformance` draws a plugin's panels under the very policy this
//! server serves them with.

pub use ui_policy::*;
