//! The plugin contract as `openapi/plugin-contract-v1.yaml` states it, compiled into what the
//! checks need: a validator for each answer's schema and each route's time limit
//! (`x-loop-time-limit-seconds`). Read from the spec, not restated, so the check and the spec
//! cannot drift apart.

use std::collections::BTreeMap;
use std::time::Duration;

use jsonschema::Validator;
use serde_json::{Value, json};

use crate::error::ContractError;

/// The spec, compiled in.
pub const SPEC: &str = include_str!("../../../openapi/plugin-contract-v1.yaml");

/// The answer bodies the contract gives a schema to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Shape {
    Health,
    ActionAccepted,
    ToolResult,
    SwitchState,
    Error,
}

impl Shape {
    const ALL: [Shape; 5] = [
        Shape::Health,
        Shape::ActionAccepted,
        Shape::ToolResult,
        Shape::SwitchState,
        Shape::Error,
    ];

    /// Its name under `components.schemas`.
    pub fn schema_name(self) -> &'static str {
        match self {
            Shape::Health => "Health",
            Shape::ActionAccepted => "ActionAccepted",
            Shape::ToolResult => "ToolResult",
            Shape::SwitchState => "SwitchState",
            Shape::Error => "Error",
        }
    }
}

/// The routes with a time limit, by the spec's path template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Route {
    Health,
    Action,
    Tool,
    RunDone,
    Event,
    Switch,
    X,
}

impl Route {
    const ALL: [Route; 7] = [
        Route::Health,
        Route::Action,
        Route::Tool,
        Route::RunDone,
        Route::Event,
        Route::Switch,
        Route::X,
    ];

    /// The path template in the spec, and the method whose limit applies.
    fn in_spec(self) -> (&'static str, &'static str) {
        match self {
            Route::Health => ("/healthz", "get"),
            Route::Action => ("/actions/{action}", "post"),
            Route::Tool => ("/tools/{tool}", "post"),
            Route::RunDone => ("/runs/{run_id}/done", "post"),
            Route::Event => ("/events", "post"),
            Route::Switch => ("/switches/{switch}", "post"),
            Route::X => ("/x/{path}", "post"),
        }
    }
}

/// `/healthz` has no limit in the spec ("the host uses it to check that a started container
/// answers"); the check still has to stop waiting somewhere, and the host's own start-up
/// probe gives a container this long.
pub const HEALTH_WAIT: Duration = Duration::from_secs(10);

/// What a tool answer may weigh when the spec does not say (`x-loop-max-answer-bytes` of
/// `POST /tools/{tool}`): the reference's 1 MB, as `manifest::sizes` counts it.
pub const DEFAULT_MAX_TOOL_ANSWER: usize = manifest::sizes::TOOL_ANSWER_MAX_BYTES as usize;

/// The compiled contract.
pub struct Contract {
    validators: BTreeMap<Shape, Validator>,
    time_limits: BTreeMap<Route, Duration>,
    max_tool_answer: usize,
}

impl Contract {
    /// Compiles the compiled-in spec.
    pub fn load() -> Result<Self, ContractError> {
        let spec: Value =
            serde_saphyr::from_str(SPEC).map_err(|e| ContractError::Parse(e.to_string()))?;
        Self::from_spec(&spec)
    }

