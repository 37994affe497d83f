//! What the instance's children should be, built from the facts `instance::gather` read and
//! the decision `decide` made: its Secrets, in the order they are written, and the Pod it
//! would run (or why none can). Pure: no client and no store; the fresh token and secret a new
//! Secret takes come in as a value ([`Fresh`]), so a test (or a snapshot) builds the same
//! objects every time.
//!
//! | child | built when | from |
//! |---|---|---|
//! | pull Secret (`<instance>-pull`) | HostConfig names registry credentials | `plugin_pod::build_pull_secret` |
//! | instance Secret (`<instance>-token`) | see `decide::secret_step`: made once, kept, an earlier instance's replaced | `pod::build_secret` |
//! | Pod | always (its inputs may be refused: then why) | `decide::pod_inputs`, `pod::build_pod` |
//!
//! Nothing is built while the instance cannot run (the decision says why).

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{Resource, ResourceExt};

use super::decide::{self, Decision, Facts, SecretStep};
use crate::plugin_pod::build_pull_secret;
use crate::pod::{build_pod, build_secret};
use model::names;

/// The token and secret a Secret made now takes (random, drawn by the reconcile).
#[derive(Clone, Debug)]
pub struct Fresh {
    pub token: String,
    pub secret: String,
}

/// One write of a Secret.
#[derive(Debug, PartialEq)]
pub enum SecretWrite<'a> {
    /// Made (`live` is `None`) or put right over `live`.
    Put {
        desired: Box<Secret>,
        live: Option<&'a Secret>,
    },
    /// An earlier instance's, deleted: never adopted, so the removed instance's token dies
    /// with it; once it is gone a fresh one is made.
    Replace(&'a Secret),
}

/// What the instance's children should be.
#[derive(Debug)]
pub struct Desired<'a> {
    /// Written first, in this order: the pull Secret (the Pod names it), then the instance's.
    pub secrets: Vec<SecretWrite<'a>>,
    /// The Pod it would run; or why none can.
    pub pod: Result<Pod, String>,
}

