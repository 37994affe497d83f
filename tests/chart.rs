//! The Helm chart and the kustomize base, checked without a cluster, with the built helm and
//! kubectl (`$LOOP_PLUGINS_CONTROLPLANE`, else what `hack/controlplane/build.sh` prints):
//! `helm lint` is clean; the chart renders with its defaults and with every switch; no rendered
//! Role or ClusterRole uses `*`; the host API callers' role grants exactly the permissions
//! the host API's spec names (`x-rbac`); the values schema refuses bad values; the flags the chart
//! passes are flags the binary takes; `kubectl kustomize deploy/` is the chart's default
//! rendering; the alert rules pass `promtool check rules` (Debian's, from
//! `hack/prometheus.sh`), and every metric the rules and the dashboard name is one the
//! controller or the API server exports.
//!
//! deploy/ is generated from the chart. After changing the chart, regenerate it with
//! `LOOP_PLUGINS_UPDATE_DEPLOY=1 cargo test --test chart` and review the diff. The CRDs
//! (the chart's crds/ and deploy/crds/ are copies of crds/) are generated from the types:
//! tests/crds.rs checks them, `make crds` rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use clap::{Args, CommandFactory, FromArgMatches};
use devcluster::binaries::Binaries;
use serde_json::{Value, json};

const CHART: &str = "charts/loop-plugins";
/// The release and namespace deploy/ is rendered for: the chart's defaults.
const RELEASE: &str = "loop-plugins";
const NAMESPACE: &str = "loop-plugins";
const UPDATE_ENV: &str = "LOOP_PLUGINS_UPDATE_DEPLOY";
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn repo() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(testkit::repo_root)
}

/// The built helm and kubectl.
fn tools() -> &'static (PathBuf, PathBuf) {
    static TOOLS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let binaries = Binaries::locate().expect("the control-plane binaries (make controlplane)");
        (binaries.path("helm"), binaries.path("kubectl"))
    })
}

/// Runs `program` in the repository; its stdout, or everything it said when it failed.
fn run(program: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(repo())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("loop-plugins-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("loop-plugins-helm-config"),
        )
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{} {}: {}\n{stdout}{stderr}",
            program.display(),
            args.join(" "),
            output.status
        ))
    }
}

fn helm(args: &[&str]) -> Result<String, String> {
    run(&tools().0, args)
}

fn kubectl(args: &[&str]) -> Result<String, String> {
    run(&tools().1, args)
}

/// `helm template` of the chart as release loop-plugins in namespace loop-plugins, with `extra`.
fn template(extra: &[&str]) -> Result<String, String> {
    let mut args = vec!["template", RELEASE, CHART, "--namespace", NAMESPACE];
    args.extend_from_slice(extra);
    helm(&args)
}

/// The objects of a multi-document YAML stream.
fn parse(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("parsing YAML: {e}\n{yaml}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn render(extra: &[&str]) -> Vec<Value> {
    parse(&template(extra).unwrap_or_else(|e| panic!("{e}")))
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn key(doc: &Value) -> String {
    let ns = doc["metadata"]["namespace"].as_str().unwrap_or("-");
    format!("{} {ns}/{}", kind(doc), name(doc))
}

fn find<'a>(docs: &'a [Value], wanted_kind: &str, wanted_name: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind(d) == wanted_kind && name(d) == wanted_name)
        .unwrap_or_else(|| {
            let keys: Vec<String> = docs.iter().map(key).collect();
            panic!("no {wanted_kind} {wanted_name} among {keys:?}")
        })
}

