//! The binary's offline verbs, run as a user would: `crds` prints the CRDs the code generates
//! (tests/crds.rs checks the checked-in copies against them), `manifest check` accepts every
//! example and refuses a broken copy naming the field (or, for a file cut short, the line and
//! column where it ends), `plugin keygen` writes a key once.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
fn crds_prints_the_generated_crds() {
    let (ok, printed) = run(&["crds"]);
    assert!(ok, "{printed}");
    assert!(
        printed == model::crdgen::yaml(),
        "loop-plugins crds printed other than model::crdgen::yaml()"
    );
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
fn a_manifest_cut_short_is_reported_where_it_ends() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.json");
    let file = path.display().to_string();
    // Cut mid-value.
    std::fs::write(&path, "{ \"id\": \"x\", \"version\": ").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    assert_eq!(text.trim_end(), format!("{file}:1:25: EOF parsing value"));
    // Cut after a few good lines of the example.
    let original = std::fs::read_to_string(repo().join("examples/manifests/echo.json")).unwrap();
    let kept: Vec<&str> = original.lines().take(4).collect();
    let last = kept.last().unwrap();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    let end = format!("{file}:4:{}: EOF parsing ", last.chars().count() + 1);
    assert!(text.starts_with(&end), "want {end:?}: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keygen_writes_a_key_once_and_prints_its_public_key() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-keygen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("publisher.pem");
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["plugin", "keygen", "--out", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let public = String::from_utf8(out.stdout).unwrap();
    assert_eq!(public.trim().len(), 64, "{public}");
    assert!(
        std::fs::read_to_string(&key)
            .unwrap()
            .contains("BEGIN PRIVATE KEY")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let (ok, text) = run(&["plugin", "keygen", "--out", key.to_str().unwrap()]);
    assert!(!ok, "a second keygen over the same file must fail: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
