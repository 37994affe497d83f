//! Which local program stands in for which image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// A local program that plays an image: its entrypoint and default arguments, as an image's
/// ENTRYPOINT and CMD would be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalImage {
    /// The program run in place of the image's entrypoint (and of `command[0]`).
    pub program: PathBuf,
    /// Arguments after the program that the image's ENTRYPOINT would carry (kept unless the Pod
    /// sets `command`).
    pub entrypoint_args: Vec<String>,
    /// The image's CMD: used when the Pod sets neither `command` nor `args`.
    pub default_args: Vec<String>,
    /// Where the program is inside the image (its ENTRYPOINT's path, `/echo-plugin`): a
    /// command word naming it is played by the program (see [`LocalImage::process`]).
    pub image_path: Option<String>,
}

impl LocalImage {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            entrypoint_args: Vec::new(),
            default_args: Vec::new(),
            image_path: None,
        }
    }

    /// Where the program is inside the image.
    pub fn in_image_at(mut self, path: &str) -> Self {
        self.image_path = Some(path.to_string());
        self
    }

    /// The program to run and its arguments. Usually the image's program with
    /// [`LocalImage::argv`]; but when the command's first word is a file the Pod put in one of
    /// its volumes (`in_volume` says; an init container copied it there, as the gate's does),
    /// that file runs, with the rest of the command and args, and each word naming the image's
    /// own program ([`LocalImage::in_image_at`]) played by the local program.
    pub fn process(
        &self,
        command: &[String],
        args: &[String],
        in_volume: impl Fn(&str) -> bool,
    ) -> (PathBuf, Vec<String>) {
        match command.split_first() {
            Some((first, rest)) if in_volume(first) => {
                let play = |w: &String| match &self.image_path {
                    Some(p) if p == w => self.program.to_string_lossy().into_owned(),
                    _ => w.clone(),
                };
                let argv = rest.iter().chain(args).map(play).collect();
                (PathBuf::from(first), argv)
            }
            _ => (self.program.clone(), self.argv(command, args)),
        }
    }

    /// Arguments the image's ENTRYPOINT carries after the program.
    pub fn entrypoint_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.entrypoint_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The image's CMD.
    pub fn default_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.default_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The arguments to run with, by Kubernetes' rules: `command` replaces ENTRYPOINT (its
    /// first word is played by the program) and drops CMD; `args` replaces CMD.
    pub fn argv(&self, command: &[String], args: &[String]) -> Vec<String> {
        let mut argv = match command.split_first() {
            Some((_, rest)) => rest.to_vec(),
            None => self.entrypoint_args.clone(),
        };
        if !args.is_empty() {
            argv.extend(args.iter().cloned());
        } else if command.is_empty() {
            argv.extend(self.default_args.iter().cloned());
        }
        argv
    }
}

/// Images and the local programs that play them, shared between the caller and the kubelet so
/// tests can add images while the cluster runs.
#[derive(Clone, Debug, Default)]
pub struct ImageMap {
    inner: Arc<RwLock<BTreeMap<String, LocalImage>>>,
}

impl ImageMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Plays `image` with `local`. The image is matched by its repository (the part before a
    /// tag or digest), so `example.com/echo` covers `example.com/echo:1.0` and
    /// `example.com/echo@sha256:...`.
    pub fn insert(&self, image: &str, local: LocalImage) {
        self.inner
            .write()
            .expect("the image map lock is never poisoned")
            .insert(repository(image).to_string(), local);
    }

    /// The local program for `image`, if one was given.
    pub fn resolve(&self, image: &str) -> Option<LocalImage> {
        self.inner
            .read()
            .expect("the image map lock is never poisoned")
            .get(repository(image))
            .cloned()
    }

    /// The repositories mapped, for messages.
    pub fn repositories(&self) -> Vec<String> {
        self.inner
            .read()
            .expect("the image map lock is never poisoned")
            .keys()
            .cloned()
            .collect()
    }
}

/// An image reference without its digest and tag: `host:5000/a/b:1@sha256:..` → `host:5000/a/b`.
pub fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(name, _)| name);
    match image.rfind(':') {
        // A colon after the last slash starts a tag; one before it is a registry's port.
        Some(colon) if !image[colon..].contains('/') => &image[..colon],
        _ => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_drops_tags_and_digests_but_not_ports() {
        assert_eq!(repository("echo"), "echo");
        assert_eq!(repository("echo:1.0"), "echo");
        assert_eq!(repository("ex.com/a/echo@sha256:abc"), "ex.com/a/echo");
        assert_eq!(
            repository("ex.com:5000/echo:1@sha256:abc"),
            "ex.com:5000/echo"
        );
        assert_eq!(repository("ex.com:5000/echo"), "ex.com:5000/echo");
    }

    #[test]
    fn argv_follows_kubernetes_rules() {
        let image = LocalImage::new("/bin/py")
            .entrypoint_args(["-m", "http.server"])
            .default_args(["8000"]);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(image.argv(&[], &[]), s(&["-m", "http.server", "8000"]));
        assert_eq!(
            image.argv(&[], &s(&["9000"])),
            s(&["-m", "http.server", "9000"])
        );
        assert_eq!(image.argv(&s(&["py", "-c", "x"]), &[]), s(&["-c", "x"]));
        assert_eq!(image.argv(&s(&["py", "-c"]), &s(&["x"])), s(&["-c", "x"]));
    }

    #[test]
    fn a_program_from_a_volume_runs_with_the_images_own_played() {
        let image = LocalImage::new("/build/echo-plugin").in_image_at("/echo-plugin");
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let command = s(&[
            "/run/pod/gate/loop-plugins",
            "gate",
            "--",
            "/echo-plugin",
            "-v",
        ]);
        let (program, argv) = image.process(&command, &[], |p| p.starts_with("/run/pod/"));
        assert_eq!(program, PathBuf::from("/run/pod/gate/loop-plugins"));
        assert_eq!(argv, s(&["gate", "--", "/build/echo-plugin", "-v"]));
        // Otherwise the image's program plays the command, as before.
        let (program, argv) = image.process(&s(&["/echo-plugin", "-v"]), &[], |_| false);
        assert_eq!(program, PathBuf::from("/build/echo-plugin"));
        assert_eq!(argv, s(&["-v"]));
    }

    #[test]
    fn images_resolve_by_repository() {
        let map = ImageMap::new();
        map.insert("ex.com/echo:dev", LocalImage::new("/bin/echo"));
        assert!(map.resolve("ex.com/echo@sha256:00").is_some());
        assert!(map.resolve("ex.com/other").is_none());
    }
}
