//! README's five-minute tour, run from the README itself so it cannot drift: the `sh` blocks of
//! its "A five-minute tour" section, in order, in one bash with `set -euo pipefail`, against
//! the cluster `make dev` makes (`loop-plugins-dev`, started here as `hack/dev.sh` starts it,
//! with its `.dev/` in a folder of the test's own). The first block, `make dev` itself, is the
//! one the test does instead of running. Every step of the tour fails the script when it
//! does not do what the README says: `curl -f` on the host API's answers, `kubectl wait` on
//! what the cluster should show.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::Command;

use crate::support::{E2eTest, plain, test};

/// The README section the test runs.
const SECTION: &str = "## A five-minute tour";

pub fn tests() -> Vec<E2eTest> {
    vec![
        plain(
            "tour::the_readme_has_a_tour_of_shell_blocks",
            the_readme_has_a_tour_of_shell_blocks,
        ),
        test("tour::the_readme_tour_works_as_written", |ns| async move {
            the_readme_tour_works_as_written(ns.cluster().run_dir()).await
        })
        .timeout(Duration::from_secs(600))
        .local_only("it starts make dev's own cluster (loop-plugins-dev) beside the suite's"),
    ]
}

fn readme() -> anyhow::Result<String> {
    let path = testkit::repo_root().join("README.md");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The shell blocks of README's tour, in order, but those that only run `make dev`.
pub fn tour_blocks(readme: &str) -> Vec<String> {
    let Some(start) = readme.find(&format!("\n{SECTION}\n")) else {
        return Vec::new();
    };
    let section = &readme[start + 1..];
    let end = section[SECTION.len()..]
        .find("\n## ")
        .map_or(section.len(), |i| i + SECTION.len());
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in section[..end].lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(lines), "```") => {
                let block = lines.join("\n");
                let only_make_dev = lines
                    .iter()
                    .map(|l| l.split('#').next().unwrap_or("").trim())
                    .filter(|l| !l.is_empty())
                    .all(|l| l.starts_with("make dev"));
                if !only_make_dev {
                    blocks.push(block);
                }
                current = None;
            }
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    blocks
}

fn the_readme_has_a_tour_of_shell_blocks() -> anyhow::Result<()> {
    let blocks = tour_blocks(&readme()?);
    // See the resources, call the tool, watch it idle, flip the switch, the tampered image.
    if blocks.len() < 5 {
        bail!(
            "README's {SECTION:?} has {} shell blocks to run, not the five steps of the tour",
            blocks.len()
        );
    }
    if !blocks[0].contains("source .dev/env") {
        bail!(
            "the tour's first commands do not start from .dev/env: {}",
            blocks[0]
        );
    }
    // The parser takes `make dev` out, and keeps everything else.
    let sample = "x\n## A five-minute tour\n```sh\nmake dev  # run\n```\n```sh\na\nb\n```\n## Next\n```sh\nc\n```\n";
    if tour_blocks(sample) != ["a\nb"] {
        bail!("tour_blocks reads the sample as {:?}", tour_blocks(sample));
    }
    Ok(())
}

async fn the_readme_tour_works_as_written(run_dir: &Path) -> anyhow::Result<()> {
    let blocks = tour_blocks(&readme()?);
    if blocks.is_empty() {
        bail!("README has no {SECTION:?} to run");
    }
    let dir = run_dir.join("tour");
    std::fs::create_dir_all(&dir)?;
    let mut dev = DevProcess::start(&dir).await?;
    let script = format!("set -euo pipefail\nset -x\n{}\n", blocks.join("\n\n"));
    let script_path = dir.join("tour.sh");
    std::fs::write(&script_path, &script)?;
    let out = Command::new("bash")
        .arg(&script_path)
        .current_dir(&dir)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("running the tour's commands with bash")?;
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("tour.out"), &printed)?;
    // The link the tour's `loop-plugins console` printed, opened as a person would: the
    // console with the echo example's panel in it.
    let console = match console_link(&printed) {
        Some(link) if out.status.success() => the_console_shows_the_echo_panel(&dir, link).await,
        Some(_) => Ok(()),
        None => Err(anyhow::anyhow!("the tour printed no console link")),
    };
    dev.stop().await;
    if !out.status.success() {
        bail!(
            "README's tour failed ({}); what it printed (also in {}):\n{printed}\n\
             make dev's log: {}",
            out.status,
            dir.join("tour.out").display(),
            dev.log.display()
        );
    }
    console?;
    // make dev installs both examples: `kubectl get plugins` lists quiz beside echo.
    if !printed.lines().any(|l| l.starts_with("quiz ")) {
        bail!("the tour's kubectl get plugins never listed quiz:\n{printed}");
    }
    // What the README says the reader sees, seen.
    for expected in [
        "\"echo\":\"hi\"",
        "pod/echo-general-",
        "plugin.plugins.loop.dev/echo patched",
        // The quiz's tool call waited for a person, and the demo's approver approved it.
        "toolcallapproval.plugins.loop.dev/",
        "by system:serviceaccount:demo:approver",
        // The quiz's run went through, with its tool call, and its end posted the score card.
        "agentrun.plugins.loop.dev/",
        "condition met",
        "Quiz finished",
    ] {
        if !printed.contains(expected) {
            bail!("the tour ran but never printed {expected:?}:\n{printed}");
        }
    }
    Ok(())
}

