//! Request-level tests of secret settings (`GET /settings/secrets/{name}`, and their absence
//! from `GET /channel`): the full manifest's `api_token` is secret, the project's trusted
//! config references `cogtest-creds` (key `token`) in the chat's namespace, and the Secrets
//! are read live from [`FakeSecrets`], which counts each read.

use axum::http::StatusCode;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::fixtures::*;
use crate::plugin_api::secrets::SecretReadError;
use model::config::{PluginsConfig, SecretSettingSource};
use model::resources::ProjectTrust;

const ROUTE: &str = "/settings/secrets/api_token";

/// The world's project config, changed by `change`.
fn config_with(change: impl FnOnce(&mut model::config::PluginConfig)) -> PluginsConfig {
    let mut config = World::new().project.spec.plugins;
    change(config.get_mut(PLUGIN).expect("the plugin's entry"));
    config
}

/// A world whose project's current config is `config`, trusted or not (the trust stays on
/// the fixture's config then).
fn project_config(config: PluginsConfig, trusted: bool) -> World {
    let mut w = World::new();
    if trusted {
        let mut trust = ProjectTrust::of(PROJECT, &config);
        trust.metadata = w.trust.take().unwrap().metadata;
        w.trust = Some(trust);
    }
    w.project.spec.plugins = config;
    w
}

/// The global config references `host-creds` in the release namespace, and enables the
/// plugin in every project.
fn global_reference(mut w: World) -> World {
    let entry = w.host.spec.plugins.defaults.get_mut(PLUGIN).unwrap();
    entry.enabled = Some(true);
    entry.secret_settings.insert(
        "api_token".into(),
        SecretSettingSource::key_of("host-creds", "token"),
    );
    w.settings_secrets.push(opaque_secret(
        RELEASE_NS,
        "host-creds",
        &[("token", "host-token")],
    ));
    w
}

/// One request in a world of its own, and what it must answer.
struct Case {
    what: &'static str,
    world: World,
    path: &'static str,
    status: StatusCode,
    /// The error code; empty for the value.
    code: &'static str,
    /// A part of the message, or the value answered.
    says: &'static str,
}

fn case(what: &'static str, world: World, path: &'static str) -> Case {
    Case {
        what,
        world,
        path,
        status: StatusCode::OK,
        code: "",
        says: "",
    }
}

impl Case {
    fn value(mut self, value: &'static str) -> Self {
        self.says = value;
        self
    }

    fn fails(mut self, status: StatusCode, code: &'static str, says: &'static str) -> Self {
        (self.status, self.code, self.says) = (status, code, says);
        self
    }
}

