//! Plugin signatures, zeroclaw's model bound to the image: Ed25519 publisher keys, a
//! canonical detached payload naming the plugin, its version, plugin.json's sha256, the
//! repository and the image manifest digest, a `.sig` artifact next to the image, and the
//! admission policy (disabled / permissive / strict) as a pure decision.

pub mod artifact;
pub mod keys;
pub mod payload;
pub mod policy;
pub mod publish;
pub mod record;