fn container<'a>(deployment: &'a Value, wanted: &str) -> &'a Value {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == wanted))
        .unwrap_or_else(|| panic!("no container {wanted}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Value sets that turn every switch of the chart.
fn switches() -> Vec<Vec<String>> {
    let set = |pairs: &[&str]| {
        pairs
            .iter()
            .flat_map(|p| ["--set".to_string(), p.to_string()])
            .collect()
    };
    let mut everything: Vec<String> = set(&[
        &format!("image.digest={DIGEST}"),
        "projectNamespaces={team-a,team-b}",
        "networkPolicy.egress.allowAll=true",
        "podDisruptionBudget.minAvailable=1",
        "hostConfig.plugins.enabled=true",
        &format!("hostConfig.plugins.trustedPublisherKeys={{{KEY}}}"),
        "hostConfig.plugins.signatureMode=strict",
        "hostConfig.gates.agentgate.enabled=true",
        &format!("hostConfig.gates.agentgate.image=registry.local/gate@{DIGEST}"),
        "hostConfig.apiUrl=http://api.example:8080",
        "otel.endpoint=http://otel-collector.observability:4318",
        "api.worktreeRoot=/worktrees",
        "serviceAccount.name=custom",
        "leaderElection.leaseName=custom-lease",
        "fullnameOverride=lp",
        "replicas=3",
        "service.type=NodePort",
        "service.nodePort=30080",
        "monitoring.serviceMonitor.enabled=true",
        "monitoring.prometheusRule.enabled=true",
        "monitoring.dashboard.enabled=true",
    ]);
    everything.extend([
        "--set-json".to_string(),
        r#"networkPolicy.egress.extraRules=[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"}}],"ports":[{"port":443,"protocol":"TCP"}]}]"#.to_string(),
        "--set-json".to_string(),
        r#"hostConfig.plugins.defaults={"echo":{"enabled":true}}"#.to_string(),
        "--set-json".to_string(),
        r#"api.extraVolumeMounts=[{"name":"trees","mountPath":"/worktrees","readOnly":true}]"#.to_string(),
        "--set-json".to_string(),
        r#"extraVolumes=[{"name":"trees","emptyDir":{}}]"#.to_string(),
    ]);
    let mut dns_only = set(&["networkPolicy.egress.dns.enabled=false"]);
    dns_only.extend([
        "--set-json".to_string(),
        r#"networkPolicy.egress.extraRules=[{"to":[{"namespaceSelector":{}}]}]"#.to_string(),
    ]);
    vec![
        vec![],
        set(&[
            "replicas=1",
            "leaderElection.enabled=false",
            "podDisruptionBudget.enabled=false",
            "networkPolicy.enabled=false",
            "hostConfig.create=false",
            "callerRole.create=false",
            "approverRole.create=false",
            "projectRoles.create=false",
            "operatorRole.create=false",
            // Not rendered: a ClusterIP Service has no node port.
            "service.nodePort=30080",
        ]),
        everything,
        dns_only,
    ]
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn helm_lint_is_clean() {
    for values in switches() {
        let mut args = vec!["lint", "--strict", CHART];
        args.extend(as_strs(&values));
        let out = helm(&args).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !out.contains("[WARNING]") && !out.contains("[ERROR]"),
            "helm lint {values:?}:\n{out}"
        );
        assert!(
            out.contains("0 chart(s) failed"),
            "helm lint {values:?}:\n{out}"
        );
    }
}

#[test]
fn the_defaults_render_every_object() {
    let docs = render(&[]);
    let count = |k: &str| docs.iter().filter(|d| kind(d) == k).count();
    let expected = [
        ("ServiceAccount", 2),
        ("ClusterRole", 8),
        ("ClusterRoleBinding", 2),
        ("Role", 4),
        ("RoleBinding", 5),
        ("Deployment", 1),
        ("Service", 1),
        ("PodDisruptionBudget", 1),
        ("NetworkPolicy", 1),
        ("HostConfig", 1),
    ];
    for (k, n) in expected {
        assert_eq!(
            count(k),
            n,
            "{k} objects in {:?}",
            docs.iter().map(key).collect::<Vec<_>>()
        );
    }
    assert_eq!(docs.len(), expected.iter().map(|(_, n)| n).sum::<usize>());

    let deployment = find(&docs, "Deployment", "loop-plugins");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let controller = container(deployment, "controller");
    let args = strings(&controller["args"]);
    assert_eq!(args[0], "controller");
    assert!(
        args.contains(&"--leader-election-namespace=$(POD_NAMESPACE)".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--lease-name=loop-plugins-controller".to_string()),
        "{args:?}"
    );
    let env = &controller["env"];
    let pod_name = env
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "POD_NAME")
        .expect("POD_NAME");
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );

    let host = find(&docs, "HostConfig", "default");
    assert_eq!(
        host["spec"],
        json!({
            "plugins": {"enabled": false, "dailyRuns": 50, "idleTimeout": "10m", "signatureMode": "disabled"},
            "gates": {
                "agentgate": {"enabled": false},
                "audit": {"destination": "/data/.loop-audit", "maxAgeDays": 30, "maxBytes": 67108864},
            },
            "runner": {
                "image": "registry.local/loop-plugins:0.1.0",
                "command": ["/loop-plugins", "agent"],
                "credentialsSecret": "model-endpoint",
                "timeLimitSeconds": 600,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            },
            "apiUrl": "http://loop-plugins-api.loop-plugins.svc:8080",
        })
    );
    // The Leases the Role names are the Leases the controller and the API are told to use.
    let role = find(&docs, "Role", "loop-plugins-leader-election");
    let named: Vec<String> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| strings(&r["resourceNames"]))
        .collect();
    assert_eq!(named, ["loop-plugins-controller", "loop-plugins-api"]);
    let deployment = find(&docs, "Deployment", "loop-plugins");
    let args = |c: &str| strings(&container(deployment, c)["args"]);
    assert!(args("controller").contains(&"--lease-name=loop-plugins-controller".to_string()));
    assert!(args("api").contains(&"--fanout-lease-name=loop-plugins-api".to_string()));
}

