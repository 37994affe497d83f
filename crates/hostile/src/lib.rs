//! What the property tests of untrusted input share (never shipped).
//!
//! Everything a plugin author, an image or a project editor writes reaches a parser in a
//! process that serves everyone else (the controller, the API server), so each such parser is
//! held to one property: **it never panics, never aborts, and answers in bounded time and
//! memory**, whatever bytes it is given. A crate tests its parsers in `tests/hostile.rs`, one
//! [`Target`] each:
//!
//! ```no_run
//! # use loop_plugins_hostile as hostile;
//! # use hostile::{Target, inputs};
//! #[global_allocator]
//! static ALLOC: hostile::Counting = hostile::Counting;
//!
//! #[test]
//! fn manifest_text() {
//!     Target::new("manifest_text", env!("CARGO_MANIFEST_DIR")).run(inputs::json5_text, |bytes| {
//!         let _ = std::str::from_utf8(bytes); // ... the parser under test
//!         Ok(())
//!     });
//! }
//! ```
//!
//! [`Target::run`] first replays the target's checked-in corpus
//! (`tests/hostile/<target>/*`: every hostile input found so far, kept as a regression test),
//! then runs generated inputs for a time budget: `LOOP_FUZZ_SECONDS` (3 s in `make test`; `make
//! fuzz` sets more). Each input runs on a thread with the stack of a tokio worker (2 MiB) in a
//! debug build, whose frames are larger than a release build's: an input that overflows it would
//! abort the test binary, which fails the test. A failing input is shrunk by proptest and
//! printed with the seed that found it; `LOOP_FUZZ_SAVE=1` writes it into the corpus.
//!
//! Memory is counted per thread by [`Counting`], the global allocator the test binary installs
//! (the runner refuses to run without it, so the bound cannot pass unmeasured).

mod alloc;
pub mod inputs;
mod runner;

pub use alloc::{Counting, installed, measure};
pub use proptest;
pub use runner::{Bounds, Target};
