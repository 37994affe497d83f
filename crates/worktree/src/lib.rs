//! The git worktrees a worktree task runs in (the reference's Tasks panel: "With Worktree on,
//! the action runs in a worktree thread made on the first run, its later runs first rebased
//! onto the origin branch when Update before run is on").
//!
//! A worktree is a linked working tree of the channel's checkout, on a branch of its own
//! (`loop/<name>`), made from the checkout's HEAD. [`update`] fetches the checkout's origin
//! and rebases the worktree's branch onto the origin branch the checkout's branch follows.
//! [`remove`] takes a worktree away (its files, its registration and its branch).
//!
//! The checkout is the project's, so it is read as hostile: libgit2 runs no hooks and no
//! filter a repository configures, and only the file system and git's own protocol are built
//! in (no https, no ssh), each network read bounded by [`SERVER_TIMEOUT`]. The files on a
//! volume belong to whoever wrote them (the plugins' user): the owner check git does against
//! the process's own user is off, as it is for any tool that works on another user's volume.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use git2::{
    BranchType, ErrorCode, FetchOptions, Oid, RebaseOptions, Repository, Signature,
    WorktreeAddOptions, WorktreePruneOptions,
};

/// How long a read from the origin may wait before the fetch fails.
pub const SERVER_TIMEOUT: Duration = Duration::from_secs(30);

/// The branch a worktree named `name` is on.
pub fn branch_name(name: &str) -> String {
    format!("loop/{name}")
}

/// Why a worktree could not be made, updated or removed: what was being done, and git's words.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("{path} is not a git checkout: {source}")]
    NotACheckout {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("the checkout at {path} has no commit to make a worktree from")]
    NoCommit { path: PathBuf },
    #[error(
        "the checkout has no remote named origin: Update before run rebases onto the origin branch"
    )]
    NoOrigin,
    #[error("the checkout's HEAD is on no branch, so there is no origin branch to rebase onto")]
    NoBranch,
    #[error("the origin has no branch {branch} to rebase onto")]
    NoOriginBranch { branch: String },
    #[error("the worktree at {path} has uncommitted changes ({files}); it was not rebased")]
    Uncommitted { path: PathBuf, files: String },
    #[error(
        "rebasing onto {onto} stopped at a conflict in {files}; the worktree is left as it was"
    )]
    Conflict { onto: String, files: String },
    #[error("{doing}: {source}")]
    Git {
        doing: String,
        #[source]
        source: git2::Error,
    },
    #[error("{doing} {path}: {source}")]
    Io {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, WorktreeError>;

fn git(doing: impl Into<String>) -> impl FnOnce(git2::Error) -> WorktreeError {
    let doing = doing.into();
    move |source| WorktreeError::Git { doing, source }
}

/// libgit2's process-wide settings: no owner check (see the module's docs), and bounded reads
/// from a server.
fn settings() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let timeout = SERVER_TIMEOUT.as_millis() as i32;
        // SAFETY: libgit2's global options are set once, before any other call of this
        // module reaches libgit2 (every public function calls this first).
        unsafe {
            let _ = git2::opts::set_verify_owner_validation(false);
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(timeout);
            let _ = git2::opts::set_server_timeout_in_milliseconds(timeout);
        }
    });
}