#[test]
fn every_switch_renders() {
    let [_, minimal, everything, dns_only] = <[Vec<String>; 4]>::try_from(switches()).unwrap();

    let docs = render(&as_strs(&minimal));
    for absent in ["PodDisruptionBudget", "NetworkPolicy", "HostConfig"] {
        assert!(
            !docs.iter().any(|d| kind(d) == absent),
            "{absent} rendered with {minimal:?}"
        );
    }
    // Only the roles the chart binds are left.
    let cluster_roles: Vec<&str> = docs
        .iter()
        .filter(|d| kind(d) == "ClusterRole")
        .map(name)
        .collect();
    assert_eq!(
        cluster_roles,
        [
            "loop-plugins-controller",
            "loop-plugins-api",
            "loop-plugins-trigger"
        ],
        "with {minimal:?}"
    );
    // Without leader election only the API's Roles for its runs record, its UI link keys and
    // its reads of secret settings' Secrets are left.
    let roles: Vec<&str> = docs
        .iter()
        .filter(|d| kind(d) == "Role")
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        roles,
        [
            "loop-plugins-api-secret-settings",
            "loop-plugins-api-runs",
            "loop-plugins-api-ui"
        ],
        "with {minimal:?}"
    );
    let args = strings(&container(find(&docs, "Deployment", "loop-plugins"), "controller")["args"]);
    assert!(
        !args
            .iter()
            .any(|a| a.contains("leader") || a.contains("lease")),
        "{args:?}"
    );
    let service = &find(&docs, "Service", "loop-plugins-api")["spec"];
    assert_eq!(service["type"], "ClusterIP");
    assert!(service["ports"][0].get("nodePort").is_none(), "{service}");

    let docs = render(&as_strs(&everything));
    let service = &find(&docs, "Service", "lp-api")["spec"];
    assert_eq!(service["type"], "NodePort");
    assert_eq!(service["ports"][0]["nodePort"], 30080);
    let deployment = find(&docs, "Deployment", "lp");
    let image = format!("registry.local/loop-plugins@{DIGEST}");
    assert_eq!(container(deployment, "controller")["image"], image.as_str());
    assert_eq!(container(deployment, "api")["image"], image.as_str());
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "custom"
    );
    assert!(
        strings(&container(deployment, "api")["args"])
            .contains(&"--worktree-root=/worktrees".to_string())
    );
    assert!(
        strings(&container(deployment, "controller")["args"])
            .contains(&"--lease-name=custom-lease".to_string())
    );
    for ns in ["team-a", "team-b"] {
        let policy = docs
            .iter()
            .find(|d| kind(d) == "NetworkPolicy" && d["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("no NetworkPolicy in {ns}"));
        assert_eq!(policy["spec"]["egress"], json!([{}]));
        assert!(docs.iter().any(|d| kind(d) == "ServiceAccount"
            && name(d) == model::names::TRIGGER_SERVICE_ACCOUNT
            && d["metadata"]["namespace"] == ns));
    }
    assert_eq!(
        find(&docs, "PodDisruptionBudget", "lp")["spec"]["minAvailable"],
        1
    );
    let host = find(&docs, "HostConfig", "default");
    assert_eq!(
        host["spec"]["plugins"]["trustedPublisherKeys"],
        json!([KEY])
    );
    assert_eq!(
        host["spec"]["plugins"]["defaults"],
        json!({"echo": {"enabled": true}})
    );
    assert_eq!(
        host["spec"]["gates"]["agentgate"]["image"],
        format!("registry.local/gate@{DIGEST}")
    );
    assert_eq!(host["spec"]["apiUrl"], "http://api.example:8080");

    let docs = render(&as_strs(&dns_only));
    let egress = &find(&docs, "NetworkPolicy", "loop-plugins-plugins")["spec"]["egress"];
    assert_eq!(egress.as_array().map(Vec::len), Some(2), "{egress}");
    assert_eq!(egress[1], json!({"to": [{"namespaceSelector": {}}]}));
}

/// The verbs `role` grants on `resource` of plugins.loop.dev.
/// The NetworkPolicy the chart renders for plugin Pods, whole, as a reviewer reads it (in
/// `tests/snapshots/`; `INSTA_UPDATE=always cargo test --test chart` rewrites it).
#[test]
fn the_plugin_network_policy_snapshot() {
    let docs = render(&[]);
    let policy = without_helm_labels(find(&docs, "NetworkPolicy", "loop-plugins-plugins").clone());
    insta::assert_yaml_snapshot!("plugin_network_policy", policy);
}

#[test]
fn the_plugin_operator_role_grants_what_the_verbs_need() {
    let docs = render(&[
        "--set",
        "hostConfig.plugins.registry.credentialsSecret=pull",
    ]);
    let role = find(&docs, "ClusterRole", "loop-plugins-plugin-operator");
    let read = ["get", "list", "watch"];
    for resource in ["projects", "projecttrusts", "channels", "plugininstances"] {
        assert_eq!(verbs_on(role, resource), read, "{resource}");
    }
    assert_eq!(
        verbs_on(role, "plugins"),
        [
            "create", "delete", "get", "list", "patch", "update", "watch"
        ]
    );
    assert_eq!(verbs_on(role, "plugininstances/status"), ["patch"]);
    assert_eq!(
        verbs_on(role, "hostconfigs"),
        ["create", "get", "list", "patch", "watch"]
    );
    // Only the one credentials Secret, in the release namespace.
    let credentials = find(&docs, "Role", "loop-plugins-plugin-operator-credentials");
    assert_eq!(credentials["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        credentials["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["pull"], "verbs": ["get"]}])
    );
    assert!(
        !render(&[])
            .iter()
            .any(|d| name(d) == "loop-plugins-plugin-operator-credentials"),
        "no credentials Secret, no Role for it"
    );
}

#[test]
fn the_caller_role_grants_every_host_api_permission_and_no_more() {
    let spec: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("openapi/host-api-v1.yaml")).unwrap(),
    )
    .unwrap();
    let mut asked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in spec["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            let Some(rbac) = op.get("x-rbac") else {
                continue;
            };
            let verbs = asked
                .entry(rbac["resource"].as_str().unwrap().to_string())
                .or_default();
            verbs.push(rbac["verb"].as_str().unwrap().to_string());
            verbs.sort();
            verbs.dedup();
        }
    }
    assert!(asked.contains_key("channels/cards"), "{asked:?}");
    // Deciding an agent's call is the approver role's, not a caller's: `approve` (with what
    // lets a person see what waits) and nothing else.
    let approving = asked
        .get_mut("toolcallapprovals")
        .expect("the approval routes ask about toolcallapprovals");
    approving.retain(|v| v != "approve");
    let docs = render(&[]);
    // Settings → Plugins is written with the person's own rights: the project roles' (editor:
    // read and patch a Project; trustee: patch its ProjectTrust), and for the global config
    // whoever may patch HostConfig (a cluster admin); a caller is granted none of them.
    let project = asked
        .remove("projects")
        .expect("the settings routes ask about projects");
    assert_eq!(project, ["get", "patch"]);
    let editor = find(&docs, "ClusterRole", "loop-plugins-project-editor");
    assert!(
        project
            .iter()
            .all(|v| verbs_on(editor, "projects").contains(v)),
        "{editor}"
    );
    let trusting = asked.remove("projecttrusts").expect("the trust route");
    let trustee = find(&docs, "ClusterRole", "loop-plugins-project-trustee");
    assert!(
        trusting
            .iter()
            .all(|v| verbs_on(trustee, "projecttrusts").contains(v)),
        "{trustee}"
    );
    assert_eq!(asked.remove("hostconfigs"), Some(vec!["patch".to_string()]));
    // Upgrade and remove (Settings → Plugins → Global) are the plugin-operator role's, as
    // `loop-plugins plugin upgrade|remove` are: a caller is granted neither.
    let upgrading = asked.remove("plugins").expect("the upgrade routes");
    assert_eq!(upgrading, ["delete", "update"]);
    let operator = find(&docs, "ClusterRole", "loop-plugins-plugin-operator");
    assert!(
        upgrading
            .iter()
            .all(|v| verbs_on(operator, "plugins").contains(v)),
        "{operator}"
    );
    let approver = find(&docs, "ClusterRole", "loop-plugins-approver");
    assert_eq!(
        verbs_on(approver, "toolcallapprovals"),
        ["approve", "get", "list", "watch"]
    );
    assert_eq!(approver["rules"].as_array().unwrap().len(), 1, "{approver}");
    let role = find(&docs, "ClusterRole", "loop-plugins-host-api-caller");
    let granted: BTreeMap<String, Vec<String>> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| strings(&r["resources"]))
        .map(|resource| {
            let verbs = verbs_on(role, &resource);
            (resource, verbs)
        })
        .collect();
    assert_eq!(granted, asked);
}

