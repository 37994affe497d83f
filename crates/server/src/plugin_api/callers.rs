//! Who each token speaks for, decided once ([`auth::resolve`]: the token's owner, its instance,
//! Plugin, chat, project and trust, the HostConfig, [`auth::decide`] over them) and kept while
//! nothing that decides it changes: the memo is tagged with the index's callers epoch, read
//! before the stores, and emptied when the epoch moves. A plugin that calls in a steady world
//! pays one digest and one map lookup per request. Refusals (401, 409) are decided each time.

use std::collections::HashMap;
use std::sync::RwLock;

use ::index::tokens::{self, TokenDigest};

use super::auth::{self, Caller};
use super::error::ApiResult;
use crate::index::Index;

/// The most callers kept: one per live token, so a bound only a host with more instances than
/// this reaches (those beyond it are decided each time).
const MAX_KEPT: usize = 50_000;

#[derive(Default)]
pub struct Callers {
    memo: RwLock<Memo>,
}

#[derive(Default)]
struct Memo {
    /// The epoch every kept caller was decided at.
    epoch: u64,
    by_token: HashMap<TokenDigest, Caller>,
}

impl Callers {
    /// Who `token` speaks for, as the stores of `index` say now.
    pub fn of(&self, index: &Index, token: &str) -> ApiResult<Caller> {
        let presented = tokens::digest(token);
        let epoch = index.callers_epoch.now();
        {
            let memo = self.memo.read().expect("callers memo lock");
            if memo.epoch == epoch
                && let Some(caller) = memo.by_token.get(&presented)
            {
                return Ok(caller.clone());
            }
        }
        let caller = auth::resolve(index, &presented)?;
        let mut memo = self.memo.write().expect("callers memo lock");
        if memo.epoch < epoch {
            memo.by_token.clear();
            memo.epoch = epoch;
        }
        // A caller decided at an older epoch than the memo's is answered, not kept.
        if memo.epoch == epoch && memo.by_token.len() < MAX_KEPT {
            memo.by_token.insert(presented, caller.clone());
        }
        Ok(caller)
    }

    /// How many callers are kept.
    pub fn len(&self) -> usize {
        self.memo.read().expect("callers memo lock").by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