    pub fn from_spec(spec: &Value) -> Result<Self, ContractError> {
        let components = spec
            .get("components")
            .ok_or(ContractError::Missing("components".into()))?;
        let mut validators = BTreeMap::new();
        for shape in Shape::ALL {
            let name = shape.schema_name();
            if components.pointer(&format!("/schemas/{name}")).is_none() {
                return Err(ContractError::Missing(format!("components.schemas.{name}")));
            }
            // The schema as a $ref into the spec's components, so its own refs resolve.
            let root = json!({
                "$ref": format!("#/components/schemas/{name}"),
                "components": components,
            });
            let validator =
                jsonschema::validator_for(&root).map_err(|e| ContractError::Schema {
                    name: name.into(),
                    message: e.to_string(),
                })?;
            validators.insert(shape, validator);
        }
        let mut time_limits = BTreeMap::new();
        for route in Route::ALL {
            let (path, method) = route.in_spec();
            let op = spec
                .get("paths")
                .and_then(|p| p.get(path))
                .and_then(|p| p.get(method))
                .ok_or_else(|| ContractError::Missing(format!("paths.{path}.{method}")))?;
            let limit = match op.get("x-loop-time-limit-seconds").and_then(Value::as_u64) {
                Some(seconds) => Duration::from_secs(seconds),
                None if route == Route::Health => HEALTH_WAIT,
                None => {
                    return Err(ContractError::Missing(format!(
                        "paths.{path}.{method}.x-loop-time-limit-seconds"
                    )));
                }
            };
            time_limits.insert(route, limit);
        }
        let max_tool_answer = spec
            .pointer("/paths/~1tools~1{tool}/post/x-loop-max-answer-bytes")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_MAX_TOOL_ANSWER, |n| n as usize);
        Ok(Self {
            validators,
            time_limits,
            max_tool_answer,
        })
    }

    /// Checks `value` against the shape's schema; the error names where it broke it.
    pub fn conforms(&self, shape: Shape, value: &Value) -> Result<(), String> {
        let validator = &self.validators[&shape];
        let problems: Vec<String> = manifest::json_schema::reasons(validator, value).collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "not a {}: {}",
                shape.schema_name(),
                problems.join("; ")
            ))
        }
    }

    /// The same contract with no time limit over `cap`: for tests of the check itself, whose
    /// plugins that never answer should not hold them for a minute.
    pub fn with_time_limits_capped(mut self, cap: Duration) -> Self {
        for limit in self.time_limits.values_mut() {
            *limit = (*limit).min(cap);
        }
        self
    }

    /// How long the host waits for an answer on `route`.
    pub fn time_limit(&self, route: Route) -> Duration {
        self.time_limits[&route]
    }

    /// The most a tool's answer may weigh.
    pub fn max_tool_answer(&self) -> usize {
        self.max_tool_answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_compiles_with_its_limits() {
        let c = Contract::load().unwrap();
        assert_eq!(c.time_limit(Route::Action), Duration::from_secs(10));
        assert_eq!(c.time_limit(Route::Tool), Duration::from_secs(60));
        assert_eq!(c.time_limit(Route::X), Duration::from_secs(30));
        assert_eq!(c.time_limit(Route::Health), HEALTH_WAIT);
        assert_eq!(
            c.max_tool_answer() as u64,
            manifest::sizes::TOOL_ANSWER_MAX_BYTES
        );
    }

    #[test]
    fn answers_are_held_to_their_schemas() {
        let c = Contract::load().unwrap();
        c.conforms(Shape::Health, &json!({"status": "ok", "version": "1"}))
            .unwrap();
        let err = c
            .conforms(Shape::Health, &json!({"status": "fine"}))
            .unwrap_err();
        assert!(err.contains("Health") && err.contains("version"), "{err}");
        assert!(
            c.conforms(Shape::ActionAccepted, &json!({"accepted": false}))
                .is_err()
        );
        assert!(
            c.conforms(Shape::ToolResult, &json!({"content": [{"type": "image"}]}))
                .is_err()
        );
        assert!(c.conforms(Shape::Error, &json!({"message": "x"})).is_err());
        let long = "x".repeat(201);
        assert!(
            c.conforms(Shape::SwitchState, &json!({"on": true, "title": long}))
                .is_err()
        );
    }

    #[test]
    fn a_spec_without_a_limit_is_refused() {
        let mut spec: Value = serde_saphyr::from_str(SPEC).unwrap();
        spec["paths"]["/events"]["post"]
            .as_object_mut()
            .unwrap()
            .remove("x-loop-time-limit-seconds");
        assert!(matches!(
            Contract::from_spec(&spec),
            Err(ContractError::Missing(m)) if m.contains("/events")
        ));
    }
}