fn verbs_on(role: &Value, resource: &str) -> Vec<String> {
    let mut verbs: Vec<String> = role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| strings(&r["apiGroups"]).contains(&"plugins.loop.dev".to_string()))
        .filter(|r| strings(&r["resources"]).contains(&resource.to_string()))
        .flat_map(|r| strings(&r["verbs"]))
        .collect();
    verbs.sort();
    verbs
}

#[test]
fn editing_a_project_and_trusting_it_are_two_roles() {
    let docs = render(&[]);
    let editor = find(&docs, "ClusterRole", "loop-plugins-project-editor");
    let trustee = find(&docs, "ClusterRole", "loop-plugins-project-trustee");
    let read = ["get", "list", "watch"];
    let write = ["create", "update", "patch", "delete"];
    let all: Vec<String> = {
        let mut v: Vec<String> = read.iter().chain(&write).map(|v| v.to_string()).collect();
        v.sort();
        v
    };
    let read_only: Vec<String> = read.iter().map(|v| v.to_string()).collect();
    assert_eq!(verbs_on(editor, "projects"), all);
    assert_eq!(verbs_on(editor, "projecttrusts"), read_only);
    assert_eq!(verbs_on(trustee, "projects"), read_only);
    assert_eq!(verbs_on(trustee, "projecttrusts"), all);
    // Neither writes a Project's status (the controller's), nor anything else.
    for role in [editor, trustee] {
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(strings(&rule["apiGroups"]), ["plugins.loop.dev"], "{rule}");
            for resource in strings(&rule["resources"]) {
                assert!(
                    ["projects", "projecttrusts"].contains(&resource.as_str()),
                    "{}: {resource}",
                    name(role)
                );
            }
        }
    }
    // Nobody is bound to them by the chart.
    for binding in docs
        .iter()
        .filter(|d| matches!(kind(d), "ClusterRoleBinding" | "RoleBinding"))
    {
        let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
        assert!(!role.contains("project-"), "{} binds {role}", name(binding));
    }
}

/// Every rule of every Role and ClusterRole in `docs` that uses `*`.
fn wildcard_rules(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for doc in docs
        .iter()
        .filter(|d| matches!(kind(d), "Role" | "ClusterRole"))
    {
        for (i, rule) in doc["rules"].as_array().into_iter().flatten().enumerate() {
            for field in [
                "apiGroups",
                "resources",
                "verbs",
                "resourceNames",
                "nonResourceURLs",
            ] {
                if strings(&rule[field]).iter().any(|s| s.contains('*')) {
                    problems.push(format!("{} rule {i} {field}: {}", key(doc), rule[field]));
                }
            }
        }
        if doc.get("aggregationRule").is_some() {
            problems.push(format!("{} aggregates other roles", key(doc)));
        }
    }
    problems
}

#[test]
fn no_rendered_role_uses_a_wildcard() {
    for values in switches() {
        let docs = render(&as_strs(&values));
        assert!(docs.iter().any(|d| kind(d) == "ClusterRole"));
        let problems = wildcard_rules(&docs);
        assert!(problems.is_empty(), "with {values:?}: {problems:#?}");
    }
}

#[test]
fn the_wildcard_check_finds_a_star() {
    let roles = parse(
        "kind: ClusterRole\nmetadata: {name: a}\nrules:\n- {apiGroups: [''], resources: [pods], verbs: [get]}\n\
         - {apiGroups: ['*'], resources: [pods], verbs: [get]}\n---\n\
         kind: Role\nmetadata: {name: b, namespace: team}\nrules:\n- {apiGroups: [''], resources: ['pods/*'], verbs: ['*']}\n",
    );
    assert_eq!(
        wildcard_rules(&roles),
        [
            r#"ClusterRole -/a rule 1 apiGroups: ["*"]"#,
            r#"Role team/b rule 0 resources: ["pods/*"]"#,
            r#"Role team/b rule 0 verbs: ["*"]"#,
        ]
    );
}

#[test]
fn the_values_schema_refuses_bad_values() {
    for (set, why) in [
        ("replicas=-1", "replicas"),
        ("replica=2", "replica"),
        (
            "hostConfig.plugins.signatureMode=sometimes",
            "signatureMode",
        ),
        ("hostConfig.plugins.idleTimeout=soon", "idleTimeout"),
        ("image.digest=latest", "digest"),
        (
            "hostConfig.gates.agentgate.image=registry.local/gate:latest",
            "image",
        ),
        ("projectNamespaces={Team_A}", "projectNamespaces"),
        ("leaderElection.enabled=false", "leaderElection"),
        ("service.nodePort=8080", "nodePort"),
        ("service.nodePort=32768", "nodePort"),
        ("hostConfig.gates.audit.destination=/var/log", "destination"),
        ("hostConfig.gates.audit.maxBytes=10", "maxBytes"),
        (
            "monitoring.prometheusRule.dailyRunsNearlySpent=2",
            "dailyRunsNearlySpent",
        ),
        (
            "monitoring.prometheusRule.breakerOpenFor=5",
            "breakerOpenFor",
        ),
        ("monitoring.serviceMonitor.intervall=30s", "intervall"),
    ] {
        let err = template(&["--set", set]).expect_err(set);
        assert!(err.contains(why), "{set}: {err}");
    }
    let err = template(&[
        "--set-json",
        r#"trigger.rules=[{"apiGroups":["plugins.loop.dev"],"resources":["plugininstances/actions"],"verbs":["*"]}]"#,
    ])
    .expect_err("a wildcard verb");
    assert!(err.contains("verbs"), "{err}");
    let err = template(&[
        "--set-json",
        r#"hostConfig.plugins.registry.mirrors=[{"registry":"localhost:5001"}]"#,
    ])
    .expect_err("a mirror without an address");
    assert!(err.contains("address"), "{err}");
}

