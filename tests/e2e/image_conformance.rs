//! `loop-plugins conformance IMAGE` as a plugin's CI runs it on every image it pushes: the
//! built binary pulls the image from the run's registry, runs admission's stages on it, runs
//! it with Docker as its Pod runs it and checks it. The real echo image
//! (`LOOP_PLUGINS_E2E_ECHO_IMAGE`, kind-e2e's) passes; the echo binary in an image whose
//! manifest says its tool answers what it does not fails, naming the tool's calls. Needs
//! Docker on this machine and the images' echo binary (`LOOP_PLUGINS_E2E_ECHO_BINARY`), as
//! kind-e2e has them: kind only.

use std::time::Duration;

use anyhow::{Context, ensure};
use model::resources::Plugin;
use serde_json::Value;
use testkit::images::{ECHO_BINARY_ENV, ImageContent, QUIZ, QUIZ_BINARY_ENV};

use crate::controller_support::unpublished;
use crate::support::{E2eTest, Ns, test};

/// The real echo image, pushed by kind-e2e (hack/kind/app-images.sh).
const ECHO_IMAGE_ENV: &str = "LOOP_PLUGINS_E2E_ECHO_IMAGE";

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "image_conformance::the_echo_image_passes_and_one_whose_tool_breaks_its_schema_fails",
            echo_image,
        )
        .cluster_only("runs plugin images with Docker, which kind-e2e has and the local control plane does not need")
        .timeout(Duration::from_secs(300)),
        test(
            "image_conformance::the_quiz_examples_image_passes",
            quiz_image,
        )
        .cluster_only("runs plugin images with Docker, which kind-e2e has and the local control plane does not need")
        .timeout(Duration::from_secs(300)),
    ]
}

/// `loop-plugins conformance ARGS...`: exit code, stdout, stderr.
async fn conformance(args: &[&str]) -> anyhow::Result<(Option<i32>, String, String)> {
    let out = tokio::process::Command::new(testkit::binary())
        .arg("conformance")
        .args(args)
        .output()
        .await?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

async fn echo_image(ns: Ns) -> anyhow::Result<()> {
    let image = std::env::var(ECHO_IMAGE_ENV)
        .with_context(|| format!("{ECHO_IMAGE_ENV}: the echo image kind-e2e pushes"))?;
    let (code, out, err) = conformance(&[&image, "--json"]).await?;
    ensure!(code == Some(0), "{image}: exit {code:?}\n{out}{err}");
    let report: Value = serde_json::from_str(&out).context("the JSON report")?;
    let findings = report["findings"].as_array().context("findings")?;
    let admission: Vec<&Value> = findings
        .iter()
        .filter(|f| f["area"] == "admission")
        .collect();
    ensure!(
        !admission.is_empty() && admission.iter().all(|f| f["outcome"] == "pass"),
        "{out}"
    );
    ensure!(
        findings
            .iter()
            .any(|f| f["area"] == "health" && f["outcome"] == "pass"),
        "{out}"
    );

    // The echo binary serves what its image's manifest declares, so the break is one it
    // cannot see: its tool's answer (`echo`, a string) held to an output schema that wants a
    // number.
    ensure!(
        std::env::var_os(ECHO_BINARY_ENV).is_some(),
        "{ECHO_BINARY_ENV}: the static echo binary the suite's images carry (kind-e2e sets it)"
    );
    let text = include_str!("../../examples/echo-plugin/plugin.json");
    let broken = text.replacen(
        "\"echo\": { \"type\": \"string\" }",
        "\"echo\": { \"type\": \"integer\" }",
        1,
    );
    ensure!(
        broken != text,
        "the example changed shape: update this test"
    );
    let plugin = Plugin::from_manifest(&broken, &unpublished("echo"), vec![], true)?;
    let pushed = ns
        .cluster()
        .plugin_images()
        .push(
            &format!("{}-schema", ns.name()),
            &ImageContent::for_plugin(&plugin),
        )
        .await?;
    let (code, out, err) = conformance(&[&pushed]).await?;
    ensure!(code == Some(1), "{pushed}: exit {code:?}\n{out}{err}");
    for call in ["agent say's call", "a workflow's call"] {
        let line = format!(
            "FAIL tools POST /tools/echo ({call}): structured_content breaks the output_schema"
        );
        ensure!(
            out.lines().any(|l| l.starts_with(&line)),
            "no line {line:?} in\n{out}"
        );
    }
    ensure!(
        out.lines()
            .filter(|l| l.starts_with("FAIL "))
            .all(|l| l.starts_with("FAIL tools POST /tools/echo ")),
        "only the tool's calls fail:\n{out}"
    );
    Ok(())
}

/// The quiz example (on the SDK: settings, an action that starts an agent run, a tool with an
/// output schema, a card) as an image with its real binary passes as it is, runs ended by the
/// check included.
async fn quiz_image(ns: Ns) -> anyhow::Result<()> {
    ensure!(
        std::env::var_os(QUIZ_BINARY_ENV).is_some(),
        "{QUIZ_BINARY_ENV}: the static quiz binary (kind-e2e sets it)"
    );
    let text = include_str!("../../examples/quiz-plugin/plugin.json");
    let plugin = Plugin::from_manifest(text, &unpublished("quiz"), vec![], true)?;
    let pushed = ns
        .cluster()
        .plugin_images()
        .push_for(
            QUIZ,
            &format!("{}-quiz", ns.name()),
            &ImageContent::for_program(QUIZ, &plugin),
        )
        .await?;
    let (code, out, err) = conformance(&[&pushed]).await?;
    ensure!(code == Some(0), "{pushed}: exit {code:?}\n{out}{err}");
    ensure!(
        out.lines().any(|l| l.starts_with("PASS admission")),
        "no admission lines:\n{out}"
    );
    Ok(())
}
