//! A plugin's ask on its way to the app and back, decided purely. The replica the plugin
//! called adds it to the chat's ConfigMap of its kind (key `req-<id>`); the replica holding the
//! app's stream sees it through its index and sends it; the app's answer, taken by any replica,
//! is added beside it (`resp-<id>`); the plugin's replica sees that, answers the plugin and
//! takes both keys out. Every write is a merge patch of its own keys, so none races another. An
//! ask nobody answered lapses at its `expires`: it is sent no more, and the next write that
//! prunes the map takes its keys out.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What every kind of ask has: an id the app answers it by, the chat it is for, and when it
/// was made and lapses.
pub trait Ask: Clone + Serialize + DeserializeOwned + Send + Sync + 'static {
    fn id(&self) -> &str;
    /// The chat (Channel) it is for.
    fn chat(&self) -> &str;
    fn created(&self) -> Timestamp;
    /// Past this the plugin has been told the app did not answer.
    fn expires(&self) -> Timestamp;
}

/// The prefix of a request's key.
pub const REQUEST_PREFIX: &str = "req-";
/// The prefix of an answer's key.
pub const RESPONSE_PREFIX: &str = "resp-";

/// A data patch: `Some` sets a key, `None` takes it out.
pub type DataPatch = BTreeMap<String, Option<String>>;

/// The key of request `id`.
pub fn request_key(id: &str) -> String {
    format!("{REQUEST_PREFIX}{id}")
}

/// The key of the answer to request `id`.
pub fn response_key(id: &str) -> String {
    format!("{RESPONSE_PREFIX}{id}")
}

/// Every ask the map holds, answered or not, oldest first (a value that does not read as `A`
/// is left out).
pub fn requests<A: Ask>(map: &ConfigMap) -> Vec<A> {
    let Some(data) = map.data.as_ref() else {
        return Vec::new();
    };
    let mut all: Vec<A> = data
        .iter()
        .filter(|(key, _)| key.starts_with(REQUEST_PREFIX))
        .filter_map(|(_, value)| serde_json::from_str(value).ok())
        .collect();
    all.sort_by_key(|r| r.created());
    all
}

/// The app's answer to request `id`, once answered.
pub fn response(map: &ConfigMap, id: &str) -> Option<Value> {
    serde_json::from_str(map.data.as_ref()?.get(&response_key(id))?).ok()
}

/// The requests the app still owes an answer at `now`, oldest first.
pub fn pending<A: Ask>(map: &ConfigMap, now: Timestamp) -> Vec<A> {
    requests::<A>(map)
        .into_iter()
        .filter(|r| now < r.expires() && response(map, r.id()).is_none())
        .collect()
}

/// The patch that adds `request`.
pub fn add<A: Ask>(request: &A) -> DataPatch {
    BTreeMap::from([(
        request_key(request.id()),
        Some(serde_json::to_string(request).expect("a request serializes")),
    )])
}

/// The patch that answers request `id` with `response`.
pub fn answer(id: &str, response: &Value) -> DataPatch {
    BTreeMap::from([(response_key(id), Some(response.to_string()))])
}

/// The patch that takes request `id` and its answer out.
pub fn remove(id: &str) -> DataPatch {
    BTreeMap::from([(request_key(id), None), (response_key(id), None)])
}

/// The patch that takes out every request that lapsed by `now` (and its answer).
pub fn prune<A: Ask>(map: &ConfigMap, now: Timestamp) -> DataPatch {
    requests::<A>(map)
        .iter()
        .filter(|r| now >= r.expires())
        .flat_map(|r| remove(r.id()))
        .collect()
}

/// The patch that takes out every request and answer.
pub fn remove_all(map: &ConfigMap) -> DataPatch {
    map.data
        .iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(REQUEST_PREFIX) || key.starts_with(RESPONSE_PREFIX))
        .map(|(key, _)| (key.clone(), None))
        .collect()
}

/// `patch` applied to `data` (what a merge patch does to a ConfigMap's data).
pub fn apply(data: &mut BTreeMap<String, String>, patch: &DataPatch) {
    for (key, value) in patch {
        match value {
            Some(v) => data.insert(key.clone(), v.clone()),
            None => data.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::asks::testing::Probe;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn map_with(patches: &[DataPatch]) -> ConfigMap {
        let mut data = BTreeMap::new();
        for patch in patches {
            apply(&mut data, patch);
        }
        ConfigMap {
            data: Some(data),
            ..Default::default()
        }
    }

    fn request(id: &str, at_second: i64) -> Probe {
        Probe::new(id, at(at_second), 30)
    }

    #[test]
    fn a_request_is_pending_until_answered_or_lapsed() {
        let (a, b) = (request("a", 0), request("b", 5));
        let map = map_with(&[add(&b), add(&a)]);
        assert_eq!(
            pending::<Probe>(&map, at(10)),
            vec![a.clone(), b.clone()],
            "oldest first"
        );
        assert_eq!(pending::<Probe>(&map, at(30)), vec![b.clone()], "a lapsed");
        let answered = map_with(&[add(&a), add(&b), answer("a", &json!({"ok": true}))]);
        assert_eq!(response(&answered, "a"), Some(json!({"ok": true})));
        assert_eq!(
            pending::<Probe>(&answered, at(10)),
            vec![b.clone()],
            "a answered"
        );
    }

    #[test]
    fn a_done_request_and_its_answer_go_and_lapsed_ones_are_pruned() {
        let (a, b) = (request("a", 0), request("b", 20));
        let map = map_with(&[add(&a), add(&b), answer("a", &json!(1)), remove("a")]);
        assert_eq!(requests::<Probe>(&map), vec![b.clone()]);
        assert_eq!(response(&map, "a"), None);
        let both = map_with(&[add(&a), add(&b), answer("a", &json!(1))]);
        let pruned = map_with(&[
            add(&a),
            add(&b),
            answer("a", &json!(1)),
            prune::<Probe>(&both, at(31)),
        ]);
        assert_eq!(requests::<Probe>(&pruned), vec![b]);
        assert!(
            !pruned.data.unwrap().contains_key("resp-a"),
            "the answer goes with it"
        );
        let mut session = map_with(&[add(&a), answer("a", &json!(1))]);
        session
            .data
            .get_or_insert_default()
            .insert("session".into(), "{}".into());
        let cleared = remove_all(&session);
        assert_eq!(cleared.len(), 2, "only requests and answers: {cleared:?}");
    }
}
