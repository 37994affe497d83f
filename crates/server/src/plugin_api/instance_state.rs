//! The limits of what a plugin keeps in its chat's state (the reference's numbers).

/// A switch's title (its tooltip), in characters: the reference's limit.
pub const MAX_SWITCH_TITLE: usize = 200;
