//! The crates a plugin author depends on are ready for crates.io: the manifest reader (which
//! the SDK shares with the controller, and whose `gate` rules the gate enforces), the gate,
//! and the SDK. `cargo package` takes the three together, offline (each later one resolving
//! the earlier from the packages just made, as a publish in that order would), every
//! dependency versioned, and each crate carries the files it builds from. `make publish-check` also builds each packaged crate
//! alone, which is too slow for every test run.

use std::path::Path;
use std::process::Command;

/// In the order they would be published.
const CRATES: [&str; 3] = [
    "loop-plugins-manifest",
    "loop-plugins-gate",
    "loop-plugin-sdk",
];

fn package(target: &Path) -> std::process::Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["package", "--no-verify", "--offline", "--allow-dirty"])
        .arg("--target-dir")
        .arg(target);
    for name in CRATES {
        command.args(["-p", name]);
    }
    command.output().expect("cargo runs")
}

/// The files in a `.crate` (a gzipped tar).
fn files(crate_file: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("tzf")
        .arg(crate_file)
        .output()
        .expect("tar runs");
    assert!(out.status.success(), "tar tzf {}", crate_file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_once('/').map_or(l, |(_, rest)| rest).to_string())
        .collect()
}

/// One file of a `.crate`.
fn read(crate_file: &Path, name: &str, version: &str, inner: &str) -> String {
    let out = Command::new("tar")
        .arg("xzOf")
        .arg(crate_file)
        .arg(format!("{name}-{version}/{inner}"))
        .output()
        .expect("tar runs");
    assert!(out.status.success(), "{inner} in {}", crate_file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A folder of its own under the system's temporary folder, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("loop-plugins-publish-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_sdk_and_what_it_depends_on_package_for_crates_io() {
    let target = TempDir::new();
    let out = package(target.path());
    assert!(
        out.status.success(),
        "cargo package: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = env!("CARGO_PKG_VERSION");
    for name in CRATES {
        let crate_file = target
            .path()
            .join("package")
            .join(format!("{name}-{version}.crate"));
        let listed = files(&crate_file);
        for needed in ["Cargo.toml", "src/lib.rs"] {
            assert!(listed.iter().any(|f| f == needed), "{name}: no {needed}");
        }
        // What crates.io gets: every dependency by version, none by path.
        let manifest = read(&crate_file, name, version, "Cargo.toml");
        assert!(!manifest.contains("path = \"../"), "{name}:\n{manifest}");
        assert!(
            manifest.contains("license = \"Apache-2.0\""),
            "{name}:\n{manifest}"
        );
    }
    // The gate reads the manifest's rules, and an author's build of the SDK never builds it.
    let gate = target
        .path()
        .join("package")
        .join(format!("loop-plugins-gate-{version}.crate"));
    let manifest = read(&gate, "loop-plugins-gate", version, "Cargo.toml");
    assert!(
        manifest.contains("package = \"loop-plugins-manifest\""),
        "{manifest}"
    );
    let sdk = target
        .path()
        .join("package")
        .join(format!("loop-plugin-sdk-{version}.crate"));
    assert!(files(&sdk).iter().any(|f| f == "README.md"));
    let manifest = read(&sdk, "loop-plugin-sdk", version, "Cargo.toml");
    assert!(
        manifest.contains("[dependencies.manifest]")
            && manifest.contains("package = \"loop-plugins-manifest\"")
            && !manifest.contains("loop-plugins-gate"),
        "{manifest}"
    );
}