#[test]
fn registry_settings_reach_host_config() {
    let docs = render(&[
        "--set",
        "hostConfig.plugins.registry.credentialsSecret=pull",
        "--set-json",
        r#"hostConfig.plugins.registry.mirrors=[{"registry":"localhost:5001","address":"kind-registry:5000","plainHttp":true}]"#,
        "--set",
        "hostConfig.gates.audit.destination=stdout",
    ]);
    let host = find(&docs, "HostConfig", "default");
    assert_eq!(
        host["spec"]["plugins"]["registry"],
        json!({
            "credentialsSecret": "pull",
            "mirrors": [{"registry": "localhost:5001", "address": "kind-registry:5000", "plainHttp": true}],
        })
    );
    assert_eq!(host["spec"]["gates"]["audit"]["destination"], "stdout");
}

/// `--flag` names in `args` (values and positionals left out).
fn flags(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_chart_passes_only_flags_the_binary_takes() {
    let docs = render(&[]);
    let deployment = find(&docs, "Deployment", "loop-plugins");
    let binary = &testkit::binary();
    let help =
        |role: &str| run(Path::new(binary), &[role, "--help"]).unwrap_or_else(|e| panic!("{e}"));

    // The API server's flags parse with its own definitions.
    let api_args = strings(&container(deployment, "api")["args"]);
    assert_eq!(api_args[0], "api");
    let command = server::serve::ApiArgs::augment_args(clap::Command::new("api"));
    let matches = command
        .try_get_matches_from(&api_args)
        .unwrap_or_else(|e| panic!("{api_args:?}: {e}"));
    let parsed = server::serve::ApiArgs::from_arg_matches(&matches).unwrap();
    assert_eq!(parsed.listen.port(), 8080);
    assert_eq!(parsed.metrics_addr.port(), 9091);
    let api_help = help("api");
    for flag in flags(&api_args) {
        assert!(api_help.contains(&flag), "loop-plugins api takes no {flag}");
    }

    // The controller's: its own, and leader election's (src/leader.rs LeaderArgs).
    let controller_args = strings(&container(deployment, "controller")["args"]);
    assert_eq!(controller_args[0], "controller");
    let controller_help = help("controller");
    let leader = runtime::leader::LeaderArgs::augment_args(clap::Command::new("leader"));
    let leader_flags: Vec<String> = leader
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    for flag in flags(&controller_args) {
        assert!(
            controller_help.contains(&flag) || leader_flags.contains(&flag),
            "loop-plugins controller takes no {flag}"
        );
    }
    // The env the controller reads its image from (LOOP_PLUGINS_IMAGE) names the same image.
    let controller = container(deployment, "controller");
    let image_env = controller["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "LOOP_PLUGINS_IMAGE");
    assert_eq!(image_env.map(|e| &e["value"]), Some(&controller["image"]));
    assert!(
        controller_help.contains("LOOP_PLUGINS_IMAGE"),
        "{controller_help}"
    );
    // The leader flags flatten into a command without clashes (clap's own consistency check).
    #[derive(clap::Parser)]
    struct Probe {
        #[command(flatten)]
        leader: runtime::leader::LeaderArgs,
    }
    Probe::command().debug_assert();
}

#[test]
fn every_container_runs_restricted_with_probes() {
    let docs = render(&[]);
    let pod = &find(&docs, "Deployment", "loop-plugins")["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    for c in pod["containers"].as_array().unwrap() {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{}", c["name"]);
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{}", c["name"]);
        assert_eq!(sc["runAsNonRoot"], true, "{}", c["name"]);
        assert_eq!(sc["runAsUser"], 65532, "{}", c["name"]);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{}", c["name"]);
        assert_eq!(
            sc["seccompProfile"]["type"], "RuntimeDefault",
            "{}",
            c["name"]
        );
        assert_eq!(
            c["livenessProbe"]["httpGet"]["path"], "/healthz",
            "{}",
            c["name"]
        );
        assert!(
            c["resources"]["requests"].is_object()
                && c["resources"]["limits"]["memory"].is_string()
        );
    }
    let controller = container(
        &find(&docs, "Deployment", "loop-plugins").clone(),
        "controller",
    )
    .clone();
    assert_eq!(controller["livenessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(controller["ports"][0]["containerPort"], 9090);
    let api = container(find(&docs, "Deployment", "loop-plugins"), "api");
    assert_eq!(api["readinessProbe"]["httpGet"]["port"], "http");
}

/// `otel.endpoint` sets the OTLP endpoint on both containers, as `loop-plugins controller` and
/// `api` read it (crates/runtime's logging); empty, the default, sets nothing, so nothing is
/// exported.
#[test]
fn the_otel_endpoint_reaches_both_containers() {
    let endpoint_of = |docs: &[Value], wanted: &str| {
        let deployment = find(docs, "Deployment", RELEASE);
        container(deployment, wanted)["env"]
            .as_array()
            .and_then(|env| {
                env.iter()
                    .find(|e| e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT")
                    .map(|e| e["value"].as_str().unwrap_or_default().to_string())
            })
    };
    let docs = render(&[]);
    let off = render(&["--set", "otel.endpoint="]);
    let on = render(&["--set", "otel.endpoint=http://otel.observability:4318"]);
    for wanted in ["controller", "api"] {
        assert_eq!(endpoint_of(&docs, wanted), None, "{wanted} by default");
        assert_eq!(
            endpoint_of(&off, wanted),
            None,
            "{wanted} with an empty endpoint"
        );
        assert_eq!(
            endpoint_of(&on, wanted).as_deref(),
            Some("http://otel.observability:4318"),
            "{wanted}"
        );
    }
    assert!(
        template(&["--set", "otel.endpoint=otel:4318"]).is_err(),
        "an endpoint without its scheme is refused"
    );
}

/// With `LOOP_PLUGINS_UPDATE_DEPLOY` set, rewrites deploy/ (but its copy of the CRDs, which
/// tests/crds.rs keeps), once, before any test reads it.
fn update_if_asked() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if std::env::var_os(UPDATE_ENV).is_none() {
            return;
        }
        for (path, text) in deploy_files() {
            let file = repo().join("deploy").join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
        }
    });
}

/// Drops what only Helm adds: the chart label and `managed-by: Helm`.
fn without_helm_labels(mut doc: Value) -> Value {
    if let Some(labels) = doc["metadata"]["labels"].as_object_mut() {
        labels.remove("helm.sh/chart");
        labels.remove("app.kubernetes.io/managed-by");
    }
    doc
}

/// The files of deploy/, generated from the chart's default rendering, by path.
fn deploy_files() -> BTreeMap<String, String> {
    const HEADER: &str = "# Generated by tests/chart.rs from `helm template loop-plugins charts/loop-plugins \
         -n loop-plugins`,\n# less Helm's own labels. Edit the chart, then run \
         LOOP_PLUGINS_UPDATE_DEPLOY=1 cargo test --test chart.\n";
    let rendered = template(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut by_source: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for doc in rendered.split("\n---\n") {
        let mut source = None;
        let mut lines = Vec::new();
        for line in doc.lines() {
            let trimmed = line.trim();
            if let Some(path) = trimmed.strip_prefix("# Source: loop-plugins/templates/") {
                source = Some(path.to_string());
            } else if !(trimmed.starts_with("helm.sh/chart:")
                || trimmed == "app.kubernetes.io/managed-by: Helm"
                || trimmed == "---")
            {
                lines.push(line);
            }
        }
        let text = lines.join("\n").trim().to_string();
        let Some(source) = source.filter(|_| !text.is_empty()) else {
            continue;
        };
        if !order.contains(&source) {
            order.push(source.clone());
        }
        by_source.entry(source).or_default().push(text);
    }
    let mut files = BTreeMap::new();
    let mut resources = vec!["crds".to_string(), "namespace.yaml".to_string()];
    for source in &order {
        let docs = &by_source[source];
        files.insert(
            source.clone(),
            format!("{HEADER}---\n{}\n", docs.join("\n---\n")),
        );
        resources.push(source.clone());
    }
    files.insert(
        "namespace.yaml".into(),
        format!(
            "{HEADER}---\n# The release namespace, held to the restricted Pod Security level.\n\
             apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n  labels:\n    \
             app.kubernetes.io/part-of: loop-plugins\n    pod-security.kubernetes.io/enforce: restricted\n"
        ),
    );
    let listed: String = resources.iter().map(|r| format!("  - {r}\n")).collect();
    files.insert(
        "kustomization.yaml".into(),
        format!(
            "{HEADER}#\n# The kustomize base: the chart's defaults, release loop-plugins in namespace loop-plugins.\n\
             # Install: kubectl apply --server-side -k deploy/crds, then kubectl apply --server-side -k deploy/\n\
             # (the HostConfig needs its CRD established first). Another image or namespace: use Helm,\n\
             # or an overlay (README.md, Install).\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{listed}"
        ),
    );
    files.insert(
        "crds/kustomization.yaml".into(),
        format!(
            "{HEADER}#\n# The CRDs alone (crds/loop-plugins.yaml), to apply before the rest.\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - loop-plugins.yaml\n"
        ),
    );
    files
}

#[test]
fn deploy_is_generated_from_the_chart() {
    update_if_asked();
    let files = deploy_files();
    let dir = repo().join("deploy");
    let mut stale = Vec::new();
    for (path, text) in &files {
        if std::fs::read_to_string(dir.join(path)).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.clone());
        }
    }
    // Nothing else lives in deploy/ but the CRDs' copy.
    let mut present = Vec::new();
    for entry in walk(&dir) {
        let rel = entry
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !files.contains_key(&rel) && rel != "crds/loop-plugins.yaml" {
            present.push(rel);
        }
    }
    assert!(
        stale.is_empty() && present.is_empty(),
        "deploy/ is not the chart's rendering (stale: {stale:?}, not generated: {present:?}); \
         run {UPDATE_ENV}=1 cargo test --test chart"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Objects by kind, namespace and name, with whole floats as integers (YAML writers differ
/// on `0` and `0.0`).
fn by_key<'a>(docs: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, Value> {
    docs.into_iter()
        .map(|d| (key(d), whole_numbers(d.clone())))
        .collect()
}

fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(whole_numbers).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect())
        }
        other => other,
    }
}

