//! A fresh namespace per test, and handy handles scoped to it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use devcluster::ImageMap;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, LogParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::Cluster;
use super::wait;

/// A test's own namespace on the shared cluster.
#[derive(Clone)]
pub struct Ns {
    cluster: Arc<Cluster>,
    name: String,
}

impl Ns {
    /// Creates a namespace named after the test, enforcing the `restricted` Pod Security
    /// level as a project's namespace would, and waits for its default ServiceAccount.
    pub async fn create(cluster: Arc<Cluster>, test_name: &str) -> anyhow::Result<Self> {
        let name = namespace_name(test_name);
        let api: Api<Namespace> = Api::all(cluster.client());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), &name);
        wait::exists(&accounts, "default", Duration::from_secs(60)).await?;
        Ok(Self { cluster, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.cluster.client()
    }

    /// An API for a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client(), &self.name)
    }

    /// The images the kubelet stand-in can run; tests may add their own. Local only.
    pub fn images(&self) -> anyhow::Result<&ImageMap> {
        Ok(self.cluster.dev()?.images())
    }

    /// kubectl with `-n <this namespace>`, as the admin.
    pub async fn kubectl<I, S>(&self, args: I) -> anyhow::Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut all = vec!["-n".to_string(), self.name.clone()];
        all.extend(args.into_iter().map(|a| a.as_ref().to_string()));
        Ok(self.cluster.kubectl().run(all).await?)
    }

    /// What a Pod's container wrote so far: the stand-in's log file, or the API's `pods/log`
    /// on an existing cluster (empty when there is none yet).
    pub async fn pod_log(&self, pod: &str, container: &str) -> String {
        match self.cluster.local() {
            Some(dev) => dev.pod_log(&self.name, pod, container),
            None => {
                let params = LogParams {
                    container: Some(container.to_string()),
                    ..Default::default()
                };
                self.api::<Pod>()
                    .logs(pod, &params)
                    .await
                    .unwrap_or_else(|e| format!("(no log: {e})"))
            }
        }
    }

    /// Reads a namespaced object, failing with its kind and name when missing.
    pub async fn get<K>(&self, name: &str) -> anyhow::Result<K>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        let kind = K::kind(&Default::default()).to_string();
        self.api::<K>()
            .get(name)
            .await
            .with_context(|| format!("reading {kind} {}/{name}", self.name))
    }

    /// Deletes the namespace (without waiting for it to go).
    pub async fn delete(&self) {
        let api: Api<Namespace> = Api::all(self.client());
        let _ = api.delete(&self.name, &DeleteParams::background()).await;
    }
}

/// A test namespace's labels: ours, and Pod Security's `restricted` level enforced, so every
/// Pod a test makes there (plugin Pods, CronJobs' Pods, the tests' own) must meet it and the
/// API server refuses one that does not.
fn labels() -> std::collections::BTreeMap<String, String> {
    [
        ("loop-plugins.dev/e2e", "true"),
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `e2e-<test name, sanitized>-<random>`, at most 63 characters.
fn namespace_name(test: &str) -> String {
    let mut slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    slug.truncate(44);
    let slug = slug.trim_matches('-');
    format!("e2e-{slug}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}
