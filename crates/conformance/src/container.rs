//! Starts a plugin from its image with a container engine ([`crate::engine`]) as the host's
//! Pod runs it (crates/controller's `pod.rs`): the image by digest, under the security settings
//! of a plugin's container ([`model::security`]: as the image's USER, a read-only root, no
//! capabilities, no privilege escalation) with a tmpfs `/tmp`, the secret and
//! token read-only under `/var/run/loop-plugin`, an empty `/data`, the manifest it ships. Its
//! network is this machine's (`--network host`), so it listens on a free loopback port and
//! reaches the fake host there. Removed (`rm -f`) when dropped. The argument list is pure
//! ([`run_args`]); the rest is thin.
//!
//! Not `--rm`: a container that exits before it answers would take its log with it, and its
//! last lines are what the author needs; the drop removes it either way.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::api::core::v1::SecurityContext;

use model::contract::{DATA_DIR, RunAs, SECRET_DIR, SECRET_KEY, TOKEN_KEY};
use model::security::restricted_container;

use crate::engine::Engine;
use crate::error::SetupError;
use crate::started::{self, Files, PluginPaths, Started};

/// Where the plugin reads its manifest in its image (the SDKs' default).
pub const MANIFEST_IN_IMAGE: &str = "/loop-plugin/plugin.json";
/// The prefix of the containers' names.
pub const NAME_PREFIX: &str = "loop-plugins-conformance-";

/// One container to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    /// `registry/repository@sha256:...`: what ran is what was checked.
    pub image: String,
    /// The image's USER.
    pub run_as: RunAs,
    pub port: u16,
    pub api_url: String,
    /// On this machine, mounted read-only.
    pub secret_file: PathBuf,
    pub token_file: PathBuf,
    /// On this machine, mounted as `/data`.
    pub data: PathBuf,
}

