//! `loop-plugins-dev`: the dev cluster for a developer, until Ctrl-C.
//!
//! Starts the control plane and the kubelet stand-in and a registry on 127.0.0.1 (with
//! `--registry-bin`), pushes our image there, installs the CRDs, starts the API server and the
//! controller (see [`super::components`]), applies examples/, then pushes each example
//! plugin's image (echo and quiz, built from examples/<plugin> and its binary, see
//! [`super::dev_images`]) and installs it with `loop-plugins plugin install`, so what runs
//! carries the image's real digest; writes the kubeconfig and, beside it, what README's tour
//! starts from (`env`: KUBECONFIG, PATH, LOOP_API; `bin/`: kubectl, helm, loop-plugins), and
//! waits. Before examples/ it applies the chart's ClusterRoles (from `deploy/`, the chart's
//! default rendering), so examples/ can bind them: the tour's `demo/app` ServiceAccount calls
//! plugins through the host API as the chart's `loop-plugins-host-api-caller`. With `--cluster-only`
//! it stops after the stand-in (and the registry, with our image pushed, written to
//! `<run-dir>/registry.env`): the cluster is empty, for installing the chart into it as one
//! would into kind (`make e2e-existing`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::demo_model::DemoModel;
use super::registry::DevRegistry;
use super::{
    DevCluster, DevClusterOptions, Error, ImageMap, LocalImage, Result, components, dev_images,
    install_crds,
};

/// The image repositories our own binary plays.
pub const OWN_IMAGES: [&str; 1] = ["loop-plugins"];
/// The image repositories the example plugin plays.
pub const ECHO_PLUGIN_IMAGES: [&str; 1] = ["echo-plugin"];
/// The example plugin's binary, built beside ours.
const ECHO_PLUGIN_BINARY: &str = "echo-plugin";

/// Options of `loop-plugins dev`.
#[derive(clap::Args, Debug, Clone)]
pub struct DevArgs {
    /// Where to write the admin kubeconfig.
    #[arg(long, default_value = ".dev/kubeconfig")]
    pub kubeconfig: PathBuf,
    /// The run's folder (etcd data, logs, volumes), emptied at start and kept after.
    #[arg(long, default_value = ".dev/run")]
    pub run_dir: PathBuf,
    /// The folder of upstream binaries (default: what hack/controlplane/build.sh prints).
    #[arg(long, env = "LOOP_PLUGINS_CONTROLPLANE")]
    pub controlplane: Option<PathBuf>,
    /// The CRDs to install.
    #[arg(long, default_value = "crds")]
    pub crds: PathBuf,
    /// YAML applied once the cluster is up (a folder is searched for *.yaml and *.yml).
    #[arg(long, default_value = "examples")]
    pub examples: PathBuf,
    /// The chart's default rendering (kustomize base): its ClusterRoles are applied before
    /// examples/, which binds them.
    #[arg(long, default_value = "deploy")]
    pub deploy: PathBuf,
    /// An image and the local program that plays it, as IMAGE=PROGRAM (repeatable).
    #[arg(long = "image", value_parser = parse_image)]
    pub images: Vec<(String, PathBuf)>,
    /// Start only the control plane and the kubelet stand-in: no CRDs, no controller or API
    /// server, no examples. The cluster then runs what is installed into it (the chart, say).
    #[arg(long)]
    pub cluster_only: bool,
    /// The registry binary (hack/registry/build.sh's): a registry runs on 127.0.0.1 for the
    /// plugin images. The full dev cluster needs it.
    #[arg(long, env = "LOOP_PLUGINS_REGISTRY_BIN")]
    pub registry_bin: Option<PathBuf>,
    /// The registry's port (default: a free one).
    #[arg(long)]
    pub registry_port: Option<u16>,
}

fn parse_image(text: &str) -> std::result::Result<(String, PathBuf), String> {
    let (image, program) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not IMAGE=PROGRAM"))?;
    Ok((image.to_string(), PathBuf::from(program)))
}

/// Runs `loop-plugins dev` on its own runtime.
pub fn main(args: DevArgs) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off")
            }),
        )
        .try_init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dev: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dev: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Brings the dev cluster up, waits for Ctrl-C (or SIGTERM), and stops everything.