fn open(path: &Path) -> Result<Repository> {
    settings();
    Repository::open(path).map_err(|source| WorktreeError::NotACheckout {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether the checkout has a worktree `name` whose files are at `path`.
pub fn exists(checkout: &Path, name: &str, path: &Path) -> Result<bool> {
    let repo = open(checkout)?;
    let Ok(worktree) = repo.find_worktree(name) else {
        return Ok(false);
    };
    Ok(worktree.validate().is_ok() && same_dir(worktree.path(), path))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canonical(a) == canonical(b)
}

/// A worktree made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Made {
    pub branch: String,
    /// The commit it starts at: the checkout's HEAD.
    pub commit: String,
}

/// Makes the worktree `name` at `path`, on a new branch `loop/<name>` at the checkout's HEAD
/// commit. One left behind under that name (its thread deleted) is removed first, with its
/// branch: a new worktree starts from the checkout as it is now.
pub fn make(checkout: &Path, name: &str, path: &Path) -> Result<Made> {
    remove(checkout, name, path)?;
    let repo = open(checkout)?;
    let head =
        repo.head()
            .and_then(|h| h.peel_to_commit())
            .map_err(|_| WorktreeError::NoCommit {
                path: checkout.to_path_buf(),
            })?;
    let branch_name = branch_name(name);
    let branch = repo
        .branch(&branch_name, &head, true)
        .map_err(git(format!("making the branch {branch_name}")))?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| WorktreeError::Io {
            doing: "making the folder",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let reference = branch.into_reference();
    let mut options = WorktreeAddOptions::new();
    options.reference(Some(&reference));
    repo.worktree(name, path, Some(&options))
        .map_err(git(format!(
            "making the worktree {name} at {}",
            path.display()
        )))?;
    Ok(Made {
        branch: branch_name,
        commit: head.id().to_string(),
    })
}

/// Removes the worktree `name` (its files at `path`, its registration in the checkout and its
/// branch). Nothing to remove is no error.
pub fn remove(checkout: &Path, name: &str, path: &Path) -> Result<()> {
    let repo = open(checkout)?;
    if let Ok(worktree) = repo.find_worktree(name) {
        let mut prune = WorktreePruneOptions::new();
        prune.valid(true).locked(true).working_tree(true);
        worktree
            .prune(Some(&mut prune))
            .map_err(git(format!("removing the worktree {name}")))?;
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(WorktreeError::Io {
                doing: "removing",
                path: path.to_path_buf(),
                source,
            });
        }
    }
    if let Ok(mut branch) = repo.find_branch(&branch_name(name), BranchType::Local) {
        branch
            .delete()
            .map_err(git(format!("deleting the branch {}", branch_name(name))))?;
    }
    Ok(())
}

/// What [`update`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Updated {
    /// The worktree's branch already holds the origin branch.
    UpToDate { onto: String },
    /// It had no commit of its own: moved to the origin branch.
    FastForwarded { onto: String, to: String },
    /// Its own commits replayed on the origin branch.
    Rebased {
        onto: String,
        to: String,
        commits: usize,
    },
}

/// Fetches the checkout's origin, then rebases the worktree's branch onto the origin branch
/// the checkout's branch follows (its upstream, else the origin's branch of the same name).
/// A worktree with uncommitted changes, or a rebase that meets a conflict, is left as it was.
pub fn update(checkout: &Path, worktree: &Path) -> Result<Updated> {
    let main = open(checkout)?;
    let onto = origin_branch(&main)?;
    let mut remote = main
        .find_remote("origin")
        .map_err(|_| WorktreeError::NoOrigin)?;
    let mut fetch = FetchOptions::new();
    fetch.download_tags(git2::AutotagOption::None);
    remote
        .fetch::<&str>(&[], Some(&mut fetch), None)
        .map_err(git("fetching origin"))?;
    drop(remote);
    let target = main
        .find_reference(&format!("refs/remotes/{onto}"))
        .and_then(|r| r.peel_to_commit())
        .map_err(|_| WorktreeError::NoOriginBranch {
            branch: onto.clone(),
        })?
        .id();
    let repo = open(worktree)?;
    refuse_uncommitted(&repo, worktree)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("reading the worktree's HEAD"))?
        .id();
    if head == target || repo.graph_descendant_of(head, target).unwrap_or(false) {
        return Ok(Updated::UpToDate { onto });
    }
    if repo.graph_descendant_of(target, head).unwrap_or(false) {
        fast_forward(&repo, target)?;
        return Ok(Updated::FastForwarded {
            onto,
            to: target.to_string(),
        });
    }
    let commits = rebase(&repo, target, &onto)?;
    let to = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("reading the rebased HEAD"))?
        .id()
        .to_string();
    Ok(Updated::Rebased { onto, to, commits })
}

