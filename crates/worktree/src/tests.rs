//! Against real repositories made and read with Debian's git: an origin (bare), the channel's
//! checkout cloned from it, and a second clone that pushes to the origin as a teammate would.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use super::*;

fn run_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Repos {
    _dir: TempDir,
    origin: PathBuf,
    checkout: PathBuf,
    teammate: PathBuf,
    worktree: PathBuf,
}

fn commit(dir: &Path, file: &str, text: &str, message: &str) -> String {
    std::fs::write(dir.join(file), text).unwrap();
    run_git(dir, &["add", file]);
    run_git(dir, &["commit", "-q", "-m", message]);
    run_git(dir, &["rev-parse", "HEAD"])
}

fn repos() -> Repos {
    let dir = TempDir::new().unwrap();
    let root = dir.path().to_path_buf();
    let origin = root.join("origin.git");
    run_git(&root, &["init", "-q", "--bare", "origin.git"]);
    let seed = root.join("seed");
    run_git(&root, &["init", "-q", "seed"]);
    commit(&seed, "README", "hello\n", "first");
    run_git(&seed, &["push", "-q", origin.to_str().unwrap(), "main"]);
    run_git(
        &root,
        &["clone", "-q", origin.to_str().unwrap(), "checkout"],
    );
    run_git(
        &root,
        &["clone", "-q", origin.to_str().unwrap(), "teammate"],
    );
    Repos {
        origin,
        checkout: root.join("checkout"),
        teammate: root.join("teammate"),
        worktree: root.join(".loop-worktrees/general/task-1"),
        _dir: dir,
    }
}

#[test]
fn a_worktree_is_made_on_its_own_branch_at_the_checkouts_head() {
    let r = repos();
    let head = run_git(&r.checkout, &["rev-parse", "HEAD"]);
    let made = make(&r.checkout, "task-1", &r.worktree).unwrap();
    assert_eq!(made.branch, "loop/task-1");
    assert_eq!(made.commit, head);
    assert!(exists(&r.checkout, "task-1", &r.worktree).unwrap());
    // git itself sees it: listed, on its branch, with the checkout's files.
    let list = run_git(&r.checkout, &["worktree", "list", "--porcelain"]);
    assert!(list.contains("branch refs/heads/loop/task-1"), "{list}");
    assert_eq!(run_git(&r.worktree, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        run_git(&r.worktree, &["branch", "--show-current"]),
        "loop/task-1"
    );
    assert_eq!(
        std::fs::read_to_string(r.worktree.join("README")).unwrap(),
        "hello\n"
    );
    // The channel's checkout is as it was.
    assert_eq!(run_git(&r.checkout, &["status", "--porcelain"]), "");
    assert_eq!(run_git(&r.checkout, &["branch", "--show-current"]), "main");
}

#[test]
fn a_later_run_is_rebased_onto_the_origin_branch() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    // Nothing moved: up to date.
    assert_eq!(
        update(&r.checkout, &r.worktree).unwrap(),
        Updated::UpToDate {
            onto: "origin/main".into()
        }
    );
    // The first run's action commits in its worktree; a teammate pushes to the origin.
    commit(&r.worktree, "notes.md", "from the task\n", "task's work");
    let theirs = commit(&r.teammate, "CHANGELOG", "v2\n", "teammate's work");
    run_git(&r.teammate, &["push", "-q", "origin", "main"]);
    let Updated::Rebased { onto, to, commits } = update(&r.checkout, &r.worktree).unwrap() else {
        panic!("not rebased")
    };
    assert_eq!((onto.as_str(), commits), ("origin/main", 1));
    // The task's commit now sits on the teammate's: both files, linear history.
    assert_eq!(run_git(&r.worktree, &["rev-parse", "HEAD"]), to);
    assert_eq!(run_git(&r.worktree, &["rev-parse", "HEAD~1"]), theirs);
    assert_eq!(
        run_git(&r.worktree, &["log", "--format=%s"]),
        "task's work\nteammate's work\nfirst"
    );
    assert!(r.worktree.join("CHANGELOG").exists() && r.worktree.join("notes.md").exists());
    assert_eq!(run_git(&r.worktree, &["status", "--porcelain"]), "");
    // The channel's checkout fetched but did not move.
    assert_eq!(run_git(&r.checkout, &["log", "--format=%s", "-1"]), "first");
}

#[test]
fn a_worktree_with_no_commit_of_its_own_is_fast_forwarded() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    let theirs = commit(&r.teammate, "CHANGELOG", "v2\n", "teammate's work");
    run_git(&r.teammate, &["push", "-q", "origin", "main"]);
    assert_eq!(
        update(&r.checkout, &r.worktree).unwrap(),
        Updated::FastForwarded {
            onto: "origin/main".into(),
            to: theirs.clone()
        }
    );
    assert_eq!(run_git(&r.worktree, &["rev-parse", "HEAD"]), theirs);
    assert_eq!(
        std::fs::read_to_string(r.worktree.join("CHANGELOG")).unwrap(),
        "v2\n"
    );
    assert_eq!(run_git(&r.worktree, &["status", "--porcelain"]), "");
}

