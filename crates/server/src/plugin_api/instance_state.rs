//! The limits of what a plugin keeps in its chat's state (the reference's numbers).

/// A switch's title (its tooltip), in characters: the reference's limit.
pub use sdk::api::limits::MAX_TITLE as MAX_SWITCH_TITLE;