/// `origin/<branch>`: the upstream of the checkout's branch when it is one of origin's, else
/// origin's branch of the same name.
fn origin_branch(main: &Repository) -> Result<String> {
    if main.find_remote("origin").is_err() {
        return Err(WorktreeError::NoOrigin);
    }
    let head = main.head().map_err(|_| WorktreeError::NoBranch)?;
    if !head.is_branch() {
        return Err(WorktreeError::NoBranch);
    }
    let name = head
        .shorthand()
        .map_err(|_| WorktreeError::NoBranch)?
        .to_string();
    let upstream = main
        .find_branch(&name, BranchType::Local)
        .ok()
        .and_then(|b| b.upstream().ok())
        .and_then(|u| u.name().ok().flatten().map(str::to_string))
        .filter(|u| u.starts_with("origin/"));
    Ok(upstream.unwrap_or(format!("origin/{name}")))
}

fn refuse_uncommitted(repo: &Repository, path: &Path) -> Result<()> {
    let mut options = git2::StatusOptions::new();
    options.include_untracked(false).include_ignored(false);
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(git("reading the worktree's status"))?;
    if statuses.is_empty() {
        return Ok(());
    }
    Err(WorktreeError::Uncommitted {
        path: path.to_path_buf(),
        files: list(
            statuses
                .iter()
                .filter_map(|s| s.path().ok().map(str::to_string)),
        ),
    })
}

/// At most five names, then how many more.
fn list(names: impl Iterator<Item = String>) -> String {
    let names: Vec<String> = names.collect();
    let mut shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        shown.push_str(&format!(" and {} more", names.len() - 5));
    }
    shown
}

fn fast_forward(repo: &Repository, target: Oid) -> Result<()> {
    let commit = repo
        .find_commit(target)
        .map_err(git("reading the origin commit"))?;
    repo.checkout_tree(
        commit.as_object(),
        Some(git2::build::CheckoutBuilder::new().safe()),
    )
    .map_err(git("checking out the origin commit"))?;
    repo.head()
        .map_err(git("reading the worktree's HEAD"))?
        .set_target(target, "loop-plugins: fast-forward onto the origin branch")
        .map_err(git("moving the worktree's branch"))?;
    Ok(())
}

/// Who the replayed commits name as their committer: the repository's own `user.*` if set.
fn committer(repo: &Repository) -> Result<Signature<'static>> {
    repo.signature()
        .or_else(|_| Signature::now("Loop plugins", "loop-plugins@localhost"))
        .map_err(git("making the committer's signature"))
}

fn rebase(repo: &Repository, target: Oid, onto: &str) -> Result<usize> {
    let head = repo.head().map_err(git("reading the worktree's HEAD"))?;
    let branch = repo
        .reference_to_annotated_commit(&head)
        .map_err(git("reading the worktree's branch"))?;
    let upstream = repo
        .find_annotated_commit(target)
        .map_err(git("reading the origin commit"))?;
    let signature = committer(repo)?;
    let mut options = RebaseOptions::new();
    let mut rebase = repo
        .rebase(Some(&branch), Some(&upstream), None, Some(&mut options))
        .map_err(git(format!("starting the rebase onto {onto}")))?;
    let mut commits = 0;
    while let Some(step) = rebase.next() {
        if let Err(e) = step {
            let _ = rebase.abort();
            return Err(git(format!("rebasing onto {onto}"))(e));
        }
        let index = repo.index().map_err(git("reading the index"))?;
        if index.has_conflicts() {
            let files = list(
                index
                    .conflicts()
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                    .map(|e| String::from_utf8_lossy(&e.path).into_owned()),
            );
            let _ = rebase.abort();
            return Err(WorktreeError::Conflict {
                onto: onto.to_string(),
                files,
            });
        }
        match rebase.commit(None, &signature, None) {
            Ok(_) => commits += 1,
            // The commit's change is already on the origin branch: nothing to replay.
            Err(e) if e.code() == ErrorCode::Applied => {}
            Err(e) => {
                let _ = rebase.abort();
                return Err(git(format!("rebasing onto {onto}"))(e));
            }
        }
    }
    rebase
        .finish(Some(&signature))
        .map_err(git(format!("finishing the rebase onto {onto}")))?;
    Ok(commits)
}

#[cfg(test)]
mod tests;
