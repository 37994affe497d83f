//! Who does what: the chart's own RBAC (rendered with the built helm, applied with kubectl),
//! and a ServiceAccount per role bound to the chart's roles, so a missing permission fails the
//! run and the API server's audit log tells each role's writes apart (in the chart the two
//! containers share one account):
//!
//! - the controller: the chart's `-controller` ClusterRole and the leader-election Role;
//! - the API server: `-api`, `-api-runs` and the leader-election Role;
//! - the bare client of the baseline: the controller's ClusterRole, so its requests take the
//!   same path through the API server (a ServiceAccount's, not the admin's exempt one);
//! - the host API's caller (the app): the chart's `-host-api-caller` ClusterRole.

use std::path::PathBuf;

use anyhow::{Context, ensure};
use devcluster::DevCluster;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::world::{RELEASE, SYSTEM_NAMESPACE, apply, namespaces_made};

/// The chart's name prefix for the release.
pub fn fullname() -> String {
    format!("{RELEASE}-loop-plugins")
}

/// A role of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Controller,
    Api,
    Bare,
    Caller,
}

impl Role {
    /// Its ServiceAccount's name.
    pub fn account(self) -> &'static str {
        match self {
            Role::Controller => "scale-controller",
            Role::Api => "scale-api",
            Role::Bare => "scale-bare",
            Role::Caller => "scale-caller",
        }
    }

    /// Its username, as the audit log has it.
    pub fn user(self) -> String {
        format!(
            "system:serviceaccount:{SYSTEM_NAMESPACE}:{}",
            self.account()
        )
    }

    /// The chart's ClusterRoles it is bound to, cluster-wide.
    fn cluster_roles(self) -> Vec<String> {
        let f = fullname();
        match self {
            Role::Controller | Role::Bare => vec![format!("{f}-controller")],
            Role::Api => vec![format!("{f}-api")],
            Role::Caller => vec![format!("{f}-host-api-caller")],
        }
    }

    /// The chart's Roles in the release namespace it is bound to.
    fn roles(self) -> Vec<String> {
        let f = fullname();
        match self {
            Role::Controller => vec![format!("{f}-leader-election")],
            Role::Api => vec![format!("{f}-api-runs"), format!("{f}-leader-election")],
            Role::Bare | Role::Caller => vec![],
        }
    }
}

/// The identities of a run: a kubeconfig (and client, and token) per role.
pub struct Identities {
    pub controller: PathBuf,
    pub api: PathBuf,
    pub bare: Client,
    pub caller_token: String,
}

/// Renders the chart's RBAC for [`RELEASE`], applies it, makes an account per role bound to
/// the chart's roles and writes their kubeconfigs into the run's folder.
pub async fn set_up(cluster: &DevCluster) -> anyhow::Result<Identities> {
    let client = cluster.client();
    namespaces_made(&client, &[SYSTEM_NAMESPACE.to_string()]).await?;
    let docs = render(cluster).await?;
    let rbac: Vec<Value> = docs
        .into_iter()
        .filter(|d| {
            d["kind"] == "ServiceAccount"
                || d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("rbac.authorization.k8s.io/"))
        })
        .collect();
    ensure!(!rbac.is_empty(), "the chart rendered no RBAC");
    let file = cluster.run_dir().join("scale-rbac.json");
    std::fs::write(
        &file,
        serde_json::to_vec_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": rbac}))?,
    )?;
    let path = file.to_string_lossy().to_string();
    cluster
        .kubectl()
        .run([
            "apply",
            "--server-side",
            "--field-manager=scale-bench",
            "-f",
            &path,
        ])
        .await?;
    let mut tokens = Vec::new();
    for role in [Role::Controller, Role::Api, Role::Bare, Role::Caller] {
        bind(&client, role).await?;
        tokens.push(token(&client, role).await?);
    }
    let plane = cluster.control_plane();
    let kubeconfig = |role: Role, token: &str| -> anyhow::Result<PathBuf> {
        let path = cluster
            .run_dir()
            .join(format!("{}.kubeconfig", role.account()));
        devcluster::kubeconfig::write(
            &path,
            plane.server(),
            plane.ca_pem(),
            role.account(),
            token,
        )?;
        Ok(path)
    };
    Ok(Identities {
        controller: kubeconfig(Role::Controller, &tokens[0])?,
        api: kubeconfig(Role::Api, &tokens[1])?,
        bare: plane.client_with_token(&tokens[2])?,
        caller_token: tokens[3].clone(),
    })
}

/// `helm template` of the chart for [`RELEASE`] in [`SYSTEM_NAMESPACE`].
async fn render(cluster: &DevCluster) -> anyhow::Result<Vec<Value>> {
    let helm = cluster.control_plane().binaries().path("helm");
    let cache = cluster.run_dir().join("helm");
    let output = tokio::process::Command::new(&helm)
        .args([
            "template",
            RELEASE,
            "charts/loop-plugins",
            "--namespace",
            SYSTEM_NAMESPACE,
        ])
        .current_dir(testkit::repo_root())
        .env("HELM_CACHE_HOME", cache.join("cache"))
        .env("HELM_CONFIG_HOME", cache.join("config"))
        .env("HELM_DATA_HOME", cache.join("data"))
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", helm.display()))?;
    ensure!(
        output.status.success(),
        "helm template: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout)?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).context("parsing helm's output")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The role's account and its bindings to the chart's roles.
async fn bind(client: &Client, role: Role) -> anyhow::Result<()> {
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(role.account().into());
    account.metadata.namespace = Some(SYSTEM_NAMESPACE.into());
    apply(
        &Api::<ServiceAccount>::namespaced(client.clone(), SYSTEM_NAMESPACE),
        &account,
    )
    .await?;
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: role.account().into(),
        namespace: Some(SYSTEM_NAMESPACE.into()),
        ..Default::default()
    };
    for cluster_role in role.cluster_roles() {
        let mut binding = ClusterRoleBinding {
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: cluster_role.clone(),
            },
            subjects: Some(vec![subject.clone()]),
            ..Default::default()
        };
        binding.metadata.name = Some(format!("{}-{cluster_role}", role.account()));
        apply(&Api::<ClusterRoleBinding>::all(client.clone()), &binding).await?;
    }
    for name in role.roles() {
        let mut binding = RoleBinding {
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: name.clone(),
            },
            subjects: Some(vec![subject.clone()]),
            ..Default::default()
        };
        binding.metadata.name = Some(format!("{}-{name}", role.account()));
        binding.metadata.namespace = Some(SYSTEM_NAMESPACE.into());
        apply(
            &Api::<RoleBinding>::namespaced(client.clone(), SYSTEM_NAMESPACE),
            &binding,
        )
        .await?;
    }
    Ok(())
}

/// A day's token for the role's account.
async fn token(client: &Client, role: Role) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(24 * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(role.account(), &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .with_context(|| format!("the TokenRequest of {} has no token", role.account()))
}