#[test]
fn uncommitted_changes_and_conflicts_leave_the_worktree_as_it_was() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    let mine = commit(&r.worktree, "README", "mine\n", "task's edit");
    commit(&r.teammate, "README", "theirs\n", "teammate's edit");
    run_git(&r.teammate, &["push", "-q", "origin", "main"]);

    std::fs::write(r.worktree.join("README"), "half done\n").unwrap();
    let e = update(&r.checkout, &r.worktree).unwrap_err();
    assert!(
        matches!(&e, WorktreeError::Uncommitted { files, .. } if files == "README"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(r.worktree.join("README")).unwrap(),
        "half done\n"
    );

    run_git(&r.worktree, &["checkout", "-q", "--", "README"]);
    let e = update(&r.checkout, &r.worktree).unwrap_err();
    assert!(
        matches!(&e, WorktreeError::Conflict { files, onto } if files == "README" && onto == "origin/main"),
        "{e}"
    );
    assert!(e.to_string().contains("conflict in README"), "{e}");
    // Aborted: the branch where it was, no rebase in progress, a clean tree.
    assert_eq!(run_git(&r.worktree, &["rev-parse", "HEAD"]), mine);
    assert_eq!(run_git(&r.worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        run_git(&r.worktree, &["branch", "--show-current"]),
        "loop/task-1"
    );
}

#[test]
fn a_checkout_without_origin_or_branch_is_refused_by_name() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    run_git(&r.checkout, &["remote", "remove", "origin"]);
    assert!(matches!(
        update(&r.checkout, &r.worktree),
        Err(WorktreeError::NoOrigin)
    ));
    run_git(
        &r.checkout,
        &["remote", "add", "origin", r.origin.to_str().unwrap()],
    );
    run_git(&r.checkout, &["checkout", "-q", "--detach"]);
    assert!(matches!(
        update(&r.checkout, &r.worktree),
        Err(WorktreeError::NoBranch)
    ));
    let nothing = TempDir::new().unwrap();
    let e = make(nothing.path(), "x", &nothing.path().join("x")).unwrap_err();
    assert!(matches!(e, WorktreeError::NotACheckout { .. }), "{e}");
}

#[test]
fn removing_takes_the_files_the_registration_and_the_branch() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    commit(&r.worktree, "notes.md", "x\n", "task's work");
    remove(&r.checkout, "task-1", &r.worktree).unwrap();
    assert!(!r.worktree.exists());
    assert!(!exists(&r.checkout, "task-1", &r.worktree).unwrap());
    let list = run_git(&r.checkout, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains("task-1"), "{list}");
    assert_eq!(run_git(&r.checkout, &["branch", "--list", "loop/*"]), "");
    // Removing again is no error; a new one starts from the checkout's HEAD, not the old branch.
    remove(&r.checkout, "task-1", &r.worktree).unwrap();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    assert!(!r.worktree.join("notes.md").exists());
}

#[test]
fn a_worktree_left_behind_is_replaced_by_a_new_one() {
    let r = repos();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    commit(&r.worktree, "notes.md", "old\n", "old run");
    // Its files gone by hand, its registration left: made again all the same.
    std::fs::remove_dir_all(&r.worktree).unwrap();
    let made = make(&r.checkout, "task-1", &r.worktree).unwrap();
    assert_eq!(made.commit, run_git(&r.checkout, &["rev-parse", "HEAD"]));
    assert!(exists(&r.checkout, "task-1", &r.worktree).unwrap());
    assert!(!r.worktree.join("notes.md").exists());
}

#[test]
fn the_repositorys_hooks_do_not_run() {
    let r = repos();
    let marker = r.checkout.join("hook-ran");
    let hook = r.checkout.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    commit(&r.teammate, "CHANGELOG", "v2\n", "teammate's work");
    run_git(&r.teammate, &["push", "-q", "origin", "main"]);
    update(&r.checkout, &r.worktree).unwrap();
    assert!(!marker.exists(), "a hook of the checkout ran");
}

/// What a project can leave in its checkout and on its volume is refused with a reason,
/// never a panic: a `.git` that points nowhere, a file where the worktree goes, a worktree
/// folder that is a link out of the volume (removed as the link, not followed).
#[test]
fn a_hostile_checkout_or_volume_is_refused_or_contained() {
    let r = repos();
    let fake = r.checkout.parent().unwrap().join("fake");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join(".git"), "gitdir: /nowhere/at/all\n").unwrap();
    let e = make(&fake, "t", &fake.join("wt")).unwrap_err();
    assert!(matches!(e, WorktreeError::NotACheckout { .. }), "{e}");

    std::fs::create_dir_all(r.worktree.parent().unwrap()).unwrap();
    std::fs::write(&r.worktree, "a file, not a folder").unwrap();
    let e = make(&r.checkout, "task-1", &r.worktree).unwrap_err();
    assert!(
        e.to_string().contains("task-1") || e.to_string().contains("removing"),
        "{e}"
    );

    // A link where the worktree goes: removed as a link; what it points at is untouched.
    let outside = TempDir::new().unwrap();
    std::fs::write(outside.path().join("keep"), "mine").unwrap();
    std::fs::remove_file(&r.worktree).unwrap();
    std::os::unix::fs::symlink(outside.path(), &r.worktree).unwrap();
    make(&r.checkout, "task-1", &r.worktree).unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep")).unwrap(),
        "mine"
    );
    assert!(std::fs::symlink_metadata(&r.worktree).unwrap().is_dir());
}
