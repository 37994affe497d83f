//! `GET /files/{path}`: a file of the chat's working tree (`files.read`), see `api::files`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::files::{check_path, read_confined, tree_dir};
use crate::plugin_api::state::PluginApiState;
use model::manifest::Capability;

pub async fn get(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(path): Path<String>,
) -> ApiResult<Response> {
    caller.require(Capability::FilesRead)?;
    let rel = check_path(&path)?;
    let no_tree = |why: &str| ApiError::new(Code::NoWorkingTree, why.to_string());
    let tree = state
        .index
        .working_tree(&caller.channel)
        .ok_or_else(|| no_tree("the chat has no working tree"))?;
    let root = state
        .config
        .worktree_root
        .as_ref()
        .ok_or_else(|| no_tree("this host serves no working trees (no --worktree-root)"))?;
    let dir = tree_dir(
        root,
        &caller.namespace,
        &tree.claim_name,
        tree.sub_path.as_deref(),
    )?;
    let max = state.config.max_file_bytes;
    let bytes = tokio::task::spawn_blocking(move || read_confined(&dir, &rel, max))
        .await
        .map_err(|e| ApiError::new(Code::Internal, format!("reading the file failed: {e}")))??;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}