/// The instance's children, for `facts` and `decision`. The Secrets are built even when
/// `build_pod` then refuses the inputs (a root user, a gate without a command): the Secret is
/// the instance's whatever its Pod.
pub fn desired<'a>(facts: &'a Facts, decision: &Decision, fresh: &Fresh) -> Desired<'a> {
    let (run, parts) = match &decision.pod {
        Ok((run, parts)) => (run, parts),
        Err(why) => {
            return Desired {
                secrets: Vec::new(),
                pod: Err(why.clone()),
            };
        }
    };
    let spec = &facts.instance.spec;
    let owner = facts
        .instance
        .controller_owner_ref(&())
        .expect("instances have a uid");
    let mut secrets = Vec::new();
    let pull = facts.pull_credentials.as_deref().map(|credentials| {
        let labels = names::labels(&spec.plugin, &spec.project, &spec.channel, "pull");
        build_pull_secret(
            facts.name,
            facts.namespace,
            labels,
            owner.clone(),
            credentials,
        )
    });
    let pull_name = pull.as_ref().map(|secret| secret.name_any());
    if let Some(desired) = pull {
        secrets.push(SecretWrite::Put {
            desired: Box::new(desired),
            live: facts.pull_secret.as_ref(),
        });
    }
    let inputs = decide::pod_inputs(facts, run, parts, owner, pull_name.as_deref());
    match decide::secret_step(facts.secret.as_ref(), &inputs.owner) {
        SecretStep::Make => secrets.push(SecretWrite::Put {
            desired: Box::new(build_secret(&inputs, &fresh.token, &fresh.secret)),
            live: None,
        }),
        SecretStep::ReplaceEarlier(live) => secrets.push(SecretWrite::Replace(live)),
        SecretStep::Keep {
            live,
            token,
            secret,
        } => secrets.push(SecretWrite::Put {
            desired: Box::new(build_secret(&inputs, &token, &secret)),
            live: Some(live),
        }),
        SecretStep::Leave => {}
    }
    Desired {
        secrets,
        pod: build_pod(&inputs).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fixtures;
    use model::resources::PluginInstance;

    const STARTED: &str = "2026-01-01T10:00:00Z";

    fn fresh() -> Fresh {
        Fresh {
            token: "t".repeat(64),
            secret: "s".repeat(64),
        }
    }

    /// The facts of `instance` in [`fixtures::World::echo`]: echo installed and admitted, the
    /// channel and the project there, no Secret or Pod yet.
    fn facts(instance: &PluginInstance) -> Facts<'_> {
        fixtures::instance_facts(instance, fixtures::echo_plugin(), STARTED.parse().unwrap())
    }

    fn names(desired: &Desired) -> Vec<String> {
        desired
            .secrets
            .iter()
            .map(|w| match w {
                SecretWrite::Put { desired, live } => {
                    format!("put {} (live: {})", desired.name_any(), live.is_some())
                }
                SecretWrite::Replace(live) => format!("replace {}", live.name_any()),
            })
            .collect()
    }

    /// The children of a new instance whose HostConfig names registry credentials, whole, as a
    /// reviewer reads them (`src/instance/snapshots/`): the pull Secret first, the instance's
    /// Secret with the fresh token, the Pod naming both.
    #[test]
    fn the_children_of_a_new_instance_snapshot() {
        let instance = fixtures::instance();
        let mut facts = facts(&instance);
        facts.pull_credentials = Some(br#"{"auths":{}}"#.to_vec());
        let decision = decide::decide(&facts, STARTED.parse().unwrap());
        let desired = desired(&facts, &decision, &fresh());
        assert_eq!(
            names(&desired),
            [
                "put echo-general-pull (live: false)",
                "put echo-general-token (live: false)"
            ]
        );
        let secrets: Vec<&Secret> = desired
            .secrets
            .iter()
            .filter_map(|w| match w {
                SecretWrite::Put { desired, .. } => Some(desired.as_ref()),
                SecretWrite::Replace(_) => None,
            })
            .collect();
        insta::assert_yaml_snapshot!("instance_desired_secrets", secrets);
        let pod = desired.pod.expect("a Pod");
        let pull_secrets = pod.spec.as_ref().unwrap().image_pull_secrets.clone();
        assert_eq!(
            pull_secrets.unwrap()[0].name,
            "echo-general-pull",
            "the Pod names the pull Secret"
        );
        insta::assert_yaml_snapshot!("instance_desired_pod", pod);
    }

    #[test]
    fn a_kept_secret_keeps_its_token_and_an_earlier_instances_is_replaced() {
        let instance = fixtures::instance();
        /// The Secret writes of `instance` whose cache shows `secret`, `fresh` drawn.
        fn writes(instance: &PluginInstance, secret: Option<Secret>, fresh: &Fresh) -> Vec<String> {
            let mut facts = facts(instance);
            facts.secret = secret;
            let decision = decide::decide(&facts, STARTED.parse().unwrap());
            let desired = desired(&facts, &decision, fresh);
            desired
                .secrets
                .iter()
                .map(|w| match w {
                    SecretWrite::Put { desired, live } => format!(
                        "put {} with token {:?} (live: {})",
                        desired.name_any(),
                        String::from_utf8_lossy(&desired.data.as_ref().unwrap()["token"].0),
                        live.is_some()
                    ),
                    SecretWrite::Replace(live) => format!("replace {}", live.name_any()),
                })
                .collect()
        }
        let facts = facts(&instance);
        let decision = decide::decide(&facts, STARTED.parse().unwrap());
        let made = match desired(&facts, &decision, &fresh()).secrets.remove(0) {
            SecretWrite::Put { desired, .. } => *desired,
            other => panic!("{other:?}"),
        };
        let again = Fresh {
            token: "other".into(),
            secret: "other".into(),
        };
        let token = "t".repeat(64);
        assert_eq!(
            writes(&instance, Some(made.clone()), &again),
            [format!(
                "put echo-general-token with token {token:?} (live: true)"
            )],
            "the same Secret, its token kept"
        );
        let mut earlier = made;
        earlier.metadata.owner_references.as_mut().unwrap()[0].uid = "uid-earlier".into();
        assert_eq!(
            writes(&instance, Some(earlier), &again),
            ["replace echo-general-token"]
        );
    }

    #[test]
    fn an_instance_that_cannot_run_has_no_children_and_says_why() {
        let instance = fixtures::instance();
        let mut facts = facts(&instance);
        facts.plugin = None;
        facts.pull_credentials = Some(b"{}".to_vec());
        let decision = decide::decide(&facts, STARTED.parse().unwrap());
        let desired = desired(&facts, &decision, &fresh());
        assert!(desired.secrets.is_empty());
        assert_eq!(desired.pod.unwrap_err(), "Plugin echo is not installed");
    }

    #[test]
    fn the_secret_is_made_though_the_pod_is_refused() {
        let instance = fixtures::instance();
        let mut plugin = fixtures::echo_plugin();
        plugin
            .status
            .as_mut()
            .unwrap()
            .image
            .as_mut()
            .unwrap()
            .run_as_user = 0;
        let facts = fixtures::instance_facts(&instance, plugin, STARTED.parse().unwrap());
        let decision = decide::decide(&facts, STARTED.parse().unwrap());
        let desired = desired(&facts, &decision, &fresh());
        assert_eq!(names(&desired), ["put echo-general-token (live: false)"]);
        let why = desired.pod.unwrap_err();
        assert!(why.contains("root"), "{why}");
    }
}
