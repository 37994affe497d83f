//! settings: each a schema of the listed keywords whose default satisfies it; a secret one
//! (`"secret": true`) needs `secrets.read`, the capability its plugin reads it with.

use super::Ctx;
use super::read::optional_object;
use crate::capability::Capability;
use crate::settings_schema::{SECRET_KEYWORD, check_setting, is_secret};

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let Some((at, settings)) = optional_object(ctx.doc, "settings", &root, &mut ctx.problems)
    else {
        return;
    };
    for (name, schema) in settings {
        let setting_at = at.key(name);
        if name.trim().is_empty() {
            ctx.problems
                .add(&setting_at, "a setting's name must not be empty");
        }
        check_setting(schema, &setting_at, &mut ctx.problems);
        if is_secret(schema) {
            ctx.require(
                Capability::SecretsRead,
                &setting_at.key(SECRET_KEYWORD),
                "a secret setting needs",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn settings_pass() {
        M::new()
            .set(
                "settings",
                json!({
                    "count": { "type": "integer", "title": "Count", "minimum": 1, "maximum": 10, "default": 3 },
                    "sync_all": { "type": "boolean", "default": false }
                }),
            )
            .assert_valid();
    }

    #[test]
    fn bad_settings_are_refused_each_at_its_path() {
        let m = M::new().set(
            "settings",
            json!({
                "count": { "type": "integer", "minimum": 1, "maximum": 10, "default": 11 },
                "name": { "type": "string", "maxLength": 3 },
                "": { "type": "string" }
            }),
        );
        m.assert_problem("settings.count.default", "does not satisfy");
        m.assert_problem("settings.name.maxLength", "not a keyword a setting may use");
        m.assert_problem("settings[\"\"]", "must not be empty");
        M::new()
            .set("settings", json!([]))
            .assert_problem("settings", "must be an object");
    }

    #[test]
    fn a_secret_setting_needs_secrets_read() {
        let m = M::new().set(
            "settings",
            json!({ "api_token": { "type": "string", "title": "API token", "secret": true } }),
        );
        m.assert_problem(
            "settings.api_token.secret",
            "a secret setting needs \"secrets.read\" in capabilities",
        );
        m.caps(&["secrets.read"]).assert_valid();
        // Declaring the capability without a secret setting is fine: it reads nothing.
        M::new().caps(&["secrets.read"]).assert_valid();
    }
}
