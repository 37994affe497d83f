//! Who a container's process runs as, when the stand-in runs as root and is asked to play
//! `runAsUser` (make dev: a plugin under the gate must not run as root, and the gate refuses
//! to). A kubelet gives the Pod's volumes to `fsGroup`; here the folders that play them are
//! handed to the container's uid and group, and the process is started as that uid, with
//! the group and `fsGroup` as its groups. Without `runAsUser` the process runs as we do.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

/// A process's uid, gid and supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The container's user by its securityContext, then the Pod's (None: no runAsUser).
pub fn user(pod: &Pod, container: &Container) -> Option<User> {
    let pod_ctx = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let ctx = container.security_context.as_ref();
    let uid = ctx
        .and_then(|c| c.run_as_user)
        .or_else(|| pod_ctx.and_then(|c| c.run_as_user))?;
    let gid = ctx
        .and_then(|c| c.run_as_group)
        .or_else(|| pod_ctx.and_then(|c| c.run_as_group))
        .unwrap_or(0);
    let mut groups = vec![gid as u32];
    if let Some(fs) = pod_ctx.and_then(|c| c.fs_group)
        && fs as u32 != gid as u32
    {
        groups.push(fs as u32);
    }
    Some(User {
        uid: uid as u32,
        gid: gid as u32,
        groups,
    })
}

/// Hands `dir` and everything under it to `user` (symbolic links themselves, not their targets).
pub fn give(dir: &Path, user: &User) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(user.uid), Some(user.gid))?;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            give(&entry?.path(), user)?;
        }
    }
    Ok(())
}

/// Whether this process can switch users.
/// `program` where any uid can run it: the program itself when every folder above it lets
/// others through, else a hard link (or a copy) under `programs`, one folder per program path
/// (the build's folder may sit under a home only root can enter).
pub fn runnable_by_anyone(program: &Path, programs: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // Absolute: the container's process starts in a folder of its own.
    let program = &std::path::absolute(program)?;
    let programs = &std::path::absolute(programs)?;
    let open = program
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if open {
        return Ok(program.to_path_buf());
    }
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        program.hash(&mut h);
        format!("{:016x}", h.finish())
    };
    let dir = programs.join(key);
    std::fs::create_dir_all(&dir)?;
    for d in [programs, dir.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
    }
    let target = dir.join(program.file_name().unwrap_or_default());
    let fresh = match (std::fs::metadata(&target), std::fs::metadata(program)) {
        (Ok(t), Ok(p)) => t.len() == p.len() && t.modified().ok() == p.modified().ok(),
        _ => false,
    };
    if !fresh {
        let _ = std::fs::remove_file(&target);
        if std::fs::hard_link(program, &target).is_err() {
            std::fs::copy(program, &target)?;
        }
    }
    Ok(target)
}

pub fn can_switch() -> bool {
    // SAFETY: a plain call.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_linked_where_anyone_can_run_it_by_an_absolute_path() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("identity-{}", std::process::id()));
        let closed = root.join("closed");
        std::fs::create_dir_all(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let program = closed.join("prog");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A relative folder for the links (make dev's run folder is .dev/run).
        let cwd = std::env::current_dir().unwrap();
        let relative = pathdiff(&root.join("programs"), &cwd);
        let linked = runnable_by_anyone(&program, &relative).unwrap();
        assert!(linked.is_absolute(), "{}", linked.display());
        let real = std::fs::canonicalize(&linked).unwrap();
        assert!(
            real.starts_with(std::fs::canonicalize(root.join("programs")).unwrap()),
            "{}",
            real.display()
        );
        assert!(linked.exists());
        // Where everyone may go already, the program stays where it is.
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(runnable_by_anyone(&program, &relative).unwrap(), program);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// `path` relative to `base` (both absolute), through `..` as needed.
    fn pathdiff(path: &Path, base: &Path) -> PathBuf {
        let (p, b): (Vec<_>, Vec<_>) = (path.components().collect(), base.components().collect());
        let common = p.iter().zip(&b).take_while(|(a, b)| a == b).count();
        let mut out = PathBuf::new();
        for _ in common..b.len() {
            out.push("..");
        }
        for c in &p[common..] {
            out.push(c);
        }
        out
    }
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    #[test]
    fn the_container_wins_over_the_pod() {
        let pod = Pod {
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(1000),
                    run_as_group: Some(1001),
                    fs_group: Some(2000),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let plain = Container::default();
        assert_eq!(
            user(&pod, &plain),
            Some(User {
                uid: 1000,
                gid: 1001,
                groups: vec![1001, 2000]
            })
        );
        let own = Container {
            security_context: Some(SecurityContext {
                run_as_user: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(user(&pod, &own).unwrap().uid, 7);
        assert_eq!(user(&Pod::default(), &plain), None);
    }
}