/// Fails naming the objects only one side has and those that differ (with the first path
/// where they do), rather than printing whole objects.
fn assert_same(left: &BTreeMap<String, Value>, right: &BTreeMap<String, Value>, what: &str) {
    let mut problems = Vec::new();
    for k in left.keys().filter(|k| !right.contains_key(*k)) {
        problems.push(format!("only in {what}: {k}"));
    }
    for k in right.keys().filter(|k| !left.contains_key(*k)) {
        problems.push(format!("only in the chart: {k}"));
    }
    for (k, l) in left {
        if let Some(r) = right.get(k).filter(|r| *r != l) {
            problems.push(format!(
                "{k} differs at {}",
                first_difference(l, r, String::new())
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{what} is not the chart's default rendering:\n{}",
        problems.join("\n")
    );
}

fn first_difference(l: &Value, r: &Value, path: String) -> String {
    match (l, r) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys()) {
                if a.get(k) != b.get(k) {
                    return first_difference(
                        &a.get(k).cloned().unwrap_or(Value::Null),
                        &b.get(k).cloned().unwrap_or(Value::Null),
                        format!("{path}.{k}"),
                    );
                }
            }
            path
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    return first_difference(x, y, format!("{path}[{i}]"));
                }
            }
            path
        }
        _ => format!("{path}: {l} vs {r}"),
    }
}