pub async fn run(args: DevArgs) -> Result<()> {
    // A kubeconfig left by an earlier run names a server that is gone; whoever waits for the
    // file (hack/e2e-existing.sh) must see only this run's, so it goes first.
    remove_stale_kubeconfig(&args.kubeconfig)?;
    let images = default_images();
    for (image, program) in &args.images {
        images.insert(image, LocalImage::new(program));
    }
    eprintln!(
        "dev: starting the control plane in {}",
        args.run_dir.display()
    );
    let cluster = DevCluster::start(DevClusterOptions {
        binaries: args.controlplane.clone(),
        run_dir: Some(args.run_dir.clone()),
        images,
        node_name: None,
        // Plugins run as their image's USER, under the gate, which never runs them as root.
        // With --cluster-only (the chart's rehearsal) everything runs as we do, as before.
        run_as_pod_users: !args.cluster_only,
    })
    .await?;

    let own = super::binaries::product_binary()?;
    let bin_dir = cluster.run_dir().join("bin");
    let registry = match &args.registry_bin {
        Some(bin) => {
            let registry =
                DevRegistry::start(bin, &cluster.run_dir().join("registry"), args.registry_port)
                    .await?;
            eprintln!(
                "dev: registry at {} (log {})",
                registry.host(),
                registry.log().display()
            );
            Some(registry)
        }
        None => None,
    };
    // Our image, pushed; the stand-in plays its repository with our binary (reachable by any
    // uid: a Pod may run as its image's USER).
    let self_image = match &registry {
        Some(r) => {
            let image = dev_images::push_self(&r.host()).await?;
            let own = dev_images::reachable_copy(&own, &bin_dir)?;
            cluster.images().insert(&image, LocalImage::new(&own));
            Some(image)
        }
        None => None,
    };

    let components = if args.cluster_only {
        if let (Some(r), Some(image)) = (&registry, &self_image) {
            let env = cluster.run_dir().join("registry.env");
            std::fs::write(&env, format!("REGISTRY={}\nSELF_IMAGE={image}\n", r.host()))
                .map_err(Error::io("writing registry.env", &env))?;
        }
        None
    } else {
        let (Some(registry), Some(self_image)) = (&registry, &self_image) else {
            return Err(Error::Binaries(
                "the dev cluster needs a registry for its plugin images: pass --registry-bin \
                 (hack/registry/build.sh builds it; make dev does)"
                    .into(),
            ));
        };
        eprintln!("dev: installing the CRDs from {}", args.crds.display());
        install_crds(&cluster.kubectl(), &cluster.client(), &args.crds).await?;
        let components = components::start(&cluster, &own, self_image).await?;
        apply_chart_roles(&cluster, &args.deploy).await?;
        apply_examples(&cluster, &args.examples).await;
        for example in dev_images::EXAMPLES {
            install_example(&cluster, registry, &own, &bin_dir, example).await?;
        }
        let model = DemoModel::start()
            .await
            .map_err(|e| Error::Binaries(format!("starting the demo model: {e}")))?;
        use_runner(&cluster, self_image, &model).await?;
        Some((components, model))
    };

    write_kubeconfig(cluster.kubeconfig(), &args.kubeconfig)?;
    if let Some((components, _)) = &components {
        write_tour_env(&cluster, &args.kubeconfig, &own, &components.api_url)?;
    }
    print_usage(
        &cluster,
        &args,
        components.as_ref().map(|(c, _)| c.api_url.as_str()),
    );

    wait_for_signal().await;
    eprintln!("dev: stopping");
    if let Some((components, model)) = components {
        components.stop().await;
        drop(model);
    }
    cluster.shutdown().await;
    if let Some(registry) = registry {
        registry.stop().await;
    }
    eprintln!("dev: stopped");
    Ok(())
}

/// Applies the ClusterRoles of the chart's rendering under `deploy` (its top-level *.yaml; the
/// CRDs are installed apart): the roles the controller and the API server would run as, the
/// trigger's, and the ones the chart makes for people and apps to be bound to
/// (`loop-plugins-host-api-caller`, `-approver`, `-project-editor`, `-trustee`). Nothing else
/// of the chart: the dev cluster runs the controller and the API server itself.
async fn apply_chart_roles(cluster: &DevCluster, deploy: &Path) -> Result<()> {
    let mut roles = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy)
        .map_err(Error::io("reading the chart's rendering", deploy))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(Error::io("reading", &file))?;
        roles.extend(cluster_roles(&text));
    }
    let out = cluster.run_dir().join("chart-cluster-roles.yaml");
    std::fs::write(&out, roles.join("\n---\n")).map_err(Error::io("writing", &out))?;
    let applied = cluster.kubectl().apply_server_side(&out).await?;
    eprint!("dev: applied the chart's ClusterRoles\n{applied}");
    Ok(())
}

