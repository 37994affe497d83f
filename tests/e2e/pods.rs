//! Pods on the kubelet stand-in: their own 127.x address, readiness from their port, volumes
//! and env as the spec says, restarts, and deletion that ends the process.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{DeleteParams, PostParams};
use model::contract::SERVICE_ACCOUNT_TOKEN;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cluster::phase;
use devcluster::LocalImage;

use crate::support::{E2eTest, IMAGE_SH, Ns, program, restricted, test, wait};

/// Why these tests run on the local control plane only.
const LOCAL: &str = "checks the kubelet stand-in, with images it plays";

pub fn tests() -> Vec<E2eTest> {
    let tests = vec![
        test(
            "pods::pod_is_ready_on_its_own_address_and_answers_http",
            pod_is_ready_on_its_own_address_and_answers_http,
        ),
        test(
            "pods::env_and_files_come_from_secrets_config_maps_and_the_downward_api",
            env_and_files_come_from_secrets_config_maps_and_the_downward_api,
        ),
        test(
            "pods::always_restarts_a_container_that_exits",
            always_restarts_a_container_that_exits,
        ),
    ];
    tests.into_iter().map(|t| t.local_only(LOCAL)).collect()
}

const WAIT: Duration = Duration::from_secs(60);

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// GET `path` over plain HTTP/1.0; returns the status line and the body.
async fn http_get(ip: Ipv4Addr, port: u16, path: &str) -> anyhow::Result<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect((ip, port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n").as_bytes())
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    Ok((status, body.to_string()))
}

async fn pod_is_ready_on_its_own_address_and_answers_http(ns: Ns) -> anyhow::Result<()> {
    let maps = ns.api::<ConfigMap>();
    let site: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "site" },
        "data": { "index.html": "hello from the stand-in\n" }
    }))?;
    maps.create(&PostParams::default(), &site).await?;
    // An image of this test's own: python3 with http.server as its entrypoint.
    let image = format!("e2e.local/{}/http-server", ns.name());
    let server = LocalImage::new(program("python3")).entrypoint_args(["-m", "http.server"]);
    ns.images()?.insert(&image, server);
    let pods = ns.api::<Pod>();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "containers": [{
                "name": "web",
                "image": format!("{image}@sha256:{}", "ab".repeat(32)),
                "args": ["--bind", "$(POD_IP)", "--directory", "/srv/www", "8080"],
                "env": [{ "name": "POD_IP", "valueFrom": { "fieldRef": { "fieldPath": "status.podIP" } } }],
                "ports": [{ "name": "http", "containerPort": 8080 }],
                "readinessProbe": { "tcpSocket": { "port": "http" } },
                "volumeMounts": [{ "name": "site", "mountPath": "/srv/www" }]
            }],
            "volumes": [{ "name": "site", "configMap": { "name": "site" } }]
        }
    }))?;
    let pod = restricted(pod);
    pods.create(&PostParams::default(), &pod).await?;
    let pod = wait::matches(&pods, "web", "pod web Ready", WAIT, ready).await?;
    let status = pod.status.clone().unwrap_or_default();
    let ip: Ipv4Addr = status.pod_ip.clone().context("no podIP")?.parse()?;
    ensure!(
        ip.octets()[0] == 127 && ip != Ipv4Addr::LOCALHOST,
        "podIP {ip} is not a 127.x address of its own"
    );
    ensure!(phase(&pod) == Some("Running"));
    ensure!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            == Some(ns.cluster().dev()?.kubelet().node_name())
    );

    let (status_line, body) = http_get(ip, 8080, "/index.html").await?;
    ensure!(status_line.contains(" 200 "), "answer: {status_line}");
    ensure!(body == "hello from the stand-in\n", "body: {body:?}");

    pods.delete("web", &DeleteParams::default()).await?;
    wait::deleted(&pods, "web", WAIT).await?;
    ensure!(
        tokio::net::TcpStream::connect((ip, 8080)).await.is_err(),
        "the server still answers after its Pod was deleted"
    );
    Ok(())
}

async fn env_and_files_come_from_secrets_config_maps_and_the_downward_api(
    ns: Ns,
) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "creds" },
        "stringData": { "token": "s3cret", "file.txt": "from a secret volume" }
    }))?;
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "settings" },
        "data": { "GREETING": "hi", "MODE": "dev" }
    }))?;
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &map)
        .await?;
    let script = format!(
        r#"echo "token=$TOKEN greeting=$CFG_GREETING mode=$CFG_MODE ns=$NS file=$(cat $SECRET_DIR/file.txt) sa=$(test -s {SERVICE_ACCOUNT_TOKEN} && echo yes)""#
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "env" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": IMAGE_SH,
                "command": ["sh", "-c", script],
                "envFrom": [{ "prefix": "CFG_", "configMapRef": { "name": "settings" } }],
                "env": [
                    { "name": "TOKEN", "valueFrom": { "secretKeyRef": { "name": "creds", "key": "token" } } },
                    { "name": "NS", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                    { "name": "SECRET_DIR", "value": "/etc/creds" }
                ],
                "volumeMounts": [{ "name": "creds", "mountPath": "/etc/creds" }]
            }],
            "volumes": [{ "name": "creds", "secret": { "secretName": "creds" } }]
        }
    }))?;
    let pod = restricted(pod);
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod).await?;
    wait::matches(&pods, "env", "pod env Succeeded", WAIT, |p| {
        phase(p) == Some("Succeeded")
    })
    .await?;
    let log = ns.pod_log("env", "main").await;
    let want = format!(
        "token=s3cret greeting=hi mode=dev ns={} file=from a secret volume sa=yes",
        ns.name()
    );
    ensure!(log.trim() == want, "log {log:?}, wanted {want:?}");
    Ok(())
}

async fn always_restarts_a_container_that_exits(ns: Ns) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "flaky" },
        "spec": {
            "containers": [{ "name": "main", "image": IMAGE_SH, "command": ["sh", "-c", "echo run; exit 3"] }]
        }
    }))?;
    let pod = restricted(pod);
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod).await?;
    let pod = wait::matches(&pods, "flaky", "pod flaky restarted", WAIT, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.restart_count >= 2))
    })
    .await?;
    let status = pod.status.unwrap_or_default();
    let last = status.container_statuses.unwrap_or_default()[0]
        .last_state
        .clone()
        .and_then(|s| s.terminated)
        .context("no last terminated state")?;
    ensure!(last.exit_code == 3, "last exit code {}", last.exit_code);
    ensure!(ns.pod_log("flaky", "main").await.matches("run").count() >= 2);
    Ok(())
}