/// `run ...` for the engine: detached, removed only by the drop.
pub fn run_args(plan: &Plan) -> Vec<String> {
    let secret = format!("{SECRET_DIR}/{SECRET_KEY}");
    let token = format!("{SECRET_DIR}/{TOKEN_KEY}");
    let mut args: Vec<String> = [
        "run",
        "--detach",
        "--name",
        &plan.name,
        "--network",
        "host",
        "--tmpfs",
        "/tmp",
        "--volume",
        &format!("{}:{secret}:ro", plan.secret_file.display()),
        "--volume",
        &format!("{}:{token}:ro", plan.token_file.display()),
        "--volume",
        &format!("{}:{DATA_DIR}", plan.data.display()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(security_flags(&restricted_container(Some(plan.run_as))));
    let env = started::plugin_env(
        &PluginPaths {
            secret_file: Path::new(&secret),
            token_file: Path::new(&token),
            data: Path::new(DATA_DIR),
            manifest: Path::new(MANIFEST_IN_IMAGE),
        },
        plan.port,
        &plan.api_url,
    );
    for (name, value) in env {
        args.push("--env".into());
        args.push(format!("{name}={value}"));
    }
    args.push(plan.image.clone());
    args
}

/// The engine's flags for a container under `security`, a Pod's per-container settings: its
/// user, a read-only root, the capabilities dropped and added, no privilege escalation. The
/// seccomp profile needs none: RuntimeDefault is the engine's default profile, as it is the
/// kubelet's runtime's.
fn security_flags(security: &SecurityContext) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(uid) = security.run_as_user {
        flags.push("--user".into());
        flags.push(match security.run_as_group {
            Some(gid) => format!("{uid}:{gid}"),
            None => uid.to_string(),
        });
    }
    if security.read_only_root_filesystem == Some(true) {
        flags.push("--read-only".into());
    }
    if let Some(capabilities) = &security.capabilities {
        for (flag, names) in [
            ("--cap-drop", &capabilities.drop),
            ("--cap-add", &capabilities.add),
        ] {
            for name in names.iter().flatten() {
                flags.push(flag.into());
                flags.push(name.clone());
            }
        }
    }
    if security.allow_privilege_escalation == Some(false) {
        flags.push("--security-opt".into());
        flags.push("no-new-privileges".into());
    }
    flags
}

/// A running container, removed when dropped.
pub struct Container {
    engine: Engine,
    name: String,
    image: String,
    url: String,
    secret: String,
    _files: Files,
}

impl Started for Container {
    fn url(&self) -> &str {
        &self.url
    }

    fn secret(&self) -> &str {
        &self.secret
    }

    fn what(&self) -> &str {
        &self.image
    }

    fn exited(&mut self) -> Option<String> {
        let out = std::process::Command::new(&self.engine.program)
            .args([
                "inspect",
                "--format",
                "{{.State.Status}} {{.State.ExitCode}}",
                &self.name,
            ])
            .stdin(Stdio::null())
            .output();
        let out = match out {
            Ok(out) if out.status.success() => out,
            _ => return Some("container gone".into()),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        match text.trim().split_once(' ') {
            Some(("exited" | "dead", code)) => Some(format!("exit code {code}")),
            _ => None,
        }
    }

    fn log_tail(&self) -> String {
        let out = std::process::Command::new(&self.engine.program)
            .args(["logs", "--tail", "20", &self.name])
            .stdin(Stdio::null())
            .output();
        match out {
            // The plugin logs to stderr; the engine gives each stream back as it was.
            Ok(out) => started::tail(
                &(String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr)),
            ),
            Err(e) => format!("({} logs: {e})", self.engine.program.display()),
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.engine.program)
            .args(["rm", "--force", &self.name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Pulls `image` (pinned by digest) into the engine, runs it as `run_as` with the Plugin API
/// at `api_url` with `token`, and waits until it answers.
pub async fn start(
    engine: &Engine,
    image: &str,
    run_as: RunAs,
    api_url: &str,
    token: &str,
) -> Result<Container, SetupError> {
    engine_step(engine, "pull", &["pull", image], image).await?;
    let files = Files::new(token)?;
    // The container's user is not ours: it reads the secret and token, and writes /data.
    open_to_all(&files.secret_file, 0o644)?;
    open_to_all(&files.token_file, 0o644)?;
    open_to_all(&files.data, 0o777)?;
    let plan = Plan {
        name: format!("{NAME_PREFIX}{}-{:x}", std::process::id(), started::nanos()),
        image: image.into(),
        run_as,
        port: started::free_port()?,
        api_url: api_url.into(),
        secret_file: files.secret_file.clone(),
        token_file: files.token_file.clone(),
        data: files.data.clone(),
    };
    let args = run_args(&plan);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut container = Container {
        engine: engine.clone(),
        name: plan.name.clone(),
        image: image.into(),
        url: format!("http://127.0.0.1:{}", plan.port),
        secret: files.secret.clone(),
        _files: files,
    };
    // Made from here on, so a run that fails half-way is removed too.
    engine_step(engine, "run", &args, image).await?;
    started::wait_until_up(&mut container).await?;
    Ok(container)
}

/// Runs one engine command; a failure is an error with what it said.
async fn engine_step(
    engine: &Engine,
    step: &'static str,
    args: &[&str],
    image: &str,
) -> Result<(), SetupError> {
    let out = tokio::process::Command::new(&engine.program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| SetupError::Start {
            program: engine.program.display().to_string(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(SetupError::Engine {
        engine: engine.program.display().to_string(),
        step,
        image: image.into(),
        said: started::tail(&String::from_utf8_lossy(&out.stderr)),
    })
}

fn open_to_all(path: &Path, mode: u32) -> Result<(), SetupError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        SetupError::Write {
            path: path.into(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_runs_as_the_pod_does() {
        let plan = Plan {
            name: "loop-plugins-conformance-1-a".into(),
            image: format!("localhost:5001/e2e/echo@sha256:{}", "a".repeat(64)),
            run_as: RunAs {
                uid: 65532,
                gid: None,
            },
            port: 41000,
            api_url: "http://127.0.0.1:40000".into(),
            secret_file: "/tmp/x/secret".into(),
            token_file: "/tmp/x/token".into(),
            data: "/tmp/x/data".into(),
        };
        let args = run_args(&plan).join(" ");
        assert_eq!(
            args,
            format!(
                "run --detach --name loop-plugins-conformance-1-a --network host \
                 --tmpfs /tmp \
                 --volume /tmp/x/secret:/var/run/loop-plugin/secret:ro \
                 --volume /tmp/x/token:/var/run/loop-plugin/token:ro \
                 --volume /tmp/x/data:/data \
                 --user 65532:65532 --read-only --cap-drop ALL \
                 --security-opt no-new-privileges \
                 --env LOOP_PLUGIN_HOST=127.0.0.1 --env LOOP_PLUGIN_PORT=41000 \
                 --env LOOP_PLUGIN_SECRET_FILE=/var/run/loop-plugin/secret \
                 --env LOOP_PLUGIN_TOKEN_FILE=/var/run/loop-plugin/token \
                 --env LOOP_API_URL=http://127.0.0.1:40000 \
                 --env LOOP_PLUGIN_DATA_DIR=/data \
                 --env LOOP_PLUGIN_MANIFEST=/loop-plugin/plugin.json \
                 localhost:5001/e2e/echo@sha256:{}",
                "a".repeat(64)
            )
        );
    }

    #[test]
    fn the_flags_follow_the_containers_security_settings() {
        let run_as = RunAs {
            uid: 1000,
            gid: Some(1001),
        };
        let mut security = restricted_container(Some(run_as));
        assert_eq!(
            security_flags(&security).join(" "),
            "--user 1000:1001 --read-only --cap-drop ALL --security-opt no-new-privileges"
        );
        security.read_only_root_filesystem = Some(false);
        security.allow_privilege_escalation = None;
        security.run_as_group = None;
        if let Some(capabilities) = &mut security.capabilities {
            capabilities.add = Some(vec!["NET_BIND_SERVICE".into()]);
        }
        assert_eq!(
            security_flags(&security).join(" "),
            "--user 1000 --cap-drop ALL --cap-add NET_BIND_SERVICE"
        );
    }
}
