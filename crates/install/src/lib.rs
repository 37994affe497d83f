//! A plugin from its image: what `plugin install` and `plugin upgrade` apply (the CLI's), and
//! what the console's Upgrade applies through the host API (a person's), decided in one place.
//!
//! - [`candidate`]: the Plugin pinned by digest, its manifest read from the image, the
//!   capabilities approved (pure);
//! - [`check`]: the image pulled with its signatures, and admission's stages run over the
//!   candidate as the controller will run them;
//! - [`review`]: an upgrade's capability review: what the new version asks for that the
//!   installed one did not, what it no longer asks for, and what stays approved (pure).

pub mod candidate;
pub mod check;
pub mod review;

pub use check::{PullError, Pulled};
