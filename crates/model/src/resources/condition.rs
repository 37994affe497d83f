//! Conditions in the `metav1.Condition` shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A condition's status.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// One condition, as `metav1.Condition` has it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    ))]
    #[schemars(length(max = 316))]
    pub r#type: String,
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last flipped.
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub last_transition_time: String,
    #[schemars(regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"))]
    #[schemars(length(min = 1, max = 1024))]
    pub reason: String,
    #[schemars(length(max = 32768))]
    pub message: String,
}

/// Sets `new` among `conditions`, keeping the old `lastTransitionTime` unless the status flips.
/// Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.r#type == new.r#type) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            if *old == new {
                return false;
            }
            *old = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: ConditionStatus, reason: &str, at: &str) -> Condition {
        Condition {
            r#type: "Admitted".into(),
            status,
            observed_generation: Some(1),
            last_transition_time: at.into(),
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let mut all = vec![cond(ConditionStatus::False, "Disabled", "t1")];
        assert!(!set_condition(
            &mut all,
            cond(ConditionStatus::False, "Disabled", "t2")
        ));
        assert_eq!(all[0].last_transition_time, "t1");
        assert!(set_condition(
            &mut all,
            cond(ConditionStatus::False, "Invalid", "t3")
        ));
        assert_eq!(all[0].last_transition_time, "t1");
        assert!(set_condition(
            &mut all,
            cond(ConditionStatus::True, "Admitted", "t4")
        ));
        assert_eq!(all[0].last_transition_time, "t4");
    }
}