#[test]
fn kubectl_kustomize_renders_the_charts_defaults() {
    update_if_asked();
    let kustomized = parse(&kubectl(&["kustomize", "deploy/"]).unwrap_or_else(|e| panic!("{e}")));
    let chart: Vec<Value> = render(&[]).into_iter().map(without_helm_labels).collect();
    let of_kind = |docs: &[Value], wanted: &str| by_key(docs.iter().filter(|d| kind(d) == wanted));

    // The CRDs are crds/; the Namespace is the base's own.
    let generated = parse(&std::fs::read_to_string(repo().join("crds/loop-plugins.yaml")).unwrap());
    let crd = "CustomResourceDefinition";
    assert_same(
        &of_kind(&kustomized, crd),
        &of_kind(&generated, crd),
        "the base's CRDs",
    );
    let namespace = find(&kustomized, "Namespace", NAMESPACE);
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );

    let rest: Vec<Value> = kustomized
        .into_iter()
        .filter(|d| !matches!(kind(d), "CustomResourceDefinition" | "Namespace"))
        .collect();
    // RBAC first, for the clearest failure.
    let rbac = |docs: &[Value]| {
        by_key(docs.iter().filter(|d| {
            d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("rbac.authorization.k8s.io/"))
                || kind(d) == "ServiceAccount"
        }))
    };
    assert_same(&rbac(&rest), &rbac(&chart), "the base's RBAC");
    assert!(rbac(&chart).len() >= 9);
    assert_same(&by_key(&rest), &by_key(&chart), "kubectl kustomize deploy/");
}

/// The objects the monitoring switches add.
fn monitoring() -> Vec<Value> {
    render(&[
        "--set",
        "monitoring.serviceMonitor.enabled=true",
        "--set",
        "monitoring.prometheusRule.enabled=true",
        "--set",
        "monitoring.dashboard.enabled=true",
    ])
}

