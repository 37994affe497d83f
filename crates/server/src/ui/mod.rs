//! What a plugin shows a person: its panels' and cards' static files (`/loop-plugin/ui/` of
//! the admitted image), served from signed, expiring links under the reference's content
//! security policy (`reference/loop-plugins.txt`, "Panels", "Cards", "Image layout").
//!
//! The shape, one job a module, the deciding parts pure:
//!
//! | module     | holds                                                                    |
//! |------------|--------------------------------------------------------------------------|
//! | [`policy`] | every header a bundle's answer carries, built by one function            |
//! | [`link`]   | a link's claims (plugin, digest, chat, panel or card, expiry), signed and  |
//! |            | checked with HMAC-SHA256 under the current or the previous key           |
//! | [`keys`]   | the link keys' Secret: what it holds and when to create or rotate it (pure)|
//! | [`bundle`] | the `ui/` files of one image and the one lookup of a requested path      |
//! | [`cache`]  | bundles by image digest, bounded in bytes, removed plugins' entries gone  |
//! | [`source`] | the I/O: the bundle read from the registry by digest through `oci`       |
//! | [`route`]  | `GET /ui/v1/{link}/{*path}`: outside `/api`, no token but the link's      |
//!
//! A link's path after the signed part is relative to `/loop-plugin/ui/`: a panel whose entry
//! is `ui/main/index.html` opens at `/ui/v1/<link>/main/index.html`, and its page loads
//! `app.js` beside it relatively. The link names one plugin at one image digest, so the policy
//! can name that bundle's URL prefix as the only source of scripts, styles and fetches; a page
//! of another plugin has another prefix. Serving reads the image, never the plugin's
//! container: a stopped plugin's panels load.
//!
//! Every refusal answers before any file is read: a link that does not verify (changed byte,
//! unknown key, expired) is 403; a plugin that is gone or now runs another digest, and a path
//! that is not a regular file of the bundle (`..`, `.`, empty or encoded-slash segments,
//! symlinks, directories), is 404.

pub mod bundle;
pub mod cache;
pub mod key_store;
pub mod keys;
pub mod link;
pub mod policy;
pub mod route;
pub mod source;
