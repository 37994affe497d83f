//! `GET /hotspots` and `GET /hotspots/page`: the worst functions of the chat's latest quality
//! scan, which the app posted through the host API (`crate::quality`), behind `files.read`:
//! hotspots describe the chat's working tree, so the capability that grants reading the tree
//! grants them. What a query may ask and what a page holds are the SDK's
//! (`sdk::api::limits::parse_hotspots_query`, `Hotspots::worst`, `HotspotsPage::of`), so the
//! fake host answers the same.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use sdk::api::limits::{HotspotsQuery, parse_hotspots_query};
use sdk::api::wire::{Hotspots, HotspotsPage};

use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::state::PluginApiState;
use crate::quality::scan::Scan;
use model::manifest::Capability;

/// The capability, the query, then the chat's scan (404 `scan_not_found` without one).
fn read(
    caller: &Caller,
    state: &PluginApiState,
    query: Option<&str>,
    paged: bool,
) -> ApiResult<(HotspotsQuery, Scan)> {
    caller.require(Capability::FilesRead)?;
    let query =
        parse_hotspots_query(query, paged).map_err(|why| ApiError::new(Code::InvalidQuery, why))?;
    let scan = state.quality.scan_for(&caller.channel).ok_or_else(|| {
        ApiError::new(
            Code::ScanNotFound,
            format!(
                "chat {} has no quality scan yet: the app posts one after it scans the chat's working tree",
                caller.channel_name()
            ),
        )
    })?;
    Ok((query, scan))
}

pub async fn worst(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Hotspots>> {
    let (query, scan) = read(&caller, &state, query.as_deref(), false)?;
    Ok(Json(Hotspots::worst(
        &scan.functions,
        query.limit as usize,
        scan.commit,
        scan.scanned_at.to_string(),
    )))
}

pub async fn page(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<HotspotsPage>> {
    let (query, scan) = read(&caller, &state, query.as_deref(), true)?;
    Ok(Json(HotspotsPage::of(
        &scan.functions,
        query,
        scan.totals,
        scan.commit,
        scan.scanned_at.to_string(),
    )))
}