/// The `ClusterRole` documents of a multi-document YAML text.
fn cluster_roles(text: &str) -> Vec<String> {
    text.split("\n---")
        .filter(|doc| doc.lines().any(|l| l.trim_end() == "kind: ClusterRole"))
        .map(|doc| doc.trim_start_matches('\n').to_string())
        .collect()
}

/// Writes what README's tour starts from, beside the kubeconfig: `bin/` with links to the
/// built kubectl and helm and to our binary, and `env`, which a shell sources to use them
/// against this cluster and to know where the API server answers (`LOOP_API`).
fn write_tour_env(
    cluster: &DevCluster,
    kubeconfig: &Path,
    own: &Path,
    api_url: &str,
) -> Result<()> {
    use components::absolute;
    let dir = absolute(kubeconfig.parent().unwrap_or(Path::new(".")));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(Error::io("making the tour's bin folder", &bin))?;
    let binaries = cluster.control_plane().binaries();
    for (name, target) in [
        ("kubectl", binaries.path("kubectl")),
        ("helm", binaries.path("helm")),
        ("loop-plugins", own.to_path_buf()),
    ] {
        let link = bin.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).map_err(Error::io("linking", &link))?;
    }
    let env = dir.join("env");
    let text = format!(
        "# Written by make dev: `source .dev/env` (README's tour).\n\
         export KUBECONFIG={kubeconfig}\n\
         export PATH={bin}:$PATH\n\
         export LOOP_API={api_url}\n",
        kubeconfig = absolute(kubeconfig).display(),
        bin = bin.display(),
    );
    std::fs::write(&env, text).map_err(Error::io("writing", &env))
}

fn remove_stale_kubeconfig(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing an earlier run's kubeconfig", path)(e)),
    }
}

/// Copies the admin kubeconfig to `to` in one step (a file beside it, then a rename), so whoever
/// waits for `to` never reads half of it.
fn write_kubeconfig(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(Error::io("creating the kubeconfig's folder", dir))?;
    }
    let mut partial = to.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::copy(from, &partial).map_err(Error::io("writing the kubeconfig", &partial))?;
    std::fs::rename(&partial, to).map_err(Error::io("writing the kubeconfig", to))
}

/// The images the dev cluster knows without being told: our own binary, and the example
/// plugin's when it is built beside it.
pub fn default_images() -> ImageMap {
    let images = ImageMap::new();
    if let Ok(own) = super::binaries::product_binary() {
        if let Some(dir) = own.parent() {
            let echo = dir.join(ECHO_PLUGIN_BINARY);
            if echo.exists() {
                for image in ECHO_PLUGIN_IMAGES {
                    images.insert(image, LocalImage::new(&echo));
                }
            }
        }
        for image in OWN_IMAGES {
            images.insert(image, LocalImage::new(&own));
        }
    }
    images
}

/// Pushes an example plugin's image and installs it with `loop-plugins plugin install`, as an
/// operator would; the stand-in plays the pushed repository with the example's binary.
async fn install_example(
    cluster: &DevCluster,
    registry: &DevRegistry,
    own: &Path,
    bin_dir: &Path,
    example: dev_images::Example,
) -> Result<()> {
    let binary = own.with_file_name(example.binary);
    if !binary.exists() {
        eprintln!(
            "dev: no {} beside {}: the {} plugin is not installed",
            example.binary,
            own.display(),
            example.name
        );
        return Ok(());
    }
    let plugin_dir = super::binaries::repo_root().join(example.folder);
    let staging = cluster.run_dir().join(format!("{}-image", example.name));
    let (by_tag, pinned) =
        dev_images::push_example(&registry.host(), example, &binary, &plugin_dir, &staging).await?;
    eprintln!("dev: pushed {pinned}");
    let local = dev_images::reachable_copy(&binary, bin_dir)?;
    cluster.images().insert(
        &pinned,
        LocalImage::new(&local).in_image_at(example.entrypoint),
    );
    let out = tokio::process::Command::new(own)
        .args([
            "plugin",
            "install",
            &by_tag,
            "--approve-all",
            "--wait",
            "60",
        ])
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .await
        .map_err(Error::io("running loop-plugins plugin install", own))?;
    eprint!(
        "dev: loop-plugins plugin install {by_tag} --approve-all\n{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    if !out.status.success() {
        eprintln!(
            "dev: installing the {} plugin failed ({})",
            example.name, out.status
        );
    }
    Ok(())
}

