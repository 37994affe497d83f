//! The binary's offline verbs, run as a user would: `crds` prints exactly crds/, `manifest
//! check` accepts every example and refuses a broken copy naming the field.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(args)
        .output()
        .expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn check(path: &Path) -> (bool, String) {
    run(&["manifest", "check", path.to_str().unwrap()])
}

#[test]
fn crds_prints_what_crds_holds() {
    let (ok, printed) = run(&["crds"]);
    assert!(ok);
    let checked_in = std::fs::read_to_string(repo().join("crds/loop-plugins.yaml")).unwrap();
    assert!(printed == checked_in, "crds/ is stale: run `make crds`");
}

#[test]
fn every_example_manifest_is_valid() {
    for example in [
        "examples/manifests/echo.json",
        "examples/manifests/full.json",
        "examples/echo-plugin/plugin.json",
    ] {
        let (ok, text) = check(&repo().join(example));
        assert!(ok, "{example}: {text}");
        assert_eq!(text.lines().count(), 1, "one summary line: {text}");
        assert!(text.contains("valid"), "{text}");
    }
}

#[test]
fn a_broken_copy_is_refused_naming_each_field() {
    let original = std::fs::read_to_string(repo().join("examples/manifests/echo.json")).unwrap();
    let broken = original
        .replacen("\"api\": \"1\"", "\"api\": \"2\"", 1)
        .replacen("\"id\": \"echo\"", "\"id\": \"Echo!\"", 1);
    assert_ne!(
        broken, original,
        "the example changed shape: update this test"
    );
    let dir = std::env::temp_dir().join(format!("loop-plugins-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.json");
    std::fs::write(&path, broken).unwrap();
    let (ok, text) = check(&path);
    assert!(!ok, "a broken manifest passed: {text}");
    assert!(text.lines().any(|l| l.starts_with("api:")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("id:")), "{text}");

    std::fs::write(&path, "{\n  \"id\": \"echo\",\n  \"api\" \"1\"\n}\n").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    assert!(
        text.contains(":3:"),
        "a syntax error names its line: {text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_example_plugin_resource_is_rendered_from_the_echo_manifest() {
    let yaml = std::fs::read_to_string(repo().join("examples/plugin-echo.yaml")).unwrap();
    let image = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("registry.local/"))
        .map(|rest| format!("registry.local/{rest}"))
        .unwrap();
    let (ok, rendered) = run(&[
        "plugin",
        "render",
        "--manifest",
        repo()
            .join("examples/echo-plugin/plugin.json")
            .to_str()
            .unwrap(),
        "--image",
        &image,
        "--approve-all",
        "--",
        "/echo-plugin",
    ]);
    assert!(ok, "{rendered}");
    let body: String = yaml
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        body == rendered,
        "examples/plugin-echo.yaml is stale; re-render it (see its header)"
    );
}