/// Every PromQL query of the rendered PrometheusRule and dashboard.
fn queries(docs: &[Value]) -> Vec<String> {
    let rule = find(docs, "PrometheusRule", "loop-plugins");
    let mut all: Vec<String> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .map(|r| r["expr"].as_str().unwrap().to_string())
        .collect();
    let board = find(docs, "ConfigMap", "loop-plugins-dashboard");
    let board: Value =
        serde_json::from_str(board["data"]["loop-plugins.json"].as_str().unwrap()).unwrap();
    for panel in board["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            all.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    all
}

/// The series names of ours (`loop_plugins_*`) a query reads.
fn named_metrics(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("loop_plugins_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// Every series name the two processes export: their registries as they build them, in the
/// text format, each family's samples named as Prometheus stores them. A labelled family
/// with no sample prints nothing, so each gets one here (a new family a query names fails
/// the test until it gets one too).
fn exported() -> std::collections::BTreeSet<String> {
    use server::calls::config::CallKind;
    use server::calls::metrics as calls;
    let mut registry = prometheus_client::registry::Registry::default();
    let c = controller::metrics::Metrics::new(&mut registry);
    let controller = "chat";
    c.reconciles
        .get_or_create(&controller::metrics::ControllerLabels { controller })
        .inc();
    c.failures
        .get_or_create(&controller::metrics::FailureLabels {
            controller,
            category: "api",
        })
        .inc();
    c.duration
        .get_or_create(&controller::metrics::ControllerLabels { controller })
        .observe(0.1);
    c.queue_depth
        .get_or_create(&controller::metrics::ControllerLabels { controller })
        .set(1);
    c.write("Pod", "create");
    c.refused("Signature");
    c.run_ended("Succeeded");
    let s = server::serve::ServerMetrics::register(&mut registry, Box::new(Default::default));
    let kind = CallKind::Tool;
    s.calls
        .calls
        .get_or_create(&calls::CallLabels {
            kind,
            outcome: "answered",
        })
        .inc();
    s.calls
        .call_seconds
        .get_or_create(&calls::KindLabels { kind })
        .observe(0.1);
    s.calls
        .breaker_state
        .get_or_create(&calls::InstanceLabels {
            instance_namespace: "team".into(),
            plugin_instance: "echo-general".into(),
        })
        .set(1);
    s.calls
        .breaker_transitions
        .get_or_create(&calls::TransitionLabels { to: "Open" })
        .inc();
    s.calls
        .starts
        .get_or_create(&calls::ResultLabels { result: "ready" })
        .inc();
    s.host
        .reviews
        .get_or_create(&server::host_api::metrics::ResultLabels { result: "allowed" })
        .inc();
    s.api
        .writes
        .get_or_create(&server::plugin_api::metrics::WriteLabels {
            kind: "AgentRun",
            result: "ok",
        })
        .inc();
    let route = server::http::RouteLabels {
        route: "/healthz".into(),
        method: "GET".into(),
    };
    s.requests
        .requests
        .get_or_create(&server::http::RequestLabels {
            route: route.route.clone(),
            method: route.method.clone(),
            status: 200,
        })
        .inc();
    s.requests.duration.get_or_create(&route).observe(0.1);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .flat_map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            match kind {
                "counter" => vec![format!("{name}_total")],
                "histogram" => ["bucket", "sum", "count"]
                    .iter()
                    .map(|s| format!("{name}_{s}"))
                    .collect(),
                _ => vec![name.to_string()],
            }
        })
        .collect()
}

/// Names a query reads that nothing exports.
fn unknown(queries: &[String]) -> Vec<String> {
    let exported = exported();
    queries
        .iter()
        .flat_map(|q| named_metrics(q))
        .filter(|n| !exported.contains(n))
        .collect()
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_name_is_exported() {
    let docs = monitoring();
    let queries = queries(&docs);
    assert!(queries.len() >= 15, "{queries:?}");
    assert_eq!(unknown(&queries), Vec::<String>::new());
    // The check sees a name nothing exports, and names in the middle of a query.
    assert_eq!(
        unknown(&[
            "rate(loop_plugins_host_plugin_calls_total[5m]) / loop_plugins_host_no_such".into()
        ]),
        ["loop_plugins_host_no_such"]
    );
    // Every alert's metric, and each kind of sample, is among them.
    let read: Vec<String> = queries.iter().flat_map(|q| named_metrics(q)).collect();
    for wanted in [
        "loop_plugins_host_breaker_state",
        "loop_plugins_api_daily_runs_used",
        "loop_plugins_api_daily_runs_limit",
        "loop_plugins_host_start_wait_seconds_bucket",
        "loop_plugins_controller_reconcile_failures_total",
        "loop_plugins_controller_admission_refusals_total",
        "loop_plugins_api_plugin_instances",
        "loop_plugins_controller_runs_ended_total",
        "loop_plugins_controller_queue_depth",
        "loop_plugins_api_requests_total",
        "loop_plugins_controller_unreadable_objects",
        "loop_plugins_api_unreadable_objects",
    ] {
        assert!(read.iter().any(|n| n == wanted), "{wanted} in {read:?}");
    }
}

#[test]
fn the_alert_rules_pass_promtool() {
    let out = Command::new(repo().join("hack/prometheus.sh"))
        .output()
        .expect("hack/prometheus.sh runs");
    assert!(
        out.status.success(),
        "hack/prometheus.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = String::from_utf8(out.stdout).unwrap();
    let promtool = Path::new(bin.lines().last().unwrap()).join("promtool");
    let docs = monitoring();
    let rule = find(&docs, "PrometheusRule", "loop-plugins");
    let dir = std::env::temp_dir().join(format!("loop-plugins-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rules.json");
    // A rule file is YAML, and JSON is YAML.
    std::fs::write(&file, serde_json::to_string(&rule["spec"]).unwrap()).unwrap();
    let checked = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked.status.success(), "promtool check rules:\n{said}");
    assert!(said.contains("SUCCESS: 6 rules found"), "{said}");
}

/// A Helm install runs agent runs: HostConfig names the release's own image's `loop-plugins
/// agent` with the model Secret, unless told another runner or none.
#[test]
fn the_chart_names_a_runner_for_agent_runs() {
    let docs = render(&["--set", &format!("image.digest={DIGEST}")]);
    let runner = &find(&docs, "HostConfig", "default")["spec"]["runner"];
    assert_eq!(
        runner,
        &json!({
            "image": format!("registry.local/loop-plugins@{DIGEST}"),
            "command": [model::contract::SELF_IMAGE_BINARY, "agent"],
            "credentialsSecret": "model-endpoint",
            "timeLimitSeconds": 600,
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        })
    );
    // The command is what the image holds: the binary takes `agent`.
    let help = run(Path::new(&testkit::binary()), &["agent", "--help"]).unwrap();
    assert!(help.contains("LOOP_AGENT_MODEL_URL"), "{help}");

    // Another image keeps its entrypoint unless a command is given.
    let other = format!("registry.local/runner@{DIGEST}");
    let docs = render(&[
        "--set",
        &format!("hostConfig.runner.image={other}"),
        "--set",
        "hostConfig.runner.serviceAccount=runner",
        "--set",
        "hostConfig.runner.timeLimitSeconds=60",
    ]);
    let runner = &find(&docs, "HostConfig", "default")["spec"]["runner"];
    assert_eq!(runner["image"], json!(other));
    assert_eq!(runner.get("command"), None);
    assert_eq!(runner["serviceAccount"], "runner");
    assert_eq!(runner["timeLimitSeconds"], 60);
    let docs = render(&[
        "--set-json",
        r#"hostConfig.runner.command=["/run","--fast"]"#,
    ]);
    let runner = &find(&docs, "HostConfig", "default")["spec"]["runner"];
    assert_eq!(runner["command"], json!(["/run", "--fast"]));

    let docs = render(&["--set", "hostConfig.runner.enabled=false"]);
    assert_eq!(
        find(&docs, "HostConfig", "default")["spec"].get("runner"),
        None
    );

    for (set, why) in [
        ("hostConfig.runner.timeLimitSeconds=0", "timeLimitSeconds"),
        (
            "hostConfig.runner.timeLimitSeconds=86401",
            "timeLimitSeconds",
        ),
        (
            "hostConfig.runner.image=registry.local/runner:latest",
            "image",
        ),
        (
            "hostConfig.runner.imagePullPolicy=Always",
            "imagePullPolicy",
        ),
    ] {
        let err = template(&["--set", set]).expect_err(set);
        assert!(err.contains(why), "{set}: {err}");
    }
}

/// What the install says: agent runs and their Secret, and files.read off until the working
/// trees are mounted.
#[test]
fn the_install_notes_say_what_runs_and_what_is_off() {
    let notes = |extra: &[&str]| {
        let mut args = vec!["install", "lp", CHART, "--dry-run=client", "-n", "lp"];
        args.extend_from_slice(extra);
        let out = helm(&args).unwrap_or_else(|e| panic!("{e}"));
        out.split_once("NOTES:")
            .map(|(_, notes)| notes.to_string())
            .unwrap_or_else(|| panic!("no notes in {out}"))
    };
    let said = notes(&[]);
    assert!(
        said.contains("Agent runs run") && said.contains("Secret model-endpoint"),
        "{said}"
    );
    assert!(
        said.contains("files.read is off: api.worktreeRoot is empty"),
        "{said}"
    );
    let said = notes(&[
        "--set",
        "api.worktreeRoot=/worktrees",
        "--set",
        "hostConfig.runner.enabled=false",
    ]);
    assert!(!said.contains("files.read is off"), "{said}");
    assert!(said.contains("Agent runs are off"), "{said}");
}