/// The namespace of the examples' project, where its agent runs run.
const DEMO_NAMESPACE: &str = "demo";
/// The Secret there naming the model the runs talk to.
const MODEL_SECRET: &str = "model-endpoint";

/// Makes HostConfig's runner our image's `loop-plugins agent`, against `model` (no model can
/// run here: the demo stand-in does what one would), named in the `demo` namespace's
/// `model-endpoint` Secret. Only `spec.runner` is written, so the examples' HostConfig keeps
/// the rest.
async fn use_runner(cluster: &DevCluster, self_image: &str, model: &DemoModel) -> Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, Patch, PatchParams};
    let client = cluster.client();
    let params = PatchParams::apply("loop-plugins-dev").force();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": MODEL_SECRET, "namespace": DEMO_NAMESPACE },
        "stringData": {
            "LOOP_AGENT_MODEL_URL": model.url,
            "LOOP_AGENT_MODEL": "demo",
        },
    }))
    .expect("a Secret");
    let failed = |what: &'static str| move |e: kube::Error| Error::Binaries(format!("{what}: {e}"));
    Api::<Secret>::namespaced(client.clone(), DEMO_NAMESPACE)
        .patch(MODEL_SECRET, &params, &Patch::Apply(&secret))
        .await
        .map_err(failed("writing the demo model's Secret"))?;
    // A merge patch, not an apply: an applied `spec` would bring the CRD's defaults of every
    // field it leaves out (plugins.enabled: false among them) and own them.
    let runner = serde_json::json!({
        "spec": { "runner": {
            "image": self_image,
            "command": [model::contract::SELF_IMAGE_BINARY, "agent"],
            "credentialsSecret": MODEL_SECRET,
            "timeLimitSeconds": 120,
        } },
    });
    Api::<model::resources::HostConfig>::all(client)
        .patch(
            model::resources::HOST_CONFIG_NAME,
            &PatchParams::default(),
            &Patch::Merge(&runner),
        )
        .await
        .map_err(failed("naming HostConfig's runner"))?;
    eprintln!(
        "dev: agent runs run {self_image} `loop-plugins agent` against the demo model at {} \
         (a stand-in: no model runs here; docs/runner.md plugs in a real one)",
        model.url
    );
    Ok(())
}

/// Applies every YAML file under `path` (a file or folder); a missing path is fine. Files
/// that fail are tried again after the others (a Namespace may come in a later file), for as
/// long as a pass makes progress.
async fn apply_examples(cluster: &DevCluster, path: &Path) {
    let mut pending = yaml_files(path);
    if pending.is_empty() {
        eprintln!("dev: no example YAML under {}", path.display());
        return;
    }
    let kubectl = cluster.kubectl();
    loop {
        let tried = pending.len();
        let mut failed = Vec::new();
        for file in std::mem::take(&mut pending) {
            match kubectl.apply_server_side(&file).await {
                Ok(out) => eprint!("dev: applied {}\n{out}", file.display()),
                Err(e) => failed.push((file, e)),
            }
        }
        if failed.is_empty() {
            return;
        }
        if failed.len() == tried {
            for (file, e) in failed {
                eprintln!("dev: applying {} failed: {e}", file.display());
            }
            return;
        }
        pending = failed.into_iter().map(|(file, _)| file).collect();
    }
}