/// The console link `loop-plugins console` printed (`http://…/console/#…`).
fn console_link(printed: &str) -> Option<&str> {
    printed
        .lines()
        .filter(|l| !l.starts_with('+'))
        .flat_map(str::split_whitespace)
        .find(|w| w.starts_with("http") && w.contains("/console/#"))
}

/// Opens `link` in headless Chromium: the console signs in, and the echo example's panel
/// connects over the bridge (its container started for it). A screenshot is left beside the
/// tour's output.
async fn the_console_shows_the_echo_panel(dir: &Path, link: &str) -> anyhow::Result<()> {
    let browser = testkit::browser::Browser::launch(dir.join("chromium.log")).await?;
    let page = browser.new_page().await?;
    page.navigate(link).await?;
    let reports = |page: &testkit::browser::Page| {
        page.console()
            .iter()
            .map(|e| format!("[{} {}] {}", e.source, e.level, e.text.trim()))
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    let echo = "document.querySelector('iframe.pane-frame[data-plugin=echo]')";
    if let Err(e) = page
        .wait_for(
            &format!("window.loopConsole?.ready === true && {echo}?.src?.length > 0"),
            Duration::from_secs(30),
        )
        .await
    {
        bail!("the console with the echo pane: {e}\n  {}", reports(&page));
    }
    let src = page.evaluate(&format!("{echo}.src")).await?;
    let src = src.as_str().context("the echo pane's link")?;
    let frame = page.wait_for_frame(src, Duration::from_secs(30)).await?;
    if let Err(e) = frame
        .wait_for(
            "document.getElementById('status')?.textContent === 'Connected' \
             && document.getElementById('chat')?.textContent === 'general'",
            Duration::from_secs(90),
        )
        .await
    {
        bail!("the echo panel: {e}\n  {}", reports(&page));
    }
    page.screenshot(&dir.join("console.png")).await?;
    Ok(())
}

/// `loop-plugins-dev` as `make dev` runs it, with its `.dev/` under a folder of the test's own.
struct DevProcess {
    child: tokio::process::Child,
    log: PathBuf,
}

impl DevProcess {
    async fn start(dir: &Path) -> anyhow::Result<Self> {
        let repo = testkit::repo_root();
        let dev_bin = testkit::binary().with_file_name("loop-plugins-dev");
        let registry = oci::testing::registry_binary()?;
        let dot_dev = dir.join(".dev");
        let log = dir.join("make-dev.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new(&dev_bin)
            .arg("--kubeconfig")
            .arg(dot_dev.join("kubeconfig"))
            .arg("--run-dir")
            .arg(dot_dev.join("run"))
            .arg("--crds")
            .arg(repo.join("crds"))
            .arg("--examples")
            .arg(repo.join("examples"))
            .arg("--deploy")
            .arg(repo.join("deploy"))
            .env("LOOP_PLUGINS_REGISTRY_BIN", &registry)
            .current_dir(&repo)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", dev_bin.display()))?;
        let mut dev = DevProcess { child, log };
        let env = dot_dev.join("env");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
        while !env.exists() {
            if let Some(status) = dev.child.try_wait()? {
                bail!(
                    "loop-plugins-dev exited with {status} before the cluster was up:\n{}",
                    std::fs::read_to_string(&dev.log).unwrap_or_default()
                );
            }
            if tokio::time::Instant::now() > deadline {
                dev.stop().await;
                bail!(
                    "loop-plugins-dev did not write {} within 240 s:\n{}",
                    env.display(),
                    std::fs::read_to_string(&dev.log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(dev)
    }

    /// SIGTERM, as Ctrl-C in the README's first terminal; killed after 30 s.
    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: a signal to our own child's pid.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
