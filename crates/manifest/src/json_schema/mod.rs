//! Compiling the JSON schemas a manifest carries (tool input and output, settings) and checking
//! values against them, with messages people can read. A schema that could make checking a
//! value loop or multiply its work is refused when it is compiled ([`cost`]).

pub mod cost;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::Value;

/// Schemas by name, compiled on first use and kept: a manifest's setting schemas compile once
/// per parsed manifest (the API server parses a Plugin's manifest once per generation), not on
/// every request that resolves settings. Copies start empty; it never takes part in equality.
#[derive(Default)]
pub struct CompiledSchemas(OnceLock<BTreeMap<String, Result<Validator, String>>>);

impl CompiledSchemas {
    /// The compiled schemas, compiling every one of `schemas` on the first call.
    pub fn get_or_compile<'a>(
        &self,
        schemas: impl IntoIterator<Item = (&'a String, &'a Value)>,
    ) -> &BTreeMap<String, Result<Validator, String>> {
        self.0.get_or_init(|| {
            schemas
                .into_iter()
                .map(|(name, schema)| (name.clone(), compile(schema).map_err(|e| e.to_string())))
                .collect()
        })
    }
}

impl Clone for CompiledSchemas {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for CompiledSchemas {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for CompiledSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let compiled = self.0.get().map_or(0, BTreeMap::len);
        write!(f, "CompiledSchemas({compiled} compiled)")
    }
}

/// Why a schema cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// It is not a JSON schema jsonschema compiles.
    #[error("{0}")]
    Invalid(String),
    /// It compiles, but checking a value with it could loop or multiply ([`cost::check`]).
    #[error("{0}")]
    TooCostly(String),
}

/// Compiles a schema document; the error says why it isn't a valid JSON schema, or why this
/// host refuses it ([`cost::check`]).
pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        let at = e.instance_path().to_string();
        SchemaError::Invalid(if at.is_empty() {
            e.to_string()
        } else {
            format!("at {at}: {e}")
        })
    })?;
    cost::check(schema).map_err(SchemaError::TooCostly)?;
    Ok(validator)
}

impl SchemaError {
    /// The problem as the manifest's rules report it at the schema's path.
    pub fn problem(&self) -> String {
        match self {
            SchemaError::Invalid(why) => format!("does not compile as a JSON schema: {why}"),
            SchemaError::TooCostly(why) => format!("is refused: it {why}"),
        }
    }
}

/// Why the schema refuses `value`, each reason prefixed with where in it (none: it conforms).
pub fn reasons<'a>(
    validator: &'a Validator,
    value: &'a Value,
) -> impl Iterator<Item = String> + 'a {
    validator.iter_errors(value).map(|e| {
        let at = e.instance_path().to_string();
        if at.is_empty() {
            e.to_string()
        } else {
            format!("at {at}: {e}")
        }
    })
}

/// Checks a value; the error lists why the schema refuses it (at most 5 reasons).
pub fn check(validator: &Validator, value: &Value) -> Result<(), String> {
    let reasons: Vec<String> = reasons(validator, value).take(5).collect();
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn compiles_and_checks() {
        let v = compile(
            &json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}),
        )
        .unwrap();
        assert!(check(&v, &json!({"n": 2})).is_ok());
        let err = check(&v, &json!({"n": 4})).unwrap_err();
        assert!(err.contains("/n"), "{err}");
        assert!(err.contains('3'), "{err}");
    }

    #[test]
    fn refuses_bad_schemas() {
        assert!(compile(&json!({"type": "objekt"})).is_err());
        assert!(compile(&json!({"type": "string", "pattern": "("})).is_err());
        assert!(compile(&json!({"minimum": "ten"})).is_err());
    }
}