/// *.yaml and *.yml files under `path`, sorted, skipping `target` folders.
fn yaml_files(path: &Path) -> Vec<PathBuf> {
    let is_yaml = |p: &Path| p.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if path.is_file() {
        return if is_yaml(path) {
            vec![path.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let mut found = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                if p.file_name().is_none_or(|n| n != "target") {
                    stack.push(p);
                }
            } else if is_yaml(&p) {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

fn print_usage(cluster: &DevCluster, args: &DevArgs, api_url: Option<&str>) {
    let kubectl = cluster.kubectl();
    let kubectl = kubectl.program().display();
    let kubeconfig = args.kubeconfig.display();
    let what_runs = match api_url {
        Some(api_url) => format!(
            "The Plugin API: {api_url}; the controller and the API server run from this binary.\n\
             The console: {api_url}/console/ (`loop-plugins console --namespace demo --token \
             \"$(kubectl -n demo create token app)\"` prints a link that signs in).\n\
             Logs: {run}/logs (control plane, controller, api), {run}/kubelet/logs (pods).",
            run = cluster.run_dir().display(),
        ),
        None => format!(
            "Only the control plane and the kubelet stand-in run (--cluster-only): install the \
             chart with the built helm.\n\
             Logs: {run}/logs (control plane), {run}/kubelet/logs (pods).",
            run = cluster.run_dir().display(),
        ),
    };
    println!(
        "\n\
         The dev cluster is up: {server}\n\
         \n\
         \x20 export PATH={bin}:$PATH      # the built kubectl and helm\n\
         \x20 KUBECONFIG={kubeconfig} kubectl get plugins\n\
         \x20 KUBECONFIG={kubeconfig} {kubectl} get crds\n\
         \n\
         {what_runs}\n\
         Images the kubelet stand-in plays: {images}\n\
         Ctrl-C stops everything.",
        server = cluster.control_plane().server(),
        bin = cluster.control_plane().binaries().dir().display(),
        images = cluster.images().repositories().join(", "),
    );
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(term) => {
                term.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminated => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse_as_image_equals_program() {
        assert_eq!(
            parse_image("ex.com/a=/bin/a").unwrap(),
            ("ex.com/a".to_string(), PathBuf::from("/bin/a"))
        );
        assert!(parse_image("nothing").is_err());
    }

    #[test]
    fn cluster_only_is_a_flag() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            dev: DevArgs,
        }
        use clap::Parser;
        let cli = Cli::try_parse_from(["dev", "--cluster-only", "--image", "e.local/echo=/bin/e"])
            .unwrap();
        assert!(cli.dev.cluster_only);
        assert_eq!(cli.dev.images.len(), 1);
        assert!(!Cli::try_parse_from(["dev"]).unwrap().dev.cluster_only);
    }

    #[test]
    fn the_kubeconfig_is_written_whole_and_a_stale_one_removed() {
        let dir = std::env::temp_dir().join(format!("dev-kubeconfig-{}", std::process::id()));
        let from = dir.join("admin.kubeconfig");
        let to = dir.join("out").join("kubeconfig");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&from, "apiVersion: v1\n").unwrap();
        write_kubeconfig(&from, &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "apiVersion: v1\n");
        assert!(!dir.join("out").join("kubeconfig.partial").exists());
        remove_stale_kubeconfig(&to).unwrap();
        assert!(!to.exists());
        remove_stale_kubeconfig(&to).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_cluster_roles_are_taken_from_the_rendering() {
        let text = "# a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n\
                    ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n\
                    ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: b\n";
        let roles = cluster_roles(text);
        assert_eq!(roles.len(), 1);
        assert!(
            roles[0].starts_with("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n")
        );
        let deploy = crate::binaries::repo_root().join("deploy");
        let names: Vec<String> = std::fs::read_dir(&deploy)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
            .flat_map(|e| cluster_roles(&std::fs::read_to_string(e.path()).unwrap()))
            .filter_map(|doc| {
                doc.lines()
                    .skip_while(|l| *l != "metadata:")
                    .find_map(|l| l.strip_prefix("  name: ").map(str::to_string))
            })
            .collect();
        for bound in ["loop-plugins-host-api-caller", "loop-plugins-approver"] {
            assert!(
                names.iter().any(|n| n == bound),
                "the role {bound} the tour binds is in deploy/: {names:?}"
            );
        }
    }

    #[test]
    fn a_missing_examples_folder_has_no_yaml() {
        assert!(yaml_files(Path::new("/nonexistent/examples")).is_empty());
    }
}
