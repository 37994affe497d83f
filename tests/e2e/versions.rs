//! The control plane's binaries report the releases hack/controlplane/go.mod pins, and the
//! running API server says so too.

use anyhow::{Context, ensure};
use devcluster::binaries::repo_root;

use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "versions::binaries_report_their_pinned_versions",
            binaries_report_their_pinned_versions,
        )
        .local_only("the API server it asks is the one the suite built and started"),
    ]
}

/// The version go.mod pins for `module`.
fn pinned(go_mod: &str, module: &str) -> anyhow::Result<String> {
    go_mod
        .lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(&format!("{module} ")))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .with_context(|| format!("{module} is not in go.mod"))
}

async fn version_of(dir: &std::path::Path, binary: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(dir.join(binary))
        .args(args)
        .output()
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
}

async fn binaries_report_their_pinned_versions(ns: Ns) -> anyhow::Result<()> {
    let go_mod = std::fs::read_to_string(repo_root().join("hack/controlplane/go.mod"))?;
    let kubernetes = pinned(&go_mod, "k8s.io/kubernetes")?;
    let etcd = pinned(&go_mod, "go.etcd.io/etcd/server/v3")?;
    let helm = pinned(&go_mod, "helm.sh/helm/v4")?;
    let dir = ns
        .cluster()
        .dev()?
        .control_plane()
        .binaries()
        .dir()
        .to_path_buf();
    for (binary, args, want) in [
        (
            "kube-apiserver",
            vec!["--version"],
            format!("Kubernetes {kubernetes}"),
        ),
        (
            "kube-controller-manager",
            vec!["--version"],
            format!("Kubernetes {kubernetes}"),
        ),
        (
            "kubectl",
            vec!["version", "--client"],
            format!("Client Version: {kubernetes}"),
        ),
        (
            "etcd",
            vec!["--version"],
            format!("etcd Version: {}", etcd.trim_start_matches('v')),
        ),
        ("helm", vec!["version"], format!("Version:\"{helm}\"")),
    ] {
        let got = version_of(&dir, binary, &args).await?;
        ensure!(
            got.contains(&want),
            "{binary} reports {got:?}, not {want:?}"
        );
    }
    let info = ns.client().apiserver_version().await?;
    ensure!(
        info.git_version == kubernetes,
        "the API server says {}",
        info.git_version
    );
    Ok(())
}