#[tokio::test]
async fn each_name_answers_its_secrets_value_or_why_not() {
    use StatusCode as S;
    let untrusted_change = config_with(|e| {
        e.secret_settings.insert(
            "api_token".into(),
            SecretSettingSource::key_of("other-creds", "token"),
        );
    });
    let mut other_creds = World::new();
    other_creds.settings_secrets.push(opaque_secret(
        NS,
        "other-creds",
        &[("token", "other-token")],
    ));
    let no_reference = config_with(|e| e.secret_settings.clear());
    let mut no_key = World::new();
    no_key.settings_secrets = vec![opaque_secret(NS, CREDS, &[("password", "x")])];
    let mut not_text = World::new();
    not_text.settings_secrets = vec![opaque_secret(NS, CREDS, &[])];
    not_text.settings_secrets[0]
        .data
        .as_mut()
        .unwrap()
        .insert(CREDS_KEY.into(), k8s_openapi::ByteString(vec![0xff, 0xfe]));
    let mut gone = World::new();
    gone.settings_secrets.clear();

    let cases = vec![
        case("the project's reference", World::new(), ROUTE).value(CREDS_VALUE),
        case(
            "the project's reference over the global one",
            global_reference(World::new()),
            ROUTE,
        )
        .value(CREDS_VALUE),
        case(
            "the global reference, from the release namespace",
            global_reference(project_config(no_reference.clone(), true)),
            ROUTE,
        )
        .value("host-token"),
        case(
            "a changed reference waits for the owner's trust",
            {
                let mut w = project_config(untrusted_change.clone(), false);
                w.settings_secrets = other_creds.settings_secrets.clone();
                w
            },
            ROUTE,
        )
        .value(CREDS_VALUE),
        case(
            "a trusted changed reference counts",
            {
                let mut w = project_config(untrusted_change, true);
                w.settings_secrets = other_creds.settings_secrets;
                w
            },
            ROUTE,
        )
        .value("other-token"),
        case(
            "a setting that is not secret",
            World::new(),
            "/settings/secrets/question_count",
        )
        .fails(S::NOT_FOUND, "setting_not_found", "is not secret"),
        case(
            "a setting the manifest does not declare",
            World::new(),
            "/settings/secrets/nope",
        )
        .fails(S::NOT_FOUND, "setting_not_found", "declares no setting"),
        case(
            "no reference anywhere",
            project_config(no_reference, true),
            ROUTE,
        )
        .fails(S::NOT_FOUND, "secret_not_set", "has no Secret reference"),
        case("the Secret does not exist", gone, ROUTE).fails(
            S::CONFLICT,
            "secret_unavailable",
            "Secret team/cogtest-creds does not exist",
        ),
        case("the key does not exist", no_key, ROUTE).fails(
            S::CONFLICT,
            "secret_unavailable",
            "has no key token",
        ),
        case("the value is no text", not_text, ROUTE).fails(
            S::CONFLICT,
            "secret_unavailable",
            "not UTF-8 text",
        ),
        case(
            "without secrets.read",
            World::new().approve(&[model::manifest::Capability::MemoryRead]),
            ROUTE,
        )
        .fails(S::FORBIDDEN, "capability_not_approved", "secrets.read"),
    ];
    let mut failures = vec![];
    for c in cases {
        let h = c.world.build();
        let a = h.call("GET", c.path, Some(TOKEN_A), None).await;
        let body = a.json();
        let got = match c.code {
            "" => (a.status, "", body["value"].as_str().unwrap_or_default()),
            _ => (
                a.status,
                body["error"]["code"].as_str().unwrap_or_default(),
                body["error"]["message"].as_str().unwrap_or_default(),
            ),
        };
        let fits = got.0 == c.status
            && got.1 == c.code
            && if c.code.is_empty() {
                got.2 == c.says
            } else {
                got.2.contains(c.says)
            };
        if !fits {
            failures.push(format!("{}: answered {body}", c.what));
        }
        // An error never quotes a Secret's value.
        if !c.code.is_empty()
            && ["ghp_", "host-token", "other-token"]
                .iter()
                .any(|v| got.2.contains(v))
        {
            failures.push(format!("{}: the message quotes a value: {body}", c.what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn every_call_reads_the_secret_now_and_names_its_revision() {
    let h = World::new().build();
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({ "name": "api_token", "value": CREDS_VALUE, "revision": "1" })
    );
    assert_eq!(a.headers["cache-control"], "no-store");

    // Rotated: the next call answers the new value and its revision.
    h.secrets
        .put(opaque_secret(NS, CREDS, &[(CREDS_KEY, "ghp_rotated")]));
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(
        a.json(),
        json!({ "name": "api_token", "value": "ghp_rotated", "revision": "2" })
    );
    // Chat b reads the same project's Secret; every call was one read, none cached.
    let b = h.call("GET", ROUTE, Some(TOKEN_B), None).await;
    assert_eq!(b.json()["revision"], "2");
    let read = (NS.to_string(), CREDS.to_string());
    assert_eq!(h.secrets.reads(), [read.clone(), read.clone(), read]);

    // Deleted: the next call says so.
    h.secrets.delete(NS, CREDS);
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "secret_unavailable".to_string())
    );
}

#[tokio::test]
async fn a_read_the_server_cannot_make_is_503_and_refusals_read_nothing() {
    let h = World::new().build();
    *h.secrets.failure.lock().unwrap() = Some(SecretReadError::Forbidden {
        namespace: NS.into(),
        name: CREDS.into(),
    });
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_string())
    );
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("may not get Secret team/cogtest-creds")
    );

    // 401, 403 and a name that is no secret setting come before any read.
    let h = World::new()
        .approve(&[model::manifest::Capability::MemoryRead])
        .build();
    h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    h.call("GET", ROUTE, Some("nope"), None).await;
    let h2 = World::new().build();
    h2.call(
        "GET",
        "/settings/secrets/question_count",
        Some(TOKEN_A),
        None,
    )
    .await;
    assert!(h.secrets.reads().is_empty());
    assert!(h2.secrets.reads().is_empty());
}

#[tokio::test]
async fn secret_settings_are_never_in_get_channel() {
    // A value written inline for the secret setting is left out, as a reference is never a
    // value.
    let inline = config_with(|e| {
        e.settings
            .insert("api_token".into(), json!("ghp_inline-leak"));
    });
    let h = project_config(inline, true).build();
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::OK);
    let settings = a.json()["settings"].clone();
    assert!(settings.get("api_token").is_none(), "{settings}");
    assert_eq!(settings["question_count"], 8);
    let text = String::from_utf8_lossy(&a.bytes).to_string();
    for never in ["ghp_", CREDS, "secretKeyRef"] {
        assert!(!text.contains(never), "GET /channel says {never}: {text}");
    }
    // Nor does a read leave it in the stores: the route writes nothing.
    let h = World::new().build();
    h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert!(h.writer.all().is_empty());
    assert!(h.secrets.reads().len() == 1);
}

#[tokio::test]
async fn the_reference_comes_from_the_stores_as_they_are_now() {
    // The trust is deleted: the project's config counts for nothing, so neither does its
    // reference; the global one takes over at once.
    let w = global_reference(World::new());
    let trust = w.trust.clone().unwrap();
    let mut h = w.build();
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(a.json()["value"], CREDS_VALUE);
    h.writers
        .project_trusts
        .apply_watcher_event(&watcher::Event::Delete(trust));
    h.changed();
    let a = h.call("GET", ROUTE, Some(TOKEN_A), None).await;
    assert_eq!(a.json()["value"], Value::from("host-token"), "{a:?}");
}
